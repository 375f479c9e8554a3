"""Aggregation expressions through `aggregate` against a real server: the date operators and
the rest of issue 14's list, with expected values and error codes from MongoDB's manual
(pages under https://www.mongodb.com/docs/manual/reference/operator/aggregation/)."""
import datetime
import tempfile

import pymongo
import pytest
from bson import ObjectId, Timestamp
from pymongo.errors import OperationFailure

from conftest import Server

UTC = datetime.timezone.utc


def dt(*a):
    return datetime.datetime(*a, tzinfo=UTC)


@pytest.fixture(scope="module")
def db():
    # One server for the whole module: these tests only read and write their own collection.
    with tempfile.TemporaryDirectory(prefix="flashdoc-e2e-expr-") as d:
        s = Server(d).start()
        c = s.client(tz_aware=True)
        yield c["e2e_expr"]
        c.close()
        s.stop()


def one(db, expr, doc=None):
    """Evaluates `expr` against one stored document and returns the result."""
    coll = db["one"]
    coll.delete_many({})
    coll.insert_one(dict(doc or {}, _id=1))
    out = list(coll.aggregate([{"$project": {"_id": 0, "r": expr}}]))
    return out[0].get("r", "<missing>")


def code_of(db, expr, doc=None):
    with pytest.raises(OperationFailure) as e:
        one(db, expr, doc)
    return e.value.code


# --- dates ---------------------------------------------------------------------------------

D = dt(2014, 1, 1, 8, 15, 39, 736000)


def test_date_to_string_manual_example(db):
    # dateToString/: the page's document and outputs.
    f = lambda fmt, tz: one(db, {"$dateToString": {"format": fmt, "date": "$date", "timezone": tz}}, {"date": D})
    assert f("%Y-%m-%d", "UTC") == "2014-01-01"
    assert f("%H:%M:%S:%L%z", "America/New_York") == "03:15:39:736-0500"
    assert f("%H:%M:%S:%L%z", "+04:30") == "12:45:39:736+0430"
    assert f("%Z", "America/New_York") == "-300"
    assert f("%Z", "+04:30") == "270"
    assert f("%b %B", "UTC") == "Jan January"
    assert f("%j %w %u %U %V %G %%", "UTC") == "001 4 3 00 01 2014 %"
    assert one(db, {"$dateToString": {"date": "$date"}}, {"date": D}) == "2014-01-01T08:15:39.736Z"
    assert one(db, {"$dateToString": {"date": "$nope", "onNull": "none"}}) == "none"
    assert code_of(db, {"$dateToString": {"date": D, "format": "%q"}}) == 18536
    assert code_of(db, {"$dateToString": {"date": D, "timezone": "Mars/Olympus"}}) == 40485
    assert code_of(db, {"$dateToString": {"format": "%Y"}}) == 18628


def test_date_parts_with_timezone(db):
    doc = {"date": D, "ts": Timestamp(1388564139, 1), "oid": ObjectId("52c3cfab0000000000000000")}
    r = one(db, {
        "y": {"$year": {"date": "$date", "timezone": "Pacific/Honolulu"}},
        "h": {"$hour": {"date": "$date", "timezone": "+05:30"}},
        "m": {"$minute": {"date": "$date", "timezone": "+05:30"}},
        "w": {"$week": "$date"},
        "iw": {"$isoWeek": ["$date"]},
        "iy": {"$isoWeekYear": "$date"},
        "idw": {"$isoDayOfWeek": "$date"},
        "ts": {"$second": "$ts"},
        "oid": {"$dayOfYear": "$oid"},
    }, doc)
    assert r == {"y": 2013, "h": 13, "m": 45, "w": 0, "iw": 1, "iy": 2014, "idw": 3, "ts": 39, "oid": 1}
    assert code_of(db, {"$year": {"date": D, "zone": "UTC"}}) == 40535
    assert code_of(db, {"$year": {"date": D, "timezone": 7}}) == 40517


def test_date_to_and_from_parts(db):
    # dateToParts/ and dateFromParts/: the pages' examples.
    d = dt(2017, 1, 1, 1, 29, 9, 123000)
    assert one(db, {"$dateToParts": {"date": d, "iso8601": True}}) == {
        "isoWeekYear": 2016, "isoWeek": 52, "isoDayOfWeek": 7,
        "hour": 1, "minute": 29, "second": 9, "millisecond": 123}
    assert one(db, {"$dateToParts": {"date": d, "timezone": "America/New_York"}}) == {
        "year": 2016, "month": 12, "day": 31, "hour": 20, "minute": 29, "second": 9, "millisecond": 123}
    assert one(db, {"$dateFromParts": {"isoWeekYear": 2017, "isoWeek": 6, "isoDayOfWeek": 3, "hour": 12}}) == dt(2017, 2, 8, 12)
    assert one(db, {"$dateFromParts": {"year": 2016, "month": 12, "day": 31, "hour": 23, "minute": 46,
                                       "second": 12, "timezone": "America/New_York"}}) == dt(2017, 1, 1, 4, 46, 12)
    assert one(db, {"$dateFromParts": {"year": 2017, "month": 14, "day": 1, "hour": 12}}) == dt(2018, 2, 1, 12)
    assert code_of(db, {"$dateFromParts": {"year": 2017, "isoWeek": 1}}) == 40489
    assert code_of(db, {"$dateFromParts": {"month": 1}}) == 40516


def test_date_from_string(db):
    # dateFromString/: the page's examples, onError and onNull.
    f = lambda args: one(db, {"$dateFromString": args})
    assert f({"dateString": "2017-02-08T12:10:40.787", "timezone": "America/New_York"}) == dt(2017, 2, 8, 17, 10, 40, 787000)
    assert f({"dateString": "15-06-2018", "format": "%d-%m-%Y"}) == dt(2018, 6, 15)
    assert f({"dateString": "2017-07-12T22:23:55 GMT+02:00"}) == dt(2017, 7, 12, 20, 23, 55)
    assert code_of(db, {"$dateFromString": {"dateString": "2017-07-12 22:23:55 Europe/London"}}) == 241
    assert f({"dateString": "20177-02-09T03:35:02.055", "onError": "bad"}) == "bad"
    assert f({"dateString": None, "onNull": "none"}) == "none"
    assert code_of(db, {"$dateFromString": {"dateString": "not a date"}}) == 241
    assert code_of(db, {"$dateFromString": {"format": "%Y"}}) == 40542


def test_date_arithmetic(db):
    # dateAdd/, dateSubtract/, dateDiff/, dateTrunc/.
    assert one(db, {"$dateAdd": {"startDate": dt(2021, 1, 31, 10), "unit": "month", "amount": 1}}) == dt(2021, 2, 28, 10)
    assert one(db, {"$dateAdd": {"startDate": dt(2021, 11, 6, 13), "unit": "day", "amount": 1,
                                 "timezone": "America/New_York"}}) == dt(2021, 11, 7, 14)
    assert one(db, {"$dateSubtract": {"startDate": dt(2021, 3, 31), "unit": "month", "amount": 1}}) == dt(2021, 2, 28)
    assert one(db, {"$dateDiff": {"startDate": dt(2020, 12, 31, 23, 59), "endDate": dt(2021, 1, 1, 0, 1),
                                  "unit": "year"}}) == 1
    week = lambda sow: one(db, {"$dateDiff": {"startDate": dt(2017, 1, 7), "endDate": dt(2017, 1, 9),
                                              "unit": "week", "startOfWeek": sow}})
    assert (week("monday"), week("sun"), week("Saturday")) == (1, 1, 0)
    assert one(db, {"$dateTrunc": {"date": dt(2021, 3, 20, 11, 30, 5), "unit": "hour", "binSize": 2}}) == dt(2021, 3, 20, 10)
    assert one(db, {"$dateTrunc": {"date": dt(2021, 3, 20, 11, 30, 5), "unit": "year", "binSize": 10}}) == dt(2020, 1, 1)
    assert one(db, {"$dateTrunc": {"date": dt(2020, 5, 18, 14, 10, 30), "unit": "week", "binSize": 2,
                                   "timezone": "America/Los_Angeles", "startOfWeek": "Monday"}}) == dt(2020, 5, 11, 7)
    assert code_of(db, {"$dateAdd": {"startDate": dt(2021, 1, 1), "unit": "day"}}) == 5166402
    assert code_of(db, {"$dateAdd": {"startDate": dt(2021, 1, 1), "unit": "eon", "amount": 1}}) == 9
    assert code_of(db, {"$dateTrunc": {"date": dt(2021, 1, 1), "unit": "day", "binSize": 0}}) == 5439018
    assert code_of(db, {"$dateDiff": {"startDate": dt(2021, 1, 1), "endDate": dt(2021, 1, 2), "unit": "week",
                                      "startOfWeek": "caturday"}}) == 5439016


# --- the rest --------------------------------------------------------------------------------


def test_string_operators(db):
    # regexFind/, regexFindAll/, replaceOne/, replaceAll/, indexOfBytes/, indexOfCP/.
    assert one(db, {"$regexFind": {"input": "Single LINE description.", "regex": "line", "options": "i"}}) == {
        "match": "LINE", "idx": 7, "captures": []}
    assert one(db, {"$regexFindAll": {"input": "café cafe", "regex": "(c)af(é)?"}}) == [
        {"match": "café", "idx": 0, "captures": ["c", "é"]},
        {"match": "caf", "idx": 5, "captures": ["c", None]}]
    assert one(db, {"$replaceAll": {"input": "blue paint with blue paintbrush", "find": "blue paint",
                                    "replacement": "red paint"}}) == "red paint with red paintbrush"
    assert one(db, {"$replaceOne": {"input": "$s", "find": "a", "replacement": "o"}}, {"s": "banana"}) == "bonana"
    assert one(db, {"$indexOfBytes": ["cafétéria", "t"]}) == 5
    assert one(db, {"$indexOfCP": ["cafétéria", "t"]}) == 4
    assert one(db, {"$indexOfBytes": ["foo.bar.fi", ".", 5]}) == 7
    assert code_of(db, {"$indexOfBytes": ["vanilla", "ll", -1]}) == 40097
    assert code_of(db, {"$regexFind": {"input": 1, "regex": "a"}}) == 51104
    assert code_of(db, {"$replaceAll": {"input": "a", "find": "a"}}) == 51747


def test_array_operators(db):
    # zip/, sortArray/, firstN-array-element/, maxN-array-element/, rand/.
    assert one(db, {"$zip": {"inputs": [[1], [2, 3], [4]], "useLongestLength": True,
                             "defaults": ["a", "b", "c"]}}) == [[1, 2, 4], ["a", 3, "c"]]
    assert one(db, {"$zip": {"inputs": ["$a", "$b"]}}, {"a": [1, 2], "b": ["x", "y", "z"]}) == [[1, "x"], [2, "y"]]
    team = [{"name": "pat", "age": 30}, {"name": "dallas", "age": 36}, {"name": "charlie", "age": 42}]
    assert [m["name"] for m in one(db, {"$sortArray": {"input": "$team", "sortBy": {"age": -1}}}, {"team": team})] == [
        "charlie", "dallas", "pat"]
    assert one(db, {"$sortArray": {"input": [1, 4, 1, 6, 12, 5], "sortBy": -1}}) == [12, 6, 5, 4, 1, 1]
    assert one(db, {"$firstN": {"n": 2, "input": [3, None, 1]}}) == [3, None]
    assert one(db, {"$lastN": {"n": 2, "input": [3, None, 1]}}) == [None, 1]
    assert one(db, {"$maxN": {"n": 2, "input": [3, None, 1, 8]}}) == [8, 3]
    assert one(db, {"$minN": {"n": 2, "input": [3, None, 1, 8]}}) == [1, 3]
    r = one(db, {"$rand": {}})
    assert isinstance(r, float) and 0 <= r < 1
    assert code_of(db, {"$zip": {"inputs": [[1], 2]}}) == 34468
    assert code_of(db, {"$sortArray": {"input": 1, "sortBy": 1}}) == 2942504
    assert code_of(db, {"$firstN": {"n": 0, "input": [1]}}) == 5787908


def test_field_and_convert_operators(db):
    # getField/, setField/, unsetField/, convert/.
    doc = {"price.usd": 45, "qty": 2}
    assert one(db, {"$getField": "price.usd"}, doc) == 45
    assert one(db, {"$setField": {"field": "price.usd", "input": "$$ROOT", "value": 50}}, doc) == {
        "_id": 1, "price.usd": 50, "qty": 2}
    assert one(db, {"$unsetField": {"field": "price.usd", "input": {"$literal": {"price.usd": 1, "a": 2}}}}) == {"a": 2}
    assert one(db, {"$convert": {"input": "5.5", "to": "double"}}) == 5.5
    assert one(db, {"$convert": {"input": 5.9, "to": 16}}) == 5
    assert one(db, {"$convert": {"input": "abc", "to": "int", "onError": -1}}) == -1
    assert one(db, {"$convert": {"input": "$nope", "to": "int", "onNull": 0}}) == 0
    assert code_of(db, {"$convert": {"input": "abc", "to": "int"}}) == 241
    assert code_of(db, {"$convert": {"input": 1, "to": "foo"}}) == 9
    assert code_of(db, {"$setField": {"field": "a", "input": 1, "value": 1}}) == 4161105


def test_math_bits_sizes_and_timestamps(db):
    # log/, sin/, degreesToRadians/, bitAnd/, bitNot/, binarySize/, bsonSize/, tsSecond/, toUUID/.
    assert one(db, {"$log": [100, 10]}) == 2.0
    assert abs(one(db, {"$sin": {"$degreesToRadians": 30}}) - 0.5) < 1e-12
    assert one(db, {"$bitAnd": [3, 5]}) == 1
    assert one(db, {"$bitNot": "$n"}, {"n": 0}) == -1
    assert one(db, {"$binarySize": "café"}) == 5
    assert one(db, {"$bsonSize": "$$ROOT"}, {"a": 1}) == 21  # 4 + (1+2+4) + (1+4+4) + 1
    assert one(db, {"$tsSecond": "$ts"}, {"ts": Timestamp(1622731060, 10)}) == 1622731060
    assert one(db, {"$toUUID": "123e4567-e89b-12d3-a456-426614174000"}).subtype == 4
    assert code_of(db, {"$acos": 2}) == 50989
    assert code_of(db, {"$bitAnd": [1, 1.5]}) == 14


def test_percentile_and_median(db):
    # percentile/ (expression): the page's testScores example; median/.
    doc = {"scores": [62, 81, 80, 75, 68]}
    assert one(db, {"$percentile": {"input": "$scores", "p": [0.25, 0.5, 0.75], "method": "approximate"}}, doc) == [
        68.0, 75.0, 80.0]
    assert one(db, {"$median": {"input": "$scores", "method": "approximate"}}, doc) == 75.0
    assert code_of(db, {"$median": {"input": "$scores"}}, doc) == 40414


def test_unknown_expression_is_still_168(db):
    # $function runs JavaScript now (test_javascript.py); a name mongod does not know is 168.
    assert code_of(db, {"$noSuchExpression": {"args": []}}) == 168


def test_n_accumulators_in_group(db):
    # firstN/, lastN/, maxN/, minN/ as $group accumulators.
    coll = db["scores"]
    coll.delete_many({})
    coll.insert_many([{"_id": i, "g": i % 2, "s": s} for i, s in enumerate([5, 9, 1, None, 7, 3])])
    out = {d["_id"]: d for d in coll.aggregate([{"$sort": {"_id": 1}}, {"$group": {
        "_id": "$g",
        "first": {"$firstN": {"input": "$s", "n": 2}},
        "last": {"$lastN": {"input": "$s", "n": 2}},
        "max": {"$maxN": {"input": "$s", "n": 2}},
        "min": {"$minN": {"input": "$s", "n": 2}},
    }}])}
    assert out[0] == {"_id": 0, "first": [5, 1], "last": [1, 7], "max": [7, 5], "min": [1, 5]}
    assert out[1] == {"_id": 1, "first": [9, None], "last": [None, 3], "max": [9, 3], "min": [3, 9]}
    with pytest.raises(OperationFailure) as e:
        list(coll.aggregate([{"$group": {"_id": None, "r": {"$maxN": {"input": "$s"}}}}]))
    assert e.value.code == 5787906
