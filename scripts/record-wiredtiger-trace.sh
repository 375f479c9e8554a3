#!/usr/bin/env bash
# Records a real WiredTiger trace big enough to measure replay speed on (issue 15: at least
# 5 M host page writes): WiredTiger 11.3.1 runs crates/shim/wtdriver.c (mongod's layout, YCSB
# update-heavy over 1000-byte documents, sized as the lab sizes its engine) under
# libflashdoc_shim.so for SECONDS of run phase. About 10–12 minutes with the defaults.
#
#   bash scripts/record-wiredtiger-trace.sh OUT.trace [records=1000000] [seconds=600] [read_pct=50] [mix=ycsb]
#
# mix=linkbench records wtdriver.c's LinkBench-like graph instead (seven files in mongod's
# layout: collection-*.wt and index-*.wt; its operation mix fixes the reads, read_pct is ignored).
#
# Then: flashdoc placement replay OUT.trace --policy all --no-timing --size-to-trace
# Not run by CI (too long); the figures in docs/placement.md's replay-speed section come from it.
set -euo pipefail
out=${1:?usage: record-wiredtiger-trace.sh OUT.trace [records] [seconds] [read_pct] [mix]}
records=${2:-1000000}
seconds=${3:-600}
read_pct=${4:-50}
mix=${5:-ycsb}
case $mix in
  ycsb) tables='collection=collection.wt;index=index.wt' ;;
  linkbench) tables='collection=collection-*.wt;index=index-*.wt' ;;
  *) echo "record-wiredtiger-trace: mix is ycsb or linkbench, not $mix" >&2; exit 2 ;;
esac
root=$(cd "$(dirname "$0")/.." && pwd)
[ ! -e "$out" ] || { echo "record-wiredtiger-trace: $out exists; remove it first" >&2; exit 2; }
wt=${FLASHDOC_WIREDTIGER:-$(bash "$root/scripts/build-wiredtiger.sh" | tail -1)}
(cd "$root" && cargo build --release --quiet -p flashdoc-shim)
shim="$root/target/release/libflashdoc_shim.so"
work=$(mktemp -d /tmp/flashdoc-wt-record.XXXXXX)
trap 'rm -rf "$work"' EXIT
cc -O2 -Wall -Wextra -Werror -o "$work/wtdriver" "$root/crates/shim/wtdriver.c" \
  -I"$wt/include" -L"$wt" -Wl,-rpath,"$wt" -lwiredtiger -lpthread -lm
mkdir "$work/db"
# The lab's sizing (crates/lab/src/experiment.rs defaults): device fill 0.1, cache 20 % of the
# loaded tables, a checkpoint every 2.5 % of the device written.
LD_PRELOAD="$shim" FLASHDOC_SHIM_DIR="$work/db" FLASHDOC_SHIM_TRACE="$out" \
  FLASHDOC_SHIM_KINDS="$tables;journal=WiredTigerLog.*,WiredTigerPreplog.*,WiredTigerTmplog.*" \
  "$work/wtdriver" "$work/db" records="$records" seconds="$seconds" threads=2 read_pct="$read_pct" \
  seed="${FLASHDOC_WT_SEED:-2}" mix="$mix" load_cache_mb=256 log_file_kb=102400 device_fill=0.1 cache_share=0.2 checkpoint_share=0.025
