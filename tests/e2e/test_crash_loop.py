"""The server under SIGKILL (issue 34 §4): a loop that kills `flashdoc serve` while several
clients write with `j: true`, restarts it on the same dbpath and checks what survived.

Per cycle: the server starts (the catalog opens); the checks below run against the model; then
WORKERS clients insert, update and delete documents of a collection with a unique and two
non-unique indexes (one compound), each client owning its own documents, while one more client
runs catalog operations (createIndex/dropIndex, renameCollection, `$out`); at a random moment the
server is SIGKILLed. The server checkpoints every second and splits 4 KB leaves; about half the
starts give it a cache of about 200 KB (eviction writes pages mid-cycle); one start in six is
first killed during its recovery.

The model keeps, per document, its last acknowledged value and the values a write in flight at
the kill may have left (an unacknowledged write is applied whole or not at all). After each
restart:
- every document is its acknowledged value or the value of the write in flight, whole; no
  document exists that no write created;
- `validate` with `full: true` is valid for every collection;
- a scan through each index returns the same documents as a collection scan, and point queries
  through the unique and non-unique indexes find exactly the documents that hold the key;
- each catalog operation is either done or not: the renamed collection exists under one name,
  whole; the `$out` target holds one of the results; a created index exists or not.

The engine is a parameter: the copy-on-write engine (`wiredTiger`) and the in-place one
(`mmapv1`, issue 37), whose write-back rewrites pages in place every second and whenever its
dirty pages pass half the cache (so about half its starts write back mid-cycle too).

Seeded: a failure names the seed (`FLASHDOC_CRASH_SEED=N` replays the schedule; thread timing
is not replayed). CI runs FLASHDOC_CRASH_CYCLES (default 15) cycles per engine; the long run is
    FLASHDOC_CRASH_CYCLES=1000 python -m pytest -q tests/e2e/test_crash_loop.py -s
(`-k mmapv1` or `-k wiredTiger` for one engine).
"""
import os
import random
import subprocess
import threading
import time

import pymongo
import pytest
from pymongo import WriteConcern
from pymongo.errors import DuplicateKeyError, OperationFailure, PyMongoError

from conftest import BINARY, Server

CYCLES = int(os.environ.get("FLASHDOC_CRASH_CYCLES", "15"))
WORKERS = 4
# Documents each worker owns: _id = worker * SPAN + slot.
SPAN = 120
SRC_DOCS = 200
RENAMED_DOCS = 50
JOURNALED = WriteConcern(w=1, j=True)
ABSENT = None
# Every cycle checkpoints each second and splits 4 KB leaves, so kills land in checkpoints and
# splits; a cycle in two runs with a cache of about 200 KB, so eviction writes pages too.
CONFIG = {
    "wiredTiger": """storage:
  syncPeriodSecs: 1
  wiredTiger:
    engineConfig:
      cacheSizeGB: {cache_gb}
    collectionConfig:
      leafPageMax: 4096
    indexConfig:
      leafPageMax: 4096
""",
    # The in-place engine has no page sizes to set (its buckets are 8 KiB, its pages 4 KiB); it
    # writes back every second, and with the small cache whenever 1 MiB is dirty (its floor).
    "mmapv1": """storage:
  engine: mmapv1
  syncPeriodSecs: 1
  wiredTiger:
    engineConfig:
      cacheSizeGB: {cache_gb}
""",
}


class DocModel:
    """One document: its acknowledged value (None: absent) and the values a write that was
    in flight at the kill may have left."""

    __slots__ = ("acked", "maybe")

    def __init__(self):
        self.acked = ABSENT
        self.maybe = []

    def possible(self):
        return [self.acked, *self.maybe]


class CatalogModel:
    """The catalog operations' state: acknowledged, and what an operation in flight may have
    done."""

    def __init__(self):
        self.renamed = {"ren_a"}  # the names the renamed collection may have
        self.renamed_acked = "ren_a"
        self.out_limits = {SRC_DOCS}  # the `$out` results the target may hold
        self.out_acked = SRC_DOCS
        self.gv_index = {False}  # whether the {g, v} index may exist
        self.gv_acked = False


def doc_value(rng, _id, version):
    """A document's whole value: `u` is unique by construction, `g` shared by many."""
    return {
        "_id": _id,
        "u": _id * 100_000 + version,
        "g": rng.randrange(12),
        "v": version,
        "pad": "p" * rng.randrange(0, 400),
    }


class Worker(threading.Thread):
    """One client: inserts, updates (a whole new value), deletes and deliberate duplicate-key
    updates on the documents it owns, each with `j: true`, until its first connection error."""

    def __init__(self, port, index, docs, rng, stop):
        super().__init__(daemon=True)
        self.port = port
        self.ids = list(range(index * SPAN, (index + 1) * SPAN))
        self.docs = docs
        self.rng = rng
        self.stop = stop
        self.acked = 0
        self.failure = None

    def run(self):
        client = pymongo.MongoClient(
            "127.0.0.1", self.port, retryWrites=False, serverSelectionTimeoutMS=5000,
            socketTimeoutMS=30000,
        )
        coll = client["crash"]["docs"].with_options(write_concern=JOURNALED)
        try:
            while not self.stop.is_set():
                self.one_op(coll)
        except PyMongoError:
            pass  # the kill: the op in flight stays in its document's `maybe`
        except AssertionError as e:
            self.failure = e
        finally:
            client.close()

    def one_op(self, coll):
        _id = self.rng.choice(self.ids)
        m = self.docs[_id]
        version = self.rng.randrange(1 << 30)
        if m.acked is ABSENT:
            new = doc_value(self.rng, _id, version)
            m.maybe = [new]
            coll.insert_one(dict(new))
        elif self.rng.random() < 0.15:
            m.maybe = [ABSENT]
            r = coll.delete_one({"_id": _id})
            assert r.deleted_count == 1, f"delete of {_id} deleted {r.deleted_count}"
        elif self.rng.random() < 0.1:
            self.duplicate_key_update(coll, _id)
            return
        else:
            new = doc_value(self.rng, _id, version)
            m.maybe = [new]
            r = coll.replace_one({"_id": _id}, new)
            assert r.modified_count == 1, f"replace of {_id} modified {r.modified_count}"
        m.acked = m.maybe[0]
        m.maybe = []
        self.acked += 1

    def duplicate_key_update(self, coll, _id):
        """An update giving `_id` another present document's `u`: refused, nothing changes."""
        others = [o for o in self.ids if o != _id and self.docs[o].acked is not ABSENT]
        if not others:
            return
        taken = self.docs[self.rng.choice(others)].acked["u"]
        try:
            coll.update_one({"_id": _id}, {"$set": {"u": taken, "v": -1}})
        except DuplicateKeyError:
            self.acked += 1
            return
        raise AssertionError(f"update of {_id} to the taken u {taken} was not refused")


class CatalogClient(threading.Thread):
    """One client running catalog operations, each acknowledged before the next."""

    def __init__(self, port, cat, rng, stop):
        super().__init__(daemon=True)
        self.port = port
        self.cat = cat
        self.rng = rng
        self.stop = stop
        self.done = 0

    def run(self):
        client = pymongo.MongoClient(
            "127.0.0.1", self.port, retryWrites=False, serverSelectionTimeoutMS=5000,
            socketTimeoutMS=30000,
        )
        db = client["crash"]
        try:
            while not self.stop.is_set():
                op = self.rng.randrange(3)
                [self.toggle_index, self.rename, self.out][op](db)
                self.done += 1
                time.sleep(self.rng.random() * 0.05)
        except PyMongoError:
            pass
        finally:
            client.close()

    def toggle_index(self, db):
        cat = self.cat
        want = not cat.gv_acked
        cat.gv_index = {cat.gv_acked, want}
        coll = db.get_collection("docs", write_concern=JOURNALED)
        if want:
            coll.create_index([("g", 1), ("v", -1)], name="g_v")
        else:
            coll.drop_index("g_v")
        cat.gv_acked = want
        cat.gv_index = {want}

    def rename(self, db):
        cat = self.cat
        src = cat.renamed_acked
        dst = "ren_b" if src == "ren_a" else "ren_a"
        cat.renamed = {src, dst}
        db.client.admin.command(
            "renameCollection", f"crash.{src}", to=f"crash.{dst}",
            writeConcern={"w": 1, "j": True},
        )
        cat.renamed_acked = dst
        cat.renamed = {dst}

    def out(self, db):
        cat = self.cat
        limit = self.rng.randrange(1, SRC_DOCS + 1)
        cat.out_limits = {cat.out_acked, limit}
        db.command(
            "aggregate", "src",
            pipeline=[{"$match": {"k": {"$lt": limit}}}, {"$out": "out"}],
            cursor={}, writeConcern={"w": 1, "j": True},
        )
        cat.out_acked = limit
        cat.out_limits = {limit}


def start_server(dbpath, rng, engine):
    """Starts the server on `engine` with a small or a normal cache (chosen by `rng`); one start
    in six is first killed 0-300 ms after it was spawned, during its recovery or just after."""
    cache_gb = rng.choice([0.0002, 0.25])
    config = os.path.join(dbpath, f"crash-loop-{cache_gb}.yaml")
    with open(config, "w") as f:
        f.write(CONFIG[engine].format(cache_gb=cache_gb))
    server = Server(dbpath, ["-f", config])
    if rng.random() < 1 / 6:
        early = subprocess.Popen(
            [BINARY, "serve", "--dbpath", dbpath, "--port", str(server.port), "-f", config],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        time.sleep(rng.uniform(0, 0.3))
        early.kill()
        early.wait(timeout=30)
    return server.start()


def setup_database(server):
    """The collections before the first kill: the indexed documents' collection, the `$out`
    source and target, and the collection that is renamed back and forth."""
    c = server.client()
    db = c.get_database("crash", write_concern=JOURNALED)
    db.docs.create_index("u", unique=True, name="u_1")
    db.docs.create_index("g", name="g_1")
    db.src.insert_many([{"_id": k, "k": k, "sq": k * k} for k in range(SRC_DOCS)])
    db.src.aggregate([{"$out": "out"}])
    db.ren_a.insert_many([{"_id": k, "r": str(k)} for k in range(RENAMED_DOCS)])
    db.ren_a.create_index("r", name="r_1")
    c.close()


def run_cycle(server, docs, cat, rng):
    """Starts the clients, kills the server at a random moment, joins them. Returns the
    acknowledged operation count."""
    stop = threading.Event()
    workers = [
        Worker(server.port, w, docs, random.Random(rng.randrange(1 << 62)), stop)
        for w in range(WORKERS)
    ]
    catalog = CatalogClient(server.port, cat, random.Random(rng.randrange(1 << 62)), stop)
    for t in [*workers, catalog]:
        t.start()
    time.sleep(rng.uniform(0.2, 1.5))
    server.kill()
    stop.set()
    for t in [*workers, catalog]:
        t.join(timeout=60)
        assert not t.is_alive(), "a client did not notice the kill"
    for w in workers:
        if w.failure:
            raise w.failure
    return sum(w.acked for w in workers) + catalog.done


def check_documents(db, docs):
    """Every document is a value the model allows, whole; the model then takes what is there
    as acknowledged (recovery made it durable)."""
    present = {d["_id"]: d for d in db.docs.find({}, hint=[("$natural", 1)])}
    for _id, m in docs.items():
        got = present.pop(_id, ABSENT)
        assert got in m.possible(), (
            f"document {_id}: found {got}, acknowledged {m.acked}, in flight {m.maybe}"
        )
        m.acked = got
        m.maybe = []
    assert not present, f"documents no write created: {sorted(present)[:10]}"


def check_indexes(db, docs, cat, rng):
    """validate (full) is valid, each index returns the collection's documents, and point
    queries through the indexes find exactly the documents holding the key."""
    names = {i["name"] for i in db.docs.list_indexes()}
    want = {"_id_", "u_1", "g_1"}
    assert want <= names, names
    has_gv = "g_v" in names
    assert has_gv in cat.gv_index, f"index g_v present: {has_gv}, allowed {cat.gv_index}"
    cat.gv_acked = has_gv
    cat.gv_index = {has_gv}
    scan = sorted((d for d in db.docs.find({}, hint=[("$natural", 1)])), key=lambda d: d["_id"])
    hints = {"_id_": "_id_", "u_1": "u_1", "g_1": "g_1"}
    if has_gv:
        hints["g_v"] = "g_v"
    for name, hint in hints.items():
        through = sorted(db.docs.find({}, hint=hint), key=lambda d: d["_id"])
        assert through == scan, f"a scan through index {name} differs from the collection scan"
    live = [m.acked for m in docs.values() if m.acked is not ABSENT]
    for d in rng.sample(live, min(20, len(live))):
        assert list(db.docs.find({"u": d["u"]}, hint="u_1")) == [d], f"u of {d['_id']}"
        by_g = sorted(x["_id"] for x in live if x["g"] == d["g"])
        got = sorted(x["_id"] for x in db.docs.find({"g": d["g"]}, hint="g_1"))
        assert got == by_g, f"g = {d['g']}: index has {got}, documents {by_g}"
    for coll in db.list_collection_names():
        r = db.command("validate", coll, full=True)
        assert r["valid"], f"validate {coll}: {r}"


def check_catalog(db, cat):
    """The renamed collection exists under one allowed name, whole; `$out` left one result."""
    names = set(db.list_collection_names())
    assert names <= {"docs", "src", "out", "ren_a", "ren_b"}, f"left over: {names}"
    ren = names & {"ren_a", "ren_b"}
    assert len(ren) == 1 and ren <= cat.renamed, f"renamed collection: {ren}, allowed {cat.renamed}"
    (name,) = ren
    assert sorted(d["_id"] for d in db[name].find()) == list(range(RENAMED_DOCS)), name
    assert [i["name"] for i in db[name].list_indexes()] == ["_id_", "r_1"], name
    cat.renamed_acked = name
    cat.renamed = {name}
    out = sorted(db.out.find(), key=lambda d: d["_id"])
    whole = [{"_id": k, "k": k, "sq": k * k} for k in range(len(out))]
    assert out == whole and len(out) in cat.out_limits, (
        f"$out target holds {len(out)} documents (one result, whole: {out == whole}), "
        f"allowed {cat.out_limits}"
    )
    cat.out_acked = len(out)
    cat.out_limits = {len(out)}


@pytest.mark.parametrize("engine", ["wiredTiger", "mmapv1"])
def test_sigkill_loop_keeps_every_acknowledged_write(dbpath, engine):
    seed = int(os.environ.get("FLASHDOC_CRASH_SEED", random.randrange(1 << 32)))
    rng = random.Random(seed)
    docs = {i: DocModel() for i in range(WORKERS * SPAN)}
    cat = CatalogModel()
    server = start_server(dbpath, rng, engine)
    c = server.client()
    status = c.admin.command("serverStatus")["storageEngine"]["name"]
    c.close()
    assert status == engine, f"serverStatus names {status}, not {engine}"
    setup_database(server)
    acked = 0
    cycle = 0
    started = time.time()
    try:
        for cycle in range(CYCLES):
            acked += run_cycle(server, docs, cat, rng)
            server = start_server(dbpath, rng, engine)
            c = server.client()
            db = c["crash"]
            check_documents(db, docs)
            check_indexes(db, docs, cat, rng)
            check_catalog(db, cat)
            c.close()
            if CYCLES > 50 and cycle % 25 == 0:
                print(f"crash loop ({engine}): seed {seed}: cycle {cycle} passed, {acked} acknowledged "
                      f"operations, {time.time() - started:.0f} s", flush=True)
    except BaseException as e:
        raise AssertionError(f"crash loop ({engine}) seed {seed}, cycle {cycle}: {e}") from e
    finally:
        if server.proc and server.proc.poll() is None:
            server.stop()
    print(f"crash loop ({engine}): seed {seed}: {CYCLES} cycles, {acked} acknowledged operations, "
          f"{time.time() - started:.0f} s")
    assert acked > CYCLES, "the clients must get writes acknowledged between kills"
