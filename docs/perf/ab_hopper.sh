#!/usr/bin/env bash
# A/B of attnprof binaries on flash:hopper in one sitting on one machine (timings drift between runs):
# carry/attnprof_a.xz (the previous version) against build/app/attnprof (b), and every other
# carry/attnprof_<x>.xz (c, d, ...) present, ROUNDS rounds (2 by default), interleaved, with our
# cudnn in every round. One line per run: the median kernel time (us) of each case of the config,
# in its order, and the cases whose status is not ok (a failed verification among them).
# Usage (device, after tests/gpu/unpack_build.sh):
#   [ROUNDS=n] docs/perf/ab_hopper.sh [config]
set -uo pipefail
OUT=${OUT:-/tmp/attnprof-ab}
CONFIG=${1:-configs/perf_h200.json}
mkdir -p "$OUT"
others=()
for packed in carry/attnprof_*.xz; do
  x=$(basename "$packed" .xz)
  x=${x#attnprof_}
  xz -dc "$packed" > "$OUT/attnprof_$x" && chmod +x "$OUT/attnprof_$x"
  [ "$x" != a ] && others+=("$x")
done
run() {  # name binary backend
  timeout 150 "$2" run --config "$CONFIG" --backends "$3" --out "$OUT/$1" --quiet > "$OUT/$1.txt" 2>&1 || echo "$1: exit $?"
  python3 - "$OUT/$1/summary.json" "$1" <<'PY'
import json, sys
cases = json.load(open(sys.argv[1]))["cases"]
bad = [f'{i}:{c.get("status")}' for i, c in enumerate(cases) if c.get("status") != "ok"]
print(f"{sys.argv[2]:<8}", " ".join(f'{c.get("timing", {}).get("median_us", 0):8.1f}' for c in cases),
      f"  not ok: {' '.join(bad)}" if bad else "")
PY
}
python3 - "$CONFIG" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
print("cases:", ", ".join(f'{s["batch"]}x{s["heads"]}x{s["seq_q"]}x{s["seq_kv"]}x{s["head_dim"]} {m}'
                          for s in c["shapes"] for m in ("nc" if not x else "c" for x in c.get("causal", [False]))))
PY
for round in $(seq "${ROUNDS:-2}"); do
  run "a$round" "$OUT/attnprof_a" flash:hopper
  run "b$round" build/app/attnprof flash:hopper
  for x in "${others[@]}"; do run "$x$round" "$OUT/attnprof_$x" flash:hopper; done
  run "cudnn$round" build/app/attnprof cudnn
done
