"""Field names with `$` and dots as mongod 5.0+ stores them, and database-level aggregation
(`{aggregate: 1}` with `$listLocalSessions` and `$documents`), as pymongo sees them.

Sources: the drivers' CRUD specification tests `*-dots_and_dollars.json` (inserts, replacements
and pipeline updates), mongod's jstests/core/field_name_validation.js (what stays refused),
https://www.mongodb.com/docs/manual/reference/operator/aggregation/listLocalSessions/ and
https://www.mongodb.com/docs/manual/reference/operator/aggregation/documents/.
"""
import pymongo
import pytest
from bson import Binary
from pymongo.errors import OperationFailure, WriteError
from pymongo.write_concern import WriteConcern


def code_of(fn):
    with pytest.raises((OperationFailure, WriteError)) as e:
        fn()
    return e.value.code


def test_inserts_store_dollar_and_dotted_names(coll):
    coll.insert_one({"_id": 1, "$a": 1})
    coll.insert_many([{"_id": 2, "a.b": 1}, {"_id": 3, "a": {"$b": 1}}, {"_id": {"a.b": 1}}])
    coll.bulk_write([pymongo.InsertOne({"_id": 4, "a": {"$db": "foo"}})])
    assert coll.find_one({"_id": 1}) == {"_id": 1, "$a": 1}
    assert coll.find_one({"a.$b": 1}) == {"_id": 3, "a": {"$b": 1}}
    assert coll.find_one({"_id": 4}) == {"_id": 4, "a": {"$db": "foo"}}
    assert code_of(lambda: coll.insert_one({"_id": {"$a": 1}})) == 52
    assert coll.count_documents({}) == 5


def test_updates_follow_mongods_rules(coll):
    coll.insert_one({"_id": 1, "foo": {}})
    set_field = {"$setField": {"field": {"$literal": "$a"}, "value": 1, "input": "$$ROOT"}}
    r = coll.update_one({"_id": 1}, [{"$replaceWith": set_field}])
    assert (r.matched_count, r.modified_count) == (1, 1)
    assert coll.find_one() == {"_id": 1, "foo": {}, "$a": 1}
    nested = {"$setField": {"field": {"$literal": "$b"}, "value": 2, "input": "$foo"}}
    coll.update_many({"_id": 1}, [{"$set": {"foo": nested}}])
    assert coll.find_one()["foo"] == {"$b": 2}
    # A modifier keeps the stored `$a` but may not write one.
    coll.update_one({"_id": 1}, {"$set": {"c": 3}})
    assert coll.find_one() == {"_id": 1, "foo": {"$b": 2}, "$a": 1, "c": 3}
    assert code_of(lambda: coll.update_one({"_id": 1}, {"$set": {"$a": 5}})) == 52
    # A replacement: nested `$` names only.
    coll.replace_one({"_id": 1}, {"_id": 1, "a": {"$b": 1}})
    assert coll.find_one() == {"_id": 1, "a": {"$b": 1}}
    assert code_of(lambda: coll.replace_one({"_id": 1}, {"x": 1, "$c": 1})) == 52
    assert code_of(lambda: coll.find_one_and_replace({"_id": 1}, {"x": 1, "$ref": 1})) == 55
    assert coll.find_one_and_replace({"_id": 1}, {"_id": 1, "a.b": 1}) == {"_id": 1, "a": {"$b": 1}}
    assert coll.find_one() == {"_id": 1, "a.b": 1}
    # Upserts may not put a `$` field in `_id`.
    upsert = lambda u: coll.update_one({"z": 1}, u, upsert=True)
    assert code_of(lambda: upsert({"$set": {"_id": {"$invalid": 1}}})) == 52
    assert code_of(lambda: upsert({"$setOnInsert": {"_id": {"$invalid": 1}}})) == 52
    replacing = lambda: coll.replace_one({"z": 1}, {"_id": {"$invalid": 1}}, upsert=True)
    assert code_of(replacing) == 52


def list_sessions(db, spec=None, **kw):
    pipeline = [{"$listLocalSessions": spec or {}}]
    return db.command("aggregate", 1, pipeline=pipeline, cursor={}, **kw)["cursor"]["firstBatch"]


def test_list_local_sessions_lists_the_sessions_in_use(server):
    client = server.client()
    with client.start_session() as s:
        client.e2e.c.insert_one({"x": 1}, session=s)
        lsid = s.session_id["id"]
        ids = [d["_id"]["id"] for d in list_sessions(client.admin, {"allUsers": True})]
        assert lsid in ids
        mine = list_sessions(client.admin)
        assert lsid in [d["_id"]["id"] for d in mine]
        one = next(d for d in mine if d["_id"]["id"] == lsid)
        assert isinstance(one["_id"]["uid"], bytes) and len(one["_id"]["uid"]) == 32
        assert "lastUse" in one
        # Another user's sessions are not the caller's.
        other = list_sessions(client.admin, {"users": [{"user": "nobody", "db": "admin"}]})
        assert lsid not in [d["_id"]["id"] for d in other]
    # Another client (this one would use the ended session again from its pool).
    other_client = server.client()
    other_client.admin.command("endSessions", [{"id": lsid}])
    listed = list_sessions(other_client.admin, {"allUsers": True})
    assert lsid not in [d["_id"]["id"] for d in listed]
    both = {"allUsers": True, "users": [{"user": "u", "db": "d"}]}
    assert code_of(lambda: list_sessions(other_client.admin, both)) == 12
    other_client.close()
    client.close()


def test_database_aggregate_stages_and_refusals(client):
    out = client.admin.aggregate(
        [{"$listLocalSessions": {}}, {"$limit": 1}, {"$project": {"_id": 0, "d": "x"}}],
        allowDiskUse=True,
    ).to_list()
    assert out == [{"d": "x"}]
    docs = client.test.aggregate([{"$documents": [{"a": 1}, {"a": 2}]}, {"$match": {"a": 2}}])
    assert docs.to_list() == [{"a": 2}]
    run = lambda db, coll, p: db.command("aggregate", coll, pipeline=p, cursor={})
    assert code_of(lambda: run(client.test, "c", [{"$listLocalSessions": {}}])) == 73
    assert code_of(lambda: run(client.test, "c", [{"$documents": []}])) == 73
    assert code_of(lambda: run(client.test, 1, [{"$match": {}}])) == 73
    late = [{"$match": {}}, {"$listLocalSessions": {}}]
    assert code_of(lambda: run(client.test, 1, late)) == 40602
    assert code_of(lambda: run(client.test, 1, [{"$documents": 1}])) == 5858203
    strict = pymongo.MongoClient(client.address[0], client.address[1], server_api=pymongo.server_api.ServerApi("1", strict=True))
    assert code_of(lambda: strict.admin.aggregate([{"$listLocalSessions": {}}]).to_list()) == 323
    strict.close()


def test_a_writing_database_aggregate_takes_a_write_concern(client):
    admin = client.admin.with_options(write_concern=WriteConcern(w=1, j=True))
    merge = {"$merge": {"into": {"db": "e2e", "coll": "out"}}}
    admin.aggregate([{"$documents": [{"_id": 1, "v": "x"}]}, merge]).to_list()
    assert client.e2e.out.find_one() == {"_id": 1, "v": "x"}
    read_only = [{"$documents": [{"a": 1}]}]
    assert code_of(lambda: client.admin.command("aggregate", 1, pipeline=read_only, cursor={}, writeConcern={"w": 1})) == 72
