#!/usr/bin/env bash
# A/B of attnprof_decode_bench binaries in one sitting on one machine (timings drift between runs):
# carry/decode_bench_a.xz, carry/decode_bench_b.xz and, when present, _c to _e, on the decode
# shapes of issue 19 (bf16, 32/8 heads, d128; contiguous, and pages of 16 at 64 x 4096), three
# rounds interleaved, each followed by PyTorch's SDPA backends on the same shapes
# (tests/perf/decode_torch.py), so each side has three medians from the same call.
# One line per run: the bench's median time and GB/s.
# Usage (device): docs/perf/ab_decode.sh [calls per run, default 300]
set -uo pipefail
OUT=${AB_DIR:-/tmp/attnprof-ab-decode}
CALLS=${1:-300}
mkdir -p "$OUT"
names=()
for v in a b c d e; do
  rm -f "$OUT/decode_bench_$v"
  [ -f "carry/decode_bench_$v.xz" ] && xz -dc "carry/decode_bench_$v.xz" > "$OUT/decode_bench_$v" &&
    chmod +x "$OUT/decode_bench_$v" && names+=("$v")
done
for round in 1 2 3; do
  for shape in "8 32 8 1 32768 128 0" "64 32 8 1 4096 128 0" "1 32 8 1 131072 128 0" "64 32 8 1 4096 128 16"; do
    for v in "${names[@]}"; do
      printf "r%s %s  " "$round" "$v"
      # shellcheck disable=SC2086  # the shape is five words on purpose
      "$OUT/decode_bench_$v" $shape uniform none "$CALLS" 2>&1 | tail -1
    done
  done
  echo "=== r$round PyTorch ($(date +%T))"
  PYTHONUNBUFFERED=1 timeout 120 python3 tests/perf/decode_torch.py 2>&1 | grep "^torch"
done
