#!/usr/bin/env bash
# Multi-GPU on a host with two H200s (any host with 2+ GPUs), in one go (< 10 minutes):
#   1. tests/gpu/multi_device_test.cpp (run --devices all, and --isolate)
#   2. attnprof run --devices all on a config: a case list shared out, one trace, one summary
#   3. attnprof profile -- torchrun (2 ranks: SDPA + all_reduce, docs/examples/ddp_sdpa_allreduce.py)
#   4. attnprof merge of the per-rank traces, and attnprof report of the merged trace
# On a one-GPU machine it rehearses the same steps: --isolate for step 2, and two ranks sharing
# the GPU over gloo for step 3 (NCCL refuses two ranks on one device), so no NCCL kernels there.
# Run from the repo root with a build folder; writes to $OUT:
#   multi_gpu.log                     everything below, in order
#   gpu_multi_device_test.log         step 1
#   run_devices_summary.json          step 2's summary.json
#   ddp_summary.json                  step 3's combined summary (one case per rank)
#   ddp_merged_summary.json           step 4's summary of the merged trace
#   ddp_merged_report.json            attnprof report of the merged trace
# Usage: docs/perf/multi_gpu_h200x2.sh [BUILD_DIR] [CONFIG]   (default build-multi, configs/default.json)
set -uo pipefail
B=${1:-build-multi}
CONFIG=${2:-configs/default.json}
OUT=${OUT:-/tmp/attnprof-multi-gpu-out}
WORK=${WORK:-/tmp/attnprof-multi-gpu-work}
rm -rf "$WORK"
mkdir -p "$OUT" "$WORK"
export PYTHONUNBUFFERED=1
# NVLink multicast must stay off on the hosts this is tested on (NCCL's NVLS algorithms,
# PyTorch's symmetric memory, NVSHMEM); the example script sets the same defaults itself.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
exec > >(tee "$OUT/multi_gpu.log") 2>&1
A="$B/app/attnprof"
step() { echo; echo "=== $* ($(date +%T))"; }

step "machine"
nvidia-smi -L
nvidia-smi topo -m 2>/dev/null | head -12
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version(), "gpus", torch.cuda.device_count())'
GPUS=$(nvidia-smi -L | grep -c '^GPU ')
echo "NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE TORCH_SYMM_MEM_DISABLE_MULTICAST=$TORCH_SYMM_MEM_DISABLE_MULTICAST NVSHMEM_DISABLE_NVLS=$NVSHMEM_DISABLE_NVLS GPUS=$GPUS"
ldd "$A" "$B/lib/inject/libattnprof_inject.so" | grep "not found" && echo "MISSING LIBRARIES: fix before reading further"

step "1. gpu_multi_device_test"
timeout 500 "$B/tests/gpu_multi_device_test" > "$OUT/gpu_multi_device_test.log" 2>&1
echo "gpu_multi_device_test rc=$?"
grep -E "^\[  (PASSED|FAILED|  OK) |Failure|Expected|Which is" "$OUT/gpu_multi_device_test.log" | head -40

step "2. attnprof run --devices all --config $CONFIG"
ISOLATE=(); [ "$GPUS" -lt 2 ] && ISOLATE=(--isolate)
timeout 500 "$A" run --config "$CONFIG" --devices all "${ISOLATE[@]}" --out "$WORK/run_devices"
echo "attnprof run --devices all rc=$?"
cp "$WORK/run_devices/summary.json" "$OUT/run_devices_summary.json" 2>/dev/null
ls -la "$WORK/run_devices"
python3 - "$WORK/run_devices" <<'PY'
import collections, json, sys
d = sys.argv[1]
summary = json.load(open(f"{d}/summary.json"))
per_gpu = collections.Counter(c["device"] for c in summary["cases"])
print("cases per GPU:", dict(sorted(per_gpu.items())), " statuses:", dict(collections.Counter(c["status"] for c in summary["cases"])))
trace = json.load(open(f"{d}/trace.json"))
names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e.get("ph") == "M" and e.get("name") == "process_name"}
for pid, name in sorted(names.items()):
    print(f"  pid {pid:>10}: {name}")
kernel_pids = collections.defaultdict(set)
for e in trace["traceEvents"]:
    if e.get("ph") == "X" and e.get("cat") == "kernel" and "case index" in e["args"]:
        kernel_pids[e["args"]["case index"]].add(e["pid"])
wrong = [c["label"] for i, c in enumerate(summary["cases"]) if c["status"] == "ok" and kernel_pids[i] != {c["device"]}]
print("every case's kernels on its own GPU's track:", "yes" if not wrong else f"NO: {wrong}")
starts = [e["id"] for e in trace["traceEvents"] if e.get("ph") == "s"]
ends = {e["id"] for e in trace["traceEvents"] if e.get("ph") == "f"}
print(f"flows: {len(starts)} starts, unique {len(set(starts)) == len(starts)}, all ended {set(starts) == ends}")
PY

step "3. attnprof profile -- torchrun: SDPA + all_reduce on every rank"
if [ "$GPUS" -ge 2 ]; then NPROC=2; BACKEND=nccl; else NPROC=2; BACKEND=gloo; fi
timeout 400 "$A" profile --out "$WORK/ddp" -- python3 -m torch.distributed.run --standalone --nproc_per_node=$NPROC \
  docs/examples/ddp_sdpa_allreduce.py --backend $BACKEND --steps 10
echo "attnprof profile (torchrun, $NPROC ranks, $BACKEND) rc=$?"
ls -la "$WORK/ddp"
cp "$WORK/ddp/summary.json" "$OUT/ddp_summary.json" 2>/dev/null

step "4. attnprof merge of the per-rank traces"
"$A" merge "$WORK/ddp" --out "$WORK/ddp/trace-merged.json"
echo "attnprof merge rc=$?"
cp "$WORK/ddp/summary-merged.json" "$OUT/ddp_merged_summary.json" 2>/dev/null
python3 - "$WORK/ddp/trace-merged.json" <<'PY'
import collections, json, sys
trace = json.load(open(sys.argv[1]))
names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e.get("ph") == "M" and e.get("name") == "process_name"}
for pid, name in sorted(names.items()):
    print(f"  pid {pid:>10}: {name[:100]}")
for i in trace["attnprof"]["inputs"]:
    print(f"  {i['label']:>8}: {i['path']}  clock shift {i['clock shift ns'] / 1e6:+.3f} ms, cases {i['first case']}+{i['cases']}")
kernels = collections.Counter()
for e in trace["traceEvents"]:
    if e.get("ph") == "X" and e.get("cat") == "kernel":
        kernels[(names.get(e["pid"], e["pid"]).split(" / ")[0], "nccl" in e["name"].lower())] += 1
print("kernels by (rank, nccl):", dict(kernels))
starts = [e["id"] for e in trace["traceEvents"] if e.get("ph") == "s"]
print(f"flows: {len(starts)} starts, unique {len(set(starts)) == len(starts)}")
for c in trace["attnprof"]["summary"]["cases"]:
    p = c["per_iter"]
    print(f"  {c['label']:<28} GPU {c['device']}  kernels/it {p['kernels']:g}  nccl/it {p.get('communication_kernels', 0):g}"
          f"  nccl us/it {p.get('communication_us', 0):.1f}  busy us/it {p['gpu_busy_us']:.1f}")
    for f in c["findings"]:
        if f["kind"] == "communication":
            print("     finding:", f["message"])
PY

step "attnprof report of the merged trace (should list the same cases)"
"$A" report "$WORK/ddp/trace-merged.json" --out "$OUT/ddp_merged_report.json" --format md
echo "attnprof report rc=$?"
step "done"
