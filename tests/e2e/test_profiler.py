"""The database profiler, against MongoDB's documented behaviour.

Sources: https://www.mongodb.com/docs/manual/reference/command/profile/ (levels 0/1/2, slowms,
sampleRate, filter, the reply's `was`), https://www.mongodb.com/docs/manual/reference/database-profiler/
(the system.profile entry: op, ns, command, keysExamined, docsExamined, nreturned, ninserted,
nMatched, nModified, ndeleted, planSummary, millis, ts, client, user, responseLength) and
https://www.mongodb.com/docs/manual/reference/configuration-options/#operationprofiling-options
(operationProfiling.mode sets the level of every database).
"""
import pytest
from pymongo.errors import OperationFailure

from conftest import Server


def entries(db, **filt):
    return list(db.system.profile.find(filt).sort("ts", 1))


def test_level_2_profiles_every_operation_with_mongods_entry_shape(client):
    db = client.prof
    db.c.insert_one({"_id": 0})  # created before profiling starts
    r = db.command("profile", 2)
    assert r["was"] == 0 and r["slowms"] == 100 and r["sampleRate"] == 1.0
    db.c.insert_many([{"_id": i, "a": i} for i in range(1, 11)])
    db.c.create_index("a")
    assert len(list(db.c.find({"a": {"$gte": 5}}))) == 6
    db.c.update_many({"a": {"$lt": 3}}, {"$set": {"b": 1}})
    db.c.delete_one({"a": 10})
    list(db.c.aggregate([{"$match": {"a": 1}}]))
    db.command("dbStats")
    db.command("profile", 0)
    db.c.find_one()  # not profiled any more

    ins = entries(db, op="insert")
    assert len(ins) == 1 and ins[0]["ns"] == "prof.c" and ins[0]["ninserted"] == 10
    assert ins[0]["command"]["insert"] == "c"
    q = entries(db, op="query")
    assert len(q) == 1
    q = q[0]
    assert q["nreturned"] == 6 and q["keysExamined"] == 6 and q["docsExamined"] == 6
    assert q["planSummary"] == "IXSCAN { a: 1 }" and q["command"]["filter"] == {"a": {"$gte": 5}}
    for k in ("millis", "ts", "client", "user", "allUsers", "responseLength", "numYield", "protocol"):
        assert k in q, k
    assert q["millis"] >= 0 and q["responseLength"] > 0
    up = entries(db, op="update")[0]
    assert up["nMatched"] == 2 and up["nModified"] == 2 and up["planSummary"] == "IXSCAN { a: 1 }"
    assert entries(db, op="remove")[0]["ndeleted"] == 1
    cmds = {e["command"].get("aggregate") or next(iter(e["command"])) for e in entries(db, op="command")}
    assert {"c", "dbStats", "createIndexes", "profile"} <= cmds
    agg = [e for e in entries(db, op="command") if e["command"].get("aggregate") == "c"][0]
    assert agg["nreturned"] == 1 and agg["docsExamined"] == 1
    # system.profile is a capped collection (1 MiB, as mongod's).
    info = db.command("listCollections", filter={"name": "system.profile"})["cursor"]["firstBatch"][0]
    assert info["options"]["capped"] is True and info["options"]["size"] == 1024 * 1024
    # Nothing after level 0: the last query is the find above.
    assert len(entries(db, op="query")) == 1


def test_level_1_slowms_filter_and_sample_rate(client):
    db = client.prof1
    db.c.insert_many([{"i": i} for i in range(20)])
    # Nothing is slower than an hour: level 1 profiles nothing.
    r = db.command("profile", 1, slowms=3_600_000)
    assert r["was"] == 0
    list(db.c.find())
    assert entries(db) == []
    # slowms 0 but sampleRate 0: sampled out.
    db.command("profile", 1, slowms=0, sampleRate=0.0)
    list(db.c.find())
    assert entries(db) == []
    # slowms 0 and every operation sampled: everything is slow enough.
    db.command("profile", 1, slowms=0, sampleRate=1.0)
    db.c.insert_one({"i": 99})
    assert len(entries(db, op="insert")) == 1
    # A filter decides alone: only removes.
    r = db.command("profile", 1, filter={"op": "remove"})
    assert r["slowms"] == 0 and "note" in r
    db.c.insert_one({"i": 100})
    db.c.delete_one({"i": 100})
    assert len(entries(db, op="insert")) == 1 and len(entries(db, op="remove")) == 1
    r = db.command("profile", -1)
    assert r["was"] == 1 and r["filter"] == {"op": "remove"}
    db.command("profile", 0, filter="unset", slowms=100)
    assert "filter" not in db.command("profile", -1)
    # Bad arguments, as mongod refuses them.
    for bad in ({"profile": 3}, {"profile": "x"}, {"profile": 1, "sampleRate": 2.0},
                {"profile": 1, "filter": 5}, {"profile": 1, "bogus": 1}):
        with pytest.raises(OperationFailure):
            db.command(bad)


def test_config_mode_all_profiles_every_database(dbpath, tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("operationProfiling:\n  mode: all\n  slowOpThresholdMs: 50\n")
    s = Server(dbpath, ["--config", str(cfg)]).start()
    try:
        c = s.client()
        c.cfgprof.things.insert_one({"x": 1})
        r = c.cfgprof.command("profile", -1)
        assert r["was"] == 2 and r["slowms"] == 50
        assert len(list(c.cfgprof.system.profile.find({"op": "insert"}))) == 1
        c.close()
    finally:
        s.stop()
