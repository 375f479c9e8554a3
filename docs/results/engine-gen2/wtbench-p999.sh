#!/usr/bin/env bash
# Builds /tmp/wiredtiger-ref/wtbench-p999: ../shared/bench/wiredtiger/wtbench.c, unchanged but for
# one more figure in its JSON line, the run's p99.9 latency (`p99_9_us`), which the checkpoint
# comparison of issue 32 needs. The shared source is left as it is; the edit is made on a copy.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../../../.." && pwd)/shared/bench/wiredtiger/wtbench.c
W=/tmp/wiredtiger-ref/wiredtiger-11.3.1
sed -e 's|\\"p99_us\\":%.1f}\\n"|\\"p99_us\\":%.1f,\\"p99_9_us\\":%.1f}\\n"|' \
    -e 's|all\[(long)(n \* 0.99)\] \* 1e6);|all[(long)(n * 0.99)] * 1e6, all[(long)(n * 0.999)] * 1e6);|' \
    "$src" > /tmp/wtbench-p999.c
grep -q p99_9_us /tmp/wtbench-p999.c && grep -q '0.999)] \* 1e6);' /tmp/wtbench-p999.c
gcc -O2 -o /tmp/wiredtiger-ref/wtbench-p999 /tmp/wtbench-p999.c -I"$W/build/include" -L"$W/build" -lwiredtiger -lpthread -lm
echo /tmp/wiredtiger-ref/wtbench-p999
