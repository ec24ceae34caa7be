#!/usr/bin/env bash
# One sitting on an NVIDIA H200 or H100: correctness, sanitizers, performance side by side with
# PyTorch. Run from the repo root with the build folder carried; logs go to $OUT.
# Usage: docs/perf/perf_steps.sh [steps...]   steps: tests correctness sanitize sanitize_each perf torch default
set -uo pipefail
OUT=${OUT:-/tmp/attnprof-out}
B=${BUILD:-build}
mkdir -p "$OUT"
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(tests correctness sanitize perf torch)
CUDNN919=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib

for step in "${steps[@]}"; do
  echo "=== $step ($(date +%T))"
  case "$step" in
    tests)
      for t in gpu_collector_test gpu_run_test; do timeout 120 "$B/tests/$t" > "$OUT/$t.log" 2>&1; echo "$t rc=$?"; done ;;
    correctness)
      # every backend against the float64 reference; summary of failures only
      timeout 300 "$B/tests/gpu_backend_correctness_test" --gtest_filter="${FILTER:-*}" > "$OUT/correctness.log" 2>&1
      echo "correctness rc=$?: $(grep -c '^\[       OK' "$OUT/correctness.log") ok, $(grep -c '^\[  SKIPPED' "$OUT/correctness.log") skipped, $(grep -c '^\[  FAILED' "$OUT/correctness.log") failed lines"
      grep -E "Failure|^\[  FAILED" -A4 "$OUT/correctness.log" | grep -vE "^--$" | head -40 ;;
    sanitize)
      for tool in memcheck racecheck; do
        timeout 240 compute-sanitizer --tool $tool --error-exitcode 9 "$B/tests/gpu_backend_correctness_test" \
          --gtest_filter="${SANITIZE_FILTER:-*flash*1x2x17x1000x*:*efficient*1x2x17x1000x*:*flash*2x2x129x257x*:*efficient*2x2x129x257x*}" \
          > "$OUT/sanitize_$tool.log" 2>&1
        echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize_$tool.log" | tail -1)"
        grep -E "^========= (Error|Warning|Race|Invalid)" -A6 "$OUT/sanitize_$tool.log" | head -24
      done ;;
    sanitize_each)
      # memcheck and racecheck per backend, one process each (a slow library module cannot
      # starve the others): odd lengths, seq_q != seq_kv, both causal settings, every head dim.
      for b in ${SANITIZE_BACKENDS:-math manual_* cudnn efficient flash_fa2 flash_hopper}; do
        for tool in memcheck racecheck; do
          timeout "${SANITIZE_TIMEOUT:-80}" compute-sanitizer --tool $tool --error-exitcode 9 \
            "$B/tests/gpu_backend_correctness_test" --gtest_filter="*Reference/${b}_bf16_*_2x2x129x257x*" \
            > "$OUT/sanitize_${b//\*/}_$tool.log" 2>&1
          echo "$b $tool rc=$? $(grep -c '^\[       OK' "$OUT/sanitize_${b//\*/}_$tool.log") ok, $(grep -c '^\[  FAILED' "$OUT/sanitize_${b//\*/}_$tool.log") failed; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize_${b//\*/}_$tool.log" | tail -1)"
          grep -E "^========= (Error|Warning|Race|Invalid)" -A6 "$OUT/sanitize_${b//\*/}_$tool.log" | head -12
        done
      done ;;
    sass)
      # per kernel: tensor-core MMAs (mma.sync's HMMA, flash:hopper's wgmma as HGMMA), ldmatrix, and
      # local-memory traffic (spills) in the shipped code
      cuobjdump --dump-sass "$B/app/attnprof" > "$OUT/sass.txt" 2>&1
      awk '/Function :/ {f=$3} /HMMA/ {h[f]++} /HGMMA/ {g[f]++} /LDSM/ {l[f]++} /LDL|STL/ {s[f]++} /MUFU.EX2/ {m[f]++}
           END {for (f in h) k[f]; for (f in g) k[f];
                for (f in k) if (f ~ /flash|efficient/) printf "%-90s HMMA %5d HGMMA %4d LDSM %4d MUFU.EX2 %4d LDL/STL %d\n", substr(f,1,90), h[f], g[f], l[f], m[f], s[f]}' "$OUT/sass.txt" | sort ;;
    cudnn_kernels)
      PYTHONUNBUFFERED=1 timeout 200 python3 docs/perf/torch_sdpa_bench.py --kernel-times --backends "${TORCH_BACKENDS:-cudnn}" > "$OUT/torch_kernels.jsonl" 2> "$OUT/torch_kernels.err"
      echo "torch kernel times rc=$?"; cut -c1-300 "$OUT/torch_kernels.jsonl" ;;
    perf)
      "$B/app/attnprof" run --config configs/perf_h200.json --out "$OUT/perf" --quiet > "$OUT/perf.txt" 2> "$OUT/perf.err"
      echo "perf rc=$?"; head -30 "$OUT/perf.txt" ;;
    eager)
      "$B/app/attnprof" run --config configs/perf_h200_eager.json --out "$OUT/eager" --quiet > "$OUT/eager.txt" 2> "$OUT/eager.err"
      echo "eager rc=$?"; head -16 "$OUT/eager.txt" ;;
    cudnn919)
      LD_LIBRARY_PATH=$CUDNN919 "$B/app/attnprof" run --config configs/perf_h200.json --backends cudnn \
        --out "$OUT/cudnn919" --quiet > "$OUT/cudnn919.txt" 2> "$OUT/cudnn919.err"
      echo "cudnn 9.19 rc=$?"; head -12 "$OUT/cudnn919.txt" ;;
    torch)
      PYTHONUNBUFFERED=1 timeout 300 python3 docs/perf/torch_sdpa_bench.py > "$OUT/torch.jsonl" 2> "$OUT/torch.err"
      echo "torch rc=$?"
      python3 docs/perf/compare_torch.py "$OUT/torch.jsonl" "$OUT"/perf/summary.json $( [ -f "$OUT/eager/summary.json" ] && echo "$OUT/eager/summary.json") | tee "$OUT/ratios.md" ;;
    default)
      "$B/app/attnprof" run --out "$OUT/default" > "$OUT/default.txt" 2> "$OUT/default.err"; echo "default rc=$?"; tail -40 "$OUT/default.txt" ;;
    pack)
      (cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz --exclude='*/trace.json' . && ls -la logs.tgz) ;;
    *) echo "unknown step $step" ;;
  esac
done
