"""A sharded cluster whose shards are replica sets (`flashdoc cluster up --shards 2
--replicas 3`): CRUD with w: majority through the router, a chunk migration with data, and a
shard's primary killed: the router finds the new primary and no majority-acknowledged write is
lost."""
import json
import os
import signal
import subprocess
import time

import pymongo
import pytest
from bson import Int64
from pymongo import WriteConcern
from pymongo.errors import OperationFailure, PyMongoError

from conftest import BINARY, free_port_run

# Members run the default engine whatever FLASHDOC_ENGINE says; mmapv1 refuses --replSet.
pytestmark = pytest.mark.mmapv1_lacks("replica sets")

SHARDS, REPLICAS = 2, 3


@pytest.fixture(scope="module")
def up(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("rscluster") / "c")
    port = free_port_run(1 + SHARDS * REPLICAS)
    out = subprocess.run(
        [BINARY, "cluster", "up", "--shards", str(SHARDS), "--replicas", str(REPLICAS),
         "--dir", d, "--port", str(port)],
        capture_output=True, text=True, timeout=240)
    try:
        assert out.returncode == 0, out.stderr
        yield d, port
    finally:
        subprocess.run([BINARY, "cluster", "down", "--dir", d], capture_output=True, timeout=120)


def member_port(port, shard, m):
    return port + 1 + shard * REPLICAS + m


def direct(p):
    return pymongo.MongoClient(f"127.0.0.1:{p}", directConnection=True, serverSelectionTimeoutMS=5000)


def primary_of(port, shard):
    """The member index of `shard`'s primary, asked of the members themselves."""
    deadline = time.time() + 30
    while time.time() < deadline:
        for m in range(REPLICAS):
            try:
                with direct(member_port(port, shard, m)) as c:
                    if c.admin.command("hello")["isWritablePrimary"]:
                        return m
            except PyMongoError:
                pass
        time.sleep(0.2)
    raise AssertionError(f"shard{shard} has no primary")


def kill_primary(d, port, shard):
    """SIGKILLs `shard`'s primary; returns its member index."""
    victim = primary_of(port, shard)
    record = json.load(open(os.path.join(d, "cluster.json")))
    pid = [p["pid"] for p in record["pids"] if p["name"] == f"shard{shard}-{victim}"][0]
    os.kill(pid, signal.SIGKILL)
    return victim


def restart_member(d, port, shard, m):
    """Starts member `m` of `shard` again as `cluster up` started it; it rejoins its set."""
    name = f"shard{shard}-{m}"
    log = open(os.path.join(d, f"{name}.log"), "a")
    proc = subprocess.Popen(
        [BINARY, "serve", "--shardsvr", "--dbpath", os.path.join(d, name),
         "--port", str(member_port(port, shard, m)), "--replSet", f"shard{shard}",
         "-f", os.path.join(d, f"{name}.conf")],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    record_path = os.path.join(d, "cluster.json")
    record = json.load(open(record_path))
    for p in record["pids"]:
        if p["name"] == name:
            p["pid"] = proc.pid
    json.dump(record, open(record_path, "w"))
    deadline = time.time() + 60
    while alive_members(port, shard) < REPLICAS:
        assert time.time() < deadline, f"{name} did not come back"
        time.sleep(0.2)


def test_shards_are_named_by_their_sets(up):
    d, port = up
    with pymongo.MongoClient(f"127.0.0.1:{port}", serverSelectionTimeoutMS=20000) as c:
        shards = {s["_id"]: s["host"] for s in c.admin.command("listShards")["shards"]}
        want = {f"shard{i}": f"shard{i}/" + ",".join(
            f"127.0.0.1:{member_port(port, i, m)}" for m in range(REPLICAS)) for i in range(SHARDS)}
        assert shards == want
        # A single member added alone would be written to as a secondary: refused.
        with pytest.raises(OperationFailure) as e:
            c.admin.command("addShard", f"127.0.0.1:{member_port(port, 0, 1)}")
        assert "member of replica set shard0" in str(e.value)
        # Adding the set again is the same shard.
        assert c.admin.command("addShard", shards["shard1"])["shardAdded"] == "shard1"
    # A secondary refuses a shard's internal commands.
    p = primary_of(port, 0)
    with direct(member_port(port, 0, (p + 1) % REPLICAS)) as c:
        with pytest.raises(pymongo.errors.NotPrimaryError) as e:
            c.admin.command("_flushRoutingTableCacheUpdates", "x.y")
        assert e.value.errors["code"] == 10107


def owner(c, ns, key):
    chunks = list(c.config.chunks.find({"ns": ns}).sort("min", 1))
    return [ch["shard"] for ch in chunks if ch["min"]["k"] == key][0]


def insert_until_acknowledged(coll, doc, deadline):
    """Inserts `doc` (w: majority), retrying errors until `deadline`; the insert's _id is fixed,
    so a retry after an unknown outcome finds a duplicate, which means it was acknowledged."""
    while True:
        try:
            coll.insert_one(doc)
            return
        except pymongo.errors.DuplicateKeyError:
            return
        except PyMongoError:
            if time.time() > deadline:
                raise
            time.sleep(0.2)


def test_crud_migration_and_a_primary_killed(up):
    d, port = up
    c = pymongo.MongoClient(f"127.0.0.1:{port}", serverSelectionTimeoutMS=20000)
    c.admin.command("enableSharding", "rs")
    c.admin.command("shardCollection", "rs.c", key={"k": 1})
    c.admin.command("split", "rs.c", middle={"k": 0})
    coll = c.rs.get_collection("c", write_concern=WriteConcern(w="majority"))
    acknowledged = set()
    coll.insert_many([{"_id": k, "k": k, "v": 0} for k in range(-100, 100)])
    acknowledged.update(range(-100, 100))
    assert coll.update_many({"k": {"$gte": 50}}, {"$set": {"v": 1}}).modified_count == 50
    assert coll.delete_many({"k": {"$lt": -90}}).deleted_count == 10
    acknowledged -= set(range(-100, -90))
    assert coll.count_documents({}) == 190
    assert coll.find_one({"k": 75})["v"] == 1

    # Move the upper chunk to the other shard while data is there.
    src = owner(c, "rs.c", 0)
    dst = "shard1" if src == "shard0" else "shard0"
    c.admin.command("moveChunk", "rs.c", find={"k": 10}, to=dst, _waitForDelete=True)
    assert owner(c, "rs.c", 0) == dst
    assert coll.count_documents({}) == 190
    # Every member of the recipient holds the chunk; the donor's members no longer do.
    dst_i, src_i = int(dst[-1]), int(src[-1])
    for m in range(REPLICAS):
        with direct(member_port(port, dst_i, m)) as s:
            assert s.rs.c.count_documents({"k": {"$gte": 0}}) == 100
    # Secondaries apply the donor's range deletion shortly after its majority commit.
    deadline = time.time() + 20
    while True:
        counts = []
        for m in range(REPLICAS):
            with direct(member_port(port, src_i, m)) as s:
                counts.append(s.rs.c.count_documents({"k": {"$gte": 0}}))
        if counts == [0] * REPLICAS or time.time() > deadline:
            break
        time.sleep(0.2)
    assert counts == [0] * REPLICAS

    # Kill the primary of the shard holding k < 0; writes through the router succeed again
    # within 30 s, and every majority-acknowledged write survives.
    # A retryable write acknowledged before the kill, sent again (same session and
    # txnNumber) after it: the new primary answers from the set's record, not by inserting.
    # Its own client: pymongo's pooled sessions of `c` carry its own writes' txnNumbers.
    own = pymongo.MongoClient(f"127.0.0.1:{port}", serverSelectionTimeoutMS=20000)
    session = own.start_session()
    retryable = {"insert": "c", "documents": [{"_id": -2000, "k": -2000}],
                 "txnNumber": Int64(1), "writeConcern": {"w": "majority"}}
    assert own.rs.command(dict(retryable), session=session)["n"] == 1
    acknowledged.add(-2000)
    victim = kill_primary(d, port, src_i)
    killed_at = time.time()
    next_id = -1000
    insert_until_acknowledged(coll, {"_id": next_id, "k": next_id}, killed_at + 30)
    acknowledged.add(next_id)
    assert time.time() - killed_at < 30
    assert primary_of(port, src_i) != victim
    for k in range(-999, -979):
        coll.insert_one({"_id": k, "k": k})
        acknowledged.add(k)
    again = own.rs.command(dict(retryable), session=session)
    assert again["n"] == 1 and "writeErrors" not in again, again
    session.end_session()
    own.close()
    coll.update_one({"k": -50}, {"$set": {"v": 2}})
    present = {doc["_id"] for doc in coll.find({}, {"_id": 1})}
    missing = acknowledged - present
    assert not missing, sorted(missing)[:10]
    assert len(present) == len(acknowledged) == 212
    assert coll.find_one({"k": -50})["v"] == 2
    c.close()
    restart_member(d, port, src_i, victim)


def alive_members(port, shard):
    n = 0
    for m in range(REPLICAS):
        try:
            with direct(member_port(port, shard, m)) as c:
                c.admin.command("ping")
                n += 1
        except PyMongoError:
            pass
    return n


@pytest.mark.parametrize("killed", ["donor", "recipient"])
def test_a_migration_whose_primary_is_killed(up, killed):
    """Kills the donor's or the recipient's primary while a chunk of 3 000 documents moves:
    whatever the first moveChunk came to, the chunk has one owner, every document is there
    once, and the migration can be run (again) to its end."""
    import threading
    d, port = up
    c = pymongo.MongoClient(f"127.0.0.1:{port}", serverSelectionTimeoutMS=20000)
    ns = f"rs.m{killed}"
    coll_name = ns.split(".")[1]
    c.admin.command("shardCollection", ns, key={"k": 1})
    c.admin.command("split", ns, middle={"k": 0})
    donor = owner(c, ns, 0)
    recipient = "shard1" if donor == "shard0" else "shard0"
    coll = c.rs.get_collection(coll_name, write_concern=WriteConcern(w="majority"))
    coll.insert_many([{"_id": k, "k": k, "pad": "x" * 200} for k in range(3000)])
    outcome = {}

    def move():
        try:
            outcome["reply"] = c.admin.command("moveChunk", ns, find={"k": 0}, to=recipient)
        except PyMongoError as e:
            outcome["error"] = e

    mover = threading.Thread(target=move)
    mover.start()
    time.sleep(0.3)
    shard = int((donor if killed == "donor" else recipient)[-1])
    victim = kill_primary(d, port, shard)
    mover.join(120)
    assert not mover.is_alive()
    print(f"the moveChunk under the {killed}'s failover:", outcome)
    deadline = time.time() + 60
    while owner(c, ns, 0) != recipient:
        try:
            c.admin.command("moveChunk", ns, find={"k": 0}, to=recipient)
        except PyMongoError as e:
            assert time.time() < deadline, f"moveChunk after the failover: {e} (first: {outcome})"
            time.sleep(1)
    ids = [doc["_id"] for doc in coll.find({}, {"_id": 1})]
    assert len(ids) == len(set(ids)) == 3000, (len(ids), outcome)
    assert coll.count_documents({"k": {"$gte": 0}}) == 3000
    c.close()
    restart_member(d, port, shard, victim)
