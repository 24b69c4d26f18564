-- fan.lua backend stack_bytes: the suite's dynamic fan-out alone (route + expert), median of 50
package.path = "./?.lua;" .. package.path
local mw = require "moonwarp"
local src = assert(io.open("bench/tasks.lua")):read("*a")
local tasks = assert(loadstring(src))()
local rt = assert(mw.runtime { backend = arg[1] or "cuda", stack_bytes = tonumber(arg[2]), frame_bytes = 512 })
local prog = assert(rt:compile(tasks, "tasks.lua"))
math.randomseed(11)
local groups = 48
local counts, items, want = {}, {}, 0
for g = 1, groups do
  counts[g] = math.random(0, 2) == 0 and 0 or math.random(1, 512)
  for _ = 1, counts[g] do items[#items + 1] = math.random(-100, 100); want = want + items[#items] end
end
local cb, ib = rt:buffer("int32", groups), rt:buffer("int32", #items)
cb:write(counts); ib:write(items)
for _ = 1, 20 do assert(prog.route(cb, ib, groups):await() == want) end
for rep = 1, 3 do
  local t = {}
  for i = 1, 50 do local t0 = mw.now(); assert(prog.route(cb, ib, groups):await() == want); t[i] = (mw.now() - t0) * 1e6 end
  table.sort(t)
  io.write(("%s stack %s: fan-out p50 %.1f us  p10 %.1f  p90 %.1f\n"):format(os.getenv("MOONWARP_DEVICE_DEFINE") or "default", arg[2] or "dflt", t[25], t[5], t[45]))
end
rt:close()
