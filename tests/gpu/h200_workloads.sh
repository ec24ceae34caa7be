#!/usr/bin/env bash
# Device call: the LLM workloads end to end (configs/llm.json), GQA beside PyTorch's enable_gqa in
# one call (configs/perf_gqa.json + docs/perf/torch_gqa_bench.py), and the sample recorded as a
# gzip trace with its HTML report. Outputs under $OUT (few files: the device call brings back 8).
set -uo pipefail
B=${BUILD:-build}
OUT=${OUT:-/tmp/attnprof-workloads}
mkdir -p "$OUT"
A="$B/app/attnprof"
echo "=== llm ($(date +%T))"
"$A" run --config configs/llm.json --out "$OUT/llm" --trace-format json.gz --html "$OUT/llm.html" > "$OUT/llm.txt" 2> "$OUT/llm.err"
echo "llm rc=$?"; grep -E "failed|skipped" "$OUT/llm.txt" | head -20
echo "=== gqa beside PyTorch ($(date +%T))"
"$A" run --config configs/perf_gqa.json --out "$OUT/gqa" --quiet > "$OUT/gqa.txt" 2> "$OUT/gqa.err"; echo "gqa rc=$?"
PYTHONUNBUFFERED=1 timeout 300 python3 docs/perf/torch_gqa_bench.py --compare "$OUT/gqa/summary.json" > "$OUT/gqa_torch.md" 2>&1
echo "torch rc=$?"; cat "$OUT/gqa_torch.md"
"$A" run --config configs/perf_gqa.json --out "$OUT/gqa2" --quiet > /dev/null 2>&1
python3 - "$OUT/gqa2/summary.json" <<'PY'
import json, sys
for c in json.load(open(sys.argv[1]))["cases"]:
    print("second run:", c["label"], c["status"], round(c["timing"]["median_us"], 1), "us", round(c["timing"]["tflops"]), "TFLOP/s")
PY
echo "=== sample ($(date +%T))"
"$A" run --config configs/sample.json --out "$OUT/sample" --trace-format json.gz --html "$OUT/sample.html" > "$OUT/sample.txt" 2>&1
echo "sample rc=$?"
(cd "$OUT" && tar czf workloads.tgz llm.txt llm.err llm.html llm/summary.json gqa/summary.json gqa2/summary.json sample.txt sample.html sample/summary.json sample/trace.json.gz && ls -la workloads.tgz)
cat "$OUT/llm.txt"
