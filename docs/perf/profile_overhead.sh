#!/usr/bin/env bash
# What recording costs: the wall time of the same loops unprofiled, under `attnprof profile`
# and under torch.profiler, each the median of 5 repeats inside one process (host clock around
# the loop plus a synchronize; warm-up first, so CUPTI's start-up and the trace writing at exit
# are not in it). Target: attnprof <= 1.25x unprofiled; torch.profiler measured 3.8x on 200
# small SDPA calls (docs/GPU.md).
#
#   launch_loop        10,000 launches of a 1-block kernel from C++ (docs/examples/launch_loop.cu)
#   torch launches     10,000 one-kernel PyTorch ops (x.add_(1) on 32 floats)
#   torch sdpa         200 small F.scaled_dot_product_attention calls (1x8x128x64 bf16)
#
# Usage (repo root, on the GPU machine): docs/perf/profile_overhead.sh [BUILD_DIR] [OUT_DIR]
# Prints a Markdown table of times and ratios; every run's output goes to OUT_DIR/overhead.log.
# The profiles themselves (large: every launch) go to $WORK, not OUT_DIR.
set -uo pipefail
BUILD=${1:-build-profile}
OUT=${2:-${OUT:-/tmp/attnprof-overhead}}
WORK=${WORK:-/tmp/attnprof-overhead-work}
PY=${PYTHON:-python3}
ATTNPROF="$BUILD/app/attnprof"
LOOP="$BUILD/tests/launch_loop"
SCRIPT=docs/examples/sdpa_backends.py
LOG="$OUT/overhead.log"
mkdir -p "$OUT" "$WORK"
: > "$LOG"
export PYTHONUNBUFFERED=1

# Runs a command, logs its output, prints the median in ms from its "median X ms" line (or "-").
median_ms() {
  local label=$1
  shift
  echo "### $label: $*" >> "$LOG"
  local text
  text=$(timeout 300 "$@" 2>&1)
  local rc=$?
  echo "$text" >> "$LOG"
  echo "rc=$rc" >> "$LOG"
  local ms
  ms=$(echo "$text" | sed -n 's/.*median \([0-9.]*\) ms.*/\1/p' | tail -1)
  echo "${ms:--}"
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || a == 0) print "-"; else printf "%.2fx", b / a }'; }

profiled() { echo "$ATTNPROF" profile --out "$WORK/$1" --format csv --; }

c_plain=$(median_ms "launch_loop plain" "$LOOP" --launches 10000 --repeats 5)
c_attn=$(median_ms "launch_loop attnprof" $(profiled c) "$LOOP" --launches 10000 --repeats 5)

l_plain=$(median_ms "torch launches plain" "$PY" "$SCRIPT" --overhead launches)
l_attn=$(median_ms "torch launches attnprof" $(profiled launches) "$PY" "$SCRIPT" --overhead launches)
l_torch=$(median_ms "torch launches torch.profiler" "$PY" "$SCRIPT" --overhead launches --torch-profiler "$WORK/launches_torch.json")

s_plain=$(median_ms "torch sdpa plain" "$PY" "$SCRIPT" --overhead sdpa)
s_attn=$(median_ms "torch sdpa attnprof" $(profiled sdpa) "$PY" "$SCRIPT" --overhead sdpa)
s_torch=$(median_ms "torch sdpa torch.profiler" "$PY" "$SCRIPT" --overhead sdpa --torch-profiler "$WORK/sdpa_torch.json")

echo "| loop | unprofiled | attnprof profile | torch.profiler |"
echo "|---|---|---|---|"
echo "| launch_loop: 10,000 kernel launches (C++) | $c_plain ms | $c_attn ms ($(ratio "$c_plain" "$c_attn")) | n/a |"
echo "| PyTorch: 10,000 x.add_(1) | $l_plain ms | $l_attn ms ($(ratio "$l_plain" "$l_attn")) | $l_torch ms ($(ratio "$l_plain" "$l_torch")) |"
echo "| PyTorch: 200 SDPA calls 1x8x128x64 bf16 | $s_plain ms | $s_attn ms ($(ratio "$s_plain" "$s_attn")) | $s_torch ms ($(ratio "$s_plain" "$s_torch")) |"
for d in c launches sdpa; do
  [ -f "$WORK/$d/summary.json" ] || echo "note: attnprof profile wrote no summary for '$d' (see $LOG)"
done
