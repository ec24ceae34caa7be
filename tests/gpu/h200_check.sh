#!/usr/bin/env bash
# One device call's checks on the lent H200, after tests/gpu/unpack_build.sh: every GPU test (a
# line each, failures quoted), the set-up cost of a long-context case, the default run. Logs are
# packed into $OUT/logs.tgz (the device call brings back few files).
# Usage: tests/gpu/h200_check.sh [steps...]   steps: tests correctness setup default (all by default)
set -uo pipefail
B=${BUILD:-build}
OUT=${OUT:-/tmp/attnprof-check}
L=$OUT/logs
mkdir -p "$L"
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(tests correctness setup default)
for step in "${steps[@]}"; do
  echo "=== $step ($(date +%T))"
  case "$step" in
    tests)
      for t in ${TESTS:-gpu_inputs_test gpu_collector_test gpu_run_test gpu_flash_test gpu_faults_test gpu_metrics_test \
                gpu_multi_device_test gpu_profile_test}; do
        timeout "${TEST_TIMEOUT:-300}" "$B/tests/$t" > "$L/$t.log" 2>&1
        echo "$t rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$L/$t.log" | tr '\n' ' ')"
        grep -E '^\[  FAILED|Failure$' -A4 "$L/$t.log" | grep -v '^--$' | head -24
      done ;;
    correctness)
      timeout 500 "$B/tests/gpu_backend_correctness_test" --gtest_filter="${FILTER:-*}" > "$L/correctness.log" 2>&1
      echo "correctness rc=$? $(grep -c '^\[       OK' "$L/correctness.log") ok, $(grep -c '^\[  SKIPPED' "$L/correctness.log") skipped, $(grep -c '^\[  FAILED' "$L/correctness.log") failed lines"
      grep -E '^\[  FAILED|Failure$' -A4 "$L/correctness.log" | grep -v '^--$' | head -40 ;;
    setup)
      OUT=$L/setup docs/perf/setup_cost.sh "$B" "${ROUNDS:-2}" ;;
    default)
      "$B/app/attnprof" run --out "$L/default" > "$L/default.txt" 2> "$L/default.err"
      echo "default rc=$?"; cat "$L/default.txt" ;;
    *) echo "unknown step $step" ;;
  esac
done
(cd "$OUT" && tar czf logs.tgz --exclude='*/trace.json' logs && ls -la logs.tgz)
