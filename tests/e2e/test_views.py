"""Views and collMod, against MongoDB's documented behaviour.

Sources: https://www.mongodb.com/docs/manual/core/views/ (read-only, created with
`create`/`db.createView`, queried with find/count/distinct/aggregate, collation rules),
https://www.mongodb.com/docs/manual/reference/command/create/ (viewOn, pipeline),
https://www.mongodb.com/docs/manual/reference/command/collMod/ (validator, index hidden /
expireAfterSeconds, viewOn/pipeline), and the error codes of
https://www.mongodb.com/docs/manual/reference/error-codes/ (93 GraphContainsCycle,
165 ViewDepthLimitExceeded, 166 CommandNotSupportedOnView, 167 OptionNotSupportedOnView).
"""
import pymongo
import pytest
from pymongo.errors import OperationFailure

from conftest import Server


def code_of(fn):
    with pytest.raises(OperationFailure) as e:
        fn()
    return e.value.code


@pytest.fixture
def shop(client):
    db = client["views"]
    db.orders.insert_many(
        [
            {"_id": 1, "item": "abc", "qty": 5, "status": "A", "tags": ["x", "y"]},
            {"_id": 2, "item": "jkl", "qty": 20, "status": "B", "tags": ["y"]},
            {"_id": 3, "item": "abc", "qty": 15, "status": "A", "tags": []},
            {"_id": 4, "item": "xyz", "qty": 1, "status": "A", "tags": ["z"]},
        ]
    )
    db.command(
        "create",
        "active",
        viewOn="orders",
        pipeline=[{"$match": {"status": "A"}}, {"$project": {"status": 0}}],
    )
    return db


def test_view_is_listed_with_its_definition(shop):
    infos = {c["name"]: c for c in shop.list_collections()}
    v = infos["active"]
    assert v["type"] == "view"
    assert v["options"] == {
        "viewOn": "orders",
        "pipeline": [{"$match": {"status": "A"}}, {"$project": {"status": 0}}],
    }
    assert v["info"] == {"readOnly": True}
    assert infos["orders"]["type"] == "collection"
    assert list(shop.list_collections(filter={"type": "view"}, nameOnly=True)) == [
        {"name": "active", "type": "view"}
    ]


def test_find_count_distinct_aggregate_on_a_view(shop):
    v = shop.active
    assert [d["_id"] for d in v.find()] == [1, 3, 4]
    assert all("status" not in d for d in v.find())
    got = list(v.find({"qty": {"$gte": 5}}, {"item": 1}).sort("qty", -1).skip(0).limit(5))
    assert got == [{"_id": 3, "item": "abc"}, {"_id": 1, "item": "abc"}]
    assert list(v.find({}, {"_id": 1}).sort("_id", 1).skip(1).limit(1)) == [{"_id": 3}]
    assert v.count_documents({}) == 3
    assert v.count_documents({"item": "abc"}) == 2
    assert shop.command("count", "active")["n"] == 3
    assert v.distinct("item") == ["abc", "xyz"]
    assert v.distinct("tags") == ["x", "y", "z"]
    out = list(v.aggregate([{"$group": {"_id": "$item", "n": {"$sum": "$qty"}}}, {"$sort": {"_id": 1}}]))
    assert out == [{"_id": "abc", "n": 20}, {"_id": "xyz", "n": 1}]
    # A $lookup may read a view.
    joined = list(
        shop.orders.aggregate(
            [
                {"$match": {"_id": 2}},
                {"$lookup": {"from": "active", "localField": "item", "foreignField": "item", "as": "a"}},
            ]
        )
    )
    assert joined[0]["a"] == []


def test_view_on_a_view_and_on_a_missing_source(shop):
    shop.create_collection("big_active", viewOn="active", pipeline=[{"$match": {"qty": {"$gt": 4}}}])
    assert [d["_id"] for d in shop.big_active.find()] == [1, 3]
    shop.command("create", "nothing", viewOn="no_such_collection", pipeline=[])
    assert list(shop.nothing.find()) == []
    assert shop.nothing.count_documents({}) == 0


def test_writes_and_index_commands_on_a_view_are_166(shop):
    v = shop.active
    assert code_of(lambda: v.insert_one({"x": 1})) == 166
    assert code_of(lambda: v.update_one({}, {"$set": {"x": 1}})) == 166
    assert code_of(lambda: v.update_one({}, {"$set": {"x": 1}}, upsert=True)) == 166
    assert code_of(lambda: v.delete_many({})) == 166
    assert code_of(lambda: v.find_one_and_update({}, {"$set": {"x": 1}})) == 166
    assert code_of(lambda: v.create_index("qty")) == 166
    assert code_of(lambda: shop.command("collStats", "active")) == 166
    assert code_of(lambda: shop.command("renameCollection", "views.active", to="views.a2")) == 166
    # Nothing was created by the refused writes.
    assert shop.active.count_documents({}) == 3
    # mongod lists the collection its views are kept in.
    assert sorted(shop.list_collection_names()) == ["active", "orders", "system.views"]


def test_view_definition_errors(shop):
    # A cycle, directly and through $lookup.
    assert code_of(lambda: shop.command("create", "loop", viewOn="loop")) == 93
    shop.command("create", "a", viewOn="b")
    assert code_of(lambda: shop.command("create", "b", viewOn="a")) == 93
    lookup = {"$lookup": {"from": "c", "localField": "x", "foreignField": "y", "as": "z"}}
    assert code_of(lambda: shop.command("create", "c", viewOn="orders", pipeline=[lookup])) == 93
    # More than 20 views on one path.
    for i in range(1, 21):
        shop.command("create", f"v{i}", viewOn=f"v{i + 1}")
    assert code_of(lambda: shop.command("create", "v0", viewOn="v1")) == 165
    assert code_of(lambda: shop.command("create", "v21", viewOn="v22")) == 165
    shop.command("create", "vmid", viewOn="v10")
    # Names, types, stages.
    assert code_of(lambda: shop.command("create", "active", viewOn="orders")) == 48
    assert code_of(lambda: shop.command("create", "orders", viewOn="active")) == 48
    assert code_of(lambda: shop.command("create", "system.foo", viewOn="orders")) == 73
    assert code_of(lambda: shop.command("create", "p", viewOn="orders", pipeline={})) == 14
    assert code_of(lambda: shop.command("create", "p", viewOn=1)) == 14
    assert code_of(lambda: shop.command("create", "p", viewOn="orders", pipeline=[{"$out": "x"}])) == 167
    assert code_of(lambda: shop.command("create", "p", viewOn="orders", pipeline=[{"$bogus": 1}])) == 40324
    assert code_of(lambda: shop.command("create", "p", viewOn="orders", capped=True)) == 72
    assert "p" not in shop.list_collection_names()


def test_view_collation_is_the_reads_collation(shop):
    shop.command(
        "create", "ci", viewOn="orders", pipeline=[], collation={"locale": "en", "strength": 2}
    )
    assert shop.ci.count_documents({"item": "ABC"}) == 2
    assert [d["_id"] for d in shop.ci.find({"item": "ABC"})] == [1, 3]
    opts = {c["name"]: c for c in shop.list_collections()}["ci"]["options"]
    assert opts["collation"]["locale"] == "en" and opts["collation"]["strength"] == 2
    # Another collation than the view's is refused; the view's own is accepted.
    assert code_of(lambda: list(shop.ci.find({}, collation={"locale": "fr"}))) == 167
    assert len(list(shop.ci.find({}, collation={"locale": "en", "strength": 2}))) == 4
    # A view on it must have the same collation.
    assert code_of(lambda: shop.command("create", "ci2", viewOn="ci")) == 166


def test_drop_a_view_and_views_survive_a_restart(dbpath):
    s = Server(dbpath).start()
    try:
        c = s.client()
        db = c["views"]
        db.src.insert_many([{"_id": i, "k": i % 2} for i in range(6)])
        db.command("create", "odd", viewOn="src", pipeline=[{"$match": {"k": 1}}])
        db.command("create", "gone", viewOn="src")
        db.gone.drop()
        assert "gone" not in db.list_collection_names()
        c.close()
    finally:
        s.stop()
    s = Server(dbpath).start()
    try:
        c = s.client()
        db = c["views"]
        assert [d["_id"] for d in db.odd.find()] == [1, 3, 5]
        assert sorted(db.list_collection_names()) == ["odd", "src", "system.views"]
        db.command("collMod", "odd", viewOn="src", pipeline=[{"$match": {"k": 0}}])
        c.close()
    finally:
        s.stop()
    s = Server(dbpath).start()
    try:
        c = s.client()
        db = c["views"]
        assert [d["_id"] for d in db.odd.find()] == [0, 2, 4]
        c.drop_database("views")
        assert db.list_collection_names() == []
        c.close()
    finally:
        s.stop()


# ------------------------------------------------------------------ collMod


def test_coll_mod_changes_the_validator_and_it_survives_a_restart(dbpath):
    s = Server(dbpath).start()
    try:
        c = s.client()
        db = c["cm"]
        db.people.insert_one({"name": "x"})
        db.command("collMod", "people", validator={"age": {"$gte": 0}})
        with pytest.raises(pymongo.errors.WriteError) as e:
            db.people.insert_one({"age": -1})
        assert e.value.code == 121
        db.people.insert_one({"age": 3})
        db.command("collMod", "people", validationAction="warn")
        db.people.insert_one({"age": -2})  # warn: let through
        opts = db.command("listCollections", filter={"name": "people"})["cursor"]["firstBatch"][0]["options"]
        assert opts == {"validator": {"age": {"$gte": 0}}, "validationAction": "warn"}
        c.close()
    finally:
        s.stop()
    s = Server(dbpath).start()
    try:
        db = s.client()["cm"]
        db.command("collMod", "people", validationAction="error", validationLevel="strict")
        with pytest.raises(pymongo.errors.WriteError):
            db.people.insert_one({"age": -5})
        assert code_of(lambda: db.command("collMod", "people", validationLevel="sometimes")) == 2
        assert code_of(lambda: db.command("collMod", "people", validator=5)) == 14
    finally:
        s.stop()


def test_coll_mod_index_hidden_and_ttl(client):
    db = client["cm"]
    db.ev.insert_many([{"a": i, "t": i} for i in range(10)])
    db.ev.create_index("a", name="a_1")
    db.ev.create_index("t", name="t_1", expireAfterSeconds=3600)
    plan = lambda: db.ev.find({"a": 3}).explain()["queryPlanner"]["winningPlan"]
    assert "IXSCAN" in str(plan())
    r = db.command("collMod", "ev", index={"name": "a_1", "hidden": True})
    assert r["hidden_old"] is False and r["hidden_new"] is True
    assert "IXSCAN" not in str(plan())
    specs = {i["name"]: i for i in db.ev.list_indexes()}
    assert specs["a_1"]["hidden"] is True
    db.command("collMod", "ev", index={"keyPattern": {"a": 1}, "hidden": False})
    assert "IXSCAN" in str(plan())
    r = db.command("collMod", "ev", index={"keyPattern": {"t": 1}, "expireAfterSeconds": 60})
    assert r["expireAfterSeconds_old"] == 3600 and r["expireAfterSeconds_new"] == 60
    assert {i["name"]: i for i in db.ev.list_indexes()}["t_1"]["expireAfterSeconds"] == 60
    # Errors, in mongod's codes.
    assert code_of(lambda: db.command("collMod", "ev", index={"name": "nope", "hidden": True})) == 27
    assert code_of(lambda: db.command("collMod", "ev", index={"hidden": True})) == 72
    assert code_of(lambda: db.command("collMod", "ev", index={"name": "_id_", "hidden": True})) == 2
    assert code_of(lambda: db.command("collMod", "ev", bogus=1)) == 40415
    assert code_of(lambda: db.command("collMod", "ev", index={"name": "a_1", "bogus": 1})) == 40415
    assert code_of(lambda: db.command("collMod", "missing", validator={})) == 26
    assert code_of(lambda: db.command("collMod", "ev", viewOn="x", pipeline=[])) == 72
    assert code_of(lambda: db.command("collMod", "ev", cappedSize=100000)) == 238


def test_coll_mod_of_a_view(shop):
    shop.command("collMod", "active", viewOn="orders", pipeline=[{"$match": {"status": "B"}}])
    assert [d["_id"] for d in shop.active.find()] == [2]
    assert code_of(lambda: shop.command("collMod", "active", viewOn="orders")) == 72
    assert code_of(lambda: shop.command("collMod", "active", viewOn="orders", pipeline={})) == 14
    assert code_of(lambda: shop.command("collMod", "active", validator={"a": 1})) == 72
    shop.command("create", "on_active", viewOn="active")
    assert code_of(lambda: shop.command("collMod", "active", viewOn="on_active", pipeline=[])) == 93


def test_time_series_collections_are_views_over_buckets(client):
    """https://www.mongodb.com/docs/manual/core/timeseries-collections/ : a time-series
    collection is a view over its bucket collection (test_collection_kinds.py has the rest);
    changing its bucketing is refused (NotImplemented, 238)."""
    db = client["ts"]
    db.create_collection("weather", timeseries={"timeField": "t", "metaField": "m"})
    assert {"weather", "system.buckets.weather"} <= set(db.list_collection_names())
    assert code_of(lambda: db.command("collMod", "weather", timeseries={"granularity": "hours"})) == 238
