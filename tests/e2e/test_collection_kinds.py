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
