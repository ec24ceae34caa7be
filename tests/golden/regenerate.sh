#!/bin/sh
# Regenerates the generated golden files of tests/golden into a temporary directory, shows
# `diff -u` against the committed ones, and copies them over only with --write. No test writes
# into the source tree; this script is the one way a golden changes.
#
#   tests/golden/regenerate.sh [--write] [BUILD_DIR]      (BUILD_DIR: default <source>/build)
#
# small_trace.json              ChromeTraceWriter.MatchesTheGoldenFile (attnprof_cpu_tests) leaves
#                               its output in $ATTNPROF_GOLDEN_OUT
# reports/*.summary.json        `attnprof report TRACE --out` of the sample trace and of the small
#                               Kineto trace (GoldenReport.*), run from the source root so the paths
#                               recorded in them stay relative (needs the GPU build's attnprof)
# kineto_small_trace.json is an input (a trace PyTorch's profiler wrote), never regenerated.
#
# Exit status: 0 when every golden is unchanged (or --write took the changes), 1 when some differ
# (without --write), 2 on a usage or build error.
set -eu

write=0
build=
for arg in "$@"; do
  case "$arg" in
    --write) write=1 ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "regenerate.sh: unknown option $arg" >&2; exit 2 ;;
    *) build=$arg ;;
  esac
done
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
golden_dir="$source_dir/tests/golden"
build=${build:-$source_dir/build}
cpu_tests="$build/tests/attnprof_cpu_tests"
attnprof="$build/app/attnprof"
if [ ! -x "$cpu_tests" ]; then
  echo "regenerate.sh: $cpu_tests is not built (cmake --build $build --target attnprof_cpu_tests)" >&2
  exit 2
fi

fresh=$(mktemp -d "${TMPDIR:-/tmp}/attnprof-golden.XXXXXX")
trap 'rm -rf "$fresh"' EXIT INT TERM
mkdir -p "$fresh/reports"

# The test fails while its golden differs: that is what this script is for, so only the file counts.
ATTNPROF_GOLDEN_OUT="$fresh" "$cpu_tests" --gtest_filter=ChromeTraceWriter.MatchesTheGoldenFile >"$fresh/test.log" 2>&1 || true
if [ ! -f "$fresh/small_trace.json" ]; then
  echo "regenerate.sh: the writer test left no small_trace.json; its output:" >&2
  cat "$fresh/test.log" >&2
  exit 2
fi
generated="small_trace.json"

if [ -x "$attnprof" ]; then
  if ! (cd "$source_dir" &&
    "$attnprof" report traces/samples/sample_trace.json --format csv \
      --out "$fresh/reports/sample_trace.summary.json" &&
    "$attnprof" report tests/golden/kineto_small_trace.json --format csv \
      --out "$fresh/reports/kineto_small_trace.summary.json") >"$fresh/report.log" 2>&1; then
    echo "regenerate.sh: attnprof report failed:" >&2
    cat "$fresh/report.log" >&2
    exit 2
  fi
  generated="$generated reports/sample_trace.summary.json reports/kineto_small_trace.summary.json"
else
  echo "regenerate.sh: $attnprof is not built: reports/*.summary.json not regenerated" >&2
fi

changed=
for name in $generated; do
  if ! diff -u "$golden_dir/$name" "$fresh/$name" --label "tests/golden/$name (committed)" --label "$name (regenerated)"; then
    changed="$changed $name"
  fi
done
if [ -z "$changed" ]; then
  echo "regenerate.sh: every golden is unchanged ($generated)"
  exit 0
fi
if [ "$write" -eq 0 ]; then
  echo "regenerate.sh: differ:$changed; run again with --write to take them" >&2
  exit 1
fi
for name in $changed; do
  cp "$fresh/$name" "$golden_dir/$name"
  echo "regenerate.sh: wrote tests/golden/$name"
done
