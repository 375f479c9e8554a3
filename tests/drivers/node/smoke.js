// Node.js driver smoke check through a flashdoc router (scripts/driver-smoke.sh).
const { MongoClient } = require("mongodb");
const assert = require("assert");

async function main() {
  const client = new MongoClient(process.argv[2], { serverSelectionTimeoutMS: 20000 });
  await client.connect();
  const hello = await client.db("admin").command({ hello: 1 });
  assert.strictEqual(hello.msg, "isdbgrid");
  await client.db("admin").command({ enableSharding: "node" });
  await client.db("admin").command({ shardCollection: "node.c", key: { k: 1 } });
  const c = client.db("node").collection("c");
  await c.insertMany(Array.from({ length: 100 }, (_, i) => ({ k: i, v: i * 2 })));
  await client.db("admin").command({ split: "node.c", middle: { k: 50 } });
  assert.strictEqual(await c.countDocuments({}), 100);
  assert.strictEqual((await c.findOne({ k: 7 })).v, 14);
  assert.strictEqual((await c.updateOne({ k: 7 }, { $inc: { v: 1 } })).modifiedCount, 1);
  assert.strictEqual((await c.deleteMany({ k: { $gte: 90 } })).deletedCount, 10);
  const sorted = await c.find({}).sort({ k: -1 }).limit(3).toArray();
  assert.deepStrictEqual(sorted.map((d) => d.k), [89, 88, 87]);
  await client.close();
  console.log("node driver: ok");
}

main().catch((e) => { console.error(e); process.exit(1); });
