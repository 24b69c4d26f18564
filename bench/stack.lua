-- stack.lua - how spawns that run in place (elided calls) use the executor's stack, on one worker
-- (so that none is idle and every spawn below the real levels is elided): the bytes a level of a
-- down-shaped body (one spawn, one await) and a fib-shaped one (two spawns, await_all), as the
-- stack bound measures them; how deep each nests before the bound refuses; and that a refusal
-- leaves the next run whole.
--   luajit bench/stack.lua [backend [stack_bytes]]
package.path = "./?.lua;" .. package.path
local mw = require "moonwarp"
local support = require "spec.support"

local backend, stack_bytes = arg[1] or "sim", tonumber(arg[2])
assert(arg[2] == nil or (stack_bytes and stack_bytes % 1 == 0), "usage: luajit bench/stack.lua [backend [stack_bytes]]")
local rt = assert(mw.runtime { backend = backend, workers = 1, stack_bytes = stack_bytes })
-- each task returns, at its deepest level, the stack the elided calls above it take
local p = assert(rt:compile([[
task long down_used(int n) {
  local future f;
  if (n == 0) return (long)mw_stack_used(_c);
  f = spawn(down_used, n - 1);
  await(f);
  return value(f);
}
task long fib_used(int n) {
  local future a, b;
  if (n < 2) return (long)mw_stack_used(_c);
  a = spawn(fib_used, n - 1);
  b = spawn(fib_used, n - 2);
  await_all(a, b);
  return value(a) > value(b) ? value(a) : value(b);
}
task long limit() { return (long)_c->stack_lim; }
]] .. support.DOWN, "stack.lua"))

local function try(f, ...)
  local args = { ... }
  return pcall(function() return f(unpack(args)):await(60) end)
end

-- the executor elides only once its periodic work (every 64 spawns) has seen no worker idle: a
-- run of some hundreds of spawns first
assert(try(p.down, 200), "down(200) failed before any measure")
print(("elided calls' stack on %s, one worker: a bound of %d bytes (stack_bytes %s)"):format(rt.backend,
  tonumber(p.limit():await(30)), tostring(stack_bytes or "default")))
for _, t in ipairs { { "down", p.down_used }, { "fib", p.fib_used } } do
  local name, task = t[1], t[2]
  local ok10, u10 = try(task, 10)
  local ok20, u20 = try(task, 20)
  if ok10 and ok20 then
    print(("%-5s used at depth 10: %d B, at 20: %d B, a level: %.0f B"):format(name, tonumber(u10), tonumber(u20),
      tonumber(u20 - u10) / 10))
  else
    print(("%-5s %s"):format(name, tostring(ok10 and u20 or u10)))
  end
end
-- the deepest down(n) that passes, by bisection between a depth that passes and one that fails
local lo, hi = 0, 1
while hi <= 2 ^ 20 and try(p.down, hi) do lo, hi = hi, hi * 2 end
while hi - lo > 1 do
  local mid = math.floor((lo + hi) / 2)
  if try(p.down, mid) then lo = mid else hi = mid end
end
local _, why = try(p.down, hi)
print(("down  nests %d deep; %d fails: %s"):format(lo, hi, tostring(why)))
local ok, v = try(p.down, 12)
print(("after the refusal, down(12): %s"):format(ok and tostring(v) or ("FAILED " .. tostring(v))))
rt:close()
