#!/usr/bin/env bash
# A stripped, xz-compressed copy of what the GPU steps run (attnprof, the injection library, the
# GPU tests and their helper programs): carry/build.tar.xz, about 38 MB in 2026-12 (212 MB
# unpacked), small enough to copy to a GPU machine in one piece. There: tests/gpu/unpack_build.sh.
set -euo pipefail
B=${1:-build}
C=carry/stage/build
rm -rf carry && mkdir -p "$C/app" "$C/lib/inject" "$C/tests"
strip_to() { strip --strip-unneeded -o "$2" "$1"; }
strip_to "$B/app/attnprof" "$C/app/attnprof"
strip_to "$B/lib/inject/libattnprof_inject.so" "$C/lib/inject/libattnprof_inject.so"
for t in "$B"/tests/gpu_*_test "$B/tests/launch_loop" "$B/tests/attnprof_forward" "$B/tests/attnprof_decode_bench"; do
  [ -x "$t" ] && strip_to "$t" "$C/tests/$(basename "$t")"
done
# Built only on request (docs/perf/decode_same_buffers.py): carried when present.
[ -f "$B/tests/libattnprof_decode_capi.so" ] && strip_to "$B/tests/libattnprof_decode_capi.so" "$C/tests/libattnprof_decode_capi.so"
tar cf - -C carry/stage build | xz -T0 -6 > carry/build.tar.xz
rm -rf carry/stage
du -sh carry/build.tar.xz
