#!/usr/bin/env bash
# `attnprof profile` and `attnprof report` on an H200, in one go (< 5 minutes).
# Run from the repo root with a build folder; writes at most 6 files to $OUT:
#   profile_h200.log                  everything below, in order
#   gpu_profile_test.log              tests/gpu/profile_test.cpp (launch_loop under the injection)
#   sdpa_attnprof_summary.json        attnprof profile of docs/examples/sdpa_backends.py
#   sdpa_torch_trace.json             torch.profiler's trace of the same script
#   sdpa_torch_report_summary.json    attnprof report of that trace
#   overhead.log                      docs/perf/profile_overhead.sh, every run
# Usage: docs/perf/profile_h200.sh [BUILD_DIR]    (default build-profile)
set -uo pipefail
B=${1:-build-profile}
OUT=${OUT:-/tmp/attnprof-profile-out}
WORK=${WORK:-/tmp/attnprof-profile-work}
mkdir -p "$OUT" "$WORK"
export PYTHONUNBUFFERED=1
exec > >(tee "$OUT/profile_h200.log") 2>&1
A="$B/app/attnprof"
step() { echo; echo "=== $* ($(date +%T))"; }

step "machine"
nvidia-smi -L
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
ldd "$A" "$B/lib/inject/libattnprof_inject.so" | grep "not found" && echo "MISSING LIBRARIES: fix before reading further"

step "gpu_profile_test (exit code, NVTX cases, children, fork, SIGTERM)"
timeout 400 "$B/tests/gpu_profile_test" > "$OUT/gpu_profile_test.log" 2>&1
echo "gpu_profile_test rc=$?"
grep -E "^\[  (PASSED|FAILED|  OK) |Failure|Expected|Which is|attnprof profile:" "$OUT/gpu_profile_test.log" | head -60

step "attnprof profile -- python3 docs/examples/sdpa_backends.py (counts per call)"
timeout 300 "$A" profile --out "$WORK/sdpa_attnprof" -- python3 docs/examples/sdpa_backends.py --iterations 10
echo "attnprof profile rc=$?"
cp "$WORK/sdpa_attnprof/summary.json" "$OUT/sdpa_attnprof_summary.json" 2>/dev/null
ls -la "$WORK/sdpa_attnprof"
if ! grep -q '"label": "sdpa' "$WORK/sdpa_attnprof/summary.json" 2>/dev/null; then
  # No NVTX case: try NVTX straight into the libcupti PyTorch loaded, to tell forwarding from CUPTI.
  CUPTI=$(python3 -c 'import torch; print(next((l.split()[-1] for l in open("/proc/self/maps") if "libcupti" in l), ""))')
  step "fallback: NVTX_INJECTION64_PATH=$CUPTI (no sdpa case above)"
  NVTX_INJECTION64_PATH=$CUPTI timeout 300 "$A" profile --out "$WORK/sdpa_attnprof_cupti" -- \
    python3 docs/examples/sdpa_backends.py --iterations 10 --causal 1
  echo "fallback rc=$?"
fi

step "python3 docs/examples/sdpa_backends.py --torch-profiler (torch.profiler's counts)"
timeout 300 python3 docs/examples/sdpa_backends.py --iterations 10 --torch-profiler "$WORK/sdpa_torch_trace.json"
echo "torch.profiler rc=$?"
ls -la "$WORK/sdpa_torch_trace.json" && cp "$WORK/sdpa_torch_trace.json" "$OUT/"

step "attnprof report on torch.profiler's trace"
TIME=(); [ -x /usr/bin/time ] && TIME=(/usr/bin/time -v)
"${TIME[@]}" "$A" report "$WORK/sdpa_torch_trace.json" --out "$OUT/sdpa_torch_report_summary.json" 2> "$WORK/report_time.txt"
echo "attnprof report rc=$?"
grep -E "attnprof report|Maximum resident|Elapsed" "$WORK/report_time.txt"

step "the same counts three ways: attnprof profile / attnprof report of torch's trace"
python3 - "$OUT/sdpa_attnprof_summary.json" "$OUT/sdpa_torch_report_summary.json" <<'PY'
import json, sys
def cases(path):
    try:
        return {c["label"]: c for c in json.load(open(path))["cases"]}
    except Exception as e:
        print(f"cannot read {path}: {e}")
        return {}
ours, theirs = cases(sys.argv[1]), cases(sys.argv[2])
print(f"{'case':32} {'attnprof kern/mcpy/mset':>24} {'report(torch) kern/mcpy/mset':>30}  same?")
for label in sorted(set(ours) | set(theirs)):
    row = []
    for c in (ours.get(label), theirs.get(label)):
        row.append("-" if c is None else "{:g}/{:g}/{:g}".format(c["per_iter"]["kernels"], c["per_iter"]["memcpy"], c["per_iter"]["memset"]))
    print(f"{label:32} {row[0]:>24} {row[1]:>30}  {'yes' if row[0] == row[1] else 'NO'}")
PY

step "overhead: unprofiled / attnprof profile / torch.profiler"
WORK="$WORK/overhead" docs/perf/profile_overhead.sh "$B" "$OUT"
step "done"
