"""A three-member replica set of real `flashdoc serve --replSet rs0` processes (issue 36):
initiation, hello's fields, majority writes read back from every secondary, NotWritablePrimary
on a secondary, and failover after SIGKILL of the primary without losing a majority write."""
import os
import time

import pymongo
import pytest
from pymongo.errors import NotPrimaryError, OperationFailure, PyMongoError

from conftest import Server

SET = "rs0"
# Elections after 2-3 s of silence: a loaded two-core CI machine keeps heartbeats (every
# 400 ms) well inside that.
SETTINGS = {"electionTimeoutMillis": 2000, "heartbeatIntervalMillis": 400}


@pytest.fixture(scope="module")
def members(tmp_path_factory):
    servers = []
    for i in range(3):
        d = tmp_path_factory.mktemp(f"member{i}")
        conf = os.path.join(d, "flashdoc.conf")
        with open(conf, "w") as f:
            f.write(
                "storage:\n  wiredTiger:\n    engineConfig:\n      cacheSizeGB: 0.25\n"
                "replication:\n  oplogSizeMB: 64\n"
            )
        data = os.path.join(d, "data")
        os.mkdir(data)
        started = time.time()
        servers.append(Server(data, ["-f", conf, "--replSet", SET]).start())
        assert time.time() - started < 10, "a member listens within seconds"
    yield servers
    for s in servers:
        if s.proc.poll() is None:
            s.stop()


def host(s):
    return f"127.0.0.1:{s.port}"


def direct(s, **kw):
    return pymongo.MongoClient(
        host(s), directConnection=True, serverSelectionTimeoutMS=10000, **kw
    )


def set_client(servers):
    seeds = ",".join(host(s) for s in servers)
    return pymongo.MongoClient(
        f"mongodb://{seeds}/?replicaSet={SET}&retryWrites=false",
        serverSelectionTimeoutMS=30000,
    )


def wait_for_primary(servers, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        for s in servers:
            try:
                with direct(s) as c:
                    if c.admin.command("hello").get("isWritablePrimary"):
                        return s
            except PyMongoError:
                pass
        time.sleep(0.2)
    raise AssertionError("no primary")


@pytest.fixture(scope="module")
def initiated(members):
    with direct(members[0]) as c:
        with pytest.raises(OperationFailure) as e:
            c.admin.command("replSetGetStatus")
        assert e.value.code == 94  # NotYetInitialized
        hello = c.admin.command("hello")
        assert hello["isWritablePrimary"] is False and hello["isreplicaset"] is True
        config = {
            "_id": SET,
            "members": [{"_id": i, "host": host(s)} for i, s in enumerate(members)],
            "settings": SETTINGS,
        }
        c.admin.command("replSetInitiate", config)
        with pytest.raises(OperationFailure) as e:
            c.admin.command("replSetInitiate", config)
        assert e.value.code == 23  # AlreadyInitialized
    wait_for_primary(members)
    return members


def test_hello_describes_the_set(initiated):
    primary = wait_for_primary(initiated)
    hosts = sorted(host(s) for s in initiated)
    for s in initiated:
        with direct(s) as c:
            h = c.admin.command("hello")
        assert h["setName"] == SET
        assert sorted(h["hosts"]) == hosts
        assert h["me"] == host(s)
        assert h["setVersion"] == 1
        assert "processId" in h["topologyVersion"]
        assert "opTime" in h["lastWrite"]
        if s is primary:
            assert h["isWritablePrimary"] and not h["secondary"]
            assert "electionId" in h
        else:
            assert h["secondary"] and not h["isWritablePrimary"]
        assert h.get("primary") in (host(primary), None)
    with direct(primary) as c:
        status = c.admin.command("replSetGetStatus")
        assert status["set"] == SET and status["myState"] == 1
        assert len(status["members"]) == 3
        config = c.admin.command("replSetGetConfig")["config"]
        assert config["_id"] == SET and config["version"] == 1


def read_from(s, doc_id, timeout=10):
    """The document from member `s`, as a secondary read (waiting for it to apply)."""
    deadline = time.time() + timeout
    with direct(s, readPreference="secondaryPreferred") as c:
        while time.time() < deadline:
            d = c.e2e.rs.find_one({"_id": doc_id})
            if d is not None:
                return d
            time.sleep(0.1)
    return None


def test_majority_writes_reach_every_secondary(initiated):
    with set_client(initiated) as c:
        coll = c.e2e.get_collection("rs", write_concern=pymongo.WriteConcern("majority"))
        ids = [coll.insert_one({"n": i, "pad": "x" * 100}).inserted_id for i in range(20)]
        coll.update_one({"n": 3}, {"$set": {"touched": True}})
        w1 = c.e2e.get_collection("rs", write_concern=pymongo.WriteConcern(w=1))
        w1.insert_one({"_id": "w1"})
        with pytest.raises(OperationFailure) as e:
            c.e2e.get_collection("rs", write_concern=pymongo.WriteConcern(w=2)).insert_one({})
        assert e.value.code == 238  # refused, not ignored
    primary = wait_for_primary(initiated)
    for s in initiated:
        if s is primary:
            continue
        for i, doc_id in enumerate(ids):
            d = read_from(s, doc_id)
            assert d is not None and d["n"] == i, f"{host(s)} lacks document {i}"
        assert read_from(s, ids[3])["touched"] is True
        assert read_from(s, "w1") is not None


def test_a_secondary_refuses_writes(initiated):
    primary = wait_for_primary(initiated)
    secondary = next(s for s in initiated if s is not primary)
    with direct(secondary) as c:
        with pytest.raises(NotPrimaryError) as e:
            c.e2e.rs.insert_one({"on": "secondary"})
        assert e.value.details["code"] == 10107


def test_failover_keeps_every_majority_write(initiated):
    with set_client(initiated) as c:
        coll = c.e2e.get_collection("fail", write_concern=pymongo.WriteConcern("majority"))
        acked = []
        for i in range(30):
            coll.insert_one({"_id": i})
            acked.append(i)
        old = wait_for_primary(initiated)
        old.kill()
        killed = time.time()
        deadline = killed + 30
        while True:
            try:
                coll.insert_one({"_id": "after"})
                break
            except PyMongoError:
                assert time.time() < deadline, "no new primary took a majority write within 30 s"
                time.sleep(0.2)
        print(f"new primary took a majority write {time.time() - killed:.1f} s after the kill")
        rest = [s for s in initiated if s is not old]
        new = wait_for_primary(rest)
        assert new is not old
        found = {d["_id"] for d in coll.find({})}
        assert set(acked) | {"after"} <= found
