#!/usr/bin/env bash
# What each collector setting costs a launch-bound program: the same loops as
# profile_overhead.sh, under `attnprof profile` with the ATTNPROF_CUPTI_* variables of
# lib/collector/activity_collector.hpp. One line per variant: the launch_loop and the PyTorch
# add_ loop, median ms and ratio to unprofiled. Usage: docs/perf/collector_variants.sh BUILD_DIR
set -uo pipefail
BUILD=${1:-build}
WORK=${WORK:-/tmp/attnprof-variants}
mkdir -p "$WORK"
export PYTHONUNBUFFERED=1
A="$BUILD/app/attnprof"
LOOP="$BUILD/tests/launch_loop"
median() { sed -n 's/.*median \([0-9.]*\) ms.*/\1/p' | tail -1; }
c_plain=$("$LOOP" --launches 10000 --repeats 7 2>&1 | median)
t_plain=$(python3 docs/examples/sdpa_backends.py --overhead launches 2>&1 | median)
s_plain=$(python3 docs/examples/sdpa_backends.py --overhead sdpa 2>&1 | median)
echo "unprofiled: launch_loop $c_plain ms, torch add_ $t_plain ms, torch sdpa $s_plain ms"
while read -r name vars; do
  c=$(env $vars "$A" profile --out "$WORK/c" --format csv -- "$LOOP" --launches 10000 --repeats 7 2>&1 | median)
  t=$(env $vars "$A" profile --out "$WORK/t" --format csv -- python3 docs/examples/sdpa_backends.py --overhead launches 2>&1 | median)
  s=$(env $vars "$A" profile --out "$WORK/s" --format csv -- python3 docs/examples/sdpa_backends.py --overhead sdpa 2>&1 | median)
  awk -v n="$name" -v c="$c" -v cp="$c_plain" -v t="$t" -v tp="$t_plain" -v s="$s" -v sp="$s_plain" 'BEGIN {
    printf "%-32s launch_loop %8s ms (%.2fx)  torch add_ %8s ms (%.2fx)  torch sdpa %8s ms (%.2fx)\n", n, c, c / cp, t, t / tp, s, s / sp }'
done <<'VARIANTS'
all-driver ATTNPROF_CUPTI_DRIVER=all
launch-driver ATTNPROF_CUPTI_DRIVER=launches
launch-driver,no-overhead ATTNPROF_CUPTI_DRIVER=launches ATTNPROF_CUPTI_OVERHEAD=0
launch-driver,no-overhead,zeroed ATTNPROF_CUPTI_DRIVER=launches ATTNPROF_CUPTI_OVERHEAD=0 ATTNPROF_CUPTI_ZEROED=1
+shared-buffers ATTNPROF_CUPTI_DRIVER=launches ATTNPROF_CUPTI_OVERHEAD=0 ATTNPROF_CUPTI_ZEROED=1 ATTNPROF_CUPTI_PER_THREAD=0
+32MB-buffers ATTNPROF_CUPTI_DRIVER=launches ATTNPROF_CUPTI_OVERHEAD=0 ATTNPROF_CUPTI_ZEROED=1 ATTNPROF_CUPTI_BUFFER_BYTES=33554432
VARIANTS
