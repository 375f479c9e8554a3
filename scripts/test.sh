#!/usr/bin/env bash
# The whole test suite: formatting, lints, and every crate's unit, model, crash and
# end-to-end tests. CI runs exactly this (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/ensure-toolchain.sh
echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy -D warnings"
cargo clippy --workspace --all-targets --quiet -- -D warnings
echo "== cargo test"
cargo test --workspace --quiet 2>&1 | tee target/test-output.txt
# One closing line for CI: totals over every test binary.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i) ~ /^passed/) p += $(i-1); if ($(i) ~ /^failed/) f += $(i-1); if ($(i) ~ /^ignored/) s += $(i-1) } }
     END { printf "cargo: %d passed, %d failed, %d skipped\n", p, f, s }' target/test-output.txt
