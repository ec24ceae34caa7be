#!/usr/bin/env bash
# The closing device call: every GPU test on the final build, the default run, the CI baseline
# (configs/ci.json, `check --update`), and the sample recorded as a gzip trace with its HTML
# report. Everything lands in $OUT/final.tgz (the device call brings back few files).
set -uo pipefail
B=${BUILD:-build}
OUT=${OUT:-/tmp/attnprof-final}
W=$OUT/final
mkdir -p "$W"
A="$B/app/attnprof"
OUT=$W tests/gpu/h200_check.sh tests correctness default 2>&1 | grep -vE "^(math|manual|efficient|flash|cudnn)[: ].* (ok|skipped)" | head -60
echo "=== recordings ($(date +%T))"
"$A" run --config configs/sample.json --out "$W/sample" --trace-format json.gz --html "$W/sample/report.html" \
  > "$W/sample.txt" 2>&1; echo "sample rc=$?"
"$A" report "$W/sample/trace.json.gz" --out "$W/sample/report-summary.json" > /dev/null 2>&1; echo "report of the gzip trace rc=$?"
"$A" run --config configs/ci.json --out "$W/ci" --quiet > "$W/ci.txt" 2>&1; echo "ci rc=$?"
"$A" check --baseline "$W/h200.json" "$W/ci/summary.json" --update > /dev/null; echo "baseline rc=$?"
"$A" check --baseline "$W/h200.json" "$W/ci/summary.json" --expectations > "$W/check.txt"; echo "check rc=$?"
echo "=== profile: a process that initialises CUDA and launches nothing is listed, not a case"
"$A" profile --out "$W/profile" -- python3 -c "import subprocess, sys, torch
subprocess.run([sys.executable, '-c', 'import torch; torch.zeros(1).pin_memory(); print(torch.cuda.device_count())'])
x = torch.ones(1024, device='cuda') * 2; torch.cuda.synchronize()" > "$W/profile.txt" 2> "$W/profile.err"
echo "profile rc=$?"; grep -E "initialised CUDA|pid |sm_" "$W/profile.err" "$W/profile.txt" | head -8
rm -f "$W"/ci/trace.json "$W"/logs/default/trace.json
(cd "$OUT" && tar czf final.tgz final && ls -la final.tgz)
