#!/usr/bin/env bash
# Set-up cost of a long-context case (issue 17): wall time and peak resident memory of
# `attnprof run --config configs/long_context.json`, against the GPU time the summary counts.
# Usage (repo root, on the GPU machine): docs/perf/setup_cost.sh [build] [rounds]
set -uo pipefail
B=${1:-build}
ROUNDS=${2:-3}
OUT=${OUT:-/tmp/attnprof-setup}
mkdir -p "$OUT"
for round in $(seq "$ROUNDS"); do
  start=$(date +%s.%N)
  "$B/app/attnprof" run --config configs/long_context.json --out "$OUT/run$round" --quiet > /dev/null 2> "$OUT/run$round.err" &
  pid=$!
  peak=0
  while kill -0 "$pid" 2> /dev/null; do
    hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$pid/status" 2> /dev/null)
    [ -n "$hwm" ] && [ "$hwm" -gt "$peak" ] && peak=$hwm
    sleep 0.05
  done
  wait "$pid"; rc=$?
  end=$(date +%s.%N)
  python3 - "$OUT/run$round/summary.json" "$start" "$end" "$peak" "$rc" <<'PY'
import json, sys
summary, start, end, peak_kib, rc = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
c = json.load(open(summary))["cases"][0]
gpu_s = (c["timing"]["median_us"] * (c["timing"]["iterations"] + 2)) / 1e6  # timed + warm-up + verify forwards
print(f"rc {rc}  wall {end - start:.2f} s  GPU work ~{gpu_s:.2f} s  peak RSS {peak_kib / 1024:.0f} MiB  "
      f"{c['status']}  median {c['timing']['median_us'] / 1e3:.1f} ms  {c['timing']['tflops']:.0f} TFLOP/s  "
      f"verified {c['verification'].get('rows', 0)} rows, rel.err {c['verification']['relative_error']:.2e}")
PY
done
