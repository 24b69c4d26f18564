#!/usr/bin/env bash
# sass.sh - the bench programs' executor kernel as the GPU would run it, read without a GPU:
# the generated source (sim's dump, its sim prelude swapped for the cuda one), ptxas -v, and the
# SASS instructions and local-memory traffic of each function of the hot path.
#   bash scripts/sass.sh [outdir]        # needs nvcc; nvdisasm from CUDA or $NVDISASM
#   SASS_DEFINES="- MW_NO_DIRECT_FUSE A,B=1": one build each ("-" the default), SASS_TOP=N: the N
#   largest functions of each
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
mw_prepare >/dev/null || exit 1
cd "$MW_ROOT"
out=${1:-/tmp/mw-sass}
rm -rf "$out" && mkdir -p "$out/dump"
MOONWARP_BUILD=one_unit MOONWARP_NO_CACHE=1 MOONWARP_DUMP_DIR="$out/dump" luajit bench/compile.lua sim >/dev/null
src=$(ls "$out"/dump/*.cpp | head -1)
first=$(grep -n -m1 -E '^#define (MW_KIND_TABLE_BY_VALUE|MW_FRAME_PAYLOAD) ' "$src" | cut -d: -f1) # the one-unit source after the sim prelude
{
  printf 'typedef unsigned char mw_u8;\ntypedef unsigned short mw_u16;\ntypedef unsigned int mw_u32;\n'
  printf 'typedef int mw_i32;\ntypedef unsigned long long mw_u64;\ntypedef long long mw_i64;\n'
  tail -n +"$first" "$src"
} >"$out/k.cu"
# one build of k.cu per entry of $SASS_DEFINES ("-": the default; NAME or NAME=VALUE, several
# joined by commas, as MOONWARP_DEVICE_DEFINE takes them), each to k[-entry].cubin and .sass
for build in ${SASS_DEFINES:--}; do
  flags=() name=k
  if [ "$build" != - ]; then
    IFS=, read -r -a defs <<<"$build"
    for d in "${defs[@]}"; do flags+=("-D$d"); done
    name=k-$(echo "$build" | tr ',=' '+_')
    echo "== -D${build//,/ -D}"
  fi
  nvcc -cubin -arch="${SASS_ARCH:-sm_90}" -lineinfo -DMW_CUDA=1 "${flags[@]}" -Xptxas -v "$out/k.cu" \
    -o "$out/$name.cubin" 2>&1 | grep -A3 "Compiling entry function 'mw_executor_kernel'"
  "${NVDISASM:-nvdisasm}" "$out/$name.cubin" >"$out/$name.sass"
  awk '
    /^\$mw_executor_kernel\$/ { fn = $1; sub(/^\$mw_executor_kernel\$_Z[0-9]+/, "", fn); sub(/P6mw_ctx.*/, "", fn) }
    /\/\*[0-9a-f]+\*\/ +[A-Z@]/ && fn { n[fn]++; if ($0 ~ / STL/) stl[fn]++; if ($0 ~ / LDL/) ldl[fn]++ }
    END { for (f in n) printf "SASS %-20s %6d instructions %4d STL %4d LDL\n", f, n[f], stl[f], ldl[f] }' \
    "$out/$name.sass" | sort -k3 -n -r | awk -v top="${SASS_TOP:-1000000}" 'NR <= top'
  echo "the kernel's SASS: $out/$name.sass"
done
