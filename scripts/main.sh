#!/usr/bin/env bash
# flashdoc's main job: the lab's headline experiment, `streams-quick` — five workloads (YCSB
# update-heavy and update-only, LinkBench original, mixed and update-only) on the engine, both
# allocations (best fit, sweep) at both dirty budgets (WiredTiger's 5/20, flash mode's 50/80),
# every placement policy replayed on an aged 8-stream simulated SSD — then prints the report's
# path. The report opens with every policy at equal engine settings (flash mode's, then
# WiredTiger's defaults), flash mode's policy against every seed policy and the oracle, and
# the decomposition of flash mode's gain over dsm into budget, allocator and policy.
# A rerun resumes (finished points are kept in results/lab/streams-quick/points).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/ensure-toolchain.sh
if ! fc-list 2>/dev/null | grep -qi "dejavu\|liberation"; then
  apt-get update -qq && apt-get install -y -qq fonts-dejavu-core >/dev/null
fi
cargo build --release -p flashdoc
# The report sets its headline beside the committed large-scale run, the reference
# (docs/placement.md, "The reference scale": the figures move from quick to large).
./target/release/flashdoc lab run streams-quick --out results/lab \
  --compare docs/results/streams-reference-large "$@"
