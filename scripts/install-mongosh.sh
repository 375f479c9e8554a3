#!/usr/bin/env bash
# Installs mongosh (npm package `mongosh`, 2.x) into target/mongosh and prints its path, for the
# end-to-end test of `db.c.stats()` (tests/e2e/test_mongosh.py skips, saying why, without it).
# Not part of scripts/test.sh: the npm install takes minutes and ~150 MB.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v npm >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null
fi
dir=target/mongosh
if [ ! -x "$dir/node_modules/.bin/mongosh" ]; then
  mkdir -p "$dir"
  (cd "$dir" && npm install --no-audit --no-fund --silent mongosh@2 >/dev/null)
fi
echo "$PWD/$dir/node_modules/.bin/mongosh"
