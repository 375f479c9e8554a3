"""Bad input over raw sockets, and many concurrent connections."""
import socket
import struct
import threading

import bson
import pymongo


def raw(server):
    s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    return s


def op_msg(doc, request_id=1, flags=0):
    body = struct.pack("<I", flags) + b"\x00" + bson.encode(doc)
    return struct.pack("<iiii", 16 + len(body), request_id, 0, 2013) + body


def read_reply(s):
    header = b""
    while len(header) < 16:
        chunk = s.recv(16 - len(header))
        if not chunk:
            return None
        header += chunk
    length, _, _, op = struct.unpack("<iiii", header)
    body = b""
    while len(body) < length - 16:
        chunk = s.recv(length - 16 - len(body))
        if not chunk:
            return None
        body += chunk
    assert op == 2013
    return bson.decode(body[5:])


def still_serving(server):
    c = server.client()
    assert c.admin.command("ping")["ok"] == 1.0
    c.close()


def test_malformed_bson_gets_an_error_reply(server):
    s = raw(server)
    good = bson.encode({"ping": 1, "$db": "admin"})
    bad = good[:-2] + b"\x07\x00"  # corrupt the last element and terminator
    body = struct.pack("<I", 0) + b"\x00" + bad
    s.sendall(struct.pack("<iiii", 16 + len(body), 1, 0, 2013) + body)
    reply = read_reply(s)
    assert reply["ok"] == 0.0 and reply["code"] == 17
    s.sendall(op_msg({"ping": 1, "$db": "admin"}, 2))
    assert read_reply(s)["ok"] == 1.0  # the connection goes on
    s.close()
    still_serving(server)


def test_wrong_length_unknown_opcode_huge_length_and_hangups(server):
    cases = [
        struct.pack("<iiii", 8, 1, 0, 2013),  # shorter than a header
        struct.pack("<iiii", 2_000_000_000, 1, 0, 2013),  # huge declared length
        struct.pack("<iiii", 20, 1, 0, 2002) + b"\0\0\0\0",  # OP_INSERT, long gone
        op_msg({"ping": 1, "$db": "admin"})[:25],  # closed mid-message
    ]
    for msg in cases:
        s = raw(server)
        s.sendall(msg)
        s.shutdown(socket.SHUT_WR)
        try:
            data = s.recv(1024)
        except ConnectionResetError:
            data = b""
        assert data == b""  # closed without a reply
        s.close()
        still_serving(server)


def test_two_hundred_concurrent_connections(server):
    errors = []

    def worker(i):
        try:
            c = pymongo.MongoClient("127.0.0.1", server.port, maxPoolSize=1, serverSelectionTimeoutMS=30000)
            coll = c["conc"]["docs"]
            for j in range(5):
                coll.insert_one({"_id": f"{i}-{j}", "w": i})
            assert coll.count_documents({"w": i}) == 5
            assert coll.find_one({"_id": f"{i}-3"})["w"] == i
            c.close()
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(200)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    c = server.client()
    assert c["conc"]["docs"].count_documents({}) == 1000
    c.close()
