-- trace_spec.lua - task traces on every backend: rt:trace_start/trace_stop record the runs of
-- task bodies per worker and write a Chrome trace event JSON file, read back here with a parser.
local mw = require "moonwarp"
local json = require "dkjson"
local support = require "spec.support"

-- fib (the await_all is on line 6), a bulk task, a task that fails and one that waits for the
-- host to set a flag
local SOURCE = support.FIB .. [[
task void scale(float *x, float s) {
  x[index * 32 + lane] *= s;
}
task int boom(int x) {
  if (x > 0) fail(7, "went off");
  return x;
}
task int wait_flag(int *flag) {
  long long t0 = clock64();
  while (*(volatile int *)flag == 0 && clock64() - t0 < 60000000000LL)
    __nanosleep(100000);
  return *(volatile int *)flag;
}
]]
local FIB_AWAIT_LINE = 6
local FIB10_TASKS = 177

local function tmpname(tag)
  return string.format("%s/moonwarp-trace-%s-%d-%d.json", os.getenv("TMPDIR") or "/tmp", tag,
    os.time(), math.random(1, 1e9))
end

--- Reads and parses a trace file; removes it.
local function load(path)
  local f = assert(io.open(path, "rb"))
  local text = f:read("*a")
  f:close()
  os.remove(path)
  local doc, _, err = json.decode(text, 1, nil)
  assert(doc, "the trace is not valid JSON: " .. tostring(err))
  return doc
end

--- The "X" events of a parsed trace.
local function slices(doc)
  local out = {}
  for _, e in ipairs(doc.traceEvents) do
    if e.ph == "X" then out[#out + 1] = e end
  end
  return out
end

local function metadata(doc, name)
  local out = {}
  for _, e in ipairs(doc.traceEvents) do
    if e.ph == "M" and e.name == name then out[#out + 1] = e end
  end
  return out
end

--- Starts a trace, runs fn, stops into a fresh file; returns the parsed file, events, dropped.
local function traced(rt, opts, fn)
  assert(rt:trace_start(opts))
  fn()
  local path = tmpname("t")
  local n, dropped = rt:trace_stop(path)
  assert(n, dropped)
  return load(path), n, dropped
end

support.each_backend(function(backend)
  local rt, prog, workers

  setup(function()
    rt = support.runtime(backend)
    prog = support.compile(rt, SOURCE, "trace_spec")
    workers = rt:stats().workers
  end)

  teardown(function()
    if rt then rt:close() end
  end)

  it("writes fib(10) as a Chrome trace: one slice per run of a task body, on its worker", function()
    local doc, n, dropped = traced(rt, nil, function()
      assert.are.equal(55, prog.fib(10):await())
    end)
    assert.are.equal(0, dropped)
    assert.is_true(n >= FIB10_TASKS)
    assert.are.equal("table", type(doc.traceEvents))
    assert.are.equal("ns", doc.displayTimeUnit)
    local xs = slices(doc)
    assert.are.equal(n, #xs)
    local tasks = {}
    for _, e in ipairs(xs) do
      assert.are.equal("fib", e.name)
      assert.are.equal("task", e.cat)
      assert.are.equal("number", type(e.ts))
      assert.are.equal("number", type(e.dur))
      assert.is_true(e.ts >= 0 and e.dur >= 0)
      assert.are.equal(1, e.pid)
      assert.is_true(e.tid >= 0 and e.tid < workers and e.tid == math.floor(e.tid))
      assert.are.equal("table", type(e.args))
      tasks[e.args.task] = true
    end
    local distinct = 0
    for _ in pairs(tasks) do distinct = distinct + 1 end
    assert.are.equal(FIB10_TASKS, distinct) -- every task, each with its own id
  end)

  it("names the process after the backend and every worker's thread", function()
    local doc = traced(rt, nil, function() prog.fib(8):await() end)
    local p = metadata(doc, "process_name")
    assert.are.equal(1, #p)
    assert.are.equal("moonwarp " .. backend, p[1].args.name)
    local named = {}
    for _, e in ipairs(metadata(doc, "thread_name")) do named[e.tid] = e.args.name end
    for w = 0, workers - 1 do assert.are.equal("worker " .. w, named[w]) end
    assert.are.equal(backend, doc.otherData.backend)
    assert.are.equal(0, doc.otherData.dropped)
  end)

  it("shows a task that suspends as a run that ends at the await and a run that resumes there",
    function()
      local doc = traced(rt, nil, function() prog.fib(10):await() end)
      local runs = {}
      for _, e in ipairs(slices(doc)) do
        runs[e.args.task] = runs[e.args.task] or {}
        table.insert(runs[e.args.task], e)
      end
      local resumed = 0
      for _, list in pairs(runs) do
        table.sort(list, function(a, b) return a.ts < b.ts end)
        assert.are.equal("start", list[1].args.run)
        for i = 2, #list do
          assert.are.equal("await", list[i - 1].args["end"])
          assert.are.equal("resume", list[i].args.run)
          assert.are.equal(FIB_AWAIT_LINE, list[i].args.resume_line)
          assert.is_true(list[i].ts >= list[i - 1].ts + list[i - 1].dur)
          resumed = resumed + 1
        end
        assert.are.equal("done", list[#list].args["end"])
      end
      assert.is_true(resumed > 0)
      local flows = 0
      for _, e in ipairs(doc.traceEvents) do
        if e.ph == "s" then flows = flows + 1 end
      end
      assert.are.equal(resumed, flows) -- an arrow from each suspending run to its resumption
    end)

  it("shows a bulk task as slices of chunks that cover every instance once", function()
    local buf = rt:buffer("float", 32 * 100)
    local doc = traced(rt, nil, function() prog.scale:bulk(100, buf, 2.0):await() end)
    buf:close()
    local seen, total = {}, 0
    for _, e in ipairs(slices(doc)) do
      assert.are.equal("scale", e.name)
      assert.is_true(e.args.bulk)
      for i = e.args.first, e.args.first + e.args.count - 1 do
        assert.is_nil(seen[i])
        seen[i] = true
      end
      total = total + e.args.count
    end
    assert.are.equal(100, total)
  end)

  it("marks the run of a task that fails", function()
    local doc = traced(rt, nil, function()
      local f = prog.boom(1)
      assert.truthy(support.error_of(f.await, f))
    end)
    local xs = slices(doc)
    assert.are.equal(1, #xs)
    assert.are.equal("boom", xs[1].name)
    assert.are.equal("failed", xs[1].args["end"])
  end)

  it("records nothing while tracing is off", function()
    prog.fib(10):await()
    local doc, n = traced(rt, nil, function() end)
    assert.are.equal(0, n)
    assert.are.equal(0, #slices(doc))
    prog.fib(10):await() -- after a stop: not recorded either
    doc, n = traced(rt, nil, function() end)
    assert.are.equal(0, n)
    assert.are.equal(0, #slices(doc))
  end)

  it("counts the runs that do not fit a worker's buffer as dropped, in the file too", function()
    local doc, n, dropped = traced(rt, { events = 2 }, function() prog.fib(10):await() end)
    assert.is_true(n <= 2 * workers)
    assert.is_true(dropped > 0)
    assert.is_true(n + dropped >= FIB10_TASKS)
    assert.are.equal(n, #slices(doc))
    assert.are.equal(dropped, doc.otherData.dropped)
    local labels = metadata(doc, "process_labels")
    assert.are.equal(1, #labels)
    assert.truthy(labels[1].args.labels:find(tostring(dropped), 1, true))
  end)

  it("may be switched on and off while tasks run", function()
    local futures = {}
    for i = 1, 8 do futures[i] = prog.fib(12) end
    local doc, n = traced(rt, nil, function()
      for i = 9, 16 do futures[i] = prog.fib(12) end
    end)
    for _, f in ipairs(futures) do assert.are.equal(144, f:await()) end
    assert.are.equal(n, #slices(doc))
    for _, e in ipairs(slices(doc)) do assert.is_true(e.dur >= 0) end
  end)

  it("goes on across a new program (the executor is relaunched)", function()
    local doc = traced(rt, nil, function()
      prog.fib(6):await()
      local p2 = support.compile(rt, "task int seven() { return 7; }", "seven")
      assert.are.equal(7, p2.seven():await())
      prog.fib(6):await()
    end)
    local names = {}
    for _, e in ipairs(slices(doc)) do names[e.name] = (names[e.name] or 0) + 1 end
    assert.are.equal(1, names.seven)
    assert.is_true(names.fib >= 2 * 25) -- fib(6) is 25 tasks, run twice
  end)

  it("does not wait for a task that keeps running: its run is left out, the rest is written",
    function()
      local flag = rt:buffer("int", 1)
      flag:write { 0 }
      assert(rt:trace_start())
      prog.fib(5):await()
      local f = prog.wait_flag(flag)
      local t0 = mw.now()
      while rt:stats().frames_in_use == 0 and mw.now() - t0 < 5 do end -- until it runs
      local path = tmpname("busy")
      local n = rt:trace_stop(path)
      local doc = load(path)
      assert.are.equal(1, doc.otherData.busy_workers)
      assert.are.equal(n, #slices(doc))
      for _, e in ipairs(slices(doc)) do assert.are.equal("fib", e.name) end
      flag:write { 5 }
      assert.are.equal(5, f:await())
      -- its buffer was kept for it; a new recording starts and ends cleanly
      local _, n2 = traced(rt, nil, function() prog.fib(3):await() end)
      assert.are.equal(n2 >= 5, true)
      flag:close()
    end)

  it("leaves tracing on when the file cannot be written, so nothing is lost", function()
    assert(rt:trace_start())
    prog.fib(5):await()
    local bad = "/nonexistent-moonwarp-dir/trace.json"
    local n, err, code = rt:trace_stop(bad)
    assert.is_nil(n)
    assert.are.equal("EIO", code)
    assert.truthy(err:find(bad, 1, true))
    local path = tmpname("retry")
    n = rt:trace_stop(path)
    assert.is_true(n >= 15) -- fib(5) is 15 tasks
    assert.is_true(#slices(load(path)) >= 15)
  end)

  it("raises on a stop without a start and on a second start", function()
    assert.matches("tracing is not on", support.error_of(rt.trace_stop, rt, tmpname("x")))
    assert(rt:trace_start())
    assert.matches("tracing is already on", support.error_of(rt.trace_start, rt))
    rt:trace_stop(tmpname("x"))
    os.remove(tmpname("x"))
  end)

  local bad_options = {
    { { events = 0 }, "option 'events' must be an integer in 1..16777216, got 0" },
    { { events = -3 }, "option 'events' must be an integer in 1..16777216, got %-3" },
    { { events = 1.5 }, "got 1.5" },
    { { events = 2 ^ 24 + 1 }, "option 'events' must be an integer" },
    { { events = "many" }, "got string" },
    { { size = 10 }, "unknown option 'size' %(options: events%)" },
    { "big", "table expected, got string" },
  }
  for _, case in ipairs(bad_options) do
    it("names the bad argument of trace_start: " .. case[2], function()
      local err = support.error_of(function() local r = rt:trace_start(case[1]) return r end)
      assert.matches("bad argument #1 to 'trace_start'", err)
      assert.matches(case[2], err)
    end)
  end

  it("names the bad argument of trace_stop", function()
    assert.matches("bad argument #1 to 'trace_stop' %(string expected, got no value%)",
      support.error_of(function() local r = rt:trace_stop() return r end))
  end)

  it("names a task that a later program defines again by its kind, as rt:stats() keys it",
    function()
      local kind = rt:stats().kinds
      local again = support.compile(rt, "task int fib(int n) { return -n; }", "fib_again")
      local doc = traced(rt, nil, function()
        assert.are.equal(-3, again.fib(3):await())
        assert.are.equal(2, prog.fib(3):await())
      end)
      local key = "fib#" .. kind
      local names = {}
      for _, e in ipairs(slices(doc)) do names[e.name] = (names[e.name] or 0) + 1 end
      assert.are.equal(1, names[key])
      assert.is_true(names.fib >= 5) -- fib(3) is 5 tasks
      local tasks = rt:stats().tasks
      assert.is_true(tasks[key].completed >= 1)
      assert.is_true(tasks.fib.completed >= 5)
    end)

  it("frees a trace still on when the runtime closes; a closed runtime raises", function()
    rt:close() -- one executor per device: the shared runtime makes way (this test is the last)
    rt = nil
    local rt2 = support.runtime(backend)
    local p = support.compile(rt2, support.FIB, "fib")
    assert(rt2:trace_start { events = 64 })
    p.fib(8):await()
    assert.is_true(rt2:close())
    assert.matches("runtime is closed", support.error_of(rt2.trace_start, rt2))
    assert.matches("runtime is closed", support.error_of(rt2.trace_stop, rt2, tmpname("x")))
  end)
end)
