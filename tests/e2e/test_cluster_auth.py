"""An authenticated sharded cluster of real processes: etcd (loopback only), two shards and a
router, all with one key file (security.keyFile). The first user is created through the
router's localhost exception; clients then connect with a user:password@ URI. The router
authenticates to the shards as the internal user (__system) and enforces the client's
privileges; the cluster's users live in etcd, shared by every router."""
import base64
import json
import os
import subprocess
import tempfile
import urllib.request

import pymongo
import pytest
from pymongo.errors import OperationFailure

from cluster import Etcd, Process
from conftest import BINARY, free_port, serve_argv

KEY = "c2VjcmV0LWtleS1mb3ItdGhlLWNsdXN0ZXItdGVzdHM="
BOSS, BOSS_PWD = "boss", "b0ss-Pwd"


class AuthShard(Process):
    def __init__(self, d, i, key_file):
        self.port = free_port()
        path = os.path.join(d, f"shard{i}")
        os.makedirs(path, exist_ok=True)
        super().__init__(
            f"shard{i}",
            serve_argv("--shardsvr", "--dbpath", path, "--port", str(self.port), "--keyFile", key_file),
            os.path.join(d, f"shard{i}.log"),
            "waiting for connections",
        )

    @property
    def host(self):
        return f"127.0.0.1:{self.port}"

    def client(self, **kw):
        return pymongo.MongoClient("127.0.0.1", self.port, directConnection=True, serverSelectionTimeoutMS=10000, **kw)


class AuthRouter(Process):
    def __init__(self, d, etcd_url, key_file, i=0):
        self.port = free_port()
        super().__init__(
            f"router{i}",
            [BINARY, "router", "--configdb", etcd_url, "--port", str(self.port), "--keyFile", key_file,
             "--balancer-interval", "1"],
            os.path.join(d, f"router{i}.log"),
            "waiting for connections",
        )

    def client(self, **kw):
        return pymongo.MongoClient("127.0.0.1", self.port, serverSelectionTimeoutMS=20000, **kw)

    def uri(self, user, pwd, source="admin"):
        return f"mongodb://{user}:{pwd}@127.0.0.1:{self.port}/?authSource={source}"


def write_key(path, text=KEY, mode=0o600):
    with open(path, "w") as f:
        f.write(text + "\n")
    os.chmod(path, mode)
    return path


@pytest.fixture(scope="module")
def cluster():
    with tempfile.TemporaryDirectory(prefix="flashdoc-authcluster-") as d:
        key = write_key(os.path.join(d, "key"))
        procs = [Etcd(d).start()]
        try:
            etcd = procs[0]
            shards = [AuthShard(d, i, key).start() for i in range(2)]
            procs += shards
            router = AuthRouter(d, etcd.url, key).start()
            procs.append(router)
            # The localhost exception: no cluster user exists, the client is on loopback.
            with router.client() as c:
                c.admin.command("createUser", BOSS, pwd=BOSS_PWD, roles=["root"])
            with pymongo.MongoClient(router.uri(BOSS, BOSS_PWD), serverSelectionTimeoutMS=20000) as c:
                for i, s in enumerate(shards):
                    c.admin.command("addShard", s.host, name=f"shard{i}")
            yield {"dir": d, "key": key, "etcd": etcd, "shards": shards, "router": router}
        finally:
            for p in reversed(procs):
                p.stop()


@pytest.fixture
def boss(cluster):
    c = pymongo.MongoClient(cluster["router"].uri(BOSS, BOSS_PWD), serverSelectionTimeoutMS=20000)
    yield c
    c.close()


def code_of(fn):
    with pytest.raises(OperationFailure) as e:
        fn()
    return e.value.code


def test_the_localhost_exception_closes_once_a_cluster_user_exists(cluster):
    with cluster["router"].client() as c:
        assert code_of(lambda: c.admin.command("createUser", "second", pwd="x-pwd-1", roles=["root"])) == 13


def test_unauthenticated_clients_get_13(cluster):
    with cluster["router"].client() as c:
        assert c.admin.command("hello")["msg"] == "isdbgrid"
        assert code_of(lambda: c.app.c.find_one({})) == 13
        assert code_of(lambda: c.app.c.insert_one({"x": 1})) == 13
        assert code_of(lambda: c.admin.command("listDatabases")) == 13
        assert code_of(lambda: c.admin.command("listShards")) == 13
        assert code_of(lambda: c.admin.command("shardCollection", "app.c", key={"k": 1})) == 13


def test_a_wrong_password_fails_with_18(cluster):
    r = cluster["router"]
    for uri in (r.uri(BOSS, "wrong-pwd"), r.uri("nobody", BOSS_PWD)):
        with pymongo.MongoClient(uri, serverSelectionTimeoutMS=20000) as c:
            assert code_of(lambda: c.admin.command("ping")) == 18


def test_crud_a_sharded_collection_and_aggregate_with_a_password_uri(boss):
    boss.admin.command("enableSharding", "sh")
    boss.admin.command("shardCollection", "sh.c", key={"k": 1})
    boss.sh.c.insert_many([{"k": i, "g": i % 5} for i in range(1000)])
    boss.admin.command("split", "sh.c", middle={"k": 500})
    boss.admin.command("moveChunk", "sh.c", find={"k": 700}, to="shard1", _waitForDelete=True)
    owners = {c["shard"] for c in boss.config.chunks.find({"ns": "sh.c"})}
    assert owners == {"shard0", "shard1"}
    assert boss.sh.c.count_documents({}) == 1000
    assert boss.sh.c.update_many({"k": {"$gte": 990}}, {"$set": {"late": True}}).modified_count == 10
    assert boss.sh.c.delete_one({"k": 3}).deleted_count == 1
    assert [d["k"] for d in boss.sh.c.find({"k": {"$gte": 495, "$lt": 505}}).sort("k", 1)] == list(range(495, 505))
    groups = list(boss.sh.c.aggregate([{"$group": {"_id": "$g", "n": {"$sum": 1}}}, {"$sort": {"_id": 1}}]))
    assert [g["n"] for g in groups] == [200, 200, 200, 199, 200]  # k = 3 (g 3) was deleted
    # Unsharded collections go to their database's primary shard, through the same path.
    boss.plain.c.insert_one({"_id": 1, "v": "x"})
    assert boss.plain.c.find_one({"_id": 1})["v"] == "x"


def test_a_read_user_cannot_write_its_database_or_read_another(boss, cluster):
    boss.appa.c.insert_one({"_id": 1})
    boss.appb.c.insert_one({"_id": 1})
    boss.appa.command("createUser", "reader", pwd="r-pwd-1", roles=["read"])
    uri = cluster["router"].uri("reader", "r-pwd-1", source="appa")
    with pymongo.MongoClient(uri, serverSelectionTimeoutMS=20000) as c:
        assert c.appa.c.find_one({"_id": 1}) == {"_id": 1}
        # listDatabases names only the databases the user holds a privilege on.
        assert [d["name"] for d in c.admin.command("listDatabases")["databases"]] == ["appa"]
        assert code_of(lambda: c.admin.command("listDatabases", authorizedDatabases=False)) == 13
        assert code_of(lambda: c.appa.c.insert_one({"_id": 2})) == 13
        assert code_of(lambda: c.appa.c.delete_one({"_id": 1})) == 13
        assert code_of(lambda: c.appb.c.find_one({})) == 13
        assert code_of(lambda: list(c.appa.c.aggregate([{"$lookup": {"from": "c", "pipeline": [], "as": "j"}}, {"$out": "o"}]))) == 13
        assert code_of(lambda: c.admin.command("enableSharding", "appa")) == 13
        assert code_of(lambda: c.appa.command("createUser", "x", pwd="x-pwd-1", roles=["readWrite"])) == 13
    assert boss.appa.c.count_documents({}) == 1


def test_cluster_users_live_in_etcd_and_every_router_sees_them(boss, cluster):
    boss.admin.command("createUser", "ann", pwd="ann-pwd-1", roles=["readWriteAnyDatabase"])
    info = boss.admin.command("usersInfo", "ann")["users"]
    assert len(info) == 1 and info[0]["roles"] == [{"role": "readWriteAnyDatabase", "db": "admin"}]
    second = AuthRouter(cluster["dir"], cluster["etcd"].url, cluster["key"], i=1).start()
    try:
        with pymongo.MongoClient(second.uri("ann", "ann-pwd-1"), serverSelectionTimeoutMS=20000) as c:
            c.other.c.insert_one({"_id": "from-second"})
            assert c.other.c.find_one({"_id": "from-second"}) is not None
            boss.admin.command("updateUser", "ann", pwd="ann-pwd-2")
            assert code_of(lambda: pymongo.MongoClient(second.uri("ann", "ann-pwd-1"), serverSelectionTimeoutMS=20000).admin.command("ping")) == 18
        with pymongo.MongoClient(second.uri("ann", "ann-pwd-2"), serverSelectionTimeoutMS=20000) as c:
            assert c.other.c.find_one({"_id": "from-second"}) is not None
        boss.admin.command("dropUser", "ann")
        with pymongo.MongoClient(second.uri("ann", "ann-pwd-2"), serverSelectionTimeoutMS=20000) as c:
            assert code_of(lambda: c.admin.command("ping")) == 18
    finally:
        second.stop()
    # Not on the shards: they keep their own users (none here) for direct connections.
    shard = cluster["shards"][0]
    with shard.client(username="__system", password=KEY, authSource="local", authMechanism="SCRAM-SHA-256") as c:
        assert c.admin.command("usersInfo", 1)["users"] == []
    # In etcd, read through its own v3 JSON gateway: the key of every cluster user.
    keys = etcd_keys(cluster["etcd"], "/flashdoc/config/users/")
    assert "/flashdoc/config/users/admin.boss" in keys
    assert "/flashdoc/config/users/admin.ann" not in keys


def etcd_keys(etcd, prefix):
    end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
    body = json.dumps({"key": b64(prefix), "range_end": b64(end), "keys_only": True}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{etcd.port}/v3/kv/range", data=body, method="POST")
    with urllib.request.urlopen(req, timeout=10) as r:
        kvs = json.load(r).get("kvs", [])
    return [base64.b64decode(kv["key"]).decode() for kv in kvs]


def b64(s):
    return base64.b64encode(s.encode()).decode()


def test_a_direct_connection_to_a_shard_needs_credentials(cluster):
    shard = cluster["shards"][0]
    with shard.client() as c:
        assert code_of(lambda: c.sh.c.find_one({})) == 13
        assert code_of(lambda: c.sh.c.insert_one({"k": -1})) == 13
        # The shard's own commands are the internal user's only.
        assert code_of(lambda: c.admin.command("_flushRoutingTableCacheUpdates", "sh.c")) == 13
    with shard.client(username="__system", password="d3Jvbmcta2V5", authSource="local", authMechanism="SCRAM-SHA-256") as c:
        assert code_of(lambda: c.admin.command("ping")) == 18
    # The cluster's users are not the shard's.
    with shard.client(username=BOSS, password=BOSS_PWD, authSource="admin") as c:
        assert code_of(lambda: c.admin.command("ping")) == 18


def test_key_files_are_checked_as_mongod_checks_them(cluster, tmp_path):
    for name, text, mode, want in [
        ("open", KEY, 0o644, "too open"),
        ("short", "abc", 0o600, "between 6 and 1024"),
        ("bad", "not base64!", 0o600, "invalid character"),
    ]:
        key = write_key(str(tmp_path / name), text, mode)
        for argv in (
            serve_argv("--shardsvr", "--dbpath", str(tmp_path / f"db-{name}"), "--port", str(free_port()), "--keyFile", key),
            [BINARY, "router", "--configdb", cluster["etcd"].url, "--port", str(free_port()), "--keyFile", key],
        ):
            os.makedirs(tmp_path / f"db-{name}", exist_ok=True)
            out = subprocess.run(argv, capture_output=True, text=True, timeout=60)
            assert out.returncode != 0, argv
            assert want in out.stdout + out.stderr, out.stdout + out.stderr


def test_a_router_with_another_key_cannot_reach_the_shards(cluster, tmp_path):
    other = write_key(str(tmp_path / "other"), "b3RoZXIta2V5LW90aGVyLWtleQ==")
    r = AuthRouter(str(tmp_path), cluster["etcd"].url, other, i=9).start()
    try:
        with pymongo.MongoClient(r.uri(BOSS, BOSS_PWD), serverSelectionTimeoutMS=20000) as c:
            with pytest.raises(OperationFailure) as e:
                c.sh.c.find_one({})
            assert "internal user" in str(e.value)
    finally:
        r.stop()
