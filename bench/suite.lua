-- suite.lua - the benchmark suite: each workload run by moonwarp, beside the launch-based
-- baseline it competes with where one is available, in one run; prints a table with ratios and
-- writes bench.csv and bench.svg.
--   luajit bench/suite.lua [--backend cuda|sim] [--out DIR] [--quick] [--workers N]
-- (--workers: the executor's warps, the runtime's default otherwise: four per SM on cuda)
-- Baselines come from bench/baselines.cu, built by scripts/gpu.sh with nvcc and named by
-- $MW_BASELINES; where it is missing, the table says so instead of inventing a figure. A row's
-- baseline is the figure of the same name, except the pipeline's: a CUDA graph whose dependent
-- stages use programmatic dependent launch ("... (graph+PDL)", compute capability 9.0+), or the
-- plain CUDA graph where the run has no PDL figure; the plain graph is then listed as a
-- reference line, as are the other baseline figures no row is compared with.
local mw = require "moonwarp"

local opts = { backend = nil, out = ".", quick = false, workers = nil }
do
  local i = 1
  while arg and arg[i] do
    local a = arg[i]
    if a == "--backend" then opts.backend = arg[i + 1]; i = i + 1
    elseif a == "--out" then opts.out = arg[i + 1]; i = i + 1
    elseif a == "--quick" then opts.quick = true
    elseif a == "--workers" then opts.workers = assert(tonumber(arg[i + 1]), "--workers N"); i = i + 1
    else error("unknown argument " .. a) end
    i = i + 1
  end
end

local rt = assert(mw.runtime { backend = opts.backend, frame_bytes = 512, workers = opts.workers })
local gpu = rt.backend == "cuda"
local small = opts.quick or not gpu

local here = (arg and arg[0] or "bench/suite.lua"):match("^(.*)/[^/]*$") or "."
local prog = assert(rt:compile(dofile(here .. "/tasks.lua"), "bench/tasks.lua"))

local function median(t)
  table.sort(t)
  return t[math.ceil(#t / 2)]
end
local function pct(t, p)
  table.sort(t)
  return t[math.max(1, math.ceil(#t * p))]
end
local function timeit(reps, fn)
  local times = {}
  for r = 1, reps do
    local t0 = mw.now()
    fn(r)
    times[r] = mw.now() - t0
  end
  return times
end

local rows = {} -- { workload, figure, unit, value, better = "lower"|"higher" }
local function row(w, f, unit, v, better) rows[#rows + 1] = { w, f, unit, v, better } end

-- round trip
do
  local n = small and 200 or 5000
  for _ = 1, 20 do prog.nop():await() end
  local lat = {}
  for i = 1, n do
    local t0 = mw.now()
    prog.nop():await()
    lat[i] = (mw.now() - t0) * 1e6
  end
  row("round trip", "spawn->await p50", "us", pct(lat, 0.5), "lower")
  row("round trip", "spawn->await p99", "us", pct(lat, 0.99), "lower")
end

-- dependent chain
do
  local hops = small and 1000 or 10000
  prog.chain(10):await()
  local t = median(timeit(3, function() assert(prog.chain(hops):await() == math.floor(hops / 2)) end))
  row("dependent chain", ("hop (%d hops)"):format(hops), "us/step", t * 1e6 / hops, "lower")
end

-- fork-join
do
  local n = small and 16 or 30
  local a, b = 0, 1
  for _ = 1, n + 1 do a, b = b, a + b end
  local tasks = 2 * a - 1
  local t = median(timeit(3, function() prog.fib(n):await() end))
  row("fork-join", ("fib(%d), %d tasks"):format(n, tasks), "Mtasks/s", tasks / t / 1e6, "higher")
end

-- bulk saxpy
do
  local n = small and 65536 or 67108864 -- 256 MB each of x and y on the GPU
  local x, y = rt:buffer("float", n), rt:buffer("float", n)
  local chunk = 65536
  local xs, ys = {}, {}
  for i = 1, chunk do xs[i] = (i % 7) * 0.5; ys[i] = 1 end
  for first = 1, n, chunk do x:write(xs, first); y:write(ys, first) end
  local blocks = math.floor((n + 1023) / 1024)
  prog.saxpy:bulk(blocks, 2.0, x, y, n):await()
  local t = median(timeit(small and 3 or 10, function() prog.saxpy:bulk(blocks, 2.0, x, y, n):await() end))
  local got = y:read(1, 8)
  local reps = 1 + (small and 3 or 10)
  assert(math.abs(got[2] - (1 + reps * 2.0 * (2 % 7) * 0.5)) < 1e-3, "saxpy result")
  row("bulk", ("saxpy over %.1f MB"):format(n * 8 / 1048576), "GB/s", 12 * n / t / 1e9, "higher")
  x:close()
  y:close()
end

-- pipeline
do
  local m = rt:buffer("float", 256)
  local mt = {}
  for i = 1, 256 do mt[i] = ((i - 1) % 17 == 0) and 1 or 0 end -- identity
  m:write(mt)
  for _, batch in ipairs { 1, 2, 4, 8, 16, 32, 64 } do
    local t, u = rt:buffer("float", batch * 256), rt:buffer("float", batch * 256)
    local tv = {}
    for i = 1, batch * 256 do tv[i] = i % 5 end
    t:write(tv)
    prog.pipeline(t, m, u, batch):await() -- checked once, then timed (the data keeps changing)
    local out = u:read(1, 4)
    assert(math.abs(out[2] - ((2 % 5) * 0.5 + 1 - 1) * 2) < 1e-4, "pipeline result")
    local time = median(timeit(small and 3 or 50, function() prog.pipeline(t, m, u, batch):await() end))
    row("pipeline", ("3 stages, batch %d"):format(batch), "us", time * 1e6, "lower")
    -- what the spawner chose by (alone or shared): one instance's time as the device last timed it
    local tasks = rt:stats().tasks
    print(("pipeline batch %d: cycles an instance, stage_in %s, stage_mm %s, stage_out %s"):format(batch,
      tasks.stage_in.instance_cycles or "-", tasks.stage_mm.instance_cycles or "-",
      tasks.stage_out.instance_cycles or "-"))
    t:close()
    u:close()
  end
  m:close()
end

-- dynamic fan-out (bench/fanout.lua)
do
  local run, close, groups = dofile(here .. "/fanout.lua").setup(rt, prog)
  local t = median(timeit(small and 3 or 50, run))
  row("dynamic fan-out", ("%d groups"):format(groups), "us", t * 1e6, "lower")
  close()
end

-- buffers: 256 MB (64 MB on sim) written from and read back into an FFI array, no Lua tables
do
  local ffi = require "ffi"
  local n = (small and 16 or 64) * 1048576
  local host = ffi.new("float[?]", n)
  for i = 0, n - 1, 4096 do host[i] = i end
  local b = rt:buffer("float", n)
  b:write_from(host, n) -- warm
  local t = median(timeit(small and 3 or 5, function()
    b:write_from(host, n)
    b:read_into(host, n)
  end))
  assert(host[4096] == 4096, "buffer round trip")
  row("buffers", ("write+read %d MB, FFI array"):format(n * 4 / 1048576), "GB/s",
    2 * n * 4 / t / 1e9, "higher")
  b:close()
end

-- waits: the CPU time the waiting thread spends over a 2 s await of one task (it naps)
do
  local ffi = require "ffi"
  pcall(ffi.cdef, [[
    struct mwbench_ts { long sec, nsec; };
    int mwbench_clock_gettime(int clock, struct mwbench_ts *ts) __asm__("clock_gettime");
  ]])
  local ts = ffi.new("struct mwbench_ts")
  local function thread_cpu()
    assert(ffi.C.mwbench_clock_gettime(3, ts) == 0) -- CLOCK_THREAD_CPUTIME_ID
    return tonumber(ts.sec) + tonumber(ts.nsec) * 1e-9
  end
  local f = prog.snooze(2000)
  local c0 = thread_cpu()
  assert(f:await() == 2000)
  row("waits", "CPU time of the waiting thread over a 2 s await", "s", thread_cpu() - c0, "lower")
end

-- waits: how late an await past its spin sees a task end: a task busy for 1.5 ms of the device
-- clock, awaited from the host; the time beyond 1.5 ms (the round trip included), median of 21
do
  local late = {}
  for i = 1, 21 do
    local t0 = mw.now()
    assert(prog.busy_us(1500):await(10) == 1500)
    late[i] = (mw.now() - t0) * 1e6 - 1500
  end
  table.sort(late)
  row("waits", "an await of a 1.5 ms task, time beyond it, p50", "us", late[11], "lower")
end

-- host spawns, fire-and-forget: n spawns from Lua whose futures are dropped, timed until every
-- one has completed (counted by the runtime); a Lua loop of calls, then one spawn_many call
do
  local n = small and 20000 or 200000
  local function counted() return rt:stats().tasks.nop.completed end
  local function timed(spawn)
    collectgarbage()
    local before = counted()
    local t0 = mw.now()
    spawn()
    while counted() - before < n do mw.run(0.0005) end
    local t = mw.now() - t0
    assert(counted() - before == n, "every spawn completed once")
    return t
  end
  local nop = prog.nop
  local t = timed(function() for _ = 1, n do nop() end end)
  row("host spawns", "fire-and-forget, Lua loop", "spawns/s", n / t, "higher")
  t = timed(function() assert(nop:spawn_many(n, nil, { futures = false }) == n) end)
  row("host spawns", "fire-and-forget, spawn_many", "spawns/s", n / t, "higher")
end

-- block tasks: the examples' matmul and softmax (bench/blocks.lua; the baselines: the same
-- algorithms as plain kernels). Last of the device rows: their programs change the image (on
-- cuda, linked with the device runtime for the grids of block tasks: protocol.h)
local workers = rt:stats().workers
-- a failure there (a device fault ends the runtime) costs their rows only: it is printed, and the
-- rows measured before and the baselines still make the table
local blocks_ok, block_rows = pcall(assert(loadfile(here .. "/blocks.lua"))("--module").measure, rt, small)
if blocks_ok then
  for _, r in ipairs(block_rows) do row(r[1], r[2], r[3], r[4], r[5]) end
else
  print("block tasks: not measured: " .. tostring(block_rows))
end
if blocks_ok then rt:close() else pcall(rt.close, rt) end -- a runtime that faulted may refuse

-- baselines, measured by bench/baselines in this same run where it was built
local baseline, baseline_order = {}, {}
local function exists(p) local f = io.open(p) if f then f:close() return true end end
local bin = os.getenv("MW_BASELINES")
if bin and exists(bin) then
  local p = io.popen(bin .. " 2>&1")
  for line in p:lines() do
    local key, value = line:match("^(.*),([-%d.e+]+)$") -- a figure's name may hold commas
    if key then
      baseline[key] = tonumber(value)
      baseline_order[#baseline_order + 1] = key
    end
  end
  p:close()
end

-- the baseline a row is compared with: the figure of the row's name, unless the run has the
-- preferred figure for its workload (the name plus a suffix); the name's own figure is then shown
-- as a reference line, labelled
local preferred = { pipeline = { suffix = " (graph+PDL)", label = "graph+PDL", instead = " (graph)" } }
local function baseline_for(w, key)
  local p = preferred[w]
  if p and baseline[key .. p.suffix] then return key .. p.suffix, p end
  return key, nil
end
local relabel = {} -- baseline key -> the name its reference line is shown under

local out_rows, matched = {}, {}
print(("moonwarp bench on %s (%d workers), %s"):format(gpu and "cuda" or "sim", workers,
  os.date("!%Y-%m-%d")))
-- the figure column as wide as its longest name
local fw = 26
for _, r in ipairs(rows) do fw = math.max(fw, #r[2]) end
local function fmt(f) return (f:gsub("%%%-26s", "%%-" .. fw .. "s")) end
print(fmt("%-16s %-26s %12s %10s  %-28s %s"):format("workload", "figure", "moonwarp", "unit",
  "baseline", "ratio"))
for _, r in ipairs(rows) do
  local key = r[1] .. "/" .. r[2]
  local bkey, p = baseline_for(r[1], key)
  local b = baseline[bkey]
  local ratio = b and (r[5] == "lower" and b / r[4] or r[4] / b)
  print(fmt("%-16s %-26s %12.3f %10s  %-28s %s"):format(r[1], r[2], r[4], r[3],
    b and ("%.3f"):format(b) .. (p and " (" .. p.label .. ")" or "") or "(no baseline in this run)",
    ratio and ("%.2fx"):format(ratio) or "-"))
  out_rows[#out_rows + 1] = { r[1], r[2], r[3], r[4], b or "", ratio or "" }
  matched[bkey] = true
  if p then relabel[key] = key .. p.instead end
end
-- the baselines' reference figures that no moonwarp row matches (the floor, graph steps, the
-- pipeline's launches on a stream, and its plain CUDA graph where the PDL one is the baseline)
for _, key in ipairs(baseline_order) do
  if not matched[key] then
    local w, fig = (relabel[key] or key):match("^([^/]+)/(.*)$")
    print(fmt("%-16s %-26s %12s %10s  %-28.3f %s"):format(w or key, fig or "", "", "", baseline[key],
      "(reference)"))
  end
end

-- the targets, as ratios of figures from this same run
local mine = {}
for _, r in ipairs(rows) do mine[r[1] .. "/" .. r[2]] = r[4] end
local function find(tbl, prefix)
  for k, v in pairs(tbl) do if k:sub(1, #prefix) == prefix then return v end end
end
local targets = {
  { "round trip p50 vs the ping-pong floor", "<= 1.30x",
    find(mine, "round trip/spawn->await p50"), find(baseline, "round trip/ping-pong floor p50"),
    function(m, b) return m / b, m / b <= 1.3 end },
  { "dependent hop vs a CUDA graph step", ">= 3.00x faster",
    find(mine, "dependent chain/hop"), find(baseline, "dependent chain/CUDA graph step"),
    function(m, b) return b / m, b / m >= 3 end },
  { "fib tasks per second", ">= 250 M/s", find(mine, "fork-join/fib"), 1,
    function(m) return m, m >= 250 end },
  { "bulk vs the standalone kernel", ">= 0.90x", find(mine, "bulk/saxpy"),
    find(baseline, "bulk/saxpy"), function(m, b) return m / b, m / b >= 0.9 end },
  { "buffer write+read vs cudaMemcpy", ">= 0.50x", find(mine, "buffers/write+read"),
    find(baseline, "buffers/write+read"), function(m, b) return m / b, m / b >= 0.5 end },
}
for _, batch in ipairs { 1, 2, 4, 8 } do
  local key = ("pipeline/3 stages, batch %d"):format(batch)
  local bkey, p = baseline_for("pipeline", key) -- the graph with PDL where the run has it
  targets[#targets + 1] = { ("pipeline batch %d vs a CUDA graph%s"):format(batch, p and "+PDL" or ""),
    ">= 1.50x faster", mine[key], baseline[bkey], function(m, b) return b / m, b / m >= 1.5 end }
end
print()
print(("%-40s %-16s %-10s %s"):format("target", "goal", "measured", ""))
for _, t in ipairs(targets) do
  local m, b = t[3], t[4]
  if m and b then
    local v, met = t[5](m, b)
    print(("%-40s %-16s %-10.2f %s"):format(t[1], t[2], v, met and "met" or "missed"))
  else
    print(("%-40s %-16s %-10s %s"):format(t[1], t[2], "-", "no baseline in this run"))
  end
end

-- CSV
local csv = assert(io.open(opts.out .. "/bench.csv", "w"))
csv:write("workload,figure,unit,moonwarp,baseline,ratio\n")
for _, r in ipairs(out_rows) do
  csv:write(('"%s","%s",%s,%s,%s,%s\n'):format(r[1], r[2], r[3], tostring(r[4]), tostring(r[5]),
    tostring(r[6])))
end
csv:close()

-- SVG (bench/chart.lua)
local chart = dofile(here .. "/chart.lua")
local f = assert(io.open(opts.out .. "/bench.svg", "w"))
f:write(chart.svg(out_rows, ("%s, %s"):format(gpu and "cuda" or "sim", os.date("!%Y-%m-%d"))))
f:close()
print(("wrote %s/bench.csv and %s/bench.svg"):format(opts.out, opts.out))
