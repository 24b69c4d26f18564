-- profile_chain.lua - a chain of dependent device hops, a series of pipelines, fib, bulk saxpy or
-- host round trips or a stream of host spawns, on a few workers
-- and nothing else, for a profiler to sample (ncu --replay-mode application, see bench/NOTES.md)
-- or for the executor's probes (MOONWARP_PROBES=1, scripts/gpu.sh probes).
--   luajit bench/profile_chain.lua [backend] [hops] [workers] [chain|pipeline|fib|bulk|roundtrip|stream|fanout] [batch]
--   (defaults: auto, 20000, 4, chain; workers 0: the runtime's default; for pipeline, hops is the
--   number of pipelines of `batch` tiles (default 1), each spawned and awaited from the host; for
--   fib, hops is n; for bulk, hops is the MB of each of x and y of a saxpy run 10 times from the
--   host; for roundtrip, hops host spawns of a task that returns at once, each awaited before the
--   next; for stream, the same hops spawns from one spawn_many, none awaited, timed until all
--   completed (the executor's path of a host task run back to back, its code kept warm, beside
--   roundtrip's one at a time); for fanout, hops runs of the suite's dynamic fan-out,
--   bench/fanout.lua, one at a time)
local mw = require "moonwarp"
local backend, hops, workers = arg[1], tonumber(arg[2] or 20000), tonumber(arg[3] or 4)
local what, batch = arg[4] or "chain", tonumber(arg[5] or 1)
local whats = {chain = true, pipeline = true, fib = true, bulk = true, roundtrip = true, stream = true, fanout = true}
local function whole(x, least) return x and x >= least and x == math.floor(x) end
assert(whats[what] and whole(hops, 1) and whole(workers, 0) and whole(batch, 1),
  "usage: luajit bench/profile_chain.lua [backend] [hops] [workers] [chain|pipeline|fib|bulk|roundtrip|stream|fanout] [batch]"
  .. " (hops and batch whole numbers from 1, workers from 0)")
local rt = assert(mw.runtime { backend = backend, workers = workers > 0 and workers or nil, frame_bytes = 512 })
local here = (arg and arg[0] or "bench/profile_chain.lua"):match("^(.*)/[^/]*$") or "."
local prog = assert(rt:compile(dofile(here .. "/tasks.lua"), "bench/tasks.lua"))
local t0 = mw.now()
local count = hops
if what == "chain" then
  assert(prog.chain(hops):await(300) == math.floor(hops / 2))
elseif what == "fib" then
  local a, b, tasks = 0, 1, {[0] = 1, [1] = 1}
  for i = 2, hops do tasks[i] = tasks[i - 1] + tasks[i - 2] + 1 end
  for _ = 1, hops do a, b = b, a + b end
  assert(prog.fib(hops):await(300) == a)
  count = tasks[hops]
elseif what == "fanout" then
  local run, close = dofile(here .. "/fanout.lua").setup(rt, prog)
  for _ = 1, hops do run() end
  close()
elseif what == "roundtrip" then
  local nop = prog.nop
  for _ = 1, hops do assert(nop():await(60) == 1) end
elseif what == "stream" then
  local s0 = rt:stats()
  local before = s0.tasks.nop.completed
  local t1 = mw.now()
  assert(prog.nop:spawn_many(hops, nil, { futures = false }) == hops)
  local calls = mw.now() - t1
  local s1 = rt:stats()
  while rt:stats().tasks.nop.completed - before < hops do mw.run(0.0005) end
  assert(rt:stats().tasks.nop.completed - before == hops, "every spawn completed once")
  print(("the spawn call %.3f s: %.3f s in %d waits for a host future, %.3f s in %d waits for an inbox cell"):format(
    calls, s1.waits_future_s - s0.waits_future_s, s1.waits_future - s0.waits_future,
    s1.waits_inbox_s - s0.waits_inbox_s, s1.waits_inbox - s0.waits_inbox))
elseif what == "bulk" then
  local n = hops * 262144
  local x, y = rt:buffer("float", n), rt:buffer("float", n)
  local blocks = math.floor((n + 1023) / 1024)
  prog.saxpy:bulk(blocks, 2.0, x, y, n):await(60)
  local best = math.huge
  t0 = mw.now()
  for _ = 1, 10 do
    local t1 = mw.now()
    prog.saxpy:bulk(blocks, 2.0, x, y, n):await(60)
    best = math.min(best, mw.now() - t1)
  end
  print(("saxpy over %d MB each of x and y: best of 10 %.1f us, %.0f GB/s"):format(hops, best * 1e6,
    12 * n / best / 1e9))
  count = 10 * blocks
else
  local m, t, u = rt:buffer("float", 256), rt:buffer("float", 256 * batch), rt:buffer("float", 256 * batch)
  for _ = 1, hops do assert(prog.pipeline(t, m, u, batch):await(60) == batch) end
end
local noun = ({chain = "hops", pipeline = ("pipelines of batch %d"):format(batch), fib = "fib tasks",
  bulk = "bulk instances", roundtrip = "round trips", stream = "host spawns in a stream", fanout = "fan-outs"})[what]
print(("%d %s in %.3f s: %.2f us each on %s, %d workers"):format(count, noun,
  mw.now() - t0, (mw.now() - t0) * 1e6 / count, rt.backend, rt:stats().workers))
if what == "pipeline" or what == "bulk" then -- what the spawners chose by: one instance's time as last timed
  local tasks, line = rt:stats().tasks, {}
  for _, k in ipairs(what == "bulk" and {"saxpy"} or {"stage_in", "stage_mm", "stage_out"}) do
    line[#line + 1] = ("%s %s"):format(k, tasks[k].instance_cycles or "never timed")
  end
  print("cycles an instance: " .. table.concat(line, ", "))
end
rt:close()
