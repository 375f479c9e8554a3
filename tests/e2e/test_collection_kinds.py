"""Collection kinds mongod has beyond the plain one (issue 35): tailable cursors on capped
collections, clustered collections, time-series collections, changeStreamPreAndPostImages."""
import datetime
import threading
import time

import pymongo
import pytest
from pymongo.errors import OperationFailure


def test_tailable_cursor_dies_when_its_position_rolls_over(client):
    db = client.t
    db.create_collection("roll", capped=True, size=1000, max=3)
    db.roll.insert_one({"x": 1})
    first = db.command("find", "roll", tailable=True)
    cid = first["cursor"]["id"]
    assert [d["x"] for d in first["cursor"]["firstBatch"]] == [1] and cid != 0
    db.roll.insert_one({"x": 2})
    more = db.command("getMore", cid, collection="roll")
    assert [d["x"] for d in more["cursor"]["nextBatch"]] == [2]
    db.roll.insert_many([{"x": i} for i in range(3, 7)])
    with pytest.raises(OperationFailure) as e:
        db.command("getMore", cid, collection="roll")
    assert e.value.code == 136 and e.value.details["codeName"] == "CappedPositionLost"
    # The failed cursor is closed.
    with pytest.raises(OperationFailure) as e:
        db.command("getMore", cid, collection="roll")
    assert e.value.code == 43


def test_tailable_cursor_dies_when_its_collection_is_dropped(client):
    db = client.t
    db.create_collection("gone", capped=True, size=4096)
    db.gone.insert_one({"x": 1})
    cid = db.command("find", "gone", tailable=True)["cursor"]["id"]
    db.gone.drop()
    with pytest.raises(OperationFailure) as e:
        db.command("getMore", cid, collection="gone")
    assert e.value.code == 175 and e.value.details["codeName"] == "QueryPlanKilled"


def test_await_data_get_more_is_woken_by_an_insert(client):
    db = client.t
    db.create_collection("wake", capped=True, size=100_000)
    db.wake.insert_one({"i": 0})
    cid = db.command("find", "wake", tailable=True, awaitData=True)["cursor"]["id"]

    def later():
        time.sleep(0.3)
        client.t.wake.insert_one({"i": 1})

    threading.Thread(target=later).start()
    started = time.monotonic()
    more = db.command("getMore", cid, collection="wake", maxTimeMS=8000)
    took = time.monotonic() - started
    assert [d["i"] for d in more["cursor"]["nextBatch"]] == [1]
    # Woken by the insert, long before maxTimeMS.
    assert 0.2 < took < 4, took
    # Nothing new: it waits out maxTimeMS and returns an empty batch, the cursor open.
    started = time.monotonic()
    more = db.command("getMore", cid, collection="wake", maxTimeMS=300)
    assert more["cursor"]["nextBatch"] == [] and more["cursor"]["id"] == cid
    assert time.monotonic() - started >= 0.25


def test_await_data_find_max_time_ms_bounds_only_the_find(client):
    coll = client.t.create_collection("budget", capped=True, size=4096)
    coll.insert_one({"a": 1})
    # The getMores after the first batch wait up to 1 s each: more than the find's 99 ms.
    assert [d["a"] for d in coll.find(cursor_type=pymongo.CursorType.TAILABLE_AWAIT).max_time_ms(99)] == [1]


def test_tailable_on_a_plain_collection_is_refused(client):
    client.t.plain.insert_one({})
    with pytest.raises(OperationFailure) as e:
        client.t.command("find", "plain", tailable=True)
    assert e.value.code == 2


def test_clustered_collection_is_listed_with_its_clustered_index(client):
    db = client.t
    db.create_collection("cl", clusteredIndex={"key": {"_id": 1}, "unique": True, "name": "by id"})
    info = next(db.list_collections(filter={"name": "cl"}))
    assert info["options"]["clusteredIndex"] == {"key": {"_id": 1}, "unique": True, "name": "by id", "v": 2}
    assert "idIndex" not in info
    assert list(db.cl.list_indexes()) == [
        {"key": {"_id": 1}, "unique": True, "name": "by id", "v": 2, "clustered": True}
    ]
    db.cl.insert_many([{"_id": 2}, {"_id": 1}])
    with pytest.raises(pymongo.errors.BulkWriteError):
        db.cl.insert_many([{"_id": 1}])
    # Unnamed: mongod names it _id_.
    db.create_collection("cl2", clusteredIndex={"key": {"_id": 1}, "unique": True})
    assert next(db.cl2.list_indexes())["name"] == "_id_"


@pytest.mark.parametrize(
    "options,code",
    [
        ({"clusteredIndex": {"key": {"a": 1}, "unique": True}}, 72),
        ({"clusteredIndex": {"key": {"_id": 1}, "unique": False}}, 72),
        ({"clusteredIndex": {"key": {"_id": 1}}}, 40414),
        ({"clusteredIndex": {"key": {"_id": 1}, "unique": True, "bogus": 1}}, 40415),
        ({"expireAfterSeconds": 10}, 72),
        ({"clusteredIndex": {"key": {"_id": 1}, "unique": True}, "capped": True, "size": 4096}, 72),
        ({"clusteredIndex": {"key": {"_id": 1}, "unique": True}, "expireAfterSeconds": -1}, 72),
    ],
)
def test_clustered_options_are_refused_as_mongod_refuses_them(client, options, code):
    with pytest.raises(OperationFailure) as e:
        client.t.command("create", "bad", **options)
    assert e.value.code == code


@pytest.fixture
def ttl_server(dbpath):
    from conftest import Server

    s = Server(dbpath, ["--set-parameter", "ttlMonitorSleepSecs=1"]).start()
    yield s
    s.stop()


def wait_until(pred, seconds=30):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(0.2)
    return False


def test_clustered_ttl_deletes_by_id_date(ttl_server):
    client = ttl_server.client()
    db = client.t
    db.create_collection(
        "expiring", clusteredIndex={"key": {"_id": 1}, "unique": True}, expireAfterSeconds=5
    )
    now = datetime.datetime.now(datetime.timezone.utc)
    db.expiring.insert_many([{"_id": now - datetime.timedelta(hours=1)}, {"_id": now + datetime.timedelta(hours=1)}])
    assert wait_until(lambda: db.expiring.count_documents({}) == 1)
    assert db.expiring.find_one()["_id"] > now.replace(tzinfo=None)
    db.command("collMod", "expiring", expireAfterSeconds="off")
    assert "expireAfterSeconds" not in next(db.list_collections(filter={"name": "expiring"}))["options"]
    client.close()


def test_time_series_collection_buckets_and_unpacks(client):
    db = client.t
    db.create_collection(
        "weather",
        timeseries={"timeField": "ts", "metaField": "sensor", "granularity": "minutes"},
        expireAfterSeconds=604800,
    )
    listed = {c["name"]: c for c in db.list_collections()}
    assert listed["weather"]["type"] == "timeseries"
    assert listed["weather"]["options"] == {
        "expireAfterSeconds": 604800,
        "timeseries": {"timeField": "ts", "metaField": "sensor", "granularity": "minutes", "bucketMaxSpanSeconds": 86400},
    }
    assert listed["system.buckets.weather"]["type"] == "collection"
    base = datetime.datetime(2024, 1, 1, 12, 0, 0)
    docs = [{"_id": 1, "ts": base, "sensor": "a", "temp": 20}, {"_id": 1, "ts": base + datetime.timedelta(minutes=5), "sensor": "a", "temp": 18}, {"ts": base + datetime.timedelta(minutes=1), "sensor": "b", "temp": 30}, {"ts": base + datetime.timedelta(days=2), "sensor": "a", "temp": 5}]
    db.weather.insert_many(docs)
    got = list(db.weather.find({}, {"_id": 0}).sort("ts", 1))
    assert [(d["sensor"], d["temp"]) for d in got] == [("a", 20), ("b", 30), ("a", 18), ("a", 5)]
    assert db.weather.count_documents({"sensor": "a"}) == 3
    # Two measurements of sensor a in the first day share a bucket; b has its own, and the
    # measurement two days later opens a third.
    buckets = list(db["system.buckets.weather"].find().sort("control.min.ts", 1))
    assert len(buckets) == 3
    first = buckets[0]
    assert first["meta"] == "a" and first["control"]["version"] == 1
    assert first["control"]["min"]["ts"] == base.replace(minute=0)
    assert first["control"]["max"]["temp"] == 20 and first["control"]["min"]["temp"] == 18
    assert first["data"]["temp"] == {"0": 20, "1": 18}
    assert list(db.weather.aggregate([{"$group": {"_id": "$sensor", "n": {"$sum": 1}}}, {"$sort": {"_id": 1}}])) == [{"_id": "a", "n": 3}, {"_id": "b", "n": 1}]
    with pytest.raises(pymongo.errors.BulkWriteError) as e:
        db.weather.insert_many([{"sensor": "a", "ts": "not a date"}])
    assert e.value.details["writeErrors"][0]["code"] == 2
    db.weather.drop()
    assert "system.buckets.weather" not in db.list_collection_names()


def test_time_series_bucketing_options(client):
    db = client.t
    db.create_collection("ts", timeseries={"timeField": "t", "bucketMaxSpanSeconds": 60, "bucketRoundingSeconds": 60})
    opts = next(db.list_collections(filter={"name": "ts"}))["options"]["timeseries"]
    assert opts == {"timeField": "t", "bucketRoundingSeconds": 60, "bucketMaxSpanSeconds": 60}
    base = datetime.datetime(2024, 1, 1)
    db.ts.insert_many([{"t": base + datetime.timedelta(seconds=s)} for s in (0, 30, 59, 60, 61)])
    assert db["system.buckets.ts"].count_documents({}) == 2
    with pytest.raises(OperationFailure) as e:
        db.create_collection("bad", timeseries={"timeField": "t", "bucketMaxSpanSeconds": 60})
    assert e.value.code == 72
    with pytest.raises(OperationFailure) as e:
        db.create_collection("bad", timeseries={"timeField": "t", "granularity": "days"})
    assert e.value.code == 2
    with pytest.raises(OperationFailure) as e:
        db.command("create", "ts", timeseries={"timeField": "t"})
    assert e.value.code == 48


def test_change_stream_pre_and_post_images_are_stored_and_listed(client):
    db = client.t
    db.create_collection("papi", changeStreamPreAndPostImages={"enabled": True})
    assert next(db.list_collections(filter={"name": "papi"}))["options"] == {
        "changeStreamPreAndPostImages": {"enabled": True}
    }
    db.command("collMod", "papi", changeStreamPreAndPostImages={"enabled": False})
    assert next(db.list_collections(filter={"name": "papi"}))["options"] == {
        "changeStreamPreAndPostImages": {"enabled": False}
    }
    for bad, code in [({}, 40414), ({"enabled": 1}, 14), ({"enabled": True, "x": 1}, 40415)]:
        with pytest.raises(OperationFailure) as e:
            db.command("collMod", "papi", changeStreamPreAndPostImages=bad)
        assert e.value.code == code
