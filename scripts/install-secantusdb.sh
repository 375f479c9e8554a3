#!/usr/bin/env bash
# Installs SecantusDB 0.7.0b3 from PyPI (a MongoDB-wire server in Python on WiredTiger; wheels
# for CPython 3.11 on x86-64 Linux) into a venv of its own, for the lab's real-wiredtiger
# experiment (crates/lab/src/secantus.rs). About 15 seconds the first time; later runs reuse it.
# Prints the server program's path (secantusd-py) as its last line.
#
#   FLASHDOC_SECANTUSD=PATH  use an existing secantusd-py instead
#   FLASHDOC_CACHE=DIR       where to install (default: ~/.cache/flashdoc)
set -euo pipefail
if [ -n "${FLASHDOC_SECANTUSD:-}" ] && [ -x "$FLASHDOC_SECANTUSD" ]; then
  echo "$FLASHDOC_SECANTUSD"
  exit 0
fi
cache=${FLASHDOC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/flashdoc}
V=$cache/secantusdb-0.7.0b3
if [ ! -x "$V/bin/secantusd-py" ]; then
  if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
    echo "flashdoc: installing python3-venv from Debian's packages" >&2
    apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
  fi
  rm -rf "$V"
  python3 -m venv "$V"
  echo "flashdoc: installing SecantusDB 0.7.0b3 from PyPI into $V" >&2
  "$V/bin/pip" install --quiet --disable-pip-version-check secantusdb==0.7.0b3
fi
echo "$V/bin/secantusd-py"
