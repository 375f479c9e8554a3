"""No request can crash or stall the server: the wave-1 crashers get clean errors and the
server keeps serving; error codes as mongod's."""
import socket
import struct

import bson
import pymongo
import pytest
from pymongo.errors import OperationFailure, WriteError

from test_robustness import op_msg, raw, read_reply, still_serving

LONG = ".".join(["a"] * 5000)


def test_deep_paths_are_refused_and_the_server_keeps_serving(coll):
    coll.insert_one({"_id": 1, "a": []})
    for op in ("$set", "$unset", "$push"):
        with pytest.raises(WriteError) as e:
            coll.update_one({"_id": 1}, {op: {LONG: 1}})
        assert e.value.code == 15, op
    with pytest.raises(WriteError) as e:
        coll.update_one({LONG: 1}, {"$set": {"x": 1}}, upsert=True)
    assert e.value.code == 5729100
    with pytest.raises(OperationFailure) as e:
        list(coll.aggregate([{"$addFields": {LONG: 1}}]))
    assert e.value.code == 15
    for parts in (50_000, 1000):
        with pytest.raises(OperationFailure) as e:
            list(coll.find({}, {".".join(["a"] * parts): 1}))
        assert e.value.code == 15
    assert coll.find_one({"_id": 1}) == {"_id": 1, "a": []}


def test_a_document_too_deep_to_store_is_15_and_over_16mb_is_10334(coll):
    d = {"x": 1}
    for _ in range(180):
        d = {"a": d}
    with pytest.raises(WriteError) as e:
        coll.insert_one(d)
    assert e.value.code == 15
    with pytest.raises((WriteError, OperationFailure)) as e:
        coll.insert_one({"big": "x" * (16 * 1024 * 1024)})
    assert e.value.code == 10334


def test_write_counts_are_int32_on_the_wire(server):
    s = raw(server)
    s.sendall(op_msg({"insert": "c", "documents": [{"_id": 1}, {"_id": 2}], "$db": "t"}))
    r = read_reply(s)
    assert r["n"] == 2
    s.sendall(op_msg({"update": "c", "updates": [{"q": {}, "u": {"$set": {"x": 1}}, "multi": True}], "$db": "t"}, 2))
    body = _raw_reply_bytes(s)
    doc = bson.decode(body[5:], codec_options=bson.CodecOptions(document_class=dict))
    assert doc["nModified"] == 2
    # The element types: 0x10 is int32 (mongod's), 0x12 would be int64.
    assert b"\x10n\x00" in body and b"\x10nModified\x00" in body
    s.close()


def _raw_reply_bytes(s):
    header = b""
    while len(header) < 16:
        header += s.recv(16 - len(header))
    length = struct.unpack("<i", header[:4])[0]
    body = b""
    while len(body) < length - 16:
        body += s.recv(length - 16 - len(body))
    return body


def test_two_body_sections_are_40430(server):
    s = raw(server)
    body = struct.pack("<I", 0)
    for _ in range(2):
        body += b"\x00" + bson.encode({"ping": 1, "$db": "admin"})
    s.sendall(struct.pack("<iiii", 16 + len(body), 1, 0, 2013) + body)
    assert read_reply(s)["code"] == 40430
    s.close()
    still_serving(server)


def test_many_sequence_sections_do_not_freeze_the_server(server):
    # ~100 000 one-byte identifiers: once quadratic on the async workers.
    body = struct.pack("<I", 0) + b"\x00" + bson.encode({"insert": "c", "$db": "t"})
    for i in range(100_000):
        ident = b"s%d\x00" % i
        body += b"\x01" + struct.pack("<i", 4 + len(ident)) + ident
    s = raw(server)
    s.settimeout(60)
    s.sendall(struct.pack("<iiii", 16 + len(body), 1, 0, 2013) + body)
    still_serving(server)  # other connections are served while it is parsed
    assert read_reply(s) is not None
    s.close()


def test_change_stream_on_a_standalone_is_40573(client):
    with pytest.raises(OperationFailure) as e:
        client.t.c.watch().next()
    assert e.value.code == 40573


def test_unknown_and_unimplemented_options_are_refused(coll):
    with pytest.raises(OperationFailure) as e:
        coll.database.command({"find": "things", "bogus": 1})
    assert e.value.code == 40415
    with pytest.raises(OperationFailure) as e:
        coll.database.command({"find": "things", "term": 1})
    assert e.value.code == 238
    with pytest.raises(OperationFailure) as e:
        coll.database.command({"find": "things", "readConcern": {"level": "snapshot"}})
    assert e.value.code == 238


def test_invalid_utf8_is_refused_with_a_clear_error(server):
    s = raw(server)
    doc = bson.encode({"insert": "c", "$db": "t", "documents": [{"_id": 1, "name": "xx"}]})
    bad = doc.replace(b"xx", b"\xff\xfe")
    s.sendall(struct.pack("<iiii", 16 + 5 + len(bad), 1, 0, 2013) + struct.pack("<I", 0) + b"\x00" + bad)
    r = read_reply(s)
    assert r["ok"] == 0.0 and "UTF-8" in r["errmsg"]
    s.close()
    still_serving(server)


def test_read_concern_is_checked_on_every_command(coll):
    coll.insert_one({"_id": 1})
    db = coll.database
    for cmd in (
        {"aggregate": coll.name, "pipeline": [], "cursor": {}},
        {"count": coll.name},
        {"distinct": coll.name, "key": "_id"},
    ):
        with pytest.raises(OperationFailure) as e:
            db.command({**cmd, "readConcern": {"level": "snapshot"}})
        assert e.value.code == 238, cmd
        db.command({**cmd, "readConcern": {"level": "local"}})


def test_lookup_cannot_read_stored_credentials(client):
    admin = client.admin
    admin.command("createUser", "lookupvictim", pwd="secret-pw", roles=[])
    admin.notes.insert_one({"_id": 1, "u": "admin.lookupvictim"})
    with pytest.raises(OperationFailure) as e:
        list(admin.notes.aggregate([
            {"$lookup": {"from": "system.users", "localField": "u", "foreignField": "_id", "as": "creds"}}
        ]))
    assert e.value.code == 13
    admin.command("dropUser", "lookupvictim")
    admin.notes.drop()
