#!/bin/sh
# Build the fake NVML library: tests/fake_nvml/build.sh OUTDIR -> OUTDIR/libnvidia-ml.so.1, and the
# driver root's libcuda stub (exports nothing) -> OUTDIR/libcuda.so.1.
# Uses $CC (default cc). Only the NVML entry points are exported (-fvisibility=hidden + API marker).
set -eu
if [ $# -ne 1 ]; then
  echo "usage: $0 OUTDIR" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
out=$1
mkdir -p "$out"
tmp="$out/.libnvidia-ml.so.1.$$"
${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Werror -fPIC -shared -fvisibility=hidden -pthread \
  -Wl,-soname,libnvidia-ml.so.1 -o "$tmp" \
  "$here/api.c" "$here/mig.c" "$here/state.c" "$here/json.c" -lm
${CC:-cc} -std=c11 -O2 -Wall -Wextra -Werror -fPIC -shared -fvisibility=hidden \
  -Wl,-soname,libcuda.so.1 -o "$tmp.cuda" "$here/cuda_stub.c"
# Rename into place so a process loading the library never sees a half-written file.
mv -f "$tmp.cuda" "$out/libcuda.so.1"
mv -f "$tmp" "$out/libnvidia-ml.so.1"
