#!/usr/bin/env bash
# profile_overhead.sh's loops, ROUNDS times, each profiled run right after its unprofiled twin,
# so that the machine's drift (the unprofiled loops alone moved ±30 % between runs on an H200
# host, 2026-12-02) hits both sides of a ratio alike; prints each round's ratios and their median.
# Usage: docs/perf/overhead_rounds.sh BUILD_DIR   (ROUNDS, default 6)
set -uo pipefail
BUILD=${1:-build}
ROUNDS=${ROUNDS:-6}
WORK=${WORK:-/tmp/attnprof-rounds}
mkdir -p "$WORK"
export PYTHONUNBUFFERED=1
A="$BUILD/app/attnprof"
LOOP="$BUILD/tests/launch_loop"
SCRIPT=docs/examples/sdpa_backends.py
median() { sed -n 's/.*median \([0-9.]*\) ms.*/\1/p' | tail -1; }
profiled() { "$A" profile --out "$WORK/p" --format csv -- "$@"; }
ratios=()
for r in $(seq "$ROUNDS"); do
  cp=$("$LOOP" --launches 10000 --repeats 7 2>&1 | median); ca=$(profiled "$LOOP" --launches 10000 --repeats 7 2>&1 | median)
  tp=$(python3 $SCRIPT --overhead launches 2>&1 | median); ta=$(profiled python3 $SCRIPT --overhead launches 2>&1 | median)
  sp=$(python3 $SCRIPT --overhead sdpa 2>&1 | median); sa=$(profiled python3 $SCRIPT --overhead sdpa 2>&1 | median)
  st=$(python3 $SCRIPT --overhead sdpa --torch-profiler "$WORK/torch.json" 2>&1 | median)
  line=$(awk -v cp="$cp" -v ca="$ca" -v tp="$tp" -v ta="$ta" -v sp="$sp" -v sa="$sa" -v st="$st" 'BEGIN {
    printf "%.3f %.3f %.3f %.3f", ca / cp, ta / tp, sa / sp, st / sp }')
  echo "round $r: launch_loop $cp -> $ca ms, torch add_ $tp -> $ta ms, torch sdpa $sp -> $sa ms (torch.profiler $st ms); ratios $line"
  ratios+=("$line")
done
printf '%s\n' "${ratios[@]}" | python3 -c '
import statistics, sys
rows = [list(map(float, l.split())) for l in sys.stdin if l.strip()]
names = ["launch_loop", "torch add_", "torch sdpa", "sdpa torch.profiler"]
print("median ratio over %d rounds: " % len(rows) + ", ".join(
    "%s %.2fx (%.2f-%.2f)" % (n, statistics.median(c), min(c), max(c)) for n, c in zip(names, zip(*rows))))'
rm -rf "$WORK"
