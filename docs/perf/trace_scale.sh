#!/usr/bin/env bash
# The trace writer and reader at scale (issue: hardening), CPU only: the Google Benchmark of
# tests/bench, then `attnprof report` on a 1 GB synthetic trace beside Python's json.load of the
# same file (wall time and peak resident set of each). Usage: docs/perf/trace_scale.sh BUILD_DIR
# WORK (default /tmp/attnprof-scale) holds the traces; it needs about 5 GB free.
set -euo pipefail
BUILD=${1:-build}
WORK=${WORK:-/tmp/attnprof-scale}
mkdir -p "$WORK"
echo "host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
TMPDIR="$WORK" "$BUILD/tests/attnprof_trace_bench" --benchmark_counters_tabular=true 2>&1 | grep -v '^\*\*\*WARNING'
"$BUILD/tests/attnprof_trace_synth" "$WORK/big.json" --size-mb 1024
# Wall seconds and peak RSS (MB) of a command, its output discarded.
measure() {
  python3 - "$@" <<'PY'
import resource, subprocess, sys, time
t = time.perf_counter()
rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode
wall = time.perf_counter() - t
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(f"{wall:8.2f} s  {rss:7.0f} MB peak RSS  exit {rc}  {' '.join(sys.argv[1:])[:90]}")
PY
}
cat "$WORK/big.json" > /dev/null  # both readers start from the page cache
for i in 1 2 3; do measure "$BUILD/app/attnprof" report "$WORK/big.json"; done
measure python3 -c "import json, sys; d = json.load(open(sys.argv[1])); print(len(d['traceEvents']))" "$WORK/big.json"
rm -rf "$WORK"
