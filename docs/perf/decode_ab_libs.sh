#!/usr/bin/env bash
# Builds attnprof_decode_capi (the bf16 d128 decode kernels behind C functions) once per version of
# the kernel, each with the same nvcc command, for an A/B in one run:
#   docs/perf/decode_ab_libs.sh libs main=HEAD trim=.
#   (on the GPU machine) python3 docs/perf/decode_same_buffers.py libs/libmain.so libs/libtrim.so
# Each argument is NAME=REV: REV a git revision, or "." for the working tree as it is (uncommitted
# changes included). The result is OUTDIR/libNAME.so, stripped (about 0.8 MB each). ptxas's
# register and spill counts are printed for each, since a change in them is the first thing to
# read when two builds differ.
# The flags are those of the attnprof_decode_capi target in tests/CMakeLists.txt (Release): change
# both together. Environment: NVCC (default /usr/local/cuda/bin/nvcc), ARCH (default 90).
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 OUTDIR NAME=REV [NAME=REV ...]   (REV: a git revision, or . for the working tree)" >&2
  exit 2
fi
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
ARCH=${ARCH:-90}
ROOT=$(git rev-parse --show-toplevel)
OUTDIR=$1
shift
# The generated headers (lib/generated) come from a configured tree, as the CMake target's do.
generated=$ROOT/build/lib/generated
[ -d "$generated" ] || { echo "$0: $generated missing: run cmake -S . -B build first" >&2; exit 2; }
mkdir -p "$OUTDIR"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for spec in "$@"; do
  name=${spec%%=*}
  rev=${spec#*=}
  if [ -z "$name" ] || [ "$name" = "$spec" ] || [[ ! "$name" =~ ^[A-Za-z0-9_-]+$ ]]; then
    echo "$0: '$spec': expected NAME=REV, NAME of letters, digits, _ and -" >&2
    exit 2
  fi
  if [ "$rev" = . ]; then
    src=$ROOT
  else
    if ! git -C "$ROOT" rev-parse --verify -q "$rev^{commit}" > /dev/null; then
      echo "$0: '$rev' (for $name) is not a revision of $ROOT" >&2
      exit 2
    fi
    src=$TMP/$name
    mkdir -p "$src"
    git -C "$ROOT" archive "$rev" kernels lib tests/perf | tar xf - -C "$src"
  fi
  echo "== $name ($rev)"
  if ! "$NVCC" -O3 -DNDEBUG "--generate-code=arch=compute_${ARCH},code=[compute_${ARCH},sm_${ARCH}]" \
      --expt-relaxed-constexpr -std=c++17 -I"$src/kernels" -I"$src/lib" -I"$generated" \
      -Xcompiler -fPIC -shared -Xptxas -v "$src/tests/perf/decode_capi.cu" \
      "$src/kernels/decode/decode_fwd_bf16_d128.cu" -o "$TMP/lib$name.so" > "$TMP/$name.log" 2>&1; then
    cat "$TMP/$name.log" >&2
    echo "$0: $name ($rev) did not build" >&2
    exit 1
  fi
  # One line per kernel: its name, then ptxas's registers and spills.
  awk '/Compiling entry/ { match($0, /flash_decode_[a-z_]*kernel/); kernel = substr($0, RSTART, RLENGTH) }
       /spill/ { spills = $0; sub(/^ */, "", spills) }
       /Used [0-9]+ registers/ { match($0, /Used [0-9]+ registers/); print "  " kernel ": " substr($0, RSTART, RLENGTH) ", " spills }' \
    "$TMP/$name.log"
  strip --strip-unneeded -o "$OUTDIR/lib$name.so" "$TMP/lib$name.so"
done
ls -la "$OUTDIR"
