"""Failover under load, checked with a history checker (issue 36, "Proof").

Three `flashdoc serve --replSet` members; four client threads run single-document operations on
a few registers — `$set` writes and compare-and-sets (findAndModify with the old value in the
filter), both `w: "majority"`, and `readConcern: "linearizable"` reads — plus a stream of unique
tokens (`$push`) that tells a write applied twice. Every operation is recorded with its
invocation and completion times and its outcome: ok, fail (refused before it ran), or unknown
(a timeout, a connection error, a write whose majority never came). Meanwhile the primary is
killed with SIGKILL (counting the writes in flight), restarted, and waited for until it is
SECONDARY again; once per run it is stopped with SIGSTOP past the election timeout (a
partition), then continued. At the end: every acknowledged token is present and none twice,
and tools/histcheck (porcupine) finds the registers' history linearizable.

Short form (CI): 3 kills and 1 stop. Long form: FLASHDOC_FAILOVER_KILLS=100, which also writes
its numbers to docs/results/failover/. A restarted member rolls back by itself what the set
never got; one that still does not come back as SECONDARY (RECOVERING: a rollback refused or
failed) is resynced by hand — removed from the set, its data directory emptied, added back as
a new member — and counted in the results (`members_resynced_by_hand`).
"""
import itertools
import json
import math
import os
import random
import shutil
import signal
import statistics
import subprocess
import threading
import time

import pymongo
import pytest
from pymongo.errors import (
    ConnectionFailure,
    OperationFailure,
    PyMongoError,
    ServerSelectionTimeoutError,
)
from pymongo.read_concern import ReadConcern
from pymongo.write_concern import WriteConcern

from conftest import ROOT
from test_replset import SET, host, start_member

KILLS = int(os.environ.get("FLASHDOC_FAILOVER_KILLS", "3"))
LONG = "FLASHDOC_FAILOVER_KILLS" in os.environ
# Elections after 2-3 s of silence: a loaded two-core CI machine keeps heartbeats (every
# 400 ms) well inside that.
SETTINGS = {"electionTimeoutMillis": 2000, "heartbeatIntervalMillis": 400}
CLIENTS = 4
KEYS = ["r0", "r1", "r2"]
GO = os.environ.get("FLASHDOC_GO") or shutil.which("go") or "/usr/local/go/bin/go"
HISTCHECK = os.path.join(ROOT, "tools", "histcheck")
# Errors that say the operation never ran: refused by the member's role before anything was
# written (NotWritablePrimary, NotPrimaryNoSecondaryOk, NotPrimaryOrSecondary).
REFUSED_BEFORE_RUNNING = {10107, 13435, 13436}

pytestmark = pytest.mark.mmapv1_lacks("replica sets")


@pytest.fixture(scope="module")
def histcheck(tmp_path_factory):
    """tools/histcheck built from its vendored sources (no network)."""
    if not os.path.exists(GO):
        pytest.fail(f"Go is needed to build tools/histcheck (FLASHDOC_GO, PATH or {GO})")
    out = str(tmp_path_factory.mktemp("histcheck") / "histcheck")
    subprocess.run([GO, "build", "-mod=vendor", "-o", out, "."], cwd=HISTCHECK, check=True,
                   env={**os.environ, "GOFLAGS": "-mod=vendor", "GOTOOLCHAIN": "local"})
    return out


def run_check(histcheck, history, path):
    with open(path, "w") as f:
        json.dump(history, f)
    return subprocess.run([histcheck, path], capture_output=True, text=True, timeout=600)


def test_histcheck_catches_a_stale_read(histcheck, tmp_path):
    good = [
        {"client": 0, "key": "r0", "kind": "write", "value": "a", "status": "ok", "invoke": 1, "complete": 2},
        {"client": 1, "key": "r0", "kind": "cas", "old": "a", "new": "b", "swapped": True,
         "status": "ok", "invoke": 3, "complete": 4},
        {"client": 2, "key": "r0", "kind": "read", "value": "b", "status": "ok", "invoke": 5, "complete": 6},
    ]
    done = run_check(histcheck, good, tmp_path / "good.json")
    assert done.returncode == 0, done.stderr
    # Read after the compare-and-set was acknowledged, the old value is a stale read.
    bad = good + [{"client": 3, "key": "r0", "kind": "read", "value": "a", "status": "ok",
                   "invoke": 7, "complete": 8}]
    done = run_check(histcheck, bad, tmp_path / "bad.json")
    assert done.returncode == 1 and "key r0 is not linearizable" in done.stderr, done.stderr


def set_uri(servers, retry):
    seeds = ",".join(host(s) for s in servers)
    return f"mongodb://{seeds}/?replicaSet={SET}&retryWrites={'true' if retry else 'false'}"


def set_client(servers, retry, **kw):
    opts = dict(serverSelectionTimeoutMS=3000, socketTimeoutMS=10000, connectTimeoutMS=2000)
    opts.update(kw)
    return pymongo.MongoClient(set_uri(servers, retry), **opts)


def direct(s, **kw):
    opts = dict(directConnection=True, serverSelectionTimeoutMS=10000)
    opts.update(kw)
    return pymongo.MongoClient(host(s), **opts)


def find_primary(servers, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        for s in servers:
            try:
                with direct(s, serverSelectionTimeoutMS=1000) as c:
                    if c.admin.command("hello").get("isWritablePrimary"):
                        return s
            except PyMongoError:
                pass
        time.sleep(0.1)
    raise AssertionError(f"no primary within {timeout} s")


def member_state(s):
    """"SECONDARY", "PRIMARY", "RECOVERING" or None (not answering)."""
    try:
        with direct(s, serverSelectionTimeoutMS=1000) as c:
            hello = c.admin.command("hello")
    except PyMongoError:
        return None
    if hello.get("isWritablePrimary"):
        return "PRIMARY"
    if hello.get("secondary"):
        return "SECONDARY"
    return "RECOVERING"


class ReplicaSet:
    """The three members, and how the test changes them (kill, stop, resync)."""

    def __init__(self, servers):
        self.servers = servers
        self.resynced = 0

    def initiate(self):
        with direct(self.servers[0]) as c:
            c.admin.command("replSetInitiate", {
                "_id": SET,
                "members": [{"_id": i, "host": host(s)} for i, s in enumerate(self.servers)],
                "settings": SETTINGS,
            })
        find_primary(self.servers)

    def back_as_secondary(self, s, timeout=90):
        """Waits until the restarted `s` is SECONDARY; resyncs it if it comes back holding
        writes the set never got (RECOVERING)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            state = member_state(s)
            if state == "SECONDARY":
                return
            if state == "RECOVERING" and self.diverged(s):
                self.resync(s)
                deadline = time.time() + timeout
            time.sleep(0.2)
        raise AssertionError(f"{host(s)} is not SECONDARY {timeout} s after its restart")

    @staticmethod
    def diverged(s):
        try:
            with direct(s, serverSelectionTimeoutMS=1000) as c:
                return c.admin.command("replSetGetStatus").get("myState") == 3
        except PyMongoError:
            return False

    def reconfig(self, change):
        for _ in range(100):
            primary = find_primary(self.servers)
            try:
                with direct(primary) as c:
                    config = c.admin.command("replSetGetConfig")["config"]
                    config["version"] += 1
                    change(config)
                    c.admin.command("replSetReconfig", config)
                    return
            except PyMongoError:
                time.sleep(0.5)
        raise AssertionError("no reconfiguration went through")

    def resync(self, s):
        """mongod's resync by hand: out of the set, an empty data directory, back in as a new
        member that copies the set's log."""
        self.resynced += 1
        self.reconfig(lambda cfg: cfg.update(
            members=[m for m in cfg["members"] if m["host"] != host(s)]))
        s.kill()
        shutil.rmtree(s.dbpath)
        os.mkdir(s.dbpath)
        s.start()

        def add(cfg):
            new_id = max(m["_id"] for m in cfg["members"]) + 1
            cfg["members"].append({"_id": new_id, "host": host(s)})
        self.reconfig(add)


@pytest.fixture(scope="module")
def replica_set(tmp_path_factory):
    servers = [start_member(str(tmp_path_factory.mktemp(f"failover{i}"))) for i in range(3)]
    rs = ReplicaSet(servers)
    try:
        rs.initiate()
        yield rs
    finally:
        for s in servers:
            if s.proc.poll() is None:
                s.proc.send_signal(signal.SIGCONT)
                s.stop()


def retryable_writes_served(servers):
    """Whether the members take retryable writes (`txnNumber`), or refuse them (20)."""
    with set_client(servers, retry=True, serverSelectionTimeoutMS=30000) as c:
        try:
            c.e2e.probe.insert_one({"what": "retryable writes"})
            return True
        except OperationFailure as e:
            if e.code == 20:
                return False
            raise


def outcome(e, retry):
    """"fail" for an operation known never to have run, else "unknown"."""
    if isinstance(e, ServerSelectionTimeoutError):
        # Never sent; with retries, the error of a failed retry's selection is its first
        # attempt's, which may have run.
        return "unknown" if retry else "fail"
    code = getattr(e, "code", None)
    if code is None and isinstance(getattr(e, "details", None), dict):
        code = e.details.get("code")
    return "fail" if code in REFUSED_BEFORE_RUNNING else "unknown"


class History:
    """Every operation of every client, and those in flight now."""

    def __init__(self):
        self.lock = threading.Lock()
        self.ops = []
        self.tokens = []
        self.inflight = {}
        self.ids = itertools.count()
        # Clients that stopped on an error the test did not expect.
        self.broken = []

    def run(self, op, body, retry):
        """Runs `body` as recorded operation `op` (its result fills the op in)."""
        n = next(self.ids)
        with self.lock:
            self.inflight[n] = op
        op["invoke"] = time.monotonic_ns()
        try:
            body(op)
            op["status"] = "ok"
        except (PyMongoError, ConnectionFailure) as e:
            op["status"] = outcome(e, retry)
            op["error"] = str(e)[:200]
        op["complete"] = time.monotonic_ns()
        with self.lock:
            del self.inflight[n]
            (self.tokens if op["kind"] == "token" else self.ops).append(op)

    def writes_in_flight(self):
        with self.lock:
            return sum(1 for op in self.inflight.values() if op["kind"] != "read")


def client_loop(client_id, servers, retry, history, stop):
    try:
        run_client(client_id, servers, retry, history, stop)
    except BaseException as e:
        history.broken.append(f"client {client_id}: {e!r}")
        raise


def run_client(client_id, servers, retry, history, stop):
    rng = random.Random(client_id)
    seen = {k: "init" for k in KEYS}
    with set_client(servers, retry) as c:
        majority = WriteConcern("majority", wtimeout=15000)
        regs = c.e2e.get_collection("registers", write_concern=majority)
        lin = c.e2e.get_collection("registers", read_concern=ReadConcern("linearizable"))
        tokens = c.e2e.get_collection("tokens", write_concern=majority)
        for n in itertools.count():
            if stop.is_set():
                return
            key, value, roll = rng.choice(KEYS), f"c{client_id}-{n}", rng.random()
            if roll < 0.3:
                def body(op):
                    regs.update_one({"_id": op["key"]}, {"$set": {"v": op["value"]}})
                op = {"kind": "write", "value": value}
            elif roll < 0.55:
                def body(op):
                    before = regs.find_one_and_update(
                        {"_id": op["key"], "v": op["old"]}, {"$set": {"v": op["new"]}})
                    op["swapped"] = before is not None
                op = {"kind": "cas", "old": seen[key], "new": value}
            elif roll < 0.9:
                def body(op):
                    d = lin.find_one({"_id": op["key"]}, max_time_ms=8000)
                    op["value"] = d and d.get("v")
                op = {"kind": "read"}
            else:
                def body(op):
                    tokens.update_one({"_id": f"tokens-{client_id}"},
                                      {"$push": {"t": op["token"]}}, upsert=True)
                op = {"kind": "token", "token": value}
            op.update(client=client_id, key=key)
            history.run(op, body, retry)
            if op["kind"] == "read" and op["status"] == "ok" and op["value"]:
                seen[key] = op["value"]
            elif op["kind"] == "cas" and op["status"] == "ok" and op["swapped"]:
                seen[key] = op["new"]


def time_to_primary(servers, since, label):
    """Seconds from `since` until a primary took a majority write."""
    with set_client(servers, retry=False, serverSelectionTimeoutMS=1000) as c:
        probe = c.e2e.get_collection("probe", write_concern=WriteConcern("majority", wtimeout=2000))
        deadline = since + 120
        while time.time() < deadline:
            try:
                probe.insert_one({"what": label})
                return time.time() - since
            except PyMongoError:
                time.sleep(0.05)
    raise AssertionError(f"{label}: no primary took a majority write within 120 s")


def kill_primary(rs, history, n):
    primary = find_primary(rs.servers)
    in_flight = history.writes_in_flight()
    primary.proc.send_signal(signal.SIGKILL)
    killed = time.time()
    primary.proc.wait(timeout=30)
    took = time_to_primary(rs.servers, killed, f"kill {n}")
    primary.start()
    rs.back_as_secondary(primary)
    return in_flight, took


def stop_primary(rs, history):
    """SIGSTOP the primary past the election timeout (a partition), then SIGCONT it."""
    primary = find_primary(rs.servers)
    in_flight = history.writes_in_flight()
    primary.proc.send_signal(signal.SIGSTOP)
    stopped = time.time()
    try:
        took = time_to_primary(rs.servers, stopped, "stop")
        time.sleep(SETTINGS["electionTimeoutMillis"] / 1000)
    finally:
        primary.proc.send_signal(signal.SIGCONT)
    rs.back_as_secondary(primary)
    return in_flight, took


def percentile(xs, p):
    s = sorted(xs)
    return s[max(0, math.ceil(p / 100 * len(s)) - 1)]


def seed_registers(servers, history):
    with set_client(servers, retry=False, serverSelectionTimeoutMS=30000) as c:
        regs = c.e2e.get_collection("registers", write_concern=WriteConcern("majority"))
        for k in KEYS:
            def body(op):
                regs.replace_one({"_id": op["key"]}, {"v": "init"}, upsert=True)
            history.run({"kind": "write", "key": k, "value": "init", "client": CLIENTS},
                        body, retry=False)
            assert history.ops[-1]["status"] == "ok", history.ops[-1]


def check_tokens(servers, history):
    """Every acknowledged token present, none twice, none that was refused."""
    with set_client(servers, retry=False, serverSelectionTimeoutMS=30000) as c:
        coll = c.e2e.get_collection("tokens", read_concern=ReadConcern("majority"))
        held = [t for d in coll.find({}) for t in d.get("t", [])]
    twice = {t for t in held if held.count(t) > 1}
    by_status = {s: {op["token"] for op in history.tokens if op["status"] == s}
                 for s in ("ok", "fail", "unknown")}
    lost = by_status["ok"] - set(held)
    assert not lost, f"{len(lost)} acknowledged tokens lost: {sorted(lost)[:10]}"
    assert not twice, f"tokens applied twice: {sorted(twice)[:10]}"
    assert not (by_status["fail"] & set(held)), "a refused write was applied"
    return {s: len(v) for s, v in by_status.items()}, len(held)


def run_failovers(rs, history):
    kills, stop_at = [], random.Random(7).randrange(KILLS + 1)
    stop = None
    for n in range(KILLS + 1):
        time.sleep(2.0)
        if n == stop_at:
            stop = stop_primary(rs, history)
            print(f"stop: {stop[0]} writes in flight, a primary after {stop[1]:.2f} s")
        if n < KILLS:
            kills.append(kill_primary(rs, history, n))
            print(f"kill {n}: {kills[-1][0]} writes in flight, a primary after {kills[-1][1]:.2f} s")
    return kills, stop


def test_failover_under_load_loses_nothing_and_stays_linearizable(replica_set, histcheck, tmp_path):
    rs = replica_set
    retry = retryable_writes_served(rs.servers)
    history, stop = History(), threading.Event()
    seed_registers(rs.servers, history)
    threads = [threading.Thread(target=client_loop, args=(i, rs.servers, retry, history, stop))
               for i in range(CLIENTS)]
    started = time.time()
    for t in threads:
        t.start()
    try:
        kills, stopped = run_failovers(rs, history)
        time.sleep(2.0)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)
    assert not history.broken, history.broken
    tokens, held = check_tokens(rs.servers, history)
    done = run_check(histcheck, history.ops, tmp_path / "history.json")
    assert done.returncode == 0, f"the history is not linearizable:\n{done.stderr}"
    took = [k[1] for k in kills]
    statuses = {s: sum(1 for op in history.ops if op["status"] == s) for s in ("ok", "fail", "unknown")}
    numbers = {
        "kills": len(kills),
        "stops": 1,
        "retryable_writes": retry,
        "members_resynced_by_hand": rs.resynced,
        "seconds": round(time.time() - started, 1),
        "writes_in_flight_at_kills": {"total": sum(k[0] for k in kills),
                                      "max": max(k[0] for k in kills),
                                      "kills_with_writes_in_flight": sum(1 for k in kills if k[0])},
        "writes_in_flight_at_stop": stopped[0],
        "seconds_to_new_primary_after_kill": {"median": round(statistics.median(took), 2),
                                              "p99": round(percentile(took, 99), 2),
                                              "max": round(max(took), 2)},
        "seconds_to_new_primary_after_stop": round(stopped[1], 2),
        "register_ops": statuses,
        "tokens": {**tokens, "held": held, "lost": 0, "applied_twice": 0},
        "histcheck": done.stdout.strip(),
    }
    print(json.dumps(numbers, indent=1))
    assert statuses["ok"] > 0 and tokens["ok"] > 0
    if LONG:
        out = os.path.join(ROOT, "docs", "results", "failover")
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, f"failover-{len(kills)}-kills.json"), "w") as f:
            json.dump(numbers, f, indent=1)
            f.write("\n")
