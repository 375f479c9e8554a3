#!/usr/bin/env bash
# flashdoc's main job. Until the lab lands (issue 7) it runs the storage-engine benchmark at a
# small size and the SSD simulator's validation against theory, and prints where the results are.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/ensure-toolchain.sh
cargo build --release -p flashdoc
out=results/main
mkdir -p "$out"
./target/release/flashdoc engine-bench --records 200000 --seconds 10 --json "$out/engine-bench.json"
./target/release/flashdoc ssd validate --quick --json "$out/ssd-validate.json"
echo "results: $out/engine-bench.json $out/ssd-validate.json"
