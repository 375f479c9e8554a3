#!/usr/bin/env bash
# Smoke checks of the Java, Go and Node drivers through a flashdoc router: starts a local
# cluster (`flashdoc cluster up`: etcd, 2 shards, a router), runs each driver's CRUD program
# against it, stops the cluster. Not part of CI (it downloads the drivers from Maven Central,
# the Go module proxy and npm); scripts/test.sh runs it when FLASHDOC_DRIVER_SMOKE=1.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/ensure-toolchain.sh
cargo build --quiet -p flashdoc
BIN="$PWD/target/debug/flashdoc"
DIR="$(mktemp -d /tmp/flashdoc-drivers-XXXXXX)"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URI=$("$BIN" cluster up --shards 2 --dir "$DIR/cluster" --port "$PORT")
trap '"$BIN" cluster down --dir "$DIR/cluster" >/dev/null; rm -rf "$DIR"' EXIT
status=0
(cd tests/drivers/node && npm install --silent --no-audit --no-fund >/dev/null && node smoke.js "$URI") || status=1
(cd tests/drivers/go && go mod tidy >/dev/null 2>&1 && go run . "$URI") || status=1
(cd tests/drivers/java && mvn -q -B package >/dev/null && mvn -q -B dependency:build-classpath -Dmdep.outputFile=cp.txt >/dev/null \
  && java -cp "target/classes:$(cat cp.txt)" smoke.Smoke "$URI") || status=1
exit $status
