#!/usr/bin/env bash
# GQA against MHA of the same query heads, our backends only, in alternated rounds of
# configs/perf_gqa.json (verification off): per backend and shape the median time of each round.
# Usage (repo root, on the GPU machine): docs/perf/gqa_rounds.sh [build] [rounds]
set -uo pipefail
B=${1:-build}
ROUNDS=${2:-3}
OUT=${OUT:-/tmp/attnprof-gqa}
mkdir -p "$OUT"
for round in $(seq "$ROUNDS"); do
  "$B/app/attnprof" run --config configs/perf_gqa.json --out "$OUT/r$round" --quiet > /dev/null 2>&1
done
python3 - "$OUT" "$ROUNDS" <<'PY'
import json, sys, statistics
out, rounds = sys.argv[1], int(sys.argv[2])
rows = {}
for r in range(1, rounds + 1):
    for c in json.load(open(f"{out}/r{r}/summary.json"))["cases"]:
        rows.setdefault(c["label"], []).append(c["timing"]["tflops"])
for label, t in rows.items():
    print(f"{label:45s} TFLOP/s per round {' '.join(f'{x:6.1f}' for x in t)}  median {statistics.median(t):6.1f}")
# Each backend of the run (variants apart: flash:fa2 and flash:hopper), from its cases' labels.
for backend in dict.fromkeys(label.split(" ")[0] for label in rows):
    for gqa, mha in (("1x32/8x8192x8192x128", "1x32x8192x8192x128"), ("4x32/8x2048x2048x128", "4x32x2048x2048x128")):
        g = rows.get(f"{backend} bf16 causal {gqa}"); m = rows.get(f"{backend} bf16 causal {mha}")
        if g and m:
            ratios = [a / b for a, b in zip(g, m)]
            print(f"{backend:12s} GQA/MHA {gqa:22s} per round {' '.join(f'{x:.3f}' for x in ratios)}  median {statistics.median(ratios):.3f}")
PY
