"""Starts real `flashdoc serve` processes for the end-to-end tests."""
import collections
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time

import pymongo
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BINARY = os.environ.get("FLASHDOC_BIN", os.path.join(ROOT, "target", "debug", "flashdoc"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_port_run(n):
    """A port P such that P .. P+n-1 are all free now (for `cluster up`, whose shards take the
    ports after the router's)."""
    for _ in range(100):
        base = free_port()
        socks = []
        try:
            for p in range(base, base + n):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError(f"no run of {n} free ports")


class Server:
    """One server process on a database directory; can be stopped, killed and restarted."""

    def __init__(self, dbpath, extra_args=()):
        self.dbpath = dbpath
        self.port = free_port()
        self.extra_args = list(extra_args)
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen(
            [BINARY, "serve", "--dbpath", self.dbpath, "--port", str(self.port), *self.extra_args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        deadline = time.time() + 60
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if "waiting for connections" in line:
                # Keep reading the log: a pipe nobody drains fills up (64 KB, about 900
                # connection lines) and the server blocks writing to it.
                self.log = collections.deque(maxlen=1000)
                threading.Thread(target=self._drain, args=(self.proc, self.log), daemon=True).start()
                return self
            if line == "" and self.proc.poll() is not None:
                break
        raise RuntimeError(f"server did not start (exit {self.proc.poll()})")

    @staticmethod
    def _drain(proc, log):
        for line in proc.stdout:
            log.append(line)

    def client(self, **kw):
        return pymongo.MongoClient("127.0.0.1", self.port, serverSelectionTimeoutMS=10000, **kw)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=60)
        return self.proc.returncode

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)


@pytest.fixture
def dbpath():
    with tempfile.TemporaryDirectory(prefix="flashdoc-e2e-") as d:
        yield d


@pytest.fixture
def server(dbpath):
    s = Server(dbpath).start()
    yield s
    s.stop()


@pytest.fixture
def client(server):
    c = server.client()
    yield c
    c.close()


@pytest.fixture
def coll(client):
    return client["e2e"]["things"]
