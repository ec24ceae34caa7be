#!/usr/bin/env bash
# Two attnprof builds against each other, one shape per kernel family, for a change that must not
# cost time (a refactor of kernel parameters, say). On the GPU machine: family_ab.sh OLD NEW [ROUNDS]
# (OLD and NEW: attnprof binaries). Each round runs every case old, new, new, old, so neither build
# always runs first; prints each case's median of the runs' median_us, its range, and new/old.
# NOTES.md's 2026-12-07 entry on one parameter struct for every family (H100 80GB HBM3) timed its
# first, second and fifth cases by the same loop, run inline, 12 runs a build: flash:fa2 forward,
# whose cubins were byte-identical, read 0.9993x (the noise to compare the others against).
set -uo pipefail
OLD=$1 NEW=$2 ROUNDS=${3:-3}
S="b=2,h=16,sq=4096,skv=4096,d=128"
cases=("flash:fa2 forward $S" "efficient forward $S" "flash:hopper forward $S" "flash:fa2 backward $S"
       "flash:hopper backward $S" "efficient backward $S" "flash:fa2 forward b=64,h=32,hkv=8,sq=1,skv=4096,d=128")
runs=$(mktemp)
for _ in $(seq 1 "$ROUNDS"); do
  for who in old new new old; do
    bin=$OLD; [ "$who" = new ] && bin=$NEW
    for c in "${cases[@]}"; do
      read -r backend pass shape <<<"$c"
      "$bin" run --backends "$backend" --passes "$pass" --shape "$shape" --iterations 100 --warmup 10 --quiet \
        -f json --out "$(mktemp -d)" 2>/dev/null |
        python3 -c "import json,sys; c=json.load(sys.stdin)['cases'][0]; print('$who $backend $pass $shape', c['timing']['median_us'] if c['status']=='ok' else 'nan')"
    done
  done
done >"$runs"
python3 - "$runs" <<'PY'
import math, statistics as st, sys
t = {}
for line in open(sys.argv[1]):
    who, backend, p, shape, us = line.split()
    if not math.isnan(float(us)):
        t.setdefault((backend, p, shape), {}).setdefault(who, []).append(float(us))
print("| case | runs | old us [range] | new us [range] | new/old |")
print("|---|---:|---|---|---:|")
for k, v in t.items():
    o, n = v.get("old", []), v.get("new", [])
    if o and n:
        print(f"| {' '.join(k)} | {len(o)} | {st.median(o):.1f} [{min(o):.1f}-{max(o):.1f}] | "
              f"{st.median(n):.1f} [{min(n):.1f}-{max(n):.1f}] | {st.median(n) / st.median(o):.4f} |")
PY
