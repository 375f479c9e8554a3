"""The 1 000-connection load test (behind FLASHDOC_LOAD=1; not in CI): 1 000 connections
each doing CRUD while 8 others send malformed or oversized frames. Every good request must
succeed, nothing acknowledged may be lost, and the server's RSS is reported before and after
(written to target/load-test.json).

    FLASHDOC_LOAD=1 python -m pytest -q tests/e2e/test_load.py -s
"""
import json
import os
import resource
import socket
import struct
import threading
import time

import bson
import pytest

from test_robustness import op_msg

pytestmark = pytest.mark.skipif(not os.environ.get("FLASHDOC_LOAD"), reason="set FLASHDOC_LOAD=1")

GOOD = int(os.environ.get("FLASHDOC_LOAD_CONNECTIONS", "1000"))
BAD = 8
ROUNDS = int(os.environ.get("FLASHDOC_LOAD_ROUNDS", "20"))


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=120)
        self.rid = 0

    def cmd(self, doc):
        self.rid += 1
        self.s.sendall(op_msg(doc, self.rid))
        length, _, _, op = struct.unpack("<iiii", recv_exact(self.s, 16))
        body = recv_exact(self.s, length - 16)
        return bson.decode(body[5:])


def good_worker(port, w, errors, ready, go, load_round):
    try:
        c = Conn(port)
        ready.release()
        go.wait()
        for i in range(ROUNDS):
            _id = f"{load_round}-{w}-{i}"
            r = c.cmd({"insert": "load", "documents": [{"_id": _id, "w": w, "n": 0}], "$db": "t", "writeConcern": {"j": i % 5 == 0}})
            assert r["ok"] == 1.0 and r["n"] == 1, r
            r = c.cmd({"update": "load", "updates": [{"q": {"_id": _id}, "u": {"$inc": {"n": 1}}}], "$db": "t"})
            assert r["nModified"] == 1, r
            r = c.cmd({"find": "load", "filter": {"_id": _id}, "$db": "t"})
            assert r["cursor"]["firstBatch"][0]["n"] == 1, r
            if i % 4 == 3:
                r = c.cmd({"delete": "load", "deletes": [{"q": {"_id": _id}, "limit": 1}], "$db": "t"})
                assert r["n"] == 1, r
        c.s.close()
    except Exception as e:  # noqa: BLE001
        errors.append(f"{w}: {e!r}")


def bad_frames():
    # {a: {a: ...}} 100 000 levels deep, laid out without quadratic copying: level k (from
    # the inside) is 5 + 8k bytes long.
    levels = 100_000
    deep = b"".join(struct.pack("<i", 5 + 8 * k) + b"\x03a\x00" for k in range(levels, 0, -1))
    deep += b"\x05\x00\x00\x00\x00" + b"\x00" * levels
    deep_body = struct.pack("<I", 0) + b"\x00" + deep
    seqs = struct.pack("<I", 0) + b"\x00" + bson.encode({"insert": "c", "$db": "t"})
    for i in range(100_000):
        ident = b"s%d\x00" % i
        seqs += b"\x01" + struct.pack("<i", 4 + len(ident)) + ident
    big = bson.encode({"insert": "c", "$db": "t", "documents": [{"x": "y" * (17 << 20)}]})
    big_body = struct.pack("<I", 0) + b"\x00" + big
    garbage = struct.pack("<I", 0) + b"\x00" + b"\x30\x00\x00\x00" + os.urandom(44)
    return [
        struct.pack("<iiii", 16 + len(deep_body), 1, 0, 2013) + deep_body,
        struct.pack("<iiii", 16 + len(seqs), 1, 0, 2013) + seqs,
        struct.pack("<iiii", 16 + len(big_body), 1, 0, 2013) + big_body,
        struct.pack("<iiii", 16 + len(garbage), 1, 0, 2013) + garbage,
        struct.pack("<iiii", 2_000_000_000, 1, 0, 2013),  # oversized: closed
        struct.pack("<iiii", 20, 1, 0, 2002) + b"\0\0\0\0",  # legacy opcode: closed
    ]


def bad_worker(port, frames, stop, sent):
    i = 0
    while not stop.is_set():
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=120)
            s.sendall(frames[i % len(frames)])
            try:
                s.recv(1 << 16)
            except OSError:
                pass
            s.close()
            sent.append(1)
        except OSError:
            pass
        i += 1


# Seconds after a round before RSS is read again: past tokio's 10 s keep-alive, so the
# blocking pool's idle threads (and their stacks) are gone.
IDLE_SECONDS = 15


def load_round(server, load_round):
    """One round: GOOD connections doing CRUD while BAD ones send hostile frames."""
    pid = server.proc.pid
    errors, sent = [], []
    ready, go, stop = threading.Semaphore(0), threading.Event(), threading.Event()
    threads = [threading.Thread(target=good_worker, args=(server.port, w, errors, ready, go, load_round))
               for w in range(GOOD)]
    for t in threads:
        t.start()
    for _ in range(GOOD):
        assert ready.acquire(timeout=300)
    rss_connected = rss_kb(pid)
    frames = bad_frames()  # built before the clock starts, so they flow during the CRUD
    bad = [threading.Thread(target=bad_worker, args=(server.port, frames, stop, sent)) for _ in range(BAD)]
    started = time.time()
    for t in bad:
        t.start()
    go.set()
    for t in threads:
        t.join()
    elapsed = time.time() - started
    stop.set()
    for t in bad:
        t.join()
    rss_after = rss_kb(pid)
    time.sleep(IDLE_SECONDS)
    return {
        "good_request_errors": len(errors),
        "errors": errors[:5],
        "hostile_frames_sent": len(sent),
        "seconds": round(elapsed, 1),
        "server_rss_kb_connected": rss_connected,
        "server_rss_kb_after": rss_after,
        "server_rss_kb_idle": rss_kb(pid),
    }


def test_thousand_connections_with_hostile_neighbours(server):
    """Two rounds in one server: RSS that grows again in the second round would be a leak;
    RSS that stays where the first round left it is memory kept for reuse."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    rss_before = rss_kb(server.proc.pid)
    rounds = [load_round(server, r) for r in range(2)]
    c = server.client()
    kept = c.t.load.count_documents({})
    wrong = c.t.load.count_documents({"n": {"$ne": 1}})
    c.close()
    expected = 2 * GOOD * (ROUNDS - ROUNDS // 4)
    result = {
        "good_connections": GOOD,
        "hostile_connections": BAD,
        "rounds_per_connection": ROUNDS,
        "good_requests_per_round": GOOD * (ROUNDS * 3 + ROUNDS // 4),
        "documents_expected": expected,
        "documents_found": kept,
        "documents_wrong": wrong,
        "server_rss_kb_before": rss_before,
        "rounds": rounds,
    }
    out = os.path.join(os.path.dirname(__file__), "..", "..", "target", "load-test.json")
    with open(out, "w") as f:
        json.dump(result, f, indent=2)
    print(json.dumps(result, indent=2))
    for r in rounds:
        assert r["good_request_errors"] == 0, r["errors"]
    assert kept == expected and wrong == 0
