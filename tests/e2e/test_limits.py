"""The limits that keep the server up (docs/server.md, "Limits"): the pre-authentication message
bound, the unauthenticated, idle and stalled-message timeouts, maxIncomingConnections, the
pipeline stages' memory budgets (292 without allowDiskUse, $group spilling with it, 40099 for
$graphLookup) and the cap on cursors per connection. Each runs in seconds, with the limit
lowered by --setParameter or setParameter."""
import os
import socket
import struct
import tempfile
import time

import pymongo
import pytest
from pymongo.errors import OperationFailure

from conftest import Server
from test_robustness import op_msg, read_reply


def closed_within(sock, seconds):
    """Seconds until the server closed `sock` (reads return nothing), or None if it did not."""
    sock.settimeout(seconds)
    start = time.time()
    try:
        while True:
            if sock.recv(1 << 16) == b"":
                return time.time() - start
    except (socket.timeout, TimeoutError):
        return None
    except ConnectionResetError:
        return time.time() - start


def logged(server, text, wait=3.0):
    deadline = time.time() + wait
    while time.time() < deadline:
        if any(text in line for line in list(server.log)):
            return True
        time.sleep(0.1)
    return False


@pytest.fixture
def auth_server(dbpath):
    s = Server(dbpath, ["--auth", "--setParameter", "unauthenticatedConnectionTimeoutSecs=2"]).start()
    c = s.client()
    c.admin.command("createUser", "boss", pwd="s3cret", roles=["root"])
    c.close()
    yield s
    s.stop()


def connect(server):
    return socket.create_connection(("127.0.0.1", server.port), timeout=10)


def test_a_large_message_before_authentication_is_refused_unread(auth_server):
    s = connect(auth_server)
    # A header declaring 1 MB, and none of the body: closed at once, nothing awaited.
    s.sendall(struct.pack("<iiii", 1 << 20, 1, 0, 2013))
    took = closed_within(s, 1.5)
    assert took is not None and took < 1.5
    assert logged(auth_server, "before authentication")
    # A hello fits the bound; once authenticated, large messages are taken.
    s = connect(auth_server)
    s.sendall(op_msg({"hello": 1, "$db": "admin"}))
    assert read_reply(s)["ok"] == 1.0
    s.close()
    c = auth_server.client(username="boss", password="s3cret")
    c.t.big.insert_one({"x": "y" * (2 << 20)})
    assert len(c.t.big.find_one()["x"]) == 2 << 20
    c.close()


def test_an_unauthenticated_connection_times_out(auth_server):
    idle = connect(auth_server)
    partial = connect(auth_server)
    partial.sendall(b"\x10\x00\x00")  # three bytes of a header, then nothing (slow loris)
    for s in (idle, partial):
        took = closed_within(s, 6)
        assert took is not None and took < 6, "closed after unauthenticatedConnectionTimeoutSecs (2 s)"
    assert logged(auth_server, "unauthenticatedConnectionTimeoutSecs")
    # An authenticated connection is not held to it.
    c = auth_server.client(username="boss", password="s3cret", maxPoolSize=1)
    c.admin.command("ping")
    time.sleep(3)
    assert c.admin.command("ping")["ok"] == 1.0
    c.close()


def test_an_idle_connection_is_closed(dbpath):
    s = Server(dbpath, ["--setParameter", "idleConnectionTimeoutSecs=1"]).start()
    try:
        sock = connect(s)
        sock.sendall(op_msg({"ping": 1, "$db": "admin"}))
        assert read_reply(sock)["ok"] == 1.0
        took = closed_within(sock, 5)
        assert took is not None and took < 5
        assert logged(s, "idleConnectionTimeoutSecs")
        # A driver sees the closed pooled connection and opens another.
        c = s.client()
        c.admin.command("ping")
        time.sleep(2.5)
        assert c.admin.command("ping")["ok"] == 1.0
        c.close()
    finally:
        s.stop()


def test_connections_past_the_limit_are_closed_and_logged(dbpath):
    with tempfile.TemporaryDirectory() as d:
        cfg = os.path.join(d, "c.yaml")
        with open(cfg, "w") as f:
            f.write("net:\n  maxIncomingConnections: 3\n")
        s = Server(dbpath, ["--config", cfg]).start()
        try:
            held = [connect(s) for _ in range(3)]
            time.sleep(0.3)
            extra = connect(s)
            took = closed_within(extra, 5)
            assert took is not None and took < 1
            assert logged(s, "maxIncomingConnections reached")
            for h in held:
                h.sendall(op_msg({"ping": 1, "$db": "admin"}))
                assert read_reply(h)["ok"] == 1.0, "the connections within the limit go on"
                h.close()
        finally:
            s.stop()


def test_the_default_connection_limit_is_sized_and_reported(server):
    c = server.client()
    opts = c.admin.command("getCmdLineOpts")["parsed"]["net"]
    limit = opts["maxIncomingConnections"]
    assert 64 <= limit <= 65536
    conns = c.admin.command("serverStatus")["connections"]
    assert conns["current"] + conns["available"] == limit
    c.close()


@pytest.fixture
def budgets(client):
    client.t.local.insert_many([{"_id": i, "k": i % 50, "pad": "x" * 500} for i in range(2000)])
    client.t.foreign.insert_many([{"_id": i, "k": i % 50, "to": i + 1, "pad": "y" * 500} for i in range(2000)])
    yield client
    client.admin.command("setParameter", 1,
                         internalDocumentSourceGroupMaxMemoryBytes=100 << 20,
                         internalDocumentSourceLookupCacheSizeBytes=100 << 20,
                         internalDocumentSourceGraphLookupMaxMemoryBytes=100 << 20)


def test_group_past_its_budget_is_292_without_disk_use_and_spills_with_it(budgets):
    c = budgets
    pipeline = [{"$group": {"_id": "$k", "ids": {"$push": "$_id"}, "n": {"$sum": 1}}}, {"$sort": {"_id": 1}}]
    expected = list(c.t.local.aggregate(pipeline))
    assert len(expected) == 50 and all(g["n"] == 40 for g in expected)
    c.admin.command("setParameter", 1, internalDocumentSourceGroupMaxMemoryBytes=20_000)
    with pytest.raises(OperationFailure) as e:
        list(c.t.local.aggregate(pipeline, allowDiskUse=False))
    assert e.value.code == 292 and "internalDocumentSourceGroupMaxMemoryBytes" in str(e.value)
    spilled = list(c.t.local.aggregate(pipeline, allowDiskUse=True))
    assert spilled == expected
    # Without allowDiskUse, allowDiskUseByDefault (true) applies; false makes it 292.
    assert list(c.t.local.aggregate(pipeline)) == expected
    c.admin.command("setParameter", 1, allowDiskUseByDefault=False)
    try:
        with pytest.raises(OperationFailure) as e:
            list(c.t.local.aggregate(pipeline))
        assert e.value.code == 292
    finally:
        c.admin.command("setParameter", 1, allowDiskUseByDefault=True)


def test_lookup_union_and_graph_lookup_past_their_budgets(budgets):
    c = budgets
    lookup = [{"$lookup": {"from": "foreign", "localField": "k", "foreignField": "k", "as": "m"}}, {"$limit": 1}]
    union = [{"$unionWith": "foreign"}, {"$count": "n"}]
    graph = [{"$limit": 1}, {"$graphLookup": {"from": "foreign", "startWith": "$_id", "connectFromField": "to",
                                              "connectToField": "_id", "as": "chain"}}]
    assert len(list(c.t.local.aggregate(lookup))[0]["m"]) == 40
    assert list(c.t.local.aggregate(union))[0]["n"] == 4000
    assert len(list(c.t.local.aggregate(graph))[0]["chain"]) == 2000
    c.admin.command("setParameter", 1, internalDocumentSourceLookupCacheSizeBytes=100_000,
                    internalDocumentSourceGraphLookupMaxMemoryBytes=100_000)
    for pipeline in (lookup, union):
        with pytest.raises(OperationFailure) as e:
            list(c.t.local.aggregate(pipeline, allowDiskUse=False))
        assert e.value.code == 292 and "internalDocumentSourceLookupCacheSizeBytes" in str(e.value)
    with pytest.raises(OperationFailure) as e:
        list(c.t.local.aggregate(graph))
    assert e.value.code == 40099


def test_budgets_refuse_nonsense(client):
    for name in ("internalDocumentSourceGroupMaxMemoryBytes", "unauthenticatedConnectionTimeoutSecs",
                 "maxCursorsPerConnection"):
        with pytest.raises(OperationFailure) as e:
            client.admin.command("setParameter", 1, **{name: 0})
        assert e.value.code == 2, name
    with pytest.raises(OperationFailure):
        client.admin.command("setParameter", 1, idleConnectionTimeoutSecs=-1)
    got = client.admin.command("getParameter", 1, internalDocumentSourceGroupMaxMemoryBytes=1,
                               maxCursorsPerConnection=1)
    assert got["internalDocumentSourceGroupMaxMemoryBytes"] == 100 << 20
    assert got["maxCursorsPerConnection"] == 1000


def test_cursors_per_connection_are_capped(server):
    c = server.client(maxPoolSize=1)
    c.t.c.insert_many([{"i": i} for i in range(10)])
    c.admin.command("setParameter", 1, maxCursorsPerConnection=3)
    cursors = [c.t.c.find(batch_size=2) for _ in range(3)]
    for cur in cursors:
        next(cur)  # the find runs; its cursor stays open for getMore
    with pytest.raises(OperationFailure) as e:
        next(c.t.c.find(batch_size=2))
    assert e.value.code == 146 and "maxCursorsPerConnection" in str(e.value)
    # An exhausted cursor makes room; a killed one too.
    assert len(list(cursors[0])) == 9
    cursors[1].close()
    more = [c.t.c.find(batch_size=2) for _ in range(2)]
    for cur in more:
        next(cur)
    c.close()
