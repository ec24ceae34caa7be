#!/usr/bin/env bash
# GPU steps for issue 21 (flash:hopper). Usage (on the device, after tests/gpu/unpack_build.sh):
#   hopper_steps.sh tests    flash:hopper against the float64 reference (every case of
#                            gpu_backend_correctness_test that names it)
#   hopper_steps.sh sanitize compute-sanitizer memcheck, racecheck and synccheck on flash:hopper
#                            cases (odd lengths, seq_q != seq_kv, both dtypes and head dims)
#   hopper_steps.sh ladder   configs/perf_h200.json: flash:hopper, flash:fa2 and cudnn, then
#                            PyTorch's flash and cudnn, all in this one call
# (docs/perf/ab_hopper.sh times two builds of flash:hopper against each other.)
set -uo pipefail
B=${BUILD:-build}
OUT=${OUT:-/tmp/attnprof-issue21}
mkdir -p "$OUT"
A="$B/app/attnprof"
table() {
  python3 - "$1" "$2" <<'PY'
import json, sys
for c in json.load(open(sys.argv[1]))["cases"]:
    t = c.get("timing", {}).get("median_us", 0)
    r = c.get("roofline", {})
    print(f'{sys.argv[2]:>10} {c["label"]:<52} {c["status"]:<7} {t:9.1f} us {r.get("flops", 0) / max(t, 1e-9) / 1e6:7.1f} TFLOP/s',
          c.get("reason", "")[:160])
PY
}
case "${1:-tests}" in
  tests)
    echo "=== correctness ($(date +%T))"
    timeout 240 "$B/tests/gpu_backend_correctness_test" --gtest_filter='*hopper*' > "$OUT/correct.log" 2>&1
    echo "rc=$?"
    grep -E "^\[  (PASSED|FAILED) *\]|^\[  FAILED  \]" "$OUT/correct.log" | head -12
    echo "ran: $(grep -c 'flash:hopper.*rel.err' "$OUT/correct.log") flash:hopper cases checked"
    ;;
  sanitize)
    CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
    F='AllBackends/*flash_hopper_bf16_*_2x2x129x257x128*:AllBackends/*flash_hopper_fp16_*_1x2x17x1000x64*'
    F="$F:Workloads/*flash_hopper_bf16_causal_bottom_right_1x8_2x255x33x128*"
    for tool in memcheck racecheck synccheck; do
      echo "=== $tool ($(date +%T))"
      timeout 150 "$CS" --tool $tool --print-limit 6 "$B/tests/gpu_backend_correctness_test" --gtest_filter="$F" \
        > "$OUT/$tool.log" 2>&1
      echo "rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|hazard|PASSED|FAILED|tests? from .* ran" "$OUT/$tool.log" | head -8
    done
    ;;
  ladder)
    echo "=== flash:hopper, flash:fa2 and cudnn ($(date +%T))"
    timeout 200 "$A" run --config configs/perf_h200.json --backends flash,cudnn --out "$OUT/perf" --quiet > "$OUT/perf.txt" 2>&1
    echo "rc=$?"; table "$OUT/perf/summary.json" ours
    echo "=== PyTorch ($(date +%T))"
    timeout 180 python3 docs/perf/torch_sdpa_bench.py --backends flash,cudnn 2>&1 | tail -16
    ;;
esac
