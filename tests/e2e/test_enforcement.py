"""What the server accepts it enforces: TTL, capped collections and tailable cursors,
validators, collation, maxTimeMS, noCursorTimeout/cursorTimeoutMillis, validate."""
import datetime
import os
import threading
import time

import pymongo
import pytest
from pymongo.collation import Collation
from pymongo.errors import ExecutionTimeout, OperationFailure, WriteError

from conftest import Server


@pytest.fixture
def fast_server(dbpath):
    s = Server(dbpath, ["--set-parameter", "ttlMonitorSleepSecs=1"]).start()
    yield s
    s.stop()


def wait_until(pred, seconds=30):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(0.2)
    return False


def test_ttl_monitor_removes_expired_documents(fast_server):
    c = fast_server.client()
    coll = c.t.sessions
    coll.create_index("at", expireAfterSeconds=1)
    old = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=30)
    new = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
    coll.insert_many(
        [{"_id": i, "at": old} for i in range(2500)]  # more than one TTL batch
        + [{"_id": "keep", "at": new}, {"_id": "no-date", "at": "x"}, {"_id": "missing"}]
    )
    assert wait_until(lambda: coll.count_documents({}) == 3)
    assert sorted(d["_id"] for d in coll.find()) == ["keep", "missing", "no-date"]
    info = {i["name"]: i for i in coll.list_indexes()}
    assert info["at_1"]["expireAfterSeconds"] == 1
    c.close()


def test_ttl_index_options_are_checked(coll):
    with pytest.raises(OperationFailure) as e:
        coll.create_index([("a", 1), ("b", 1)], expireAfterSeconds=5)
    assert e.value.code == 67
    with pytest.raises(OperationFailure):
        coll.create_index("a", expireAfterSeconds=-1)


def test_capped_collection_keeps_the_newest_in_insertion_order(client):
    db = client.t
    capped = db.create_collection("log", capped=True, size=100_000, max=5)
    for i in range(10):
        capped.insert_one({"i": i})
    assert [d["i"] for d in capped.find()] == [5, 6, 7, 8, 9]
    assert db.command("collStats", "log")["capped"] is True
    by_size = db.create_collection("small", capped=True, size=4096)
    for i in range(200):
        by_size.insert_one({"i": i, "pad": "x" * 100})
    docs = [d["i"] for d in by_size.find()]
    assert docs == sorted(docs) and docs[-1] == 199 and len(docs) < 200
    total = sum(len(str(d)) for d in by_size.find())
    assert total < 4096 * 2
    with pytest.raises(OperationFailure):
        db.create_collection("bad", capped=True)  # size is required


def test_tailable_await_cursor_returns_new_documents_as_they_arrive(client):
    db = client.t
    capped = db.create_collection("feed", capped=True, size=100_000)
    capped.insert_one({"i": 0})
    cur = capped.find(cursor_type=pymongo.CursorType.TAILABLE_AWAIT).max_await_time_ms(500)
    assert next(cur)["i"] == 0

    def later():
        time.sleep(0.5)
        client.t.feed.insert_many([{"i": 1}, {"i": 2}])

    threading.Thread(target=later).start()
    got = []
    deadline = time.time() + 30
    while len(got) < 2 and time.time() < deadline and cur.alive:
        try:
            got.append(next(cur)["i"])
        except StopIteration:
            pass
    assert got == [1, 2]
    cur.close()
    db.plain.insert_one({})
    with pytest.raises(OperationFailure):
        list(db.plain.find(cursor_type=pymongo.CursorType.TAILABLE))


def test_validator_rejects_with_121_and_errinfo(client):
    db = client.t
    people = db.create_collection(
        "people",
        validator={
            "$jsonSchema": {
                "bsonType": "object",
                "required": ["name"],
                "properties": {"name": {"bsonType": "string"}, "age": {"bsonType": "int", "minimum": 0}},
            }
        },
    )
    people.insert_one({"name": "Ann", "age": 3})
    with pytest.raises(WriteError) as e:
        people.insert_one({"age": -1})
    assert e.value.code == 121
    info = e.value.details["errInfo"]
    assert "failingDocumentId" in info
    assert info["details"]["operatorName"] == "$jsonSchema"
    with pytest.raises(WriteError) as e:
        people.update_one({"name": "Ann"}, {"$set": {"age": "old"}})
    assert e.value.code == 121
    people.insert_one({"age": -1}, bypass_document_validation=True)
    q = db.create_collection("q", validator={"n": {"$gt": 5}}, validationAction="warn")
    q.insert_one({"n": 1})  # warn: accepted, logged
    strict = db.create_collection("s", validator={"n": {"$gt": 5}})
    with pytest.raises(WriteError) as e:
        strict.insert_one({"n": 1})
    assert e.value.details["errInfo"]["details"]["operatorName"] == "$gt"
    assert people.count_documents({"$jsonSchema": {"required": ["age"]}}) == 2


def test_collation_counts_sorts_and_indexes(client):
    coll = client.t.names
    coll.insert_many([{"n": w} for w in ["apple", "Apple", "APPLE", "Äpple", "banana", "Banana"]])
    ci = Collation(locale="en", strength=2)
    base = Collation(locale="en", strength=1)
    assert coll.count_documents({"n": "apple"}) == 1
    assert coll.count_documents({"n": "apple"}, collation=ci) == 3
    assert coll.count_documents({"n": "apple"}, collation=base) == 4
    # apple/Apple/APPLE are one value at strength 2, Äpple another, banana/Banana a third.
    assert len(coll.distinct("n", collation=ci)) == 3
    assert len(coll.distinct("n")) == 6
    ordered = [d["n"] for d in coll.find({}, sort=[("n", 1)], collation=Collation(locale="en"))]
    assert ordered.index("apple") < ordered.index("banana") < len(ordered)
    assert [d["n"] for d in coll.aggregate([{"$match": {"n": "banana"}}], collation=ci)] == ["banana", "Banana"]
    coll.create_index("n", name="n_ci", collation={"locale": "en", "strength": 2})
    plan = coll.find({"n": "APPLE"}, collation=ci).explain()["queryPlanner"]["winningPlan"]
    assert plan["inputStage"]["indexName"] == "n_ci"
    assert coll.count_documents({"n": "APPLE"}, collation=ci) == 3
    plan = coll.find({"n": "APPLE"}).explain()["queryPlanner"]["winningPlan"]
    assert plan["stage"] == "COLLSCAN"  # simple collation: the ci index does not apply
    with pytest.raises(OperationFailure):
        coll.count_documents({}, collation=Collation(locale="en", strength=9))


def test_max_time_ms_is_50(client):
    coll = client.t.big
    coll.insert_many([{"i": i, "s": "x" * 200} for i in range(20_000)])
    with pytest.raises(ExecutionTimeout) as e:
        list(coll.find({"$expr": {"$gt": [{"$strLenCP": {"$reduce": {"input": {"$range": [0, 300]}, "initialValue": "", "in": {"$concat": ["$$value", "a"]}}}}, 1000]}}).max_time_ms(50))
    assert e.value.code == 50
    assert coll.count_documents({}) == 20_000  # the server goes on


def test_cursor_timeout_and_no_cursor_timeout(client):
    coll = client.t.cur
    coll.insert_many([{"i": i} for i in range(300)])
    client.admin.command("setParameter", 1, cursorTimeoutMillis=500)
    kept = coll.find(no_cursor_timeout=True, batch_size=10)
    dropped = coll.find(batch_size=10)
    next(kept), next(dropped)
    time.sleep(3)
    assert len(list(kept)) == 299
    with pytest.raises(OperationFailure) as e:
        list(dropped)
    assert e.value.code == 43
    client.admin.command("setParameter", 1, cursorTimeoutMillis=600_000)


@pytest.mark.mmapv1_lacks("copy-on-write files")
def test_validate_finds_a_corrupted_block(dbpath):
    s = Server(dbpath).start()
    c = s.client()
    coll = c.t.v
    coll.insert_many([{"_id": i, "pad": "x" * 500} for i in range(2000)])
    coll.create_index("pad")
    r = c.t.command("validate", "v")
    assert r["valid"] is True and r["nrecords"] == 2000 and r["nIndexes"] == 2
    assert r["keysPerIndex"] == {"_id_": 2000, "pad_1": 2000}
    with pytest.raises(OperationFailure) as e:
        c.t.command("validate", "nope")
    assert e.value.code == 26
    c.admin.command("fsync")  # every block is on disk
    # Flip one byte in every 4 KB of the collection's file, under the running server: its
    # pages are cached, so only a reader of the blocks themselves can notice.
    files = [os.path.join(dbpath, f) for f in os.listdir(dbpath) if f.startswith("collection-")]
    target = max(files, key=os.path.getsize)
    size = os.path.getsize(target)
    with open(target, "r+b") as f:
        for off in range(4096, size - 512, 4096):
            f.seek(off + 300)
            b = f.read(1)
            f.seek(off + 300)
            f.write(bytes([b[0] ^ 0xFF]))
    r = c.t.command("validate", "v")
    assert r["valid"] is False
    assert any("checksum" in e for e in r["errors"]), r["errors"]
    assert coll.estimated_document_count() == 2000  # the server goes on
    c.close()
    s.kill()  # its files are corrupt: no clean shutdown checkpoint over them


def test_killcursors_stops_a_running_awaitdata_getmore(server):
    reader, killer = server.client(), server.client()
    db = reader.t
    db.create_collection("kfeed", capped=True, size=100_000)
    db.kfeed.insert_one({"i": 0})
    first = db.command("find", "kfeed", tailable=True, awaitData=True, batchSize=1)
    cid = first["cursor"]["id"]
    assert cid != 0
    db.command("getMore", cid, collection="kfeed", batchSize=1, maxTimeMS=100)  # drains
    outcome = {}

    def wait_for_more():
        try:
            db.command("getMore", cid, collection="kfeed", maxTimeMS=5000)
            outcome["code"] = None
        except OperationFailure as e:
            outcome["code"] = e.code

    t = threading.Thread(target=wait_for_more)
    t.start()
    time.sleep(1.5)  # let the getMore start waiting
    killed = killer.t.command("killCursors", "kfeed", cursors=[cid])
    assert killed["cursorsKilled"] == [cid]
    t.join(30)
    assert outcome["code"] == 237
    with pytest.raises(OperationFailure) as e:
        db.command("getMore", cid, collection="kfeed")
    assert e.value.code == 43
    reader.close()
    killer.close()


def test_tailable_cursor_options_are_enforced_or_refused(client):
    db = client.t
    capped = db.create_collection("topts", capped=True, size=100_000)
    capped.insert_many([{"i": i} for i in range(6)])
    tail = pymongo.CursorType.TAILABLE
    assert [d["i"] for d in capped.find(cursor_type=tail).skip(2).limit(3)] == [2, 3, 4]
    with pytest.raises(OperationFailure) as e:
        list(capped.find(cursor_type=tail).hint([("_id", 1)]))
    assert e.value.code == 2
    assert [d["i"] for d in capped.find(cursor_type=tail).hint([("$natural", 1)])] == list(range(6))
    # After its limit a tailable cursor is closed; before it, it stays open for new documents.
    r = db.command("find", "topts", tailable=True, limit=2, batchSize=5)
    assert len(r["cursor"]["firstBatch"]) == 2 and r["cursor"]["id"] == 0
    r = db.command("find", "topts", tailable=True, limit=10, batchSize=10)
    assert len(r["cursor"]["firstBatch"]) == 6 and r["cursor"]["id"] != 0
    capped.insert_one({"i": 6})
    more = db.command("getMore", r["cursor"]["id"], collection="topts")
    assert [d["i"] for d in more["cursor"]["nextBatch"]] == [6]
    db.command("killCursors", "topts", cursors=[r["cursor"]["id"]])
    for bad in [{"singleBatch": True}, {"limit": -2}, {"sort": {"$natural": -1}},
                {"sort": {"i": 1}}]:
        with pytest.raises(OperationFailure) as e:
            db.command("find", "topts", tailable=True, **bad)
        assert e.value.code == 2, bad


def test_hidden_indexes_are_kept_but_never_used(coll):
    coll.insert_many([{"a": i} for i in range(20)])
    coll.create_index("a", name="a_hidden", hidden=True)
    assert "COLLSCAN" in str(coll.find({"a": 3}).explain()["queryPlanner"]["winningPlan"])
    with pytest.raises(OperationFailure) as e:
        list(coll.find({"a": 3}).hint("a_hidden"))
    assert e.value.code == 2
    info = [i for i in coll.list_indexes() if i["name"] == "a_hidden"][0]
    assert info["hidden"] is True
    with pytest.raises(OperationFailure):
        coll.database.command("createIndexes", coll.name,
                              indexes=[{"key": {"_id": 1}, "name": "_id_", "hidden": True}])


def test_capped_limits_must_be_finite_numbers(client):
    db = client.t
    for opts in [{"size": float("nan")}, {"size": float("inf")}, {"size": -1},
                 {"size": 4096, "max": float("nan")}, {"size": 4096, "max": float("inf")}]:
        with pytest.raises(OperationFailure) as e:
            db.command("create", "capbad", capped=True, **opts)
        assert e.value.code == 2, opts
    assert "capbad" not in db.list_collection_names()


def test_collation_locales_versions_and_stored_spec(client):
    db = client.t
    for spec in [{"locale": "xx"}, {"locale": "en-US"}, {"locale": "kl"},
                 {"locale": "de@collation=search"}]:
        with pytest.raises(OperationFailure) as e:
            db.command("create", "cl", collation=spec)
        assert e.value.code == 2 and spec["locale"] in str(e.value), spec
    with pytest.raises(OperationFailure) as e:
        db.command("create", "cl", collation={"locale": "en", "version": "1.0"})
    assert e.value.code == 161
    db.command("create", "cl", collation={"locale": "de@collation=phonebook", "strength": 1})
    info = next(db.list_collections(filter={"name": "cl"}))
    assert info["options"]["collation"]["locale"] == "de@collation=phonebook"
    assert info["options"]["collation"]["strength"] == 1
    assert info["options"]["collation"]["caseFirst"] == "off"
    ids = [i for i in db.cl.list_indexes() if i["name"] == "_id_"]
    assert ids[0]["collation"]["locale"] == "de@collation=phonebook"


def test_id_index_takes_the_default_collation(client):
    db = client.t
    db.command("create", "idc", collation={"locale": "en", "strength": 2})
    db.idc.insert_one({"_id": "Apple", "n": 1})
    with pytest.raises(pymongo.errors.DuplicateKeyError):
        db.idc.insert_one({"_id": "APPLE"})
    plan = db.idc.find({"_id": "apple"}).explain()["queryPlanner"]["winningPlan"]
    assert plan["inputStage"]["indexName"] == "_id_", plan
    assert plan["inputStage"]["collation"]["strength"] == 2
    assert db.idc.find_one({"_id": "apple"})["n"] == 1
    plan = db.idc.find({"_id": "apple"}, collation=Collation(locale="simple")).explain()
    assert "COLLSCAN" in str(plan["queryPlanner"]["winningPlan"])
    assert db.idc.find_one({"_id": "apple"}, collation=Collation(locale="simple")) is None


def test_validator_runs_under_the_collection_default_collation(client):
    db = client.t
    db.command("create", "vc", collation={"locale": "en", "strength": 2},
               validator={"kind": {"$in": ["a", "b"]}})
    db.vc.insert_one({"kind": "A"})  # equal to "a" under the default collation
    simple = Collation(locale="simple")
    # The statement's own collation does not change what the validator accepts.
    db.vc.update_one({"kind": "A"}, {"$set": {"kind": "B"}}, collation=simple)
    assert db.vc.find_one({}, {"_id": 0}) == {"kind": "B"}
    with pytest.raises(WriteError) as e:
        db.vc.update_one({"kind": "B"}, {"$set": {"kind": "c"}}, collation=simple)
    assert e.value.code == 121


def test_validate_counts_documents_the_validator_refuses(client):
    db = client.t
    db.command("create", "vnc", collation={"locale": "en", "strength": 2},
               validator={"kind": {"$in": ["a", "b"]}})
    db.vnc.insert_many([{"kind": "A"}, {"kind": "b"}])
    db.vnc.insert_one({"kind": "z"}, bypass_document_validation=True)
    r = db.command("validate", "vnc")
    assert r["nNonCompliantDocuments"] == 1  # "A" complies under the default collation
    assert r["valid"] is True and len(r["warnings"]) == 1
    assert all(d["valid"] for d in r["indexDetails"].values())
    assert db.command("validate", "vnc", scandata=True)["nNonCompliantDocuments"] == 1
    # `scandata: false` checks the tables' structure only: no document is decoded.
    quick = db.command("validate", "vnc", scandata=False)
    assert quick["valid"] is True and quick["nNonCompliantDocuments"] == 0
    assert quick["nrecords"] == 3
    with pytest.raises(OperationFailure) as e:
        db.command("validate", "vnc", full=True, background=True)
    assert e.value.code == 72


def test_current_op_lists_operations_and_kill_op_interrupts_one(client):
    db = client.ops
    capped = db.create_collection("feed", capped=True, size=100_000)
    capped.insert_one({"i": 0})
    cur = capped.find(cursor_type=pymongo.CursorType.TAILABLE_AWAIT).max_await_time_ms(10_000)
    assert next(cur)["i"] == 0
    failure = []

    def wait_in_get_more():
        try:
            next(cur)
        except OperationFailure as e:
            failure.append(e.code)

    waiter = threading.Thread(target=wait_in_get_more)
    waiter.start()
    # The getMore waits for new documents (up to 10 s); currentOp filters like a query.
    ops = []
    assert wait_until(lambda: ops.extend(
        client.admin.command({"currentOp": 1, "op": "getmore", "ns": "ops.feed"})["inprog"]) or ops)
    op = ops[0]
    assert op["active"] is True and op["command"]["getMore"] == cur.cursor_id
    assert op["microsecs_running"] >= 0 and op["desc"].startswith("conn")
    # currentOp sees itself; a filter that matches nothing lists nothing.
    me = client.admin.command({"currentOp": 1, "command.currentOp": {"$exists": True}})["inprog"]
    assert len(me) == 1 and me[0]["ns"] == "admin.$cmd"
    assert client.admin.command({"currentOp": 1, "ns": "no.such"})["inprog"] == []
    assert client.admin.command({"killOp": 1, "op": op["opid"]})["ok"] == 1.0
    waiter.join(30)
    assert failure == [11601]
    # killOp of an operation that is not running is not an error (as mongod); a bad op is.
    assert client.admin.command({"killOp": 1, "op": 123456789})["ok"] == 1.0
    with pytest.raises(OperationFailure) as e:
        client.admin.command({"killOp": 1, "op": "x"})
    assert e.value.code == 14
