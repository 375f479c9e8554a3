"""Reads of views as mongod resolves them — a hint and explain go with the resolved aggregation
(https://www.mongodb.com/docs/manual/core/views/ "Index Use and Sort Operations") — the
`system.views` collection mongod lists and reads, and key patterns that name two indexes
(AmbiguousIndexKeyPattern 181 for dropIndexes and collMod; mongod's planner answers a hint
that matches two indexes with IndexNotFound 27)."""
import pymongo
import pytest
from bson import SON


@pytest.fixture
def shop(client):
    db = client.shopv
    db.orders.insert_many([{"_id": i, "status": "A" if i % 2 else "B", "qty": i} for i in range(200)])
    db.orders.create_index("qty")
    db.orders.create_index("status")
    db.command("create", "active", viewOn="orders", pipeline=[{"$match": {"status": "A"}}])
    db.command("create", "plain", viewOn="orders", pipeline=[])
    return db


def test_a_hint_on_a_view_picks_the_base_collections_index(shop):
    got = list(shop.plain.find({"qty": {"$gte": 190}}).hint("qty_1"))
    assert [d["_id"] for d in got] == list(range(190, 200))
    # The hinted index is the one the base collection's scan uses.
    plan = shop.plain.find({"qty": {"$gte": 190}}).hint("status_1").explain()
    scan = plan["stages"][0]["$cursor"]["queryPlanner"]["winningPlan"]
    assert "status_1" in str(scan), plan
    # In status_1's order: "A" (odd ids) before "B".
    assert [d["_id"] for d in shop.plain.find({"qty": {"$gte": 195}}).hint({"status": 1})] == [
        195, 197, 199, 196, 198]
    # An index the base collection lacks: mongod's BadValue.
    with pytest.raises(pymongo.errors.OperationFailure) as e:
        list(shop.active.find().hint("nope_1"))
    assert e.value.code == 2
    # aggregate takes a hint too (the initial scan's index).
    agg = shop.command("aggregate", "orders", pipeline=[{"$match": {"qty": {"$lt": 3}}}],
                       hint="qty_1", cursor={})
    assert [d["_id"] for d in agg["cursor"]["firstBatch"]] == [0, 1, 2]


def test_explain_of_a_view_read_is_the_resolved_aggregation(shop):
    plan = shop.active.find({"qty": {"$lt": 10}}).explain()
    stages = plan["stages"]
    cursor = stages[0]["$cursor"]
    # The view's $match is the base scan's filter; the read's own $match follows it.
    assert cursor["queryPlanner"]["namespace"] == "shopv.orders"
    assert cursor["queryPlanner"]["parsedQuery"] == {"status": "A"}
    assert "status_1" in str(cursor["queryPlanner"]["winningPlan"])
    assert stages[1] == {"$match": {"qty": {"$lt": 10}}}
    assert cursor["executionStats"]["nReturned"] == 100
    assert plan["command"]["find"] == "active"
    qp = shop.command("explain", {"find": "active", "filter": {}}, verbosity="queryPlanner")
    assert "executionStats" not in qp["stages"][0]["$cursor"]
    # count and aggregate on a view explain the same way.
    c = shop.command("explain", {"count": "active", "query": {"qty": 3}})
    assert c["stages"][0]["$cursor"]["queryPlanner"]["namespace"] == "shopv.orders"


def test_system_views_is_listed_and_read_and_not_written(shop):
    infos = {c["name"]: c for c in shop.list_collections()}
    sv = infos["system.views"]
    assert sv["type"] == "collection" and sv["info"]["readOnly"] is False
    defs = list(shop.system.views.find())
    assert defs == [
        {"_id": "shopv.active", "viewOn": "orders", "pipeline": [{"$match": {"status": "A"}}]},
        {"_id": "shopv.plain", "viewOn": "orders", "pipeline": []},
    ]
    assert shop.system.views.count_documents({"viewOn": "orders"}) == 2
    assert [d["_id"] for d in shop.system.views.find({}, {"_id": 1}).sort("_id", -1)] == [
        "shopv.plain", "shopv.active"]
    for write in (
        lambda: shop.system.views.insert_one({"_id": "shopv.x", "viewOn": "orders", "pipeline": []}),
        lambda: shop.system.views.update_one({}, {"$set": {"pipeline": []}}),
        lambda: shop.system.views.delete_many({}),
        lambda: shop.command("create", "system.views"),
    ):
        with pytest.raises(pymongo.errors.OperationFailure) as e:
            write()
        assert e.value.code == 73
    # Without views, the database lists no system.views (flashdoc keeps no empty one).
    shop.drop_collection("active")
    shop.drop_collection("plain")
    assert "system.views" not in shop.list_collection_names()
    assert list(shop.system.views.find()) == []


def test_a_key_pattern_that_names_two_indexes_is_ambiguous(client):
    db = client.ambig
    db.c.insert_many([{"_id": i, "a": i, "d": i % 2 == 0} for i in range(20)])
    db.c.create_index("a", name="a_even", partialFilterExpression={"d": True})
    db.c.create_index("a", name="a_odd", partialFilterExpression={"d": False})
    with pytest.raises(pymongo.errors.OperationFailure) as e:
        db.command("dropIndexes", "c", index={"a": 1})
    assert e.value.code == 181 and "identify by name" in str(e.value)
    with pytest.raises(pymongo.errors.OperationFailure) as e:
        db.command(SON([("collMod", "c"), ("index", {"keyPattern": {"a": 1}, "hidden": True})]))
    assert e.value.code == 181
    with pytest.raises(pymongo.errors.OperationFailure) as e:
        list(db.c.find({"a": 2, "d": True}).hint([("a", 1)]))
    assert e.value.code == 27 and "Hint matched multiple indexes" in str(e.value)
    # By name each one is found.
    assert [d["_id"] for d in db.c.find({"a": 2, "d": True}).hint("a_even")] == [2]
    db.c.drop_index("a_odd")
    assert [d["_id"] for d in db.c.find({"a": 2, "d": True}).hint([("a", 1)])] == [2]
    db.command("dropIndexes", "c", index={"a": 1})
    assert sorted(i["name"] for i in db.c.list_indexes()) == ["_id_"]
