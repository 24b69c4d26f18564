-- futures_spec.lua - futures as values shared between tasks, on every backend: any number of
-- tasks and the host await one future at once; a task holds the futures it was given for as
-- long as it runs; a spawned task never waits for its spawner's worker to become free.
local mw = require "moonwarp"
local support = require "spec.support"

local SOURCE = [[
// counts itself in *started, then waits for *flag (lane 0 watches, the warp takes its answer);
// fails when the flag is negative
task int gate(int *flag, int *started) {
  int v = 0;
  if (lane == 0) {
    atomicAdd(started, 1);
    long long t0 = clock64();
    while ((v = *(volatile int *)flag) == 0 && clock64() - t0 < 120000000000LL)
      __nanosleep(100000);
  }
  v = __shfl_sync(0xffffffffu, v, 0);
  if (v < 0) fail(4, "the gate failed");
  return v;
}
// the readers count themselves in *arrived just before they await
task int reader(future d, int k, int *arrived) {
  if (lane == 0) atomicAdd(arrived, 1);
  await(d);
  return value(d) * k;
}
task int tolerant_reader(future d, int k, int *arrived) {
  if (lane == 0) atomicAdd(arrived, 1);
  try_await(d);
  if (failed(d)) return fail_code(d) * k;
  return value(d) * k;
}
task int pair_reader(future d, future e, int *arrived) {
  if (lane == 0) atomicAdd(arrived, 1);
  await_all(d, e);
  return value(d) + value(e);
}
// B and C await D while D runs; A awaits B and C
task int diamond(int *flag, int *started, int *arrived) {
  local future d, b, c;
  d = spawn(gate, flag, started);
  b = spawn(reader, d, 2, arrived);
  c = spawn(reader, d, 3, arrived);
  await_all(b, c);
  return value(b) + value(c);
}
task int producer(int x) { return x * 10; }
// waits for *flag before it awaits the future it was given, then writes its value to out[0]
task int consumer(future p, int *flag, int *out) {
  if (lane == 0) {
    long long t0 = clock64();
    while (*(volatile int *)flag == 0 && clock64() - t0 < 120000000000LL) __nanosleep(100000);
  }
  __syncwarp();
  await(p);
  {
    int v = value(p);
    if (lane == 0) out[0] = v;
    return v;
  }
}
// spawns a producer and a consumer of its future, lets both go and finishes at once
task int launcher(int x, int *flag, int *out) {
  local future p, q;
  p = spawn(producer, x);
  q = spawn(consumer, p, flag, out);
  release(p);
  release(q);
  return 1;
}
task int opener(int *gate) {
  if (lane == 0) atomicExch(gate, 1);
  return 1;
}
// spawns the task that opens its gate, then polls the gate without spawning or awaiting:
// only another worker can run the opener meanwhile
task int poller(int *gate) {
  local future f;
  local int open;
  f = spawn(opener, gate);
  if (lane == 0) {
    long long t0 = clock64();
    while (!(open = *(volatile int *)gate) && clock64() - t0 < 60000000000LL) __nanosleep(1000);
  }
  open = __shfl_sync(0xffffffffu, open, 0);
  await(f);
  return open;
}
// polls a gate that the host opens, or a task spawned after it
task int wait_gate(int *gate) {
  int open = 0;
  if (lane == 0) {
    long long t0 = clock64();
    while (!(open = *(volatile int *)gate) && clock64() - t0 < 60000000000LL) __nanosleep(1000);
  }
  return __shfl_sync(0xffffffffu, open, 0);
}
// writes its parameter n and its locals, then awaits a gate the host has not opened (the task
// suspends and is woken, maybe elsewhere), twice: what it wrote before each await is there after
task long keeper(future g1, future g2, int n, int *arrived) {
  local long acc;
  local int k;
  local future cur;
  acc = 0;
  for (k = 0; k < 2; ++k) {
    n = n * 2 + 1;
    acc = acc * 100 + n;
    cur = k == 0 ? g1 : g2;
    if (lane == 0) atomicAdd(arrived, 1);
    await(cur);
    acc += value(cur);
  }
  return acc * 1000 + n;
}
// counts itself done in *done, then returns k * k, or fails when k is bad
task int marked(int k, int bad, int *done) {
  if (lane == 0) atomicAdd(done, 1);
  if (k == bad) fail(5, "marked failed");
  return k * k;
}
// spawns n children, waits until every one has run (on other workers), then awaits each in turn:
// with await (strict) or try_await, summing values and 1000 * the failure codes
task long collector(int n, int bad, int strict, int *done) {
  local future fs[16];
  local int i;
  local long total;
  for (i = 0; i < n; ++i) fs[i] = spawn(marked, i, bad, done);
  if (lane == 0) {
    long long t0 = clock64();
    while (*(volatile int *)done < n && clock64() - t0 < 60000000000LL) __nanosleep(1000);
  }
  __syncwarp();
  total = 0;
  for (i = 0; i < n; ++i) {
    if (strict) {
      await(fs[i]);
    } else {
      try_await(fs[i]);
    }
    total += failed(fs[i]) ? 1000 * (long)fail_code(fs[i]) : (long)value(fs[i]);
  }
  return total;
}
]] .. support.FIB

local wait_for = support.wait_for

local function int_buffer(rt, values)
  local b = rt:buffer("int32", #values)
  b:write(values)
  return b
end

support.each_backend(function(backend)
  local rt, prog
  setup(function()
    rt = support.runtime(backend, { workers = 4, host_futures = 16 })
    prog = support.compile(rt, SOURCE, "futures_tasks.cu")
  end)
  teardown(function() rt:close() end)

  describe("a future awaited by several tasks at once", function()
    it("wakes both sides of a diamond: B and C await D while D still runs", function()
      local flag, started, arrived = int_buffer(rt, { 0 }), int_buffer(rt, { 0 }), int_buffer(rt, { 0 })
      local a = prog.diamond(flag, started, arrived)
      wait_for("D to run", function() return started:read()[1] == 1 end)
      wait_for("B and C to await D", function() return arrived:read()[1] == 2 end)
      mw.run(0.05)
      assert.equals("pending", a:state())
      flag:write { 7 }
      assert.equals(7 * 2 + 7 * 3, a:await(30))
    end)

    it("wakes every awaiter, await, try_await and await_all, tasks and the host alike", function()
      local flag, started, other = int_buffer(rt, { 0 }), int_buffer(rt, { 0 }), int_buffer(rt, { 5 })
      local arrived, started_e = int_buffer(rt, { 0 }), int_buffer(rt, { 0 })
      local d = prog.gate(flag, started)
      local e = prog.gate(other, started_e)
      local readers, tolerant, pairs_ = {}, {}, {}
      for k = 1, 6 do readers[k] = prog.reader(d, k, arrived) end
      for k = 1, 3 do tolerant[k] = prog.tolerant_reader(d, k, arrived) end
      for k = 1, 2 do pairs_[k] = prog.pair_reader(d, e, arrived) end
      wait_for("D to run", function() return started:read()[1] == 1 end)
      wait_for("every reader to await D", function() return arrived:read()[1] == 11 end)
      mw.run(0.05)
      for _, f in ipairs(readers) do assert.equals("pending", f:state()) end
      local host = mw.async(function() return d:await() end)
      flag:write { 4 }
      assert.equals(4, d:await(30))
      assert.equals(4, host:await(30))
      for k, f in ipairs(readers) do assert.equals(4 * k, f:await(30)) end
      for k, f in ipairs(tolerant) do assert.equals(4 * k, f:await(30)) end
      for _, f in ipairs(pairs_) do assert.equals(4 + 5, f:await(30)) end
    end)

    it("gives each awaiter the failure of the future they share", function()
      local flag, started, arrived = int_buffer(rt, { 0 }), int_buffer(rt, { 0 }), int_buffer(rt, { 0 })
      local d = prog.gate(flag, started)
      local strict = { prog.reader(d, 1, arrived), prog.reader(d, 2, arrived) }
      local tolerant = { prog.tolerant_reader(d, 1, arrived), prog.tolerant_reader(d, 10, arrived) }
      wait_for("D to run", function() return started:read()[1] == 1 end)
      wait_for("every reader to await D", function() return arrived:read()[1] == 4 end)
      mw.run(0.05)
      flag:write { -1 }
      assert.equals("gate: the gate failed", support.error_of(d.await, d, 30))
      for _, f in ipairs(strict) do
        assert.equals("gate: the gate failed", support.error_of(f.await, f, 30))
      end
      assert.equals(4, tolerant[1]:await(30))
      assert.equals(40, tolerant[2]:await(30))
    end)
  end)

  describe("a task that suspends at an await", function()
    it("finds its parameters and locals as it left them when it is woken", function()
      local f1, f2, started = int_buffer(rt, { 0 }), int_buffer(rt, { 0 }), int_buffer(rt, { 0 })
      local arrived = int_buffer(rt, { 0 })
      local g1, g2 = prog.gate(f1, started), prog.gate(f2, started)
      local t = prog.keeper(g1, g2, 3, arrived)
      wait_for("both gates to run", function() return started:read()[1] == 2 end)
      wait_for("the first await", function() return arrived:read()[1] == 1 end)
      mw.run(0.05)
      assert.equals("pending", t:state())
      f1:write { 5 }
      wait_for("the second await", function() return arrived:read()[1] == 2 end)
      mw.run(0.05)
      assert.equals("pending", t:state())
      f2:write { 7 }
      -- n: 3 -> 7 -> 15; acc: 7, + 5 = 12, 12 * 100 + 15 = 1215, + 7 = 1222
      assert.equals(1222 * 1000 + 15, t:await(30))
    end)
  end)

  describe("a future given to a task", function()
    it("stays valid after the script lets go of it, until the task has awaited it", function()
      local flag, out = int_buffer(rt, { 0 }), int_buffer(rt, { 0 })
      -- the producer's future exists only as the consumer's argument
      local c = prog.consumer(prog.producer(6), flag, out)
      wait_for("the producer to finish", function() return rt:stats().tasks.producer.completed >= 1 end)
      collectgarbage()
      collectgarbage()
      -- every other host future is used and reused meanwhile (16 of them)
      for i = 1, 64 do assert.equals(i * 10, prog.producer(i):await(30)) end
      flag:write { 1 }
      assert.equals(60, c:await(30))
      assert.equals(60, out:read()[1])
    end)

    it("stays valid for a task whose spawner let go of it and finished", function()
      local flag, out = int_buffer(rt, { 0 }), int_buffer(rt, { 0 })
      assert.equals(1, prog.launcher(3, flag, out):await(30))
      -- the device slot of the producer's future is reused meanwhile
      for _ = 1, 20 do assert.equals(6765, prog.fib(20):await(60)) end
      flag:write { 1 }
      wait_for("the consumer to write", function() return out:read()[1] ~= 0 end)
      assert.equals(30, out:read()[1])
    end)
  end)

  describe("an await of a child that completed on another worker before the await", function()
    local function squares(n, bad)
      local t = 0
      for k = 0, n - 1 do if k ~= bad then t = t + k * k end end
      return t
    end
    it("gives each child's value, one after the other", function()
      for run = 1, 10 do
        local done = int_buffer(rt, { 0 })
        assert.equals(squares(16, -1), prog.collector(16, -1, 1, done):await(30), "run " .. run)
        assert.same({ 16 }, done:read())
      end
    end)
    it("gives a failed child's failure to try_await, and fails the awaiting task with await", function()
      for run = 1, 5 do
        local done = int_buffer(rt, { 0 })
        assert.equals(squares(16, 7) + 5000, prog.collector(16, 7, 0, done):await(30), "run " .. run)
        done:write({ 0 })
        local f = prog.collector(16, 7, 1, done)
        local ok, err = pcall(f.await, f, 30)
        assert.is_false(ok)
        assert.matches("marked failed", tostring(err))
      end
    end)
  end)

  describe("a spawned task", function()
    it("runs while its spawner polls for it without spawning or awaiting", function()
      for run = 1, 10 do
        local gate = int_buffer(rt, { 0 })
        local t0 = mw.now()
        assert.equals(1, prog.poller(gate):await(20), "run " .. run)
        assert.is_true(mw.now() - t0 < 10, "run " .. run)
      end
    end)

    it("queued right after other work is taken by an idle worker, whatever runs beside it", function()
      for run = 1, 10 do
        local gate = int_buffer(rt, { 0 })
        local t0 = mw.now()
        local f = prog.fib(12)
        local w = prog.wait_gate(gate)
        local o = prog.opener(gate)
        assert.equals(144, f:await(20))
        assert.equals(1, o:await(20), "run " .. run)
        assert.equals(1, w:await(20), "run " .. run)
        assert.is_true(mw.now() - t0 < 10, "run " .. run)
      end
    end)
  end)
end)

-- A host future's record reaches the host before its worker lets go of the task and closes the
-- slot (protocol.h, completion ring, Closing): the host gives the slot to a new spawn, and reads
-- the counters, only once the device has closed it. Sim, with each close held back 20 ms by a
-- build of its own (MW_CLOSE_DELAY_NS): without the host's waits, the counters read right after
-- an await miss the task, and a waiter on the reused slot is refused or dropped.
describe("a host future closed late by the device #sim", function()
  it("is neither reused nor counted before it is closed", function()
    local status, out = support.run(support.lua_paths() .. "MOONWARP_DEVICE_DEFINE=MW_CLOSE_DELAY_NS=20000000"
      .. " luajit spec/fixtures/closing.lua 10")
    assert.equals(0, status, out)
    local ms = tonumber(out:match("closing: ok, 10 rounds, the longest wait ([%d.]+) ms"))
    assert.is_not_nil(ms, out)
    assert.is_true(ms >= 5, "the statistics never waited for a close: " .. out) -- the window was there
  end)
end)
