#!/usr/bin/env bash
# engine-bench against wtbench (WiredTiger 11.3.1), alternated pairs per cell:
# cache_mb leaf_kb read_pct pairs
set -u
W=/tmp/wiredtiger-ref/wiredtiger-11.3.1/build
FD=${FD:-/tmp/flashdoc-final}
out=${OUT:-/tmp/bench-matrix.jsonl}
while read -r cache leaf read pairs; do
  [ -z "$cache" ] && continue
  for i in $(seq 1 $pairs); do
    rm -rf /tmp/wtdb && mkdir -p /tmp/wtdb
    r=$(LD_LIBRARY_PATH=$W /tmp/wiredtiger-ref/wtbench /tmp/wtdb 1000000 2 20 $cache $leaf $read | tail -1)
    echo "{\"engine\":\"wiredtiger\",\"cache_mb\":$cache,\"leaf_kb\":$leaf,\"read_pct\":$read,\"pair\":$i,\"result\":$r}" >> $out
    rm -rf /tmp/wtdb
    $FD engine-bench --records 1000000 --threads 2 --seconds 20 --cache-mb $cache --leaf-kb $leaf --read-pct $read --quiet --json /tmp/fdm.json > /dev/null 2>&1
    echo "{\"engine\":\"flashdoc\",\"cache_mb\":$cache,\"leaf_kb\":$leaf,\"read_pct\":$read,\"pair\":$i,\"result\":$(cat /tmp/fdm.json)}" >> $out
  done
done
echo done >> $out
