-- async_spec.lua - device futures awaited from Lua coroutines: mw.async, mw.run, mw.poll.
local mw = require "moonwarp"
local support = require "spec.support"

local SOURCE = support.FIB .. [[
// waits for *flag (lane 0 watches, the warp takes its answer), at most about a minute
task int hold(int *flag) {
  int v = 0;
  if (lane == 0) {
    long long t0 = clock64();
    while ((v = *(volatile int *)flag) == 0 && clock64() - t0 < 120000000000LL)
      __nanosleep(100000); // sleeping, not spinning: on sim the other workers need the CPU
  }
  return __shfl_sync(0xffffffffu, v, 0);
}
task int boom(int x) { fail(3, "async boom"); }
]]

local function fibn(k) local a, b = 0, 1 for _ = 1, k do a, b = b, a + b end return a end

support.each_backend(function(backend)
  local rt, prog
  setup(function()
    rt = support.runtime(backend)
    prog = support.compile(rt, SOURCE, "async_tasks.cu")
  end)
  teardown(function() rt:close() end)

  it("runs hundreds of coroutines each awaiting its own future; a slow one holds none back", function()
    local flag = rt:buffer("int32", 1)
    flag:write { 0 }
    local finished = {}
    local slow = mw.async(function()
      local v = prog.hold(flag):await()
      finished[#finished + 1] = "slow"
      return v
    end)
    local tasks = {}
    for i = 1, 200 do
      tasks[i] = mw.async(function(k)
        local v = prog.fib(k):await()
        finished[#finished + 1] = k
        return v
      end, i % 16)
    end
    local t0 = mw.now()
    while #finished < 200 and mw.now() - t0 < 60 do mw.run(0.01) end
    assert.equals(200, #finished) -- all but the slow one
    assert.equals(1, mw.poll())
    assert.is_false(slow:done())
    flag:write { 1 }
    assert.equals(0, mw.run(60))
    assert.equals(1, slow:await())
    for i = 1, 200 do assert.equals(fibn(i % 16), tasks[i]:await()) end
    flag:close()
  end)

  it("mw.poll returns at once with the number still waiting", function()
    local flag = rt:buffer("int32", 1)
    flag:write { 0 }
    local h = mw.async(function() return prog.hold(flag):await() end)
    local t0 = mw.now()
    assert.equals(1, mw.poll())
    assert.is_true(mw.now() - t0 < 0.5)
    flag:write { 1 }
    assert.equals(1, h:await(60))
    flag:close()
  end)

  it("a timeout inside a coroutine returns nil, 'timed out', 'ETIMEDOUT'", function()
    local flag = rt:buffer("int32", 1)
    flag:write { 0 }
    local f = prog.hold(flag)
    local h = mw.async(function() return f:await(0.05) end)
    mw.run(30)
    local v, err, code = h:await()
    assert.is_nil(v)
    assert.equals("timed out", err)
    assert.equals("ETIMEDOUT", code)
    flag:write { 1 }
    assert.equals(1, f:await(60))
    flag:close()
  end)

  it("a task's failure is raised in the coroutine, by mw.run when nothing awaits it, and by its handle", function()
    local h = mw.async(function() return prog.boom(1):await() end)
    local err = support.error_of(mw.run, 30)
    assert.truthy(err and err:find("boom: async boom", 1, true), err)
    assert.truthy(err:find("nothing awaited", 1, true), err)
    assert.is_true(h:done())
    err = support.error_of(h.await, h)
    assert.truthy(err and err:find("boom: async boom", 1, true), err)
    assert.equals(0, mw.run(1)) -- reported once
  end)

  it("leaves the error of a coroutine to whoever awaits its handle", function()
    local flag = rt:buffer("int32", 1)
    flag:write { 0 }
    local h = mw.async(function()
      prog.hold(flag):await()
      error("after the hold")
    end)
    local outer = mw.async(function() return pcall(h.await, h) end)
    flag:write { 1 }
    assert.equals(0, mw.run(30)) -- not raised here: outer awaited h
    local ok, err = outer:await()
    assert.is_false(ok)
    assert.truthy(tostring(err):find("after the hold", 1, true), tostring(err))
    flag:close()
  end)

  it("takes and checks await's arguments inside a coroutine as outside", function()
    local flag = rt:buffer("int32", 1)
    flag:write { 0 }
    local f = prog.hold(flag)
    local outside = { support.error_of(f.await, f, "x"), support.error_of(f.await, f, 0 / 0),
      support.error_of(f.await, "notafuture") }
    local inside
    local h = mw.async(function()
      inside = { support.error_of(f.await, f, "x"), support.error_of(f.await, f, 0 / 0),
        support.error_of(f.await, "notafuture") }
      return f:await(-1) -- a negative timeout waits, as outside
    end)
    assert.equals("bad argument #2 to 'await' (number expected, got string)", outside[1])
    assert.equals("bad argument #2 to 'await' (timeout is NaN)", outside[2])
    assert.equals("bad argument #1 to 'await' (moonwarp.future expected, got string)", outside[3])
    assert.same(outside, inside)
    assert.equals(1, mw.run(0.2))
    assert.is_false(h:done())
    flag:write { 5 }
    assert.equals(5, h:await(30))
    flag:close()
  end)

  it("a handle awaited outside any coroutine drives the scheduler itself", function()
    local h = mw.async(function() return prog.fib(12):await() + 1 end)
    assert.equals(145, h:await(60))
  end)
end)

describe("join and any with a timeout #sim", function()
  local rt, prog
  setup(function()
    rt = support.runtime("sim")
    prog = support.compile(rt, SOURCE, "async_tasks.cu")
  end)
  teardown(function() rt:close() end)

  local function held()
    local flag = rt:buffer("int32", 1)
    flag:write { 0 }
    return flag, prog.hold(flag)
  end

  it("mw.join returns nil, 'timed out', 'ETIMEDOUT' and the futures stay usable", function()
    local flag, slow = held()
    local quick = prog.fib(10)
    local v, err, code = mw.join(quick, slow, 0.05)
    assert.is_nil(v)
    assert.equals("timed out", err)
    assert.equals("ETIMEDOUT", code)
    flag:write { 1 }
    local a, b = mw.join(quick, slow, 60)
    assert.equals(55, a)
    assert.equals(1, b)
    flag:close()
  end)

  it("mw.any times out when none completes, and answers once one does", function()
    local flag, slow = held()
    local i, err, code = mw.any(slow, 0.05)
    assert.is_nil(i)
    assert.equals("ETIMEDOUT", code)
    assert.equals("timed out", err)
    flag:write { 1 }
    assert.same({ 1, 1 }, { mw.any(slow, 60) })
    flag:close()
  end)

  it("rejects a negative timeout", function()
    assert.truthy(support.error_of(mw.join, prog.fib(3), -1):find("bad timeout", 1, true))
  end)
end)

describe("mw.async and a runtime that closes #sim", function()
  it("fails only the coroutines that wait on it, at their awaits; the others go on", function()
    local rt1, rt2 = support.runtime("sim"), support.runtime("sim")
    local p1, p2 = support.compile(rt1, SOURCE, "async_tasks.cu"), support.compile(rt2, SOURCE, "async_tasks.cu")
    local f1, f2 = rt1:buffer("int32", 1), rt2:buffer("int32", 1)
    f1:write { 0 }
    f2:write { 0 }
    local doomed, healthy = {}, {}
    for i = 1, 3 do
      doomed[i] = mw.async(function() return p1.hold(f1):await() end)
      healthy[i] = mw.async(function() return p2.hold(f2):await() + i end)
    end
    assert.equals(6, mw.poll())
    rt1:close()
    -- each doomed coroutine's error is raised, one per pass, and none of the others is lost
    for _ = 1, 3 do
      local err = support.error_of(mw.run, 5)
      assert.truthy(err and err:find("runtime is closed", 1, true), err)
    end
    assert.equals(3, mw.poll())
    for i = 1, 3 do
      assert.is_true(doomed[i]:done())
      assert.truthy(support.error_of(doomed[i].await, doomed[i]):find("runtime is closed", 1, true))
    end
    f2:write { 10 }
    assert.equals(0, mw.run(30))
    for i = 1, 3 do assert.equals(10 + i, healthy[i]:await()) end
    rt2:close()
  end)

  it("raises at the caller's line when a coroutine awaits a future of a closed runtime", function()
    local rt = support.runtime("sim")
    local p = support.compile(rt, SOURCE, "async_tasks.cu")
    local f = p.fib(5)
    assert.equals(5, f:await(30))
    local g = p.fib(6)
    rt:close()
    local err
    local h = mw.async(function()
      local ok, e = pcall(function()
        local v = g:await() -- the line the error names
        return v
      end)
      err = e
      return ok
    end)
    assert.is_false(h:await())
    assert.truthy(err:find("async_spec.lua:%d+: runtime is closed"), err)
  end)
end)

describe("mw.async misuse #sim", function()
  it("raises naming the argument", function()
    assert.truthy(support.error_of(mw.async, 42):find("bad argument #1 to 'async'", 1, true))
    assert.truthy(support.error_of(mw.run, "soon"):find("bad argument #1 to 'run'", 1, true))
    assert.truthy(support.error_of(mw.run, -1):find("bad argument #1 to 'run'", 1, true))
    local h = mw.async(function() return 1 end)
    assert.truthy(support.error_of(h.await, h, "x"):find("bad argument #1 to 'await'", 1, true))
    assert.equals(1, h:await())
  end)
end)
