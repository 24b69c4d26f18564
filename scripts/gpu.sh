#!/usr/bin/env bash
# gpu.sh - the whole check on a GPU machine, bounded in time: build, the #gpu specs, the examples
# on cuda, the benchmarks. Needs .gpu/ from scripts/gpu-prepare.sh (see the README).
# Usage: bash scripts/gpu.sh [out-dir]
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-/tmp/mw-gpu}}
mkdir -p "$out"
source .gpu/env.sh
# the carried packages are unpacked under /tmp/lua-root: point pkg-config at them
sed -i 's#^prefix=/usr$#prefix=/tmp/lua-root/usr#' /tmp/lua-root/usr/lib/x86_64-linux-gnu/pkgconfig/libsodium.pc 2>/dev/null
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export MOONWARP_CACHE_DIR=/tmp/mw-cache
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader | tee "$out/device.txt"
step() { echo "== $*"; }
step build
timeout 300 cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$out/cmake.log" 2>&1 &&
  timeout 300 cmake --build build-gpu -j 16 >>"$out/cmake.log" 2>&1 || { tail -40 "$out/cmake.log"; exit 1; }
export LUA_PATH="$PWD/build-gpu/lua/?.lua;$PWD/build-gpu/lua/?/init.lua;$LUA_PATH"
export LUA_CPATH="$PWD/build-gpu/lua/?.so;$LUA_CPATH"
export MOONWARP_BACKEND=cuda
step "C host example"
timeout 60 ./build-gpu/hello_host 20
step "examples on cuda"
for e in fib pipeline fanout; do timeout 60 luajit examples/$e.lua || echo "FAILED: $e"; done
step "#gpu specs"
timeout 300 luajit /tmp/lua-root/usr/bin/busted -o TAP --tags=gpu --exclude-tags=sim ${SPEC_ARGS:-} >"$out/specs.txt" 2>&1
echo "busted exit status: $?" | tee -a "$out/specs.txt"
grep -E "^not ok|^# |^1\.\." "$out/specs.txt"; grep -c "^ok" "$out/specs.txt"; tail -3 "$out/specs.txt"
step bench
for w in 0 1056 528; do timeout 100 luajit bench/core.lua cuda $w 2>&1 | tee -a "$out/bench.txt"; done
timeout 120 nvcc -O2 -arch=native -std=c++17 -Xcompiler -fopenmp bench/baselines.cu -o build-gpu/baselines &&
  export MW_BASELINES=$PWD/build-gpu/baselines
timeout 300 luajit bench/suite.lua --backend cuda --out "$out" 2>&1 | tee -a "$out/bench.txt"
