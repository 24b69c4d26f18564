-- core.lua - the executor's three headline figures, measured in one run: host spawn->await round
-- trip of a task that returns at once, a chain of device-side spawn->await hops, and fib(30).
-- Usage: luajit bench/core.lua [backend [workers]] [--trace FILE]   (prints a table; baselines
-- are in bench/README.md). With --trace, one more fib run after the figures is recorded into FILE
-- as a Chrome trace (open it in Perfetto); the figures themselves are measured untraced.
local mw = require "moonwarp"

local args, trace_path = {}, nil
do
  local i = 1
  while arg and arg[i] do
    if arg[i] == "--trace" then
      trace_path = arg[i + 1] or error("--trace needs a file name")
      i = i + 2
    else
      args[#args + 1] = arg[i]
      i = i + 1
    end
  end
end
local backend = args[1]
local workers = tonumber(args[2])
if workers == 0 then workers = nil end
local rt = assert(mw.runtime { backend = backend, workers = workers, frame_bytes = 512 })
local here = (arg and arg[0] or "bench/core.lua"):match("^(.*)/[^/]*$") or "."
local t_load = mw.now()
local prog = assert(rt:compile(dofile(here .. "/tasks.lua"), "bench/tasks.lua"))
t_load = mw.now() - t_load
-- the tiered build: the figures are the one-unit image's, once it is swapped in
local t_swap
if os.getenv("MOONWARP_BUILD") == "tiered" then
  local t0 = mw.now()
  while rt:stats().tier_swaps < 1 do
    assert(mw.now() - t0 < 120, "no one-unit image swapped in within 120 s")
    mw.run(0.01)
  end
  t_swap = mw.now() - t0
end

local function percentile(t, p)
  table.sort(t)
  return t[math.max(1, math.ceil(#t * p))]
end

-- 1. round trip
local iters = rt.backend == "cuda" and 5000 or 500
for _ = 1, 100 do prog.nop():await() end
local lat = {}
for i = 1, iters do
  local t0 = mw.now()
  prog.nop():await()
  lat[i] = (mw.now() - t0) * 1e6
end
local p50, p99 = percentile(lat, 0.5), percentile(lat, 0.99)

-- 2. dependent chain of device-side hops
local hops = rt.backend == "cuda" and 10000 or 2000
prog.chain(100):await()
local t0 = mw.now()
local s = prog.chain(hops):await()
local chain_us = (mw.now() - t0) * 1e6 / hops
assert(s == math.floor(hops / 2), "chain result")

-- 3. fib(30): 2*fib(31)-1 tasks
local n = rt.backend == "cuda" and 30 or 18
local function fibn(k) local a, b = 0, 1 for _ = 1, k do a, b = b, a + b end return a end
prog.fib(15):await()
local best = math.huge
for _ = 1, 3 do
  t0 = mw.now()
  local r = prog.fib(n):await()
  best = math.min(best, mw.now() - t0)
  assert(r == fibn(n), "fib result")
end
local tasks = 2 * fibn(n + 1) - 1

print(("moonwarp core figures on %s, %d workers, %s"):format(rt.backend, rt:stats().workers,
  os.date("!%Y-%m-%d")))
print(("%-44s %12s"):format("figure", "value"))
print(("%-44s %9.2f s"):format("program load (" .. (os.getenv("MOONWARP_BUILD") or "default build") .. ")", t_load))
if t_swap then print(("%-44s %9.2f s"):format("one-unit image swapped in after", t_swap)) end
print(("%-44s %9.2f us"):format("host spawn->await round trip, p50", p50))
print(("%-44s %9.2f us"):format("host spawn->await round trip, p99", p99))
print(("%-44s %9.3f us"):format(("device spawn->await hop (chain of %d)"):format(hops), chain_us))
print(("%-44s %9.2f M/s"):format(("fib(%d), %d tasks"):format(n, tasks), tasks / best / 1e6))
print(("%-44s %9.1f k/s"):format("fib, per worker", tasks / best / 1e3 / rt:stats().workers))

if trace_path then
  -- about 1.5 runs per task, spread over the workers by stealing: room for more than twice a
  -- fair share each (a worker that runs out counts the rest as dropped)
  local w = rt:stats().workers
  assert(rt:trace_start { events = math.floor(4 * tasks / w) + 1024 })
  t0 = mw.now()
  prog.fib(n):await()
  local traced = mw.now() - t0
  local written, dropped = assert(rt:trace_stop(trace_path))
  print(("%-44s %9.2f M/s"):format(("fib(%d) traced"):format(n), tasks / traced / 1e6))
  print(("trace: %d runs written to %s, %d dropped (open it in Perfetto)"):format(written,
    trace_path, dropped))
end
rt:close()
