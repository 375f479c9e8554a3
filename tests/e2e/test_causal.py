"""Causal consistency on a three-member replica set (issue 36): every reply of a member carries
`$clusterTime` and `operationTime` (a standalone's neither); a gossiped `$clusterTime` advances
the member's and one too far ahead is refused; a causally consistent session's reads on a
secondary see its writes on the primary (pymongo sends `afterClusterTime`); `afterClusterTime`
past the primary's oplog makes it write a no-op; a standalone refuses `afterClusterTime`; and
the default read and write concerns (`setDefaultRWConcern`) are checked, replicated, enforced
and kept across a restart."""
import time

import bson
import pymongo
import pytest
from pymongo import monitoring
from pymongo.errors import NotPrimaryError, OperationFailure

from test_replset import (direct, eventually, host, initiated, members, op_time,  # noqa: F401
                          wait_for_primary)

pytestmark = pytest.mark.mmapv1_lacks("replica sets")


def gossip(reply):
    """The (clusterTime, operationTime) of a member's reply, checked for mongod's shape."""
    ct = reply["$clusterTime"]
    assert isinstance(ct["clusterTime"], bson.Timestamp), reply
    assert ct["signature"]["hash"] == b"\0" * 20 and ct["signature"]["keyId"] == 0, reply
    assert isinstance(reply["operationTime"], bson.Timestamp), reply
    assert ct["clusterTime"] >= reply["operationTime"], reply
    return ct["clusterTime"], reply["operationTime"]


class Sent(monitoring.CommandListener):
    """The commands a client sends, as sent."""

    def __init__(self):
        self.commands = []

    def started(self, event):
        self.commands.append((event.command_name, event.command))

    def succeeded(self, event):
        pass

    def failed(self, event):
        pass


def test_every_reply_gossips_the_cluster_and_operation_time(initiated):
    primary = wait_for_primary(initiated)
    with direct(primary, retryWrites=False) as c:
        # A new set's oplog is empty until the primary's first entry (its periodic no-op
        # within 200 ms): no time to gossip until then.
        eventually(lambda: "$clusterTime" in c.admin.command("ping"), "a first oplog entry")
        before_ct, before_op = gossip(c.admin.command("ping"))
        c.e2e.causal.insert_one({"_id": "gossip"})
        ct, op = gossip(c.admin.command("ping"))
        assert op > before_op and ct >= before_ct
        # An error reply carries them too.
        with pytest.raises(OperationFailure) as e:
            c.e2e.command("find", "causal", readConcern={"level": "snapshot"})
        gossip(e.value.details)
        # A gossiped time newer than the member's advances its cluster time (not its oplog).
        ahead = bson.Timestamp(int(time.time()) + 30, 1)
        with c.start_session(causal_consistency=False) as s:
            s.advance_cluster_time({"clusterTime": ahead, "signature": {
                "hash": b"\0" * 20, "keyId": 0}})
            echoed, op_now = gossip(c.admin.command("ping", session=s))
        assert echoed == ahead and op_now < ahead
        assert gossip(c.admin.command("ping"))[0] >= ahead
        # One further ahead than a minute is refused (mongod's ClusterTimeFailsRateLimiter).
        with c.start_session(causal_consistency=False) as s:
            s.advance_cluster_time({"clusterTime": bson.Timestamp(int(time.time()) + 3600, 1),
                                    "signature": {"hash": b"\0" * 20, "keyId": 0}})
            with pytest.raises(OperationFailure) as e:
                c.admin.command("ping", session=s)
            assert e.value.code == 209, e.value
    # A secondary gossips its own last applied op.
    secondary = next(s for s in initiated if s is not primary)
    with direct(secondary) as c:
        gossip(c.admin.command("ping"))


def test_a_causal_session_reads_its_writes_on_a_secondary(initiated):
    sent = Sent()
    seeds = ",".join(host(s) for s in initiated)
    client = pymongo.MongoClient(f"mongodb://{seeds}/?replicaSet=rs0",
                                 serverSelectionTimeoutMS=30000, event_listeners=[sent])
    try:
        # w: 1, so a secondary may well not have the write yet when the read arrives.
        writes = client.e2e.get_collection("causal", write_concern=pymongo.WriteConcern(w=1))
        reads = client.e2e.get_collection("causal",
                                          read_preference=pymongo.ReadPreference.SECONDARY)
        with client.start_session(causal_consistency=True) as s:
            for i in range(50):
                writes.update_one({"_id": "counter"}, {"$set": {"v": i}}, upsert=True, session=s)
                got = reads.find_one({"_id": "counter"}, session=s, max_time_ms=15000)
                assert got is not None and got["v"] == i, (i, got)
        finds = [cmd for name, cmd in sent.commands if name == "find"]
        assert len(finds) == 50
        assert all(isinstance(f["readConcern"]["afterClusterTime"], bson.Timestamp)
                   for f in finds)
    finally:
        client.close()


def test_after_cluster_time_past_the_primarys_oplog_writes_a_noop(initiated):
    primary = wait_for_primary(initiated)
    with direct(primary) as c:
        # Past the member's cluster time: refused, as mongod refuses it.
        last = op_time(primary)
        cluster, _ = gossip(c.admin.command("ping"))
        past_cluster = bson.Timestamp(cluster.time + 1, 1)
        with pytest.raises(OperationFailure) as e:
            c.e2e.command("find", "causal", readConcern={"afterClusterTime": past_cluster})
        assert e.value.code == 72 and "greater than the current clusterTime" in str(e.value)
        future = bson.Timestamp(int(time.time()) + 2, 1)
        with c.start_session(causal_consistency=False) as s:
            s.advance_cluster_time({"clusterTime": future, "signature": {
                "hash": b"\0" * 20, "keyId": 0}})
            started = time.time()
            c.e2e.command("find", "causal", readConcern={"level": "majority",
                                                          "afterClusterTime": future},
                          maxTimeMS=15000, session=s)
            waited = time.time() - started
            assert op_time(primary) > future > last, "the primary wrote a no-op past the time"
            assert waited < 10
            # Bounded by maxTimeMS.
            far = bson.Timestamp(int(time.time()) + 40, 1)
            s.advance_cluster_time({"clusterTime": far, "signature": {
                "hash": b"\0" * 20, "keyId": 0}})
            with pytest.raises(OperationFailure) as e:
                c.e2e.command("find", "causal", readConcern={"afterClusterTime": far},
                              maxTimeMS=300, session=s)
            assert e.value.code == 50, e.value
        # Only with local or majority; afterOpTime is internal.
        for rc, code in (({"level": "linearizable", "afterClusterTime": last}, 72),
                         ({"level": "available", "afterClusterTime": last}, 72),
                         ({"afterClusterTime": bson.Timestamp(0, 0)}, 72),
                         ({"afterClusterTime": 5}, 14),
                         ({"afterOpTime": {"ts": last, "t": 1}}, 238)):
            with pytest.raises(OperationFailure) as e:
                c.e2e.command("find", "causal", readConcern=rc)
            assert e.value.code == code, (rc, e.value)


def test_a_standalone_refuses_after_cluster_time_and_gossips_nothing(server):
    with server.client() as c:
        reply = c.admin.command("ping")
        assert "$clusterTime" not in reply and "operationTime" not in reply
        with pytest.raises(OperationFailure) as e:
            c.e2e.command("find", "x", readConcern={"afterClusterTime": bson.Timestamp(1, 1)})
        assert e.value.code == 20 and "without replication enabled" in str(e.value)
        for cmd in ({"getDefaultRWConcern": 1},
                    {"setDefaultRWConcern": 1, "defaultReadConcern": {"level": "local"}}):
            with pytest.raises(OperationFailure) as e:
                c.admin.command(cmd)
            assert e.value.code == 51300, e.value


def defaults_of(s):
    with direct(s) as c:
        return c.admin.command("getDefaultRWConcern")


def test_default_rw_concern_is_set_replicated_enforced_and_kept(initiated):
    primary = wait_for_primary(initiated)
    secondary = next(s for s in initiated if s is not primary)
    implicit = defaults_of(primary)
    assert implicit["defaultWriteConcern"] == {"w": "majority", "wtimeout": 0}
    assert implicit["defaultReadConcern"] == {"level": "local"}
    assert implicit["defaultWriteConcernSource"] == "implicit"
    assert implicit["defaultReadConcernSource"] == "implicit"
    with direct(primary, retryWrites=False) as c:
        for bad, code in (({}, 2), ({"defaultWriteConcern": {"w": 0}}, 2),
                          ({"defaultWriteConcern": 1}, 14),
                          ({"defaultReadConcern": {"level": "linearizable"}}, 2),
                          ({"defaultReadConcern": {"level": "snapshot"}}, 2),
                          ({"defaultReadConcern": {"level": "dummy"}}, 9)):
            with pytest.raises(OperationFailure) as e:
                c.admin.command({"setDefaultRWConcern": 1, **bad})
            assert e.value.code == code, (bad, e.value)
        # A default w larger than the set: a write without writeConcern cannot be satisfied.
        set_reply = c.admin.command({"setDefaultRWConcern": 1, "defaultWriteConcern": {"w": 5},
                                     "defaultReadConcern": {"level": "majority"},
                                     "writeConcern": {"w": "majority"}})
        assert set_reply["defaultWriteConcern"] == {"w": 5}
        assert set_reply["defaultWriteConcernSource"] == "global"
        assert isinstance(set_reply["updateOpTime"], bson.Timestamp)
        # As mongod answers it: the write is applied, its write concern fails at once.
        reply = c.e2e.command("insert", "defaults", documents=[{"_id": 1}])
        assert reply["n"] == 1 and reply["writeConcernError"]["code"] == 100, reply
        # Its own write concern wins.
        reply = c.e2e.command("insert", "defaults", documents=[{"_id": 2}], writeConcern={"w": 1})
        assert reply["n"] == 1 and "writeConcernError" not in reply, reply
        got = c.admin.command("getDefaultRWConcern", inMemory=True)
        assert got["defaultReadConcern"] == {"level": "majority"} and got["inMemory"] is True
    # Replicated: every member holds it, and a secondary refuses to set it.
    eventually(lambda: defaults_of(secondary)["defaultWriteConcern"] == {"w": 5},
               "the defaults on a secondary")
    with direct(secondary) as c:
        with pytest.raises(NotPrimaryError):
            c.admin.command({"setDefaultRWConcern": 1, "defaultWriteConcern": {"w": 1},
                             "writeConcern": {"w": 1}})
    # Kept across a restart.
    secondary.stop()
    secondary.start()
    assert defaults_of(secondary)["defaultWriteConcern"] == {"w": 5}
    with direct(wait_for_primary(initiated), retryWrites=False) as c:
        c.admin.command({"setDefaultRWConcern": 1, "defaultWriteConcern": {"w": 1},
                         "defaultReadConcern": {}, "writeConcern": {"w": 1}})
        c.e2e.command("insert", "defaults", documents=[{"_id": 2}])
        back = c.admin.command("getDefaultRWConcern")
        assert back["defaultReadConcernSource"] == "implicit"
        assert back["defaultWriteConcern"] == {"w": 1}
