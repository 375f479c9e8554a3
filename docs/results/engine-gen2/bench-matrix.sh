#!/usr/bin/env bash
# engine-bench against wtbench (WiredTiger 11.3.1), alternated pairs per cell:
# cache_mb leaf_kb read_pct pairs
# DIRTY="TARGET TRIGGER" (optional) gives both engines that dirty budget: the row at equal
# budget. Without it each engine runs its own default (WiredTiger 5/20, flashdoc flash mode's).
# SECS (default 20) is the run phase's length: 130 puts two checkpoints (every 60 s) in it.
# WTBENCH (default /tmp/wiredtiger-ref/wtbench) may name wtbench-p999.sh's build, for p99.9.
set -u
W=/tmp/wiredtiger-ref/wiredtiger-11.3.1/build
FD=${FD:-/tmp/flashdoc-final}
out=${OUT:-/tmp/bench-matrix.jsonl}
DIRTY=${DIRTY:-}
SECS=${SECS:-20}
WTBENCH=${WTBENCH:-/tmp/wiredtiger-ref/wtbench}
fd_dirty=()
[ -n "$DIRTY" ] && fd_dirty=(--dirty-pct $DIRTY)
while read -r cache leaf read pairs; do
  [ -z "$cache" ] && continue
  for i in $(seq 1 $pairs); do
    rm -rf /tmp/wtdb && mkdir -p /tmp/wtdb
    r=$(LD_LIBRARY_PATH=$W $WTBENCH /tmp/wtdb 1000000 2 $SECS $cache $leaf $read $DIRTY | tail -1)
    echo "{\"engine\":\"wiredtiger\",\"cache_mb\":$cache,\"leaf_kb\":$leaf,\"read_pct\":$read,\"pair\":$i,\"result\":$r}" >> $out
    rm -rf /tmp/wtdb
    $FD engine-bench --records 1000000 --threads 2 --seconds $SECS --cache-mb $cache --leaf-kb $leaf --read-pct $read "${fd_dirty[@]}" --quiet --json /tmp/fdm.json > /dev/null 2>&1
    echo "{\"engine\":\"flashdoc\",\"cache_mb\":$cache,\"leaf_kb\":$leaf,\"read_pct\":$read,\"pair\":$i,\"result\":$(cat /tmp/fdm.json)}" >> $out
  done
done
echo done >> $out
