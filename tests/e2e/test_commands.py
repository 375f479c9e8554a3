"""The command layer's shared fields and options: the generic fields every command may carry
(one list, checked on every command), maxTimeMS on every command that loops, listCollections'
authorizedCollections and cursor, and setParameter taking effect at once."""
import datetime
import time
import uuid

import bson
import pymongo
import pytest
from pymongo.errors import ExecutionTimeout, OperationFailure

from conftest import Server
from test_robustness import op_msg, raw, read_reply

WRITE_CONCERN_COMMANDS = {
    "insert", "update", "delete", "findAndModify", "create", "drop", "dropDatabase", "mapReduce",
    "mapreduce",
    "renameCollection", "createIndexes", "dropIndexes", "deleteIndexes", "collMod", "createUser",
    "updateUser", "dropUser", "grantRolesToUser", "revokeRolesFromUser",
}

# Every command of listCommands with a harmless invocation, in an order where each finds what
# it needs (db "g", or admin for the admin-only ones). Left out: getMore (maxTimeMS there is
# the awaitData wait, tested in test_enforcement), the SASL commands and authenticate (they
# are a conversation), commit/abortTransaction (always refused), shutdown.
COMMANDS = [
    ("admin", {"hello": 1}),
    ("admin", {"isMaster": 1}),
    ("admin", {"ismaster": 1}),
    ("admin", {"ping": 1}),
    ("admin", {"buildInfo": 1}),
    ("admin", {"buildinfo": 1}),
    ("admin", {"connectionStatus": 1}),
    ("admin", {"whatsmyuri": 1}),
    ("admin", {"listCommands": 1}),
    ("admin", {"startSession": 1}),
    ("admin", {"refreshSessions": []}),
    ("admin", {"killSessions": []}),
    ("admin", {"killAllSessions": []}),
    ("g", {"create": "c"}),
    ("g", {"insert": "c", "documents": [{"_id": 1}, {"_id": 2}]}),
    ("g", {"mapReduce": "c", "map": "function() { emit(1, 1); }",
           "reduce": "function(k, v) { return Array.sum(v); }", "out": {"inline": 1}}),
    ("g", {"mapreduce": "c", "map": "function() { emit(1, 1); }",
           "reduce": "function(k, v) { return Array.sum(v); }", "out": "mr_out"}),
    ("g", {"find": "c"}),
    ("g", {"count": "c"}),
    ("g", {"distinct": "c", "key": "_id"}),
    ("g", {"aggregate": "c", "pipeline": [], "cursor": {}}),
    ("g", {"explain": {"find": "c"}}),
    ("g", {"killCursors": "c", "cursors": []}),
    ("g", {"update": "c", "updates": [{"q": {"_id": 1}, "u": {"$set": {"a": 1}}}]}),
    ("g", {"findAndModify": "c", "query": {"_id": 1}, "update": {"$set": {"b": 1}}}),
    ("g", {"findandmodify": "c", "query": {"_id": 1}, "update": {"$set": {"b": 2}}}),
    ("g", {"createIndexes": "c", "indexes": [{"key": {"a": 1}, "name": "a_1"}]}),
    ("g", {"listIndexes": "c"}),
    ("g", {"dropIndexes": "c", "index": "a_1"}),
    ("g", {"createIndexes": "c", "indexes": [{"key": {"b": 1}, "name": "b_1"}]}),
    ("g", {"deleteIndexes": "c", "index": "b_1"}),
    ("g", {"listCollections": 1}),
    ("g", {"collStats": "c"}),
    ("g", {"dbStats": 1}),
    ("g", {"validate": "c"}),
    ("g", {"compact": "c"}),
    ("g", {"create": "c2"}),
    ("g", {"collMod": "c2", "validationLevel": "moderate"}),
    ("g", {"profile": -1}),
    ("admin", {"renameCollection": "g.c2", "to": "g.c3"}),
    ("g", {"drop": "c3"}),
    ("g", {"createUser": "gen", "pwd": "pw", "roles": []}),
    ("g", {"updateUser": "gen", "pwd": "pw2"}),
    ("g", {"grantRolesToUser": "gen", "roles": ["read"]}),
    ("g", {"revokeRolesFromUser": "gen", "roles": ["read"]}),
    ("g", {"usersInfo": 1}),
    ("g", {"dropUser": "gen"}),
    ("admin", {"listDatabases": 1}),
    ("admin", {"serverStatus": 1}),
    ("admin", {"hostInfo": 1}),
    ("admin", {"getCmdLineOpts": 1}),
    ("admin", {"getLog": "global"}),
    ("admin", {"getParameter": 1, "cursorTimeoutMillis": 1}),
    ("admin", {"setParameter": 1, "cursorTimeoutMillis": 600000}),
    ("admin", {"fsync": 1}),
    ("admin", {"currentOp": 1}),
    ("admin", {"killOp": 1, "op": 999999}),
    ("g", {"delete": "c", "deletes": [{"q": {}, "limit": 0}]}),
    ("admin", {"endSessions": []}),
    ("g", {"logout": 1}),
    ("g", {"dropDatabase": 1}),
]


REPL_SET_COMMANDS = {"replSetInitiate", "replSetGetStatus", "replSetGetConfig", "replSetStepDown",
                     "replSetFreeze", "replSetReconfig"}
DEFAULT_RW_COMMANDS = {"getDefaultRWConcern", "setDefaultRWConcern"}


def generic_fields(name):
    fields = {
        "lsid": {"id": bson.Binary(uuid.uuid4().bytes, 4)},
        "$readPreference": {"mode": "primary"},
        "$clusterTime": {"clusterTime": bson.Timestamp(1, 1),
                         "signature": {"hash": bson.Binary(b"\0" * 20), "keyId": 0}},
        "readConcern": {"level": "local"},
        "comment": "every generic field",
        "maxTimeMS": 60000,
        "apiVersion": "1",
        "apiStrict": False,
        "apiDeprecationErrors": False,
    }
    if name in WRITE_CONCERN_COMMANDS:
        fields["writeConcern"] = {"w": 1, "j": True}
    return fields


def call(sock, db, cmd):
    sock.sendall(op_msg({**cmd, "$db": db}))
    return read_reply(sock)


def test_every_command_takes_every_generic_field(server):
    """The one list of generic fields (server commands.rs): sent all at once to every command
    of listCommands that takes them. `create` with readConcern used to fail (the docdb layer
    had its own, shorter, list)."""
    s = raw(server)
    listed = set(call(s, "admin", {"listCommands": 1})["commands"])
    covered = {next(iter(c)) for _, c in COMMANDS}
    left_out = {"getMore", "saslStart", "saslContinue", "authenticate", "commitTransaction",
                "abortTransaction", "shutdown"}
    # A standalone answers the replica-set commands NoReplicationEnabled, as mongod does
    # (test_replset.py runs them on a set).
    for name in REPL_SET_COMMANDS:
        r = call(s, "admin", {name: 1, **generic_fields(name)})
        assert r["ok"] == 0 and r["code"] == 76, (name, r)
    # And the default read and write concerns 51300, as mongod (test_causal.py runs them).
    for name in DEFAULT_RW_COMMANDS:
        r = call(s, "admin", {name: 1, **generic_fields(name)})
        assert r["ok"] == 0 and r["code"] == 51300, (name, r)
    members_only = REPL_SET_COMMANDS | DEFAULT_RW_COMMANDS
    assert listed == covered | left_out | members_only, listed ^ (covered | left_out | members_only)
    for db, cmd in COMMANDS:
        name = next(iter(cmd))
        r = call(s, db, {**cmd, **generic_fields(name)})
        assert r["ok"] == 1.0, (name, r)
    s.close()


def test_generic_fields_are_checked_not_ignored(client):
    db = client.g
    db.c.insert_one({"_id": 1})
    cases = [
        # A read takes no write concern (mongod: InvalidOptions).
        ({"find": "c", "writeConcern": {"w": 1}}, 72),
        ({"listCollections": 1, "writeConcern": {"w": 1}}, 72),
        # No retryable writes nor transactions on a standalone.
        ({"insert": "c", "documents": [{"_id": 2}], "txnNumber": bson.Int64(1)}, 20),
        ({"find": "c", "startTransaction": True, "autocommit": False, "txnNumber": bson.Int64(1)}, 20),
        # The Stable API: version 1 only; strict refuses what is not in it.
        ({"validate": "c", "apiVersion": "1", "apiStrict": True}, 323),
        ({"find": "c", "apiVersion": "2"}, 322),
        ({"find": "c", "apiStrict": True}, 4886600),
        ({"create": "d", "maxTimeMS": -1}, 2),
        ({"create": "d", "readConcern": {"level": "snapshot"}}, 238),
    ]
    for cmd, code in cases:
        with pytest.raises(OperationFailure) as e:
            db.command(cmd)
        assert e.value.code == code, (cmd, e.value.details)
    # Nothing of the refused insert was written, and strict version 1 still runs its commands.
    assert db.c.count_documents({}) == 1
    assert db.command({"find": "c", "apiVersion": "1", "apiStrict": True})["ok"] == 1.0


def big_collection(coll, n=20_000):
    coll.insert_many([{"i": i, "s": "x" * 100} for i in range(n)])
    coll.create_index("i")


@pytest.mark.parametrize("cmd", [
    {"validate": "big"},
    {"createIndexes": "big", "indexes": [{"key": {"s": 1, "i": -1}, "name": "late"}]},
])
def test_max_time_ms_stops_validate_and_create_indexes_with_50(client, cmd):
    db = client.t
    big_collection(db.big)
    with pytest.raises(ExecutionTimeout) as e:
        db.command({**cmd, "maxTimeMS": 1})
    assert e.value.code == 50
    # The interrupted build left nothing behind; the collection is intact and still valid.
    assert "late" not in db.big.index_information()
    r = db.command("validate", "big")
    assert r["valid"] is True and r["nrecords"] == 20_000


def test_list_collections_cursor_batch_size_is_honoured(client):
    db = client.lc
    for i in range(5):
        db.create_collection(f"c{i}")
    r = db.command({"listCollections": 1, "nameOnly": True, "cursor": {"batchSize": 2}})
    assert len(r["cursor"]["firstBatch"]) == 2 and r["cursor"]["id"] != 0
    more = db.command({"getMore": r["cursor"]["id"], "collection": "$cmd.listCollections"})
    assert len(more["cursor"]["nextBatch"]) == 3 and more["cursor"]["id"] == 0
    with pytest.raises(OperationFailure) as e:
        db.command({"listCollections": 1, "cursor": {"batchSize": 2, "bogus": 1}})
    assert e.value.code == 40415


def test_authorized_collections_needs_only_a_privilege_on_the_database(dbpath):
    s = Server(dbpath, ["--auth"]).start()
    boot = s.client()
    boot.admin.command("createUser", "boss", pwd="s3cret", roles=["root"])
    boot.close()
    root = s.client(username="boss", password="s3cret")
    root.app.a.insert_one({"x": 1})
    root.app.b.insert_one({"x": 1})
    root.other.z.insert_one({"x": 1})
    root.app.command("createUser", "ua", pwd="pw", roles=["userAdmin"])  # no listCollections
    root.app.command("createUser", "reader", pwd="pw", roles=["read"])
    ua = s.client(username="ua", password="pw", authSource="app")
    reader = s.client(username="reader", password="pw", authSource="app")
    # userAdmin on app holds no listCollections action: refused without the option...
    with pytest.raises(OperationFailure) as e:
        ua.app.command({"listCollections": 1, "nameOnly": True})
    assert e.value.code == 13
    # ...and with authorizedCollections and nameOnly it lists the database it has privileges on.
    r = ua.app.command({"listCollections": 1, "nameOnly": True, "authorizedCollections": True})
    assert sorted(c["name"] for c in r["cursor"]["firstBatch"]) == ["a", "b"]
    # Both are needed: authorizedCollections without nameOnly is the ordinary check.
    with pytest.raises(OperationFailure) as e:
        ua.app.command({"listCollections": 1, "authorizedCollections": True})
    assert e.value.code == 13
    # A user with read on app only: its own database, and nothing of another.
    assert sorted(reader.app.list_collection_names(authorizedCollections=True)) == ["a", "b"]
    with pytest.raises(OperationFailure) as e:
        reader.other.command({"listCollections": 1, "nameOnly": True, "authorizedCollections": True})
    assert e.value.code == 13
    for c in (ua, reader, root):
        c.close()
    s.stop()


def test_a_shorter_ttl_period_takes_effect_at_once(dbpath):
    s = Server(dbpath, ["--set-parameter", "ttlMonitorSleepSecs=3600"]).start()
    c = s.client()
    coll = c.t.ttl
    coll.create_index("at", expireAfterSeconds=0)
    coll.insert_one({"at": datetime.datetime(2000, 1, 1)})
    # With the old hour-long period the document would stay; the new period applies now.
    assert c.admin.command("setParameter", 1, ttlMonitorSleepSecs=1)["was"] == {"ttlMonitorSleepSecs": 3600}
    deadline = time.time() + 60
    while coll.count_documents({}) and time.time() < deadline:
        time.sleep(0.2)
    assert coll.count_documents({}) == 0
    with pytest.raises(OperationFailure) as e:
        c.admin.command("setParameter", 1, ttlMonitorSleepSecs=0)
    assert e.value.code == 2
    with pytest.raises(OperationFailure) as e:
        c.admin.command("setParameter", 1, enableLocalhostAuthBypass=False)
    assert e.value.code == 2
    c.close()
    s.stop()


def test_options_that_used_to_be_ignored(client):
    db = client.opts
    db.c.insert_many([{"_id": i, "pad": "x" * 1000} for i in range(100)])
    # collStats and dbStats divide their sizes by `scale` (mongosh sends it).
    plain, kb = db.command("collStats", "c"), db.command("collStats", "c", scale=1024)
    assert kb["scaleFactor"] == 1024 and kb["size"] == plain["size"] // 1024
    assert kb["avgObjSize"] == plain["avgObjSize"]
    dbkb = db.command("dbStats", scale=1024)
    assert dbkb["scaleFactor"] == 1024 and dbkb["dataSize"] == db.command("dbStats")["dataSize"] / 1024
    for cmd, code in [
        ({"collStats": "c", "scale": 0}, 51024),
        ({"collStats": "c", "bogus": 1}, 40415),
        ({"dbStats": 1, "freeStorage": 1}, 238),
        ({"count": "c", "skip": -1}, 2),
        ({"createIndexes": "c", "indexes": [{"key": {"a": 1}, "name": "a_1"}], "commitQuorum": "majority"}, 2),
        ({"listDatabases": 1, "bogus": 1}, 40415),
    ]:
        with pytest.raises(OperationFailure) as e:
            db.command(cmd)
        assert e.value.code == code, (cmd, e.value.details)
    with pytest.raises(OperationFailure) as e:
        client.admin.command({"renameCollection": "opts.c", "to": "opts.d", "stayTemp": True})
    assert e.value.code == 238
    assert "a_1" not in db.c.index_information()
