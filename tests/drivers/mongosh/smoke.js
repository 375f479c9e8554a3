// mongosh smoke check through a flashdoc router (scripts/driver-smoke.sh): run as
// `mongosh URI --quiet --file smoke.js`; any failed assertion exits non-zero.
const hello = db.adminCommand({ hello: 1 });
assert.eq(hello.msg, "isdbgrid");
assert.commandWorked(db.adminCommand({ enableSharding: "shsmoke" }));
assert.commandWorked(db.adminCommand({ shardCollection: "shsmoke.c", key: { k: 1 } }));
const c = db.getSiblingDB("shsmoke").c;
c.insertMany(Array.from({ length: 100 }, (_, i) => ({ k: i, g: i % 4 })));
assert.commandWorked(db.adminCommand({ split: "shsmoke.c", middle: { k: 50 } }));
assert.eq(c.countDocuments({}), 100);
assert.eq(c.findOne({ k: 7 }).g, 3);
assert.eq(c.updateMany({ k: { $lt: 10 } }, { $set: { low: true } }).modifiedCount, 10);
assert.eq(c.deleteMany({ k: { $gte: 90 } }).deletedCount, 10);
const groups = c.aggregate([{ $group: { _id: "$g", n: { $sum: 1 } } }, { $sort: { _id: 1 } }]).toArray();
assert.eq(groups.map((g) => g.n).join(","), "23,23,22,22");
print("mongosh: ok");
