#!/usr/bin/env bash
# Checkpoint windows of two flashdoc binaries, alternated: 130 s run phases at 256 MB / 32 KB /
# 50 % reads, so two checkpoints (every 60 s) fall in each. Stop 43 compared the binary before
# the table file's fdatasync left the structure latch (OLD, 6bab9c2) with the one after (NEW).
# usage: OLD=path NEW=path OUT=file.jsonl bash ckab.sh; then python3 ckab.py file.jsonl
out=${OUT:-/tmp/bench/ckab.jsonl}
for i in 1 2; do
  for b in old new; do
    bin=$OLD; [ $b = new ] && bin=$NEW
    $bin engine-bench --records 1000000 --threads 2 --seconds 130 --cache-mb 256 --leaf-kb 32 --read-pct 50 --quiet --json /tmp/ckab.json > /dev/null 2>&1
    echo "{\"binary\":\"$b\",\"pair\":$i,\"result\":$(cat /tmp/ckab.json)}" >> $out
  done
done
