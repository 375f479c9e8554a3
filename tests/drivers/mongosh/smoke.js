// mongosh smoke check through a flashdoc router, or against a replica set, where it also checks
// rs.status() and rs.conf() (scripts/driver-smoke.sh [--replset]): run as
// `mongosh URI --quiet --file smoke.js`; any failed check throws, and mongosh exits non-zero.
function eq(got, want, what) {
  if (got !== want) throw new Error(`${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
}
function ok(reply, what) {
  eq(reply.ok, 1, what);
}
const hello = db.adminCommand({ hello: 1 });
const isSet = hello.setName !== undefined;
if (isSet) {
  eq(hello.setName, "rs0", "hello.setName");
  const status = rs.status();
  eq(status.set, "rs0", "rs.status().set");
  eq(status.members.filter((m) => m.stateStr === "PRIMARY").length, 1, "one PRIMARY");
  eq(status.members.filter((m) => m.stateStr === "SECONDARY").length, 2, "two SECONDARY");
  eq(rs.conf().members.length, 3, "rs.conf() members");
} else {
  eq(hello.msg, "isdbgrid", "hello.msg");
  ok(db.adminCommand({ enableSharding: "shsmoke" }), "enableSharding");
  ok(db.adminCommand({ shardCollection: "shsmoke.c", key: { k: 1 } }), "shardCollection");
}
const c = db.getSiblingDB("shsmoke").c;
// Split before the inserts: the router's auto-split may split the chunk under them.
if (!isSet) ok(db.adminCommand({ split: "shsmoke.c", middle: { k: 50 } }), "split");
c.insertMany(Array.from({ length: 100 }, (_, i) => ({ k: i, g: i % 4 })));
eq(c.countDocuments({}), 100, "countDocuments");
eq(c.findOne({ k: 7 }).g, 3, "findOne");
eq(c.updateMany({ k: { $lt: 10 } }, { $set: { low: true } }).modifiedCount, 10, "updateMany");
eq(c.deleteMany({ k: { $gte: 90 } }).deletedCount, 10, "deleteMany");
const groups = c.aggregate([{ $group: { _id: "$g", n: { $sum: 1 } } }, { $sort: { _id: 1 } }]).toArray();
eq(groups.map((g) => g.n).join(","), "23,23,22,22", "$group");
print("mongosh: ok");
