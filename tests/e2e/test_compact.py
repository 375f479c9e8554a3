"""`compact` (MongoDB 7/8: https://www.mongodb.com/docs/manual/reference/command/compact/):
the collection's and its indexes' files are rewritten densely and swapped in, so the files
shrink on disk; every document and index entry stays, also after a restart."""
import glob
import os

import pymongo
import pytest
from bson import SON

import conftest
from conftest import Server


def table_bytes(dbpath):
    """The bytes of the files that hold the tables: the copy-on-write engine's table files, or
    the in-place engine's data files."""
    pattern = "mmapv1.*" if conftest.ENGINE == "mmapv1" else "*.fdb"
    return sum(os.path.getsize(f) for f in glob.glob(os.path.join(dbpath, pattern)))


def fill_and_delete_most(db, n=20000):
    # Incompressible-ish payloads, so the collection file is several MB under snappy.
    docs = [{"_id": i, "k": i % 97, "s": os.urandom(120).hex()} for i in range(n)]
    db.c.insert_many(docs)
    db.c.create_index("k")
    # A checkpoint writes the full pages; the deletes then leave them mostly empty.
    db.command("fsync")
    db.c.delete_many({"_id": {"$mod": [10, 1]}})
    db.c.delete_many({"_id": {"$mod": [10, 2]}})
    db.c.delete_many({"_id": {"$not": {"$mod": [10, 0]}}})
    db.command("fsync")
    return {d["_id"]: d for d in docs if d["_id"] % 10 == 0}


def check_intact(db, kept):
    got = {d["_id"]: d for d in db.c.find()}
    assert got == kept
    # Every index entry: each k through the index finds exactly its documents.
    for k in range(97):
        ids = sorted(d["_id"] for d in db.c.find({"k": k}).hint("k_1"))
        assert ids == sorted(i for i, d in kept.items() if d["k"] == k)
    v = db.command("validate", "c")
    assert v["valid"] and v["nrecords"] == len(kept), v


def test_compact_shrinks_the_files_and_keeps_every_document_and_index_entry(dbpath):
    s = Server(dbpath).start()
    c = s.client()
    db = c.t
    kept = fill_and_delete_most(db)
    stats = db.command("collStats", "c")
    disk_before = table_bytes(dbpath)

    est = db.command(SON([("compact", "c"), ("dryRun", True), ("freeSpaceTargetMB", 1)]))
    assert est["estimatedBytesFreed"] > 0 and "bytesFreed" not in est
    assert table_bytes(dbpath) == disk_before, "a dry run changes nothing"

    r = db.command(SON([("compact", "c"), ("freeSpaceTargetMB", 1), ("force", True)]))
    assert r["ok"] == 1.0 and r["bytesFreed"] > 0, r
    # In the lab's terms: what the rewrite wrote, and the old files removed (trimmed).
    lab = r["flashdoc"]
    assert lab["tablesRewritten"] >= 1
    assert 0 < lab["bytesWritten"] < lab["bytesTrimmed"], r
    # The estimate is a dry run of the same copy.
    assert abs(est["estimatedBytesFreed"] - r["bytesFreed"]) <= 0.1 * r["bytesFreed"] + 65536, (est, r)
    after = db.command("collStats", "c")
    assert after["storageSize"] * 3 < stats["storageSize"], (stats["storageSize"], after["storageSize"])
    assert after["totalIndexSize"] <= stats["totalIndexSize"]
    disk_after = table_bytes(dbpath)
    if conftest.ENGINE == "mmapv1":
        # MMAPv1's compact hands the old extents to the database's free extent list, for any
        # table to reuse; its data files never shrink. collStats' storageSize (the extents the
        # collection holds) is what shrank, above.
        assert disk_after >= disk_before, (disk_before, disk_after, r)
    else:
        assert disk_before - disk_after >= 0.9 * r["bytesFreed"], (disk_before, disk_after, r)
    check_intact(db, kept)

    # Writes after the compaction land in the new files.
    db.c.insert_one({"_id": -1, "k": 5, "s": "after"})
    kept[-1] = {"_id": -1, "k": 5, "s": "after"}
    c.close()
    s.stop()
    s = Server(dbpath).start()
    c = s.client()
    check_intact(c.t, kept)
    assert table_bytes(dbpath) <= disk_after + 256 * 1024
    c.close()
    s.stop()


def test_compact_below_the_free_space_target_rewrites_nothing(client):
    db = client.t
    db.small.insert_many([{"_id": i} for i in range(100)])
    db.small.delete_many({"_id": {"$lt": 90}})
    # The default target is 20 MB, which a few KB of free space does not reach.
    assert db.command("compact", "small")["bytesFreed"] == 0
    assert db.command(SON([("compact", "small"), ("dryRun", True)]))["estimatedBytesFreed"] == 0
    assert sorted(d["_id"] for d in db.small.find()) == list(range(90, 100))


@pytest.mark.parametrize("cmd,code", [
    (SON([("compact", "v")]), 166),                                   # a view
    (SON([("compact", "missing")]), 26),                              # no such collection
    (SON([("compact", "c"), ("freeSpaceTargetMB", 0)]), 2),
    (SON([("compact", "c"), ("freeSpaceTargetMB", "x")]), 14),
    (SON([("compact", "c"), ("dryRun", "yes")]), 14),
    (SON([("compact", "c"), ("force", "yes")]), 14),
    (SON([("compact", "c"), ("paddingFactor", 1.1)]), 40415),        # removed in 4.2
    (SON([("compact", 5)]), 14),
])
def test_compact_refusals(client, cmd, code):
    db = client.t
    db.c.insert_one({"_id": 1})
    db.command("create", "v", viewOn="c", pipeline=[])
    with pytest.raises(pymongo.errors.OperationFailure) as e:
        db.command(cmd)
    assert e.value.code == code, e.value.details


def test_compact_needs_db_admin(dbpath):
    s = Server(dbpath, ["--auth"]).start()
    c = s.client()
    c.admin.command("createUser", "root", pwd="pw", roles=["root"])
    c.close()
    admin = s.client(username="root", password="pw")
    admin.app.c.insert_one({"_id": 1})
    admin.app.command("createUser", "rw", pwd="pw", roles=["readWrite"])
    admin.app.command("createUser", "dba", pwd="pw", roles=["dbAdmin"])
    rw = s.client(username="rw", password="pw", authSource="app")
    with pytest.raises(pymongo.errors.OperationFailure) as e:
        rw.app.command("compact", "c")
    assert e.value.code == 13
    dba = s.client(username="dba", password="pw", authSource="app")
    assert dba.app.command("compact", "c")["ok"] == 1.0
    for x in (admin, rw, dba):
        x.close()
    s.stop()


def test_compact_on_the_in_memory_engine_is_refused(dbpath, tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("storage:\n  engine: inMemory\n")
    s = Server(dbpath, ["--config", str(cfg)]).start()
    c = s.client()
    c.t.c.insert_one({"_id": 1})
    with pytest.raises(pymongo.errors.OperationFailure) as e:
        c.t.command("compact", "c")
    assert e.value.code == 115 and "in-memory" in str(e.value)
    c.close()
    s.stop()
