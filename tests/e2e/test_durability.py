"""Restart persistence, and a j:true write that survives SIGKILL."""
from pymongo import WriteConcern

from conftest import Server


def test_restart_keeps_data_indexes_and_catalog(dbpath):
    s = Server(dbpath).start()
    c = s.client()
    coll = c["keep"]["docs"]
    coll.insert_many([{"_id": i, "v": i * i} for i in range(2000)])
    coll.create_index("v", unique=True)
    c.close()
    assert s.stop() == 0
    s = Server(dbpath).start()
    c = s.client()
    coll = c["keep"]["docs"]
    assert coll.count_documents({}) == 2000
    assert coll.find_one({"v": 49})["_id"] == 7
    assert [i["name"] for i in coll.list_indexes()] == ["_id_", "v_1"]
    assert "IXSCAN" in str(coll.find({"v": 49}).explain())
    c.close()
    s.stop()


def test_journaled_write_survives_sigkill(dbpath):
    s = Server(dbpath).start()
    c = s.client()
    coll = c["dur"]["docs"].with_options(write_concern=WriteConcern(j=True))
    for i in range(50):
        coll.insert_one({"_id": i, "payload": "x" * 100})
    coll.update_one({"_id": 7}, {"$set": {"changed": True}})
    c.close()
    s.kill()
    s = Server(dbpath).start()
    c = s.client()
    coll = c["dur"]["docs"]
    assert coll.count_documents({}) == 50
    assert coll.find_one({"_id": 7})["changed"] is True
    c.close()
    s.stop()


def test_shutdown_command_closes_cleanly(dbpath):
    s = Server(dbpath).start()
    c = s.client()
    c["x"]["y"].insert_one({"a": 1})
    try:
        c.admin.command("shutdown")
    except Exception:
        pass  # the connection closes under the driver
    assert s.proc.wait(timeout=60) == 0
    s = Server(dbpath).start()
    c = s.client()
    assert c["x"]["y"].find_one({}, {"_id": 0}) == {"a": 1}
    c.close()
    s.stop()
