"""Change streams on a three-member replica set (issue 36): pymongo's `watch` on a
collection, a database and the deployment; the events' shapes (insert, update with its
updateDescription, replace, delete, drop, rename, dropDatabase, invalidate); resume tokens
with resumeAfter and startAfter, startAtOperationTime, fullDocument: updateLookup; the stages
allowed after $changeStream and the resume token kept through them; a stream read from a
secondary; mongod's refusals."""
import time

import pytest
from bson import Timestamp
from pymongo import ReadPreference
from pymongo.errors import OperationFailure

from test_replset import direct, initiated, members, set_client, wait_for_primary  # noqa: F401

pytestmark = pytest.mark.mmapv1_lacks("replica sets")


@pytest.fixture(scope="module")
def client(initiated):  # noqa: F811
    c = set_client(initiated)
    yield c
    c.close()


def next_events(stream, n, timeout=15):
    """The next `n` events of `stream` (a change stream), waiting up to `timeout` s."""
    out, deadline = [], time.time() + timeout
    while len(out) < n and time.time() < deadline:
        e = stream.try_next()
        if e is not None:
            out.append(e)
    assert len(out) == n, f"{len(out)} of {n} events: {out}"
    return out


def test_a_collection_stream_shows_each_kind_of_write(client):
    coll = client.cs.kinds
    coll.insert_one({"_id": 0})
    with coll.watch(max_await_time_ms=200) as stream:
        coll.insert_one({"_id": 1, "a": 1, "e": {"x": 1, "y": 2}})
        coll.update_one({"_id": 1}, {"$set": {"a": 2, "e.x": 5}, "$unset": {"e.y": ""}})
        coll.replace_one({"_id": 1}, {"b": 1})
        coll.delete_one({"_id": 1})
        ins, upd, rep, dele = next_events(stream, 4)
    assert [e["operationType"] for e in (ins, upd, rep, dele)] == [
        "insert", "update", "replace", "delete"]
    assert ins["ns"] == {"db": "cs", "coll": "kinds"}
    assert ins["documentKey"] == {"_id": 1}
    assert ins["fullDocument"] == {"_id": 1, "a": 1, "e": {"x": 1, "y": 2}}
    assert isinstance(ins["clusterTime"], Timestamp) and "wallTime" in ins
    assert upd["updateDescription"]["updatedFields"] == {"a": 2, "e.x": 5}
    assert upd["updateDescription"]["removedFields"] == ["e.y"]
    assert "fullDocument" not in upd
    assert rep["fullDocument"] == {"_id": 1, "b": 1}
    assert dele["documentKey"] == {"_id": 1} and "fullDocument" not in dele
    # Tokens are opaque, and later events' compare greater (the oplog's order).
    assert ins["_id"]["_data"] < dele["_id"]["_data"]


def test_resume_tokens_and_start_points(client):
    coll = client.cs.resume
    with coll.watch(max_await_time_ms=200) as stream:
        t0 = client.admin.command("hello")["lastWrite"]["majorityOpTime"]["ts"]
        coll.insert_many([{"_id": i} for i in range(4)])
        events = next_events(stream, 4)
        token = stream.resume_token
    assert token == events[-1]["_id"]
    with coll.watch(resume_after=events[1]["_id"], max_await_time_ms=200) as again:
        ids = [e["documentKey"]["_id"] for e in next_events(again, 2)]
    assert ids == [2, 3]
    with coll.watch(start_at_operation_time=t0, max_await_time_ms=200) as at:
        ids = [e["documentKey"]["_id"] for e in next_events(at, 4)]
    assert ids == [0, 1, 2, 3]
    # An idle stream's token still moves (postBatchResumeToken), past writes it does not show.
    with coll.watch([{"$match": {"operationType": "delete"}}], max_await_time_ms=200) as idle:
        assert idle.try_next() is None
        before = idle.resume_token
        coll.insert_one({"_id": 10})
        deadline = time.time() + 10
        while idle.resume_token == before and time.time() < deadline:
            assert idle.try_next() is None
        assert idle.resume_token != before, "the high-water mark passes the insert"


def test_update_lookup_and_stages_after_the_stream(client):
    coll = client.cs.lookup
    coll.insert_one({"_id": 1, "n": 0})
    pipeline = [{"$match": {"operationType": "update"}}, {"$project": {"fullDocument": 1}}]
    with coll.watch(pipeline, full_document="updateLookup", max_await_time_ms=200) as stream:
        coll.insert_one({"_id": 2})
        coll.update_one({"_id": 1}, {"$inc": {"n": 1}})
        (e,) = next_events(stream, 1)
    assert set(e) == {"_id", "fullDocument"}
    assert e["fullDocument"] == {"_id": 1, "n": 1}
    with pytest.raises(OperationFailure) as err:
        with coll.watch([{"$project": {"_id": 0}}], max_await_time_ms=200) as stream:
            coll.insert_one({"_id": 3})
            next_events(stream, 1)
    assert err.value.code == 280  # ChangeStreamFatalError: the token was removed
    with pytest.raises(OperationFailure) as err:
        coll.watch([{"$group": {"_id": None}}])
    assert err.value.code == 40602


def test_drop_and_rename_invalidate_and_start_after(client):
    db = client.cs_drop
    db.a.insert_one({"_id": 0})
    with db.a.watch(max_await_time_ms=200) as stream:
        db.a.rename("b")
        rename, invalidate = next_events(stream, 2)
        assert not stream.alive
    assert rename["operationType"] == "rename"
    assert rename["to"] == {"db": "cs_drop", "coll": "b"}
    assert invalidate["operationType"] == "invalidate"
    with pytest.raises(OperationFailure) as err:
        db.a.watch(resume_after=invalidate["_id"])
    assert err.value.code == 260
    db.a.insert_one({"_id": 1})
    with db.a.watch(start_after=invalidate["_id"], max_await_time_ms=200) as after:
        (e,) = next_events(after, 1)
    assert e["operationType"] == "insert" and e["documentKey"] == {"_id": 1}
    with db.watch(max_await_time_ms=200) as whole:
        client.drop_database("cs_drop")
        kinds = [e["operationType"] for e in next_events(whole, 4)]
    assert kinds == ["drop", "drop", "dropDatabase", "invalidate"]


def test_database_and_deployment_streams(client):
    with client.watch(max_await_time_ms=200) as everything, \
            client.cs_db.watch(max_await_time_ms=200) as one_db:
        client.cs_db.x.insert_one({"_id": 1})
        client.cs_other.y.insert_one({"_id": 1})
        got = next_events(everything, 2)
        assert [e["ns"] for e in got] == [
            {"db": "cs_db", "coll": "x"}, {"db": "cs_other", "coll": "y"}]
        (e,) = next_events(one_db, 1)
        assert e["ns"] == {"db": "cs_db", "coll": "x"}
        assert one_db.try_next() is None


def test_a_secondary_serves_a_stream(initiated, client):  # noqa: F811
    primary = wait_for_primary(initiated)
    secondary = next(s for s in initiated if s is not primary)
    with direct(secondary) as c:
        coll = c.cs.on_secondary.with_options(read_preference=ReadPreference.SECONDARY)
        with coll.watch(max_await_time_ms=200) as stream:
            client.cs.on_secondary.insert_one({"_id": 1})
            (e,) = next_events(stream, 1)
    assert e["operationType"] == "insert"


def test_refusals(client):
    with pytest.raises(OperationFailure) as err:
        client.admin.foo.watch()
    assert err.value.code == 73  # InvalidNamespace
    with pytest.raises(OperationFailure) as err:
        client.cs.system.views.watch()
    assert err.value.code == 73
    with pytest.raises(OperationFailure) as err:
        client.cs.c.watch(full_document_before_change="sometimes")
    assert err.value.code == 2  # BadValue
    with pytest.raises(OperationFailure) as err:
        client.cs.c.aggregate([{"$changeStream": {"bogus": 1}}])
    assert err.value.code == 40415


def open_raw_stream(db, coll):
    """A change stream opened with a plain aggregate command: its cursor id."""
    reply = db.command("aggregate", coll, pipeline=[{"$changeStream": {}}], cursor={})
    return reply["cursor"]["id"]


def raw_get_more_error(db, coll, cursor_id):
    with pytest.raises(OperationFailure) as err:
        db.command("getMore", cursor_id, collection=coll, maxTimeMS=100)
    return err.value


def fail_next_get_more(client, point, data):
    client.admin.command("configureFailPoint", point, mode={"times": 1}, data=data)


def test_resumable_error_labels_on_a_change_stream_get_more(client):
    db = client.cs
    # A resumable code (ExceededTimeLimit) after the cursor is checked out: labelled.
    fail_next_get_more(client, "failGetMoreAfterCursorCheckout", {"errorCode": 262})
    err = raw_get_more_error(db, "labels", open_raw_stream(db, "labels"))
    assert err.code == 262
    assert err.details["errorLabels"] == ["ResumableChangeStreamError"]
    # A code a stream cannot resume after (BadValue): no label.
    fail_next_get_more(client, "failGetMoreAfterCursorCheckout", {"errorCode": 2})
    err = raw_get_more_error(db, "labels", open_raw_stream(db, "labels"))
    assert err.code == 2 and "errorLabels" not in err.details
    # failCommand answers before the cursor is reached: only the labels it is given.
    fail_next_get_more(client, "failCommand", {"failCommands": ["getMore"], "errorCode": 6})
    err = raw_get_more_error(db, "labels", open_raw_stream(db, "labels"))
    assert err.code == 6 and "errorLabels" not in err.details
    # The fail point's error closed the cursor, as any getMore error does.
    cursor_id = open_raw_stream(db, "labels")
    fail_next_get_more(client, "failGetMoreAfterCursorCheckout", {"errorCode": 234})
    raw_get_more_error(db, "labels", cursor_id)
    assert raw_get_more_error(db, "labels", cursor_id).code == 43  # CursorNotFound
    with pytest.raises(OperationFailure):
        client.admin.command(
            "configureFailPoint", "failGetMoreAfterCursorCheckout", mode="alwaysOn",
            data={"closeConnection": True, "errorCode": 6},
        )


def test_a_driver_resumes_after_a_labelled_error(client):
    coll = client.cs.resumed
    with coll.watch(max_await_time_ms=200) as stream:
        fail_next_get_more(client, "failGetMoreAfterCursorCheckout", {"errorCode": 10107})
        coll.insert_one({"_id": 1})
        (e,) = next_events(stream, 1)
    assert e["operationType"] == "insert" and e["documentKey"] == {"_id": 1}


def test_a_fatal_change_stream_error_is_labelled_non_resumable(client):
    coll = client.cs.fatal
    with coll.watch([{"$project": {"_id": 0}}], max_await_time_ms=200) as stream:
        coll.insert_one({"_id": 1})
        with pytest.raises(OperationFailure) as err:
            next_events(stream, 1)
    assert err.value.code == 280  # ChangeStreamFatalError
    assert "NonResumableChangeStreamError" in err.value.details["errorLabels"]


def test_pre_and_post_images(client):
    db = client.cs
    db.create_collection("imaged", changeStreamPreAndPostImages={"enabled": True})
    coll = db.imaged
    coll.insert_one({"_id": 1, "a": 1})
    opts = dict(full_document="required", full_document_before_change="required")
    with coll.watch(max_await_time_ms=200, **opts) as stream:
        coll.update_one({"_id": 1}, {"$set": {"a": 2}, "$push": {"l": 1}})
        coll.replace_one({"_id": 1}, {"b": 1})
        coll.delete_one({"_id": 1})
        update, replace, delete = next_events(stream, 3)
    assert update["fullDocumentBeforeChange"] == {"_id": 1, "a": 1}
    assert update["fullDocument"] == {"_id": 1, "a": 2, "l": [1]}
    assert replace["fullDocumentBeforeChange"] == {"_id": 1, "a": 2, "l": [1]}
    assert replace["fullDocument"] == {"_id": 1, "b": 1}
    assert delete["fullDocumentBeforeChange"] == {"_id": 1, "b": 1}
    assert "fullDocument" not in delete
    # Switched off: whenAvailable gives null, required fails the stream.
    db.command("collMod", "imaged", changeStreamPreAndPostImages={"enabled": False})
    coll.insert_one({"_id": 2})
    with coll.watch(max_await_time_ms=200, full_document="whenAvailable",
                    full_document_before_change="whenAvailable") as stream:
        coll.update_one({"_id": 2}, {"$set": {"x": 1}})
        (e,) = next_events(stream, 1)
    assert e["fullDocument"] is None and e["fullDocumentBeforeChange"] is None
    with coll.watch(max_await_time_ms=200, full_document_before_change="required") as stream:
        coll.delete_one({"_id": 2})
        with pytest.raises(OperationFailure) as err:
            next_events(stream, 1)
    assert err.value.code == 47  # NoMatchingDocument


def test_pre_images_in_a_transaction(client):
    db = client.cs
    db.create_collection("imaged_txn", changeStreamPreAndPostImages={"enabled": True})
    coll = db.imaged_txn
    coll.insert_one({"_id": 1, "n": 0})
    with coll.watch(max_await_time_ms=200, full_document="whenAvailable",
                    full_document_before_change="whenAvailable") as stream:
        with client.start_session() as s:
            with s.start_transaction():
                coll.update_one({"_id": 1}, {"$inc": {"n": 1}}, session=s)
                coll.delete_one({"_id": 1}, session=s)
        update, delete = next_events(stream, 2)
    assert (update["fullDocumentBeforeChange"], update["fullDocument"]) == (
        {"_id": 1, "n": 0}, {"_id": 1, "n": 1})
    assert delete["fullDocumentBeforeChange"] == {"_id": 1, "n": 1}


def test_expanded_events(client):
    db = client.cs
    with db.watch(max_await_time_ms=200, show_expanded_events=True) as stream:
        db.create_collection("expanded")
        db.expanded.insert_one({"_id": 1})
        db.expanded.create_index("x", name="x_1")
        db.command("collMod", "expanded", validationLevel="off")
        db.expanded.drop_index("x_1")
        db.create_collection("expanded_target")
        db.expanded.rename("expanded_target", dropTarget=True)
        events = next_events(stream, 7)
    kinds = [e["operationType"] for e in events]
    assert kinds == ["create", "insert", "createIndexes", "modify", "dropIndexes", "create",
                     "rename"]
    create, insert, create_index, modify, drop_index, target, rename = events
    uuid = insert["collectionUUID"]
    assert create["collectionUUID"] == uuid and create["ns"] == {"db": "cs", "coll": "expanded"}
    assert create_index["operationDescription"]["indexes"][0]["name"] == "x_1"
    assert modify["operationDescription"] == {"validationLevel": "off"}
    assert drop_index["operationDescription"] == {"indexes": [{"name": "x_1"}]}
    assert rename["operationDescription"] == {
        "to": {"db": "cs", "coll": "expanded_target"},
        "dropTarget": target["collectionUUID"],
    }
    # Without the option: none of them, and no collectionUUID.
    with db.expanded_target.watch(max_await_time_ms=200) as stream:
        db.expanded_target.create_index("y")
        db.expanded_target.insert_one({"_id": 2})
        (e,) = next_events(stream, 1)
    assert e["operationType"] == "insert" and "collectionUUID" not in e
    with pytest.raises(OperationFailure) as err:
        db.c.aggregate([{"$changeStream": {"showExpandedEvents": 1}}])
    assert err.value.code == 14  # TypeMismatch


def test_disambiguated_paths_with_expanded_events(client):
    coll = client.cs.ambiguous
    coll.insert_one({"_id": 1, "a": {"1": 1, "b": 1}})
    for expanded in (True, False):
        with coll.watch(max_await_time_ms=200, show_expanded_events=expanded) as stream:
            coll.update_one({"_id": 1}, {"$inc": {"a.1": 1}, "$unset": {"a.b": 1}})
            (e,) = next_events(stream, 1)
        description = e["updateDescription"]
        assert list(description["updatedFields"]) == ["a.1"]
        if expanded:
            assert description["disambiguatedPaths"] == {"a.1": ["a", "1"]}
        else:
            assert "disambiguatedPaths" not in description
        coll.update_one({"_id": 1}, {"$set": {"a.b": 1}})


def test_an_unknown_stage_after_the_stream(client):
    with pytest.raises(OperationFailure) as err:
        client.cs.c.watch([{"$unsupported": "foo"}])
    assert err.value.code == 40324  # Unrecognized pipeline stage name
    with pytest.raises(OperationFailure) as err:
        client.cs.c.watch([{"$group": {"_id": None}}])
    assert err.value.code == 40602  # not permitted in a $changeStream pipeline


def test_only_majority_read_concern(client):
    from pymongo.read_concern import ReadConcern

    for level in ("local", "available", "linearizable"):
        coll = client.cs.c.with_options(read_concern=ReadConcern(level))
        with pytest.raises(OperationFailure) as err:
            coll.watch()
        assert err.value.code == 72  # InvalidOptions
    with client.cs.c.with_options(read_concern=ReadConcern("majority")).watch():
        pass


def test_array_diffs_truncation_and_indices(initiated, client):  # noqa: F811
    coll = client.cs.arrays
    coll.insert_one({"_id": 1, "array": ["foo", {"a": "bar"}, 1, 2, 3], "n": [{"1": 1}]})
    with coll.watch(max_await_time_ms=200, show_expanded_events=True) as stream:
        coll.update_one({"_id": 1}, [{"$set": {"array": ["foo", {"a": "bar"}]}}])
        coll.update_one({"_id": 1}, {"$set": {"n.0.1": 2}, "$push": {"array": 9}})
        truncated, indexed = next_events(stream, 2)
    assert truncated["operationType"] == "update"
    assert truncated["updateDescription"]["truncatedArrays"] == [{"field": "array", "newSize": 2}]
    assert truncated["updateDescription"]["updatedFields"] == {}
    description = indexed["updateDescription"]
    assert description["updatedFields"] == {"n.0.1": 2, "array.2": 9}
    assert description["disambiguatedPaths"] == {"n.0.1": ["n", 0, "1"], "array.2": ["array", 2]}
    # The secondaries apply the array diffs to the same document.
    want = {"_id": 1, "array": ["foo", {"a": "bar"}, 9], "n": [{"1": 2}]}
    assert coll.find_one() == want
    for member in initiated:
        with direct(member) as c:
            deadline = time.time() + 15
            while c.cs.arrays.find_one() != want and time.time() < deadline:
                time.sleep(0.1)
            assert c.cs.arrays.find_one() == want
