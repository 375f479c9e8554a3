"""A real sharded cluster for the end-to-end tests: etcd, `flashdoc serve --shardsvr`
processes and `flashdoc router` processes, each with its output in a log file."""
import os
import shutil
import signal
import subprocess
import time

import pymongo

from conftest import BINARY, free_port, serve_argv


def wait_for(log, needle, proc, what, timeout=60, start_at=0):
    """Waits until `needle` is in `log` past offset `start_at` (a restarted process appends to
    its log, whose earlier run already said it)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with open(log) as f:
                f.seek(start_at)
                if needle in f.read():
                    return
        except FileNotFoundError:
            pass
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    with open(log) as f:
        tail = f.read()[-2000:]
    raise RuntimeError(f"{what} did not start (exit {proc.poll()}):\n{tail}")


class Process:
    def __init__(self, name, argv, log, ready):
        self.name, self.argv, self.log, self.ready = name, argv, log, ready
        self.proc = None

    def start(self):
        out = open(self.log, "a")
        start_at = out.tell()
        self.proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        out.close()
        wait_for(self.log, self.ready, self.proc, self.name, start_at=start_at)
        return self

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)


class Etcd(Process):
    def __init__(self, d):
        etcd = shutil.which("etcd")
        if etcd is None:
            raise RuntimeError("etcd is not installed (scripts/test.sh installs Debian's etcd-server)")
        self.port, peer = free_port(), free_port()
        super().__init__(
            "etcd",
            [etcd, "--name", "e2e", "--data-dir", os.path.join(d, "etcd"),
             "--listen-client-urls", f"http://127.0.0.1:{self.port}",
             "--advertise-client-urls", f"http://127.0.0.1:{self.port}",
             "--listen-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-cluster", f"e2e=http://127.0.0.1:{peer}"],
            os.path.join(d, "etcd.log"),
            "ready to serve client requests",
        )

    @property
    def url(self):
        return f"etcd://127.0.0.1:{self.port}"


class Shard(Process):
    def __init__(self, d, i):
        self.port = free_port()
        path = os.path.join(d, f"shard{i}")
        os.makedirs(path, exist_ok=True)
        super().__init__(
            f"shard{i}",
            serve_argv("--shardsvr", "--dbpath", path, "--port", str(self.port)),
            os.path.join(d, f"shard{i}.log"),
            "waiting for connections",
        )

    @property
    def host(self):
        return f"127.0.0.1:{self.port}"

    def client(self):
        return pymongo.MongoClient("127.0.0.1", self.port, directConnection=True, serverSelectionTimeoutMS=10000)


class RouterProc(Process):
    def __init__(self, d, etcd_url, i=0):
        self.port = free_port()
        super().__init__(
            f"router{i}",
            [BINARY, "router", "--configdb", etcd_url, "--port", str(self.port),
             "--enable-test-commands", "--balancer-interval", "1"],
            os.path.join(d, f"router{i}.log"),
            "waiting for connections",
        )

    def client(self, **kw):
        return pymongo.MongoClient("127.0.0.1", self.port, serverSelectionTimeoutMS=20000, **kw)


class Cluster:
    def __init__(self, d, shards=3):
        self.dir = d
        self.etcd = Etcd(d).start()
        self.shards = [Shard(d, i).start() for i in range(shards)]
        self.routers = [RouterProc(d, self.etcd.url).start()]
        c = self.routers[0].client()
        for i, s in enumerate(self.shards):
            c.admin.command("addShard", s.host, name=f"shard{i}")
        c.close()

    def add_router(self):
        r = RouterProc(self.dir, self.etcd.url, len(self.routers)).start()
        self.routers.append(r)
        return r

    def stop(self):
        for p in self.routers + self.shards + [self.etcd]:
            p.stop()
