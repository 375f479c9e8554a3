#!/usr/bin/env bash
# Makes sure a Rust toolchain (with rustfmt and clippy) is on PATH; installs it from Debian's
# packages when the machine has none (the only source this project may download from besides
# the language registries).
set -euo pipefail
if [ -f "$HOME/.cargo/env" ]; then . "$HOME/.cargo/env"; fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "flashdoc: no cargo found; installing Rust from Debian's packages" >&2
  apt-get update -qq && apt-get install -y -qq cargo rustc rustfmt rust-clippy >/dev/null
fi
if command -v rustup >/dev/null 2>&1; then
  rustup component add rustfmt clippy >/dev/null 2>&1 || true
fi
