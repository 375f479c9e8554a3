"""A bad block in a table file (issue 34 §1): the read that reaches it fails with an error naming
the file and offset, never a wrong answer; `validate` reports it (valid: false); after
`flashdoc repair --dbpath` the server starts with every document outside the damaged block, and
the indexes validate and agree with the collection."""
import glob
import os
import random
import re
import subprocess
import struct

import pytest
from pymongo.errors import OperationFailure

from conftest import BINARY, Server

DOCS = 3000
ALLOC_UNIT = 4096
BLOCK_MAGIC = struct.pack("<I", 0x4644424B)
LEAF = 2  # the page kind byte of a leaf block


def document(i):
    rng = random.Random(i)
    return {
        "_id": i,
        "u": i * 7,
        "g": i % 13,
        "pad": "".join(rng.choice("abcdefghij") for _ in range(120)),
    }


def collection_file(dbpath):
    """The collection's table file: the largest collection table (the catalog's is small)."""
    files = glob.glob(os.path.join(dbpath, "collection-*"))
    return max(files, key=os.path.getsize)


def leaf_blocks(path):
    """Offsets of the blocks whose header says leaf (blocks start on allocation units)."""
    data = open(path, "rb").read()
    return [
        off
        for off in range(ALLOC_UNIT, len(data) - 24, ALLOC_UNIT)
        if data[off:off + 4] == BLOCK_MAGIC and data[off + 4] == LEAF
    ]


def names_block(msg, path, offset):
    return path in msg and f"offset {offset}" in msg


def names_repair(msg, dbpath):
    return f"flashdoc repair --dbpath {dbpath} " in msg


@pytest.mark.mmapv1_lacks("copy-on-write files")
def test_bad_table_block_fails_reads_validate_names_it_and_repair_keeps_the_rest(dbpath):
    s = Server(dbpath).start()
    c = s.client()
    coll = c["t"]["c"]
    coll.create_index("u", unique=True)
    coll.create_index("g")
    coll.insert_many([document(i) for i in range(DOCS)])
    c.close()
    assert s.stop() == 0

    path = collection_file(dbpath)
    leaves = leaf_blocks(path)
    assert len(leaves) >= 5, leaves
    offset = leaves[len(leaves) // 2]
    with open(path, "r+b") as f:
        f.seek(offset + 24 + 10)
        b = f.read(1)
        f.seek(offset + 24 + 10)
        f.write(bytes([b[0] ^ 0xFF]))

    # Each point read returns its document, or fails naming the block; never a wrong answer.
    s = Server(dbpath).start()
    c = s.client()
    coll = c["t"]["c"]
    failed = set()
    for i in range(DOCS):
        try:
            got = coll.find_one({"_id": i})
        except OperationFailure as e:
            assert names_block(str(e), path, offset), str(e)
            assert names_repair(str(e), dbpath), str(e)
            failed.add(i)
            continue
        assert got == document(i), i
    assert 0 < len(failed) < 400, len(failed)
    with pytest.raises(OperationFailure) as scan:
        list(coll.find({}, hint=[("$natural", 1)]))
    assert names_block(str(scan.value), path, offset), str(scan.value)
    r = c["t"].command("validate", "c", full=True)
    assert r["valid"] is False, r
    assert any(names_block(e, path, offset) for e in r["errors"]), r
    c.close()
    assert s.stop() == 0

    r = subprocess.run(
        [BINARY, "repair", "--dbpath", dbpath], capture_output=True, text=True, timeout=120
    )
    print(r.stdout, r.stderr)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 damaged leaf block(s) given up" in r.stdout, r.stdout
    assert f"lost: the leaf at offset {offset}" in r.stdout, r.stdout
    m = re.search(r"repair: t\.c: (\d+) document\(s\), (\d+) lost", r.stdout)
    assert m, r.stdout
    assert (int(m.group(1)), int(m.group(2))) == (DOCS - len(failed), len(failed)), r.stdout

    # Every document outside the damaged block is there, whole; the indexes agree.
    s = Server(dbpath).start()
    c = s.client()
    coll = c["t"]["c"]
    scan = sorted(coll.find({}, hint=[("$natural", 1)]), key=lambda d: d["_id"])
    assert scan == [document(i) for i in range(DOCS) if i not in failed]
    for hint in ["_id_", "u_1", "g_1"]:
        assert sorted(coll.find({}, hint=hint), key=lambda d: d["_id"]) == scan, hint
    r = c["t"].command("validate", "c", full=True)
    assert r["valid"] is True, r
    lost = min(failed)
    coll.insert_one(document(lost))  # its unique `u` is free again
    assert coll.count_documents({}) == DOCS - len(failed) + 1
    c.close()
    assert s.stop() == 0
