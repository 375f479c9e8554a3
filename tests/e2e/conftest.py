"""Starts real `flashdoc serve` processes for the end-to-end tests."""
import collections
import os
import re
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

# The storage engine every server of the suite runs: FLASHDOC_ENGINE=mmapv1 (or pytest's
# `--engine mmapv1`) starts each one with `--storageEngine mmapv1`; unset, the default engine.
ENGINE = os.environ.get("FLASHDOC_ENGINE", "")
ENGINES = ("", "wiredTiger", "inMemory", "mmapv1")

# What the in-place engine lacks, and so the tests that need it are skipped under
# FLASHDOC_ENGINE=mmapv1 with this reason (`@pytest.mark.mmapv1_lacks("wiredTiger keys")`).
# Transactions, snapshot reads and change streams need no entry: a standalone refuses them on
# every engine, with the same codes. tests/e2e/test_mmapv1.py checks each refusal by name.
MMAPV1_LACKS = {
    "wiredTiger keys": "mmapv1 refuses the storage.wiredTiger.* settings but cacheSizeGB",
    "flash settings": "mmapv1 has no allocation policy or dirty budget (serverStatus reports them n/a)",
    "copy-on-write files": "the test damages the copy-on-write engine's journal or table files",
    "replica sets": "mmapv1 refuses --replSet by name, as MMAPv1 kept no snapshots for an oplog applier",
}

# Tests skipped by name under mmapv1, for files whose tests are parametrized by engine
# elsewhere: the skip holds only where the test's own `engine` parameter is not mmapv1.
MMAPV1_LACKS_BY_NAME = {
    # Its configuration sets storage.wiredTiger's page sizes (leafPageMax).
    "test_crash_loop.py::test_sigkill_loop_keeps_every_acknowledged_write": "wiredTiger keys",
}


def pytest_addoption(parser):
    parser.addoption("--engine", default=None, choices=ENGINES,
                     help="storage engine for every server (default: FLASHDOC_ENGINE, else the default engine)")


def pytest_configure(config):
    global ENGINE
    if config.getoption("--engine") is not None:
        ENGINE = config.getoption("--engine")
    if ENGINE not in ENGINES:
        raise pytest.UsageError(f"FLASHDOC_ENGINE={ENGINE!r}: expected one of {ENGINES[1:]}")
    config.addinivalue_line(
        "markers", "mmapv1_lacks(what): the test needs what mmapv1 lacks; "
        f"skipped under --engine mmapv1 (what: one of {sorted(MMAPV1_LACKS)})")


def pytest_collection_modifyitems(config, items):
    for item in items:
        refused = [mark.args[0] for mark in item.iter_markers("mmapv1_lacks")]
        by_name = MMAPV1_LACKS_BY_NAME.get(item.nodeid.split("[")[0])
        params = getattr(item, "callspec", None)
        if by_name and not (params and params.params.get("engine") == "mmapv1"):
            refused.append(by_name)
        for what in refused:
            if what not in MMAPV1_LACKS:
                raise pytest.UsageError(f"{item.nodeid}: mmapv1_lacks({what!r}) is not in MMAPV1_LACKS")
        if refused and ENGINE == "mmapv1":
            item.add_marker(pytest.mark.skip(reason=MMAPV1_LACKS[refused[0]]))


def engine_args():
    """The `serve` flags that choose the suite's engine (none for the default engine)."""
    return ["--storageEngine", ENGINE] if ENGINE else []


def chooses_engine(args):
    """True when serve's ARGS name an engine: the flag, or a configuration file (-f, --config)
    with a storage.engine key."""
    if any(a in ("--storageEngine", "--storage-engine") for a in args):
        return True
    for flag, path in zip(args, args[1:]):
        if flag in ("-f", "--config") and os.path.exists(path):
            with open(path) as f:
                if re.search(r"^\s+engine:", f.read(), re.M):
                    return True
    return False


def serve_argv(*args):
    """`flashdoc serve ARGS` on the suite's engine, unless ARGS choose an engine themselves."""
    return [BINARY, "serve", *args, *([] if chooses_engine(args) else engine_args())]


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
            serve_argv("--dbpath", self.dbpath, "--port", str(self.port), *self.extra_args),
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
