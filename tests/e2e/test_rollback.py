"""Rollback (issue 36, docs/replication.md "Rollback"): a deposed primary holding `w: 1`
writes the set never got (its secondaries SIGSTOPped, then killed and restarted to elect a new
primary) rolls back by itself, after a SIGKILL and restart and in place after a SIGSTOP, becomes SECONDARY with exactly the set's data, and leaves the documents its undone
writes touched in `<dbPath>/rollback/<collection uuid>/removed.<time>.bson`."""
import glob
import os
import signal
import time

import bson
import pymongo
import pytest
from pymongo.errors import PyMongoError

from test_replset import direct, host, initiate, start_member, stop_all, wait_for_primary

pytestmark = pytest.mark.mmapv1_lacks("replica sets")


@pytest.fixture(scope="module")
def rs(tmp_path_factory):
    servers = initiate([start_member(tmp_path_factory.mktemp(f"rb{i}")) for i in range(3)])
    yield servers
    stop_all(servers)


def majority(primary, coll="rb"):
    c = direct(primary, retryWrites=False)
    return c, c.e2e.get_collection(coll, write_concern=pymongo.WriteConcern("majority"))


def diverge(primary, secondaries, tag):
    """Stops the secondaries and writes on the primary what cannot replicate (`w: 1`)."""
    for s in secondaries:
        s.proc.send_signal(signal.SIGSTOP)
    with direct(primary, retryWrites=False) as c:
        w1 = c.e2e.get_collection("rb", write_concern=pymongo.WriteConcern(w=1))
        w1.insert_many([{"_id": f"{tag}-lost1"}, {"_id": f"{tag}-lost2"}])
        w1.update_one({"_id": f"{tag}-base"}, {"$set": {"x": 1}})


def elect_without(others):
    """Restarts the stopped `others` and waits for one of them to lead. Killed, not resumed:
    a stopped process's sockets still take data, so a resumed secondary would append the
    entries the primary sent it while it was stopped, and Raft would rightly commit them."""
    for s in others:
        s.kill()
        s.start()
    return wait_for_primary(others, timeout=30)


def data_of(s):
    with direct(s, readPreference="secondaryPreferred") as c:
        return sorted(c.e2e.rb.find({}), key=lambda d: str(d["_id"]))


def rollback_files(s):
    return glob.glob(os.path.join(s.dbpath, "rollback", "*", "removed.*.bson"))


def saved_ids(s):
    ids = set()
    for f in rollback_files(s):
        with open(f, "rb") as fh:
            ids |= {d["_id"] for d in bson.decode_all(fh.read())}
    return ids


def rolled_back(old, new):
    """Whether `old` is SECONDARY with `new`'s data (reads are refused while it rolls back)."""
    try:
        with direct(old) as c:
            if not c.admin.command("hello").get("secondary"):
                return False
        return data_of(old) == data_of(new)
    except PyMongoError:
        return False


def check_rolled_back(old, new, tag):
    deadline = time.time() + 40
    while not rolled_back(old, new):
        assert time.time() < deadline, f"{host(old)} did not roll back and become SECONDARY"
        time.sleep(0.2)
    ids = {d["_id"] for d in data_of(old)}
    assert f"{tag}-after" in ids and f"{tag}-base" in ids
    assert not {f"{tag}-lost1", f"{tag}-lost2"} & ids, "its w:1 writes are gone"
    assert next(d for d in data_of(old) if d["_id"] == f"{tag}-base").get("x") is None
    assert {f"{tag}-lost1", f"{tag}-lost2", f"{tag}-base"} <= saved_ids(old)


def test_a_killed_primary_rolls_back_at_restart(rs):
    old = wait_for_primary(rs)
    c, coll = majority(old)
    with c:
        coll.insert_one({"_id": "k-base"})
    others = [s for s in rs if s is not old]
    diverge(old, others, "k")
    old.kill()
    new = elect_without(others)
    c, coll = majority(new)
    with c:
        coll.insert_one({"_id": "k-after"})
    old.start()
    check_rolled_back(old, new, "k")
    assert any("rolling back" in line for line in old.log), "the rollback is logged"


def test_a_stopped_primary_rolls_back_in_place(rs):
    old = wait_for_primary(rs)
    pid = old.proc.pid
    c, coll = majority(old)
    with c:
        coll.insert_one({"_id": "s-base"})
    before = set(rollback_files(old))
    others = [s for s in rs if s is not old]
    diverge(old, others, "s")
    old.proc.send_signal(signal.SIGSTOP)
    new = elect_without(others)
    c, coll = majority(new)
    with c:
        coll.insert_one({"_id": "s-after"})
    old.proc.send_signal(signal.SIGCONT)
    check_rolled_back(old, new, "s")
    assert old.proc.poll() is None and old.proc.pid == pid, "in place, the process never exited"
    assert set(rollback_files(old)) - before, "a new rollback file"
    with direct(old) as c:
        assert c.admin.command("replSetGetStatus")["myState"] == 2
