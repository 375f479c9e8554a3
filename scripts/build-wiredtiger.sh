#!/usr/bin/env bash
# Builds WiredTiger 11.3.1 from its PyPI source distribution, as ../shared/bench/wiredtiger/build.sh
# does (same version and CMake options), for the LD_PRELOAD shim's acceptance test
# (crates/shim/tests/wiredtiger.rs). About 5 minutes on 2 cores the first time; later runs reuse the
# build. Prints the build directory (libwiredtiger.so, include/) as its last line.
#
#   FLASHDOC_WIREDTIGER=DIR  use an existing build directory instead
#   FLASHDOC_CACHE=DIR       where to build (default: ~/.cache/flashdoc)
set -euo pipefail
if [ -n "${FLASHDOC_WIREDTIGER:-}" ] && [ -f "$FLASHDOC_WIREDTIGER/libwiredtiger.so" ]; then
  echo "$FLASHDOC_WIREDTIGER"
  exit 0
fi
cache=${FLASHDOC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/flashdoc}
W=$cache/wiredtiger-11.3.1
if [ ! -f "$W/build/libwiredtiger.so" ]; then
  need=()
  for tool in cmake ninja cc; do command -v $tool >/dev/null 2>&1 || need+=("$tool"); done
  if [ ${#need[@]} -gt 0 ] || [ ! -f /usr/include/zlib.h ]; then
    echo "flashdoc: installing cmake, ninja-build, gcc and zlib1g-dev from Debian's packages" >&2
    apt-get update -qq && apt-get install -y -qq cmake ninja-build gcc zlib1g-dev python3-venv >/dev/null
  fi
  mkdir -p "$cache"
  cd "$cache"
  if [ ! -f wiredtiger-11.3.1.tar.gz ]; then
    [ -x venv/bin/pip ] || python3 -m venv venv
    venv/bin/pip download --quiet --disable-pip-version-check --no-deps --no-binary :all: -d . wiredtiger==11.3.1
  fi
  rm -rf "$W"
  tar xzf wiredtiger-11.3.1.tar.gz
  mkdir -p "$W/build" && cd "$W/build"
  echo "flashdoc: building WiredTiger 11.3.1 in $W/build (about 5 minutes on 2 cores)" >&2
  cmake -G Ninja -DCMAKE_BUILD_TYPE=Release -DENABLE_PYTHON=0 -DENABLE_STATIC=0 -DHAVE_UNITTEST=0 \
        -DENABLE_ZLIB=1 -DCMAKE_C_FLAGS=-Wno-error -DENABLE_STRICT=0 .. >/dev/null
  ninja -j2 libwiredtiger.so >/dev/null
fi
echo "$W/build"
