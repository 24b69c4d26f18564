-- kinds_spec.lua - a runtime with thousands of task kinds: values, and counters that stay exact
-- when the kinds' counter entries collide (protocol.h, per-worker rows).
local support = require "spec.support"

local NKINDS = 2100 -- tiny tasks k0 .. k2099, kinds 0 .. 2099 in a fresh runtime

-- kinds that share an entry of a warp's counter cache (32 entries) and of a worker's device
-- entries (64): 5 + 32 j and 5 + 64 j up to the last kind; sweep spawns and awaits every one in
-- turn, reps times: each spawn and completion it counts misses the warp's cache
local SOURCE, COLLIDING = support.kinds_program(NKINDS)

-- what the host spawns: both ends, either side of the old limit of 64, and the colliding ones
local HOST = { 0, 1, 31, 32, 63, 64, 65, 96, 127, 128, 1000, 1024, 2047, 2048, NKINDS - 1 }
for _, k in ipairs(COLLIDING) do HOST[#HOST + 1] = k end

support.each_backend(function(backend)
  describe("a runtime of " .. NKINDS .. " task kinds", function()
    local rt, prog
    setup(function()
      -- compiled on its own: in one unit NVRTC takes minutes over 2100 bodies (README, compiles)
      rt = support.runtime(backend, { build = "parts" })
      prog = support.compile(rt, SOURCE, "kinds.cu")
    end)
    teardown(function() if rt then rt:close() end end)

    it("numbers the kinds as they load", function()
      assert.equals(NKINDS + 1, rt:stats().kinds)
      for _, k in ipairs(HOST) do assert.equals(k, prog["k" .. k].kind) end
      assert.equals(NKINDS, prog.sweep.kind)
    end)

    it("runs tasks of any kind and counts each kind exactly", function()
      local want = {} -- kind -> tasks spawned
      local futs = {}
      for round = 1, 3 do
        for _, k in ipairs(HOST) do
          futs[#futs + 1] = { k, round, prog["k" .. k](round) }
          want[k] = (want[k] or 0) + 1
        end
      end
      local reps, x = 7, 1000
      local sweeps = {}
      for i = 1, 4 do sweeps[i] = prog.sweep(x + i, reps) end
      for _, f in ipairs(futs) do assert.equals(f[1] + f[2], f[3]:await(60)) end
      local sum = 0
      for _, k in ipairs(COLLIDING) do sum = sum + k end
      for i = 1, 4 do
        assert.equals(reps * (#COLLIDING * (x + i) + sum), sweeps[i]:await(60))
      end
      for _, k in ipairs(COLLIDING) do want[k] = want[k] + 4 * reps end

      local st = rt:stats()
      local total = 0
      for k = 0, NKINDS - 1 do
        local t = st.tasks["k" .. k]
        local n = want[k] or 0
        assert.same({ spawned = n, completed = n, failed = 0, cancelled = 0 }, t, "k" .. k)
        total = total + n
      end
      assert.same({ spawned = 4, completed = 4, failed = 0, cancelled = 0 }, st.tasks.sweep)
      total = total + 4
      assert.equals(total, st.spawned)
      assert.equals(total, st.completed)
      assert.equals(0, st.failed)
      assert.equals(0, st.cancelled)
      assert.equals(0, st.in_flight)
    end)
  end)

  describe("programs let go of", function()
    -- a runtime per test, one at a time: cuda runs one executor per device in a process; each
    -- program compiled on its own (the kinds are given back in either build)
    local rt
    before_each(function() rt = support.runtime(backend, { build = "parts" }) end)
    after_each(function() rt:close() end)

    local function many(n, salt)
      local parts = {}
      for k = 0, n - 1 do
        parts[#parts + 1] = ("task int %s%d(int x) { return x + %d; }"):format(salt, k, k)
      end
      return table.concat(parts, "\n")
    end

    it("give their kinds to the programs loaded after them", function()
      -- a program let go of stays until the next load (it may still have work); that load
      -- drops it, and the one after takes its kinds: two programs' worth of kinds serve any
      -- number of loads (a runtime holds 4096)
      local n, loads, first = 50, 6, nil
      for i = 1, loads do
        local prog = support.compile(rt, many(n, "r"), "redefined.cu")
        assert.equals(7 + i, prog.r7(i):await(60))
        assert.equals(n - 1 + i, prog["r" .. (n - 1)](i):await(60))
        if i == 1 then first = prog.r0.kind end
        if i % 2 == 1 then assert.equals(first, prog.r0.kind, "load " .. i) end
        local st = rt:stats()
        -- each program's figures count its own tasks only, on kinds used before too
        assert.same({ spawned = 1, completed = 1, failed = 0, cancelled = 0 }, st.tasks.r7)
        assert.is_true(st.kinds <= 2 * n, "kinds " .. st.kinds)
        prog = nil -- luacheck: ignore
        collectgarbage()
        collectgarbage()
      end
    end)

    it("keep running their tasks, and go once those have ended", function()
      local a = support.compile(rt, [[
task int slow(int ms) {
  unsigned long long t0 = __shfl_sync(0xffffffffu, (unsigned long long)MW_GLOBALTIMER(), 0);
  while (MW_GLOBALTIMER() - t0 < (unsigned long long)ms * 1000000ull) __nanosleep(100000);
  return ms;
}
]], "slow.cu")
      local kind = a.slow.kind
      local f = a.slow(300)
      a = nil -- luacheck: ignore
      collectgarbage()
      collectgarbage()
      -- the load while slow runs keeps it: it ends with its value
      local b = support.compile(rt, "task int b() { return 2; }\n", "b.cu")
      assert.equals(300, f:await(30))
      assert.equals(2, b.b():await(30))
      -- a load after it ended drops it; the one after that takes its kind
      support.compile(rt, "task int c() { return 3; }\n", "c.cu")
      local d = support.compile(rt, "task int d() { return 4; }\n", "d.cu")
      assert.equals(kind, d.d.kind)
      assert.equals(4, d.d():await(30))
      assert.is_nil(rt:stats().tasks.slow)
    end)
  end)
end)
