"""Initial sync and log compaction by snapshot (issue 36, docs/replication.md "Snapshots"): a
set whose members snapshot their replicated state every few log entries (the test-only
`replication.snapshotEvery`) purges its log behind the snapshots; a fourth member added with
replSetReconfig afterwards starts from the leader's snapshot, then the log, and holds every
document, index and user; and a deposed primary rolls back from its own snapshot and the log
after it."""
import os
import signal
import time

import pymongo
import pytest
from pymongo.errors import PyMongoError

from conftest import Server
from test_replset import SET, SETTINGS, direct, host, wait_for_primary
from test_rollback import check_rolled_back, diverge, elect_without, majority

pytestmark = pytest.mark.mmapv1_lacks("replica sets")

SNAPSHOT_EVERY = 40


def start_member(d):
    """A member that snapshots every SNAPSHOT_EVERY log entries."""
    conf = os.path.join(d, "flashdoc.conf")
    with open(conf, "w") as f:
        f.write(
            "storage:\n  wiredTiger:\n    engineConfig:\n      cacheSizeGB: 0.25\n"
            f"replication:\n  oplogSizeMB: 64\n  snapshotEvery: {SNAPSHOT_EVERY}\n"
        )
    data = os.path.join(d, "data")
    os.mkdir(data)
    return Server(data, ["-f", conf, "--replSet", SET]).start()


@pytest.fixture(scope="module")
def rs(tmp_path_factory):
    servers = [start_member(str(tmp_path_factory.mktemp(f"is{i}"))) for i in range(3)]
    with direct(servers[0]) as c:
        c.admin.command("replSetInitiate", {
            "_id": SET,
            "members": [{"_id": i, "host": host(s)} for i, s in enumerate(servers)],
            "settings": SETTINGS,
        })
    wait_for_primary(servers)
    yield servers
    for s in servers:
        if s.proc.poll() is None:
            s.proc.send_signal(signal.SIGCONT)
            s.stop()


def eventually(check, what, timeout=60):
    deadline = time.time() + timeout
    while True:
        try:
            if check():
                return
        except PyMongoError:
            pass
        assert time.time() < deadline, what
        time.sleep(0.3)


def secondary_docs(s, coll="docs"):
    with direct(s, readPreference="secondaryPreferred") as c:
        return sorted(c.e2e[coll].find({}), key=lambda d: str(d["_id"]))


def indexes(s):
    with direct(s, readPreference="secondaryPreferred") as c:
        return sorted((i["name"], i.get("unique", False)) for i in c.e2e.docs.list_indexes())


def test_a_member_added_after_compaction_starts_from_a_snapshot(rs, tmp_path):
    with direct(wait_for_primary(rs)) as c:
        db = c.get_database("e2e", write_concern=pymongo.WriteConcern("majority"))
        db.docs.create_index("k", unique=True)
        for i in range(5 * SNAPSHOT_EVERY):
            db.docs.insert_one({"_id": i, "k": i})
        c.admin.command("createUser", "reader", pwd="pw", roles=[{"role": "read", "db": "e2e"}])
        users = sorted(u["_id"] for u in c.admin.command("usersInfo", 1)["users"])
        assert "e2e.reader" in users or "admin.reader" in users, users
    fourth = start_member(str(tmp_path))
    try:
        with direct(wait_for_primary(rs)) as c:
            config = c.admin.command("replSetGetConfig")["config"]
            config["version"] += 1
            config["members"].append({"_id": 3, "host": host(fourth), "votes": 0, "priority": 0})
            c.admin.command("replSetReconfig", config)
            c.get_database("e2e", write_concern=pymongo.WriteConcern("majority")).docs.insert_one(
                {"_id": "after", "k": "after"})
        eventually(lambda: len(secondary_docs(fourth)) == 5 * SNAPSHOT_EVERY + 1,
                   "the new member holds every document")
        assert secondary_docs(fourth) == secondary_docs(rs[0])
        assert ("k_1", True) in indexes(fourth) and indexes(fourth) == indexes(rs[0])
        with direct(fourth, readPreference="secondaryPreferred") as c:
            got = c.admin.command("usersInfo", 1)["users"]
            assert sorted(u["_id"] for u in got) == users
            assert c.admin.command("hello")["secondary"] is True
        assert any("installed a snapshot" in line for line in fourth.log), \
            "it started from a snapshot, not the whole log"
    finally:
        fourth.stop()


def test_a_deposed_primary_rolls_back_from_its_snapshot(rs):
    old = wait_for_primary(rs)
    c, coll = majority(old)
    with c:
        for i in range(2 * SNAPSHOT_EVERY):
            coll.insert_one({"_id": f"c-{i}"})
        coll.insert_one({"_id": "c-base"})
    others = [s for s in rs if s is not old]
    diverge(old, others, "c")
    old.kill()
    new = elect_without(others)
    c, coll = majority(new)
    with c:
        coll.insert_one({"_id": "c-after"})
    old.start()
    check_rolled_back(old, new, "c")
    assert any("restored this member's last snapshot" in line for line in old.log), \
        "the rollback started from the snapshot"
