"""A sharded cluster of real processes: etcd, a router (two for the race) and three shards,
with pymongo through the router."""
import hashlib
import os
import random
import tempfile
import threading
import time

import bson
import pymongo
import pytest
from bson import Int64
from pymongo import WriteConcern
from pymongo.errors import OperationFailure, PyMongoError

from cluster import Cluster, Shard
from conftest import Server


@pytest.fixture(scope="module")
def cluster():
    keep = os.environ.get("FLASHDOC_KEEP_CLUSTER_DIR")
    with tempfile.TemporaryDirectory(prefix="flashdoc-cluster-", dir=keep) as d:
        c = Cluster(d)
        yield c
        c.stop()
        if keep:
            os.system(f"cp -r {d} {keep}/last-cluster")


@pytest.fixture
def router(cluster):
    c = cluster.routers[0].client()
    yield c
    c.close()


def chunks(client, ns):
    return list(client.config.chunks.find({"ns": ns}).sort("min", 1))


def test_hello_says_mongos_and_config_is_readable(router):
    assert router.admin.command("hello")["msg"] == "isdbgrid"
    shards = router.admin.command("listShards")["shards"]
    assert sorted(s["_id"] for s in shards) == ["shard0", "shard1", "shard2"]
    assert router.config.shards.count_documents({}) == 3
    assert router.config.version.find_one()["currentVersion"] == 6


def test_compact_through_the_router_is_refused_clearly(router):
    # mongos has no compact: it is run on each shard's mongod. (Nothing is created here: a new
    # database would take a primary shard and move the next tests' placement.)
    with pytest.raises(OperationFailure) as e:
        router.cmp.command("compact", "c")
    assert e.value.code == 59 and "each shard" in str(e.value)


def test_range_sharded_crud_targeting_and_scatter_gather(router):
    db = router.rng
    router.admin.command("enableSharding", "rng")
    router.admin.command("shardCollection", "rng.c", key={"k": 1})
    db.c.insert_many([{"k": i, "g": i % 7, "v": i * 3} for i in range(3000)])
    for at in (1000, 2000):
        router.admin.command("split", "rng.c", middle={"k": at})
    router.admin.command("moveChunk", "rng.c", find={"k": 1500}, to="shard1", _waitForDelete=True)
    router.admin.command("moveChunk", "rng.c", find={"k": 2500}, to="shard2", _waitForDelete=True)
    owners = {c["shard"] for c in chunks(router, "rng.c")}
    assert owners == {"shard0", "shard1", "shard2"}
    assert db.c.count_documents({}) == 3000
    assert db.c.find_one({"k": 1777})["v"] == 1777 * 3
    # Range targeting, sorted merge across shards, skip/limit after the merge, getMore.
    got = [d["k"] for d in db.c.find({"k": {"$gte": 900, "$lt": 2100}}).sort("k", -1).skip(5).limit(300).batch_size(17)]
    assert got == list(range(2094, 1794, -1))
    allk = [d["k"] for d in db.c.find({}, {"k": 1, "_id": 0}).sort("k", 1).batch_size(50)]
    assert allk == list(range(3000))
    # Merged count, distinct and aggregation.
    assert db.c.count_documents({"g": 3}) == len([i for i in range(3000) if i % 7 == 3])
    assert sorted(db.c.distinct("g")) == list(range(7))
    agg = list(db.c.aggregate([{"$match": {"k": {"$lt": 2800}}}, {"$group": {"_id": "$g", "n": {"$sum": 1}, "top": {"$max": "$k"}}}, {"$sort": {"_id": 1}}]))
    assert [a["n"] for a in agg] == [len([i for i in range(2800) if i % 7 == g]) for g in range(7)]
    assert agg[6]["top"] == max(i for i in range(2800) if i % 7 == 6)
    avg = list(db.c.aggregate([{"$group": {"_id": None, "a": {"$avg": "$v"}}}]))
    assert avg[0]["a"] == pytest.approx(sum(i * 3 for i in range(3000)) / 3000)
    top = list(db.c.aggregate([{"$sort": {"v": -1}}, {"$limit": 3}, {"$project": {"_id": 0, "k": 1}}]))
    assert top == [{"k": 2999}, {"k": 2998}, {"k": 2997}]
    # $facet runs on the router over the merged stream; $out and $merge are refused there
    # (a router has no write path for a pipeline's output yet).
    page = list(db.c.aggregate([{"$sort": {"k": 1}}, {"$facet": {"page": [{"$skip": 10}, {"$limit": 2}, {"$project": {"_id": 0, "k": 1}}], "total": [{"$count": "n"}]}}]))
    assert page == [{"page": [{"k": 10}, {"k": 11}], "total": [{"n": 3000}]}]
    for stage in ({"$out": "copy"}, {"$merge": {"into": "copy"}}):
        with pytest.raises(OperationFailure) as e:
            list(db.c.aggregate([stage]))
        assert e.value.code == 20
    # Writes without the shard key: by _id, and the multi forms.
    one = db.c.find_one({"k": 2222})
    assert db.c.update_one({"_id": one["_id"]}, {"$set": {"tag": "x"}}).modified_count == 1
    assert db.c.update_many({"g": 0}, {"$inc": {"v": 1}}).modified_count == len([i for i in range(3000) if i % 7 == 0])
    assert db.c.delete_one({"_id": one["_id"]}).deleted_count == 1
    assert db.c.delete_many({"k": {"$gte": 2990}}).deleted_count == 10
    assert db.c.count_documents({}) == 2989
    with pytest.raises(OperationFailure) as e:
        db.c.update_one({"g": 1}, {"$set": {"a": 1}})
    assert e.value.code == 72
    with pytest.raises(OperationFailure) as e:
        db.c.insert_one({"nokey": 1})
    assert e.value.code == 61
    with pytest.raises(OperationFailure) as e:
        db.c.update_one({"k": 5}, {"$set": {"k": 6}})
    assert e.value.code == 66
    assert db.c.find_one_and_update({"k": 10}, {"$inc": {"v": 100}}, return_document=True)["v"] == 130


def test_hashed_sharding_matches_mongods_hash(cluster, router):
    router.admin.command("enableSharding", "hsh")
    router.admin.command("shardCollection", "hsh.c", key={"h": "hashed"}, numInitialChunks=6)
    cs = chunks(router, "hsh.c")
    assert len(cs) == 6 and {c["shard"] for c in cs} == {"shard0", "shard1", "shard2"}
    router.hsh.c.insert_many([{"_id": i, "h": i} for i in range(600)])
    assert router.hsh.c.count_documents({}) == 600
    # 42 hashes to -944302157085130861 (mongod's hasher_test): the document lives on the
    # shard whose chunk holds that hash, and nowhere else.
    h42 = -944302157085130861
    owner = next(c["shard"] for c in cs if (c["min"]["h"] == bson.min_key.MinKey() or c["min"]["h"] <= h42) and (c["max"]["h"] == bson.max_key.MaxKey() or h42 < c["max"]["h"]))
    for i, s in enumerate(cluster.shards):
        d = s.client()
        n = d.hsh.c.count_documents({"h": 42})
        d.close()
        assert n == (1 if f"shard{i}" == owner else 0)
    assert router.hsh.c.find_one({"h": 42})["_id"] == 42
    assert sorted(d["_id"] for d in router.hsh.c.find({"h": {"$in": [1, 2, 3]}})) == [1, 2, 3]


def test_retryable_writes_apply_once(router):
    # The router runs the write, then answers with a retryable write-concern error; pymongo
    # (retryWrites=true by default) sends the same txnNumber again.
    router.admin.command("enableSharding", "rw")
    router.admin.command("shardCollection", "rw.c", key={"k": 1})
    c = router.rw.c
    c.insert_one({"_id": 1, "k": 1, "n": 0})
    for cmd in ("update", "insert", "findAndModify"):
        router.admin.command("configureFailPoint", "failCommand", mode={"times": 1},
                             data={"failCommands": [cmd], "writeConcernError": {"code": 91, "errmsg": "injected"}})
        if cmd == "update":
            c.update_one({"k": 1}, {"$inc": {"n": 1}})
        elif cmd == "insert":
            c.insert_one({"_id": 2, "k": 2})
        else:
            c.find_one_and_update({"k": 1}, {"$inc": {"n": 10}})
    assert c.find_one({"k": 1})["n"] == 11
    assert c.count_documents({"k": 2}) == 1


def test_shard_key_index_is_simple_on_a_collection_with_a_default_collation(router):
    # The manual split below must not race a background one after the inserts (code 117).
    router.config.settings.update_one({"_id": "autosplit"}, {"$set": {"enabled": False}}, upsert=True)
    try:
        router.admin.command("enableSharding", "coll")
        ci = {"locale": "en", "strength": 2}
        router.coll.command("create", "c", collation=ci)
        router.admin.command("shardCollection", "coll.c", key={"k": 1})
        router.coll.c.insert_many([{"k": i} for i in range(100)])
        router.admin.command("split", "coll.c", middle={"k": 50})
        # Whichever shard does not hold it now: the balancer may have moved it already (on
        # mmapv1, whose inserts are slower, it had moved it to shard2 by this point).
        owner = next(ch["shard"] for ch in chunks(router, "coll.c") if ch["min"] == {"k": 50})
        to = next(s["_id"] for s in router.config.shards.find() if s["_id"] != owner)
        router.admin.command("moveChunk", "coll.c", find={"k": 70}, to=to, _waitForDelete=True)
        assert router.coll.c.count_documents({}) == 100
        assert router.coll.c.count_documents({"k": {"$gte": 50}}) == 50
        # `_id`'s index has the collection's collation, so `_id` cannot be the shard key.
        router.coll.command("create", "d", collation=ci)
        with pytest.raises(OperationFailure):
            router.admin.command("shardCollection", "coll.d", key={"_id": 1})
    finally:
        router.config.settings.update_one({"_id": "autosplit"}, {"$set": {"enabled": True}})


def test_two_routers_race_on_one_chunk(cluster, router):
    other = cluster.add_router().client()
    # Only the racing splits should change the chunks (sh.disableAutoSplit()).
    router.config.settings.update_one({"_id": "autosplit"}, {"$set": {"enabled": False}}, upsert=True)
    router.admin.command("enableSharding", "race")
    router.admin.command("shardCollection", "race.c", key={"k": 1})
    router.race.c.insert_many([{"k": i} for i in range(200)])
    for round_ in range(5):
        at = {"k": 10 + round_ * 30}
        results = []
        barrier = threading.Barrier(2)

        def split(c):
            barrier.wait()
            try:
                c.admin.command("split", "race.c", middle=at)
                results.append("ok")
            except OperationFailure as e:
                results.append(e.code)
            except Exception as e:  # noqa: BLE001 - the assertion below must show what happened
                results.append((type(e).__name__, str(e)))

        ts = [threading.Thread(target=split, args=(c,)) for c in (router, other)]
        [t.start() for t in ts]
        [t.join() for t in ts]
        assert results.count("ok") == 1, results
    mins = [c["min"]["k"] for c in chunks(router, "race.c")[1:]]
    assert mins == [10, 40, 70, 100, 130]
    # Two moves of one chunk to different shards: exactly one wins. The balancer is stopped
    # first on both routers and its round waited out: the six chunks all on one shard would
    # make it move one, and a donor shard moves one chunk at a time, so both racing moves
    # would then fail with 117 and neither win.
    for c in (router, other):
        c.admin.command("balancerStop")
    deadline = time.monotonic() + 60
    while any(c.admin.command("balancerStatus")["inBalancerRound"] for c in (router, other)):
        assert time.monotonic() < deadline, "a balancer round did not end in 60 s"
        time.sleep(0.1)
    results = []
    barrier = threading.Barrier(2)

    def move(c, to):
        barrier.wait()
        try:
            c.admin.command("moveChunk", "race.c", find={"k": 50}, to=to, _waitForDelete=True)
            results.append(to)
        except OperationFailure as e:
            results.append((e.code, str(e)))
        except Exception as e:  # noqa: BLE001 - the assertion below must show what happened
            results.append((type(e).__name__, str(e)))

    ts = [threading.Thread(target=move, args=(router, "shard1")), threading.Thread(target=move, args=(other, "shard2"))]
    [t.start() for t in ts]
    [t.join() for t in ts]
    winners = [r for r in results if isinstance(r, str)]
    assert len(winners) == 1, results
    owner = next(c["shard"] for c in chunks(router, "race.c") if c["min"]["k"] == 40)
    assert owner == winners[0]
    assert other.race.c.count_documents({}) == 200
    router.config.settings.update_one({"_id": "autosplit"}, {"$set": {"enabled": True}})
    for c in (router, other):
        c.admin.command("balancerStart")
    other.close()


def checksum(docs):
    h = hashlib.sha256()
    for d in sorted(docs, key=lambda d: d["_id"]):
        h.update(bson.encode(d))
    return h.hexdigest()


def writer_ops(w, n, seed):
    """Writer w's operations: inserts of its own keys, then $inc updates among them."""
    rng = random.Random(seed + w)
    keys = [w * 100_000 + i for i in range(n)]
    ops = [("insert", k) for k in keys]
    ops += [("inc", rng.choice(keys)) for _ in range(n)]
    return ops


def apply(coll, op):
    kind, k = op
    if kind == "insert":
        coll.insert_one({"_id": k, "k": k, "n": 0, "pad": "x" * 200})
    else:
        coll.update_one({"k": k}, {"$inc": {"n": 1}})


def test_splits_and_migrations_under_four_writers(cluster, router):
    router.admin.command("enableSharding", "mig")
    router.admin.command("shardCollection", "mig.c", key={"k": 1})
    coll = router.mig.c
    n, seed = 600, 7
    stop = threading.Event()
    errors = []
    inserted = set()
    lock = threading.Lock()

    def writer(w):
        c = cluster.routers[0].client()
        try:
            for op in writer_ops(w, n, seed):
                apply(c.mig.c, op)
                if op[0] == "insert":
                    with lock:
                        inserted.add(op[1])
        except PyMongoError as e:
            errors.append(repr(e))
        finally:
            c.close()

    def reader():
        c = cluster.routers[0].client()
        try:
            while not stop.is_set():
                with lock:
                    before = set(inserted)
                ids = [d["_id"] for d in c.mig.c.find({}, {"_id": 1}).batch_size(200)]
                if len(ids) != len(set(ids)):
                    errors.append("a read saw a document twice")
                missing = before - set(ids)
                if missing:
                    errors.append(f"a read missed {len(missing)} acknowledged documents")
        except PyMongoError as e:
            errors.append(repr(e))
        finally:
            c.close()

    writers = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    rd = threading.Thread(target=reader)
    [t.start() for t in writers]
    rd.start()
    # Meanwhile: split at each writer's range and move the pieces around.
    moves = 0
    for w in range(1, 4):
        router.admin.command("split", "mig.c", middle={"k": w * 100_000})
    for round_ in range(3):
        for w in range(4):
            time.sleep(0.2)
            to = f"shard{(w + round_ + 1) % 3}"
            try:
                router.admin.command("moveChunk", "mig.c", find={"k": w * 100_000}, to=to)
                moves += 1
            except OperationFailure as e:
                assert e.code in (96, 117), e  # already there, or another migration running
    [t.join() for t in writers]
    stop.set()
    rd.join()
    assert not errors, errors[:5]
    assert moves >= 4
    got = list(coll.find({}))
    # The same operations on one standalone server.
    with tempfile.TemporaryDirectory(prefix="flashdoc-single-") as d:
        single = Server(d).start()
        sc = single.client()
        for w in range(4):
            for op in writer_ops(w, n, seed):
                apply(sc.mig.c, op)
        want = list(sc.mig.c.find({}))
        sc.close()
        single.stop()
    assert len(got) == len(want) == 4 * n
    assert checksum(got) == checksum(want)


def test_shard_killed_mid_migration_loses_nothing(cluster, router):
    router.admin.command("enableSharding", "kill")
    router.admin.command("shardCollection", "kill.c", key={"k": 1})
    coll = router.kill.c.with_options(write_concern=WriteConcern(j=True))
    n = 4000
    coll.insert_many([{"_id": i, "k": i, "pad": "y" * 2000} for i in range(n)])
    donor_name = chunks(router, "kill.c")[0]["shard"]
    donor_i = int(donor_name[-1])
    to = f"shard{(donor_i + 1) % 3}"
    result = {}
    acked = set()
    stop = threading.Event()

    def move():
        c = cluster.routers[0].client()
        try:
            c.admin.command("moveChunk", "kill.c", find={"k": 0}, to=to)
            result["ok"] = True
        except PyMongoError as e:
            result["error"] = repr(e)
        finally:
            c.close()

    def writer():
        # j:true inserts and $inc updates while the chunk moves and the donor dies.
        c = cluster.routers[0].client(retryWrites=False)
        w = c.kill.c.with_options(write_concern=WriteConcern(j=True))
        i = n
        while not stop.is_set():
            try:
                w.insert_one({"_id": i, "k": i, "pad": "z"})
                acked.add(i)
            except PyMongoError:
                time.sleep(0.05)
            i += 1
        c.close()

    wt = threading.Thread(target=writer)
    wt.start()
    t = threading.Thread(target=move)
    t.start()
    deadline = time.time() + 60
    while router.config.migrations.count_documents({"ns": "kill.c"}) == 0 and time.time() < deadline:
        time.sleep(0.005)
    assert router.config.migrations.count_documents({"ns": "kill.c"}) == 1
    donor = cluster.shards[donor_i]
    donor.kill()
    t.join()
    donor.start()
    time.sleep(1)
    stop.set()
    wt.join()
    # The migration either committed before the kill or is gone: nothing is stuck, lost or
    # duplicated, and the chunk can move again.
    deadline = time.time() + 60
    while router.config.migrations.count_documents({"ns": "kill.c"}) and time.time() < deadline:
        time.sleep(0.1)
    assert router.config.migrations.count_documents({"ns": "kill.c"}) == 0
    ids = [d["_id"] for d in router.kill.c.find({}, {"_id": 1})]
    assert len(ids) == len(set(ids))
    assert set(range(n)) | acked <= set(ids)
    total = len(ids)
    owner = chunks(router, "kill.c")[0]["shard"]
    deadline = time.time() + 60
    while owner != to:
        try:
            router.admin.command("moveChunk", "kill.c", find={"k": 0}, to=to, _waitForDelete=True)
            break
        except OperationFailure as e:
            # The recipient may still be deleting what the aborted migration left (117).
            assert e.code == 117 and time.time() < deadline, e
            time.sleep(0.2)
    assert router.kill.c.count_documents({}) == total
    per_shard = 0
    for s in cluster.shards:
        c = s.client()
        per_shard += c.kill.c.count_documents({})
        c.close()
    assert per_shard == total  # the restarted shard deleted its orphans


@pytest.mark.parametrize("engine", [None, "mmapv1"])
def test_local_cluster_up_and_down(tmp_path, engine):
    # engine None: the suite's engine (FLASHDOC_ENGINE), else `cluster up --storageEngine`.
    import subprocess
    from conftest import BINARY, ENGINE, engine_args, free_port_run
    port = free_port_run(3)  # the router's port, then one per shard
    d = str(tmp_path / "c")
    flags = ["--storageEngine", engine] if engine else engine_args()
    out = subprocess.run([BINARY, "cluster", "up", "--shards", "2", "--dir", d, "--port", str(port), *flags],
                         capture_output=True, text=True, timeout=180)
    try:
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == f"mongodb://127.0.0.1:{port}/"
        c = pymongo.MongoClient(out.stdout.strip(), serverSelectionTimeoutMS=20000)
        assert len(c.admin.command("listShards")["shards"]) == 2
        c.t.c.insert_one({"x": 1})
        assert c.t.c.find_one()["x"] == 1
        c.close()
        for shard_port in (port + 1, port + 2):
            shard = pymongo.MongoClient("127.0.0.1", shard_port, serverSelectionTimeoutMS=20000)
            name = shard.admin.command("serverStatus")["storageEngine"]["name"]
            shard.close()
            assert name == (engine or ENGINE or "wiredTiger"), (shard_port, name)
    finally:
        down = subprocess.run([BINARY, "cluster", "down", "--dir", d], capture_output=True, text=True, timeout=120)
    assert down.returncode == 0, down.stderr


def test_router_refuses_views_and_time_series_clearly(router):
    # Last in the module, and it stores nothing: the tests above rely on which shard the
    # router makes each new database's primary (the one holding the least data).
    db = router.viewsdb
    for opts in ({"viewOn": "base", "pipeline": []}, {"timeseries": {"timeField": "t"}}):
        with pytest.raises(OperationFailure) as e:
            db.command("create", "v", **opts)
        assert e.value.code == 72 and "router" in str(e.value)
    with pytest.raises(OperationFailure) as e:
        db.command("collMod", "base", validator={})
    assert e.value.code == 59
