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

  it("a task's failure is raised in the coroutine and by its handle", function()
    local h = mw.async(function() return prog.boom(1):await() end)
    mw.run(30)
    assert.is_true(h:done())
    local err = support.error_of(h.await, h)
    assert.truthy(err and err:find("boom: async boom", 1, true), err)
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
