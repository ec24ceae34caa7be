#!/usr/bin/env bash
# What each kind of CUPTI record costs a launch-bound program: the C++ launch_loop (10,000
# launches of a 1-block kernel, median of 7 repeats in one process) unprofiled and under
# `attnprof profile` with the record kinds turned off one at a time, each variant right after
# an unprofiled twin, ROUNDS rounds, median of the per-round ratios. Then one profiled run per
# variant, counting the trace's events by category.
# Usage: docs/perf/collector_cost_rounds.sh BUILD_DIR   (ROUNDS, default 6)
set -uo pipefail
BUILD=${1:-build}
ROUNDS=${ROUNDS:-6}
WORK=${WORK:-/tmp/attnprof-cost}
mkdir -p "$WORK"
A="$BUILD/app/attnprof"
LOOP="$BUILD/tests/launch_loop"
VARIANTS=("default" "ATTNPROF_CUPTI_DRIVER=none" "ATTNPROF_CUPTI_RUNTIME=none"
          "ATTNPROF_CUPTI_DRIVER=none ATTNPROF_CUPTI_RUNTIME=none")
median() { sed -n 's/.*median \([0-9.]*\) ms.*/\1/p' | tail -1; }
profiled() {  # VARIANT OUT_DIR
  local settings=()
  [ "$1" != default ] && read -ra settings <<<"$1"
  env "${settings[@]}" "$A" profile --out "$2" --format csv -- "$LOOP" --launches 10000 --repeats 7 2>&1
}
rows=()
for r in $(seq "$ROUNDS"); do
  line=""
  for v in "${VARIANTS[@]}"; do
    plain=$("$LOOP" --launches 10000 --repeats 7 2>&1 | median)
    prof=$(profiled "$v" "$WORK/p" | median)
    line+="$(awk -v a="$prof" -v b="$plain" 'BEGIN { printf "%.3f ", a / b }')"
    echo "round $r, $v: $plain -> $prof ms"
  done
  rows+=("$line")
done
printf '%s\n' "${rows[@]}" | python3 -c '
import statistics, sys
names = sys.argv[1:]
rows = [list(map(float, l.split())) for l in sys.stdin if l.strip()]
for n, c in zip(names, zip(*rows)):
    print("%-55s median %.2fx (%.2f-%.2f) over %d rounds" % (n, statistics.median(c), min(c), max(c), len(c)))' "${VARIANTS[@]}"
for v in "${VARIANTS[@]}"; do
  profiled "$v" "$WORK/count" > /dev/null
  python3 - "$WORK/count/trace.json" "$v" <<'PY'
import collections, json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
cats = collections.Counter(e.get("cat", e.get("ph")) for e in events)
names = collections.Counter(e["name"] for e in events if e.get("cat") == "cuda_driver")
print(f"{sys.argv[2]}: " + ", ".join(f"{c} {n}" for c, n in sorted(cats.items())) + f"; driver calls {dict(names)}")
PY
done
rm -rf "$WORK"
