#!/usr/bin/env bash
# A/B of attnprof binaries on the backward (flash:fa2 and efficient share its kernel body) in one
# sitting on one machine (timings drift between machines and runs): carry/attnprof_a.xz, carry/attnprof_b.xz and, when
# present, carry/attnprof_c.xz to carry/attnprof_e.xz, ROUNDS rounds each (default 2), interleaved; then PyTorch's
# backward beside the last round (docs/perf/torch_backward_bench.py). One line per run: the median kernel time (us) of
# each case of configs/perf_backward.json, in its order.
# Usage (device, after tests/gpu/unpack_build.sh): docs/perf/ab_backward.sh [config]
# Work files go to AB_DIR (default /tmp/attnprof-ab), not to $OUT, whose files
# (the unpacked binaries among them) would all be copied back.
set -uo pipefail
OUT=${AB_DIR:-/tmp/attnprof-ab}
CONFIG=${1:-configs/perf_backward.json}
mkdir -p "$OUT"
names=()
for v in a b c d e; do
  rm -f "$OUT/attnprof_$v"
  [ -f "carry/attnprof_$v.xz" ] && xz -dc "carry/attnprof_$v.xz" > "$OUT/attnprof_$v" && chmod +x "$OUT/attnprof_$v" && names+=("$v")
done
run() {  # name binary
  timeout 200 "$2" run --config "$CONFIG" --out "$OUT/$1" --quiet > "$OUT/$1.txt" 2>&1 || echo "$1: exit $?"
  python3 - "$OUT/$1/summary.json" "$1" <<'PY'
import json, sys
cases = json.load(open(sys.argv[1]))["cases"]
print(f"{sys.argv[2]:<4}", " ".join(f'{c.get("timing", {}).get("median_us", 0):7.1f}' for c in cases))
PY
}
python3 - "$OUT" "$CONFIG" <<'PY'
import json, sys
c = json.load(open(sys.argv[2]))
print("cases:", ", ".join(f'{b} {s["seq_q"]}x{s["head_dim"]} {"c" if x else "nc"}'
                          for b in c["backends"] for s in c["shapes"] for x in c["causal"]))
PY
ROUNDS=${ROUNDS:-2}
for round in $(seq 1 "$ROUNDS"); do
  for v in "${names[@]}"; do run "$v$round" "$OUT/attnprof_$v"; done
done
PYTHONUNBUFFERED=1 timeout 300 python3 docs/perf/torch_backward_bench.py --backends efficient,flash \
  --compare "$OUT/${names[-1]}$ROUNDS/summary.json" 2>&1 | grep -v Warning | tail -20
