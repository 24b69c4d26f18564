-- stages.lua - where the time of a pipeline (bench/tasks.lua `pipeline`: three bulk stages, each
-- spawned and awaited by a driver task that the host spawns and awaits) goes, from the device's
-- task traces: each run of the driver and of the stages, and each gap between two runs, as the
-- median over repeated pipelines; and the host round trip beside the device run of its task.
--   luajit bench/stages.lua [backend] [batch] [repeats]   (defaults: auto, 1, 200)
local mw = require "moonwarp"

local backend, batch, reps = arg[1], tonumber(arg[2] or 1), tonumber(arg[3] or 200)
assert(batch and batch >= 1 and batch % 1 == 0 and reps and reps >= 1 and reps % 1 == 0,
  "usage: luajit bench/stages.lua [backend] [batch] [repeats]")
local rt = assert(mw.runtime { backend = backend, frame_bytes = 512 })
local here = (arg and arg[0] or "bench/stages.lua"):match("^(.*)/[^/]*$") or "."
local prog = assert(rt:compile(dofile(here .. "/tasks.lua"), "bench/tasks.lua"))
local trace_runs = dofile(here .. "/trace_runs.lua")

local m = rt:buffer("float", 256)
local t, u = rt:buffer("float", batch * 256), rt:buffer("float", batch * 256)
for _ = 1, 20 do prog.pipeline(t, m, u, batch):await(60) end -- warm
for _ = 1, 20 do prog.nop():await(60) end

local function median(x)
  if #x == 0 then return 0 / 0 end
  table.sort(x)
  return x[math.ceil(#x / 2)]
end

-- traces fn() run reps times; returns the X events by task id, each list sorted by start
local function traced(fn)
  local path = os.tmpname()
  rt:trace_start { events = 64 * reps + 256 }
  local wall = {}
  for i = 1, reps do
    local t0 = mw.now()
    fn()
    wall[i] = (mw.now() - t0) * 1e6
  end
  local runs, dropped = rt:trace_stop(path)
  return trace_runs(path), wall, runs, dropped
end

-- the pipeline: every run from a driver's first start to its last end, in order
local ev, wall, runs, dropped = traced(function() prog.pipeline(t, m, u, batch):await(60) end)
local first, last = {}, {}
for _, e in ipairs(ev) do
  if e.name == "pipeline" then
    local id = e.args.task
    first[id] = first[id] or e.ts
    last[id] = e.ts + e.dur
  end
end
local seqs = {}
for id, t0 in pairs(first) do
  local s = {}
  for _, e in ipairs(ev) do
    if e.ts >= t0 and e.ts + e.dur <= last[id] and (e.name == "pipeline" or e.name:match("^stage_")) then
      s[#s + 1] = e
    end
  end
  seqs[#seqs + 1] = s
end
-- the shape of the most common sequence (names in order) is the one analysed
local shapes, best, bestn = {}, nil, 0
for _, s in ipairs(seqs) do
  local names = {}
  for i, e in ipairs(s) do names[i] = e.name end
  local key = table.concat(names, " ")
  shapes[key] = (shapes[key] or 0) + 1
  if shapes[key] > bestn then best, bestn = key, shapes[key] end
end
print(("pipeline batch %d on %s, %d workers: %d pipelines traced (%d runs, %d dropped), wall p50 %.1f us")
  :format(batch, rt.backend, rt:stats().workers, #seqs, runs, dropped, median(wall)))
if not best then
  print("  no pipeline recorded whole")
else
  print(("  %d of them in the common shape: %s"):format(bestn, best))
  local parts, labels = {}, {}
  for _, s in ipairs(seqs) do
    local names = {}
    for i, e in ipairs(s) do names[i] = e.name end
    if table.concat(names, " ") == best then
      for i, e in ipairs(s) do
        parts[2 * i - 1] = parts[2 * i - 1] or {}
        table.insert(parts[2 * i - 1], e.dur)
        labels[2 * i - 1] = ("run   %s"):format(e.name)
        if s[i + 1] then
          parts[2 * i] = parts[2 * i] or {}
          table.insert(parts[2 * i], s[i + 1].ts - (e.ts + e.dur))
          labels[2 * i] = ("gap   %s -> %s"):format(e.name, s[i + 1].name)
        end
      end
    end
  end
  local total = 0
  for i = 1, #parts do
    local md = median(parts[i])
    total = total + md
    print(("  %-40s %9.2f us"):format(labels[i], md))
  end
  print(("  %-40s %9.2f us (the rest of the wall time: the host's spawn and await)"):format(
    "first start to last end, sum of medians", total))
end

-- the round trip: wall time on the host beside the device run of its task
local ev2, wall2 = traced(function() prog.nop():await(60) end)
local dur = {}
for _, e in ipairs(ev2) do
  if e.name == "nop" then dur[#dur + 1] = e.dur end
end
print(("round trip on %s: wall p50 %.2f us, the task's run on the device p50 %.2f us (%d runs)")
  :format(rt.backend, median(wall2), median(dur), #dur))
t:close()
u:close()
m:close()
rt:close()
