"""Multi-document transactions on a three-member replica set (issue 36 §2), through pymongo's
own transaction API: commit and abort, snapshot isolation (another client does not see
uncommitted writes), WriteConflict with the TransientTransactionError label between concurrent
transactions, `with_transaction`'s retry loop, and a committed transaction's writes reaching
the secondaries together; a standalone refuses transactions."""
import time

import pymongo
import pytest
from pymongo.errors import NotPrimaryError, OperationFailure
from pymongo.read_concern import ReadConcern
from pymongo.write_concern import WriteConcern

from test_replset import direct, initiated, members, set_client, wait_for_primary  # noqa: F401

pytestmark = pytest.mark.mmapv1_lacks("replica sets")


@pytest.fixture(scope="module")
def rs(initiated):  # noqa: F811
    client = set_client(initiated)
    coll = client.app.get_collection("t", write_concern=WriteConcern("majority"))
    coll.drop()
    coll.insert_one({"_id": 0, "n": 0})
    yield client, coll
    client.close()


def test_commit_makes_every_write_visible_at_once(rs):
    client, coll = rs
    with client.start_session() as s:
        with s.start_transaction():
            coll.insert_one({"_id": 1, "n": 1}, session=s)
            coll.update_one({"_id": 0}, {"$inc": {"n": 10}}, session=s)
            assert coll.find_one({"_id": 1}, session=s) == {"_id": 1, "n": 1}
            # Another client (no session) sees none of it yet.
            assert coll.find_one({"_id": 1}) is None
            assert coll.find_one({"_id": 0})["n"] == 0
    assert coll.find_one({"_id": 1}) == {"_id": 1, "n": 1}
    assert coll.find_one({"_id": 0})["n"] == 10


def test_abort_leaves_nothing(rs):
    client, coll = rs
    with client.start_session() as s:
        s.start_transaction()
        coll.insert_one({"_id": 2}, session=s)
        s.abort_transaction()
    assert coll.find_one({"_id": 2}) is None
    coll.insert_one({"_id": 2})


def test_a_transaction_reads_its_snapshot(rs):
    client, coll = rs
    with client.start_session() as s:
        with s.start_transaction(read_concern=ReadConcern("snapshot")):
            before = coll.find_one({"_id": 0}, session=s)["n"]
            coll.update_one({"_id": 0}, {"$inc": {"n": 1}})  # outside, committed at once
            assert coll.find_one({"_id": 0}, session=s)["n"] == before
    assert coll.find_one({"_id": 0})["n"] == before + 1


def test_concurrent_writers_conflict_with_a_transient_label(rs):
    client, coll = rs
    coll.insert_one({"_id": "w", "n": 0})
    a, b = client.start_session(), client.start_session()
    a.start_transaction()
    b.start_transaction()
    coll.update_one({"_id": "w"}, {"$inc": {"n": 1}}, session=a)
    with pytest.raises(OperationFailure) as e:
        coll.update_one({"_id": "w"}, {"$inc": {"n": 1}}, session=b)
    assert e.value.code == 112
    assert e.value.has_error_label("TransientTransactionError")
    with pytest.raises(OperationFailure) as e:
        b.commit_transaction()
    assert e.value.code == 251
    a.commit_transaction()
    a.end_session()
    b.end_session()
    assert coll.find_one({"_id": "w"})["n"] == 1


def test_with_transaction_retries_until_it_commits(rs):
    client, coll = rs
    coll.insert_one({"_id": "r", "n": 0})
    blocker = client.start_session()
    blocker.start_transaction()
    coll.update_one({"_id": "r"}, {"$inc": {"n": 100}}, session=blocker)
    attempts = []

    def body(s):
        attempts.append(1)
        if len(attempts) == 2:
            blocker.commit_transaction()
        coll.update_one({"_id": "r"}, {"$inc": {"n": 1}}, session=s)

    with client.start_session() as s:
        s.with_transaction(body)
    blocker.end_session()
    assert len(attempts) >= 2, "the first attempt met the blocker's write"
    assert coll.find_one({"_id": "r"})["n"] == 101


def test_a_committed_transaction_reaches_the_secondaries_together(rs, initiated):  # noqa: F811
    client, coll = rs
    stream = coll.watch()
    with client.start_session() as s:
        with s.start_transaction(write_concern=WriteConcern("majority")):
            coll.insert_many([{"_id": f"s{i}", "x": i} for i in range(5)], session=s)
    # One event per statement, each naming the transaction (its one applyOps entry).
    events = [stream.next() for _ in range(5)]
    stream.close()
    assert [e["documentKey"]["_id"] for e in events] == [f"s{i}" for i in range(5)]
    assert all("lsid" in e and e["txnNumber"] == events[0]["txnNumber"] for e in events)
    primary = wait_for_primary(initiated)
    secondaries = [m for m in initiated if m is not primary]
    deadline = time.time() + 15
    for m in secondaries:
        with direct(m, readPreference="secondaryPreferred") as c:
            while True:
                n = c.app.t.count_documents({"_id": {"$regex": "^s"}})
                assert n in (0, 5), "a secondary shows the transaction whole or not at all"
                if n == 5:
                    break
                assert time.time() < deadline, "the transaction reached the secondary"
                time.sleep(0.1)


def test_statements_and_commands_a_transaction_refuses(rs):
    client, coll = rs
    with client.start_session() as s:
        s.start_transaction()
        coll.insert_one({"_id": "x"}, session=s)
        with pytest.raises(OperationFailure) as e:
            client.app.command("count", "t", session=s)
        assert e.value.code == 263
        with pytest.raises(OperationFailure) as e:
            list(coll.aggregate([{"$out": "copy"}], session=s))
        assert e.value.code == 263
        # A statement that failed in the database aborts the transaction.
        with pytest.raises(pymongo.errors.DuplicateKeyError):
            coll.insert_one({"_id": "x"}, session=s)
        with pytest.raises(OperationFailure) as e:
            s.commit_transaction()
        assert e.value.code == 251
        assert e.value.has_error_label("TransientTransactionError")
    assert coll.find_one({"_id": "x"}) is None


def test_a_secondary_refuses_a_transaction(rs, initiated):  # noqa: F811
    primary = wait_for_primary(initiated)
    secondary = next(m for m in initiated if m is not primary)
    with direct(secondary) as c:
        with c.start_session() as s:
            with pytest.raises(NotPrimaryError) as e:
                c.app.command(
                    "insert", "t", documents=[{"_id": "sec"}], session=s,
                    startTransaction=True, autocommit=False, txnNumber=1,
                )
            assert e.value.details["code"] == 10107


def test_a_standalone_refuses_transactions(client):
    with client.start_session() as s:
        with pytest.raises(OperationFailure) as e:
            client.app.command(
                "insert", "t", documents=[{"_id": 1}], session=s,
                startTransaction=True, autocommit=False, txnNumber=1,
            )
        assert e.value.code == 20
        assert "only allowed on a replica set member" in str(e.value)


def fail_command(client, **data):
    """Arms `failCommand` once on the primary for the commands `data` names."""
    client.admin.command("configureFailPoint", "failCommand", mode={"times": 1}, data=data)


def test_a_statements_transient_error_is_labelled_as_mongod_labels_it(rs):
    client, coll = rs
    for code in (112, 251, 24):
        fail_command(client, failCommands=["insert"], errorCode=code)
        with client.start_session() as s:
            s.start_transaction()
            with pytest.raises(OperationFailure) as e:
                coll.insert_one({"_id": "fp"}, session=s)
            assert e.value.code == code
            assert e.value.details["errorLabels"] == ["TransientTransactionError"]
            s.abort_transaction()
    # Labels the fail point was given are the reply's, and none of the server's.
    fail_command(client, failCommands=["insert"], errorCode=112, errorLabels=["Given"])
    with client.start_session() as s:
        s.start_transaction()
        with pytest.raises(OperationFailure) as e:
            coll.insert_one({"_id": "fp"}, session=s)
        assert e.value.details["errorLabels"] == ["Given"]
        s.abort_transaction()
    # Outside a transaction the same error carries no transaction label.
    fail_command(client, failCommands=["insert"], errorCode=112)
    with pytest.raises(OperationFailure) as e:
        coll.insert_one({"_id": "fp"})
    assert "TransientTransactionError" not in e.value.details.get("errorLabels", [])
    assert coll.find_one({"_id": "fp"}) is None


def test_with_transaction_retries_after_a_transient_commit_error(rs):
    client, coll = rs
    client.admin.command(
        "configureFailPoint", "failCommand", mode={"times": 2},
        data={"failCommands": ["commitTransaction"], "errorCode": 24},
    )
    attempts = []

    def body(s):
        attempts.append(1)
        coll.insert_one({"_id": "lt"}, session=s)

    with client.start_session() as s:
        s.with_transaction(body)
    assert len(attempts) == 3, "two commits failed with LockTimeout, the third committed"
    assert coll.find_one({"_id": "lt"}) == {"_id": "lt"}


def test_a_commit_on_a_secondary_may_be_retried(rs, initiated):  # noqa: F811
    primary = wait_for_primary(initiated)
    secondary = next(m for m in initiated if m is not primary)
    with direct(secondary) as c:
        with c.start_session() as s:
            with pytest.raises(NotPrimaryError) as e:
                c.admin.command(
                    "commitTransaction", session=s, txnNumber=1, autocommit=False,
                )
            assert e.value.details["code"] == 10107
            assert e.value.details["errorLabels"] == ["RetryableWriteError"]
    # The session API adds the driver's UnknownTransactionCommitResult to such a commit.
    client, coll = rs
    fail_command(client, failCommands=["commitTransaction"], errorCode=10107)
    with client.start_session() as s:
        s.start_transaction()
        coll.insert_one({"_id": "nwp"}, session=s)
        s.commit_transaction()  # retried once, as its RetryableWriteError label allows
    assert coll.find_one({"_id": "nwp"}) == {"_id": "nwp"}


def test_a_causal_sessions_snapshot_transaction_waits_for_its_cluster_time(rs):
    client, coll = rs
    with client.start_session(causal_consistency=True) as s:
        coll.insert_one({"_id": "cs"}, session=s)
        # The first statement carries readConcern {level: snapshot, afterClusterTime}.
        with s.start_transaction(read_concern=ReadConcern("snapshot")):
            assert coll.find_one({"_id": "cs"}, session=s) == {"_id": "cs"}
            coll.insert_one({"_id": "cs2"}, session=s)
    assert coll.find_one({"_id": "cs2"}) == {"_id": "cs2"}


def test_transaction_lifetime_limit_aborts_an_idle_transaction(rs):
    client, coll = rs
    admin = client.admin
    got = admin.command("getParameter", 1, transactionLifetimeLimitSeconds=1)
    assert got["transactionLifetimeLimitSeconds"] == 60
    with pytest.raises(OperationFailure) as e:
        admin.command("setParameter", 1, transactionLifetimeLimitSeconds=0)
    assert e.value.code == 2
    was = admin.command("setParameter", 1, transactionLifetimeLimitSeconds=1)["was"]
    assert was["transactionLifetimeLimitSeconds"] == 60
    try:
        with client.start_session() as s:
            s.start_transaction()
            coll.insert_one({"_id": "old"}, session=s)
            assert admin.command("serverStatus")["transactions"]["currentOpen"] >= 1
            # The server's reaper aborts it without a command of the transaction's: poll.
            deadline = time.time() + 30
            while admin.command("serverStatus")["transactions"]["currentOpen"] > 0:
                assert time.time() < deadline, "the reaper aborted the transaction"
                time.sleep(0.2)
            with pytest.raises(OperationFailure) as e:
                s.commit_transaction()
            assert e.value.code == 251
    finally:
        admin.command("setParameter", 1, transactionLifetimeLimitSeconds=60)
    assert coll.find_one({"_id": "old"}) is None
