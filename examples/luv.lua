-- luv.lua - moonwarp inside a libuv event loop (luv): the loop sleeps until rt:fd() is readable,
-- then resumes the coroutines whose device futures completed, beside a timer of its own.
--   bash scripts/run.sh examples/luv.lua        (needs luv: apt-get install lua-luv)
local uv = require "luv"
local mw = require "moonwarp"

local rt = assert(mw.runtime())
local prog = assert(rt:compile [[
task long fib(int n) {
  local future a, b;
  if (n < 2) return n;
  a = spawn(fib, n - 1);
  b = spawn(fib, n - 2);
  await_all(a, b);
  return value(a) + value(b);
}
// returns ms after about ms milliseconds (the lanes agree on when it started)
task int snooze(int ms) {
  unsigned long long t0 = __shfl_sync(0xffffffffu, (unsigned long long)MW_GLOBALTIMER(), 0);
  while (MW_GLOBALTIMER() - t0 < (unsigned long long)ms * 1000000ull) __nanosleep(200000);
  return ms;
}
]])

local t0 = uv.hrtime()
local function ms() return (uv.hrtime() - t0) / 1e6 end

-- Each job is a coroutine: its awaits yield to the loop instead of blocking it.
for _, job in ipairs { 300, 100, 200 } do
  mw.async(function()
    local slept = prog.snooze(job):await()
    local v = prog.fib(10 + job / 100):await()
    print(("%6.1f ms  job %d: snoozed %d ms, then fib(%d) = %d"):format(ms(), job, slept,
      10 + job / 100, v))
  end)
end

local ticks = 0
local poll = uv.new_poll(rt:fd()) -- readable when completions are pending
local timer = uv.new_timer()

local function finish()
  poll:stop()
  timer:stop()
  poll:close()
  timer:close()
end

poll:start("r", function(err)
  assert(not err, err)
  -- mw.poll() drains the fd and resumes the coroutines whose futures completed
  if mw.poll() == 0 then finish() end
end)

-- The loop's own work goes on meanwhile. The timer polls too: the fd tells of completions, not of
-- an executor that broke, and a job may be done before the loop ever waits.
timer:start(50, 50, function()
  ticks = ticks + 1
  if mw.poll() == 0 then finish() end
end)

uv.run()
print(("done after %.0f ms; the timer ticked %d times meanwhile"):format(ms(), ticks))
rt:close()
