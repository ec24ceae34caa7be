#!/usr/bin/env bash
# GPU steps for issue 19 (decode, paged caches, ragged batches). `tests` runs the GPU tests of
# the ragged and paged layouts and the decode benchmark beside PyTorch in one call; `llm` runs
# configs/llm.json end to end (its exit code, the findings) and `attnprof backends`.
# `tune` times the decode kernel at the heuristic's split count and others (ATTNPROF_DECODE_SPLITS,
# lib/backends/flash.cpp) beside PyTorch; `splits` does the same over batches of 2 to 48 sequences
# (16 to 384 blocks of one split), where the split rule decides between one wave and none;
# `cudnn_ragged` chases the cudnn ragged prefill's illegal address (compute-sanitizer memcheck).
# Usage (on the device, after tests/gpu/unpack_build.sh): decode_ragged_steps.sh tests|llm|tune|splits|cudnn_ragged
set -uo pipefail
B=${BUILD:-build}
OUT=${OUT:-/tmp/attnprof-issue19}
mkdir -p "$OUT"
A="$B/app/attnprof"
# time_splits ROUND "B H HKV SQ SKV D:COUNT COUNT ..." ...: the decode bench at each shape, once
# per split count (`default` is the rule's choice, the others forced through ATTNPROF_DECODE_SPLITS).
time_splits() {
  local round=$1 shape dims splits s_env
  shift
  for shape in "$@"; do
    dims=${shape%%:*}
    for splits in ${shape#*:}; do
      [ "$splits" = default ] && s_env="" || s_env=$splits
      printf "r%s splits=%-7s " "$round" "$splits"
      # shellcheck disable=SC2086  # the shape is six words on purpose
      ATTNPROF_DECODE_SPLITS=$s_env "$B/tests/attnprof_decode_bench" $dims 0 uniform none 300 2>&1 | tail -1
    done
  done
}
case "${1:-tests}" in
  tests)
    for t in inputs decode flash cudnn ragged_backends; do
      [ -x "$B/tests/gpu_${t}_test" ] || { echo "no gpu_${t}_test"; continue; }
      echo "=== gpu_${t}_test ($(date +%T))"
      "$B/tests/gpu_${t}_test" > "$OUT/${t}.log" 2>&1; echo "rc=$?"
      grep -E "^\[  (PASSED|FAILED|SKIPPED) *\]|tests? from .* ran" "$OUT/${t}.log" | head -12
    done
    echo "=== correctness: ragged and paged, every backend ($(date +%T))"
    "$B/tests/gpu_backend_correctness_test" --gtest_filter='RaggedAndPaged/*' > "$OUT/ragged_correctness.log" 2>&1
    echo "rc=$?"; grep -E "^\[  (PASSED|FAILED) *\]|^\[  FAILED|tests? from .* ran" "$OUT/ragged_correctness.log" | head -30
    echo "skipped: $(grep -c '^\[  SKIPPED \]' "$OUT/ragged_correctness.log")"
    echo "=== perf_decode beside PyTorch ($(date +%T))"
    "$A" run --config configs/perf_decode.json --out "$OUT/decode" --quiet > "$OUT/decode.txt" 2>&1; echo "rc=$?"
    PYTHONUNBUFFERED=1 timeout 240 python3 docs/perf/torch_decode_bench.py --compare "$OUT/decode/summary.json" \
      > "$OUT/decode_torch.md" 2>&1; echo "torch rc=$?"; cat "$OUT/decode_torch.md"
    python3 - "$OUT/decode/summary.json" <<'PY'
import json, sys
for c in json.load(open(sys.argv[1]))["cases"]:
    r = c.get("roofline", {})
    print(c["label"], c["status"], round(c["timing"]["median_us"], 1), "us", round(r.get("gbps", 0)), "GB/s",
          c.get("kernels_per_iter", ""), "kernels/iter")
PY
    (cd "$OUT" && tar czf issue19_tests.tgz *.log decode.txt decode_torch.md decode/summary.json && ls -la issue19_tests.tgz)
    ;;
  llm)
    echo "=== backends ($(date +%T))"
    "$A" backends > "$OUT/backends.txt" 2>&1; echo "rc=$?"; grep -E "^[a-z]|workloads|rejects" "$OUT/backends.txt" | head -40
    echo "=== llm ($(date +%T))"
    "$A" run --config configs/llm.json --out "$OUT/llm" --trace-format json.gz --html "$OUT/llm.html" > "$OUT/llm.txt" 2> "$OUT/llm.err"
    echo "llm rc=$?"
    grep -cE " ok " "$OUT/llm.txt"; grep -E "failed|skipped" "$OUT/llm.txt" | head -30
    (cd "$OUT" && tar czf issue19_llm.tgz backends.txt llm.txt llm.err llm.html llm/summary.json && ls -la issue19_llm.tgz)
    cat "$OUT/llm.txt" | head -150
    ;;
  tune)
    echo "=== decode variants: the heuristic's splits against others, two rounds ($(date +%T))"
    for round in 1 2; do
      time_splits "$round" "8 32 8 1 32768 128:default 8" "64 32 8 1 4096 128:default" "1 32 8 1 131072 128:default 33"
    done
    echo "=== PyTorch, same call ($(date +%T))"
    PYTHONUNBUFFERED=1 timeout 200 python3 tests/perf/decode_torch.py 2>&1 | grep "^torch"
    ;;
  splits)
    echo "=== split counts across batch sizes (bf16, 32/8 heads, d128), two rounds ($(date +%T))"
    shapes=("2 32 8 1 65536 128:default 8 16" "4 32 8 1 32768 128:default 4 16" "8 32 8 1 32768 128:default 2 1"
            "12 32 8 1 8192 128:default 1 2" "16 32 8 1 4096 128:default 1 4" "24 32 8 1 4096 128:default 1 2"
            "32 32 8 1 4096 128:default 2" "48 32 8 1 4096 128:default 1 3")
    torch_shapes=()
    for shape in "${shapes[@]}"; do read -r b h hkv sq skv d <<< "${shape%%:*}"; torch_shapes+=("$b,$h,$hkv,$sq,$skv,$d"); done
    for round in 1 2; do
      time_splits "$round" "${shapes[@]}"
      echo "=== r$round PyTorch ($(date +%T))"
      PYTHONUNBUFFERED=1 timeout 200 python3 tests/perf/decode_torch.py --backends flash,cudnn "${torch_shapes[@]}" 2>&1 | grep "^torch"
    done
    ;;
  cudnn_ragged)
    R="b=4,h=32,hkv=8,sq=4096,skv=4096,d=128,causal=bottom_right,lq=4096:2048:1537:319,lkv=4096:2048:1537:319"
    echo "=== the ragged prefill alone ($(date +%T))"
    "$A" run --shape "$R" --backends cudnn --out "$OUT/cr_alone" --quiet > "$OUT/cr_alone.txt" 2>&1; echo "rc=$?"
    tail -5 "$OUT/cr_alone.txt"
    echo "=== perf_decode, cudnn only ($(date +%T))"
    "$A" run --config configs/perf_decode.json --backends cudnn --out "$OUT/cr_sweep" --quiet > "$OUT/cr_sweep.txt" 2>&1
    echo "rc=$?"; grep -E "failed|error|illegal" "$OUT/cr_sweep.txt" | head -5
    echo "=== memcheck: ragged q whose last sequence is shorter than the longest ($(date +%T))"
    CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
    timeout 300 "$CS" --tool memcheck --print-limit 6 "$B/tests/gpu_backend_correctness_test" \
      --gtest_filter='RaggedAndPaged/*cudnn_bf16_full_*ragged_q_17_300_1*:RaggedAndPaged/*cudnn_bf16_full_*ragged_q_1_17_300__kv_1_17_300__1*' \
      > "$OUT/cr_memcheck.log" 2>&1; echo "rc=$?"
    grep -E "Invalid|out of bounds|ERROR SUMMARY|PASSED|FAILED|bytes after|Address" "$OUT/cr_memcheck.log" | head -24
    ;;
esac
