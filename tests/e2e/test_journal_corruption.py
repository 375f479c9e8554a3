"""A flipped byte in the journal is corruption, not a torn tail (issue 34): `serve` refuses to
start, naming the file, the offset and `flashdoc repair`; the repair recovers every record
whose checksum verifies and rebuilds the indexes; `serve` then starts with all but the
documents whose record the damaged byte was in. The in-place engine (mmapv1) applies the same
rule to its own journal; it has no salvage, and its message names the way out instead."""
import glob
import os
import re
import subprocess
import time

import pytest
from pymongo import WriteConcern

from conftest import BINARY, Server, serve_argv

DOCS = 3000


def written_end(path):
    """The end of what was written to a preallocated journal file: past its last nonzero byte."""
    data = open(path, "rb").read()
    return len(data.rstrip(b"\0"))


def refused_start(dbpath, path, engine=()):
    """Starts `serve` on a damaged journal and checks it refuses within 10 s, naming the
    damaged file and an offset; returns its output and that offset."""
    port = Server(dbpath).port
    started = time.time()
    r = subprocess.run(
        serve_argv("--dbpath", dbpath, "--port", str(port), *engine),
        capture_output=True,
        text=True,
        timeout=30,
    )
    took = time.time() - started
    out = r.stdout + r.stderr
    print(out)
    assert r.returncode != 0, out
    assert took < 10, f"serve took {took:.1f} s to refuse"
    assert os.path.basename(path) in out, out
    m = re.search(r"at offset (\d+)", out)
    assert m, out
    return out, int(m.group(1))


@pytest.mark.mmapv1_lacks("copy-on-write files")
def test_flipped_journal_byte_refuses_to_start_and_repair_recovers(dbpath):
    s = Server(dbpath).start()
    c = s.client()
    coll = c["dur"]["docs"].with_options(write_concern=WriteConcern(j=True))
    coll.create_index("n")
    for i in range(DOCS):
        coll.insert_one({"_id": i, "n": i, "payload": "x" * 40})
    c.close()
    s.kill()

    files = sorted(glob.glob(os.path.join(dbpath, "journal", "FlashdocLog.*")))
    assert files, "the journal holds the writes"
    path = max(files, key=written_end)
    end = written_end(path)
    at = end // 3
    with open(path, "r+b") as f:
        f.seek(at)
        old = f.read(1)
        f.seek(at)
        f.write(bytes([old[0] ^ 0xFF]))
    journal_before = {p: open(p, "rb").read() for p in files}

    # serve refuses to start, naming the file, the offset and the repair command.
    out, named = refused_start(dbpath, path)
    assert named <= at < named + 4096 and named % 128 == 0, (named, at, out)
    assert f"flashdoc repair --dbpath {dbpath}" in out, out
    assert "torn tail" not in out.split("corrupt")[0], out
    after = {p: open(p, "rb").read() for p in files if os.path.exists(p)}
    assert after == journal_before, "nothing in the journal was removed or rewritten"

    r = subprocess.run(
        [BINARY, "repair", "--dbpath", dbpath], capture_output=True, text=True, timeout=60
    )
    print(r.stdout, r.stderr)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 damaged extent(s) skipped" in r.stdout, r.stdout
    assert "index n_1: rebuilt" in r.stdout, r.stdout

    s = Server(dbpath).start()
    c = s.client()
    coll = c["dur"]["docs"]
    count = coll.count_documents({})
    missing = DOCS - count
    print(f"documents: {DOCS} acknowledged, {count} after repair, {missing} missing")
    assert 0 <= missing <= 10, missing
    assert f"dur.docs: {count} document(s)" in r.stdout, r.stdout
    present = {d["_id"] for d in coll.find({}, {"_id": 1})}
    lost = sorted(set(range(DOCS)) - present)
    # Only the damaged record's documents are gone: one contiguous run of inserts.
    assert not lost or lost[-1] - lost[0] == len(lost) - 1, lost
    # The rebuilt index agrees with the collection.
    v = c["dur"].command("validate", "docs")
    assert v["valid"], v
    assert coll.count_documents({"n": {"$gte": 0}}) == count
    assert "IXSCAN" in str(coll.find({"n": 2999}).explain())
    coll.with_options(write_concern=WriteConcern(j=True)).insert_one({"_id": "after"})
    c.close()
    assert s.stop() == 0


def mmapv1_files(dbpath):
    """The in-place engine's data files and journal files, with their bytes."""
    paths = glob.glob(os.path.join(dbpath, "mmapv1.*")) + glob.glob(os.path.join(dbpath, "journal", "*"))
    return {p: open(p, "rb").read() for p in paths}


def test_flipped_journal_byte_on_mmapv1_refuses_to_start_and_changes_nothing(dbpath):
    """The same rule on the in-place engine (its own journal, `journal/j._N`): a flipped byte
    in a synced record with synced records after it refuses the start, naming the file and
    the offset, and changes no file; the way out the message names (the journal cut at the
    damage) starts with every write before it and none after it."""
    engine = ["--storageEngine", "mmapv1"]
    s = Server(dbpath, engine).start()
    c = s.client()
    coll = c["dur"]["docs"].with_options(write_concern=WriteConcern(j=True))
    coll.create_index("n")
    for i in range(DOCS):
        coll.insert_one({"_id": i, "n": i, "payload": "x" * 40})
    c.close()
    s.kill()

    files = sorted(glob.glob(os.path.join(dbpath, "journal", "j._*")))
    assert files, "the journal holds the writes"
    path = max(files, key=os.path.getsize)
    at = os.path.getsize(path) // 3
    with open(path, "r+b") as f:
        f.seek(at)
        old = f.read(1)
        f.seek(at)
        f.write(bytes([old[0] ^ 0xFF]))
    before = mmapv1_files(dbpath)

    out, named = refused_start(dbpath, path, engine)
    assert named <= at < named + 65536, (named, at, out)
    assert "a record that verifies follows" in out and "was synced" in out, out
    assert "torn tail" not in out.split("corrupt")[0], out
    assert f"truncate {path} to {named} bytes" in out, out
    assert mmapv1_files(dbpath) == before, "no file was written, truncated or removed"
    # `flashdoc repair` salvages the copy-on-write engine's files only: refused by name here.
    conf = os.path.join(os.path.dirname(dbpath), "repair-mmapv1.yaml")
    with open(conf, "w") as f:
        f.write("storage:\n  engine: mmapv1\n")
    r = subprocess.run([BINARY, "repair", "-f", conf, "--dbpath", dbpath],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "storage.engine mmapv1 is not handled" in r.stderr, r.stderr
    assert mmapv1_files(dbpath) == before, "repair changed a file"

    os.truncate(path, named)
    s = Server(dbpath, engine).start()
    c = s.client()
    coll = c["dur"]["docs"]
    present = sorted(d["_id"] for d in coll.find({}, {"_id": 1}))
    print(f"documents: {DOCS} acknowledged, {len(present)} journaled before the damage")
    assert 0 < len(present) < DOCS and present == list(range(len(present))), present
    assert c["dur"].command("validate", "docs")["valid"]
    assert coll.count_documents({"n": {"$gte": 0}}) == len(present)
    coll.with_options(write_concern=WriteConcern(j=True)).insert_one({"_id": "after"})
    c.close()
    assert s.stop() == 0
