-- cancel_spec.lua - cancellation and failure handling on every backend: f:cancel() from Lua,
-- cancel(f) and try_await(f) in task code, children cancelled with their parent, the counters.
local mw = require "moonwarp"
local support = require "spec.support"

local SOURCE = [[
// counts itself in *started, then waits for *flag (lane 0 watches, the warp takes its answer)
task int hold(int *flag, int *started) {
  int v = 0;
  if (lane == 0) {
    atomicAdd(started, 1);
    long long t0 = clock64();
    while ((v = *(volatile int *)flag) == 0 && clock64() - t0 < 120000000000LL)
      __nanosleep(100000); // sleeping, not spinning: on sim the other workers need the CPU
  }
  return __shfl_sync(0xffffffffu, v, 0);
}
task int mark(int *cell) {
  if (lane == 0) cell[0] = 1;
  return 7;
}
task int leaf(int x) { return x; }
task int boom(int x) { fail(3, "boom went off"); }

// awaits a future it does not own: cell[0] says it started, cell[1] that it got past the await
task int waiter(future f, int *cell) {
  if (lane == 0) cell[0] = 1;
  await(f);
  if (lane == 0) cell[1] = 1;
  return value(f);
}
// owns a waiter of g and awaits f itself; cell[2] says it got past its await
task int parent(future f, future g, int *cell) {
  local future c;
  c = spawn(waiter, g, cell);
  await(f);
  if (lane == 0) cell[2] = 1;
  return 1;
}

__device__ bool same(const char *a, const char *b) {
  while (*a && *a == *b) ++a, ++b;
  return *a == *b;
}
// try_await leaves the child's failure to the task: code, message, and that it was no cancel
task long tolerant(int x) {
  local future f;
  f = spawn(boom, x);
  try_await(f);
  if (!failed(f)) return -1;
  return fail_code(f) * 1000 + (same(fail_message(f), "boom: boom went off") ? 10 : 0)
         + (cancelled(f) ? 1 : 0);
}
// the same with await: the child's failure is this task's
task long strict(int x) {
  local future f;
  f = spawn(boom, x);
  await(f);
  return 1;
}
// cancels a child that has not started (it waits in this warp's LIFO slot): it never runs
task long early(int *cell) {
  local future f, g;
  local int asked, again, after, late;
  f = spawn(mark, cell);
  asked = cancel(f);
  again = cancel(f);
  try_await(f);
  after = cancel(f);
  g = spawn(leaf, 5);
  await(g);
  late = cancel(g);
  return asked * 100000 + again * 10000 + after * 1000 + late * 100 + (cancelled(f) ? 10 : 0)
         + (fail_code(f) == -9 && same(fail_message(f), "task 'mark' was cancelled") ? 1 : 0);
}
// awaits a child it cancelled: with await, the cancellation is its own
task long strict_early(int *cell) {
  local future f;
  f = spawn(mark, cell);
  cancel(f);
  await(f);
  return 1;
}
// spawns (and lets go) children in a loop and never awaits: it stops at a spawn
task long spawner(int *count) {
  local future f;
  local long n;
  for (n = 0; n < 200000; ++n) {
    f = spawn(leaf, 1);
    if (cancelled(f)) return -n; // the spawn was skipped: the task ends cancelled anyway
    release(f);
    if (lane == 0) atomicAdd(count, 1);
  }
  return n;
}
// bulk instances that count themselves and take a while
task void slow(int *count) {
  if (lane == 0) {
    atomicAdd(count, 1);
    __nanosleep(2000000);
  }
  __syncwarp();
}
// spawns n holds that it lets go and says how many spawns failed (no frame or slot free)
task int wide(int *flag, int *started, int n) {
  local future f;
  local int i, failures;
  failures = 0;
  for (i = 0; i < n; ++i) {
    f = spawn(hold, flag, started);
    if (failed(f)) failures++;
    release(f);
  }
  return failures;
}
]]

local CANCELLED = "was cancelled"

support.each_backend(function(backend)
  local rt, prog
  setup(function()
    rt = support.runtime(backend, { workers = 4 })
    prog = support.compile(rt, SOURCE, "cancel_tasks.cu")
  end)
  teardown(function() rt:close() end)

  local wait_for = support.wait_for

  local function counts(name)
    local t = rt:stats().tasks[name]
    return { spawned = t.spawned, completed = t.completed, failed = t.failed, cancelled = t.cancelled }
  end

  local function idle_and_balanced()
    local s
    wait_for("the counters to balance", function()
      s = rt:stats()
      return s.spawned == s.completed + s.failed + s.cancelled and s.in_flight == 0
    end)
    return s
  end

  -- n holds on flag, every one of them running: started[0] counts them. Returns flag, the
  -- holds and a zeroed int32 buffer of each further size, allocated before the holds start
  -- (allocating while they run would hold up a relaunch under MOONWARP_RELAUNCH_AFTER_ALLOC)
  local function hold_workers(n, ...)
    local cells = {}
    for i, size in ipairs { ... } do
      local zeros = {}
      for j = 1, size do zeros[j] = 0 end
      cells[i] = rt:buffer("int32", size)
      cells[i]:write(zeros)
    end
    local flag, started = rt:buffer("int32", 1), rt:buffer("int32", 1)
    flag:write { 0 }
    started:write { 0 }
    local holds = {}
    for i = 1, n do holds[i] = prog.hold(flag, started) end
    wait_for("the holds to start", function() return started:read()[1] == n end)
    return flag, holds, unpack(cells)
  end

  it("a task cancelled before it started never runs; awaiting it raises; its state says so", function()
    local before = counts("mark")
    -- no worker takes anything new
    local flag, holds, cell = hold_workers(rt:stats().workers, 1)
    local f = prog.mark(cell)
    assert.is_true(f:cancel())
    assert.is_true(f:cancel()) -- asking again is harmless
    flag:write { 1 }
    for _, h in ipairs(holds) do assert.equals(1, h:await(30)) end
    local err = support.error_of(f.await, f, 30)
    assert.equals("task 'mark' " .. CANCELLED, err)
    assert.equals("cancelled", f:state())
    assert.is_true(f:done())
    assert.truthy(tostring(f):find("cancelled", 1, true))
    assert.is_false(f:cancel()) -- complete now: a no-op
    assert.equals(0, cell:read()[1])
    local after = counts("mark")
    assert.same({ spawned = 1, completed = 0, failed = 0, cancelled = 1 }, {
      spawned = after.spawned - before.spawned, completed = after.completed - before.completed,
      failed = after.failed - before.failed, cancelled = after.cancelled - before.cancelled })
    idle_and_balanced()
  end)

  it("cancelling a completed future is a no-op that returns false", function()
    local f = prog.leaf(42)
    assert.equals(42, f:await(30))
    assert.is_false(f:cancel())
    assert.equals("ready", f:state())
    assert.equals(42, f:await())
    local b = prog.boom(1)
    assert.truthy(support.error_of(b.await, b, 30):find("boom went off", 1, true))
    assert.is_false(b:cancel())
    assert.equals("failed", b:state())
  end)

  it("a task suspended in an await is woken to stop at once, while what it awaits runs on", function()
    local before = counts("waiter")
    local flag, holds, cell, cell2 = hold_workers(1, 2, 2)
    local w = prog.waiter(holds[1], cell)
    wait_for("the waiter to start", function() return cell:read()[1] == 1 end)
    mw.run(0.05) -- let it register and suspend
    assert.is_true(w:cancel())
    local err = support.error_of(w.await, w, 10)
    assert.equals("task 'waiter' " .. CANCELLED, err)
    assert.equals("cancelled", w:state())
    assert.equals("pending", holds[1]:state()) -- the awaited task was not touched
    -- and it is free for another awaiter at once
    local w2 = prog.waiter(holds[1], cell2)
    wait_for("the second waiter to start", function() return cell2:read()[1] == 1 end)
    mw.run(0.05)
    assert.equals("pending", w2:state())
    flag:write { 1 }
    assert.equals(1, holds[1]:await(30))
    assert.equals(1, w2:await(30))
    assert.same({ 1, 0 }, cell:read())
    assert.same({ 1, 1 }, cell2:read())
    assert.equals(1, counts("waiter").cancelled - before.cancelled)
    idle_and_balanced()
  end)

  it("cancels the children of a cancelled task, suspended ones included", function()
    local before_p, before_w = counts("parent"), counts("waiter")
    local flag, holds, cell = hold_workers(2, 3)
    local p = prog.parent(holds[1], holds[2], cell)
    wait_for("the child to start", function() return cell:read()[1] == 1 end)
    mw.run(0.05)
    assert.is_true(p:cancel())
    assert.equals("task 'parent' " .. CANCELLED, support.error_of(p.await, p, 10))
    -- the child stops too, long before the holds it awaits end
    wait_for("the child to be cancelled", function()
      return counts("waiter").cancelled - before_w.cancelled == 1
    end, 10)
    assert.equals("pending", holds[1]:state())
    assert.equals("pending", holds[2]:state())
    flag:write { 1 }
    for _, h in ipairs(holds) do assert.equals(1, h:await(30)) end
    assert.same({ 1, 0, 0 }, cell:read())
    local after_p, after_w = counts("parent"), counts("waiter")
    assert.equals(1, after_p.cancelled - before_p.cancelled)
    assert.equals(0, after_p.completed - before_p.completed)
    assert.equals(0, after_w.completed - before_w.completed)
    idle_and_balanced()
  end)

  it("try_await gives the task its child's failure; await makes it the task's own", function()
    assert.equals(3010, prog.tolerant(1):await(30))
    local f = prog.strict(1)
    assert.equals("boom: boom went off", support.error_of(f.await, f, 30))
    assert.equals("failed", f:state())
  end)

  it("a running task that never awaits stops at its next spawn", function()
    local before = counts("spawner")
    local count = rt:buffer("int32", 1)
    count:write { 0 }
    local f = prog.spawner(count)
    wait_for("the spawner to run", function() return count:read()[1] >= 10 end)
    assert.is_true(f:cancel())
    assert.equals("task 'spawner' " .. CANCELLED, support.error_of(f.await, f, 30))
    assert.is_true(count:read()[1] < 200000)
    assert.equals(1, counts("spawner").cancelled - before.cancelled)
    idle_and_balanced()
  end)

  it("a bulk task cancelled before it started runs no instance; while it runs, no more", function()
    local before = counts("slow")
    local count = rt:buffer("int32", 1)
    count:write { 0 }
    local flag, holds = hold_workers(rt:stats().workers)
    local f = prog.slow:bulk(64, count)
    assert.is_true(f:cancel())
    flag:write { 1 }
    for _, h in ipairs(holds) do h:await(30) end
    assert.equals("task 'slow' " .. CANCELLED, support.error_of(f.await, f, 30))
    assert.equals(0, count:read()[1])
    local n = 2000
    f = prog.slow:bulk(n, count)
    wait_for("instances to run", function() return count:read()[1] >= 8 end)
    assert.is_true(f:cancel())
    assert.equals("task 'slow' " .. CANCELLED, support.error_of(f.await, f, 30))
    assert.equals("cancelled", f:state())
    local ran = count:read()[1]
    assert.is_true(ran < n, ran)
    assert.equals(2, counts("slow").cancelled - before.cancelled)
    idle_and_balanced()
  end)

  it("mw.join and coroutines raise the cancellation too", function()
    local flag, holds, cell = hold_workers(1, 2)
    local w = prog.waiter(holds[1], cell)
    local h = mw.async(function() return w:await() end)
    assert.is_true(w:cancel())
    local err = support.error_of(mw.run, 30) -- nothing awaited h yet: mw.run says so
    assert.truthy(err and err:find("task 'waiter' " .. CANCELLED, 1, true), err)
    assert.equals("task 'waiter' " .. CANCELLED, support.error_of(h.await, h))
    assert.equals("task 'waiter' " .. CANCELLED, support.error_of(mw.join, prog.leaf(1), w, 30))
    flag:write { 1 }
    holds[1]:await(30)
    idle_and_balanced()
  end)

  -- on one worker, as "cancel(f) in task code" below: with more, an idle warp may take the child
  -- and start it before the cancel reaches it, and then it runs to its end (110000)
  it("a trace marks the runs that ended by cancellation", function()
    local json = require "dkjson"
    local rt1 = support.runtime(backend, { workers = 1 })
    local prog1 = support.compile(rt1, SOURCE, "cancel_tasks.cu")
    local cell = rt1:buffer("int32", 1)
    cell:write { 0 }
    assert(rt1:trace_start())
    assert.equals(110011, prog1.early(cell):await(30))
    local path = string.format("%s/moonwarp-cancel-trace-%d-%d.json", os.getenv("TMPDIR") or "/tmp",
      os.time(), math.random(1, 1e9))
    assert(rt1:trace_stop(path))
    rt1:close()
    local fh = assert(io.open(path, "rb"))
    local doc = assert(json.decode(fh:read("*a"), 1, nil))
    fh:close()
    os.remove(path)
    local ends = {}
    for _, e in ipairs(doc.traceEvents) do
      if e.ph == "X" then ends[e.name] = (ends[e.name] or "") .. e.args["end"] .. " " end
    end
    assert.equals("cancelled ", ends.mark) -- its only run: it stopped at the start
    assert.truthy(ends.early and ends.early:find("done", 1, true), tostring(ends.early))
  end)

  it("the counters balance with cancellations counted", function()
    local s = idle_and_balanced()
    assert.is_true(s.cancelled >= 8, tostring(s.cancelled))
    local sum = 0
    for _, t in pairs(s.tasks) do sum = sum + t.cancelled end
    assert.equals(s.cancelled, sum)
  end)
end)

support.each_backend(function(backend)
  -- on one worker: with more, an idle warp may take the child and start it before the cancel
  -- reaches it (a spawned child may start at any time), and then it runs to its end
  it("cancel(f) in task code: a child not yet started never runs; a complete one is left", function()
    local rt1 = support.runtime(backend, { workers = 1 })
    local prog1 = support.compile(rt1, SOURCE, "cancel_tasks.cu")
    local cell = rt1:buffer("int32", 1)
    cell:write { 0 }
    -- delivered, delivered again while pending, not delivered once complete (to it, to a child
    -- that completed normally), cancelled, code and message
    assert.equals(110011, prog1.early(cell):await(30))
    assert.equals(0, cell:read()[1])
    local f = prog1.strict_early(cell)
    assert.equals("task 'mark' " .. CANCELLED, support.error_of(f.await, f, 30))
    assert.equals("cancelled", f:state()) -- awaiting a cancelled child with await cancels
    assert.equals(0, cell:read()[1])
    assert.equals(2, rt1:stats().tasks.mark.cancelled)
    rt1:close()
  end)

  -- on a runtime of its own, closed at the end
  it("cancelling the root of a busy recursive tree ends it cancelled at once; the tree's tasks end cancelled, not failed", function()
    local rt1 = support.runtime(backend)
    local fib = support.compile(rt1, support.FIB, "fib.cu")
    local f = fib.fib(40) -- about 330 million tasks: minutes of work, even on a GPU
    support.wait_for("the tree to grow", function() return rt1:stats().tasks.fib.spawned > 1000 end)
    local t0 = mw.now()
    assert.is_true(f:cancel())
    assert.equals("task 'fib' " .. CANCELLED, support.error_of(f.await, f, 10))
    assert.is_true(mw.now() - t0 < 5 * support.time_scale)
    local st = rt1:stats().tasks.fib
    assert.is_true(st.cancelled >= 1, tostring(st.cancelled))
    assert.equals(0, st.failed)
    rt1:close() -- stops what still runs
  end)

  -- A cancelled task that was suspended is woken by its canceller, and it used to ask its own
  -- children to cancel only once it ran again; with every warp busy in the tree's other tasks
  -- (deep inline chains, no room to run it nested) that could take seconds, and the subtree
  -- below it ran on whole meanwhile (before the fix: 3 rounds of 20 over a second on 4 sim
  -- workers, 7 of 20 on 8; `luajit bench/cancel_tail.lua sim 20 8`). Several warps per CTA.
  it("cancelling the root of a busy recursive tree stops the whole tree at once, round after round", function()
    local rt1 = support.runtime(backend, backend == "sim" and { workers = 8 } or nil)
    local fib = support.compile(rt1, support.FIB, "fib.cu")
    local function unfinished(s) return s.spawned - s.completed - s.failed - s.cancelled end
    for round = 1, 10 do
      local before = rt1:stats().spawned
      local f = fib.fib(40)
      support.wait_for("the tree to grow", function() return rt1:stats().spawned - before > 1000 end)
      local t0 = mw.now()
      assert.is_true(f:cancel())
      assert.equals("task 'fib' " .. CANCELLED, support.error_of(f.await, f, 10))
      local s = rt1:stats()
      while unfinished(s) > 0 or s.in_flight > 0 do
        assert(mw.now() - t0 < 5 * support.time_scale,
          ("round %d: %d tasks still unfinished %g s after the cancel"):format(round, unfinished(s), 5 * support.time_scale))
        mw.run(0.001)
        s = rt1:stats()
      end
      assert.equals(0, s.failed)
    end
    rt1:close()
  end)

  it("cancelled tasks give back every frame and slot, also while what they awaited still ran", function()
    -- 15 frames and slots: fewer than 4 per worker, so no worker keeps freed ones to itself
    local rt = support.runtime(backend, { capacity = 15, workers = 4 })
    local prog = support.compile(rt, SOURCE, "cancel_tasks.cu")
    local flag, started = rt:buffer("int32", 1), rt:buffer("int32", 1)
    local cw, cp = rt:buffer("int32", 2), rt:buffer("int32", 3)
    local function wait_for(pred)
      local t0 = mw.now()
      while not pred() do
        assert(mw.now() - t0 < 30, "timed out")
        mw.run(0.001)
      end
    end
    for _ = 1, 30 do
      flag:write { 0 }
      started:write { 0 }
      cw:write { 0, 0 }
      cp:write { 0, 0, 0 }
      local h1, h2, h3 = prog.hold(flag, started), prog.hold(flag, started), prog.hold(flag, started)
      -- w awaits h1; p awaits h2 and owns a waiter of h3: all three suspended, then cancelled,
      -- leave registrations behind that the holds complete later
      local w, p = prog.waiter(h1, cw), prog.parent(h2, h3, cp)
      wait_for(function() return cw:read()[1] == 1 and cp:read()[1] == 1 end)
      assert.is_true(w:cancel())
      assert.is_true(p:cancel())
      assert.truthy(support.error_of(w.await, w, 30):find("was cancelled", 1, true))
      assert.truthy(support.error_of(p.await, p, 30):find("was cancelled", 1, true))
      flag:write { 1 }
      for _, f in ipairs { h1, h2, h3 } do assert.equals(1, f:await(30)) end
      for _, f in ipairs { h1, h2, h3, w, p } do f:close() end
    end
    local s
    wait_for(function()
      s = rt:stats()
      return s.spawned == s.completed + s.failed + s.cancelled
    end)
    assert.equals(90, s.cancelled) -- w, p and p's child, each time
    wait_for(function() return rt:stats().frames_in_use == 0 end) -- deferred frees counted
    -- every frame is free again: a task can hold all the others at once
    flag:write { 0 }
    started:write { 0 }
    local f = prog.wide(flag, started, 14)
    assert.equals(0, f:await(30))
    flag:write { 1 }
    wait_for(function()
      s = rt:stats()
      return s.spawned == s.completed + s.failed + s.cancelled and s.in_flight == 0
        and s.frames_in_use == 0
    end)
    rt:close()
  end)
end)
