-- cancel_tail.lua - how long a cancelled fib(40) tree takes to stop: rounds of spawn, wait for
-- 1000 tasks, cancel the root, then the time until every spawned task has ended (the counters
-- balance), and what is still queued meanwhile. A round that takes seconds is the known bug
-- (a part of the tree does not see the cancellation and runs on; spec/cancel_spec.lua).
--   luajit bench/cancel_tail.lua [backend] [rounds] [workers]
local mw = require "moonwarp"
local FIB = require("spec.support").FIB

local backend, rounds, workers = arg[1] or "sim", tonumber(arg[2] or 20), tonumber(arg[3])
local rt = assert(mw.runtime { backend = backend, workers = workers })
local fib = assert(rt:compile(FIB, "fib.cu"))
local function unfinished(s) return s.spawned - s.completed - s.failed - s.cancelled end
local slow = 0
for round = 1, rounds do
  local before = rt:stats().spawned
  local f = fib.fib(40)
  while rt:stats().spawned - before < 1000 do mw.run(0.0005) end
  local t0 = mw.now()
  assert(f:cancel())
  pcall(f.await, f, 10)
  local s, worst = rt:stats(), 0
  while unfinished(s) > 0 or s.in_flight > 0 do
    worst = math.max(worst, s.queued_global)
    if mw.now() - t0 > 120 then break end
    mw.run(0.001)
    s = rt:stats()
  end
  local took = mw.now() - t0
  if took > 1 then slow = slow + 1 end
  print(("round %2d: stopped after %.2f s (%d tasks spawned in the round, at most %d queued)")
    :format(round, took, s.spawned - before, worst))
end
print(("%d of %d rounds took over a second to stop"):format(slow, rounds))
rt:close()
