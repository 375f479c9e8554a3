"""Flash mode is the default: `flashdoc serve` with no configuration runs flashdoc's co-design
for flash, and `storage.flash.mode: off` (or `--flash-mode off`) gives WiredTiger's behaviour
back. serverStatus().flash reports the effective values."""
import subprocess

import pytest

from conftest import Server, serve_argv

FLASH_KEYS = {"mode", "allocation", "dirtyTarget", "dirtyTrigger", "placement", "hints",
              "reachesDevice", "streams", "trim"}


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def flash_status(server):
    c = server.client()
    try:
        return c.admin.command("serverStatus")["flash"]
    finally:
        c.close()


@pytest.mark.mmapv1_lacks("flash settings")
def test_serve_with_no_configuration_runs_flash_mode(dbpath):
    s = Server(dbpath).start()
    try:
        f = flash_status(s)
        assert set(f) == FLASH_KEYS, f
        # If the default drifts back to WiredTiger's, this fails.
        assert f["mode"] == "flash"
        assert f["placement"] != "none"
        assert f["allocation"] == "sweep"
        assert (f["dirtyTarget"], f["dirtyTrigger"]) == (50, 80)
        assert f["hints"] in ("write-streams", "rw-hint", "none")
        # Through a file system a write-life hint never reaches the device's placement.
        assert f["reachesDevice"] is False
        assert f["streams"] == 8
        assert f["trim"] is False
        c = s.client()
        c.e2e.things.insert_many([{"_id": i, "v": "x" * 100} for i in range(100)])
        assert c.e2e.things.count_documents({}) == 100
        c.close()
    finally:
        s.stop()


def test_the_startup_log_says_which_mode_runs(dbpath, tmp_path):
    log = tmp_path / "server.log"
    cfg = write(tmp_path / "c.yaml", f"systemLog:\n  destination: file\n  path: {log}\n")
    s = Server(dbpath, ["--config", str(cfg)]).start()
    s.stop()
    text = log.read_text()
    assert "storage.flash.mode: flash" in text, text[-2000:]
    assert '"placement":"filelog"' in text or '"placement":' in text


@pytest.mark.mmapv1_lacks("flash settings")
@pytest.mark.parametrize("how", ["config", "flag"])
def test_mode_off_reports_wiredtigers_baseline(dbpath, tmp_path, how):
    if how == "config":
        args = ["--config", str(write(tmp_path / "c.yaml", "storage:\n  flash:\n    mode: off\n"))]
    else:
        args = ["--flash-mode", "off"]
    s = Server(dbpath, args).start()
    try:
        f = flash_status(s)
        assert f == {"mode": "off", "allocation": "best", "dirtyTarget": 5, "dirtyTrigger": 20,
                     "placement": "none", "hints": "none", "reachesDevice": False,
                     "streams": 8, "trim": False}
    finally:
        s.stop()


@pytest.mark.mmapv1_lacks("wiredTiger keys")
def test_an_explicit_key_overrides_the_mode(dbpath, tmp_path):
    cfg = write(tmp_path / "c.yaml",
                "storage:\n  flash:\n    mode: off\n    placement: filelog\n"
                "  wiredTiger:\n    engineConfig:\n      evictionDirtyTarget: 50\n"
                "      evictionDirtyTrigger: 80\n")
    s = Server(dbpath, ["--config", str(cfg)]).start()
    try:
        f = flash_status(s)
        assert (f["mode"], f["placement"], f["allocation"]) == ("off", "filelog", "best")
        assert (f["dirtyTarget"], f["dirtyTrigger"]) == (50, 80)
    finally:
        s.stop()


def test_the_in_memory_engine_reports_na(dbpath):
    s = Server(dbpath, ["--storage-engine", "inMemory"]).start()
    try:
        f = flash_status(s)
        assert f["mode"] == "flash"
        for k in ("allocation", "dirtyTarget", "dirtyTrigger", "placement", "hints", "streams",
                  "trim"):
            assert f[k] == "n/a", (k, f)
        assert f["reachesDevice"] is False
    finally:
        s.stop()


@pytest.mark.parametrize("args,says", [
    (["--flash-mode", "fast"], "expected flash or off"),
])
def test_a_bad_mode_is_refused(dbpath, args, says):
    r = subprocess.run(serve_argv("--dbpath", dbpath, "--port", "0", *args),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert says in r.stdout + r.stderr


def test_a_bad_mode_in_the_file_is_refused(dbpath, tmp_path):
    cfg = write(tmp_path / "c.yaml", "storage:\n  flash:\n    mode: fast\n")
    r = subprocess.run(serve_argv("--dbpath", dbpath, "--port", "0", "--config", str(cfg)),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    out = r.stdout + r.stderr
    assert "mode" in out and "fast" in out, out
