"""Recovery time after SIGKILL with the dirty budget full, flash mode against `--flash-mode off`
(WiredTiger's 5/20 budget), alternated rounds on one machine.

Each round, for each mode: a fresh `flashdoc serve` (256 MB cache, checkpoints every 60 s)
loads DOCS documents of 1 KB, waits for the next checkpoint to finish, then 4 client threads
update random documents for UPDATE_S seconds (the journal since that checkpoint grows, and
the dirty part of the cache fills to its budget). The server is killed with SIGKILL, started
again on the same directory, and timed from spawn until it answers `ping`: that is recovery
(the journal is replayed before the server listens). Then every document is counted.

usage: python3 recovery.py FLASHDOC_BIN OUT.jsonl [ROUNDS] [DOCS] [UPDATE_S]
"""
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import pymongo

CONFIG = """storage:
  dbPath: {db}
  syncPeriodSecs: 60
  wiredTiger:
    engineConfig:
      cacheSizeGB: 0.25
net:
  port: {port}
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(binary, db, port, mode):
    conf = os.path.join(db, "..", f"recovery-{port}.yaml")
    with open(conf, "w") as f:
        f.write(CONFIG.format(db=db, port=port))
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [binary, "serve", "-f", conf, "--flash-mode", mode],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    client = pymongo.MongoClient(port=port, serverSelectionTimeoutMS=100, directConnection=True)
    while True:
        try:
            client.admin.command("ping")
            return proc, client, time.monotonic() - t0
        except pymongo.errors.PyMongoError:
            if proc.poll() is not None:
                raise RuntimeError(f"serve exited with {proc.returncode}")
            time.sleep(0.01)


def checkpoints(client):
    """The engine's completed checkpoint count, from serverStatus().flashdoc."""
    return client.admin.command("serverStatus")["flashdoc"]["checkpoints"]["completed"]


def dirty_share(client):
    st = client.admin.command("serverStatus")["flashdoc"]["cache"]
    return st["dirty_bytes"] / st["budget_bytes"]


def update_load(port, docs, seconds):
    stop = time.monotonic() + seconds
    counts = []

    def worker(seed):
        rng = random.Random(seed)
        c = pymongo.MongoClient(port=port, directConnection=True)
        coll = c.bench.docs
        n = 0
        while time.monotonic() < stop:
            coll.update_one({"_id": rng.randrange(docs)}, {"$set": {"v": os.urandom(500).hex()}})
            n += 1
        counts.append(n)
        c.close()

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts)


def one_run(binary, mode, docs, update_s):
    base = tempfile.mkdtemp(prefix="recovery-")
    db = os.path.join(base, "db")
    os.makedirs(db)
    port = free_port()
    try:
        proc, client, _ = start(binary, db, port, mode)
        coll = client.bench.docs
        for lo in range(0, docs, 1000):
            coll.insert_many([{"_id": i, "v": os.urandom(500).hex()} for i in range(lo, min(docs, lo + 1000))])
        seen = checkpoints(client)
        while checkpoints(client) == seen:
            time.sleep(0.1)
        updates = update_load(port, docs, update_s)
        dirty = dirty_share(client)
        client.close()
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc, client, recovery_s = start(binary, db, port, mode)
        count = client.bench.docs.count_documents({})
        client.close()
        proc.terminate()
        proc.wait(timeout=120)
        return {"mode": mode, "docs": docs, "update_s": update_s, "updates": updates,
                "dirty_share_at_kill": round(dirty, 3), "recovery_s": round(recovery_s, 3),
                "docs_after": count}
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main():
    binary, out = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    docs = int(sys.argv[4]) if len(sys.argv) > 4 else 300_000
    update_s = int(sys.argv[5]) if len(sys.argv) > 5 else 45
    for r in range(rounds):
        for mode in ("flash", "off"):
            row = one_run(binary, mode, docs, update_s)
            row["round"] = r + 1
            print(json.dumps(row), flush=True)
            with open(out, "a") as f:
                f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
