#!/usr/bin/env bash
# The closing device call: every GPU test, the committed recordings (sample trace, CI baseline,
# default run), sanitizers and the collector-cost variants, packed into $OUT/record.tgz with a
# short report on stdout. Run from the repo root with a build (or stripped copy) in $BUILD whose
# absolute test paths point at /work/main/build (a symlink is made when they do not exist).
set -uo pipefail
B=${BUILD:-build}
OUT=${OUT:-/tmp/attnprof-record}
W=/tmp/attnprof-record-work
rm -rf "$W" && mkdir -p "$W" "$OUT"
[ -e /work/main/build ] || { mkdir -p /work/main && ln -sfn "$(realpath "$B")" /work/main/build; }
A="$B/app/attnprof"
echo "== recordings"
"$A" run --config configs/sample.json --out "$W/sample" --quiet > "$W/sample.txt" 2>&1; echo "sample rc=$?"
"$A" run --config configs/ci.json --out "$W/ci" --quiet > "$W/ci.txt" 2>&1; echo "ci rc=$?"
"$A" check --baseline "$W/h200.json" "$W/ci/summary.json" --update > /dev/null; echo "baseline rc=$?"
"$A" check --baseline "$W/h200.json" "$W/ci/summary.json" --expectations --junit "$W/junit.xml" > "$W/check.txt"; echo "check rc=$?"
"$A" run --out "$W/default" > "$W/default.txt" 2> "$W/default.err"; echo "default rc=$?"
echo "== GPU tests"
for t in gpu_collector_test gpu_run_test gpu_faults_test gpu_flash_test gpu_metrics_test gpu_multi_device_test gpu_profile_test gpu_backend_correctness_test; do
  timeout 240 "$B/tests/$t" > "$W/$t.log" 2>&1
  echo "$t rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$W/$t.log" | tr '\n' ' ')"
done
echo "== sanitizers"
OUT=$W SANITIZE_FILTER='*efficient*1x2x17x1000x*:*efficient*2x2x129x257x*:*efficient*1x2x17x17x*:*flash*1x2x17x1000x*:*flash*2x2x129x257x*' \
  tests/gpu/h200_session.sh sanitize 2>&1 | head -6
echo "== collector cost"
WORK=$W/variants bash docs/perf/collector_variants.sh "$B" 2>&1 | tail -8
rm -rf "$W/variants"
(cd "$W" && tar czf "$OUT/record.tgz" --exclude='default/trace.json' --exclude='ci/trace.json' .)
ls -la "$OUT"
