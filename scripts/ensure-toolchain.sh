#!/usr/bin/env bash
# Makes sure a Rust toolchain (with rustfmt and clippy), etcd and protoc are on PATH; installs
# them from Debian's packages when the machine has none (the only source this project may download from besides
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
# The sharded cluster: etcd holds its metadata (the multi-process test starts one), and the
# etcd-client crate needs protoc to build.
if ! command -v etcd >/dev/null 2>&1 || ! command -v protoc >/dev/null 2>&1; then
  echo "flashdoc: installing etcd-server and protobuf-compiler from Debian's packages" >&2
  apt-get update -qq && apt-get install -y -qq etcd-server protobuf-compiler >/dev/null
fi
