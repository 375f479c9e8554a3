"""Server-side JavaScript as a driver sees it: $where, $function, $accumulator, mapReduce (inline
and to a collection), an endless script stopped by maxTimeMS and by killOp, and the server with
JavaScript turned off (security.javascriptEnabled: false, --noscripting)."""
import datetime
import os
import threading
import time

import pytest
from bson import Code, Decimal128, Int64, ObjectId, SON
from bson.binary import Binary
from pymongo.errors import ExecutionTimeout, OperationFailure

from conftest import Server


@pytest.fixture
def numbers(coll):
    coll.insert_many([{"_id": i, "x": i, "tag": "even" if i % 2 == 0 else "odd"} for i in range(10)])
    return coll


def test_where_filters_with_this_and_obj(numbers):
    assert sorted(d["x"] for d in numbers.find({"$where": "this.x < 3"})) == [0, 1, 2]
    assert sorted(d["x"] for d in numbers.find({"$where": Code("return obj.x > 7")})) == [8, 9]
    assert [d["x"] for d in numbers.find({"x": 5, "$where": "function() { return this.x > 3; }"})] == [5]
    assert len(list(numbers.find({"$where": "this.tag == 'odd'"}))) == 5
    assert numbers.database.command("count", numbers.name, query={"$where": "this.x > 6"})["n"] == 3
    # It filters updates and deletes too.
    assert numbers.update_many({"$where": "this.x >= 8"}, {"$set": {"big": True}}).modified_count == 2
    assert numbers.delete_many({"$where": "this.big === true"}).deleted_count == 2


def test_where_errors_are_mongods(numbers):
    with pytest.raises(OperationFailure) as e:
        numbers.find_one({"$where": "return nothing_defined();"})
    assert e.value.code == 139 and "ReferenceError" in str(e.value)
    with pytest.raises(OperationFailure) as e:
        numbers.find_one({"$where": "this.x <"})
    assert e.value.code == 139
    with pytest.raises(OperationFailure) as e:
        list(numbers.find().where(Code("this.x < i", {"i": 3})))
    assert e.value.code == 2
    with pytest.raises(OperationFailure) as e:
        list(numbers.aggregate([{"$match": {"$where": "true"}}]))
    assert e.value.code == 2


def test_where_sees_every_bson_type_as_mongods_shell(coll):
    oid = ObjectId()
    when = datetime.datetime(2024, 5, 6, 7, 8, 9, 123000)
    coll.insert_one({
        "_id": 1, "oid": oid, "when": when, "long": Int64(2**40), "dec": Decimal128("1.5"),
        "bin": Binary(b"\x01\x02\x03", 0),
    })
    checks = [
        f"this.oid.str == '{oid}'",
        "this.when.getUTCFullYear() == 2024 && this.when.getUTCMilliseconds() == 123",
        "this.long instanceof NumberLong && this.long.toNumber() == 1099511627776",
        "this.dec.toString() == 'NumberDecimal(\"1.5\")'",
        "this.bin.length() == 3 && this.bin.subtype() == 0",
    ]
    for check in checks:
        assert len(list(coll.find({"$where": check}))) == 1, check


def test_function_expression(numbers):
    out = list(numbers.aggregate([
        {"$match": {"x": {"$lt": 3}}},
        {"$sort": {"x": 1}},
        {"$project": {"_id": 0, "sq": {"$function": {
            "body": "function(x, tag) { return tag + ':' + (x * x); }",
            "args": ["$x", "$tag"], "lang": "js"}}}},
    ]))
    assert out == [{"sq": "even:0"}, {"sq": "odd:1"}, {"sq": "even:4"}]
    # In find's $expr too, with the body as BSON Code.
    found = numbers.find({"$expr": {"$function": {
        "body": Code("function(x) { return x % 5 == 0; }"), "args": ["$x"], "lang": "js"}}})
    assert sorted(d["x"] for d in found) == [0, 5]
    with pytest.raises(OperationFailure) as e:
        list(numbers.aggregate([{"$project": {"v": {"$function": {
            "body": "function() { throw new Error('boom'); }", "args": [], "lang": "js"}}}}]))
    assert e.value.code == 139 and "boom" in str(e.value)


def test_accumulator(numbers):
    out = list(numbers.aggregate([
        {"$group": {"_id": "$tag", "stats": {"$accumulator": {
            "init": "function() { return {n: 0, sum: 0}; }",
            "accumulate": "function(s, x) { return {n: s.n + 1, sum: s.sum + x}; }",
            "accumulateArgs": ["$x"],
            "merge": "function(a, b) { return {n: a.n + b.n, sum: a.sum + b.sum}; }",
            "finalize": "function(s) { return s.sum / s.n; }",
            "lang": "js",
        }}}},
        {"$sort": {"_id": 1}},
    ]))
    assert out == [{"_id": "even", "stats": 4.0}, {"_id": "odd", "stats": 5.0}]


MAP = Code("function() { emit(this.tag, this.x); }")
REDUCE = Code("function(key, values) { return Array.sum(values); }")


def test_map_reduce_inline(numbers):
    db = numbers.database
    reply = db.command(SON([("mapReduce", numbers.name), ("map", MAP), ("reduce", REDUCE),
                            ("out", {"inline": 1})]))
    assert reply["results"] == [{"_id": "even", "value": 20.0}, {"_id": "odd", "value": 25.0}]
    # query, sort, limit, scope and finalize.
    reply = db.command(SON([
        ("mapReduce", numbers.name),
        ("map", Code("function() { emit(this.tag, this.x * factor); }")),
        ("reduce", REDUCE),
        ("finalize", Code("function(key, value) { return {total: value, key: key}; }")),
        ("query", {"x": {"$gte": 2}}), ("sort", {"x": 1}), ("limit", 3),
        ("scope", {"factor": 10}),
        ("out", {"inline": 1}),
    ]))
    assert reply["results"] == [
        {"_id": "even", "value": {"total": 60.0, "key": "even"}},
        {"_id": "odd", "value": {"total": 30.0, "key": "odd"}},
    ]


def test_map_reduce_to_a_collection(numbers):
    db = numbers.database
    reply = db.command(SON([("mapReduce", numbers.name), ("map", MAP), ("reduce", REDUCE),
                            ("out", "totals")]))
    assert reply["result"] == "totals"
    assert list(db.totals.find().sort("_id", 1)) == [{"_id": "even", "value": 20.0},
                                                     {"_id": "odd", "value": 25.0}]
    # replace drops what was there.
    db.totals.insert_one({"_id": "stale", "value": 1})
    db.command(SON([("mapReduce", numbers.name), ("map", MAP), ("reduce", REDUCE),
                    ("query", {"tag": "odd"}), ("out", {"replace": "totals"})]))
    assert list(db.totals.find()) == [{"_id": "odd", "value": 25.0}]
    # merge replaces documents with the same _id and keeps the others.
    db.totals.insert_one({"_id": "kept", "value": 7})
    db.command(SON([("mapReduce", numbers.name), ("map", MAP), ("reduce", REDUCE),
                    ("out", {"merge": "totals"})]))
    assert list(db.totals.find().sort("_id", 1)) == [
        {"_id": "even", "value": 20.0}, {"_id": "kept", "value": 7}, {"_id": "odd", "value": 25.0}]
    # reduce folds the new results into the existing ones, in another database.
    other = numbers.database.client["e2e_other"]
    other.sums.insert_one({"_id": "even", "value": 100})
    reply = db.command(SON([("mapReduce", numbers.name), ("map", MAP), ("reduce", REDUCE),
                            ("out", {"reduce": "sums", "db": "e2e_other"})]))
    assert reply["result"] == {"db": "e2e_other", "collection": "sums"}
    assert list(other.sums.find().sort("_id", 1)) == [{"_id": "even", "value": 120.0},
                                                      {"_id": "odd", "value": 25.0}]


def test_map_reduce_errors(numbers):
    db = numbers.database
    with pytest.raises(OperationFailure) as e:
        db.command(SON([("mapReduce", numbers.name), ("map", MAP), ("reduce", REDUCE)]))
    assert e.value.code == 40414
    with pytest.raises(OperationFailure) as e:
        db.command(SON([("mapReduce", numbers.name),
                        ("map", Code("function() { emit(this.tag, undefined_thing); }")),
                        ("reduce", REDUCE), ("out", {"inline": 1})]))
    assert e.value.code == 139


def test_max_time_ms_stops_an_endless_where(numbers):
    started = time.monotonic()
    with pytest.raises(ExecutionTimeout) as e:
        numbers.find_one({"$where": "while (true) {}"}, max_time_ms=200)
    assert e.value.code == 50
    with pytest.raises(ExecutionTimeout):
        numbers.find_one({"$where": "function() { sleep(60000); return true; }"}, max_time_ms=200)
    with pytest.raises(ExecutionTimeout):
        list(numbers.aggregate([{"$project": {"v": {"$function": {
            "body": "function() { for (;;) {} }", "args": [], "lang": "js"}}}}], maxTimeMS=200))
    assert time.monotonic() - started < 30
    # The server still answers scripts afterwards.
    assert len(list(numbers.find({"$where": "this.x == 1"}))) == 1


def test_kill_op_stops_an_endless_where(server, numbers):
    admin = server.client().admin
    failure = {}

    def run():
        try:
            numbers.find_one({"$where": "while (true) {}"})
        except OperationFailure as e:
            failure["code"] = e.code

    t = threading.Thread(target=run)
    t.start()
    opid = None
    deadline = time.monotonic() + 20
    while opid is None and time.monotonic() < deadline:
        for op in admin.aggregate([{"$currentOp": {}}]):
            if "$where" in str(op.get("command", {}).get("filter", {})):
                opid = op["opid"]
        time.sleep(0.05)
    assert opid is not None, "the endless $where never showed in $currentOp"
    admin.command("killOp", op=opid)
    t.join(timeout=20)
    assert not t.is_alive()
    assert failure.get("code") == 11601


@pytest.mark.parametrize("how", ["config", "flag"])
def test_javascript_disabled(dbpath, how):
    if how == "config":
        conf = os.path.join(dbpath, "mongod.conf")
        with open(conf, "w") as f:
            f.write(f"storage:\n  dbPath: {dbpath}\nsecurity:\n  javascriptEnabled: false\n")
        server = Server(dbpath, ["--config", conf]).start()
    else:
        server = Server(dbpath, ["--noscripting"]).start()
    try:
        coll = server.client()["e2e"]["things"]
        coll.insert_one({"x": 1})
        with pytest.raises(OperationFailure) as e:
            coll.find_one({"$where": "true"})
        assert e.value.code == 6108304
        with pytest.raises(OperationFailure) as e:
            list(coll.aggregate([{"$project": {"v": {"$function": {
                "body": "function() { return 1; }", "args": [], "lang": "js"}}}}]))
        assert e.value.code == 31264
        with pytest.raises(OperationFailure) as e:
            list(coll.aggregate([{"$group": {"_id": None, "v": {"$accumulator": {
                "init": "function() { return 0; }", "accumulate": "function(s) { return s; }",
                "accumulateArgs": [], "merge": "function(a) { return a; }", "lang": "js"}}}}]))
        assert e.value.code == 31264
        with pytest.raises(OperationFailure) as e:
            coll.database.command(SON([("mapReduce", "things"), ("map", MAP), ("reduce", REDUCE),
                                       ("out", {"inline": 1})]))
        assert e.value.code == 31264
        # Everything else still works.
        assert coll.count_documents({"x": 1}) == 1
    finally:
        server.stop()
