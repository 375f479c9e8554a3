#!/usr/bin/env bash
# The router's cost against talking to one shard directly: YCSB-A (the workload crate's
# driver over the wire) through `flashdoc router` with one shard, and against the same shard
# directly, alternating (router, direct, router, direct) in one run; prints the throughput and
# p99 ratios. Usage: bash scripts/router-overhead.sh [records] [ops] [threads]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/ensure-toolchain.sh
RECORDS=${1:-50000}; OPS=${2:-100000}; THREADS=${3:-4}
cargo build --release --quiet -p flashdoc
F="$PWD/target/release/flashdoc"
DIR="$(mktemp -d /tmp/flashdoc-overhead-XXXXXX)"
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
EC=$(port); EP=$(port); SP=$(port); RP=$(port)
etcd --data-dir "$DIR/etcd" --listen-client-urls "http://127.0.0.1:$EC" --advertise-client-urls "http://127.0.0.1:$EC" \
  --listen-peer-urls "http://127.0.0.1:$EP" --initial-advertise-peer-urls "http://127.0.0.1:$EP" \
  --initial-cluster "default=http://127.0.0.1:$EP" >"$DIR/etcd.log" 2>&1 &
PIDS=($!)
"$F" serve --shardsvr --dbpath "$DIR/shard" --port "$SP" >"$DIR/shard.log" 2>&1 & PIDS+=($!)
sleep 2
"$F" router --configdb "etcd://127.0.0.1:$EC" --port "$RP" >"$DIR/router.log" 2>&1 & PIDS+=($!)
trap 'kill ${PIDS[@]} 2>/dev/null; wait 2>/dev/null; rm -rf "$DIR"' EXIT
for f in shard router; do until grep -q "waiting for connections" "$DIR/$f.log"; do sleep 0.2; done; done
# The shard joins through the router; the load goes through it (the collection is unsharded and
# lives on the one shard, so both paths read and write the same documents).
"$F" cluster add-shard "127.0.0.1:$RP" "127.0.0.1:$SP"
"$F" bench ycsb --target "mongodb://127.0.0.1:$RP/ycsb" --phase load --records "$RECORDS" --threads "$THREADS" --quiet >/dev/null
run() { "$F" bench ycsb --target "$1" --phase run --records "$RECORDS" --ops "$OPS" --threads "$THREADS" --quiet --json "$2" >/dev/null; }
for i in 1 2; do
  run "mongodb://127.0.0.1:$RP/ycsb" "$DIR/router$i.json"
  run "mongodb://127.0.0.1:$SP/ycsb?directConnection=true" "$DIR/direct$i.json"
done
python3 - "$DIR" "$RECORDS" "$OPS" "$THREADS" <<'PY'
import json, sys, glob
d, records, ops, threads = sys.argv[1:]
def runs(kind):
    return [json.load(open(f))["run"] for f in sorted(glob.glob(f"{d}/{kind}*.json"))]
r, x = runs("router"), runs("direct")
tput = lambda rs: sum(p["throughput_ops_sec"] for p in rs) / len(rs)
p99 = lambda rs, op: sum(p["metrics"][op]["p99_us"] for p in rs) / len(rs)
print(f"YCSB-A, {records} records, {ops} operations, {threads} threads, 2 alternating runs each")
print(f"direct to the shard: {tput(x):.0f} ops/s, p99 READ {p99(x, 'READ'):.0f} us, UPDATE {p99(x, 'UPDATE'):.0f} us")
print(f"through the router:  {tput(r):.0f} ops/s, p99 READ {p99(r, 'READ'):.0f} us, UPDATE {p99(r, 'UPDATE'):.0f} us")
print(f"router / direct: throughput {tput(r) / tput(x):.3f}, p99 READ {p99(r, 'READ') / p99(x, 'READ'):.2f}, UPDATE {p99(r, 'UPDATE') / p99(x, 'UPDATE'):.2f}")
PY
