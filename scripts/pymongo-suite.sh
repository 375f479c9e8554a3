#!/usr/bin/env bash
# pymongo 4.20.0's own test suite (28 of its files, unmodified) against a fresh
# `flashdoc serve --setParameter enableTestCommands=1` (issue 35).
#
#   scripts/pymongo-suite.sh [FLASHDOC_BIN]      (default: target/debug/flashdoc)
#   REPLSET=1 scripts/pymongo-suite.sh [FLASHDOC_BIN]   against a three-member replica set
#   CLUSTER=1 scripts/pymongo-suite.sh [FLASHDOC_BIN]   through the router of a cluster whose
#     two shards are three-member replica sets (`cluster up --shards 2 --replicas 3`;
#     CLUSTER_REPLICAS=1: single-server shards, output target/pymongo-suite-cluster1.*)
#
# Installs, once, under ~/.cache/flashdoc/ (or $FLASHDOC_CACHE): a virtual environment with
# pymongo==4.20.0, pytest and pytest-asyncio, and pymongo 4.20.0's source distribution,
# unpacked. Writes target/pymongo-suite.txt (pytest's output) and target/pymongo-suite.json
# (passed/failed/skipped/errors, skips by reason, elapsed seconds). Exits non-zero if a test
# fails or errors that tests/pymongo-suite/expected-failures.txt does not list, or if a
# test it lists passes (unless its line's comment starts with "flaky").
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=${1:-$ROOT/target/debug/flashdoc}
VERSION=4.20.0
CACHE=${FLASHDOC_CACHE:-$HOME/.cache/flashdoc}/pymongo-$VERSION
VENV=$CACHE/venv
SRC=$CACHE/pymongo-$VERSION
# REPLSET=1: against a three-member replica set instead of a standalone, with its own list
# of expected failures and its own output files.
REPLSET=${REPLSET:-}
# CLUSTER=1: through a router, the shards replica sets; its own list and output files.
CLUSTER=${CLUSTER:-}
CLUSTER_REPLICAS=${CLUSTER_REPLICAS:-3}
MODE=${REPLSET:+-replset}${CLUSTER:+-cluster}
if [ -n "$CLUSTER" ] && [ "$CLUSTER_REPLICAS" != 3 ]; then MODE=$MODE$CLUSTER_REPLICAS; fi
EXPECTED=$ROOT/tests/pymongo-suite/expected-failures$MODE.txt
OUT=$ROOT/target/pymongo-suite$MODE
# PYMONGO_FILES="change_stream cursor": only these files (the verdict then covers only them).
# PYMONGO_PYTEST_ARGS="--durations=20": more arguments for pytest.
# PYMONGO_FLAKE_BUDGET=N: up to N unlisted failures tolerated (see the verdict below).
FILES=${PYMONGO_FILES:-"binary bulk change_stream collation collection collection_management command_logging
  command_monitoring comment common crud_unified crud_v1 cursor custom_types database decimal128
  examples logger operations raw_bson read_concern read_preferences results run_command
  transactions_unified versioned_api versioned_api_integration write_concern"}

mkdir -p "$CACHE" "$ROOT/target"
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import pymongo, pytest, pytest_asyncio; assert pymongo.version == '$VERSION'" 2>/dev/null; then
  echo "== pymongo suite: a virtual environment with pymongo==$VERSION, pytest, pytest-asyncio"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "pymongo==$VERSION" pytest pytest-asyncio
fi
if [ ! -f "$SRC/test/__init__.py" ]; then
  echo "== pymongo suite: pymongo $VERSION's source distribution"
  rm -rf "$CACHE/sdist" "$SRC"
  "$VENV/bin/pip" download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
    --dest "$CACHE/sdist" "pymongo==$VERSION"
  tar -xzf "$CACHE/sdist/pymongo-$VERSION.tar.gz" -C "$CACHE"
fi

free_port() {
  "$VENV/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
DB=$(mktemp -d "${TMPDIR:-/tmp}/flashdoc-pymongo.XXXXXX")
SERVERS=()
trap 'kill "${SERVERS[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$DB"' EXIT
# start_server N [ARGS...]: a `flashdoc serve` on a free port, data in $DB/N, log in
# $OUT.server.N.log; sets PORT.
start_server() {
  local n=$1; shift
  PORT=$(free_port)
  mkdir -p "$DB/$n"
  "$BIN" serve --dbpath "$DB/$n" --port "$PORT" --setParameter enableTestCommands=1 "$@" \
    >"$OUT.server.$n.log" 2>&1 &
  SERVERS+=($!)
  for _ in $(seq 1 100); do
    grep -q "waiting for connections" "$OUT.server.$n.log" && return 0
    kill -0 "${SERVERS[-1]}" 2>/dev/null || break
    sleep 0.1
  done
  cat "$OUT.server.$n.log"; echo "flashdoc serve did not start" >&2; exit 1
}

if [ -n "$CLUSTER" ]; then
  # etcd, two shards of CLUSTER_REPLICAS members each and a router on consecutive free ports.
  PORT=$("$VENV/bin/python" -c '
import socket, sys
n = int(sys.argv[1])
for _ in range(100):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); base = s.getsockname()[1]; s.close()
    try:
        held = []
        for p in range(base, base + n):
            t = socket.socket(); held.append(t); t.bind(("127.0.0.1", p))
        print(base); break
    except OSError:
        pass
    finally:
        for t in held: t.close()' $((1 + 2 * CLUSTER_REPLICAS)))
  "$BIN" cluster up --shards 2 --replicas "$CLUSTER_REPLICAS" --enable-test-commands --dir "$DB/cluster" \
    --port "$PORT" >"$OUT.cluster-up.log" 2>&1 || { cat "$OUT.cluster-up.log"; exit 1; }
  trap '"$BIN" cluster down --dir "$DB/cluster" >/dev/null 2>&1 || true; rm -rf "$DB"' EXIT
elif [ -n "$REPLSET" ]; then
  # Three members of set rs0 (small caches, as the e2e tests run them), initiated from the
  # first; the suite connects to the first and finds the set from its hello.
  PORTS=()
  printf 'storage:\n  wiredTiger:\n    engineConfig:\n      cacheSizeGB: 0.25\n' >"$DB/member.conf"
  for n in 0 1 2; do
    start_server "$n" --replSet rs0 -f "$DB/member.conf"
    PORTS+=("$PORT")
  done
  "$VENV/bin/python" "$ROOT/tests/pymongo-suite/initiate.py" "${PORTS[@]}"
  PORT=${PORTS[0]}
else
  start_server 0
fi

ARGS=()
for f in $FILES; do ARGS+=("test/test_$f.py"); done
echo "== pymongo suite: ${#ARGS[@]} files against flashdoc on port $PORT"
start=$(date +%s)
set +e
(cd "$SRC" && DB_IP=127.0.0.1 DB_PORT=$PORT "$VENV/bin/python" -m pytest -q -p no:cacheprovider -rA ${PYMONGO_PYTEST_ARGS:-} "${ARGS[@]}") >"$OUT.txt" 2>&1
set -e
elapsed=$(($(date +%s) - start))
tail -n 1 "$OUT.txt"

# The summary, and the verdict against the expected failures.
"$VENV/bin/python" - "$OUT.txt" "$OUT.json" "$EXPECTED" "$elapsed" <<'EOF'
import collections, json, os, re, sys

out, summary_path, expected_path, elapsed = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
text = open(out).read()
last = text.strip().splitlines()[-1] if text.strip() else ""
counts = {k: 0 for k in ("passed", "failed", "skipped", "errors")}
for n, what in re.findall(r"(\d+) (passed|failed|skipped|errors?)\b", last):
    counts["errors" if what.startswith("error") else what] = int(n)
skips = collections.Counter()
for n, reason in re.findall(r"^SKIPPED \[(\d+)\] [^:]+:\d+: (.*)$", text, re.M):
    skips[reason] += int(n)
bad = re.findall(r"^(?:FAILED|ERROR) (\S+)", text, re.M)
expected, flaky = set(), set()
for line in open(expected_path):
    test, _, why = line.partition("#")
    test = test.strip()
    if test:
        expected.add(test)
        # "# flaky: …" marks a test that may pass or fail (its reason says why).
        if why.strip().startswith("flaky"):
            flaky.add(test)
unexpected = sorted(set(bad) - expected)
# The list only shrinks on purpose: a listed test that now passes fails the run until its
# line is removed, so the list never hides a fixed test or a test that cannot fail; only
# the tests marked flaky may pass.
now_pass = sorted((expected - flaky) & set(re.findall(r"^PASSED (\S+)", text, re.M)))
ran = counts["passed"] + counts["failed"]
summary = dict(counts, elapsed_seconds=elapsed, pass_rate=round(counts["passed"] / ran, 4) if ran else None,
               skips_by_reason=dict(skips.most_common()), unexpected_failures=unexpected,
               expected_failures_that_passed=now_pass)
json.dump(summary, open(summary_path, "w"), indent=2)
print(f"pymongo suite: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped, "
      f"{counts['errors']} errors in {elapsed}s; {len(unexpected)} unexpected failures")
for t in unexpected:
    print(f"  unexpected: {t}")
for t in now_pass:
    print(f"  listed as failing but passes (remove it from {expected_path}): {t}")
# PYMONGO_FLAKE_BUDGET=N (the replica-set run): up to N failures the list does not name are
# tolerated as timing flakes of a three-member set on a loaded machine, and a listed test
# that passes is reported, not fatal; more than N fail the run.
budget = int(os.environ.get("PYMONGO_FLAKE_BUDGET", "0"))
if budget:
    print(f"  flake budget {budget}: {len(unexpected)} unlisted failures tolerated up to it")
if not last or ran == 0 or len(unexpected) > budget or (now_pass and not budget):
    sys.exit(1)
EOF
