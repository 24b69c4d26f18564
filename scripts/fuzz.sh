#!/usr/bin/env bash
# fuzz.sh - builds the parser's libFuzzer target (nvrtc/fuzz_parse.c: CMake's target fuzz_parse,
# built with clang) and runs it from the seeds in spec/fuzz_seeds and bench/tasks.lua for a
# bounded number of inputs; exits non-zero on a crash, a leak or undefined behaviour, leaving the
# input that caused it in build-fuzz/.
#   bash scripts/fuzz.sh [runs [seed]]     (defaults: 20000, 1)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
runs=${1:-20000}
seed=${2:-1}
build=${MW_BUILD_DIR:-build}
command -v clang >/dev/null || { echo "fuzz.sh: clang is not installed" >&2; exit 2; }
[ -f "$build/CMakeCache.txt" ] || { echo "fuzz.sh: build first (bash scripts/test.sh builds $build/)" >&2; exit 2; }
# the target is CMake's (CMakeLists.txt, fuzz_parse); a build configured before clang was
# installed learns of it here
grep -q '^MW_CLANG:FILEPATH=/' "$build/CMakeCache.txt" || cmake "$build" >/dev/null
cmake --build "$build" --target fuzz_parse >/dev/null
mkdir -p build-fuzz
bin=$build/fuzz_parse
corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
cp spec/fuzz_seeds/* "$corpus"/
# the benchmarks' programs are seeds too (the first byte picks the generator's options)
if command -v luajit >/dev/null; then
  luajit -e 'io.write("A", dofile("bench/tasks.lua"))' >"$corpus/bench_tasks.cu"
fi
status=0
"$bin" -runs="$runs" -seed="$seed" -max_len=4096 -artifact_prefix=build-fuzz/ "$corpus" \
  >build-fuzz/last.log 2>&1 || status=$?
grep -E "INFO: Seed|Done|ERROR|SUMMARY|artifact|runtime error" build-fuzz/last.log || true
echo "fuzz_parse: $runs runs from seed $seed, exit status $status"
exit "$status"
