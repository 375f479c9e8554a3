#!/usr/bin/env bash
# YCSB-A over the wire (the workload crate's driver, the official Rust driver underneath) on a
# three-member replica set with w: 1 and with w: "majority", beside a standalone, in one run:
# the three targets alternate (standalone, w1, majority, standalone, …) for REPS rounds on the
# same machine; prints medians and ratios to the standalone and writes them as JSON (issue 36's
# benchmark; not a test). Usage:
#   bash scripts/replset-ycsb.sh [records] [ops] [threads] [reps] [out.json]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/ensure-toolchain.sh
RECORDS=${1:-20000}; OPS=${2:-40000}; THREADS=${3:-4}; REPS=${4:-3}
OUT=${5:-docs/results/replset/ycsb-a.json}
cargo build --release --quiet -p flashdoc
F="$PWD/target/release/flashdoc"
PY=${FLASHDOC_PYTHON:-$PWD/target/venv/bin/python}
DIR="$(mktemp -d /tmp/flashdoc-replset-ycsb-XXXXXX)"
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# Every server gets the same engine settings: the members' small test cache, for the
# standalone too, so that the rows differ in replication only.
printf 'storage:\n  wiredTiger:\n    engineConfig:\n      cacheSizeGB: 0.25\n' >"$DIR/flashdoc.conf"
PIDS=()
trap 'kill ${PIDS[@]} 2>/dev/null; wait 2>/dev/null; rm -rf "$DIR"' EXIT
start() { # name port [args…]
  local name=$1 p=$2; shift 2
  mkdir -p "$DIR/$name"
  "$F" serve -f "$DIR/flashdoc.conf" --dbpath "$DIR/$name" --port "$p" "$@" >"$DIR/$name.log" 2>&1 &
  PIDS+=($!)
}
SP=$(port); start standalone "$SP"
MP=(); for n in 0 1 2; do p=$(port); MP+=("$p"); start "member$n" "$p" --replSet rs0; done
for f in standalone member0 member1 member2; do until grep -q "waiting for connections" "$DIR/$f.log"; do sleep 0.2; done; done
"$PY" tests/pymongo-suite/initiate.py "${MP[@]}"
SET="mongodb://127.0.0.1:${MP[0]},127.0.0.1:${MP[1]},127.0.0.1:${MP[2]}/ycsb?replicaSet=rs0"
declare -A TARGET=(
  [standalone]="mongodb://127.0.0.1:$SP/ycsb?directConnection=true"
  [set-w1]="$SET&w=1"
  [set-majority]="$SET&w=majority"
)
ORDER=(standalone set-w1 set-majority)
ycsb() { "$F" bench ycsb --target "$1" --records "$RECORDS" --threads "$THREADS" --quiet "${@:2}" >/dev/null; }
# One load per deployment (the set's two targets share its data).
ycsb "${TARGET[standalone]}" --phase load
ycsb "${TARGET[set-majority]}" --phase load
for rep in $(seq 1 "$REPS"); do
  for t in "${ORDER[@]}"; do
    ycsb "${TARGET[$t]}" --phase run --ops "$OPS" --json "$DIR/$t-$rep.json"
  done
done
mkdir -p "$(dirname "$OUT")"
"$PY" - "$DIR" "$OUT" "$RECORDS" "$OPS" "$THREADS" "$REPS" <<'PY'
import glob, json, statistics, sys
d, out, records, ops, threads, reps = sys.argv[1:]
rows = {}
for t in ["standalone", "set-w1", "set-majority"]:
    runs = [json.load(open(f))["run"] for f in sorted(glob.glob(f"{d}/{t}-*.json"))]
    tput = [r["throughput_ops_sec"] for r in runs]
    p99u = [r["metrics"]["UPDATE"]["p99_us"] for r in runs]
    p99r = [r["metrics"]["READ"]["p99_us"] for r in runs]
    rows[t] = {"throughput_ops_sec": tput, "update_p99_us": p99u, "read_p99_us": p99r,
               "median_throughput": statistics.median(tput),
               "median_update_p99_us": statistics.median(p99u),
               "median_read_p99_us": statistics.median(p99r)}
base = rows["standalone"]
for t, r in rows.items():
    r["throughput_vs_standalone"] = r["median_throughput"] / base["median_throughput"]
    r["update_p99_vs_standalone"] = r["median_update_p99_us"] / base["median_update_p99_us"]
doc = {"workload": "ycsb-a", "records": int(records), "ops": int(ops), "threads": int(threads),
       "reps": int(reps), "order": "alternating: standalone, set-w1, set-majority per round",
       "settings": "cacheSizeGB 0.25 on every server; the set: 3 members on this machine, "
                   "electionTimeoutMillis 10000, heartbeatIntervalMillis 400 (tests/pymongo-suite/initiate.py)",
       "rows": rows}
json.dump(doc, open(out, "w"), indent=2)
print(f"YCSB-A, {records} records, {ops} operations, {threads} threads, {reps} alternating rounds")
for t, r in rows.items():
    spread = (max(r["throughput_ops_sec"]) - min(r["throughput_ops_sec"])) / r["median_throughput"]
    print(f"{t:13} {r['median_throughput']:8.0f} ops/s (spread {spread:.0%}), p99 UPDATE "
          f"{r['median_update_p99_us']:7.0f} us, READ {r['median_read_p99_us']:6.0f} us; "
          f"throughput x{r['throughput_vs_standalone']:.2f} of the standalone")
print(f"wrote {out}")
PY
