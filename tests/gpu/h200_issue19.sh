#!/usr/bin/env bash
# Device calls for issue 19 (decode, paged caches, ragged batches). `tests` runs the GPU tests of
# the ragged and paged layouts and the decode benchmark beside PyTorch in one call; `llm` runs
# configs/llm.json end to end (its exit code, the findings) and `attnprof backends`.
# Usage (on the device, after tests/gpu/unpack_build.sh): h200_issue19.sh tests|llm
set -uo pipefail
B=${BUILD:-build}
OUT=${OUT:-/tmp/attnprof-issue19}
mkdir -p "$OUT"
A="$B/app/attnprof"
case "${1:-tests}" in
  tests)
    for t in inputs decode flash cudnn ragged_backends; do
      [ -x "$B/tests/gpu_${t}_test" ] || { echo "no gpu_${t}_test"; continue; }
      echo "=== gpu_${t}_test ($(date +%T))"
      "$B/tests/gpu_${t}_test" > "$OUT/${t}.log" 2>&1; echo "rc=$?"
      grep -E "^\[  (PASSED|FAILED|SKIPPED) \]|tests? from .* ran" "$OUT/${t}.log" | head -12
    done
    echo "=== correctness: ragged and paged, every backend ($(date +%T))"
    "$B/tests/gpu_backend_correctness_test" --gtest_filter='RaggedAndPaged/*' > "$OUT/ragged_correctness.log" 2>&1
    echo "rc=$?"; grep -E "^\[  (PASSED|FAILED) \]|^\[  FAILED|tests? from .* ran" "$OUT/ragged_correctness.log" | head -30
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
esac
