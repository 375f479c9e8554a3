"""A command's `let` variables and a write's `hint`, as a driver sends them (issue 35)."""
import datetime

import pymongo
import pytest
from pymongo import DeleteOne, ReplaceOne, UpdateMany, UpdateOne
from pymongo.errors import BulkWriteError, OperationFailure, WriteError

BY_ID = {"$expr": {"$eq": ["$_id", "$$id"]}}


@pytest.fixture
def docs(coll):
    coll.insert_many([{"_id": i, "x": i * 10} for i in range(1, 6)])
    return coll


def test_find_and_aggregate_read_let(client, docs):
    assert list(docs.find(BY_ID, let={"id": 2})) == [{"_id": 2, "x": 20}]
    # The projection reads them too, and a cursor's later batches see the same values.
    got = list(docs.find({"$expr": {"$gte": ["$x", "$$lo"]}}, {"v": "$$v"},
                         let={"lo": 20, "v": "k"}, batch_size=1))
    assert got == [{"_id": i, "v": "k"} for i in range(2, 6)]
    out = list(docs.aggregate(
        [{"$match": BY_ID},
         {"$project": {"_id": 0, "x": "$$x", "y": "$$y", "r": "$$r", "now": "$$NOW"}}],
        let={"id": 1, "x": "foo", "y": {"$literal": "$bar"}, "r": {"$rand": {}}}))
    assert len(out) == 1 and out[0]["x"] == "foo" and out[0]["y"] == "$bar"
    assert isinstance(out[0]["r"], float) and isinstance(out[0]["now"], datetime.datetime)
    # Every stage that evaluates expressions reads them.
    grouped = list(docs.aggregate(
        [{"$group": {"_id": "$$k", "n": {"$sum": "$$one"}}},
         {"$addFields": {"tag": "$$k"}}, {"$replaceWith": {"k": "$tag", "n": "$n"}}],
        let={"k": "all", "one": 1}))
    assert grouped == [{"k": "all", "n": 5}]
    # $out writes what the pipeline made with them.
    docs.aggregate([{"$match": BY_ID}, {"$project": {"_id": 1}}, {"$out": "let_out"}],
                   let={"id": 3})
    assert list(docs.database["let_out"].find()) == [{"_id": 3}]


def test_writes_read_let(docs):
    r = docs.update_one(BY_ID, [{"$set": {"x": "$$x"}}], let={"id": 1, "x": "foo"})
    assert (r.matched_count, r.modified_count) == (1, 1)
    assert docs.find_one({"_id": 1}) == {"_id": 1, "x": "foo"}
    r = docs.update_many({"$expr": {"$gte": ["$_id", "$$lo"]}}, [{"$set": {"y": "$$y"}}],
                         let={"lo": 4, "y": 7})
    assert r.modified_count == 2 and docs.count_documents({"y": 7}) == 2
    docs.replace_one(BY_ID, {"x": "replaced"}, let={"id": 2})
    assert docs.find_one({"_id": 2}) == {"_id": 2, "x": "replaced"}
    assert docs.find_one_and_update(BY_ID, [{"$set": {"x": "$$v"}}], let={"id": 3, "v": 1},
                                    return_document=True) == {"_id": 3, "x": 1}
    assert docs.find_one_and_replace(BY_ID, {"x": 9}, let={"id": 3}) == {"_id": 3, "x": 1}
    assert docs.find_one_and_delete(BY_ID, let={"id": 3}) == {"_id": 3, "x": 9}
    assert docs.delete_one(BY_ID, let={"id": 1}).deleted_count == 1
    assert docs.delete_many({"$expr": {"$gt": ["$_id", "$$n"]}}, let={"n": 3}).deleted_count == 2
    assert [d["_id"] for d in docs.find()] == [2]


def test_bulk_write_and_statement_constants_read_let(client, docs):
    r = docs.bulk_write([UpdateOne(BY_ID, [{"$set": {"x": 22}}]),
                         UpdateMany({"$expr": {"$gt": ["$_id", "$$id"]}}, [{"$set": {"z": 1}}]),
                         ReplaceOne(BY_ID, {"x": 23}),
                         DeleteOne({"$expr": {"$eq": ["$_id", 5]}})], let={"id": 1})
    assert (r.matched_count, r.deleted_count) == (6, 1)
    assert docs.find_one({"_id": 1}) == {"_id": 1, "x": 23}
    # An update statement's `c` constants are read by its pipeline, over the command's let.
    db = client.get_database(docs.database.name)
    reply = db.command("update", docs.name, updates=[
        {"q": BY_ID, "u": [{"$set": {"x": "$$c1", "w": "$$id"}}], "c": {"c1": "k"}}],
        let={"id": 2})
    assert reply["nModified"] == 1
    assert docs.find_one({"_id": 2}) == {"_id": 2, "x": "k", "w": 2, "z": 1}
    reply = db.command("update", docs.name, updates=[
        {"q": {}, "u": {"$set": {"x": 1}}, "c": {"c1": "k"}}])
    assert reply["n"] == 0 and reply["writeErrors"][0]["code"] == 51198


@pytest.mark.parametrize("let,code", [
    ({"ROOT": 1}, 16867),
    ({"CURRENT": 1}, 16867),
    ({"Upper": 1}, 16867),
    ({"a-b": 1}, 16868),
    ({"v": "$x"}, 4890500),
    ({"v": "$$ROOT"}, 4890500),
    ({"v": {"$add": ["$x", 1]}}, 4890500),
    ({"v": "$$undefinedVar"}, 17276),
    ({"NOW": 1}, 14),
])
def test_bad_let_is_refused_with_mongods_codes(docs, let, code):
    for run in (lambda: list(docs.find({}, let=let)),
                lambda: list(docs.aggregate([], let=let)),
                lambda: docs.update_one({}, {"$set": {"a": 1}}, let=let),
                lambda: docs.delete_one({}, let=let),
                lambda: docs.find_one_and_delete({}, let=let)):
        with pytest.raises(OperationFailure) as e:
            run()
        assert e.value.code == code, e.value.details
    assert docs.count_documents({}) == 5


def test_let_may_set_now(docs):
    when = datetime.datetime(2020, 1, 2, 3, 4, 5)
    got = list(docs.aggregate([{"$limit": 1}, {"$project": {"_id": 0, "t": "$$NOW"}}],
                              let={"NOW": when}))
    assert got == [{"t": when}]


def test_write_hints_name_an_index(docs):
    docs.create_index("x", name="x_up")
    for h in ["_id_", [("_id", 1)], "x_up", [("x", 1)]]:
        r = docs.update_one({"_id": {"$gt": 1}}, {"$inc": {"x": 1}}, hint=h)
        assert r.matched_count == 1
        assert docs.find_one_and_update({"_id": 2}, {"$inc": {"x": 1}}, hint=h) is not None
    assert docs.update_many({}, {"$set": {"m": 1}}, hint="x_up").modified_count == 5
    assert docs.replace_one({"_id": 5}, {"x": 1}, hint={"_id": 1}).modified_count == 1
    assert docs.delete_one({"_id": 5}, hint="_id_").deleted_count == 1
    assert docs.find_one_and_delete({"_id": 4}, hint="x_up")["_id"] == 4
    assert docs.delete_many({"_id": {"$gte": 3}}, hint=[("_id", 1)]).deleted_count == 1
    r = docs.bulk_write([UpdateOne({"_id": 1}, {"$set": {"b": 1}}, hint="_id_"),
                         DeleteOne({"_id": 2}, hint=[("x", 1)])])
    assert (r.modified_count, r.deleted_count) == (1, 1)
    assert sorted(d["_id"] for d in docs.find()) == [1]


def test_a_hint_that_names_no_index_is_bad_value(docs):
    msg = "hint provided does not correspond to an existing index"
    for run in (lambda: docs.update_one({"_id": 1}, {"$set": {"a": 1}}, hint="nope"),
                lambda: docs.update_many({}, {"$set": {"a": 1}}, hint=[("a", 1)]),
                lambda: docs.replace_one({"_id": 1}, {"a": 1}, hint="nope"),
                lambda: docs.delete_one({"_id": 1}, hint="nope"),
                lambda: docs.delete_many({}, hint=[("zz", -1)])):
        with pytest.raises(WriteError) as e:
            run()
        assert (e.value.code, e.value.details["errmsg"]) == (2, msg)
    for run in (lambda: docs.find_one_and_update({"_id": 1}, {"$set": {"a": 1}}, hint="nope"),
                lambda: docs.find_one_and_delete({"_id": 1}, hint="nope")):
        with pytest.raises(OperationFailure) as e:
            run()
        assert (e.value.code, e.value.details["errmsg"]) == (2, msg)
    with pytest.raises(BulkWriteError) as e:
        docs.bulk_write([DeleteOne({"_id": 1}), DeleteOne({"_id": 2}, hint="nope")])
    assert e.value.details["writeErrors"][0]["index"] == 1
    assert e.value.details["writeErrors"][0]["code"] == 2
    # Nothing changed past the refused statement; nothing else at all.
    assert sorted(d["_id"] for d in docs.find()) == [2, 3, 4, 5]
    assert all("a" not in d for d in docs.find())


def test_explained_writes_use_their_hint(client, docs):
    docs.create_index("x", name="x_up")
    db = client.get_database(docs.database.name)

    def winning(cmd):
        return str(db.command("explain", cmd, verbosity="queryPlanner")
                   ["queryPlanner"]["winningPlan"])

    # Without a hint the _id equality picks the _id index; with one, the hinted index.
    assert "_id_" in winning({"update": docs.name, "updates": [
        {"q": {"_id": 1}, "u": {"$set": {"a": 1}}}]})
    plan = winning({"update": docs.name, "updates": [
        {"q": {"_id": 1}, "u": {"$set": {"a": 1}}, "hint": "x_up"}]})
    assert "IXSCAN" in plan and "x_up" in plan
    plan = winning({"delete": docs.name, "deletes": [
        {"q": {"_id": 1}, "limit": 1, "hint": {"x": 1}}]})
    assert "IXSCAN" in plan and "x_up" in plan
    plan = winning({"findAndModify": docs.name, "query": {"_id": 1}, "remove": True,
                    "hint": "x_up"})
    assert "IXSCAN" in plan and "x_up" in plan
    assert "COLLSCAN" in winning({"delete": docs.name, "deletes": [
        {"q": {"_id": 1}, "limit": 1, "hint": {"$natural": 1}}]})
    with pytest.raises(OperationFailure) as e:
        db.command("explain", {"update": docs.name, "updates": [
            {"q": {}, "u": {"$set": {"a": 1}}}, {"q": {}, "u": {"$set": {"a": 1}}}]})
    assert e.value.code == 342
    with pytest.raises(OperationFailure) as e:
        db.command("update", docs.name, updates=[{"q": {}, "u": {"$set": {"a": 1}}, "hint": 3}])
    assert e.value.code == 14
    assert docs.count_documents({"a": 1}) == 0


def test_aggregate_bypass_document_validation(client, docs):
    db = client.get_database(docs.database.name)
    db.create_collection("strict", validator={"x": {"$type": "string"}})
    with pytest.raises(OperationFailure) as e:
        docs.aggregate([{"$out": "strict"}], bypassDocumentValidation=False)
    assert e.value.code == 121
    assert db["strict"].count_documents({}) == 0
    docs.aggregate([{"$out": "strict"}], bypassDocumentValidation=True)
    assert db["strict"].count_documents({}) == 5
    db.create_collection("strict2", validator={"x": {"$type": "string"}})
    with pytest.raises(OperationFailure) as e:
        docs.aggregate([{"$merge": {"into": "strict2"}}])
    assert e.value.code == 121
    docs.aggregate([{"$merge": {"into": "strict2"}}], bypassDocumentValidation=True)
    assert db["strict2"].count_documents({}) == 5


def test_merge_duplicate_key_error_has_mongods_shape(client, docs):
    db = client.get_database(docs.database.name)
    db["target"].insert_one({"_id": 2, "x": 1})
    with pytest.raises(OperationFailure) as e:
        docs.aggregate([{"$match": {"_id": 2}},
                        {"$merge": {"into": "target", "whenMatched": "fail"}}])
    assert e.value.code == 11000
    assert e.value.details["keyPattern"] == {"_id": 1}
    assert e.value.details["keyValue"] == {"_id": 2}


def test_distinct_is_not_in_api_version_1(server, docs):
    strict = server.client(server_api=pymongo.server_api.ServerApi("1", strict=True))
    coll = strict[docs.database.name][docs.name]
    with pytest.raises(OperationFailure) as e:
        coll.distinct("x")
    assert e.value.code == 323 and "command distinct is not in API Version 1" in str(e.value)
    assert coll.count_documents({}) == 5
    loose = server.client(server_api=pymongo.server_api.ServerApi("1"))
    assert sorted(loose[docs.database.name][docs.name].distinct("x")) == [10, 20, 30, 40, 50]
