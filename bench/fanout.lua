-- fanout.lua - the dynamic fan-out workload (bench/tasks.lua `route`: one `expert` task per
-- non-empty group of 48, sized by data read on the device), its data shared with bench/suite.lua,
-- and alone: its time; route's spawn loop and await loop timed from inside the task (route_split,
-- the same body with the device timer read at three points); and one traced run split into
-- route's runs, the waits between them and the experts' starts, to show where a fan-out's time goes.
--   luajit bench/fanout.lua [backend] [runs] [stack_bytes] [workers]   (defaults: auto, 50, the
--   runtime's, the runtime's)
local M = {}

-- the fan-out's buffers on runtime rt and prog (bench/tasks.lua compiled): returns run() (one
-- fan-out, checked against the sum on the host) and close()
function M.setup(rt, prog)
  math.randomseed(11)
  local groups = 48
  local counts, items, want = {}, {}, 0
  for g = 1, groups do
    counts[g] = math.random(0, 2) == 0 and 0 or math.random(1, 512)
    for _ = 1, counts[g] do items[#items + 1] = math.random(-100, 100); want = want + items[#items] end
  end
  local cb, ib = rt:buffer("int32", groups), rt:buffer("int32", #items)
  cb:write(counts)
  ib:write(items)
  local function run() assert(prog.route(cb, ib, groups):await() == want) end
  local function close() cb:close(); ib:close() end
  -- route_split's run (when prog has it): the device timer's stamps in ts (uint64, 64 elements)
  local function split(ts) assert(prog.route_split(cb, ib, groups, ts):await() == want) end
  return run, close, groups, split
end

-- route with the device timer (ns) read when it starts, after its spawn loop and after each await
-- (ts[2 + g]); ts[60] the number of spawns. MW_GLOBALTIMER is the executor's own clock (task_api.cuh).
M.split_source = [[
task long route_split(const int *counts, const int *items, int groups, uint64_t *ts) {
  local future fs[48];
  local int g, k, first;
  local long total;
  k = 0;
  first = 0;
  if (lane == 0) ts[0] = MW_GLOBALTIMER();
  for (g = 0; g < groups; ++g) {
    if (counts[g] > 0) fs[k++] = spawn(expert, items, first, counts[g]);
    first += counts[g];
  }
  if (lane == 0) ts[1] = MW_GLOBALTIMER();
  total = 0;
  for (g = 0; g < k; ++g) {
    await(fs[g]);
    total += (long)value(fs[g]);
    if (lane == 0) ts[2 + g] = MW_GLOBALTIMER();
  }
  if (lane == 0) ts[60] = k;
  return total;
}
]]

if not (arg and arg[0] and arg[0]:match("fanout%.lua$")) then return M end

local mw = require "moonwarp"
local backend, runs, stack_bytes, workers = arg[1], tonumber(arg[2] or 50), tonumber(arg[3] or 0), tonumber(arg[4] or 0)
assert(runs and runs >= 1 and runs % 1 == 0 and stack_bytes and stack_bytes % 1 == 0 and workers and workers >= 0
  and workers % 1 == 0, "usage: luajit bench/fanout.lua [backend] [runs] [stack_bytes] [workers]")
local rt = assert(mw.runtime { backend = backend, frame_bytes = 512,
  stack_bytes = stack_bytes > 0 and stack_bytes or nil, workers = workers > 0 and workers or nil })
local here = arg[0]:match("^(.*)/[^/]*$") or "."
local prog = assert(rt:compile(dofile(here .. "/tasks.lua") .. M.split_source, "bench/tasks.lua"))
local run, close, groups, split = M.setup(rt, prog)
for _ = 1, 10 do run() end
local t = {}
for i = 1, runs do
  local t0 = mw.now()
  run()
  t[i] = (mw.now() - t0) * 1e6
end
table.sort(t)
print(("fan-out on %s (%d workers, stack_bytes %s), %d groups: p50 %.1f us, p10 %.1f, p90 %.1f over %d runs%s"):format(rt.backend,
  rt:stats().workers, stack_bytes > 0 and tostring(stack_bytes) or "default", groups, t[math.ceil(runs / 2)], t[math.max(1, math.ceil(runs / 10))],
  t[math.ceil(runs * 9 / 10)], runs, os.getenv("MOONWARP_DEVICE_DEFINE") and
  (" (" .. os.getenv("MOONWARP_DEVICE_DEFINE") .. ")") or ""))

-- route_split: the spawn loop, the first await and all awaits (each with its value()), medians
local tb = rt:buffer("uint64", 64)
local sp, first, aw, nspawn = {}, {}, {}, 0 -- nspawn: the spawns route_split counted
for i = 1, math.max(runs, 10) do
  split(tb)
  local ts = tb:read()
  local k = tonumber(ts[61])
  nspawn = k
  sp[i], first[i], aw[i] = tonumber(ts[2] - ts[1]) / 1e3, tonumber(ts[3] - ts[2]) / 1e3, tonumber(ts[2 + k] - ts[2]) / 1e3
end
tb:close()
local function median(v) table.sort(v); return v[math.ceil(#v / 2)] end
print(("route inside: spawn loop %.1f us (%d spawns of %d groups, %.2f us a spawn); awaits %.1f us (%.2f us an await with its value()), the first %.1f us"):format(
  median(sp), nspawn, groups, median(sp) / nspawn, median(aw), median(aw) / nspawn, median(first)))

-- one run traced: route's runs (it suspends at an await whose expert still runs) and the experts'
local path = os.tmpname()
rt:trace_start()
local t0 = mw.now()
run()
local wall = (mw.now() - t0) * 1e6
local _, dropped = rt:trace_stop(path)
close()
rt:close()
local ev = dofile(here .. "/trace_runs.lua")(path, function(e) return e.name == "route" or e.name == "expert" end)
if #ev == 0 then print("trace: no runs recorded"); return end
local start = ev[1].ts
local route, experts, last_end = {}, {}, start
for _, e in ipairs(ev) do
  if e.name == "route" then route[#route + 1] = e else experts[#experts + 1] = e end
  last_end = math.max(last_end, e.ts + e.dur)
end
local rsum, wsum = 0, 0
for i, e in ipairs(route) do
  rsum = rsum + e.dur
  if i > 1 then wsum = wsum + (e.ts - (route[i - 1].ts + route[i - 1].dur)) end
end
local on_route, esum, first_s, last_s = 0, 0, math.huge, 0
local rtid = route[1] and route[1].tid
for _, e in ipairs(experts) do
  esum = esum + e.dur
  if e.tid == rtid then on_route = on_route + 1 end
  first_s, last_s = math.min(first_s, e.ts - start), math.max(last_s, e.ts - start)
end
print(("one run traced: wall %.1f us (the host's spawn and await included); device span %.1f us; %d runs dropped"):format(
  wall, last_end - start, dropped or 0))
print(("  route: %d runs, %.1f us running, %.1f us waiting between its runs"):format(#route, rsum, wsum))
print(("  experts: %d, %d on route's worker, %.1f us running in all; the first starts at %.1f us, the last at %.1f us"):format(
  #experts, on_route, esum, first_s, last_s))
