#!/usr/bin/env bash
# YCSB A over the wire: flashdoc serve against secantusd-rs 0.5.3 (WiredTiger), alternated.
set -u
FD=/work/main/target/release/flashdoc
out=/tmp/wire-bench.jsonl; : > $out
run_client() { # port name pair
  $FD bench ycsb --workload a --records 100000 --threads 4 --seconds 30 --target mongodb://127.0.0.1:$1/ycsb --quiet --json /tmp/wire-$2-$3.json > /tmp/wire-$2-$3.txt 2>&1
  echo "{\"server\":\"$2\",\"pair\":$3,\"result\":$(cat /tmp/wire-$2-$3.json)}" >> $out
}
for i in 1 2 3; do
  rm -rf /tmp/sec-data; ~/.cargo/bin/secantusd-rs --standalone --port 27411 --storage-path /tmp/sec-data --cache-size 1G --log-level WARNING > /tmp/sec.log 2>&1 &
  sp=$!; sleep 3
  run_client 27411 secantus $i
  kill $sp; wait $sp 2>/dev/null
  rm -rf /tmp/fd-data; $FD serve -f /tmp/fd-wire.yaml --dbpath /tmp/fd-data --port 27412 > /tmp/fds.log 2>&1 &
  fp=$!; sleep 3
  run_client 27412 flashdoc $i
  kill $fp; wait $fp 2>/dev/null
done
echo done >> $out
