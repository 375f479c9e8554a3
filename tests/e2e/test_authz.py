"""Authorization over every namespace a command reaches (issue 34 §5), against a real server
with --auth: views resolved to their sources, every stage that names a collection, explain's
inner command, the users' and roles' collections, cursors of other users, listDatabases."""
import os
import re

import pymongo
import pytest
from pymongo.errors import OperationFailure

from conftest import ROOT, Server


def uri(server, user, pwd, source="admin"):
    return f"mongodb://{user}:{pwd}@127.0.0.1:{server.port}/?authSource={source}"


@pytest.fixture
def auth_server(dbpath):
    s = Server(dbpath, ["--auth"]).start()
    # The localhost exception: the first user, over loopback, without credentials.
    c = s.client()
    c.admin.command("createUser", "boss", pwd="s3cret", roles=["root"])
    c.close()
    yield s
    s.stop()


@pytest.fixture
def users(auth_server):
    """root; `rw` with readWrite on admin (the issue's leak); `reader` and `reader2` with read
    on dba only; data in dba and in dbb."""
    root = pymongo.MongoClient(uri(auth_server, "boss", "s3cret"), serverSelectionTimeoutMS=10000)
    root.admin.command("createUser", "rw", pwd="rw", roles=["readWrite"])
    root.dba.command("createUser", "reader", pwd="r", roles=["read"])
    root.dba.command("createUser", "reader2", pwd="r2", roles=["read"])
    root.admin.notes.insert_many([{"_id": i, "u": "admin.boss"} for i in range(3)])
    root.dba.src.insert_many([{"_id": i, "k": i} for i in range(10)])
    root.dba.other.insert_many([{"_id": i, "k": i} for i in range(3)])
    root.dbb.secret.insert_many([{"_id": i, "k": i, "secret": True} for i in range(3)])
    clients = {
        "root": root,
        "rw": pymongo.MongoClient(uri(auth_server, "rw", "rw"), serverSelectionTimeoutMS=10000),
        "reader": pymongo.MongoClient(uri(auth_server, "reader", "r", "dba"), serverSelectionTimeoutMS=10000),
        "reader2": pymongo.MongoClient(uri(auth_server, "reader2", "r2", "dba"), serverSelectionTimeoutMS=10000),
    }
    yield clients
    for c in clients.values():
        c.close()


def refused(fn, code=13):
    with pytest.raises(OperationFailure) as e:
        fn()
    assert e.value.code == code, e.value.details
    return e.value


LEAKING_PIPELINES = [
    [{"$lookup": {"from": "system.users", "localField": "u", "foreignField": "_id", "as": "c"}}],
    [{"$lookup": {"from": "notes", "as": "c", "pipeline": [{"$unionWith": "system.users"}]}}],
    [{"$unionWith": "system.users"}],
    [{"$unionWith": {"coll": "notes", "pipeline": [{"$unionWith": {"coll": "system.roles"}}]}}],
    [{"$graphLookup": {"from": "system.users", "startWith": "$u", "connectFromField": "_id",
                       "connectToField": "_id", "as": "c"}}],
    [{"$facet": {"f": [{"$facet": {"g": [{"$unionWith": "system.users"}]}}]}}],
]


def test_a_view_on_the_users_collection_is_refused(users):
    rw = users["rw"].admin
    # The issue's leak: readWrite on admin, a view on system.users, then read it.
    refused(lambda: rw.command("create", "leak", viewOn="system.users", pipeline=[]))
    refused(lambda: rw.command("create", "leak", viewOn="system.roles", pipeline=[]))
    # A harmless view works (the check is not a blanket refusal of views) ...
    rw.command("create", "plain", viewOn="notes", pipeline=[{"$match": {}}])
    assert len(list(rw.plain.find())) == 3
    # ... a view on it that joins the users is refused, whatever the stage or its depth ...
    for pipeline in LEAKING_PIPELINES:
        refused(lambda: rw.command("create", "leak2", viewOn="plain", pipeline=pipeline))
        refused(lambda: rw.command("create", "leak2", viewOn="notes", pipeline=pipeline))
    # ... and so is redefining the harmless one to read them.
    refused(lambda: rw.command("collMod", "plain", viewOn="system.users", pipeline=[]))
    refused(lambda: rw.command("collMod", "plain", viewOn="notes", pipeline=LEAKING_PIPELINES[0]))
    names = set(rw.list_collection_names())
    assert "leak" not in names and "leak2" not in names
    assert len(list(rw.plain.find())) == 3
    # Even root reaches the users through the user commands only.
    root = users["root"].admin
    refused(lambda: root.command("create", "leak", viewOn="system.users"))
    assert {u["user"] for u in root.command("usersInfo", 1)["users"]} >= {"boss", "rw"}


def test_every_read_path_to_the_users_collection_is_refused(users):
    rw = users["rw"].admin
    reads = [
        lambda: rw.system.users.find_one(),
        lambda: rw.command("count", "system.users"),
        lambda: rw.command("distinct", "system.users", key="_id"),
        lambda: list(rw.system.users.aggregate([])),
        lambda: rw.command("listIndexes", "system.users"),
        lambda: rw.command("collStats", "system.users"),
        lambda: rw.command("explain", {"find": "system.users"}),
        lambda: rw.command("explain", {"aggregate": "notes", "pipeline": LEAKING_PIPELINES[0], "cursor": {}}),
        lambda: rw.command("renameCollection", "admin.notes", to="admin.system.users"),
        lambda: rw.command("renameCollection", "admin.system.users", to="admin.stolen"),
        lambda: rw.system.roles.find_one(),
        lambda: users["root"].app.system.users.find_one(),
    ]
    for pipeline in LEAKING_PIPELINES:
        reads.append(lambda p=pipeline: list(rw.notes.aggregate(p)))
        # $lookup from a view: the view is harmless, the join into the users is not.
        reads.append(lambda p=pipeline: list(rw.notes.aggregate(
            [{"$lookup": {"from": "plain", "as": "x", "pipeline": p}}])))
    rw.command("create", "plain", viewOn="notes")
    for read in reads:
        refused(read)
    # The same shapes on an ordinary collection work.
    assert len(list(rw.notes.aggregate([{"$lookup": {"from": "plain", "as": "x", "pipeline": []}}]))) == 3
    assert rw.command("explain", {"find": "plain"})["ok"] == 1.0


def parser_stage_names():
    """Every stage name `parse_stage` matches on, read from the parser's source."""
    src = open(os.path.join(ROOT, "crates/query/src/aggregate/parse.rs")).read()
    start = src.index("pub(super) fn parse_stage(")
    body = src[start:src.index("\n}\n", start)]
    return set(re.findall(r'"(\$[A-Za-z]+)"', body))


def foreign(ns):
    """`ns` as a stage names another database's collection."""
    db, coll = ns.split(".", 1)
    return {"db": db, "coll": coll}


# Each stage that names a collection, reading (or writing) `target`: a plain name in the
# pipeline's database, or {db, coll} for another one.
FOREIGN_STAGES = {
    "$lookup": lambda t: {"$lookup": {"from": t, "localField": "k", "foreignField": "k", "as": "j"}},
    "$graphLookup": lambda t: {"$graphLookup": {"from": t, "startWith": "$k", "connectFromField": "k",
                                                "connectToField": "k", "as": "j"}},
    "$unionWith": lambda t: {"$unionWith": {"coll": t, "pipeline": []}},
    "$facet": lambda t: {"$facet": {"f": [{"$unionWith": {"coll": t}}]}},
    "$out": lambda t: {"$out": t},
    "$merge": lambda t: {"$merge": {"into": t}},
}
# Stages that name no collection besides the pipeline's input.
LOCAL_STAGES = {
    "$match", "$project", "$addFields", "$set", "$unset", "$group", "$sort", "$skip", "$limit",
    "$unwind", "$count", "$bucket", "$bucketAuto", "$sample", "$setWindowFields", "$collStats",
    "$geoNear", "$currentOp", "$replaceRoot", "$replaceWith", "$sortByCount", "$changeStream",
    "$indexStats", "$listSessions", "$densify", "$fill", "$redact", "$search", "$documents",
    "$listLocalSessions",
}


def test_every_stage_that_names_a_collection_is_checked(users):
    names = parser_stage_names()
    assert "$lookup" in names and len(names) > 30, names
    unknown = names - set(FOREIGN_STAGES) - LOCAL_STAGES
    assert not unknown, f"stages without a namespace rule in this test: {unknown}"
    assert not (set(FOREIGN_STAGES) | LOCAL_STAGES) - names, "a stage the parser no longer has"
    reader = users["reader"].dba
    root = users["root"]
    for name, stage in FOREIGN_STAGES.items():
        pipeline = [stage(foreign("dbb.secret"))]
        # The users' collection through it: refused even to readWrite on admin.
        refused(lambda: list(users["rw"].admin.notes.aggregate([stage("system.users")])))
        if name in ("$out", "$merge"):
            # read on dba cannot write anywhere: not dbb, not its own database.
            refused(lambda: list(reader.src.aggregate(pipeline)))
            refused(lambda: list(reader.src.aggregate([stage("copy")])))
            # readWrite on admin reaches admin, not dbb.
            list(users["rw"].admin.notes.aggregate([stage("copy")]))
            refused(lambda: list(users["rw"].admin.notes.aggregate(pipeline)))
            continue
        # The positive control: the same stage on a collection of dba works.
        out = list(reader.src.aggregate([stage("other")]))
        assert out, name
        # dbb, named as {db, coll}: refused by authorization before anything runs.
        err = refused(lambda: list(reader.src.aggregate(pipeline)))
        assert "dbb" in str(err), err
        # And nested in a $lookup's and a $facet's sub-pipeline.
        refused(lambda: list(reader.src.aggregate(
            [{"$lookup": {"from": "other", "as": "x", "pipeline": pipeline}}])))
        refused(lambda: list(reader.src.aggregate([{"$facet": {"f": pipeline}}])))
    assert root.dbb.secret.count_documents({}) == 3


def test_cursors_belong_to_their_users(users):
    a, b = users["reader"].dba, users["reader2"].dba
    first = a.command("find", "src", batchSize=2)["cursor"]
    cid = first["id"]
    assert cid and len(first["firstBatch"]) == 2
    refused(lambda: b.command("getMore", cid, collection="src"))
    refused(lambda: b.command("killCursors", "src", cursors=[cid]))
    more = a.command("getMore", cid, collection="src", batchSize=3)["cursor"]
    assert [d["_id"] for d in more["nextBatch"]] == [2, 3, 4]
    killed = a.command("killCursors", "src", cursors=[cid])
    assert killed["cursorsKilled"] == [cid]


def test_list_databases_shows_the_users_databases(users):
    reader = users["reader"]
    assert reader.list_database_names() == ["dba"]
    assert [d["name"] for d in reader.admin.command("listDatabases", authorizedDatabases=True)["databases"]] == ["dba"]
    refused(lambda: reader.admin.command("listDatabases", authorizedDatabases=False))
    every = set(users["root"].list_database_names())
    assert {"admin", "dba", "dbb"} <= every
    # root asking for its authorized databases: it holds privileges on all of them.
    assert set(d["name"] for d in users["root"].admin.command(
        "listDatabases", nameOnly=True, authorizedDatabases=True)["databases"]) == every
