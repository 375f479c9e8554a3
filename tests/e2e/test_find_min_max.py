"""find's `min`, `max`, `returnKey` and `showRecordId`, as mongod answers them (issue 35)."""
import pytest
from bson import Int64
from pymongo import ASCENDING, DESCENDING
from pymongo.errors import OperationFailure


@pytest.fixture
def docs(coll):
    coll.insert_many([{"_id": j, "j": j, "k": 9 - j} for j in range(10)])
    coll.create_index([("j", ASCENDING)])
    coll.create_index([("j", ASCENDING), ("k", DESCENDING)])
    return coll


def js(cursor):
    return [d["j"] for d in cursor]


def test_min_is_inclusive_and_max_exclusive_on_the_hinted_index(docs):
    assert js(docs.find().min([("j", 3)]).hint("j_1")) == list(range(3, 10))
    assert js(docs.find().max([("j", 3)]).hint("j_1")) == [0, 1, 2]
    assert js(docs.find().min([("j", 2)]).max([("j", 5)]).hint([("j", 1)])) == [2, 3, 4]
    # A descending field: the bounds are in the index's order; the filter and sort still apply.
    got = docs.find({"j": {"$ne": 4}}, sort=[("j", -1)]).min([("j", 3), ("k", 99)]) \
        .max([("j", 6), ("k", 99)]).hint("j_1_k_-1")
    assert js(got) == [5, 3]


def test_min_max_errors_are_mongods(docs):
    def code(cursor):
        with pytest.raises(OperationFailure) as e:
            list(cursor)
        return e.value.code

    db = docs.database
    no_hint = db.command("find", docs.name, min={"j": 1}, check=False)
    assert no_hint["code"] == 51173 and no_hint["codeName"] == "Location51173"
    assert code(docs.find().min([("k", 3), ("j", 3)]).hint("j_1_k_-1")) == 51174
    assert code(docs.find().max([("k", 3)]).hint("j_1")) == 51174
    assert code(docs.find().min([("j", 5)]).max([("j", 2)]).hint("j_1")) == 51175
    assert code(docs.find().min([("j", 5)]).max([("j", 6), ("k", 1)]).hint("j_1")) == 51176


def test_return_key_and_show_record_id(docs):
    keys = list(docs.find({"j": {"$lt": 3}}, return_key=True).hint("j_1_k_-1"))
    assert keys == [{"j": 0, "k": 9}, {"j": 1, "k": 8}, {"j": 2, "k": 7}]
    # No index read: an empty key, as mongod.
    assert list(docs.find({"_id": 1}, return_key=True).hint({"$natural": 1})) == [{}]
    shown = list(docs.find({"j": {"$lt": 2}}, {"j": 1}, show_record_id=True))
    assert [sorted(d) for d in shown] == [["$recordId", "_id", "j"]] * 2
    assert all(isinstance(d["$recordId"], Int64) for d in shown)
    assert len({d["$recordId"] for d in shown}) == 2
    # With returnKey, the key alone.
    both = list(docs.find({"j": 0}, return_key=True, show_record_id=True).hint("j_1"))
    assert both == [{"j": 0}]


def test_exhaust_cursor_streams_every_batch_on_one_connection(server, coll):
    from pymongo import CursorType
    coll.insert_many([{"i": i} for i in range(250)])
    client = server.client(maxPoolSize=1)
    try:
        got = [d["i"] for d in client[coll.database.name][coll.name].find(
            {}, cursor_type=CursorType.EXHAUST, batch_size=20, sort=[("i", 1)])]
        assert got == list(range(250))
        # The connection went back to the pool and still answers.
        assert client[coll.database.name][coll.name].count_documents({}) == 250
    finally:
        client.close()


def _op_msg(sock, request_id, flags, command):
    import struct
    import bson
    body = struct.pack("<IB", flags, 0) + bson.encode(command)
    sock.sendall(struct.pack("<iiii", 16 + len(body), request_id, 0, 2013) + body)


def _read_msg(sock):
    import struct
    import bson

    def exactly(n):
        buf = b""
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            assert chunk, "the server closed the connection"
            buf += chunk
        return buf
    length, request_id, response_to, _ = struct.unpack("<iiii", exactly(16))
    rest = exactly(length - 16)
    flags = struct.unpack("<I", rest[:4])[0]
    return request_id, response_to, flags, bson.decode(rest[5:])


def test_exhaust_get_more_replies_are_flagged_more_to_come(server, coll):
    import socket
    coll.insert_many([{"i": i} for i in range(7)])
    exhaust_allowed, more_to_come = 1 << 16, 1 << 1
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        db = coll.database.name
        _op_msg(sock, 1, 0, {"find": coll.name, "batchSize": 2, "$db": db})
        _, _, _, first = _read_msg(sock)
        cursor_id = first["cursor"]["id"]
        assert cursor_id != 0 and len(first["cursor"]["firstBatch"]) == 2
        _op_msg(sock, 2, exhaust_allowed,
                {"getMore": cursor_id, "collection": coll.name, "batchSize": 2, "$db": db})
        batches, answering = [], 2
        while True:
            request_id, response_to, flags, reply = _read_msg(sock)
            assert response_to == answering, "each reply answers the one before it"
            answering = request_id
            batches.append([d["i"] for d in reply["cursor"]["nextBatch"]])
            if not flags & more_to_come:
                assert reply["cursor"]["id"] == 0
                break
        assert batches == [[2, 3], [4, 5], [6]]
