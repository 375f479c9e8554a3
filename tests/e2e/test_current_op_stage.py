"""The `$currentOp` aggregation stage and `$jsonSchema` in queries, against MongoDB's docs.

Sources: https://www.mongodb.com/docs/manual/reference/operator/aggregation/currentOp/
(`{aggregate: 1}` on admin, first stage only, allUsers / idleConnections, output shape) and
https://www.mongodb.com/docs/manual/reference/operator/query/jsonSchema/ (`$jsonSchema` in
find, count and `$match`: documents that satisfy the schema).
"""
import threading
import time

import pymongo
import pytest
from pymongo.errors import OperationFailure


def code_of(fn):
    with pytest.raises(OperationFailure) as e:
        fn()
    return e.value.code


def wait_until(pred, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return False


def test_current_op_stage_lists_running_operations(server, client):
    db = client.cop
    feed = db.create_collection("feed", capped=True, size=100_000)
    feed.insert_one({"i": 0})
    cur = feed.find(cursor_type=pymongo.CursorType.TAILABLE_AWAIT).max_await_time_ms(10_000)
    assert next(cur)["i"] == 0
    done = []

    def wait_in_get_more():
        try:
            next(cur)
        except (OperationFailure, StopIteration) as e:
            done.append(e)

    waiter = threading.Thread(target=wait_in_get_more)
    waiter.start()
    pipeline = [{"$currentOp": {}}, {"$match": {"op": "getmore", "ns": "cop.feed"}}]
    found = []
    assert wait_until(lambda: found.extend(client.admin.aggregate(pipeline)) or found)
    op = found[0]
    assert op["type"] == "op" and op["active"] is True
    assert op["command"]["getMore"] == cur.cursor_id
    assert isinstance(op["opid"], int) and op["desc"].startswith("conn")
    # The stage sees its own aggregate; later stages shape the output.
    me = list(
        client.admin.aggregate(
            [{"$currentOp": {"allUsers": True}}, {"$match": {"command.aggregate": 1}}, {"$project": {"ns": 1, "_id": 0}}]
        )
    )
    assert me == [{"ns": "admin.$cmd"}]
    feed.insert_one({"i": 1})
    waiter.join(30)
    # Idle connections are listed only when asked, as active: false.
    other = server.client()
    other.admin.command("ping")
    idle = list(client.admin.aggregate([{"$currentOp": {"idleConnections": True}}, {"$match": {"active": False}}]))
    assert len(idle) >= 1 and all("connectionId" in d for d in idle)
    assert list(client.admin.aggregate([{"$currentOp": {}}, {"$match": {"active": False}}])) == []
    # The currentOp command's $all lists them too.
    assert any(not d["active"] for d in client.admin.command({"currentOp": 1, "$all": True})["inprog"])
    other.close()


def test_current_op_stage_errors(client):
    # Only in {aggregate: 1} on admin (73), only first (40602), options are booleans.
    assert code_of(lambda: list(client.cop.things.aggregate([{"$currentOp": {}}]))) == 73
    assert code_of(lambda: client.cop.command({"aggregate": 1, "pipeline": [{"$currentOp": {}}], "cursor": {}})) == 73
    assert code_of(lambda: list(client.admin.aggregate([{"$match": {}}]))) == 73
    assert code_of(lambda: list(client.admin.aggregate([{"$match": {}}, {"$currentOp": {}}]))) == 40602
    assert code_of(lambda: list(client.admin.aggregate([{"$currentOp": {}}, {"$currentOp": {}}]))) == 40602
    assert code_of(lambda: list(client.admin.aggregate([{"$currentOp": {"allUsers": 1}}]))) == 9
    assert code_of(lambda: list(client.admin.aggregate([{"$currentOp": {"bogus": True}}]))) == 9
    assert code_of(lambda: list(client.admin.aggregate([{"$currentOp": {"idleCursors": True}}]))) == 238
    sub = [{"$lookup": {"from": "x", "pipeline": [{"$currentOp": {}}], "as": "o"}}]
    assert code_of(lambda: list(client.cop.things.aggregate(sub))) == 51047


def test_json_schema_in_find_count_and_match(client):
    c = client.js.items
    c.insert_many(
        [
            {"_id": 1, "name": "a", "qty": 5},
            {"_id": 2, "name": "b", "qty": "many"},
            {"_id": 3, "qty": 7},
            {"_id": 4, "name": "d", "qty": 9, "tags": ["x"]},
        ]
    )
    schema = {
        "bsonType": "object",
        "required": ["name", "qty"],
        "properties": {"name": {"bsonType": "string"}, "qty": {"bsonType": "int", "minimum": 6}},
    }
    assert [d["_id"] for d in c.find({"$jsonSchema": schema})] == [4]
    assert c.count_documents({"$jsonSchema": {"required": ["name"]}}) == 3
    assert [d["_id"] for d in c.find({"$nor": [{"$jsonSchema": {"required": ["name"]}}]})] == [3]
    out = list(c.aggregate([{"$match": {"$jsonSchema": {"properties": {"qty": {"bsonType": "string"}}}}}]))
    assert [d["_id"] for d in out] == [2]
    # With other conditions (and the index the planner may choose).
    c.create_index("qty")
    assert [d["_id"] for d in c.find({"qty": {"$gte": 5}, "$jsonSchema": {"required": ["tags"]}})] == [4]
    # $jsonSchema is a top-level operator only; bad schemas are refused with mongod's codes.
    assert code_of(lambda: list(c.find({"qty": {"$jsonSchema": {}}}))) == 2
    assert code_of(lambda: list(c.find({"$jsonSchema": 1}))) == 14
    assert code_of(lambda: list(c.find({"$jsonSchema": {"$ref": "#/x"}}))) == 9
