"""CRUD, bulk writes, indexes, queries, aggregation, cursors through pymongo."""
import pymongo
import pytest
from bson import ObjectId
from pymongo import ASCENDING, DESCENDING
from pymongo.errors import BulkWriteError, DuplicateKeyError, OperationFailure


def test_handshake_and_basic_commands(client):
    assert client.admin.command("ping")["ok"] == 1.0
    info = client.server_info()
    assert info["version"].startswith("7.0")
    hello = client.admin.command("hello")
    assert hello["isWritablePrimary"] is True
    assert hello["maxWireVersion"] == 21
    with pytest.raises(OperationFailure) as e:
        client.admin.command("atlasVersion")
    assert e.value.code == 59
    status = client.admin.command("serverStatus")
    assert "flashdoc" in status and status["connections"]["current"] >= 1


def test_server_status_has_network_asserts_and_mem(client):
    # What monitoring exporters read first (mongod's field names and units).
    before = client.admin.command("serverStatus")
    for field in ("bytesIn", "bytesOut", "physicalBytesIn", "physicalBytesOut", "numRequests"):
        assert before["network"][field] > 0, field
    for field in ("regular", "warning", "msg", "user", "rollovers"):
        assert field in before["asserts"], field
    assert before["mem"]["bits"] == 64 and before["mem"]["supported"] is True
    assert 0 < before["mem"]["resident"] <= before["mem"]["virtual"]
    with pytest.raises(OperationFailure):
        client.admin.command("atlasVersion")  # a user error: CommandNotFound
    client.admin.command("ping", comment="x" * 10_000)
    after = client.admin.command("serverStatus")
    assert after["asserts"]["user"] >= before["asserts"]["user"] + 1
    assert after["network"]["bytesIn"] >= before["network"]["bytesIn"] + 10_000
    assert after["network"]["numRequests"] >= before["network"]["numRequests"] + 3
    assert after["network"]["bytesOut"] > before["network"]["bytesOut"]


def test_insert_find_update_delete(coll):
    r = coll.insert_one({"name": "a", "n": 1})
    assert isinstance(r.inserted_id, ObjectId)
    coll.insert_many([{"name": "b", "n": 2}, {"name": "c", "n": 3}])
    assert coll.count_documents({}) == 3
    assert coll.find_one({"name": "b"})["n"] == 2
    r = coll.update_one({"name": "a"}, {"$set": {"n": 10}, "$push": {"tags": "x"}})
    assert (r.matched_count, r.modified_count) == (1, 1)
    assert coll.find_one({"name": "a"})["tags"] == ["x"]
    r = coll.update_many({"n": {"$lt": 5}}, {"$inc": {"n": 100}})
    assert r.modified_count == 2
    r = coll.replace_one({"name": "c"}, {"name": "c", "replaced": True})
    assert coll.find_one({"name": "c"})["replaced"] is True
    r = coll.update_one({"name": "z"}, {"$set": {"n": 7}}, upsert=True)
    assert r.upserted_id is not None and coll.find_one({"name": "z"})["n"] == 7
    assert coll.delete_one({"name": "z"}).deleted_count == 1
    assert coll.delete_many({}).deleted_count == 3
    assert coll.estimated_document_count() == 0


def test_immutable_id(coll):
    coll.insert_one({"_id": 1, "a": 1})
    with pytest.raises(OperationFailure) as e:
        coll.update_one({"_id": 1}, {"$set": {"_id": 2}})
    assert e.value.code == 66


def test_bulk_ordered_and_unordered_with_errors(coll):
    coll.insert_one({"_id": 1})
    with pytest.raises(BulkWriteError) as e:
        coll.insert_many([{"_id": 2}, {"_id": 1}, {"_id": 3}], ordered=True)
    d = e.value.details
    assert d["nInserted"] == 1 and d["writeErrors"][0]["index"] == 1
    assert d["writeErrors"][0]["code"] == 11000
    assert coll.find_one({"_id": 3}) is None
    with pytest.raises(BulkWriteError) as e:
        coll.insert_many([{"_id": 4}, {"_id": 1}, {"_id": 5}], ordered=False)
    assert e.value.details["nInserted"] == 2
    assert coll.count_documents({}) == 4
    res = coll.bulk_write(
        [
            pymongo.InsertOne({"_id": 10}),
            pymongo.UpdateOne({"_id": 10}, {"$set": {"x": 1}}),
            pymongo.DeleteOne({"_id": 4}),
            pymongo.ReplaceOne({"_id": 5}, {"y": 2}),
        ]
    )
    assert (res.inserted_count, res.modified_count, res.deleted_count) == (1, 2, 1)


def test_unique_index_violation_leaves_nothing(coll):
    coll.create_index([("email", ASCENDING)], unique=True)
    coll.insert_one({"email": "a@x", "v": 1})
    with pytest.raises(DuplicateKeyError) as e:
        coll.insert_one({"email": "a@x", "v": 2})
    err = e.value.details
    assert err["keyPattern"] == {"email": 1} and err["keyValue"] == {"email": "a@x"}
    assert "E11000 duplicate key error collection: e2e.things index: email_1 dup key" in err["errmsg"]
    assert coll.count_documents({}) == 1
    assert coll.count_documents({"v": 2}) == 0
    names = [i["name"] for i in coll.list_indexes()]
    assert names == ["_id_", "email_1"]
    coll.drop_index("email_1")
    assert [i["name"] for i in coll.list_indexes()] == ["_id_"]


def test_query_operators(coll):
    coll.insert_many(
        [
            {"_id": 1, "a": 1, "s": "apple", "arr": [1, 2, 3], "sub": {"x": 1}},
            {"_id": 2, "a": 5, "s": "banana", "arr": [4], "sub": {"x": 2}},
            {"_id": 3, "a": 10, "s": "cherry", "arr": [], "tags": ["t1", "t2"]},
            {"_id": 4, "a": None, "s": "date", "items": [{"k": 1, "v": 5}, {"k": 2, "v": 1}]},
        ]
    )
    ids = lambda f: sorted(d["_id"] for d in coll.find(f))  # noqa: E731
    assert ids({"a": {"$eq": 5}}) == [2]
    assert ids({"a": {"$ne": 5}}) == [1, 3, 4]
    assert ids({"a": {"$gt": 1}}) == [2, 3]
    assert ids({"a": {"$gte": 1, "$lte": 5}}) == [1, 2]
    assert ids({"a": {"$lt": 10}}) == [1, 2]
    assert ids({"a": {"$in": [1, 10]}}) == [1, 3]
    assert ids({"a": {"$nin": [1, 10]}}) == [2, 4]
    assert ids({"tags": {"$exists": True}}) == [3]
    assert ids({"a": {"$type": "null"}}) == [4]
    assert ids({"$and": [{"a": {"$gt": 0}}, {"a": {"$lt": 6}}]}) == [1, 2]
    assert ids({"$or": [{"a": 1}, {"s": "cherry"}]}) == [1, 3]
    assert ids({"$nor": [{"a": 1}, {"s": "cherry"}]}) == [2, 4]
    assert ids({"a": {"$not": {"$gt": 1}}}) == [1, 4]
    assert ids({"s": {"$regex": "^b"}}) == [2]
    assert ids({"s": {"$regex": "A", "$options": "i"}}) == [1, 2, 4]
    assert ids({"items": {"$elemMatch": {"k": 2, "v": {"$lt": 3}}}}) == [4]
    assert ids({"arr": {"$size": 3}}) == [1]
    assert ids({"tags": {"$all": ["t2", "t1"]}}) == [3]
    assert ids({"arr": 2}) == [1]
    assert ids({"sub.x": 2}) == [2]
    assert ids({"items.k": 2}) == [4]


def test_sort_skip_limit_projection(coll):
    coll.insert_many([{"_id": i, "n": i % 5, "s": f"x{i:02}", "big": "y" * 10} for i in range(30)])
    docs = list(coll.find({}, {"n": 1, "_id": 0}).sort([("n", DESCENDING), ("_id", ASCENDING)]).skip(2).limit(5))
    assert docs == [{"n": 4}] * 4 + [{"n": 3}]
    docs = list(coll.find({"n": 0}, {"big": 0}).sort("_id", -1))
    assert [d["_id"] for d in docs] == [25, 20, 15, 10, 5, 0] and "big" not in docs[0]
    assert list(coll.find({}, {"s": 1}).limit(1)) == [{"_id": 0, "s": "x00"}]


def test_index_use_and_explain(coll):
    coll.insert_many([{"_id": i, "k": i % 100, "j": i} for i in range(500)])
    coll.create_index([("k", ASCENDING), ("j", DESCENDING)])
    plan = coll.find({"k": 7}).explain()["queryPlanner"]["winningPlan"]
    assert "IXSCAN" in str(plan) and "k_1_j_-1" in str(plan)
    assert "COLLSCAN" in str(coll.find({"j": 7}).explain()["queryPlanner"]["winningPlan"])
    assert sorted(d["j"] for d in coll.find({"k": 7})) == [7, 107, 207, 307, 407]
    assert [d["j"] for d in coll.find({"k": 7, "j": {"$gt": 200}})] == [407, 307, 207]


def test_explain_execution_stats_as_compass_reads_them(client, coll):
    coll.insert_many([{"_id": i, "k": i % 100, "j": i} for i in range(500)])
    coll.create_index([("k", ASCENDING)])
    db = coll.database
    find = {"find": coll.name, "filter": {"k": 7, "j": {"$gt": 100}}, "sort": {"j": 1}, "skip": 1, "limit": 2}
    ex = db.command({"explain": find, "verbosity": "executionStats"})
    stats = ex["executionStats"]
    assert (stats["nReturned"], stats["totalKeysExamined"], stats["totalDocsExamined"]) == (2, 5, 5)
    # LIMIT <- SKIP <- SORT <- FETCH <- IXSCAN, each with what it returned.
    limit = stats["executionStages"]
    assert limit["stage"] == "LIMIT" and limit["nReturned"] == 2
    skip = limit["inputStage"]
    assert skip["stage"] == "SKIP" and skip["nReturned"] == 2
    sort = skip["inputStage"]
    assert sort["stage"] == "SORT" and sort["nReturned"] == 3
    fetch = sort["inputStage"]
    assert fetch["stage"] == "FETCH" and (fetch["nReturned"], fetch["docsExamined"]) == (4, 5)
    ixscan = fetch["inputStage"]
    assert ixscan["stage"] == "IXSCAN" and ixscan["keysExamined"] == 5
    assert ex["command"]["find"] == coll.name and ex["command"]["$db"] == db.name
    assert ex["serverInfo"]["version"].startswith("7.0") and ex["explainVersion"] == "1"
    # queryPlanner verbosity does not execute; a bad verbosity is refused as mongod does.
    planner = db.command({"explain": find, "verbosity": "queryPlanner"})
    assert "executionStats" not in planner and "winningPlan" in planner["queryPlanner"]
    with pytest.raises(OperationFailure) as e:
        db.command({"explain": find, "verbosity": "everything"})
    assert e.value.code == 9
    # The driver's cursor.explain() (allPlansExecution) and a collection scan.
    scan = coll.find({"j": {"$lt": 10}}).explain()["executionStats"]
    assert scan["executionStages"]["stage"] == "COLLSCAN"
    assert (scan["nReturned"], scan["executionStages"]["docsExamined"]) == (10, 500)


def test_aggregation(client, coll):
    coll.insert_many(
        [
            {"_id": 1, "cat": "a", "v": 1, "tags": ["x", "y"]},
            {"_id": 2, "cat": "a", "v": 3, "tags": ["y"]},
            {"_id": 3, "cat": "b", "v": 5, "tags": []},
        ]
    )
    out = list(
        coll.aggregate(
            [
                {"$match": {"v": {"$gte": 1}}},
                {"$group": {"_id": "$cat", "total": {"$sum": "$v"}, "avg": {"$avg": "$v"}, "n": {"$count": {}},
                            "mx": {"$max": "$v"}, "mn": {"$min": "$v"}, "first": {"$first": "$_id"},
                            "last": {"$last": "$_id"}, "all": {"$push": "$v"}}},
                {"$sort": {"_id": 1}},
            ]
        )
    )
    assert out[0] == {"_id": "a", "total": 4, "avg": 2.0, "n": 2, "mx": 3, "mn": 1, "first": 1, "last": 2, "all": [1, 3]}
    assert out[1]["total"] == 5
    unwound = list(coll.aggregate([{"$unwind": "$tags"}, {"$project": {"tags": 1, "_id": 0}}, {"$sort": {"tags": 1}}]))
    assert [d["tags"] for d in unwound] == ["x", "y", "y"]
    assert list(coll.aggregate([{"$match": {"cat": "a"}}, {"$count": "n"}])) == [{"n": 2}]
    assert [d["v2"] for d in coll.aggregate([{"$addFields": {"v2": {"$multiply": ["$v", 2]}}}, {"$sort": {"_id": 1}}, {"$skip": 1}, {"$limit": 1}])] == [6]
    other = client["e2e"]["cats"]
    other.insert_many([{"_id": "a", "label": "Alpha"}, {"_id": "b", "label": "Beta"}])
    joined = list(coll.aggregate([{"$lookup": {"from": "cats", "localField": "cat", "foreignField": "_id", "as": "c"}}, {"$sort": {"_id": 1}}]))
    assert joined[0]["c"] == [{"_id": "a", "label": "Alpha"}]


def test_cursors_across_get_more(coll):
    coll.insert_many([{"_id": i, "pad": "p" * 200} for i in range(1000)])
    seen = [d["_id"] for d in coll.find({}).sort("_id", 1).batch_size(37)]
    assert seen == list(range(1000))
    cur = coll.find({}).batch_size(10)
    next(cur)
    cur.close()


def test_find_and_modify_count_distinct(coll):
    coll.insert_many([{"_id": i, "g": i % 3} for i in range(10)])
    before = coll.find_one_and_update({"_id": 1}, {"$set": {"g": 9}})
    assert before["g"] == 1
    after = coll.find_one_and_update({"_id": 2}, {"$inc": {"g": 1}}, return_document=pymongo.ReturnDocument.AFTER)
    assert after["g"] == 3
    gone = coll.find_one_and_delete({"_id": 3})
    assert gone == {"_id": 3, "g": 0}
    up = coll.find_one_and_update({"_id": 99}, {"$set": {"g": 5}}, upsert=True, return_document=pymongo.ReturnDocument.AFTER)
    assert up == {"_id": 99, "g": 5}
    assert coll.count_documents({"g": 0}) == 3
    assert sorted(coll.distinct("g")) == [0, 1, 2, 3, 5, 9]


def test_catalog_commands(client):
    db = client["cat"]
    db.create_collection("one")
    with pytest.raises(OperationFailure) as e:
        db.command("create", "one", capped=True, size=4096)  # other options: NamespaceExists
    assert e.value.code == 48
    db["two"].insert_one({"x": 1})
    assert sorted(db.list_collection_names()) == ["one", "two"]
    assert "cat" in client.list_database_names()
    client.admin.command("renameCollection", "cat.two", to="cat.three")
    assert sorted(db.list_collection_names()) == ["one", "three"]
    assert db["three"].find_one({}, {"_id": 0}) == {"x": 1}
    stats = db.command("collStats", "three")
    assert stats["count"] == 1 and stats["nindexes"] == 1
    assert db.command("dbStats")["collections"] == 2
    db["one"].drop()
    client.drop_database("cat")
    assert "cat" not in client.list_database_names()


def test_errors_have_mongod_shape(client, coll):
    with pytest.raises(OperationFailure) as e:
        coll.find_one({"a": {"$foo": 1}})
    assert e.value.code == 2
    with pytest.raises(OperationFailure) as e:
        coll.update_one({}, {"$inc": {"a": "x"}}, upsert=True)
    assert e.value.code == 14
    with pytest.raises(OperationFailure) as e:
        client["e2e"].command("noSuchCommand")
    assert e.value.code == 59 and "no such command" in str(e.value)
