#!/usr/bin/env bash
# Smoke checks of the Java (sync), Go and Node drivers and mongosh through a flashdoc router
# (or, with --replset, against a three-member replica set):
# starts a local cluster (`flashdoc cluster up`: etcd, 2 shards, a router), runs each driver's
# CRUD program against it, stops the cluster. Not part of CI (it downloads the drivers from
# Maven Central, the Go module proxy and npm); scripts/test.sh runs it when
# FLASHDOC_DRIVER_SMOKE=1. mongosh runs when scripts/install-mongosh.sh has installed it.
#
# --auth (or FLASHDOC_SMOKE_AUTH=1): an authenticated cluster. Every member gets one key file
# (security.keyFile), the first user is created through the router's localhost exception, an
# unauthenticated client must get Unauthorized (13), and every driver connects with a
# user:password@ URI.
#
# --replset (or FLASHDOC_SMOKE_REPLSET=1): instead of a cluster, a three-member replica set
# (`flashdoc serve --replSet rs0`, initiated by tests/pymongo-suite/initiate.py); every driver
# connects with mongodb://a,b,c/?replicaSet=rs0 and finds the primary itself.
#
# --engine NAME (or FLASHDOC_SMOKE_ENGINE=NAME): every shard runs that storage engine
# (`cluster up --storageEngine NAME`, e.g. mmapv1, the in-place engine); the script checks each
# shard's serverStatus names it before the drivers run.
set -euo pipefail
cd "$(dirname "$0")/.."
AUTH="${FLASHDOC_SMOKE_AUTH:-0}"
ENGINE="${FLASHDOC_SMOKE_ENGINE:-}"
REPLSET="${FLASHDOC_SMOKE_REPLSET:-0}"
usage() { echo "usage: $0 [--auth] [--engine wiredTiger|inMemory|mmapv1] | --replset" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --auth) AUTH=1 ;;
    --replset) REPLSET=1 ;;
    --engine) [ $# -ge 2 ] || usage; ENGINE="$2"; shift ;;
    --engine=*) ENGINE="${1#--engine=}" ;;
    *) usage ;;
  esac
  shift
done
. scripts/ensure-toolchain.sh
cargo build --quiet -p flashdoc
BIN="$PWD/target/debug/flashdoc"
DIR="$(mktemp -d /tmp/flashdoc-drivers-XXXXXX)"
PY="${FLASHDOC_PYTHON:-$PWD/target/venv/bin/python}"
if [ "$REPLSET" = "1" ] || [ "$AUTH" = "1" ] || [ -n "$ENGINE" ]; then
  if [ ! -x "$PY" ]; then
    python3 -m venv target/venv
    target/venv/bin/pip install --quiet --disable-pip-version-check pymongo
    PY="$PWD/target/venv/bin/python"
  fi
fi
if [ "$REPLSET" = "1" ]; then
  { [ "$AUTH" = "1" ] || [ -n "$ENGINE" ]; } && usage
  port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
  printf 'storage:\n  wiredTiger:\n    engineConfig:\n      cacheSizeGB: 0.25\n' >"$DIR/member.conf"
  PIDS=(); HOSTS=(); PORTS=()
  trap 'kill ${PIDS[@]} 2>/dev/null; wait 2>/dev/null; rm -rf "$DIR"' EXIT
  for n in 0 1 2; do
    p=$(port); PORTS+=("$p"); HOSTS+=("127.0.0.1:$p"); mkdir -p "$DIR/m$n"
    "$BIN" serve -f "$DIR/member.conf" --dbpath "$DIR/m$n" --port "$p" --replSet rs0 >"$DIR/m$n.log" 2>&1 &
    PIDS+=($!)
  done
  for n in 0 1 2; do until grep -q "waiting for connections" "$DIR/m$n.log"; do sleep 0.2; done; done
  "$PY" tests/pymongo-suite/initiate.py "${PORTS[@]}"
  URI="mongodb://$(IFS=,; echo "${HOSTS[*]}")/?replicaSet=rs0"
  echo "drivers connect with $URI"
else
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
UP=("$BIN" cluster up --shards 2 --dir "$DIR/cluster" --port "$PORT")
if [ "$AUTH" = "1" ]; then
  # 756 random bytes are 1008 base64 characters: within mongod's 6..1024.
  head -c 756 /dev/urandom | base64 -w0 > "$DIR/key"
  chmod 600 "$DIR/key"
  UP+=(--keyFile "$DIR/key")
fi
if [ -n "$ENGINE" ]; then
  UP+=(--storageEngine "$ENGINE")
fi
URI=$("${UP[@]}")
trap '"$BIN" cluster down --dir "$DIR/cluster" >/dev/null; rm -rf "$DIR"' EXIT
fi
# pymongo creates the first user, checks the refusals and the shards' engine (scripts/test.sh's
# venv).
if [ "$AUTH" = "1" ]; then
  PWD_SMOKE="smoke-$(head -c 9 /dev/urandom | base64 | tr -d '+/=')"
  "$PY" - "$PORT" "$PWD_SMOKE" <<'PY'
import sys
import pymongo
from pymongo.errors import OperationFailure
port, pwd = int(sys.argv[1]), sys.argv[2]
anon = pymongo.MongoClient("127.0.0.1", port, serverSelectionTimeoutMS=20000)
# The localhost exception: the first cluster user, from loopback, with no credentials.
anon.admin.command("createUser", "smoke", pwd=pwd, roles=["root"])
for what, run in [("find", lambda: anon.app.c.find_one({})),
                  ("insert", lambda: anon.app.c.insert_one({"x": 1})),
                  ("listDatabases", lambda: anon.admin.command("listDatabases")),
                  ("createUser", lambda: anon.admin.command("createUser", "x", pwd="x-pwd-1", roles=["root"]))]:
    try:
        run()
    except OperationFailure as e:
        assert e.code == 13, (what, e.code, str(e))
    else:
        raise SystemExit(f"an unauthenticated {what} through the router was not refused")
print("unauthenticated client: 13 on find, insert, listDatabases, a second createUser")
PY
  URI="mongodb://smoke:${PWD_SMOKE}@127.0.0.1:${PORT}/?authSource=admin"
  echo "drivers connect with mongodb://smoke:***@127.0.0.1:${PORT}/?authSource=admin"
fi
if [ -n "$ENGINE" ]; then
  # Each shard (the router's shards, as listShards names them) must run the engine asked for.
  "$PY" - "$PORT" "$ENGINE" "${PWD_SMOKE:-}" <<'PY'
import sys
import pymongo
port, engine, pwd = int(sys.argv[1]), sys.argv[2], sys.argv[3]
login = {"username": "smoke", "password": pwd, "authSource": "admin"} if pwd else {}
router = pymongo.MongoClient("127.0.0.1", port, serverSelectionTimeoutMS=20000, **login)
for shard in router.admin.command("listShards")["shards"]:
    host, shard_port = shard["host"].rsplit(":", 1)
    c = pymongo.MongoClient(host, int(shard_port), directConnection=True,
                            serverSelectionTimeoutMS=20000, **login)
    name = c.admin.command("serverStatus")["storageEngine"]["name"]
    if name != engine:
        raise SystemExit(f"shard {shard['_id']} runs {name}, not {engine}")
    print(f"shard {shard['_id']} ({shard['host']}): storage engine {name}")
PY
fi
status=0
(cd tests/drivers/node && npm install --silent --no-audit --no-fund >/dev/null && node smoke.js "$URI") || status=1
(cd tests/drivers/go && go mod tidy >/dev/null 2>&1 && go run . "$URI") || status=1
(cd tests/drivers/java && mvn -q -B package >/dev/null && mvn -q -B dependency:build-classpath -Dmdep.outputFile=cp.txt >/dev/null \
  && java -cp "target/classes:$(cat cp.txt)" smoke.Smoke "$URI") || status=1
MONGOSH="$PWD/target/mongosh/node_modules/.bin/mongosh"
if [ -x "$MONGOSH" ]; then
  "$MONGOSH" "$URI" --quiet --file tests/drivers/mongosh/smoke.js || status=1
else
  echo "mongosh: not installed (bash scripts/install-mongosh.sh installs it); skipped" >&2
fi
exit $status
