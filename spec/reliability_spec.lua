-- reliability_spec.lua - the host stays in control: capacity waits end in a clear error, a task
-- that never returns cannot hold close() past its deadline, the heartbeat shows the executor
-- alive. On both backends: on cuda a kernel that never returns cannot be preempted, so close
-- tears the device process down. On sim, an executor that cannot be launched again fails the
-- runtime instead of leaving its futures pending forever.
local mw = require "moonwarp"
local support = require "spec.support"

local SOURCE = support.HOLD .. [[
task int forever(int x) {
  if (lane == 0)
    while (1) __nanosleep(100000);
  __syncwarp();
  return x;
}
task int one(int x) { return x; }
]]

describe("reliability", function()
  support.each_backend(function(backend)
    it("a host spawn past capacity waits spawn_timeout, then returns nil, message, ECAPACITY", function()
      local rt = support.runtime(backend, { host_futures = 2, spawn_timeout = 0.2 })
      local p = support.compile(rt, SOURCE, "hang.cu")
      local a, b = p.forever(1), p.forever(2)
      local t0 = mw.now()
      local f, err, code = p.one(3)
      local waited = mw.now() - t0
      assert.is_nil(f)
      assert.equals("ECAPACITY", code)
      assert.truthy(err:find("host futures are in use", 1, true), err)
      assert.is_true(waited >= 0.19 and waited < 5, tostring(waited))
      assert.is_nil((a:await(0.05)))
      local _ = b
      local ok, cerr, ccode = rt:close { deadline = 0.3 }
      assert.is_nil(ok)
      assert.equals("ETIMEDOUT", ccode)
      assert.truthy(cerr:find("still running", 1, true), cerr)
    end)

    it("host futures freed by close or by the collector make room for new spawns", function()
      local rt = support.runtime(backend, { host_futures = 2, spawn_timeout = 0.1 })
      local p = support.compile(rt, SOURCE, "hang.cu")
      local flag = rt:buffer("int32", 1)
      flag:write { 0 }
      local a, b = p.hold(flag), p.hold(flag)
      local f, _, code = p.one(3)
      assert.is_nil(f)
      assert.equals("ECAPACITY", code)
      flag:write { 9 }
      assert.same({ 9, 9 }, { mw.join(a, b) })
      -- awaited futures keep their slot (a task may still be handed them) until let go
      assert.equals("ECAPACITY", select(3, p.one(3)))
      local s = rt:stats()
      assert.same({ 2, 2 }, { s.host_futures, s.host_futures_held })
      a:close()
      assert.equals(1, rt:stats().host_futures_held)
      assert.equals(3, p.one(3):await(30))
      b = nil -- the collector gives b's slot back when a spawn finds none free
      for i = 1, 10 do assert.equals(i, p.one(i):await(30)) end
      s = rt:stats()
      assert.equals(0, s.in_flight)
      rt:close()
    end)

    it("close{deadline} returns in time with a task that never returns; a new runtime works", function()
      local rt = support.runtime(backend)
      local p = support.compile(rt, SOURCE, "hang.cu")
      local f = p.forever(1)
      local t0 = mw.now()
      repeat until rt:stats().spawned >= 1 or mw.now() - t0 > 20 -- a worker took it
      assert.is_nil((f:await(0.1)))
      t0 = mw.now()
      local ok, _, code = rt:close { deadline = 0.5 }
      local took = mw.now() - t0
      assert.is_nil(ok)
      assert.equals("ETIMEDOUT", code)
      assert.is_true(took < 3, tostring(took))
      if backend == "sim" then
        -- the abandoned runtime's threads wait without spinning: its other warps at the stop
        -- barrier, the task in its naps (they took all the cores when the barrier yielded)
        local function cpu_s() -- this process's user + system time (Linux, 100 ticks a second)
          local f = {}
          for w in assert(io.open("/proc/self/stat")):read("*a"):match("%) (.*)"):gmatch("%S+") do f[#f + 1] = w end
          return (tonumber(f[12]) + tonumber(f[13])) / 100
        end
        local c0, w0 = cpu_s(), mw.now()
        while mw.now() - w0 < 1.5 do os.execute("sleep 0.25") end
        local used = cpu_s() - c0
        assert.is_true(used < 0.75, ("%.2f s of CPU in 1.5 s after the close"):format(used))
      end
      local rt2 = support.runtime(backend)
      local p2 = support.compile(rt2, SOURCE, "hang.cu")
      assert.equals(5, p2.one(5):await(30))
      rt2:close()
    end)

    it("the heartbeat moves while the executor runs", function()
      local rt = support.runtime(backend)
      support.compile(rt, SOURCE, "hang.cu")
      local first = rt:stats().heartbeat
      local t0 = mw.now()
      local moved = false
      repeat
        -- looked at every 50 ms: a loop of stats calls alone would take a core the executor's
        -- threads need (on sim, two cores under ASan, its idle pollers then hardly run)
        os.execute("sleep 0.05")
        local s = rt:stats()
        moved = s.heartbeat ~= first and s.heartbeat ~= 0
      until moved or mw.now() - t0 > 60
      assert.is_true(moved, ("the heartbeat stayed at %s for %.1f s"):format(tostring(first), mw.now() - t0))
      assert.is_true(rt:stats().heartbeat_age_s < 20)
      rt:close()
    end)

    it("rejects a bad spawn_timeout and a bad close deadline", function()
      assert.truthy(support.error_of(mw.runtime, { backend = backend, spawn_timeout = -1 })
        :find("spawn_timeout", 1, true))
      local rt = support.runtime(backend)
      assert.truthy(support.error_of(rt.close, rt, { deadline = "soon" }):find("deadline", 1, true))
      assert.truthy(support.error_of(rt.close, rt, { deadlne = 1 }):find("unknown option 'deadlne' (options: deadline)", 1, true))
      assert.is_true(rt:close())
    end)
  end)
end)

describe("an executor that cannot be relaunched #sim", function()
  local CHAIN = support.CHAIN -- chain(n): n spawn-and-await hops, still pending long after
  after_each(function()
    support.setenv("MOONWARP_SIM_REFUSE_LAUNCH", nil)
    support.setenv("MOONWARP_RELAUNCH_AFTER_ALLOC", nil)
  end)

  -- pending futures end with the reason, the runtime says it faulted, close returns and a new
  -- runtime works
  local function check_faulted(rt, pending)
    local err = support.error_of(pending.await, pending, 30)
    assert.truthy(err and err:find("the executor could not be relaunched", 1, true), err)
    assert.truthy(err:find("MOONWARP_SIM_REFUSE_LAUNCH", 1, true), err)
    assert.equals("ENODEV", rt.faulted)
    local _, serr = rt:compile("task int one(int x) { return 1; }", "one.cu")
    assert.truthy(serr and serr:find("faulted", 1, true), serr)
    assert.is_true(rt:close())
    support.setenv("MOONWARP_SIM_REFUSE_LAUNCH", nil)
    local rt2 = support.runtime("sim")
    assert.equals(4950, support.compile(rt2, CHAIN, "chain.cu").chain(100):await(30))
    rt2:close()
  end

  it("after a new program: the load fails with the reason and the runtime faults", function()
    local rt = support.runtime("sim", { workers = 2 })
    local p = support.compile(rt, CHAIN, "chain.cu")
    local pending = p.chain(100000000)
    support.setenv("MOONWARP_SIM_REFUSE_LAUNCH", "1")
    local more, err, code = rt:compile("task int triple(int x) { return 3 * x; }", "more.cu")
    assert.is_nil(more)
    assert.equals("ENODEV", code)
    assert.truthy(err:find("sim launch was refused", 1, true), err)
    check_faulted(rt, pending)
  end)

  it("after a new buffer (MOONWARP_RELAUNCH_AFTER_ALLOC=1): the runtime faults", function()
    local rt = support.runtime("sim", { workers = 2 })
    local p = support.compile(rt, CHAIN, "chain.cu")
    local pending = p.chain(100000000)
    support.setenv("MOONWARP_RELAUNCH_AFTER_ALLOC", "1")
    support.setenv("MOONWARP_SIM_REFUSE_LAUNCH", "1")
    rt:buffer("int32", 4)
    check_faulted(rt, pending)
  end)
end)
