#!/usr/bin/env bash
# json against json.gz (zlib levels 1 and 6) at 1 M events, CPU only: the writer and the reader
# benchmarks of tests/bench/trace_bench.cpp, one variant per process, the variants alternated
# round after round so that the machine's drift falls on all of them; then the median of each.
# Usage: docs/perf/gzip_rounds.sh BUILD_DIR [ROUNDS]   (WORK, default /tmp/attnprof-gzip: ~1 GB)
# BASE=OTHER_BUILD_DIR adds that build's plain-JSON writer and reader to every round (a build of
# the commit before gzip, say: its benchmarks take one argument, the events).
set -euo pipefail
BUILD=${1:-build}
ROUNDS=${2:-5}
WORK=${WORK:-/tmp/attnprof-gzip}
mkdir -p "$WORK/results"
echo "host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$ROUNDS"); do
  for variant in 0 1 6; do
    for bench in WriteTrace ReadTrace; do
      TMPDIR="$WORK" "$BUILD/tests/attnprof_trace_bench" --benchmark_filter="BM_$bench/1000000/$variant/" \
        --benchmark_format=json 2>/dev/null > "$WORK/results/$bench-$variant-$round.json"
    done
    if [ "$variant" = 0 ] && [ -n "${BASE:-}" ]; then
      for bench in WriteTrace ReadTrace; do
        TMPDIR="$WORK" "$BASE/tests/attnprof_trace_bench" --benchmark_filter="BM_$bench/1000000/" \
          --benchmark_format=json 2>/dev/null > "$WORK/results/base-$bench-$round.json"
      done
    fi
  done
  echo "round $round done, load $(cut -d' ' -f1-3 /proc/loadavg)"
done
python3 - "$WORK/results" <<'PY'
import glob, json, os, statistics, sys
rows = {}
for path in glob.glob(os.path.join(sys.argv[1], "*.json")):
    for b in json.load(open(path))["benchmarks"]:
        bench, variant = b["name"].split("/")[0], b.get("label") or "json (BASE)"
        rows.setdefault((bench, variant), []).append(b)
print(f"{'benchmark':15} {'format':16} {'runs':>4} {'wall ms':>18} {'cpu ms':>8} {'M events/s':>10} {'bytes/event':>11} {'rss peak MB':>11}")
for (bench, variant), runs in sorted(rows.items()):
    wall = [r["real_time"] for r in runs]
    cpu = statistics.median(r["cpu_time"] for r in runs)
    rate = statistics.median(r["events/s"] for r in runs) / 1e6
    per_event = statistics.median(r.get("bytes/event", float("nan")) for r in runs)
    peak = max(r.get("rss_peak_MB", 0) for r in runs)
    spread = f"{statistics.median(wall):.0f} ({min(wall):.0f}-{max(wall):.0f})"
    print(f"{bench:15} {variant:16} {len(runs):4} {spread:>18} {cpu:8.0f} {rate:10.2f} {per_event:11.1f} {peak:11.1f}")
PY
rm -rf "$WORK"
