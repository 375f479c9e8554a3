#!/bin/bash
# Alternating pairs: buffered vs direct (data,log), engine-bench at the issue's cell.
cd "$(dirname "$0")/../../.."  # the repository root
for i in 1 2 3; do
  for mode in none data,log; do
    tag=$(echo $mode | tr , _)
    echo "pair $i $mode load $(cut -d' ' -f1 /proc/loadavg)"
    target/release/flashdoc engine-bench --records 1000000 --threads 2 --seconds 20 --cache-mb 256 --leaf-kb 32 --read-pct 50 --direct-io $mode --quiet --json docs/results/engine-direct-io/$i-$tag.json 2>&1 | grep -E "^run|^load|error" 
  done
done
