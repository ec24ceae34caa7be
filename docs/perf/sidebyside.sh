#!/usr/bin/env bash
# The performance targets of issues 19, 20 and 21, each beside PyTorch in one sitting on one machine
# (timings drift 10-30% between runs, so a ratio is only taken inside one).
#   forward   issue 21: configs/perf_h200.json with flash:hopper and our cudnn, then PyTorch's
#             cuDNN (CUDA-event time and torch.profiler kernel time); flash:hopper against both
#   decode    issue 19: configs/perf_decode.json (flash, cudnn), then PyTorch's decode backends
#             (torch_decode_bench.py --compare: GB/s, paged against contiguous, ragged against padded);
#             when build/tests/libattnprof_decode_capi.so is there, also our decode kernels and
#             PyTorch's on the same tensors in one process (docs/perf/decode_same_buffers.py)
#   backward  issue 20: configs/perf_backward.json with flash, efficient and cudnn, then PyTorch's
#             backward of the same families (torch_backward_bench.py --compare)
# Usage (on the device, after tests/gpu/unpack_build.sh): sidebyside.sh [forward] [decode] [backward]
# Everything it writes lands in $OUT/sidebyside.tgz (one archive is easier to bring back than many files).
set -uo pipefail
B=${BUILD:-build}
OUT=${OUT:-/tmp/attnprof-sidebyside}
W=$OUT/sidebyside
mkdir -p "$W"
A="$B/app/attnprof"
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(forward decode backward)
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.max.mem --format=csv,noheader
export PYTHONUNBUFFERED=1
for step in "${steps[@]}"; do
  echo "=== $step ($(date +%T))"
  case "$step" in
    forward)
      timeout 200 "$A" run --config configs/perf_h200.json --backends flash:hopper,cudnn --out "$W/fwd" --quiet \
        > "$W/fwd.txt" 2>&1; echo "attnprof rc=$?"
      timeout 150 python3 docs/perf/torch_sdpa_bench.py --backends cudnn --kernel-times --iters 10 \
        > "$W/fwd_torch.jsonl" 2> "$W/fwd_torch.err"; echo "torch rc=$?"
      python3 - "$W/fwd/summary.json" "$W/fwd_torch.jsonl" <<'PY'
import json, sys
torch = {}
for line in open(sys.argv[2]):
    if line.startswith("{"):
        r = json.loads(line)
        torch[(r["shape"], r["causal"])] = r
ours = {}
for c in json.load(open(sys.argv[1]))["cases"]:
    p = c["problem"]
    shape = f'{p["batch"]}x{p["heads"]}x{p["seq_q"]}x{p["seq_kv"]}x{p["head_dim"]}'
    ours[(c["backend"], shape, bool(p["causal"]))] = c
print("| shape | causal | flash:hopper us | our cudnn us | PyTorch cuDNN us (kernel) | vs our cudnn | vs PyTorch kernel |")
print("|---|---|---:|---:|---:|---:|---:|")
for (backend, shape, causal), c in ours.items():
    if backend != "flash:hopper":
        continue
    h = c["timing"]["median_us"] if c["status"] == "ok" else None
    d = ours.get(("cudnn", shape, causal))
    d = d["timing"]["median_us"] if d and d["status"] == "ok" else None
    t = torch.get((shape, causal), {})
    tk = t.get("kernel_us")
    ratio = lambda other: f"{other / h:.3f}x" if h and other else "-"
    print(f'| {shape} | {"yes" if causal else "no"} | {h if h else c["status"]} | {d or "-"} | '
          f'{t.get("median_us", "-")} ({tk or "-"}) | {ratio(d)} | {ratio(tk)} |')
PY
      ;;
    decode)
      timeout 200 "$A" run --config configs/perf_decode.json --out "$W/decode" --quiet > "$W/decode.txt" 2>&1
      echo "attnprof rc=$?"
      timeout 200 python3 docs/perf/torch_decode_bench.py --backends efficient,flash,cudnn \
        --compare "$W/decode/summary.json" > "$W/decode_torch.md" 2>&1; echo "torch rc=$?"
      grep -v Warning "$W/decode_torch.md"
      if [ -f "$B/tests/libattnprof_decode_capi.so" ]; then
        timeout 120 python3 docs/perf/decode_same_buffers.py "$B/tests/libattnprof_decode_capi.so" \
          > "$W/decode_same_buffers.txt" 2>&1; echo "same buffers rc=$?"
        grep -v Warning "$W/decode_same_buffers.txt"
      fi
      ;;
    backward)
      timeout 200 "$A" run --config configs/perf_backward.json --backends flash,efficient,cudnn \
        --out "$W/bwd" --quiet > "$W/bwd.txt" 2>&1; echo "attnprof rc=$?"
      timeout 240 python3 docs/perf/torch_backward_bench.py --backends efficient,flash,cudnn \
        --compare "$W/bwd/summary.json" > "$W/bwd_torch.md" 2>&1; echo "torch rc=$?"
      grep -v Warning "$W/bwd_torch.md"
      ;;
    *) echo "unknown step $step" ;;
  esac
done
find "$W" -name 'trace.json*' -delete
(cd "$OUT" && tar czf sidebyside.tgz sidebyside && ls -la sidebyside.tgz)
