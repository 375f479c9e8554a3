"""A burst of connections that wrote and then closed gets a checkpoint at once
(crates/server/src/burst.rs): the records they wrote were allocated on their threads, and until
a checkpoint moves them they keep those threads' allocator pages resident, and after it the
allocator is made to return the pages it emptied. test_load.py measures the memory under
FLASHDOC_LOAD=1; this checks, in seconds, that the checkpoint and the return are asked for after a
burst and not after ordinary coming and going."""
import socket
import time

import bson

from test_limits import logged
from test_robustness import op_msg

BURST_LINE = "a burst of connections closed"
# After the checkpoint the allocator gives the pages it emptied back at once.
RETURNED_LINE = "freed pages returned: resident"


def writers(port, n, tag):
    """`n` connections open at once, each inserting one document; then all of them close."""
    socks = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(n)]
    for i, s in enumerate(socks):
        s.sendall(op_msg({"insert": "burst", "documents": [{"_id": f"{tag}-{i}"}], "$db": "t"}, i + 1))
    for s in socks:
        header = b""
        while len(header) < 16:
            header += s.recv(16 - len(header))
        length = int.from_bytes(header[:4], "little")
        body = b""
        while len(body) < length - 16:
            body += s.recv(length - 16 - len(body))
        assert bson.decode(body[5:])["n"] == 1
    for s in socks:
        s.close()


def test_a_closed_burst_of_writers_is_checkpointed(server):
    writers(server.port, 200, "burst")
    assert logged(server, BURST_LINE, wait=10), list(server.log)[-20:]
    assert logged(server, RETURNED_LINE, wait=30), list(server.log)[-20:]
    c = server.client()
    assert c.t.burst.count_documents({}) == 200
    c.close()


def test_a_few_connections_coming_and_going_are_not_a_burst(server):
    for round_ in range(3):
        writers(server.port, 40, f"few{round_}")
        # Let the server see this round's closes before the next opens: back to back, two
        # rounds' 80 connections can be open at once for the server, which is a burst.
        time.sleep(1.5)
    time.sleep(4)
    assert not any(BURST_LINE in line for line in list(server.log))
