"""mongosh's `db.c.stats()` against flashdoc. mongosh builds it from `$collStats` with
`storageStats` (https://www.mongodb.com/docs/manual/reference/method/db.collection.stats/):
count, size, avgObjSize, storageSize, totalIndexSize, totalSize, indexSizes, nindexes, capped
(with maxSize), scaleFactor, sharded. Needs mongosh: `bash scripts/install-mongosh.sh` puts it
in target/mongosh; FLASHDOC_MONGOSH names another one."""
import json
import os
import shutil
import subprocess

import pytest

from conftest import ROOT

MONGOSH = os.environ.get("FLASHDOC_MONGOSH") or shutil.which("mongosh") or os.path.join(
    ROOT, "target", "mongosh", "node_modules", ".bin", "mongosh")

pytestmark = pytest.mark.skipif(
    not os.path.exists(MONGOSH),
    reason="mongosh is not installed (bash scripts/install-mongosh.sh installs it into target/mongosh)",
)


def shell(server, js):
    r = subprocess.run(
        [MONGOSH, f"mongodb://127.0.0.1:{server.port}/shell", "--quiet", "--norc", "--eval", js],
        capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout.strip()


def test_collection_stats_in_mongosh(server, client):
    db = client.shell
    db.c.insert_many([{"_id": i, "s": "x" * 100} for i in range(50)])
    db.c.create_index("s")
    db.create_collection("log", capped=True, size=8192, max=10)
    db.log.insert_one({"a": 1})
    out = json.loads(shell(server, "EJSON.stringify({c: db.c.stats(), k: db.c.stats(1024), "
                                   "log: db.log.stats()}, null, 0, {relaxed: true})"))
    s = out["c"]
    assert s["ok"] == 1 and s["ns"] == "shell.c" and s["count"] == 50
    assert s["sharded"] is False and s["capped"] is False
    assert s["nindexes"] == 2 and set(s["indexSizes"]) == {"_id_", "s_1"}
    assert s["size"] > 50 * 100 and s["avgObjSize"] == s["size"] / 50
    assert s["totalSize"] == s["storageSize"] + s["totalIndexSize"]
    assert s["scaleFactor"] == 1
    k = out["k"]
    assert k["scaleFactor"] == 1024 and k["size"] == s["size"] / 1024
    log = out["log"]
    assert log["capped"] is True and log["maxSize"] == 8192 and log["max"] == 10
    assert log["count"] == 1
