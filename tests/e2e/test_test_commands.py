"""mongod's test commands (enableTestCommands: configureFailPoint with failCommand), the stock
mongod.conf with its time-zone directory, and aggregate explain's shape (issue 35)."""
import datetime
import os
import shutil
import socket
import subprocess
import time

import pymongo
import pytest
from pymongo.errors import AutoReconnect, OperationFailure

from conftest import Server, serve_argv

ZONEINFO = "/usr/share/zoneinfo"


@pytest.fixture
def test_server(dbpath):
    s = Server(dbpath, ["--setParameter", "enableTestCommands=1"]).start()
    yield s
    s.stop()


def fail_point(client, mode, **data):
    return client.admin.command({"configureFailPoint": "failCommand", "mode": mode, "data": data})


def test_get_parameter_reports_enable_test_commands(server, dbpath, tmp_path):
    c = server.client()
    assert c.admin.command("getParameter", "*")["enableTestCommands"] is False
    assert c.admin.command("getParameter", 1, enableTestCommands=1)["enableTestCommands"] is False
    c.close()
    # The other spelling, and the configuration file's form.
    s = Server(str(tmp_path / "a"), ["--set-parameter", "enableTestCommands=1"]).start()
    c = s.client()
    assert c.admin.command("getParameter", "*")["enableTestCommands"] is True
    assert c.admin.command("getParameter", 1, enableTestCommands=1)["enableTestCommands"] is True
    c.close()
    s.stop()
    cfg = tmp_path / "c.yaml"
    cfg.write_text("setParameter:\n  enableTestCommands: 1\n")
    s = Server(str(tmp_path / "b"), ["--config", str(cfg)]).start()
    c = s.client()
    assert c.admin.command("getParameter", "*")["enableTestCommands"] is True
    # Startup only, as in mongod.
    with pytest.raises(OperationFailure):
        c.admin.command("setParameter", 1, enableTestCommands=0)
    c.close()
    s.stop()


def test_test_commands_do_not_exist_without_the_parameter(client):
    for cmd in ({"configureFailPoint": "failCommand", "mode": "off"}, {"sleep": 1, "millis": 1}):
        with pytest.raises(OperationFailure) as e:
            client.admin.command(cmd)
        assert e.value.code == 59 and e.value.details["codeName"] == "CommandNotFound"
        assert "no such command" in e.value.details["errmsg"]
    assert "configureFailPoint" not in client.admin.command("listCommands")["commands"]


def test_fail_command_error_code_and_times(test_server):
    c = test_server.client(retryReads=False, retryWrites=False)
    coll = c.e2e.fp
    coll.insert_one({"_id": 1})
    assert fail_point(c, {"times": 2}, failCommands=["find"], errorCode=2, errorLabels=["Mine"])["count"] == 0
    for _ in range(2):
        with pytest.raises(OperationFailure) as e:
            coll.find_one()
        assert e.value.code == 2 and e.value.details["codeName"] == "BadValue"
        assert e.value.details["errmsg"] == "Failing command via 'failCommand' failpoint"
        assert e.value.has_error_label("Mine")
    assert coll.find_one() == {"_id": 1}  # spent after two
    # Other commands are untouched; skip lets the first ones through.
    fail_point(c, {"skip": 1}, failCommands=["insert"], errorCode=11000)
    coll.insert_one({"_id": 2})
    with pytest.raises(OperationFailure) as e:
        coll.insert_one({"_id": 3})
    assert e.value.code == 11000
    assert fail_point(c, "off")["count"] == 1
    coll.insert_one({"_id": 4})
    c.close()


def test_fail_command_close_connection_block_and_app_name(test_server):
    c = test_server.client(retryReads=False, appname="victim")
    other = test_server.client(retryReads=False, appname="bystander")
    c.e2e.fp.insert_one({"_id": 1})
    fail_point(c, "alwaysOn", failCommands=["find"], closeConnection=True, appName="victim")
    assert other.e2e.fp.find_one() == {"_id": 1}  # another application is not failed
    with pytest.raises(AutoReconnect):
        c.e2e.fp.find_one()
    fail_point(c, {"times": 1}, failCommands=["find"], blockConnection=True, blockTimeMS=400)
    t0 = time.monotonic()
    assert c.e2e.fp.find_one() == {"_id": 1}
    assert time.monotonic() - t0 >= 0.35
    fail_point(c, "alwaysOn", failCommands=["insert"], writeConcernError={"code": 91, "errmsg": "x"})
    with pytest.raises(pymongo.errors.WriteConcernError):
        c.e2e.fp.insert_one({"_id": 2})
    fail_point(c, "off")
    # A bad configuration is refused, not ignored.
    with pytest.raises(OperationFailure) as e:
        fail_point(c, "alwaysOn", failCommands=["find"], notAnOption=True)
    assert e.value.code == 2
    with pytest.raises(OperationFailure) as e:
        c.admin.command("configureFailPoint", "noSuchFailPoint", mode="alwaysOn")
    assert e.value.code == 266
    c.close()
    other.close()


def test_max_time_always_time_out(test_server):
    c = test_server.client(retryReads=False)
    c.admin.command("configureFailPoint", "maxTimeAlwaysTimeOut", mode="alwaysOn")
    try:
        assert c.e2e.fp.find_one() is None  # no maxTimeMS: not timed out
        with pytest.raises(pymongo.errors.ExecutionTimeout):
            c.e2e.fp.find_one(max_time_ms=10000)
    finally:
        c.admin.command("configureFailPoint", "maxTimeAlwaysTimeOut", mode="off")
    c.close()


def stock_conf(tmp_path, zoneinfo):
    """The mongodb-org 7.0 package's mongod.conf, paths changed."""
    db = tmp_path / "db"
    db.mkdir()
    port = free_port()
    text = f"""# mongod.conf

# for documentation of all options, see:
#   http://docs.mongodb.org/manual/reference/configuration-options/

# Where and how to store data.
storage:
  dbPath: {db}
#  engine:
#  wiredTiger:

# where to write logging data.
systemLog:
  destination: file
  logAppend: true
  path: {tmp_path / "mongod.log"}

# network interfaces
net:
  port: {port}
  bindIp: 127.0.0.1


# how the process runs
processManagement:
  timeZoneInfo: {zoneinfo}

#security:

#operationProfiling:

#replication:

#sharding:

## Enterprise-Only Options:

#auditLog:
"""
    cfg = tmp_path / "mongod.conf"
    cfg.write_text(text)
    return cfg, port


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_with_config(cfg, port):
    """Starts `flashdoc serve -f cfg` (its log goes to the file the config names)."""
    proc = subprocess.Popen(serve_argv("-f", str(cfg)), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    client = pymongo.MongoClient("127.0.0.1", port, serverSelectionTimeoutMS=20000)
    return proc, client


def stop(proc):
    proc.terminate()
    proc.wait(timeout=60)


@pytest.mark.skipif(not os.path.isdir(ZONEINFO), reason="no system time-zone database")
def test_the_stock_mongod_conf_starts(tmp_path):
    cfg, port = stock_conf(tmp_path, ZONEINFO)
    proc, c = run_with_config(cfg, port)
    try:
        c.t.c.insert_one({"d": datetime.datetime(2024, 7, 1, 12, 0)})
        got = c.t.c.aggregate([{"$project": {"_id": 0, "s": {"$dateToString": {
            "date": "$d", "format": "%H:%M", "timezone": "America/New_York"}}}}]).next()
        assert got == {"s": "08:00"}
        assert c.admin.command("getCmdLineOpts")["parsed"]["processManagement"]["timeZoneInfo"] == ZONEINFO
    finally:
        c.close()
        stop(proc)
    assert "waiting for connections" in (tmp_path / "mongod.log").read_text()


@pytest.mark.skipif(not os.path.isfile(f"{ZONEINFO}/America/New_York"), reason="no system time-zone database")
def test_date_operators_use_the_time_zone_directory(tmp_path, dbpath):
    zones = tmp_path / "zones"
    (zones / "Test").mkdir(parents=True)
    shutil.copy(f"{ZONEINFO}/UTC", zones / "UTC")
    shutil.copy(f"{ZONEINFO}/America/New_York", zones / "Test" / "Eastern")
    cfg, port = stock_conf(tmp_path, zones)
    proc, c = run_with_config(cfg, port)
    try:
        c.t.c.insert_one({"d": datetime.datetime(2024, 1, 15, 12, 0)})

        def fmt(tz):
            return c.t.c.aggregate([{"$project": {"_id": 0, "s": {"$dateToString": {
                "date": "$d", "format": "%H:%M %z", "timezone": tz}}}}]).next()["s"]

        assert fmt("Test/Eastern") == "07:00 -0500"
        assert fmt("+02:00") == "14:00 +0200"
        # Only the directory's zones: the bundled database is not consulted.
        with pytest.raises(OperationFailure) as e:
            fmt("America/New_York")
        assert e.value.code == 40485
        assert 'unrecognized time zone identifier: "America/New_York"' in e.value.details["errmsg"]
    finally:
        c.close()
        stop(proc)
    # Without the directory, its private names are unknown.
    s = Server(dbpath).start()
    c = s.client()
    c.t.c.insert_one({"d": datetime.datetime(2024, 1, 15, 12, 0)})
    with pytest.raises(OperationFailure) as e:
        c.t.c.aggregate([{"$project": {"s": {"$dateToString": {"date": "$d", "timezone": "Test/Eastern"}}}}]).next()
    assert e.value.code == 40485
    c.close()
    s.stop()


def test_a_missing_time_zone_directory_is_refused(tmp_path):
    cfg, _ = stock_conf(tmp_path, tmp_path / "no-such-dir")
    r = subprocess.run(serve_argv("-f", str(cfg)), capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "processManagement.timeZoneInfo" in r.stdout + r.stderr


def test_refused_mongod_keys_name_the_key_and_the_reason(tmp_path):
    cfg = tmp_path / "c.yaml"
    # replSetName is served since stop 43 (test_replset.py); an MMAPv1-era key stays refused.
    cfg.write_text(f"storage:\n  dbPath: {tmp_path}\nreplication:\n  secondaryIndexPrefetch: all\n")
    r = subprocess.run(serve_argv("-f", str(cfg), "--port", "0"), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode != 0
    assert "replication.secondaryIndexPrefetch" in r.stdout + r.stderr
    assert "removed in MongoDB 4.2" in r.stdout + r.stderr


def test_aggregate_explain_has_mongods_shape(client):
    coll = client.e2e.explained
    coll.insert_many([{"x": i, "g": i % 3} for i in range(30)])
    coll.create_index("x")
    pipeline = [{"$match": {"x": {"$gte": 10}}}, {"$group": {"_id": "$g", "n": {"$sum": 1}}}]
    out = client.e2e.command("explain", {"aggregate": "explained", "pipeline": pipeline, "cursor": {}},
                             verbosity="executionStats")
    assert out["explainVersion"] == "1" and out["ok"] == 1.0
    assert out["command"]["aggregate"] == "explained" and "serverInfo" in out
    cursor = out["stages"][0]["$cursor"]
    assert cursor["queryPlanner"]["winningPlan"]["inputStage"]["stage"] == "IXSCAN"
    assert cursor["executionStats"]["nReturned"] == 20
    group = out["stages"][1]
    assert group["$group"] == {"_id": "$g", "n": {"$sum": 1}}
    assert group["nReturned"] == 3
    # queryPlanner verbosity: the plan only.
    out = client.e2e.command("explain", {"aggregate": "explained", "pipeline": pipeline, "cursor": {}},
                             verbosity="queryPlanner")
    assert "executionStats" not in out["stages"][0]["$cursor"]
    assert "nReturned" not in out["stages"][1]
    # aggregate's own explain option.
    out = client.e2e.command("aggregate", "explained", pipeline=pipeline, explain=True)
    assert "queryPlanner" in out["stages"][0]["$cursor"] and out["explainVersion"] == "1"
    # A pipeline the scan answers whole is explained as a find: queryPlanner at the top.
    out = client.e2e.command("explain", {"aggregate": "explained", "pipeline": [{"$match": {"x": 3}}],
                                         "cursor": {}})
    assert out["queryPlanner"]["winningPlan"]["stage"] == "FETCH"
    assert "stages" not in out
