#!/usr/bin/env bash
# The dirty-budget tuning of docs/placement.md ("The dirty budget"): each budget of the sweep
# engine, and one with best fit at 50/80 too, on workload seed 1 at quick scale. The runs share
# one output directory, so the reference runs (best fit, 5/20) are made once. About 3 min on
# 2 cores. Writes results-BUDGET.json here and prints the summary table.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
out=${OUT:-$root/results/dirty-budget}
cd "$root"
cargo build --release -q -p flashdoc
for b in 5.20 20.40 50.80 70.90 90.95 both; do
  target/release/flashdoc lab run "$here/budget-$b.yaml" --out "$out" --quiet > /dev/null
  cp "$out/dirty-budget/results.json" "$here/results-$b.json"
done
python3 "$here/summarize.py" "$here"
