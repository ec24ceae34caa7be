#!/usr/bin/env bash
# Every GPU check, on a machine with a GPU, from the repository root after a build (or after
# tests/gpu/unpack_build.sh): each GPU test binary, the README's main job, and the CI gate
# (`run --config configs/ci.json`, then `check --expectations` against the card's baseline).
# Ends with one table: suite, passed, failed, skipped with a listed reason, seconds.
#
# ATTNPROF_REQUIRE_GPU=1 is set for every step: no usable GPU, a driver/runtime mismatch, or a
# test skipped without one of the reasons tests/support/skip_reasons.hpp lists is a failure here.
# A binary whose every test skipped with a listed reason exits 77: shown, not counted as failed.
#
# Usage: tests/gpu/run_all.sh [step...]
#   steps: the GPU test binaries by name (gpu_flash_test ...), "main" (the README's main job),
#   "ci" (the CI gate); no step: all of them. Environment: BUILD (default build), OUT (logs,
#   default /tmp/attnprof-gpu), BASELINE (default configs/baselines/<card>.json, from the GPU's
#   name), TEST_TIMEOUT (seconds per test binary, default 900).
# Exit status: 0 when every step passed, 1 otherwise.
set -uo pipefail
B=${BUILD:-build}
OUT=${OUT:-/tmp/attnprof-gpu}
L=$OUT/logs
mkdir -p "$L"
export ATTNPROF_REQUIRE_GPU=1

card=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
case "$card" in
  *H200*) card_file=h200 ;;
  *H100*) card_file=h100 ;;
  *) card_file=$(echo "${card:-unknown}" | tr 'A-Z ' 'a-z_' | tr -cd 'a-z0-9_') ;;
esac
BASELINE=${BASELINE:-configs/baselines/$card_file.json}

steps=("$@")
if [ ${#steps[@]} -eq 0 ]; then
  for t in "$B"/tests/gpu_*_test; do [ -x "$t" ] && steps+=("$(basename "$t")"); done
  steps+=(main ci)
fi

rows=()
failed_steps=0
# row NAME PASSED FAILED SKIPPED SECONDS RC
row() {
  rows+=("$(printf '%-32s %7s %7s %9s %8s %4s' "$1" "$2" "$3" "$4" "$5" "$6")")
  if { [ "$6" != 0 ] && [ "$6" != 77 ]; } || [ "$3" != 0 ]; then failed_steps=$((failed_steps + 1)); fi
}
# GoogleTest's closing lines: "[  PASSED  ] N tests.", "[  FAILED  ] N tests,", and our main's
# "skipped with reason: N".
count() { grep -E "^\[  $1 +\] [0-9]+ test" "$2" | tail -1 | grep -oE '[0-9]+' | head -1; }

for step in "${steps[@]}"; do
  start=$SECONDS
  log=$L/$step.log
  echo "=== $step ($(date +%T))"
  case "$step" in
    gpu_*_test)
      timeout "${TEST_TIMEOUT:-900}" "$B/tests/$step" > "$log" 2>&1
      rc=$?
      passed=$(count PASSED "$log"); failed=$(count FAILED "$log")
      skipped=$(grep -oE '^skipped with reason: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+')
      [ "$rc" = 124 ] && echo "  timed out after ${TEST_TIMEOUT:-900} s"
      grep -E '^\[  FAILED  \] [A-Za-z]|^SKIPPED|^FAILED|driver|Failure$' "$log" | head -20 | sed 's/^/  /'
      row "$step" "${passed:-0}" "${failed:-0}" "${skipped:-0}" $((SECONDS - start)) "$rc" ;;
    main)
      # The README's main job: the embedded default config.
      "$B/app/attnprof" run --out "$L/main" > "$log" 2>&1
      rc=$?
      ok=$(python3 -c "import json,sys; s=json.load(open(sys.argv[1])); print(sum(c['status']=='ok' for c in s['cases'])), print(sum(c['status']!='ok' for c in s['cases']))" "$L/main/summary.json" 2>/dev/null | tr '\n' ' ')
      read -r passed failed <<< "${ok:-0 0}"
      tail -n 40 "$log" | sed 's/^/  /'
      row "README main job (cases)" "$passed" "$failed" - $((SECONDS - start)) "$rc" ;;
    ci)
      # The gate docs/ci.md describes, against a baseline recorded on this card.
      if [ ! -f "$BASELINE" ]; then
        echo "  no baseline $BASELINE for '$card': record one with"
        echo "  attnprof check --baseline $BASELINE out/ci/summary.json --update"
        row "CI gate (no baseline)" 0 1 - $((SECONDS - start)) 1
        continue
      fi
      "$B/app/attnprof" run --config configs/ci.json --out "$L/ci" > "$log" 2>&1
      run_rc=$?
      "$B/app/attnprof" check --baseline "$BASELINE" "$L/ci/summary.json" --expectations \
        --junit "$L/ci/junit.xml" > "$L/check.log" 2>&1
      rc=$?
      [ "$run_rc" != 0 ] && rc=$run_rc
      cases=$(python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))['cases']))" "$L/ci/summary.json" 2>/dev/null)
      echo "  run rc=$run_rc, check rc=$rc against $BASELINE"
      sed 's/^/  /' "$L/check.log" | tail -n 30
      if [ "$rc" = 0 ]; then row "CI gate (ci.json + check)" "${cases:-0}" 0 - $((SECONDS - start)) 0
      else row "CI gate (ci.json + check)" 0 "${cases:-1}" - $((SECONDS - start)) "$rc"; fi ;;
    *)
      echo "  unknown step $step"
      row "$step (unknown)" 0 1 - 0 2 ;;
  esac
done

echo
echo "GPU: ${card:-none found} ($(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)), $(date -u +%F)"
printf '%-32s %7s %7s %9s %8s %4s\n' suite passed failed skipped seconds rc
printf '%s\n' "${rows[@]}"
[ "$failed_steps" = 0 ] && echo "all ${#rows[@]} steps passed" || echo "$failed_steps of ${#rows[@]} steps failed"
[ "$failed_steps" = 0 ]
