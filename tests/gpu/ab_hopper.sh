#!/usr/bin/env bash
# A/B of two attnprof binaries on flash:hopper in one device call (the machine drifts between
# calls): carry/attnprof_a.xz (the previous version) against build/app/attnprof, two rounds
# each, interleaved, then our cudnn once. Usage (device, after tests/gpu/unpack_build.sh):
#   tests/gpu/ab_hopper.sh [config]
set -uo pipefail
OUT=${OUT:-/tmp/attnprof-ab}
CONFIG=${1:-configs/perf_h200.json}
mkdir -p "$OUT"
xz -dc carry/attnprof_a.xz > "$OUT/attnprof_a" && chmod +x "$OUT/attnprof_a"
table() {
  python3 - "$1" "$2" <<'PY'
import json, sys
for c in json.load(open(sys.argv[1]))["cases"]:
    t = c.get("timing", {}).get("median_us", 0)
    f = c.get("roofline", {}).get("flops", 0)
    print(f'{sys.argv[2]:>6} {c["label"]:<52} {c["status"]:<7} {t:9.1f} us {f / max(t, 1e-9) / 1e6:7.1f} TFLOP/s')
PY
}
for round in 1 2; do
  for v in a b; do
    bin=build/app/attnprof; [ "$v" = a ] && bin="$OUT/attnprof_a"
    timeout 120 "$bin" run --config "$CONFIG" --backends flash:hopper --out "$OUT/$v$round" --quiet > "$OUT/$v$round.txt" 2>&1
    echo "$v$round rc=$?"; table "$OUT/$v$round/summary.json" "$v$round"
  done
done
timeout 120 build/app/attnprof run --config "$CONFIG" --backends cudnn --out "$OUT/cudnn" --quiet > "$OUT/cudnn.txt" 2>&1
echo "cudnn rc=$?"; table "$OUT/cudnn/summary.json" cudnn
