#!/usr/bin/env bash
# gpu.sh - the whole check on a GPU machine, bounded in time: build, the #gpu specs, the examples
# on cuda, the benchmarks. Needs .gpu/ from scripts/gpu-prepare.sh (see the README).
# Usage: bash scripts/gpu.sh [out-dir [step...]]
#   steps (default: examples specs bench soak sanitize):
#   examples   the C host example and the Lua examples on cuda
#   specs      the #gpu specs, one busted process per spec file ($SPEC_FILES), each under
#              $SPEC_FILE_TIMEOUT and all under $SPEC_TIMEOUT, $SPEC_JOBS of them at once
#   bench      the compile figures (NVRTC's time for the bench programs, cold; ptxas -v and the
#              SASS of their kernel), bench/core.lua, hops, stages, the baselines and
#              bench/suite.lua ($BENCH_VARIANTS: the suite again per variant of the executor;
#              $ROUNDTRIP_VARIANTS: bench_roundtrip alone per variant)
#   soak       bench/soak.lua, ten million tasks
#   sanitize   compute-sanitizer $SAN_TOOLS over $SAN_SPECS
#   sweep      bench/core.lua and bench/hops.lua over $SWEEP_WORKERS; the suite at $SUITE_WORKERS
#   probes     the executor built with MOONWARP_PROBES=1 times each step of a chain of hops, a
#              pipeline (of each batch of $PROBE_BATCHES), fib(18) and host round trips on
#              $PROBE_WORKERS, beside bench/micro/'s cost of each kind of operation
#              ($PROBE_VARIANTS: variants of the executor timed the same way)
#   hostpath   the host's path through the executor: per variant of $HOSTPATH_VARIANTS (default
#              "- MW_POLLERS=2u MW_POLLERS=1u", twice in turns) bench_roundtrip (C round trip and
#              a stream of $HOSTPATH_C_STREAM spawns, default 500000), bench/roundtrip.lua (the
#              same program's round trip from Lua) and bench/core.lua; then the
#              probes (of each build of $HOSTPATH_PROBE_VARIANTS, default "-") of every poller
#              for host tasks one at a time (roundtrip) and back to back (stream: $HOSTPATH_STREAM
#              of them, default 20000), for $HOSTPATH_MODES at $HOSTPATH_PROBE_WORKERS (default
#              "roundtrip stream" at 528; HOSTPATH_VARIANTS set and empty: the probes alone)
#   stalls     CUPTI's PC sampling of the running executor (bench/pcsample/) per workload of
#              $STALLS_RUNS ("name:command;..."), its period 2^$STALLS_PERIOD cycles (default 13)
#   micro      bench/micro/NAME.cu for each NAME of $MICRO (default hostread), built and run
#   core       bench/core.lua per variant ($CORE_VARIANTS, "-" the default), at each worker count
#              of $CORE_WORKERS (default 0: the runtime's default; 1 times a task on one warp)
#   stack      bench/stack.lua at each of $STACK_SIZES (stack_bytes; default 4096 16384 65536):
#              the bytes a level of spawns run in place, the depth they reach, a refusal's after
#   fanout     bench/fanout.lua per variant of $FANOUT_VARIANTS (default "- MW_NO_ELIDE"): the
#              fan-out alone, route's spawns and awaits timed inside it, one traced run split
#              into its tasks' runs and waits
#   fibscale   bench/fibscale.lua (fib at several sizes, the steals of a run) at each worker
#              count of $FIBSCALE_WORKERS (default "132 264 528": 33, 66 and 132 SMs)
#   ab         bench/core.lua in this tree and in each tree of $AB_REFS (made by
#              scripts/gpu-prepare.sh REF, built here in their own build-gpu), taking turns,
#              $AB_ROUNDS rounds (default 2), at each worker count of $CORE_WORKERS: a change
#              beside its base on the same machine ($AB_BENCH: another bench script and its
#              arguments instead, e.g. "bench/profile_chain.lua cuda 256 0 bulk")
#   quick      pipelines of each batch of $QUICK_BATCHES (default 1) and a chain of hops per
#              variant ($QUICK_VARIANTS)
#   fastc      NVRTC's time for the bench programs, cold, per build with and without
#              MOONWARP_FAST_COMPILE=1; bench/core.lua on the one-unit image both ways
#   blockfault bench/block_fault.lua in each of its modes ($BLOCKFAULT_MODES: which) (the suite's runtime, and each of its two
#              differences from bench/blocks.lua alone) and with MOONWARP_GRIDS=0; then
#              compute-sanitizer memcheck on the first mode that fails (bench/NOTES.md, v66)
#   blocks     bench/blocks.lua (the block-task matmul and softmax) at each worker count of
#              $BLOCK_WORKERS (default "528 1056 2112": one, two and four worker CTAs an SM on 132
#              SMs), for each of $BLOCK_GRIDS (default "1 0": MOONWARP_GRIDS, bulk block tasks
#              as grids launched from the device or not), beside the same algorithms as plain
#              kernels (bench/baselines.cu's lines)
#   $GPU_DEADLINE (seconds) bounds the whole script: a step is begun only with its minimum time
#   left, and the specs stop in time, so an outer `timeout` a little above it keeps every summary.
#   $GPU_PACK=1: at the end (an outer timeout's TERM included, once the command running then
#   ends), everything this run wrote under out-dir goes into one out-dir/results-<pid>.tar.gz,
#   for a remote run that brings back only a few files (earlier runs' packs stay beside it)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-/tmp/mw-gpu}}
shift || true
# exits 2 unless the variable named $1 is unset or worker counts (digits and spaces)
need_counts() {
  local v=${!1:-0}
  [[ $v =~ ^[0-9\ ]+$ ]] || { echo "$1 is worker counts, got '$v'"; exit 2; }
}
[[ ${GPU_PACK:-0} =~ ^[01]$ ]] || { echo "GPU_PACK is 0 or 1, got '$GPU_PACK'"; exit 2; }
pack_results() {
  [ "${GPU_PACK:-0}" = 1 ] && [ -d "$out" ] || return 0
  local tmp
  tmp=$(mktemp /tmp/mw-results.XXXXXX) || return 0
  if tar -czf "$tmp" -C "$out" --exclude='./results-*.tar.gz' . 2>/dev/null; then
    find "$out" -mindepth 1 -depth ! -name 'results-*.tar.gz' -delete
    mv "$tmp" "$out/results-$$.tar.gz"
  else
    rm -f "$tmp"
  fi
}
if [ "${GPU_PACK:-0}" = 1 ]; then
  # a TERM (an outer timeout) ends the script through its EXIT trap, once the command running
  # then has ended (each has a bound of its own); without GPU_PACK a TERM ends it at once, as ever
  trap pack_results EXIT
  trap 'exit 143' TERM
  trap 'exit 130' INT
fi
steps=" ${*:-examples specs bench soak sanitize} "
# $GPU_DEADLINE: seconds from now by which the script must be done (0 or unset: no bound of its
# own). A step that needs more than is left is not begun, and says so; the specs stop in time.
started=$(date +%s)
[[ ${GPU_DEADLINE:-0} =~ ^[0-9]+$ ]] || { echo "GPU_DEADLINE is seconds, got '$GPU_DEADLINE'"; exit 2; }
left() { if [ "${GPU_DEADLINE:-0}" -gt 0 ]; then echo $((started + GPU_DEADLINE - $(date +%s))); else echo 100000; fi; }
declare -A needs=([examples]=30 [specs]=60 [bench]=200 [soak]=30 [sanitize]=60 [sweep]=100 [probes]=100 [core]=60 [quick]=40 [fastc]=150 [stack]=30 [fanout]=40 [ab]=90 [hostpath]=150 [micro]=30 [stalls]=60 [fibscale]=60 [blocks]=60 [blockfault]=120)
want() {
  [[ $steps == *" $1 "* ]] || return 1
  local l
  l=$(left)
  if [ "$l" -lt "${needs[$1]:-30}" ]; then
    echo "== $1: not run, ${l} s left of GPU_DEADLINE (it needs ${needs[$1]:-30})"
    return 1
  fi
}
mkdir -p "$out"
source .gpu/env.sh
# the carried packages are unpacked under /tmp/lua-root: point pkg-config at them
sed -i 's#^prefix=/usr$#prefix=/tmp/lua-root/usr#' /tmp/lua-root/usr/lib/x86_64-linux-gnu/pkgconfig/libsodium.pc 2>/dev/null
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export MOONWARP_CACHE_DIR=/tmp/mw-cache
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader | tee "$out/device.txt"
# and the toolkit that compiles the programs there (NVRTC is the one the loader finds first)
echo "toolkit: $(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' || echo 'no nvcc');" \
  "NVRTC: $(basename "$(readlink -e /usr/local/cuda/lib64/libnvrtc.so 2>/dev/null || echo none)")" |
  tee -a "$out/device.txt"
step() { echo "== $*"; }
# per_variant LIST FILE CMD...: CMD once per variant of the executor in LIST ("-" the default
# build, NAME built with -DNAME through MOONWARP_DEVICE_DEFINE, "A,B" with both), its output under a "# variant:"
# line in $out/FILE
per_variant() {
  local list=$1 file=$2 v
  shift 2
  for v in $list; do
    [ "$v" = - ] && v=
    # the next variant only with a minute of GPU_DEADLINE left (the steps after it keep theirs)
    if [ "$(left)" -lt 60 ]; then
      echo "# variant: ${v:-default}: not run, $(left) s left of GPU_DEADLINE" | tee -a "$out/$file"
      continue
    fi
    echo "# variant: ${v:-default}" | tee -a "$out/$file"
    MOONWARP_DEVICE_DEFINE=$v "$@" 2>&1 | tee -a "$out/$file"
  done
}
# per_count VAR DEFAULT FILE CMD...: CMD with one more argument, a worker count, once per count of
# $VAR (DEFAULT where it is unset), each under 100 s, the output in $out/FILE
per_count() {
  local var=$1 def=$2 file=$3 w
  shift 3
  need_counts "$var"
  for w in ${!var:-$def}; do timeout 100 "$@" "$w" 2>&1 | tee -a "$out/$file"; done
}
# the launch-based baselines (bench/baselines.cu) in build-gpu/baselines, built once a run
build_baselines() {
  [ -x build-gpu/baselines ] && [ -n "${baselines_built:-}" ] && return 0
  timeout 120 nvcc -O2 -arch=native -std=c++17 -Xcompiler -fopenmp bench/baselines.cu -o build-gpu/baselines &&
    baselines_built=1
}
step build
# the build's log stays out of $out unless the build fails: a remote run may bring back only a
# few files from a call, and results must not lose their place to logs
mkdir -p build-gpu && blog=build-gpu/build.log
timeout 300 cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$blog" 2>&1 &&
  timeout 300 cmake --build build-gpu -j 16 >>"$blog" 2>&1 || { cp "$blog" "$out/cmake.log"; tail -40 "$blog"; exit 1; }
export LUA_PATH="$PWD/build-gpu/lua/?.lua;$PWD/build-gpu/lua/?/init.lua;$LUA_PATH"
export LUA_CPATH="$PWD/build-gpu/lua/?.so;$LUA_CPATH"
export MOONWARP_BACKEND=cuda
if want examples; then
  step "C host example"
  timeout 60 ./build-gpu/hello_host 20 2>&1 | tee -a "$out/examples.txt"
  step "examples on cuda"
  for e in fib pipeline fanout matmul softmax; do
    { timeout 60 luajit examples/$e.lua || echo "FAILED: $e"; } 2>&1 | tee -a "$out/examples.txt"
  done
fi
if want specs; then
  # one busted process per spec file, each under its own bound and all under $SPEC_TIMEOUT, so a
  # file that hangs or a bound that comes early costs that file, not the ones after it; the
  # files not reached are named. $SPEC_FILES: the files (default: every spec of both backends);
  # $SPEC_ARGS: more busted arguments for each; $SPEC_JOBS: files run at once (default 1; each
  # process has a runtime of its own on the one GPU, so more than one shares the GPU between
  # persistent kernels: the NVRTC compiles, most of the step's time, run side by side).
  step "#gpu specs"
  for v in "${SPEC_TIMEOUT:-450}" "${SPEC_FILE_TIMEOUT:-240}" "${SPEC_JOBS:-1}"; do
    [[ $v =~ ^[0-9]+$ ]] || { echo "SPEC_TIMEOUT, SPEC_FILE_TIMEOUT and SPEC_JOBS are numbers, got '$v'"; exit 2; }
  done
  : >"$out/specs.txt"
  files=(${SPEC_FILES:-$(grep -l "support.each_backend" spec/*_spec.lua)})
  end_at=$(($(date +%s) + ${SPEC_TIMEOUT:-450}))
  l=$(left)
  [ $(($(date +%s) + l - 5)) -lt "$end_at" ] && end_at=$(($(date +%s) + l - 5)) # GPU_DEADLINE comes first
  rm -f "$out"/spec-[0-9]*.*
  run_file() { # index, file, bound: its output, exit status and bound into $out/spec-<index>.*
    MW_SPEC_TRACE=1 timeout "$3" luajit /tmp/lua-root/usr/bin/busted --tags=gpu --exclude-tags=sim ${SPEC_ARGS:-} "$2" >"$out/spec-$1.txt" 2>&1
    echo "$?" >"$out/spec-$1.rc"
  }
  late=""
  for i in "${!files[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "${SPEC_JOBS:-1}" ]; do wait -n; done
    bound=$((end_at - $(date +%s)))
    if [ "$bound" -lt 10 ]; then late="$late ${files[$i]}"; continue; fi
    [ "$bound" -gt "${SPEC_FILE_TIMEOUT:-240}" ] && bound=${SPEC_FILE_TIMEOUT:-240}
    echo "$bound" >"$out/spec-$i.bound"
    run_file "$i" "${files[$i]}" "$bound" &
  done
  wait
  passed=0 failed=0 skipped=0
  for i in "${!files[@]}"; do
    [ -f "$out/spec-$i.bound" ] || continue
    cat "$out/spec-$i.txt" >>"$out/specs.txt"
    # a file's counts come from its summary line; with none (killed by its bound, a crash, a
    # file that is not there) the file counts as one failure
    if read -r p _ q _ r _ < <(grep -E "^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$" "$out/spec-$i.txt" | tail -1); then
      passed=$((passed + p)) failed=$((failed + q)) skipped=$((skipped + r))
    else
      rc=$(cat "$out/spec-$i.rc" 2>/dev/null || echo "?")
      why="exit status $rc"
      [ "$rc" = 124 ] && why="killed by its time bound ($(cat "$out/spec-$i.bound") s)"
      echo "FAILED: ${files[$i]}: no summary line, $why" >>"$out/specs.txt"
      failed=$((failed + 1))
    fi
  done
  rm -f "$out"/spec-[0-9]*.*
  [ -n "$late" ] && echo "not run (the step's bound, ${SPEC_TIMEOUT:-450} s, or GPU_DEADLINE came first):$late" | tee -a "$out/specs.txt"
  grep -E "^(failure|error|FAILED|ERROR)" -A3 "$out/specs.txt"
  grep "^file: " "$out/specs.txt"
  echo "$passed passed, $failed failed, $skipped skipped" | tee -a "$out/specs.txt"
fi
if want bench; then
  step "compile: NVRTC time of the bench programs (cold), ptxas -v and SASS size of their kernel"
  # CUDA_CACHE_DISABLE: the driver's own cache must not answer for NVRTC (a repeated compile
  # in one machine session took 0.15 s without it). Cold: nothing cached (the executor's part,
  # the programs', the link); then in one unit (MOONWARP_BUILD=one_unit, the default on cuda), whose source ptxas -v
  # reads below; then bench/defs.lua: one more small program beside 0, 10 and 60 loaded.
  rm -rf /tmp/mw-dump /tmp/mw-cc && mkdir -p /tmp/mw-dump /tmp/mw-cc
  export CUDA_CACHE_DISABLE=1
  MOONWARP_BUILD=parts MOONWARP_CACHE_DIR=/tmp/mw-cc MOONWARP_DUMP_DIR=/tmp/mw-dump timeout 120 luajit bench/compile.lua cuda 2>&1 | tee -a "$out/bench.txt"
  mkdir -p /tmp/mw-one
  MOONWARP_BUILD=one_unit MOONWARP_NO_CACHE=1 MOONWARP_DUMP_DIR=/tmp/mw-one timeout 120 luajit bench/compile.lua cuda 2>&1 | sed 's/^/one unit: /' | tee -a "$out/bench.txt"
  timeout 200 luajit bench/defs.lua cuda 0 10 60 2>&1 | tee -a "$out/bench.txt"
  unset CUDA_CACHE_DISABLE
  linked=$(ls -S /tmp/mw-dump/*.cubin 2>/dev/null | head -1)
  [ -n "$linked" ] && cuobjdump -res-usage "$linked" 2>&1 | grep -A1 "mw_executor_kernel" | sed 's/^/linked image: /' | tee -a "$out/bench.txt"
  gen=$(ls /tmp/mw-one/*.cu 2>/dev/null | head -1)
  if [ -n "$gen" ]; then
    timeout 120 nvcc -cubin -arch=native -lineinfo -DMW_CUDA=1 -Xptxas -v "$gen" -o /tmp/mw-dump/k.cubin 2>&1 |
      grep -A2 "Compiling entry function 'mw_executor_kernel'" | tee -a "$out/bench.txt"
    echo "SASS instructions: $(cuobjdump -sass /tmp/mw-dump/k.cubin | grep -cE '^\s+/\*[0-9a-f]{4,}\*/')" | tee -a "$out/bench.txt"
    # per function of the hot path: instructions, and the local-memory traffic (STL/LDL: the
    # context, the lane stacks, saved registers)
    nvdisasm /tmp/mw-dump/k.cubin | awk '
      /^\$mw_executor_kernel\$/ { fn = $1; sub(/^\$mw_executor_kernel\$_Z[0-9]+/, "", fn); sub(/P6mw_ctx.*/, "", fn) }
      /\/\*[0-9a-f]+\*\/ +[A-Z@]/ && fn { n[fn]++; if ($0 ~ / STL/) stl[fn]++; if ($0 ~ / LDL/) ldl[fn]++ }
      END { for (f in n) if (f ~ /^mw_(spawn_raw|await|await_more|call_child|run_leaf|suspend|after_await|value_of|outcome|release|finish_level|run_chain|complete_slot)$/)
              printf "SASS %-16s %6d instructions %4d STL %4d LDL\n", f, n[f], stl[f], ldl[f] }' |
      sort | tee -a "$out/bench.txt"
  fi
  step bench
  # the clocks while the executor runs (a persistent kernel keeps the GPU busy: it should boost)
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw --format=csv -lms 1000 >"$out/clocks.csv" 2>&1 &
  smi=$!
  timeout 100 luajit bench/core.lua cuda 2>&1 | tee -a "$out/bench.txt"
  timeout 60 ./build-gpu/bench_roundtrip 5000 2>&1 | tee -a "$out/bench.txt" # the same without Lua
  timeout 60 luajit bench/hops.lua cuda 2000 2>&1 | tee -a "$out/bench.txt"
  for b in 1 8; do timeout 60 luajit bench/stages.lua cuda $b 200 2>&1 | tee -a "$out/bench.txt"; done
  build_baselines && export MW_BASELINES=$PWD/build-gpu/baselines
  timeout 300 luajit bench/suite.lua --backend cuda --out "$out" 2>&1 | tee -a "$out/bench.txt"
  # $BENCH_VARIANTS: the suite again with each variant of the executor (MOONWARP_DEVICE_DEFINE)
  for v in ${BENCH_VARIANTS:-}; do
    echo "# suite, variant $v" | tee -a "$out/bench.txt"
    vdir="$out/variant-${v//=/-}" # no '=' in a file name that must travel back
    mkdir -p "$vdir"
    MOONWARP_DEVICE_DEFINE=$v timeout 200 luajit bench/suite.lua --backend cuda --out "$vdir" 2>&1 |
      tee -a "$out/bench.txt" | grep -E "^(bulk|pipeline|dynamic|dependent|fork|round trip|host spawns)"
    MOONWARP_DEVICE_DEFINE=$v timeout 60 ./build-gpu/bench_roundtrip 2000 2>&1 | tee -a "$out/bench.txt"
  done
  # $ROUNDTRIP_VARIANTS: bench_roundtrip alone per variant, each followed by the default again,
  # for a change of the host channel that the whole suite per variant would not fit beside
  for v in ${ROUNDTRIP_VARIANTS:-}; do
    echo "# bench_roundtrip, variant $v, then the default" | tee -a "$out/bench.txt"
    MOONWARP_DEVICE_DEFINE=$v timeout 60 ./build-gpu/bench_roundtrip 5000 2>&1 | tee -a "$out/bench.txt"
    timeout 60 ./build-gpu/bench_roundtrip 5000 2>&1 | tee -a "$out/bench.txt"
  done
  # launches from the device (dynamic parallelism, device graphs): the latency a bulk task that
  # launched a real grid would pay
  timeout 120 nvcc -O2 -arch=native -rdc=true bench/devlaunch.cu -lcudadevrt -o build-gpu/devlaunch &&
    timeout 60 ./build-gpu/devlaunch 2000 2>&1 | tee -a "$out/bench.txt"
  # buffer copies: the staging halves beside the socket payload they replace
  timeout 60 luajit bench/copy.lua cuda 256 2>&1 | tee -a "$out/bench.txt"
  MOONWARP_NO_STAGING=1 timeout 60 luajit bench/copy.lua cuda 256 2>&1 | tee -a "$out/bench.txt"
  kill $smi 2>/dev/null
fi
if want sweep; then
  step "sweep over worker counts"
  for w in ${SWEEP_WORKERS:-4 16 132 528 1056}; do
    timeout 100 luajit bench/core.lua cuda $w 2>&1 | tee -a "$out/sweep.txt"
    timeout 60 luajit bench/hops.lua cuda 2000 $w 2>&1 | tee -a "$out/sweep.txt"
  done
  # $SUITE_WORKERS: the whole suite at other worker counts (more warps per SM for bulk work)
  for w in ${SUITE_WORKERS:-}; do
    echo "# suite, $w workers" | tee -a "$out/sweep.txt"
    mkdir -p "$out/workers-$w"
    timeout 200 luajit bench/suite.lua --backend cuda --workers $w --out "$out/workers-$w" 2>&1 | tee -a "$out/sweep.txt" |
      grep -E "^(bulk|pipeline|dynamic|dependent|fork|round trip|host spawns)|bench on"
  done
fi
if want probes; then
  step "probes: the executor's steps in cycles, and the cost of each kind of operation"
  for m in smcost pathcost; do
    timeout 120 nvcc -O3 -arch=native bench/micro/$m.cu -o build-gpu/$m && timeout 30 build-gpu/$m 2>&1 | tee -a "$out/probes.txt"
  done
  # each variant of the executor ($PROBE_VARIANTS: "-" is the default build, a NAME builds it with
  # -DNAME through MOONWARP_DEVICE_DEFINE) is timed in the same run: probes, then bench/core.lua
  probe() { MOONWARP_PROBES=1 timeout 120 luajit bench/profile_chain.lua cuda "$@" 2>&1 | grep -v "^probe worker [1-9]"; }
  probe_all() {
    for w in ${PROBE_WORKERS:-1 4}; do
      probe 20000 "$w"
      for b in ${PROBE_BATCHES:-1 32}; do probe 2000 "$w" pipeline "$b"; done # 32: the join path
      probe 18 "$w" fib
      probe 20000 "$w" roundtrip
    done
    timeout 100 luajit bench/core.lua cuda
  }
  per_variant "${PROBE_VARIANTS:--}" probes.txt probe_all
fi
if want core; then
  # bench/core.lua (round trip, hop, fib) per variant of the executor ($CORE_VARIANTS, "-" the
  # default), in one call: a change of the hot path against the old way it keeps as a variant
  step "core figures per variant"
  need_counts CORE_WORKERS
  core_at() {
    local w
    for w in ${CORE_WORKERS:-0}; do timeout 100 luajit bench/core.lua cuda "$w"; done
  }
  per_variant "${CORE_VARIANTS:--}" core.txt core_at
fi
if want hostpath; then
  step "the host's path: C round trip and stream, the pollers, probes one at a time and back to back"
  # per variant: the C round trip and stream (bench_roundtrip), then bench/core.lua's figures
  hp_core() {
    timeout 60 ./build-gpu/bench_roundtrip 2000 "${HOSTPATH_C_STREAM:-500000}" 2>&1
    timeout 60 luajit bench/roundtrip.lua cuda 2000 2>&1 # the same program's round trip from Lua
    timeout 100 luajit bench/core.lua cuda 2>&1 | grep -v "^\[" | grep "round trip\|hop\|fib("
  }
  hp_variants=${HOSTPATH_VARIANTS-- MW_POLLERS=2u MW_POLLERS=1u} # set and empty: none
  per_variant "$hp_variants $hp_variants" hostpath.txt hp_core # twice, in turns
  # the probes of every poller, per build of $HOSTPATH_PROBE_VARIANTS (default "-": the default
  # build), for each of $HOSTPATH_MODES (default "roundtrip stream") at each worker count of
  # $HOSTPATH_PROBE_WORKERS (default 528)
  need_counts HOSTPATH_PROBE_WORKERS
  hp_probes() {
    local m n w
    for w in ${HOSTPATH_PROBE_WORKERS:-528}; do
      for m in ${HOSTPATH_MODES:-roundtrip stream}; do
        n=20000
        [ $m = stream ] && n=${HOSTPATH_STREAM:-20000} # more than the 65,536 host futures: the stream waits for them
        echo "# probes: $m, $n host tasks, $w workers (the pollers are workers 0-3)"
        # the pollers' lines as they are; the other workers' summed per probe (all calls, mean cycles)
        MOONWARP_PROBES=1 timeout 100 luajit bench/profile_chain.lua cuda $n $w $m 2>&1 | grep -v "bcast\|diverged" |
          awk '/^probe worker [0-9]+ [a-z_]+ +calls/ && $3 >= 4 { n[$4] += $6; c[$4] += $6 * $8; next } { print }
            END { for (k in n) printf "probe workers 4+ %-12s calls %10d  cycles/call %8d\n", k, n[k], c[k] / n[k] }'
      done
    done
  }
  per_variant "${HOSTPATH_PROBE_VARIANTS:--}" hostpath.txt hp_probes
fi
if want micro; then
  step "micro benchmarks: ${MICRO:-hostread}"
  for m in ${MICRO:-hostread}; do
    [[ $m =~ ^[a-z]+$ ]] && [ -f bench/micro/$m.cu ] || { echo "no bench/micro/$m.cu"; continue; }
    timeout 120 nvcc -O3 -arch=native bench/micro/$m.cu -o build-gpu/micro-$m -lpthread &&
      timeout 120 ./build-gpu/micro-$m 2>&1 | tee -a "$out/micro.txt"
  done
fi
if want stalls; then
  # CUPTI's PC sampling of the running executor (bench/pcsample/): per workload of $STALLS_RUNS
  # (default: the round trip on the one-task image and on one padded to the bench set's size,
  # and the C stream) its samples and cubins in $out/stalls-NAME.txt*, read here with
  # bench/pcsample/report.lua (the machine has no nvdisasm)
  step "stall sampling (CUPTI PC sampling, continuous)"
  cupti_lib=$(for d in /usr/local/cuda/extras/CUPTI/lib64 /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
    [ -e "$d/libcupti.so" ] && echo "$d" && break; done)
  cupti_inc=$(for d in /usr/local/cuda/extras/CUPTI/include /usr/local/cuda/include; do
    [ -e "$d/cupti_pcsampling.h" ] && echo "$d" && break; done)
  if [ -z "$cupti_lib" ] || [ -z "$cupti_inc" ] || ! timeout 60 cc -O2 -shared -fPIC bench/pcsample/pcsample.c -I"$cupti_inc" \
    -I/usr/local/cuda/include -L"$cupti_lib" -Wl,-rpath,"$cupti_lib" -lcupti -ldl -lpthread -o build-gpu/libmwpcsample.so; then
    echo "no CUPTI to build bench/pcsample/pcsample.c with (lib: '${cupti_lib}', include: '${cupti_inc}')" | tee -a "$out/stalls.txt"
  else
    runs=${STALLS_RUNS:-"rt0:luajit bench/roundtrip.lua cuda 20000 0;rt13:luajit bench/roundtrip.lua cuda 20000 13;stream:./build-gpu/bench_roundtrip 200 1000000"}
    IFS=';' read -ra stall_runs <<<"$runs"
    for r in "${stall_runs[@]}"; do
      name=${r%%:*}
      echo "# $name: ${r#*:}" | tee -a "$out/stalls.txt"
      CUDA_INJECTION64_PATH=$PWD/build-gpu/libmwpcsample.so MW_PCSAMPLE_OUT=$out/stalls-$name.txt \
        MW_PCSAMPLE_PERIOD=${STALLS_PERIOD:-13} timeout 120 ${r#*:} 2>&1 | tee -a "$out/stalls.txt"
    done
  fi
fi
if want fanout; then
  step "the fan-out alone, traced, per variant"
  per_variant "${FANOUT_VARIANTS:-- MW_NO_ELIDE}" fanout.txt timeout 60 luajit bench/fanout.lua cuda
fi
if want fibscale; then
  step "fib at several sizes, per worker count"
  per_count FIBSCALE_WORKERS "132 264 528" fibscale.txt luajit bench/fibscale.lua cuda
fi
if want blocks; then
  step "block tasks per worker count, and their kernels"
  for g in ${BLOCK_GRIDS:-1 0}; do
    echo "# MOONWARP_GRIDS=$g" | tee -a "$out/blocks.txt"
    MOONWARP_GRIDS=$g per_count BLOCK_WORKERS "528 1056 2112" blocks.txt luajit bench/blocks.lua cuda
  done
  build_baselines && timeout 120 ./build-gpu/baselines 2>&1 | grep "^block tasks/" | tee -a "$out/blocks.txt"
fi
if want ab; then
  # each tree of $AB_REFS built in its own folder first; then core.lua in turns, so that a drift
  # of the machine (clocks, another tenant) falls on both sides alike
  step "ab: bench/core.lua here and in $AB_REFS, in turns"
  [[ ${AB_ROUNDS:-2} =~ ^[1-9][0-9]*$ ]] || { echo "AB_ROUNDS is a number of rounds, got '$AB_ROUNDS'"; exit 2; }
  [ -n "${AB_REFS:-}" ] || echo "ab: AB_REFS names no tree: this tree alone"
  ab_trees=(".")
  for r in ${AB_REFS:-}; do
    d=.gpu/trees/${r//\//_}
    [ -f "$d/CMakeLists.txt" ] || { echo "ab: no tree $d (scripts/gpu-prepare.sh $r makes it)"; continue; }
    (cmake -S "$d" -B "$d/build-gpu" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$d/build-gpu.log" 2>&1 &&
      cmake --build "$d/build-gpu" -j 16 >>"$d/build-gpu.log" 2>&1) || { echo "ab: $r does not build"; tail -20 "$d/build-gpu.log"; continue; }
    ab_trees+=("$d")
  done
  need_counts CORE_WORKERS
  # luajit with a script and its arguments in tree $1, with that tree's build
  in_tree() {
    local d=$1
    shift
    (cd "$d" && LUA_PATH="$PWD/build-gpu/lua/?.lua;$PWD/build-gpu/lua/?/init.lua;$LUA_PATH" \
      LUA_CPATH="$PWD/build-gpu/lua/?.so;$LUA_CPATH" timeout 100 luajit "$@") 2>&1 | tee -a "$out/ab.txt"
  }
  for ((round = 1; round <= ${AB_ROUNDS:-2}; ++round)); do
    for d in "${ab_trees[@]}"; do
      name=$([ "$d" = . ] && echo "this tree" || echo "$(basename "$d") ($(cat "$d/.gpu/commit" 2>/dev/null || echo "?"))")
      echo "# round $round: $name" | tee -a "$out/ab.txt"
      if [ -n "${AB_BENCH:-}" ]; then # another bench script and its arguments instead of core.lua
        in_tree "$d" $AB_BENCH
        continue
      fi
      for w in ${CORE_WORKERS:-0}; do in_tree "$d" bench/core.lua cuda "$w"; done
    done
  done
fi
if want stack; then
  step "stack of the spawns run in place, per stack_bytes"
  for b in ${STACK_SIZES:-4096 16384 65536}; do
    timeout 60 luajit bench/stack.lua cuda "$b" 2>&1 | tee -a "$out/stack.txt"
  done
fi
if want quick; then
  # a few seconds per variant of the executor ($QUICK_VARIANTS, "-" the default): pipelines of
  # batch 1 and a chain of hops on all workers, for a change measured where the suite cannot fit
  step "quick: pipelines and hops per variant"
  quick_one() {
    local b
    for b in ${QUICK_BATCHES:-1}; do timeout 60 luajit bench/profile_chain.lua cuda 4000 0 pipeline "$b"; done
    timeout 60 luajit bench/profile_chain.lua cuda 20000 0
  }
  per_variant "${QUICK_VARIANTS:--}" quick.txt quick_one
fi
if want fastc; then
  # the price of --Ofast-compile=min: the load of each build (nothing cached, nor by the driver)
  # and the figures of the one-unit image compiled with it, against the default in the same call
  step "fastc: compile time and figures with and without MOONWARP_FAST_COMPILE=1"
  for f in 0 1; do
    for b in tiered parts one_unit; do
      CUDA_CACHE_DISABLE=1 MOONWARP_BUILD=$b MOONWARP_FAST_COMPILE=$f MOONWARP_NO_CACHE=1 \
        timeout 120 luajit bench/compile.lua cuda 2>&1 | sed "s/^/build $b, fast $f: /" | tee -a "$out/fastc.txt"
    done
    MOONWARP_BUILD=one_unit MOONWARP_FAST_COMPILE=$f timeout 100 luajit bench/core.lua cuda 2>&1 |
      sed "s/^/one unit, fast $f: /" | tee -a "$out/fastc.txt"
  done
fi
if want blockfault; then
  step "the block tasks' fault in the suite's runtime"
  first=
  for m in ${BLOCKFAULT_MODES:-plain f512 tasks512 cold512 after512 loaded512 primed512 dropped512}; do
    timeout 90 luajit bench/block_fault.lua cuda $m 2>&1 | tee -a "$out/blockfault.txt"
    [ "${PIPESTATUS[0]}" != 0 ] && [ -z "$first" ] && first=$m
  done
  MOONWARP_GRIDS=0 timeout 90 luajit bench/block_fault.lua cuda tasks512 2>&1 | sed 's/^/MOONWARP_GRIDS=0: /' | tee -a "$out/blockfault.txt"
  if [ -n "$first" ] && [ "${BLOCKFAULT_MEMCHECK:-1}" != 0 ]; then
    # memcheck knows only the allocations made before a kernel's launch: the executor is
    # relaunched after each buffer (README, MOONWARP_RELAUNCH_AFTER_ALLOC)
    MOONWARP_RELAUNCH_AFTER_ALLOC=1 timeout 200 compute-sanitizer --tool memcheck --target-processes all \
      --print-limit 5 luajit bench/block_fault.lua cuda $first >"$out/blockfault-memcheck.txt" 2>&1
    grep -E -A14 "Invalid|ERROR SUMMARY|Out-of-range|stack|FAILED|ran," "$out/blockfault-memcheck.txt" | head -60
  fi
fi
if want soak; then
  step soak
  timeout 300 luajit bench/soak.lua cuda 10000000 1 2>&1 | tee "$out/soak.txt"
fi
if want sanitize; then
  # memcheck and racecheck follow the device process (--target-processes all); the #fault
  # specs are left out: they fault on purpose, which the tools would report. The hang specs
  # stay in (their device process is killed by the deadline). memcheck knows only the
  # allocations made before a launch: the executor is relaunched after each new buffer; the specs' "at once" bounds stretch by
  # $SAN_TIME_SCALE (20), the tools running the device that much slower or more
  # $SAN_TIMEOUT bounds each tool (default: memcheck 200 s; racecheck 320 s, which the 178 specs
  # need: 200 s ended it after 168, bench/NOTES.md v59)
  for tool in ${SAN_TOOLS:-memcheck racecheck}; do
    step "compute-sanitizer $tool"
    san_bound=${SAN_TIMEOUT:-$([ "$tool" = racecheck ] && echo 320 || echo 200)}
    MOONWARP_RELAUNCH_AFTER_ALLOC=1 MW_SPEC_TRACE=1 MW_SPEC_TIME_SCALE=${SAN_TIME_SCALE:-20} timeout "$san_bound" compute-sanitizer --tool $tool --target-processes all \
      --print-limit 20 luajit /tmp/lua-root/usr/bin/busted --tags=gpu --exclude-tags=sim,fault \
      ${SAN_SPECS:-spec/api_spec.lua spec/async_spec.lua spec/property_spec.lua spec/executor_spec.lua spec/cancel_spec.lua spec/trace_spec.lua spec/reliability_spec.lua spec/futures_spec.lua} >"$out/$tool.txt" 2>&1
    echo "exit status: $?"
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed, .* failed" "$out/$tool.txt" | sort | uniq -c
    grep -E "^(failure|error): " "$out/$tool.txt" | head -5
  done
fi
