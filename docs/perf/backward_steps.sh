#!/usr/bin/env bash
# GPU steps for issue 20 (the backward pass). `attribution` profiles PyTorch training steps
# (docs/examples/sdpa_train_step.py: an NVTX range around forward + loss.backward()) and checks,
# from attnprof's own trace, that each case counts the backward kernels PyTorch's autograd thread
# launches, and exactly the kernels launched inside its ranges (docs/perf/check_backward_attribution.py).
# `backward` runs the backward GPU test (float64 reference gradients, run-to-run repeatability) and
# configs/backward.json (both passes, every backend: the ones without a backward skip with a reason).
# Usage (on the device, after tests/gpu/unpack_build.sh): backward_steps.sh attribution|backward
set -uo pipefail
B=${BUILD:-build}
OUT=${OUT:-/tmp/attnprof-issue20}
mkdir -p "$OUT"
A="$B/app/attnprof"
case "${1:-attribution}" in
  attribution)
    for causal in "" "--causal"; do
      dir="$OUT/train${causal:+_causal}"
      echo "=== profile: training steps ${causal:-non-causal} ($(date +%T))"
      "$A" profile --out "$dir" -- python3 docs/examples/sdpa_train_step.py --iterations 5 $causal \
        > "$dir.txt" 2> "$dir.err"; echo "profile rc=$?"
      grep -E "^train|skipped" "$dir.err" | head -8
      grep -E "train " "$dir.txt" | head -8
      python3 docs/perf/check_backward_attribution.py "$dir"; echo "check rc=$?"
    done
    ;;
  backward)
    echo "=== gpu_backward_test ($(date +%T))"
    "$B/tests/gpu_backward_test" > "$OUT/backward_test.log" 2>&1; echo "rc=$?"
    grep -E "^\[  (PASSED|FAILED|SKIPPED) *\]|run to run|dQ .* dK|backward:" "$OUT/backward_test.log" | head -70
    echo "=== configs/backward.json ($(date +%T))"
    "$A" run --config configs/backward.json --out "$OUT/bwd" ${BACKENDS:+--backends $BACKENDS} > "$OUT/bwd.txt" 2> "$OUT/bwd.err"
    echo "rc=$?"; cat "$OUT/bwd.txt" | head -80; tail -5 "$OUT/bwd.err"
    echo "=== PyTorch's backward beside it ($(date +%T))"
    PYTHONUNBUFFERED=1 timeout 300 python3 docs/perf/torch_backward_bench.py --compare "$OUT/bwd/summary.json" 2>&1 \
      | grep -v Warning | tee "$OUT/bwd_torch.md"
    ;;
esac
