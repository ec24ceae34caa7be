#!/usr/bin/env bash
# Device call: the cudnn backend's workload tests under the system cuDNN (9.14 on the lent H200)
# and PyTorch's 9.19, and the probe of what cuDNN gives for rows that see no key.
set -uo pipefail
B=${BUILD:-build}
OUT=${OUT:-/tmp/attnprof-cudnn}
mkdir -p "$OUT/cudnn"
CUDNN919=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib
for L in system "$CUDNN919"; do
  tag=$([ "$L" = system ] && echo 914 || echo 919)
  lib=$([ "$L" = system ] && echo "" || echo "$L")
  LD_LIBRARY_PATH=$lib timeout 150 "$B/tests/gpu_cudnn_test" > "$OUT/cudnn/test_$tag.log" 2>&1
  echo "cudnn $tag gpu_cudnn_test rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/cudnn/test_$tag.log" | tr '\n' ' ')"
  grep -E '^\[  FAILED|Failure$' -A4 "$OUT/cudnn/test_$tag.log" | grep -v '^--$' | head -16
  LD_LIBRARY_PATH=$lib timeout 200 "$B/tests/gpu_backend_correctness_test" --gtest_filter='*cudnn*:*Reject*' > "$OUT/cudnn/correct_$tag.log" 2>&1
  echo "cudnn $tag correctness rc=$? $(grep -c '^\[       OK' "$OUT/cudnn/correct_$tag.log") ok, $(grep -c '^\[  SKIPPED' "$OUT/cudnn/correct_$tag.log") skipped, $(grep -c '^\[  FAILED' "$OUT/cudnn/correct_$tag.log") failed lines"
  grep -E '^\[  FAILED|Failure$' -A4 "$OUT/cudnn/correct_$tag.log" | grep -v '^--$' | head -16
  grep -h "the plan build rejected" "$OUT/cudnn/correct_$tag.log" | sort | uniq -c | head -5
  LD_LIBRARY_PATH=$lib timeout 100 "$B/tests/gpu_cudnn_test" --gtest_also_run_disabled_tests --gtest_filter='CudnnProbe.*' > "$OUT/cudnn/probe_$tag.log" 2>&1
  echo "cudnn $tag probe rc=$?"; grep -vE '^\[|^$|^Note|^Running' "$OUT/cudnn/probe_$tag.log" | head -12
done
# Packed K/V in decode reads as one-token pages by default; the ragged-offset graph it falls back
# to stays covered too.
ATTNPROF_CUDNN_PACKED_KV=offsets timeout 200 "$B/tests/gpu_backend_correctness_test" --gtest_filter='RaggedAndPaged/*cudnn*' \
  > "$OUT/cudnn/correct_offsets.log" 2>&1
echo "cudnn ragged offsets correctness rc=$? $(grep -c '^\[       OK' "$OUT/cudnn/correct_offsets.log") ok, $(grep -c '^\[  FAILED' "$OUT/cudnn/correct_offsets.log") failed lines"
(cd "$OUT" && tar czf cudnn.tgz cudnn && ls -la cudnn.tgz)
