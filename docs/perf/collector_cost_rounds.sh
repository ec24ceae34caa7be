#!/usr/bin/env bash
# What each kind of CUPTI record costs a launch-bound program: the C++ launch_loop (10,000
# launches of a 1-block kernel, median of 7 repeats in one process) unprofiled and under
# `attnprof profile` with the record kinds turned off one at a time, each variant right after
# an unprofiled twin, ROUNDS rounds, median of the per-round ratios. Then one profiled run per
# variant, counting the trace's events by category.
# Usage: docs/perf/collector_cost_rounds.sh BUILD_DIR
#   ROUNDS (default 6); VARIANTS: '|'-separated settings, 'default' for none (default: the four
#   below); LOOP=torch times PyTorch's 10,000 x.add_(1) (docs/examples/sdpa_backends.py) instead;
#   PIN=CPUS runs every program (plain and profiled) under `taskset -c CPUS`.
set -uo pipefail
BUILD=${1:-build}
ROUNDS=${ROUNDS:-6}
WORK=${WORK:-/tmp/attnprof-cost}
mkdir -p "$WORK"
A="$BUILD/app/attnprof"
if [ "${LOOP:-}" = torch ]; then
  PROGRAM=(python3 docs/examples/sdpa_backends.py --overhead launches)
else
  PROGRAM=("$BUILD/tests/launch_loop" --launches 10000 --repeats 7)
fi
RUN=()
[ -n "${PIN:-}" ] && RUN=(taskset -c "$PIN")
IFS='|' read -ra VARIANTS <<<"${VARIANTS:-default|ATTNPROF_CUPTI_DRIVER=none|ATTNPROF_CUPTI_RUNTIME=none|ATTNPROF_CUPTI_DRIVER=none ATTNPROF_CUPTI_RUNTIME=none}"
median() { sed -n 's/.*median \([0-9.]*\) ms.*/\1/p' | tail -1; }
issued() { sed -n 's/.*launches issued in \([0-9.]*\) ms.*/ (issued in \1 ms)/p' | tail -1; }
profiled() {  # VARIANT OUT_DIR
  local settings=()
  [ "$1" != default ] && read -ra settings <<<"$1"
  env "${settings[@]}" "${RUN[@]}" "$A" profile --out "$2" --format csv -- "${PROGRAM[@]}" 2>&1
}
rows=()
for r in $(seq "$ROUNDS"); do
  line=""
  for v in "${VARIANTS[@]}"; do
    plain_out=$("${RUN[@]}" "${PROGRAM[@]}" 2>&1)
    prof_out=$(profiled "$v" "$WORK/p")
    plain=$(median <<<"$plain_out")
    prof=$(median <<<"$prof_out")
    line+="$(awk -v a="$prof" -v b="$plain" 'BEGIN { printf "%.3f ", a / b }')"
    echo "round $r, $v: $plain$(issued <<<"$plain_out") -> $prof$(issued <<<"$prof_out") ms"
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
