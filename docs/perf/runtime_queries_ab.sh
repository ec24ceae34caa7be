#!/usr/bin/env bash
# A/B of one collector setting under `attnprof profile`: ATTNPROF_CUPTI_RUNTIME=all against
# no-queries (the runtime calls that launch nothing left out), on top of profile's defaults,
# alternated over ROUNDS rounds so that drift hits both alike. Each figure is the median of the
# loop's repeats inside one process (as profile_overhead.sh). Also counts the runtime-API events
# in each trace. Usage: docs/perf/runtime_queries_ab.sh BUILD_DIR
set -uo pipefail
BUILD=${1:-build}
ROUNDS=${ROUNDS:-3}
WORK=${WORK:-/tmp/attnprof-ab}
mkdir -p "$WORK"
export PYTHONUNBUFFERED=1
A="$BUILD/app/attnprof"
LOOP="$BUILD/tests/launch_loop"
median() { sed -n 's/.*median \([0-9.]*\) ms.*/\1/p' | tail -1; }
runtime_events() { python3 -c "import json,sys; t=json.load(open(sys.argv[1])); print(sum(1 for e in t['traceEvents'] if e.get('cat')=='cuda_runtime'))" "$1"; }
for r in $(seq "$ROUNDS"); do
  c=$("$LOOP" --launches 10000 --repeats 7 2>&1 | median)
  t=$(python3 docs/examples/sdpa_backends.py --overhead launches 2>&1 | median)
  s=$(python3 docs/examples/sdpa_backends.py --overhead sdpa 2>&1 | median)
  echo "round $r unprofiled: launch_loop $c ms, torch add_ $t ms, torch sdpa $s ms"
  for mode in all no-queries; do
    rm -rf "$WORK/$mode"
    c=$(ATTNPROF_CUPTI_RUNTIME=$mode "$A" profile --out "$WORK/$mode/c" --format csv -- "$LOOP" --launches 10000 --repeats 7 2>&1 | median)
    t=$(ATTNPROF_CUPTI_RUNTIME=$mode "$A" profile --out "$WORK/$mode/t" --format csv -- python3 docs/examples/sdpa_backends.py --overhead launches 2>&1 | median)
    s=$(ATTNPROF_CUPTI_RUNTIME=$mode "$A" profile --out "$WORK/$mode/s" --format csv -- python3 docs/examples/sdpa_backends.py --overhead sdpa 2>&1 | median)
    ev=$(for d in c t s; do f=$(ls "$WORK/$mode/$d"/trace*.json 2>/dev/null | head -1); [ -n "$f" ] && runtime_events "$f" || echo -; done | tr '\n' '/')
    echo "round $r $mode: launch_loop $c ms, torch add_ $t ms, torch sdpa $s ms; runtime events c/t/s: $ev"
  done
done
rm -rf "$WORK"
