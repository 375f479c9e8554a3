"""Initial sync and log compaction by snapshot (issue 36, docs/replication.md "Snapshots"): a
set whose members snapshot their replicated state every few log entries (the test-only
`replication.snapshotEvery`) purges its log behind the snapshots; a fourth member added with
replSetReconfig afterwards starts from the leader's snapshot, then the log, and holds every
document, index and user; and a deposed primary rolls back from its own snapshot and the log
after it."""
import pymongo
import pytest

from test_replset import direct, host, initiate, start_member, stop_all, wait_for_primary
from test_replset import eventually as replset_eventually
from test_rollback import check_rolled_back, diverge, elect_without, majority

pytestmark = pytest.mark.mmapv1_lacks("replica sets")

SNAPSHOT_EVERY = 40


def member(d):
    """A member that snapshots every SNAPSHOT_EVERY log entries."""
    return start_member(d, f"  snapshotEvery: {SNAPSHOT_EVERY}\n")


@pytest.fixture(scope="module")
def rs(tmp_path_factory):
    servers = initiate([member(str(tmp_path_factory.mktemp(f"is{i}"))) for i in range(3)])
    yield servers
    stop_all(servers)


def eventually(check, what):
    replset_eventually(check, what, timeout=60)


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
    fourth = member(str(tmp_path))
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
