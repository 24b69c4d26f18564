-- hops.lua - where the time of a device spawn->await hop goes: traces a chain of dependent hops
-- (bench/tasks.lua `chain`) and splits each hop, from the device timer, into the parent's run
-- (spawn, await, then after the wake-up value and release), the gap until the child starts,
-- the child's run, and the gap until the parent resumes.
--   luajit bench/hops.lua [backend] [hops] [workers]   (defaults: auto, 2000, the runtime's)
local mw = require "moonwarp"

local backend, hops, workers = arg[1], tonumber(arg[2] or 2000), tonumber(arg[3] or 0)
assert(hops and hops >= 1 and hops % 1 == 0 and workers and workers >= 0 and workers % 1 == 0,
  "usage: luajit bench/hops.lua [backend] [hops] [workers]")
local rt = assert(mw.runtime { backend = backend, frame_bytes = 512,
  workers = workers > 0 and workers or nil })
local here = (arg and arg[0] or "bench/hops.lua"):match("^(.*)/[^/]*$") or "."
local prog = assert(rt:compile(dofile(here .. "/tasks.lua"), "bench/tasks.lua"))
prog.chain(100):await(60) -- warm

local path = os.tmpname()
rt:trace_start { events = 4 * hops + 64 }
local t0 = mw.now()
prog.chain(hops):await(120)
local wall = mw.now() - t0
local runs, dropped = rt:trace_stop(path)
local nrunning = rt:stats().workers
rt:close()

local ev = dofile(here .. "/trace_runs.lua")(path, function(e) return e.name == "chain" or e.name == "step" end)

local parts = { parent = {}, to_child = {}, child = {}, to_parent = {} }
local workers_seen, same_worker = {}, 0
for i = 1, #ev - 2 do
  local p, c, q = ev[i], ev[i + 1], ev[i + 2]
  if p.name == "chain" and c.name == "step" and q.name == "chain" then
    parts.parent[#parts.parent + 1] = p.dur
    parts.to_child[#parts.to_child + 1] = c.ts - (p.ts + p.dur)
    parts.child[#parts.child + 1] = c.dur
    parts.to_parent[#parts.to_parent + 1] = q.ts - (c.ts + c.dur)
    if p.tid == c.tid and c.tid == q.tid then same_worker = same_worker + 1 end
    workers_seen[c.tid] = true
  end
end

local function median(t)
  if #t == 0 then return 0 / 0 end
  table.sort(t)
  return t[math.ceil(#t / 2)]
end
local n = #parts.child
local nworkers = 0
for _ in pairs(workers_seen) do nworkers = nworkers + 1 end
print(("hop breakdown on %s, %d workers: chain of %d hops, %.2f us per hop (wall clock, traced)")
  :format(rt.backend, nrunning, hops, wall * 1e6 / hops))
print(("  %d runs recorded (%d dropped), %d hops analysed; %d of them on one worker throughout"):format(
  runs, dropped, n, same_worker))
local total = 0
for _, k in ipairs { "parent", "to_child", "child", "to_parent" } do total = total + median(parts[k]) end
local label = {
  parent = "parent run (after-await, value, release, spawn, await)",
  to_child = "gap: parent suspended -> child starts",
  child = "child run (step)",
  to_parent = "gap: child done -> parent resumes",
}
for _, k in ipairs { "parent", "to_child", "child", "to_parent" } do
  local m = median(parts[k])
  print(("  %-58s %8.2f us  (%4.1f%%)"):format(label[k], m, 100 * m / total))
end
print(("  %-58s %8.2f us"):format("sum of the medians", total))
