#!/usr/bin/env bash
# YCSB A over the wire: two flashdoc servers (OLD, NEW binaries) alternated under one client.
# Usage: OLD=path/to/flashdoc NEW=path/to/flashdoc [CLIENT=...] bash wire-ab.sh  (needs /tmp/fd-wire.yaml,
# a copy of fd-wire.yaml beside this script); writes /tmp/wire-ab.jsonl.
set -u
CLIENT=${CLIENT:-/work/main/target/release/flashdoc}
OLD=${OLD:-/tmp/tgt-old/release/flashdoc}
NEW=${NEW:-/work/main/target/release/flashdoc}
out=/tmp/wire-ab.jsonl; : > $out
for i in 1 2 3; do
  for v in old new; do
    if [ $v = old ]; then S=$OLD; else S=$NEW; fi
    rm -rf /tmp/fd-data; $S serve -f /tmp/fd-wire.yaml --dbpath /tmp/fd-data --port 27413 > /tmp/fds-$v.log 2>&1 &
    fp=$!; sleep 3
    $CLIENT bench ycsb --workload a --records 100000 --threads 4 --seconds 30 --target mongodb://127.0.0.1:27413/ycsb --quiet --json /tmp/wab-$v-$i.json > /dev/null 2>&1
    echo "{\"server\":\"$v\",\"pair\":$i,\"result\":$(cat /tmp/wab-$v-$i.json)}" >> $out
    kill $fp; wait $fp 2>/dev/null
  done
done
