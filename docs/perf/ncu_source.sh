#!/usr/bin/env bash
# Nsight Compute's per-instruction view of one backend's forward kernel: warp-state samples per
# SASS line (where the warps wait, and on what), plus the kernel's warp-state totals, exported as
# CSV because this side has no ncu to open the report. Runs attnprof_forward (no CUPTI in the
# process), skips the first launch of the kernel (warm-up) and profiles the second.
# Usage (device, after tests/gpu/unpack_build.sh):
#   OUT=dir docs/perf/ncu_source.sh NAME KERNEL_REGEX attnprof_forward-arguments...
# e.g. docs/perf/ncu_source.sh hopper1024 flash_hopper flash:hopper 4 16 1024 1024 128 bf16 0 3
set -uo pipefail
OUT=${OUT:-/tmp/attnprof-ncu}
mkdir -p "$OUT"
name=$1
regex=$2
shift 2
NCU=$(command -v ncu || ls -d /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$NCU" ] || { echo "ncu_source: no ncu on this machine" >&2; exit 1; }
timeout 300 "$NCU" --clock-control none --section SourceCounters --section WarpStateStats --section SpeedOfLight \
  --import-source no --kernel-name "regex:$regex" --launch-skip 1 --launch-count 1 -f -o "$OUT/$name" \
  build/tests/attnprof_forward "$@" > "$OUT/$name.ncu.txt" 2>&1
echo "$name: ncu rc=$? $(grep -c . "$OUT/$name.ncu.txt") lines of output"
"$NCU" -i "$OUT/$name.ncu-rep" --page source --csv --print-source sass > "$OUT/$name.sass.csv" 2> "$OUT/$name.sass.err"
echo "$name: source page rc=$? $(wc -l < "$OUT/$name.sass.csv") lines"
"$NCU" -i "$OUT/$name.ncu-rep" --page details --csv > "$OUT/$name.details.csv" 2>&1
echo "$name: details rc=$? $(wc -l < "$OUT/$name.details.csv") lines"
xz -T0 -6 -f "$OUT/$name.sass.csv"
