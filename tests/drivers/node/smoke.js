// Node.js driver smoke check through a flashdoc router, or against a replica set
// (scripts/driver-smoke.sh [--replset]).
const { MongoClient } = require("mongodb");
const assert = require("assert");

async function main() {
  const client = new MongoClient(process.argv[2], { serverSelectionTimeoutMS: 20000 });
  await client.connect();
  const hello = await client.db("admin").command({ hello: 1 });
  const isSet = hello.setName !== undefined;
  if (isSet) {
    assert.strictEqual(hello.setName, "rs0");
    assert.strictEqual(hello.hosts.length, 3);
    assert.strictEqual(hello.isWritablePrimary, true);
  } else {
    assert.strictEqual(hello.msg, "isdbgrid");
    await client.db("admin").command({ enableSharding: "node" });
    await client.db("admin").command({ shardCollection: "node.c", key: { k: 1 } });
  }
  const c = client.db("node").collection("c");
  await c.insertMany(Array.from({ length: 100 }, (_, i) => ({ k: i, v: i * 2 })));
  if (!isSet) await client.db("admin").command({ split: "node.c", middle: { k: 50 } });
  assert.strictEqual(await c.countDocuments({}), 100);
  assert.strictEqual((await c.findOne({ k: 7 })).v, 14);
  assert.strictEqual((await c.updateOne({ k: 7 }, { $inc: { v: 1 } })).modifiedCount, 1);
  assert.strictEqual((await c.deleteMany({ k: { $gte: 90 } })).deletedCount, 10);
  const sorted = await c.find({}).sort({ k: -1 }).limit(3).toArray();
  assert.deepStrictEqual(sorted.map((d) => d.k), [89, 88, 87]);
  if (isSet) {
    // The majority writes reach a secondary, which the driver reads from when asked.
    const onSecondary = client.db("node").collection("c", { readPreference: "secondary" });
    const deadline = Date.now() + 20000;
    while ((await onSecondary.countDocuments({})) !== 90) {
      assert.ok(Date.now() < deadline, "a secondary holds the 90 documents");
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  await client.close();
  console.log("node driver: ok");
}

main().catch((e) => { console.error(e); process.exit(1); });
