"""The in-place engine in MMAPv1's design (`storage.engine: mmapv1`, `--storageEngine mmapv1`):
CRUD, indexes, updates that grow documents past their padding, restart persistence, SIGKILL
during j:true inserts, and refusal by name of what it lacks."""
import os
import subprocess
import threading
import time

import pymongo
import pytest
from pymongo import WriteConcern
from pymongo.errors import OperationFailure

from conftest import BINARY, Server

ENGINE = ["--storageEngine", "mmapv1"]


def start(dbpath, extra=()):
    t0 = time.time()
    s = Server(dbpath, ENGINE + list(extra)).start()
    # It must listen within 10 seconds with its default settings.
    assert time.time() - t0 < 10, f"listening took {time.time() - t0:.1f} s"
    return s


def storage(client):
    return client.admin.command("serverStatus")


def test_crud_indexes_and_growing_updates(dbpath):
    s = start(dbpath)
    c = s.client()
    coll = c["m"]["docs"]
    coll.insert_many([{"_id": i, "v": i % 10, "s": "x" * 20} for i in range(500)])
    assert coll.count_documents({}) == 500
    coll.create_index("v")
    assert "IXSCAN" in str(coll.find({"v": 3}).explain())
    assert coll.count_documents({"v": 3}) == 50
    # Updates that grow a document past its record's padding move it; the index follows.
    for i in range(0, 500, 5):
        coll.update_one({"_id": i}, {"$set": {"s": "y" * (2000 + i)}})
    coll.update_many({"v": 1}, {"$set": {"s": "z"}})
    coll.delete_many({"v": 2})
    assert coll.count_documents({}) == 450
    assert len(coll.find_one({"_id": 495})["s"]) == 2495
    assert coll.find_one({"_id": 1})["s"] == "z"
    assert [d["_id"] for d in coll.find({"v": 5}).sort("_id", -1).limit(3)] == [495, 485, 475]
    st = storage(c)
    assert st["storageEngine"]["name"] == "mmapv1", st["storageEngine"]
    c.close()
    s.stop()


def test_restart_keeps_documents_and_indexes(dbpath):
    s = start(dbpath)
    c = s.client()
    coll = c["keep"]["docs"]
    coll.insert_many([{"_id": i, "v": i * i, "pad": "p" * (i % 300)} for i in range(2000)])
    coll.create_index("v", unique=True)
    c.close()
    assert s.stop() == 0
    s = start(dbpath)
    c = s.client()
    coll = c["keep"]["docs"]
    assert coll.count_documents({}) == 2000
    assert coll.find_one({"v": 49})["_id"] == 7
    assert [i["name"] for i in coll.list_indexes()] == ["_id_", "v_1"]
    c.close()
    s.stop()


def test_every_acknowledged_journaled_insert_survives_sigkill(dbpath):
    s = start(dbpath)
    c = s.client()
    coll = c["dur"]["docs"].with_options(write_concern=WriteConcern(j=True))
    acked = []
    stop = threading.Event()

    def writer():
        i = 0
        while not stop.is_set():
            try:
                coll.insert_one({"_id": i, "payload": "x" * (i % 700)})
            except pymongo.errors.PyMongoError:
                return
            acked.append(i)
            i += 1

    t = threading.Thread(target=writer)
    t.start()
    time.sleep(2.0)
    s.kill()
    stop.set()
    t.join(timeout=30)
    c.close()
    assert len(acked) > 10, len(acked)
    s = start(dbpath)
    c = s.client()
    have = {d["_id"] for d in c["dur"]["docs"].find({}, {"_id": 1})}
    missing = [i for i in acked if i not in have]
    assert not missing, f"{len(missing)} acknowledged inserts lost, first {missing[:5]}"
    c.close()
    s.stop()


@pytest.mark.parametrize("yaml,key", [
    ("storage:\n  engine: mmapv1\n  wiredTiger:\n    collectionConfig:\n      blockCompressor: zstd\n",
     "storage.wiredTiger.collectionConfig.blockCompressor"),
    ("storage:\n  engine: mmapv1\n  wiredTiger:\n    engineConfig:\n      journalCompressor: snappy\n",
     "storage.wiredTiger.engineConfig.journalCompressor"),
    ("storage:\n  engine: mmapv1\n  wiredTiger:\n    indexConfig:\n      prefixCompression: true\n",
     "storage.wiredTiger.indexConfig.prefixCompression"),
])
def test_compression_is_refused_by_name(dbpath, tmp_path, yaml, key):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml)
    r = subprocess.run([BINARY, "serve", "--dbpath", dbpath, "--port", "0", "--config", str(cfg)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert key in r.stdout + r.stderr and "mmapv1" in r.stdout + r.stderr, r.stdout + r.stderr


def test_a_collection_asking_for_a_compressor_is_refused(dbpath):
    # A per-collection compressor cannot slip past the engine either: the option is refused.
    s = start(dbpath)
    c = s.client()
    with pytest.raises(OperationFailure) as e:
        c["m"].create_collection(
            "z", storageEngine={"wiredTiger": {"configString": "block_compressor=zlib"}})
    assert e.value.code == 72 and "storageEngine" in str(e.value)
    c.close()
    s.stop()


def test_what_it_cannot_give_is_refused_and_flash_settings_it_lacks_are_na(dbpath):
    s = start(dbpath)
    c = s.client()
    db = c["m"]
    db["t"].insert_one({"_id": 1})
    with pytest.raises(OperationFailure):
        db.command("find", "t", readConcern={"level": "snapshot"})
    with pytest.raises(OperationFailure):
        with c.start_session() as sess:
            with sess.start_transaction():
                db["t"].insert_one({"_id": 2}, session=sess)
    with pytest.raises(OperationFailure):
        db["t"].watch().next()
    flash = storage(c)["flash"]
    for k in ("allocation", "dirtyTarget", "dirtyTrigger"):
        assert flash[k] == "n/a", flash
    c.close()
    s.stop()
    r = subprocess.run([BINARY, "serve", "--dbpath", dbpath, "--port", "0", *ENGINE,
                        "--replSet", "rs0"], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "--replSet (replication.replSetName): the mmapv1 engine" in r.stdout + r.stderr, r.stderr
