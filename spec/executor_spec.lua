-- executor_spec.lua - the executor under load and under failure, on every backend: bulk tasks,
-- device-side capacity exhaustion, device faults, loading programs while tasks are in flight,
-- statistics; and what only the sim backend can check (lanes that diverge).
local mw = require "moonwarp"
local support = require "spec.support"

-- leaf and chain come from support.CHAIN, hold from support.HOLD
local SOURCE = support.CHAIN .. support.HOLD .. [[
task int overspawn(int *flag, int n) {
  local future f;
  local int i, failures;
  failures = 0;
  for (i = 0; i < n; ++i) {
    f = spawn(hold, flag);
    if (failed(f)) failures++;
  }
  return failures;
}
task void fill(int *x, int n) {
  for (int i = index * 64 + lane; i < n && i < (int)(index + 1) * 64; i += 32) x[i] = i + 1;
}
task long fill_and_sum(int *x, int n) {
  local future f;
  local long s;
  local int i;
  f = spawn_bulk(fill, (n + 63) / 64, x, n);
  await(f);
  s = 0;
  for (i = 0; i < n; ++i) s += x[i];
  return s;
}
task void fill_or_fail(int *x, int n, int bad, int add) {
  for (int i = index * 64 + lane; i < n && i < (int)(index + 1) * 64; i += 32) x[i] = i + 1 + add;
  if ((int)index == bad) fail(7, "instance failed on purpose");
}
task long two_bulks(int *x, int *y, int n) {
  local future a, b;
  local long s;
  local int i;
  a = spawn_bulk(fill_or_fail, (n + 63) / 64, x, n, -1, 0);
  b = spawn_bulk(fill_or_fail, (n + 63) / 64, y, n, -1, 0);
  await(b);
  await(a);
  s = 0;
  for (i = 0; i < n; ++i) s += x[i] + y[i];
  return s;
}
task int bulk_unawaited(int *x, int n) {
  local future a;
  a = spawn_bulk(fill_or_fail, (n + 63) / 64, x, n, -1, 0);
  return 1;
}
task int bulk_fails(int *x, int n, int bad) {
  local future a;
  a = spawn_bulk(fill_or_fail, (n + 63) / 64, x, n, bad, 0);
  await(a);
  return 0;
}
task int bulk_rounds(int *x, int n, int rounds) {
  local future a;
  local int r;
  for (r = 0; r < rounds; ++r) {
    a = spawn_bulk(fill_or_fail, (n + 63) / 64, x, n, -1, r);
    await(a);
    if (x[0] != 1 + r || x[n - 1] != n + r) return -1 - r;
  }
  return rounds;
}
// a leaf that calls nothing of the task API but fail: the await that claims it calls it with
// no level of its own (device_api.cuh, mw_run_pure); its locals are each lane's own
task int square(int x) {
  int y = x * x + (int)(lane & 0u);
  if (x < 0) fail(3, "a negative square on purpose");
  return y;
}
// spawns square(i) for i < n, with -1 in place of i at each multiple of bad: the sum of the
// squares that succeed plus 1000000 for each failure seen with its code
task long squares(int n, int bad) {
  local future f;
  local int i;
  local long s;
  s = 0;
  for (i = 0; i < n; ++i) {
    f = spawn(square, bad > 0 && i % bad == 0 ? -1 : i);
    try_await(f);
    if (failed(f)) s += fail_code(f) == 3 ? 1000000 : -1000000000L;
    else s += value(f);
    release(f);
  }
  return s;
}
task long square_awaited(int x) {
  local future f;
  f = spawn(square, x);
  await(f);
  return value(f) + 1;
}
task void oob(int *p) { p[1L << 40] = 1; }
task void trap(int x) { if (x) __trap(); }
task void bad_assert(int x) { assert(x == 0); }
]]

support.each_backend(function(backend)
  describe("runs", function()
    local rt, prog
    setup(function()
      rt = support.runtime(backend)
      prog = support.compile(rt, SOURCE, "executor_tasks.cu")
    end)
    teardown(function() rt:close() end)

    it("a bulk task from the host runs every instance once", function()
      local n = 1000
      local x = rt:buffer("int32", n)
      x:write((function() local t = {} for i = 1, n do t[i] = -1 end return t end)())
      assert.is_nil(prog.fill:bulk(math.ceil(n / 64), x, n):await())
      local got = x:read()
      for i = 1, n do assert.equals(i, got[i]) end
      x:close()
    end)

    it("a task spawns a bulk task, awaits it and reads what it wrote", function()
      local n = 777
      local x = rt:buffer("int32", n)
      assert.equals(n * (n + 1) / 2, prog.fill_and_sum(x, n):await())
      x:close()
    end)

    it("a chain of dependent device spawns and awaits", function()
      assert.equals(499500, prog.chain(1000):await())
    end)

    it("a leaf that calls no task API, awaited at once: values, failures and counts", function()
      local before = rt:stats()
      local want = 0
      for i = 0, 299 do want = want + (i % 7 == 0 and 1000000 or i * i) end
      assert.equals(want, prog.squares(300, 7):await(30))
      assert.equals(37, prog.square_awaited(6):await(30))
      local ok, err = pcall(function() return prog.square_awaited(-2):await(30) end)
      assert.is_false(ok)
      assert.matches("square: a negative square on purpose", tostring(err), 1, true)
      local after = rt:stats()
      -- 43 squares of -1 in the loop; square(-2) and square_awaited(-2) once each
      assert.equals(43 + 2, after.failed - before.failed)
      assert.equals(0, after.in_flight)
    end)

    it("counts tasks in rt:stats()", function()
      local before = rt:stats()
      prog.chain(100):await()
      local after = rt:stats()
      assert.is_true(after.completed - before.completed >= 101)
      assert.is_true(after.spawned - before.spawned >= 101)
      assert.equals(0, after.failed - before.failed)
      assert.equals(0, after.in_flight)
      for _, k in ipairs { "queued_inbox", "queued_global", "queued_local", "steals", "launches" } do
        assert.is_number(after[k], k)
      end
      assert.equals(0, after.queued_inbox)
      assert.is_true(after.launches >= 1)
    end)

    it("loads another program while tasks are in flight, losing nothing", function()
      local pending = {}
      for i = 1, 8 do pending[i] = prog.chain(200 + i) end
      local more = support.compile(rt, "task int triple(int x) { return 3 * x; }", "more.cu")
      assert.equals(21, more.triple(7):await())
      for i = 1, 8 do
        local n = 200 + i
        assert.equals(n * (n - 1) / 2, pending[i]:await(30))
      end
      assert.equals(42, prog.leaf(42):await())
    end)
  end)

  -- bulk tasks from the host are posted on the board that idle workers read (protocol.h, The bulk
  -- board); with more of them at once than it has cells, the rest are shared through the queue
  it("runs more bulk tasks at once than the board has cells, each instance once, and frees them", function()
    local rt = support.runtime(backend)
    local prog = support.compile(rt, SOURCE, "executor_tasks.cu")
    local n, tasks, bufs, futs = 4000, 12, {}, {}
    local before = rt:stats().frames_in_use
    for round = 1, 3 do
      for k = 1, tasks do
        bufs[k] = bufs[k] or rt:buffer("int32", n)
        futs[k] = prog.fill_or_fail:bulk(math.ceil(n / 64), bufs[k], n, -1, k + round)
      end
      for k = 1, tasks do
        assert.is_nil(futs[k]:await(60))
        local got = bufs[k]:read()
        for i = 1, n, 97 do assert.equals(i + k + round, got[i]) end
        assert.equals(n + k + round, got[n])
      end
    end
    local deadline = mw.now() + 10
    while rt:stats().frames_in_use ~= before and mw.now() < deadline do end
    assert.equals(before, rt:stats().frames_in_use)
    rt:close()
  end)

  -- a task that awaits the bulk task it spawned runs its instances itself (protocol.h, Joining
  -- a bulk task): alone when they are few (200 items: 4 instances), with the workers it invites
  -- when they are more (1000 items: 16); the frame's reference is given back on every path
  for _, n in ipairs { 200, 1000 } do
    describe(("a task awaiting its bulk task of %d instances"):format(math.floor((n + 63) / 64)), function()
      local rt, prog, x, y
      setup(function()
        rt = support.runtime(backend)
        prog = support.compile(rt, SOURCE, "executor_tasks.cu")
        x, y = rt:buffer("int32", n), rt:buffer("int32", n)
      end)
      teardown(function() rt:close() end)
      -- frames in use go back to what they were (they are counted when a warp flushes its counters)
      local function settles(before)
        local deadline = mw.now() + 10
        while rt:stats().frames_in_use ~= before and mw.now() < deadline do end
        assert.equals(before, rt:stats().frames_in_use)
      end
      local function clear(b)
        local t = {}
        for i = 1, n do t[i] = 0 end
        b:write(t)
      end

      it("runs many in a row, each complete when the await returns", function()
        clear(x)
        local before = rt:stats().frames_in_use
        assert.equals(200, prog.bulk_rounds(x, n, 200):await(60))
        settles(before)
      end)

      it("awaits the first of two after the second replaced it as the one to join", function()
        clear(x)
        clear(y)
        local before = rt:stats().frames_in_use
        assert.equals(n * (n + 1), prog.two_bulks(x, y, n):await(60))
        settles(before)
      end)

      it("gives the frame back when the task ends without awaiting it", function()
        clear(x)
        local before = rt:stats().frames_in_use
        for _ = 1, 20 do assert.equals(1, prog.bulk_unawaited(x, n):await(60)) end
        settles(before)
      end)

      it("fails with the failed instance's message", function()
        local before = rt:stats().frames_in_use
        for bad = 0, math.floor((n + 63) / 64) - 1 do
          local ok, err = pcall(function() return prog.bulk_fails(x, n, bad):await(60) end)
          assert.is_false(ok)
          assert.matches("instance failed on purpose", tostring(err))
        end
        settles(before)
      end)
    end)
  end

  describe("a refused relaunch", function()
    it("leaves every worker at work; a later load succeeds", function()
      local rt = support.runtime(backend, { workers = 4, relaunch_timeout = 0.3 })
      local prog = support.compile(rt, SOURCE .. [[
// arrives at *count, then waits (about a second at most) until n tasks arrived: n of them
// complete only if n workers run them at once
// waits for *flag with no time limit, lane 0 polling
task int wait_flag(int *flag) {
  int v = 0;
  if (lane == 0)
    while ((v = *(volatile int *)flag) == 0) __nanosleep(1000);
  return __shfl_sync(0xffffffffu, v, 0);
}
task int meet(int *count, int n) {
  if (lane == 0) {
    atomicAdd(count, 1);
    long long t0 = clock64();
    while (*(volatile int *)count < n && clock64() - t0 < 2000000000LL) __nanosleep(1000);
  }
  __syncwarp();
  return *(volatile int *)count >= n;
}
]], "executor_tasks.cu")
      local flag, count = rt:buffer("int32", 1), rt:buffer("int32", 1)
      flag:write { 0 }
      count:write { 0 }
      local held = prog.wait_flag(flag)
      local t0 = mw.now()
      repeat until rt:stats().spawned >= 1 or mw.now() - t0 > 20 -- a worker runs it
      local more, err, code = rt:compile("task int triple(int x) { return 3 * x; }", "more.cu")
      assert.is_nil(more)
      assert.equals("ETIMEDOUT", code)
      assert.truthy(err:find("did not stop within 0.3 s", 1, true), err)
      -- the three other workers are still there: three tasks that need each other complete
      local meets = {}
      for i = 1, 3 do meets[i] = prog.meet(count, 3) end
      for i = 1, 3 do assert.equals(1, meets[i]:await(30)) end
      flag:write { 7 }
      assert.equals(7, held:await(30))
      more = support.compile(rt, "task int triple(int x) { return 3 * x; }", "more.cu")
      assert.equals(21, more.triple(7):await(30))
      assert.equals(4950, prog.chain(100):await(30))
      rt:close()
    end)
  end)

  if backend == "cuda" then
    it("refuses a second open runtime on the same device, with the reason", function()
      local rt = support.runtime(backend)
      local rt2, err, code = mw.runtime { backend = "cuda" }
      assert.is_nil(rt2)
      assert.equals("ECAPACITY", code)
      assert.truthy(err:find("one executor per device", 1, true), err)
      rt:close()
      rt2 = support.runtime(backend)
      rt2:close()
    end)
  end

  describe("capacity", function()
    it("a device spawn past capacity yields a failed future; the runtime keeps working", function()
      local rt = support.runtime(backend, { capacity = 64 })
      local prog = support.compile(rt, SOURCE, "executor_tasks.cu")
      local flag = rt:buffer("int32", 1)
      flag:write { 0 }
      local f = prog.overspawn(flag, 200)
      local failures = f:await(30)
      assert.is_true(failures >= 200 - 64 and failures < 200, tostring(failures))
      flag:write { 1 }
      -- the held children finish; then every frame is free again
      local t0 = mw.now()
      repeat
        local s = rt:stats()
      until s.spawned == s.completed + s.failed or mw.now() - t0 > 30
      assert.equals(499500, prog.chain(1000):await(30))
      rt:close()
    end)
  end)

  describe("faults", function()
    local cases = {
      { task = "oob", what = "an out-of-bounds write" },
      { task = "trap", what = "a trap" },
      { task = "bad_assert", what = "a failed device assert" },
    }
    for _, case in ipairs(cases) do
      it(case.what .. " fails every pending await; close returns; a new runtime works #fault", function()
        local rt = support.runtime(backend)
        local prog = support.compile(rt, SOURCE, "executor_tasks.cu")
        local flag = rt:buffer("int32", 1)
        flag:write { 0 }
        local waiting = prog.hold(flag)
        local arg = case.task == "oob" and flag or 1
        local bad = prog[case.task](arg)
        local t0 = mw.now()
        local err = support.error_of(bad.await, bad, 30)
        assert.truthy(err and err:find("fault", 1, true), err)
        local err2 = support.error_of(waiting.await, waiting, 30)
        assert.truthy(err2 and err2:find("fault", 1, true), err2)
        assert.is_true(mw.now() - t0 < 30)
        assert.truthy(rt.faulted)
        local t1 = mw.now()
        rt:close()
        if backend == "sim" then -- the hold task is stopped at its next sleep, not waited for
          assert.is_true(mw.now() - t1 < 2, ("close took %.2f s"):format(mw.now() - t1))
        end
        local rt2 = support.runtime(backend)
        local prog2 = support.compile(rt2, SOURCE, "executor_tasks.cu")
        assert.equals(4950, prog2.chain(100):await(30))
        rt2:close()
      end)
    end
  end)
end)

describe("sim checks what hardware cannot #sim", function()
  local rt
  before_each(function() rt = support.runtime("sim") end)
  after_each(function() rt:close() end)

  local cases = {
    { name = "a spawn whose arguments differ between lanes",
      src = "task int leaf(int x) { return x; }\n"
        .. "task int t(int u) {\n  local future f;\n  f = spawn(leaf, lane);\n"
        .. "  await(f);\n  return value(f);\n}\n",
      want = "t: spawn with different arguments per lane at line 4" },
    { name = "lanes that reach different collectives (the warp is restarted)",
      src = "task int leaf(int x) { return x; }\n"
        .. "task int t(int u) {\n  local future f;\n  if (lane < 16)\n    f = spawn(leaf, 1);\n"
        .. "  else\n    __syncwarp();\n  return 0;\n}\n",
      want = "t: lanes of warp" },
    { name = "lanes that return different values",
      src = "task int t(int u) { return lane; }\n",
      want = "t: lanes returned different values" },
    { name = "a child run at its spawn whose lanes return different values",
      src = "task int leaf(int x) { return x + lane; }\n"
        .. "task int t(int u) {\n  local future f;\n  f = spawn(leaf, 1);\n"
        .. "  await(f);\n  return value(f);\n}\n",
      want = "leaf: lanes returned different values" },
  }
  for _, case in ipairs(cases) do
    it("fails the task on " .. case.name, function()
      local prog = support.compile(rt, case.src, "diverge.cu")
      local err = support.error_of(function() return prog.t(0):await(30) end)
      assert.truthy(err and err:find(case.want, 1, true), err)
      -- only the task failed: the runtime goes on
      assert.is_false(rt.faulted)
      local more = support.compile(rt, "task int twice(int x) { return 2 * x; }", "more.cu")
      assert.equals(84, more.twice(42):await(30))
    end)
  end

  it("names the lines where lanes diverged", function()
    local prog = support.compile(rt, "task int leaf(int x) { return x; }\n"
      .. "task int t(int u) {\n  local future f;\n  if (lane < 16)\n    f = spawn(leaf, 1);\n"
      .. "  else\n    __syncwarp();\n  return 0;\n}\n", "lines.cu")
    local err = support.error_of(function() return prog.t(0):await(30) end)
    assert.truthy(err and err:find("lines.cu:7", 1, true), err)
  end)
end)
