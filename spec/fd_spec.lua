-- fd_spec.lua - rt:fd(): a file descriptor that an event loop waits on, readable when completions
-- are pending and drained by mw.poll() / rt:poll(); and examples/luv.lua, which uses it.
local mw = require "moonwarp"
local support = require "spec.support"
local ffi = require "ffi"

pcall(ffi.cdef, [[
struct mwfd_pollfd { int fd; short events, revents; };
int mwfd_poll(struct mwfd_pollfd *fds, unsigned long n, int timeout_ms) __asm__("poll");
]])

local SOURCE = support.HOLD_LONG .. [[
task int twice(int x) { return 2 * x; }
]]

--- poll(2) on fd for readability: 1 when readable within timeout_ms, else 0.
local function readable(fd, timeout_ms)
  local p = ffi.new("struct mwfd_pollfd[1]")
  p[0].fd, p[0].events = fd, 1 -- POLLIN
  local r = ffi.C.mwfd_poll(p, 1, timeout_ms)
  assert(r >= 0, "poll failed")
  return r
end

support.each_backend(function(backend)
  local rt, prog
  setup(function()
    rt = support.runtime(backend)
    prog = support.compile(rt, SOURCE, "fd_tasks.cu")
  end)
  teardown(function() rt:close() end)

  it("is readable once a task completes, and mw.poll() drains it", function()
    local fd = rt:fd()
    assert.is_number(fd)
    assert.equals(fd, rt:fd()) -- one per runtime
    local flag = rt:buffer("int32", 1)
    flag:write { 0 }
    local f = prog.hold(flag)
    assert.equals(0, readable(fd, 100)) -- nothing has completed: poll(2) sleeps its timeout
    flag:write { 5 }
    assert.equals(1, readable(fd, 30000)) -- woken by the completion
    assert.equals(0, mw.poll()) -- no coroutine waits; it drains the fd all the same
    assert.equals(0, readable(fd, 0))
    assert.equals("ready", f:state())
    assert.equals(5, f:await())
  end)

  it("wakes an event loop once per batch; coroutines resume as their futures complete", function()
    local fd = rt:fd()
    local results, rounds = {}, 0
    for i = 1, 50 do
      mw.async(function() results[i] = prog.twice(i):await() end)
    end
    local t0 = mw.now()
    while mw.poll() > 0 do
      assert.is_true(mw.now() - t0 < 60, "the tasks did not complete")
      rounds = rounds + 1
      readable(fd, 1000)
    end
    for i = 1, 50 do assert.equals(2 * i, results[i]) end
    -- the fd is drained at each poll: the loop sleeps between batches instead of spinning
    assert.is_true(rounds <= 200, rounds .. " rounds")
  end)

  it("rt:poll() processes completions and drains the fd too", function()
    local fd = rt:fd()
    local f = prog.twice(21)
    assert.equals(1, readable(fd, 30000))
    assert.equals(1, rt:poll())
    assert.equals(0, readable(fd, 0))
    assert.equals(0, rt:poll())
    assert.equals(42, f:await())
  end)
end)

describe("rt:fd() #sim", function()
  it("closing the runtime with its watcher running is quick, and the fd goes with it", function()
    local rt = support.runtime("sim")
    local prog = support.compile(rt, SOURCE, "fd_close.cu")
    local fd = rt:fd()
    assert.equals(2, prog.twice(1):await())
    local flag = rt:buffer("int32", 1)
    flag:write { 0 }
    local f = prog.hold(flag) -- in flight: the watcher naps short
    flag:write { 1 }
    f:await()
    local t0 = mw.now()
    assert.is_true(rt:close())
    local took = mw.now() - t0
    print(("  close with a watcher running: %.4f s"):format(took))
    assert.is_true(took < 5, "close took " .. took .. " s") -- the watcher's nap is 1 ms at most
    -- the eventfd is closed: poll(2) says so (POLLNVAL) instead of blocking
    local p = ffi.new("struct mwfd_pollfd[1]")
    p[0].fd, p[0].events = fd, 1
    assert.equals(1, ffi.C.mwfd_poll(p, 1, 0))
    assert.equals(32, p[0].revents) -- POLLNVAL
  end)

  it("raises once the runtime is closed", function()
    local rt = support.runtime("sim")
    rt:fd()
    rt:close()
    assert.truthy(support.error_of(rt.fd, rt):find("runtime is closed", 1, true))
    assert.truthy(support.error_of(rt.poll, rt):find("runtime is closed", 1, true))
    assert.equals(0, mw.poll()) -- a closed runtime among those with an fd is skipped
  end)

  it("is readable when the runtime faults, so that a loop waiting on it learns", function()
    local rt = support.runtime("sim")
    local prog = support.compile(rt, [[
      task int crash(int *p) { if (lane == 0) __trap(); return 0; }
      task int hold(int *flag) {
        int v = 0;
        if (lane == 0) { long long t0 = clock64();
          while ((v = *(volatile int *)flag) == 0 && clock64() - t0 < 120000000000LL) __nanosleep(100000); }
        return __shfl_sync(0xffffffffu, v, 0);
      }
    ]], "fd_fault.cu")
    local fd = rt:fd()
    local flag = rt:buffer("int32", 1)
    flag:write { 0 }
    local waiting = prog.hold(flag)
    local buf = rt:buffer("int32", 1)
    prog.crash(buf)
    local t0 = mw.now()
    while rt.faulted == false do -- the fault is noticed by this thread's calls (the timer's poll)
      assert.is_true(mw.now() - t0 < 60, "no fault")
      rt:poll()
      readable(fd, 10)
    end
    assert.equals(1, readable(fd, 0))
    assert.truthy(support.error_of(waiting.await, waiting))
    rt:close()
  end)
end)

describe("examples/luv.lua #sim", function()
  local have_luv, why = pcall(require, "luv")
  if not have_luv then
    pending("skipped: luv (Debian's lua-luv) is not installed: " .. tostring(why):match("^[^\n]*"))
    return
  end
  it("waits in a libuv loop on rt:fd() beside a timer, and resumes each job as it completes", function()
    local env = "MOONWARP_BACKEND=sim " .. support.lua_paths()
    local status, out = support.run(env .. "luajit examples/luv.lua")
    assert.equals(0, status, out)
    for _, want in ipairs {
      "job 100: snoozed 100 ms, then fib(11) = 89",
      "job 200: snoozed 200 ms, then fib(12) = 144",
      "job 300: snoozed 300 ms, then fib(13) = 233",
    } do
      assert.truthy(out:find(want, 1, true), out)
    end
    -- the loop went on with its timer while the jobs ran (they take 300 ms at least)
    local ticks = tonumber(out:match("the timer ticked (%d+) times"))
    assert.is_true(ticks ~= nil and ticks >= 1, out)
  end)
end)
