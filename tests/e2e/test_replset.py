"""A three-member replica set of real `flashdoc serve --replSet rs0` processes (issue 36):
initiation, hello's fields, majority writes read back from every secondary, NotWritablePrimary
on a secondary for every command that writes data, the catalog or users (and each replicated
from the primary), a secondary's own profiler kept to itself, replSetStepDown, replSetReconfig
adding and removing a member, and failover after SIGKILL of the primary (with a frozen
secondary left out of the election) without losing a majority write."""
import json
import os
import shutil
import socket
import struct
import subprocess
import time

import bson
import pymongo
import pytest
from pymongo.errors import NotPrimaryError, OperationFailure, PyMongoError

from conftest import ROOT, Server

MONGOSH = os.environ.get("FLASHDOC_MONGOSH") or shutil.which("mongosh") or os.path.join(
    ROOT, "target", "mongosh", "node_modules", ".bin", "mongosh")

SET = "rs0"
# Elections after 2-3 s of silence: a loaded two-core CI machine keeps heartbeats (every
# 400 ms) well inside that.
SETTINGS = {"electionTimeoutMillis": 2000, "heartbeatIntervalMillis": 400}


# Members run the default engine whatever FLASHDOC_ENGINE says; mmapv1 refuses --replSet.
pytestmark = pytest.mark.mmapv1_lacks("replica sets")


def start_member(d, extra_args=()):
    """A `flashdoc serve --replSet rs0` process on directory `d`, not yet in the set."""
    conf = os.path.join(d, "flashdoc.conf")
    with open(conf, "w") as f:
        f.write(
            "storage:\n  wiredTiger:\n    engineConfig:\n      cacheSizeGB: 0.25\n"
            "replication:\n  oplogSizeMB: 64\n"
        )
    data = os.path.join(d, "data")
    os.mkdir(data)
    started = time.time()
    server = Server(data, ["-f", conf, "--replSet", SET, *extra_args]).start()
    assert time.time() - started < 10, "a member listens within seconds"
    return server


@pytest.fixture(scope="module")
def members(tmp_path_factory):
    servers = [start_member(tmp_path_factory.mktemp(f"member{i}")) for i in range(3)]
    yield servers
    for s in servers:
        if s.proc.poll() is None:
            s.stop()


def host(s):
    return f"127.0.0.1:{s.port}"


def direct(s, **kw):
    return pymongo.MongoClient(
        host(s), directConnection=True, serverSelectionTimeoutMS=10000, **kw
    )


def set_client(servers):
    seeds = ",".join(host(s) for s in servers)
    return pymongo.MongoClient(
        f"mongodb://{seeds}/?replicaSet={SET}",
        serverSelectionTimeoutMS=30000,
    )


def wait_for_primary(servers, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        for s in servers:
            try:
                with direct(s) as c:
                    if c.admin.command("hello").get("isWritablePrimary"):
                        return s
            except PyMongoError:
                pass
        time.sleep(0.2)
    raise AssertionError("no primary")


@pytest.fixture(scope="module")
def initiated(members):
    with direct(members[0]) as c:
        with pytest.raises(OperationFailure) as e:
            c.admin.command("replSetGetStatus")
        assert e.value.code == 94  # NotYetInitialized
        hello = c.admin.command("hello")
        assert hello["isWritablePrimary"] is False and hello["isreplicaset"] is True
        config = {
            "_id": SET,
            "members": [{"_id": i, "host": host(s)} for i, s in enumerate(members)],
            "settings": SETTINGS,
        }
        c.admin.command("replSetInitiate", config)
        with pytest.raises(OperationFailure) as e:
            c.admin.command("replSetInitiate", config)
        assert e.value.code == 23  # AlreadyInitialized
    wait_for_primary(members)
    return members


def test_hello_describes_the_set(initiated):
    primary = wait_for_primary(initiated)
    hosts = sorted(host(s) for s in initiated)
    for s in initiated:
        with direct(s) as c:
            h = c.admin.command("hello")
        assert h["setName"] == SET
        assert sorted(h["hosts"]) == hosts
        assert h["me"] == host(s)
        assert h["setVersion"] == 1
        assert "processId" in h["topologyVersion"]
        assert "opTime" in h["lastWrite"]
        if s is primary:
            assert h["isWritablePrimary"] and not h["secondary"]
            assert "electionId" in h
        else:
            assert h["secondary"] and not h["isWritablePrimary"]
        assert h.get("primary") in (host(primary), None)
        # A fresh member holds nothing the log does not account for: none is RECOVERING.
        with direct(s) as c:
            assert c.admin.command("replSetGetStatus")["myState"] in (1, 2)
    with direct(primary) as c:
        status = c.admin.command("replSetGetStatus")
        assert status["set"] == SET and status["myState"] == 1
        assert len(status["members"]) == 3
        config = c.admin.command("replSetGetConfig")["config"]
        assert config["_id"] == SET and config["version"] == 1


@pytest.mark.skipif(not os.path.exists(MONGOSH), reason="mongosh is not installed "
                    "(bash scripts/install-mongosh.sh installs it into target/mongosh)")
def test_rs_status_and_conf_in_mongosh(initiated):
    primary = wait_for_primary(initiated)
    js = "EJSON.stringify({s: rs.status(), c: rs.conf()}, null, 0, {relaxed: true})"
    r = subprocess.run([MONGOSH, f"mongodb://{host(primary)}/admin", "--quiet", "--norc", "--eval", js],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    status, conf = out["s"], out["c"]
    assert status["set"] == SET and status["myState"] == 1
    assert sorted(m["name"] for m in status["members"]) == sorted(host(s) for s in initiated)
    assert [m["stateStr"] for m in status["members"]].count("PRIMARY") == 1
    assert conf["_id"] == SET and conf["version"] == 1 and len(conf["members"]) == 3


def read_from(s, doc_id, timeout=10, coll="rs"):
    """The document from member `s`, as a secondary read (waiting for it to apply)."""
    deadline = time.time() + timeout
    with direct(s, readPreference="secondaryPreferred") as c:
        while time.time() < deadline:
            d = c.e2e[coll].find_one({"_id": doc_id})
            if d is not None:
                return d
            time.sleep(0.1)
    return None


def test_majority_writes_reach_every_secondary(initiated):
    with set_client(initiated) as c:
        coll = c.e2e.get_collection("rs", write_concern=pymongo.WriteConcern("majority"))
        ids = [coll.insert_one({"n": i, "pad": "x" * 100}).inserted_id for i in range(20)]
        coll.update_one({"n": 3}, {"$set": {"touched": True}})
        w1 = c.e2e.get_collection("rs", write_concern=pymongo.WriteConcern(w=1))
        w1.insert_one({"_id": "w1"})
        # w: 3 answers once every member's log holds the write; w: 4 can never be met.
        all3 = c.e2e.get_collection("rs", write_concern=pymongo.WriteConcern(w=3, wtimeout=30000))
        all3.insert_one({"_id": "w3"})
        with pytest.raises(OperationFailure) as e:
            c.e2e.get_collection("rs", write_concern=pymongo.WriteConcern(w=4)).insert_one({})
        # UnsatisfiableWriteConcern as mongod answers it: the write is applied and its write
        # concern fails at once (pymongo's own suite expects a WriteConcernError).
        assert isinstance(e.value, pymongo.errors.WriteConcernError)
        assert e.value.code == 100
        with pytest.raises(OperationFailure) as e:
            c.e2e.get_collection("rs", write_concern=pymongo.WriteConcern(w="dc")).insert_one({})
        assert e.value.code == 79  # no tags in the configuration
    primary = wait_for_primary(initiated)
    for s in initiated:
        assert read_from(s, "w3") is not None
    for s in initiated:
        if s is primary:
            continue
        for i, doc_id in enumerate(ids):
            d = read_from(s, doc_id)
            assert d is not None and d["n"] == i, f"{host(s)} lacks document {i}"
        assert read_from(s, ids[3])["touched"] is True
        assert read_from(s, "w1") is not None


def log_index(s):
    """The Raft log index member `s` holds up to, as its replSetGetStatus reports it."""
    with direct(s) as c:
        members = c.admin.command("replSetGetStatus")["members"]
    return next(m for m in members if m.get("self"))["optime"]["index"]


def test_a_bulk_write_goes_to_the_log_in_batches(initiated):
    # One synced append per document made a 702-document insert take 13 s, held heartbeats
    # up past the election timeout, and had the old primary roll the documents back. Now the
    # entries written since the last proposal go to the log together (up to 256 to an entry):
    # how many per entry depends on how fast the insert runs against an fsync (8-30 seen on
    # a loaded two-core machine), never one each.
    primary = wait_for_primary(initiated)
    before = log_index(primary)
    n = 3000
    with set_client(initiated) as c:
        coll = c.e2e.get_collection("bulk", write_concern=pymongo.WriteConcern("majority"))
        coll.insert_many([{"_id": i, "pad": "x" * 64} for i in range(n)])
        assert coll.count_documents({}) == n
    used = log_index(primary) - before
    assert 0 < used <= n // 2, f"{n} documents took {used} log entries"
    for s in initiated:
        eventually(
            lambda: direct_count(s, "bulk") == n, f"{host(s)} holds all {n} documents", 30
        )


def test_a_document_near_the_size_limit_replicates(initiated):
    # Its oplog entry, base64 in the log's JSON, is larger than one BSON binary may be (16 MB):
    # the RPC carrying it goes as a document sequence of parts (it once panicked the leader's
    # replication task, which cost the set its primary).
    big = {"_id": "big", "pad": "y" * (12 << 20)}
    with set_client(initiated) as c:
        coll = c.e2e.get_collection("big", write_concern=pymongo.WriteConcern("majority"))
        coll.insert_one(big)
    for s in initiated:
        eventually(
            lambda: direct_count(s, "big") == 1, f"{host(s)} holds the large document", 30
        )


def test_create_indexes_waits_for_its_commit_quorum(initiated):
    with set_client(initiated) as c:
        for i, quorum in enumerate(["majority", "votingMembers", 3, 0]):
            c.e2e.command("createIndexes", "cq", indexes=[{"key": {f"k{i}": 1}, "name": f"k{i}"}],
                          commitQuorum=quorum)
        for quorum, code in ((4, 100), ("dc", 79), (-1, 100)):
            with pytest.raises(OperationFailure) as e:
                c.e2e.command("createIndexes", "cq", indexes=[{"key": {"z": 1}, "name": "z"}],
                              commitQuorum=quorum)
            assert e.value.code == code, (quorum, e.value)
    # votingMembers: every member held the build's entry before the answer.
    for s in initiated:
        with direct(s, readPreference="secondaryPreferred") as c:
            eventually(lambda: "k1" in c.e2e.cq.index_information(), f"{host(s)} builds k1")


def direct_count(s, coll):
    with direct(s, readPreference="secondaryPreferred") as c:
        return c.e2e[coll].count_documents({})


def op_time(s, field="opTime"):
    with direct(s) as c:
        return c.admin.command("hello")["lastWrite"][field]["ts"]


def test_read_concerns_on_members(initiated):
    primary = wait_for_primary(initiated)
    secondary = next(s for s in initiated if s is not primary)
    with direct(primary, retryWrites=False) as c:
        c.e2e.get_collection("rc", write_concern=pymongo.WriteConcern("majority")).insert_one(
            {"_id": 1, "v": "a"})
        for level in ("majority", "linearizable"):
            coll = c.e2e.get_collection("rc", read_concern=pymongo.read_concern.ReadConcern(level))
            before = op_time(primary)
            assert coll.find_one({"_id": 1}, max_time_ms=10000)["v"] == "a"
            if level == "linearizable":
                # It wrote a no-op after the read and waited for the majority to hold it.
                assert op_time(primary) > before and op_time(primary, "majorityOpTime") > before
        for rc, code, named in (({"level": "snapshot"}, 238, "snapshot"),
                                ({"level": "majority",
                                  "afterOpTime": {"ts": bson.Timestamp(1, 1), "t": 1}},
                                 238, "afterOpTime")):
            with pytest.raises(OperationFailure) as e:
                c.e2e.command("find", "rc", readConcern=rc)
            assert e.value.code == code and named in str(e.value), e.value
        # A write reads locally; it does not take majority or linearizable read concern.
        with pytest.raises(OperationFailure) as e:
            c.e2e.command("update", "rc", updates=[{"q": {"_id": 1}, "u": {"$set": {"v": "b"}}}],
                          readConcern={"level": "linearizable"})
        assert e.value.code == 72
    with direct(secondary) as c:
        majority = c.e2e.get_collection("rc", read_concern=pymongo.read_concern.ReadConcern("majority"),
                                        read_preference=pymongo.ReadPreference.SECONDARY_PREFERRED)
        eventually(lambda: majority.find_one({"_id": 1}) is not None, "a majority read on a secondary")
        # pymongo raises NotPrimaryError for NotWritablePrimary.
        with pytest.raises(NotPrimaryError) as e:
            c.e2e.command("find", "rc", readConcern={"level": "linearizable"},
                          read_preference=pymongo.ReadPreference.SECONDARY_PREFERRED)
        assert e.value.details["code"] == 10107 and "linearizable" in str(e.value)


def test_an_idle_primary_writes_a_periodic_noop(initiated):
    primary = wait_for_primary(initiated)
    before = op_time(primary)
    for s in initiated:
        eventually(lambda: op_time(s) >= before, f"{host(s)} caught up")
    # mongod's periodicNoopIntervalSecs: 10 s without a write, then a no-op that every member
    # applies and the majority holds.
    time.sleep(11)
    after = op_time(primary)
    assert after > before, "no write, and no no-op either, in 11 s"
    eventually(lambda: op_time(primary, "majorityOpTime") >= after, "the majority holds the no-op")
    for s in initiated:
        eventually(lambda: op_time(s) >= after, f"{host(s)} applied the no-op")


def test_a_secondary_refuses_writes(initiated):
    primary = wait_for_primary(initiated)
    secondary = next(s for s in initiated if s is not primary)
    with direct(secondary) as c:
        with pytest.raises(NotPrimaryError) as e:
            c.e2e.rs.insert_one({"on": "secondary"})
        assert e.value.details["code"] == 10107


def eventually(check, what, timeout=15):
    """Waits until `check()` is true (a secondary applies committed entries a moment later)."""
    deadline = time.time() + timeout
    while True:
        try:
            if check():
                return
        except PyMongoError:
            pass
        assert time.time() < deadline, what
        time.sleep(0.1)


# Every command that changes data, the catalog or users, as a secondary must refuse it.
WRITES = [
    ("e2e", {"insert": "rs", "documents": [{}]}),
    ("e2e", {"update": "rs", "updates": [{"q": {}, "u": {"$set": {"x": 1}}}]}),
    ("e2e", {"delete": "rs", "deletes": [{"q": {}, "limit": 1}]}),
    ("e2e", {"findAndModify": "rs", "query": {}, "update": {"$set": {"x": 1}}}),
    ("e2e", {"create": "c2"}),
    ("e2e", {"drop": "rs"}),
    ("e2e", {"createIndexes": "rs", "indexes": [{"key": {"n": 1}, "name": "n_1"}]}),
    ("e2e", {"dropIndexes": "rs", "index": "*"}),
    ("e2e", {"collMod": "rs", "validator": {}}),
    ("e2e", {"dropDatabase": 1}),
    ("admin", {"renameCollection": "e2e.rs", "to": "e2e.rs2"}),
    ("e2e", {"aggregate": "rs", "pipeline": [{"$out": "out"}], "cursor": {}}),
    ("e2e", {"aggregate": "rs", "pipeline": [{"$merge": {"into": "merged"}}], "cursor": {}}),
    ("e2e", {"mapReduce": "rs", "map": "function() { emit(1, 1) }",
             "reduce": "function(k, v) { return 1 }", "out": "mr"}),
    ("e2e", {"createUser": "u", "pwd": "p", "roles": []}),
    ("e2e", {"updateUser": "u", "customData": {}}),
    ("e2e", {"grantRolesToUser": "u", "roles": ["read"]}),
    ("e2e", {"revokeRolesFromUser": "u", "roles": ["read"]}),
    ("e2e", {"dropUser": "u"}),
]


def recv_exactly(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, "the member closed the connection"
        data += chunk
    return data


def raw_commands(s, commands):
    """The replies to `commands` ((db, command) pairs) over one plain connection to `s`: a
    driver would mark the member unknown after each NotWritablePrimary and wait to look again."""
    replies = []
    with socket.create_connection(("127.0.0.1", s.port), timeout=10) as sock:
        for i, (db, cmd) in enumerate(commands):
            body = bson.encode({**cmd, "$db": db})
            sock.sendall(struct.pack("<iiiiI", 21 + len(body), i + 1, 0, 2013, 0) + b"\0" + body)
            length = struct.unpack("<i", recv_exactly(sock, 16)[:4])[0]
            replies.append(bson.decode(recv_exactly(sock, length - 16)[5:]))
    return replies


def test_every_write_is_refused_on_a_secondary(initiated):
    primary = wait_for_primary(initiated)
    secondary = next(s for s in initiated if s is not primary)
    for (db, cmd), reply in zip(WRITES, raw_commands(secondary, WRITES)):
        assert reply["ok"] == 0 and reply["code"] == 10107, (db, cmd, reply)


def test_catalog_and_user_commands_replicate(initiated):
    with set_client(initiated) as c:
        db = c.e2e_catalog
        db.create_collection("cat", capped=True, size=1 << 20)
        db.cat.insert_many([{"_id": i, "n": i} for i in range(5)])
        db.cat.create_index("n", name="n_1")
        db.command("collMod", "cat", validator={"n": {"$gte": 0}})
        db.cat.find_one_and_update({"_id": 1}, {"$set": {"found": True}})
        db.cat.aggregate([{"$match": {}}, {"$out": "outed"}])
        db.cat.aggregate([{"$match": {}}, {"$merge": {"into": "merged"}}])
        c.admin.command("renameCollection", "e2e_catalog.outed", to="e2e_catalog.renamed")
        db.command("createUser", "repl_user", pwd="pw", roles=["read"])
        db.command("grantRolesToUser", "repl_user", roles=["readWrite"])
        db.doomed.insert_one({})
        db.drop_collection("doomed")
        db.indexed.create_index("a")
        db.indexed.drop_index("a_1")
        for cmd in ({"create": "v", "viewOn": "cat", "pipeline": []},
                    {"create": "ts", "timeseries": {"timeField": "at"}}):
            with pytest.raises(OperationFailure) as e:
                db.command(cmd)
            assert e.value.code == 115, "views and time-series collections do not replicate yet"
    primary = wait_for_primary(initiated)
    for s in initiated:
        if s is primary:
            continue
        with direct(s, readPreference="secondaryPreferred") as c:
            db = c.e2e_catalog
            eventually(lambda: sorted(db.list_collection_names()) == ["cat", "indexed", "merged", "renamed"],
                       f"{host(s)} has the primary's collections")
            eventually(lambda: "readWrite" in str(db.command("usersInfo", "repl_user")["users"]),
                       f"{host(s)} has the primary's user and its roles")
            options = next(db.list_collections(filter={"name": "cat"}))["options"]
            assert options["capped"] is True and options["validator"] == {"n": {"$gte": 0}}
            assert "n_1" in db.cat.index_information()
            assert "a_1" not in db.indexed.index_information()
            assert db.cat.find_one({"_id": 1})["found"] is True
            assert db.renamed.count_documents({}) == 5 and db.merged.count_documents({}) == 5
    with set_client(initiated) as c:
        c.drop_database("e2e_catalog")
    for s in initiated:
        with direct(s, readPreference="secondaryPreferred") as c:
            eventually(lambda: "e2e_catalog" not in c.list_database_names(),
                       f"{host(s)} dropped the database")


def test_a_secondarys_profiler_stays_its_own(initiated):
    """Each member profiles its own operations; system.profile is never logged, so a
    secondary's profiler does not put writes in its oplog that the set never saw (which would
    send it to RECOVERING), and the primary's profile does not reach its secondaries."""
    primary = wait_for_primary(initiated)
    secondary = next(s for s in initiated if s is not primary)
    with direct(secondary, readPreference="secondaryPreferred") as c:
        c.e2e.command("profile", 2)
        for _ in range(5):
            c.e2e.rs.find_one({})
        c.e2e.command("profile", 0)
        assert c.e2e.system.profile.count_documents({}) > 0
    with direct(primary) as c:
        c.e2e.command("profile", 2)
        c.e2e.rs.find_one({"marker": "primary only"})
        c.e2e.command("profile", 0)
        assert c.e2e.system.profile.count_documents({"command.filter.marker": "primary only"}) == 1
    with set_client(initiated) as c:
        c.e2e.rs.insert_one({"_id": "after-profile"})  # the set still takes majority writes
    assert read_from(secondary, "after-profile") is not None
    time.sleep(0.5)  # the members' own check runs every 200 ms
    with direct(secondary, readPreference="secondaryPreferred") as c:
        assert c.admin.command("replSetGetStatus")["myState"] == 2
        assert c.e2e.system.profile.count_documents({"command.filter.marker": "primary only"}) == 0


def test_step_down_hands_the_primary_over(initiated):
    old = wait_for_primary(initiated)
    secondary = next(s for s in initiated if s is not old)
    with direct(secondary) as c:
        with pytest.raises(NotPrimaryError) as e:
            c.admin.command("replSetStepDown", 10)
        assert e.value.details["code"] == 10107
    with direct(old) as c:
        for bad, code in (({"replSetStepDown": 1}, 2),  # shorter than the catch-up period
                          ({"replSetStepDown": 10, "force": True}, 238),
                          ({"replSetFreeze": 10}, 95)):  # the primary cannot be frozen
            with pytest.raises(OperationFailure) as e:
                c.admin.command(bad)
            assert e.value.code == code, bad
        c.admin.command("replSetStepDown", 10, secondaryCatchUpPeriodSecs=5)
        assert c.admin.command("hello")["isWritablePrimary"] is False
        with pytest.raises(NotPrimaryError):
            c.e2e.rs.insert_one({"on": "the stepped-down primary"})
    new = wait_for_primary(initiated)
    assert new is not old
    with set_client(initiated) as c:
        c.e2e.rs.insert_one({"_id": "after-stepdown"})
    assert read_from(old, "after-stepdown") is not None, "the old primary follows the new one"


def on_the_primary(command, timeout=15):
    """`command()`'s result once the client has found the new primary (a command is not
    retried by the driver as a write is)."""
    deadline = time.time() + timeout
    while True:
        try:
            return command()
        except (NotPrimaryError, pymongo.errors.AutoReconnect):
            assert time.time() < deadline, "the client finds the new primary"
            time.sleep(0.2)


def test_retryable_writes_apply_once_across_a_step_down(initiated):
    """The same insert and findAndModify (one lsid and txnNumber each) sent again answer as
    the first time without applying again: on the same primary, and on the primary a
    step-down makes. The set client retries writes (retryWrites=true, the default)."""
    old = wait_for_primary(initiated)
    with set_client(initiated) as c:
        db = c.e2e
        db.retry.insert_one({"_id": "driver-retried"})
        db.retry.update_one({"_id": "driver-retried"}, {"$set": {"x": 1}})
        assert db.retry.find_one({"_id": "driver-retried"}) == {"_id": "driver-retried", "x": 1}
        # The driver may hand these sessions out of its pool, after the writes above gave
        # them txnNumbers of its own: ours are above those.
        s_insert, s_fam = c.start_session(), c.start_session()
        insert = {"insert": "retry", "documents": [{"_id": 1, "n": 0}, {"_id": 2}],
                  "txnNumber": bson.Int64(100)}
        fam = {"findAndModify": "retry", "query": {"_id": 1}, "update": {"$inc": {"n": 1}},
               "new": True, "txnNumber": bson.Int64(100)}
        first = db.command(dict(insert), session=s_insert)
        assert first["n"] == 2 and "writeErrors" not in first
        value = db.command(dict(fam), session=s_fam)["value"]
        assert value == {"_id": 1, "n": 1}
        again = db.command(dict(insert), session=s_insert)
        assert again["n"] == 2 and "writeErrors" not in again, again
        assert db.command(dict(fam), session=s_fam)["value"] == value
        with direct(old) as d:
            d.admin.command("replSetStepDown", 10, secondaryCatchUpPeriodSecs=5)
        new = wait_for_primary(initiated)
        assert new is not old
        retried = on_the_primary(lambda: db.command(dict(insert), session=s_insert))
        assert retried["n"] == 2 and "writeErrors" not in retried, retried
        assert db.command(dict(fam), session=s_fam)["value"] == value
        assert db.retry.find_one({"_id": 1}) == {"_id": 1, "n": 1}, "applied once"
        with pytest.raises(OperationFailure) as e:
            db.command(dict(insert, txnNumber=bson.Int64(0)), session=s_insert)
        assert e.value.code == 225  # TransactionTooOld
        with pytest.raises(OperationFailure) as e:
            db.command({"find": "retry", "txnNumber": bson.Int64(5)}, session=s_insert)
        assert e.value.code == 20


def test_reconfig_adds_and_removes_a_member(initiated, tmp_path):
    fourth = start_member(str(tmp_path))
    try:
        primary = wait_for_primary(initiated)
        with direct(primary) as c:
            config = c.admin.command("replSetGetConfig")["config"]
            for bad, code in (({"replSetReconfig": config}, 103),  # the version must grow
                              ({"replSetReconfig": config, "force": True}, 238)):
                with pytest.raises(OperationFailure) as e:
                    c.admin.command(bad)
                assert e.value.code == code
            config["version"] += 1
            config["members"].append({"_id": 3, "host": host(fourth)})
            c.admin.command("replSetReconfig", config)
            hello = c.admin.command("hello")
            assert hello["setVersion"] == config["version"] and host(fourth) in hello["hosts"]
        # The new member copied the set's writes from the log, and votes.
        assert read_from(fourth, "after-stepdown") is not None
        for s in initiated + [fourth]:
            with direct(s) as c:
                eventually(lambda: c.admin.command("hello")["setVersion"] == config["version"],
                           f"{host(s)} adopted the new configuration")
        with set_client(initiated) as c:
            c.e2e.rs.insert_one({"_id": "four members"})
        assert read_from(fourth, "four members") is not None
        with direct(primary) as c:
            config["version"] += 1
            config["members"] = [m for m in config["members"] if m["_id"] != 3]
            c.admin.command("replSetReconfig", config)
            assert host(fourth) not in c.admin.command("hello")["hosts"]
            assert len(c.admin.command("replSetGetStatus")["members"]) == 3
    finally:
        fourth.stop()


def test_failover_keeps_every_majority_write(initiated):
    with set_client(initiated) as c:
        coll = c.e2e.get_collection("fail", write_concern=pymongo.WriteConcern("majority"))
        acked = []
        for i in range(30):
            coll.insert_one({"_id": i})
            acked.append(i)
        old = wait_for_primary(initiated)
        # One secondary frozen, the other unfrozen: only the second may take over (once both
        # hold every acknowledged write, so the frozen one's vote can go to it).
        frozen, electable = [s for s in initiated if s is not old]
        for s in (frozen, electable):
            assert read_from(s, acked[-1], coll="fail") is not None
        with direct(frozen) as f:
            f.admin.command("replSetFreeze", 60)
        with direct(electable) as e:
            assert e.admin.command("replSetFreeze", 0)["info"] == "unfreezing"
        old.kill()
        killed = time.time()
        deadline = killed + 30
        while True:
            try:
                coll.insert_one({"_id": "after"})
                break
            except PyMongoError:
                assert time.time() < deadline, "no new primary took a majority write within 30 s"
                time.sleep(0.2)
        print(f"new primary took a majority write {time.time() - killed:.1f} s after the kill")
        rest = [s for s in initiated if s is not old]
        new = wait_for_primary(rest)
        assert new is electable, "the frozen member did not campaign"
        found = {d["_id"] for d in coll.find({})}
        assert set(acked) | {"after"} <= found
