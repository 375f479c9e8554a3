"""Every configuration option the server accepts does what it says (or the server refuses to
start, naming it)."""
import os
import socket
import subprocess
import time

import pytest

from conftest import Server, serve_argv


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def test_system_log_pid_file_and_verbosity(dbpath, tmp_path):
    log = tmp_path / "flashdoc.log"
    pid = tmp_path / "flashdoc.pid"
    cfg = write(tmp_path / "c.yaml", f"systemLog:\n  destination: file\n  path: {log}\n  verbosity: 1\n"
                f"processManagement:\n  pidFilePath: {pid}\n")
    s = Server(dbpath, ["--config", str(cfg)]).start()
    assert int(pid.read_text()) == s.proc.pid
    c = s.client()
    c.t.c.insert_one({"x": 1})
    c.close()
    s.stop()
    text = log.read_text()
    assert "waiting for connections" in text
    assert "connection accepted" in text
    assert ": insert" in text  # verbosity 1 logs every command
    assert not pid.exists()  # removed at a clean shutdown


def test_quiet_log_has_no_connection_lines(dbpath, tmp_path):
    log = tmp_path / "q.log"
    cfg = write(tmp_path / "c.yaml", f"systemLog:\n  destination: file\n  path: {log}\n  quiet: true\n")
    s = Server(dbpath, ["--config", str(cfg)]).start()
    c = s.client()
    c.admin.command("ping")
    c.close()
    s.stop()
    assert "connection accepted" not in log.read_text()


def test_max_incoming_connections(dbpath, tmp_path):
    cfg = write(tmp_path / "c.yaml", "net:\n  maxIncomingConnections: 2\n")
    s = Server(dbpath, ["--config", str(cfg)]).start()
    held = [socket.create_connection(("127.0.0.1", s.port)) for _ in range(2)]
    time.sleep(0.5)
    extra = socket.create_connection(("127.0.0.1", s.port))
    extra.settimeout(10)
    assert extra.recv(1) == b""  # closed by the server
    for h in held:
        h.close()
    s.stop()


def test_slow_operations_are_logged(dbpath, tmp_path):
    log = tmp_path / "s.log"
    cfg = write(tmp_path / "c.yaml", f"systemLog:\n  destination: file\n  path: {log}\n"
                "operationProfiling:\n  slowOpThresholdMs: 0\n")
    s = Server(dbpath, ["--config", str(cfg)]).start()
    c = s.client()
    c.t.c.insert_many([{"i": i} for i in range(2000)])
    list(c.t.c.find({"i": {"$gt": 5}}))
    c.close()
    s.stop()
    assert "Slow query" in log.read_text()


@pytest.mark.parametrize("yaml,key", [
    ("storage:\n  directoryPerDB: true\n", "directoryPerDB"),
    ("operationProfiling:\n  mode: sometimes\n", "sometimes"),
    ("operationProfiling:\n  slowOpSampleRate: 2\n", "slowOpSampleRate"),
    ("security:\n  keyFile: /x\n", "keyFile"),
    ("net:\n  tls:\n    mode: requireTLS\n", "certificateKeyFile"),
    ("storage:\n  flash:\n    placement: oracle\n", "storage.flash.placement"),
    ("setParameter:\n  bogus: 1\n", "bogus"),
    # Journal options with no journal to apply them to would be accepted and do nothing.
    ("storage:\n  journal:\n    enabled: false\n    commitIntervalMs: 50\n",
     "storage.journal.commitIntervalMs: set, but storage.journal.enabled is false"),
    ("storage:\n  journal:\n    enabled: false\n  wiredTiger:\n    engineConfig:\n      journalCompressor: zstd\n",
     "journalCompressor: set, but storage.journal.enabled is false"),
    ("storage:\n  engine: inMemory\n  journal:\n    commitIntervalMs: 50\n", "the inMemory engine has no journal"),
    # The dirty budget's target above its trigger would never let eviction catch up.
    ("storage:\n  wiredTiger:\n    engineConfig:\n      evictionDirtyTarget: 90\n      evictionDirtyTrigger: 20\n",
     "evictionDirtyTarget"),
])
def test_refused_options_stop_the_server_naming_them(dbpath, tmp_path, yaml, key):
    cfg = write(tmp_path / "c.yaml", yaml)
    r = subprocess.run(serve_argv("--dbpath", dbpath, "--port", "0", "--config", str(cfg)),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert key in r.stdout + r.stderr
