-- fib.lua - recursive Fibonacci: every call is a device task that spawns and awaits its two
-- children on the device; the script spawns the root, awaits it and checks the closed form.
local mw = require "moonwarp"

local n = tonumber(arg and arg[1]) or 22
local rt = assert(mw.runtime())
local prog = assert(rt:compile [[
task long fib(int n) {
  local future a, b;          // frame locals: they live across the await
  if (n < 2) return n;
  a = spawn(fib, n - 1);
  b = spawn(fib, n - 2);
  await_all(a, b);
  return value(a) + value(b);
}
]])

local function closed_form(k)
  local phi = (1 + math.sqrt(5)) / 2
  return math.floor(phi ^ k / math.sqrt(5) + 0.5)
end

local start = mw.now()
local got = prog.fib(n):await()
local secs = mw.now() - start
local tasks = 0
do -- fib(n) spawns fib(n+1)*2 - 1 tasks
  local a, b = 0, 1
  for _ = 1, n + 1 do a, b = b, a + b end
  tasks = 2 * a - 1
end
local want = closed_form(n)
print(string.format("fib(%d) = %d on %s (closed form %d): %d tasks in %.3f s, %.2f M tasks/s",
  n, got, rt.backend, want, tasks, secs, tasks / secs / 1e6))
assert(got == want, "fib disagrees with the closed form")
rt:close()
