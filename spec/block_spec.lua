-- block_spec.lua - block tasks (protocol.h, Block tasks): what the generator makes of one, and
-- how the executor runs them (every warp of a worker CTA, barrier(), __shared__, bulk, waits).
local mw = require "moonwarp"
local support = require "spec.support"

local SOURCE = [[
task block void rowsum(const float *x, float *out, int n) {
  __shared__ float part[128], extra[4];
  __shared__ int
    count[2];
  float s = 0.0f;
  for (int i = thread; i < n; i += nthreads) s += x[index * n + i];
  part[thread] = s;
  barrier();
  if (thread == 0) { float t = 0.0f; for (int k = 0; k < nthreads; ++k) t += part[k]; out[index] = t; }
}
task void driver(const float *x, float *out, int n) { }
]]

-- the lines of text, numbered as the #line directives before them say (file "blk.cu")
local function user_lines(out)
  local lines, at = {}, nil
  for line in (out .. "\n"):gmatch("([^\n]*)\n") do
    local n, f = line:match('^#line (%d+) "([^"]*)"')
    if n then
      at = f == "blk.cu" and tonumber(n) or nil
    elseif at then
      lines[at] = (lines[at] or "") .. line .. "\n"
      at = at + 1
    end
  end
  return lines
end

describe("block tasks #sim", function()
  it("keep their __shared__ variables in a struct of their own, checked against the CTA's block area", function()
    for _, backend in ipairs({ "sim", "cuda" }) do
      local out, err = mw.generate(SOURCE, { chunkname = "blk.cu", backend = backend })
      assert.is_string(out, err)
      local members = out:match("struct mw_shared_rowsum {(.-)};")
      assert.truthy(members, out)
      assert.truthy(members:find("float part[128], extra[4];", 1, true), members)
      assert.truthy(members:find("int%s+count%[2%];"), members)
      local lines = user_lines(out)
      -- the size check at the first declaration's line, the references on the declarations' own
      assert.truthy(lines[2]:find("static_assert(sizeof(mw_shared_rowsum) <= MW_BLOCK_SMEM", 1, true), lines[2])
      assert.truthy(lines[2]:find("auto &part = _mw_sh.part; auto &extra = _mw_sh.extra;", 1, true), lines[2])
      assert.truthy(lines[3]:find("auto &count = _mw_sh.count;", 1, true), lines[3])
      assert.truthy(lines[5]:find("float s = 0.0f;", 1, true), lines[5])
      assert.truthy(lines[8]:find("barrier();", 1, true), lines[8])
      -- its body names the warp, the thread and the threads of the CTA
      assert.truthy(out:find("const unsigned thread = warp * 32u + lane;", 1, true))
      -- never run inline or as a call: its kind is a block kind, and no fast body is made for it
      assert.truthy(out:find("MW_KIND_BLOCK", 1, true))
      assert.falsy(out:find("mw_frame_rowsum::_mw_fast", 1, true))
    end
  end)

  it("are refused by a runtime with no worker CTA of all its warps", function()
    local rt = support.runtime("sim", { workers = 3 })
    local prog, log, code = rt:compile(SOURCE, "blk.cu")
    rt:close()
    assert.is_nil(prog)
    assert.equals("ECOMPILE", code)
    assert.truthy(log:find("blk.cu:1: task rowsum: a block task runs on a worker CTA of 4 warps, and this runtime has 3 workers", 1, true), log)
  end)
end)

local RUN = [[
// each warp writes its threads into __shared__, then reads another warp's after the barrier
task block void swap(int *out, int tag) {
  __shared__ int vals[128];
  vals[thread] = thread * 10 + tag + (int)index * 1000;
  barrier();
  out[index * nthreads + thread] = vals[(thread + 32) % nthreads] + (int)(warp * 32 + lane == thread);
}
task void driver(int *out, int n, int tag) {
  local future f;
  f = spawn_bulk(swap, n, out, tag);
  await(f);
}
task void one(int *out, int tag) {
  local future f;
  f = spawn(swap, out, tag);
  await(f);
}
task int twice(int x) { return 2 * x; }
// a block task and a warp task in flight together, awaited together
task long mix(int *out, int k) {
  local future b, w;
  b = spawn_bulk(swap, 2, out + k * 256, k);
  w = spawn(twice, k);
  await_all(b, w);
  return (long)value(w);
}
// holds its worker until *flag is set; started counts the holds running
// holds its worker for about ms milliseconds (lane 0 sleeps: sim runs a warp's lanes in turn)
task int hold_for(int *started, int ms) {
  if (lane == 0) {
    atomicAdd(started, 1);
    for (int i = 0; i < ms * 10; ++i) __nanosleep(100000);
  }
  __syncwarp();
  return 1;
}
task int hold(int *flag, int *started) {
  if (lane == 0) atomicAdd(started, 1); // one count a task: every lane runs the body
  __syncwarp();
  while (atomicAdd(flag, 0) == 0) __nanosleep(100000);
  return 1;
}
]]

-- what swap(out, tag) leaves for instance i at thread t
local function swapped(i, t, tag) return ((t + 32) % 128) * 10 + tag + i * 1000 + 1 end

support.each_backend(function(backend)
  -- cuda: the first image this runtime launches has no block task, so no device runtime; a grid
  -- launched from a later image faulted the executor unless the image made a launch from the
  -- device as it was loaded (backend_cuda.c, cuda_load; bench/NOTES.md, v67)
  it("run in bulk as a grid in a runtime whose first program had no block task", function()
    local rt = support.runtime(backend)
    local first = support.compile(rt, "task int twice(int x) { return 2 * x; }", "first.cu")
    assert.equals(42, first.twice(21):await(30))
    local prog = support.compile(rt, RUN, "block_run.cu")
    local n = 2 * rt:stats().workers + 5
    local out = rt:buffer("int32", 128 * n)
    assert.is_nil(prog.swap:bulk(n, out, 5):await(60))
    local got = out:read()
    for i = 0, n - 1 do
      for t = 0, 127 do
        assert.equals(swapped(i, t, 5), got[i * 128 + t + 1], ("instance %d thread %d"):format(i, t))
      end
    end
    assert.equals(backend == "cuda" and 1 or 0, rt:stats().grids)
    rt:close()
  end)

  describe("run", function()
    local rt, prog
    setup(function()
      rt = support.runtime(backend)
      prog = support.compile(rt, RUN, "block_run.cu")
    end)
    teardown(function() if rt then rt:close() end end)

    local function check(out, n, tag)
      local got = out:read()
      for i = 0, n - 1 do
        for t = 0, 127 do
          local want = swapped(i, t, tag)
          if got[i * 128 + t + 1] ~= want then
            error(("instance %d thread %d: %s, want %d"):format(i, t, tostring(got[i * 128 + t + 1]), want))
          end
        end
      end
    end

    local function settled()
      support.wait_for("the counters to balance", function()
        local s = rt:stats()
        return s.spawned == s.completed + s.failed + s.cancelled and s.in_flight == 0 and s.frames_in_use == 0
      end)
    end

    it("on every warp of a CTA: __shared__ memory, barrier(), warp, thread and nthreads", function()
      local out = rt:buffer("int32", 128)
      assert.is_nil(prog.swap(out, 7):await(30))
      check(out, 1, 7)
      out:close()
    end)

    it("in bulk from the host: each instance a whole CTA run, index its instance", function()
      local n = 9
      local out = rt:buffer("int32", 128 * n)
      assert.is_nil(prog.swap:bulk(n, out, 3):await(30))
      check(out, n, 3)
      out:close()
    end)

    it("in bulk of many instances, from the host and from a task (cuda: a grid launched from the device)", function()
      -- twice the worker CTAs or more: on cuda the instances run as a grid of their own
      -- (protocol.h, Block tasks, "As a grid"), beside the executor's CTAs
      local n = 2 * rt:stats().workers + 5
      local out = rt:buffer("int32", 128 * n)
      local before = rt:stats()
      assert.is_nil(prog.swap:bulk(n, out, 3):await(60))
      check(out, n, 3)
      assert.is_nil(prog.driver(out, n, 4):await(60))
      check(out, n, 4)
      settled()
      local after = rt:stats()
      if backend == "cuda" then
        assert.equals(2, after.grids - before.grids)
      else
        assert.equals(0, after.grids)
      end
      local s0, s1 = before.tasks.swap or {}, after.tasks.swap
      assert.equals(2, s1.completed - (s0.completed or 0))
      assert.equals(0, s1.failed - (s0.failed or 0))
      out:close()
    end)

    it("spawned and awaited by a warp task, alone and in bulk", function()
      local out = rt:buffer("int32", 128 * 5)
      assert.is_nil(prog.one(out, 4):await(30))
      check(out, 1, 4)
      assert.is_nil(prog.driver(out, 5, 6):await(30))
      check(out, 5, 6)
      out:close()
    end)

    it("refuse __shared__ variables past the block area at the user's line", function()
      local p, log, code = rt:compile([[
task block void big(float *out) {
  __shared__ float a[4096];
  __shared__ float b[4096], c[8];
  out[thread] = a[thread] + b[thread] + c[0];
}
]], "block_big.cu")
      assert.is_nil(p)
      assert.equals("ECOMPILE", code)
      assert.truthy(log:find("block_big.cu:2", 1, true) or log:find("block_big.cu(2)", 1, true), log)
      assert.truthy(log:find("task big: its __shared__ variables take more than the MW_BLOCK_SMEM bytes", 1, true), log)
      -- exactly the area fits, its last bytes included
      local fits = assert(rt:compile([[
task block void fits(float *out) {
  __shared__ float a[4096];
  __shared__ float b[4095];
  a[thread] = 1.0f;
  b[4094 - thread] = 2.0f + thread;
  barrier();
  out[thread] = a[127 - thread] + b[4094 - (127 - thread)];
}
]], "block_fits.cu"))
      local out = rt:buffer("float", 128)
      assert.is_nil(fits.fits(out):await(30))
      local got = out:read()
      for t = 0, 127 do assert.equals(3.0 + (127 - t), got[t + 1]) end
      out:close()
    end)

    it("one trace event an instance", function()
      local json = require "dkjson"
      local out = rt:buffer("int32", 128 * 3)
      local path = ("%s/moonwarp-block-trace-%d.json"):format(os.getenv("TMPDIR") or "/tmp", math.random(1, 1e9))
      assert(rt:trace_start())
      assert.is_nil(prog.swap:bulk(3, out, 1):await(30))
      rt:trace_stop(path)
      local f = assert(io.open(path, "rb"))
      local doc = json.decode(f:read("*a"))
      f:close()
      os.remove(path)
      local n = 0
      for _, e in ipairs(doc.traceEvents) do
        if e.ph == "X" and e.name == "swap" then n = n + 1 end
      end
      assert.equals(3, n)
      check(out, 3, 1)
      out:close()
    end)

    it("many in flight with warp tasks: no deadlock, exact results and counts", function()
      settled()
      local before = rt:stats()
      local k = 24
      local out = rt:buffer("int32", 256 * k)
      local fs = {}
      for j = 0, k - 1 do fs[j + 1] = prog.mix(out, j) end
      local host, solo = {}, {}
      for j = 1, 4 do
        solo[j] = rt:buffer("int32", 128)
        host[j] = prog.swap(solo[j], j)
      end
      for j = 0, k - 1 do assert.equals(2 * j, fs[j + 1]:await(60)) end
      for j = 1, 4 do
        assert.is_nil(host[j]:await(60))
        check(solo[j], 1, j)
        solo[j]:close()
      end
      local got = out:read()
      for j = 0, k - 1 do
        for i = 0, 1 do
          for t = 0, 127 do assert.equals(swapped(i, t, j), got[j * 256 + i * 128 + t + 1]) end
        end
      end
      settled()
      local after = rt:stats()
      local function d(name, what) return after.tasks[name][what] - ((before.tasks[name] or {})[what] or 0) end
      assert.equals(k + 4, d("swap", "spawned"))
      assert.equals(k + 4, d("swap", "completed"))
      assert.equals(0, d("swap", "failed"))
      assert.equals(k, d("twice", "completed"))
      assert.equals(0, after.frames_in_use)
      out:close()
    end)

    it("while every worker runs a long warp task: held, withdrawn, and run once they end", function()
      settled()
      local workers = rt:stats().workers
      -- every buffer made before the holds start: compute-sanitizer knows only the allocations
      -- made before the executor's launch, and the holds keep it running
      local flag, started = rt:buffer("int32", 1), rt:buffer("int32", 1)
      local out = rt:buffer("int32", 128 * 3)
      flag:write { 0 }
      started:write { 0 }
      local holds = {}
      for i = 1, workers do holds[i] = prog.hold(flag, started) end
      support.wait_for("the holds to start", function() return started:read()[1] == workers end)
      local f = prog.swap:bulk(3, out, 2)
      local t0 = mw.now()
      while mw.now() - t0 < 0.2 do end
      assert.is_false(f:done())
      flag:write { 1 }
      for _, h in ipairs(holds) do assert.equals(1, h:await(30)) end
      assert.is_nil(f:await(30))
      check(out, 3, 2)
      -- cancelled before it ran: it completes cancelled, nothing written
      flag:write { 0 }
      started:write { 0 }
      for i = 1, workers do holds[i] = prog.hold(flag, started) end
      support.wait_for("the holds to start", function() return started:read()[1] == workers end)
      out:write((function() local t = {} for i = 1, 128 * 3 do t[i] = -1 end return t end)())
      local before = rt:stats().tasks.swap
      local c1, c2 = prog.swap(out, 1), prog.swap:bulk(2, out, 1)
      assert.is_true(c1:cancel())
      assert.is_true(c2:cancel())
      flag:write { 1 }
      for _, h in ipairs(holds) do assert.equals(1, h:await(30)) end
      assert.truthy(support.error_of(c1.await, c1, 30):find("cancelled", 1, true))
      assert.truthy(support.error_of(c2.await, c2, 30):find("cancelled", 1, true))
      assert.equals("cancelled", c1:state())
      for _, v in ipairs(out:read()) do assert.equals(-1, v) end
      settled()
      local after = rt:stats().tasks.swap
      assert.equals(2, after.spawned - before.spawned)
      assert.equals(2, after.cancelled - before.cancelled)
      assert.equals(0, after.completed - before.completed)
      flag:close()
      started:close()
      out:close()
    end)

    it("a relaunch while a block task is held: it runs after it, once", function()
      rt:close() -- one executor per device: the shared runtime makes way (this test is the last)
      rt = nil
      local rt2 = support.runtime(backend, { relaunch_timeout = 20 })
      local p2 = support.compile(rt2, RUN, "block_relaunch.cu")
      local workers = rt2:stats().workers
      local started, out = rt2:buffer("int32", 1), rt2:buffer("int32", 128)
      started:write { 0 }
      -- all but one worker busy for a while: the last holds the block task and cannot run it
      local holds = {}
      for i = 1, workers - 1 do holds[i] = p2.hold_for(started, 400) end
      support.wait_for("the holds to start", function() return started:read()[1] == workers - 1 end)
      local f = p2.swap(out, 5)
      local t0 = mw.now()
      while mw.now() - t0 < 0.05 do end
      assert.is_false(f:done())
      -- a new program: the executor stops (the hold is withdrawn) and starts again
      local p3 = support.compile(rt2, "task int three() { return 3; }", "block_three.cu")
      assert.is_nil(f:await(30))
      for _, h in ipairs(holds) do assert.equals(1, h:await(30)) end
      assert.equals(3, p3.three():await(30))
      local got = out:read()
      for t = 0, 127 do assert.equals(swapped(0, t, 5), got[t + 1]) end
      local s = rt2:stats().tasks.swap
      assert.same({ 1, 1, 0 }, { s.spawned, s.completed, s.failed })
      t0 = mw.now()
      rt2:close()
      assert.truthy(mw.now() - t0 < 5 * support.time_scale, "close took " .. (mw.now() - t0))
    end)
  end)
end)

describe("block tasks on sim #sim", function()
  local DIVERGE = [[
task block void split(int *out) {
  if (warp == 0) {
    barrier();
  } else {
    barrier();
  }
  out[thread] = 1;
}
task block void early(int *out) {
  if (warp == 2) return;
  barrier();
  out[thread] = 2;
}
task block void lanes(int *out) {
  if (lane < 16) {
    barrier();
  } else {
    barrier();
  }
  out[thread] = 3;
}
task block void lane_gone(int *out) {
  if (warp == 1 && lane == 5) return;
  barrier();
  out[thread] = 4;
}
task block void fine(int *out) {
  __shared__ int s[128];
  s[thread] = (int)thread;
  barrier();
  out[thread] = s[127 - thread];
  barrier();
}
]]
  local rt, prog
  setup(function()
    rt = support.runtime("sim")
    prog = support.compile(rt, DIVERGE, "block_diverge.cu")
  end)
  teardown(function() rt:close() end)

  local function fine_runs()
    local out = rt:buffer("int32", 128)
    assert.is_nil(prog.fine(out):await(30))
    local got = out:read()
    for t = 0, 127 do assert.equals(127 - t, got[t + 1]) end
    out:close()
  end

  it("warps at different barriers fail the task with the lines; the runtime goes on", function()
    local out = rt:buffer("int32", 128)
    local f = prog.split(out)
    assert.equals("split: warps at different barriers: line 3 (warp 0), line 5 (warps 1 2 3)",
      support.error_of(f.await, f, 30))
    fine_runs()
    f = prog.early(out)
    assert.equals("early: warps at different barriers: line 11 (warps 0 1 3), the end of the body (warp 2)",
      support.error_of(f.await, f, 30))
    fine_runs()
    f = prog.lanes(out)
    assert.truthy(support.error_of(f.await, f, 30):find("^lanes: warps at different barriers: line 16, line 18 %(lanes of warp %d%)$"))
    fine_runs()
    f = prog.lane_gone(out)
    assert.truthy(support.error_of(f.await, f, 30):find("lanes of warp 1 diverged", 1, true))
    fine_runs()
    local s = rt:stats().tasks
    assert.equals(1, s.split.failed)
    assert.equals(1, s.early.failed)
    assert.equals(1, s.lanes.failed)
    assert.equals(1, s.lane_gone.failed)
    assert.equals(4, s.fine.completed)
    out:close()
  end)

  it("names the lines of the user's file where the warps parted", function()
    local line = debug.getinfo(1, "l").currentline
    local src = [[
task block void apart(int *out) {
  if (warp == 3) return;
  barrier();
}
]]
    local p = assert(rt:compile(src))
    local out = rt:buffer("int32", 128)
    local f = p.apart(out)
    assert.equals(("apart: warps at different barriers: line %d (warps 0 1 2), the end of the body (warp 3)")
      :format(line + 4), support.error_of(f.await, f, 30))
    out:close()
  end)

  it("in bulk, one failing instance fails the task and the others still run", function()
    local p = support.compile(rt, [[
task block void some(int *out) {
  if (index == 2 && warp == 1) return;
  barrier();
  out[index * nthreads + thread] = 1;
}
]], "block_some.cu")
    local out = rt:buffer("int32", 128 * 4)
    local f = p.some:bulk(4, out)
    assert.truthy(support.error_of(f.await, f, 30):find("the end of the body (warp 1)", 1, true))
    local got = out:read()
    for i = 0, 3 do
      for t = 0, 127 do assert.equals(i == 2 and 0 or 1, got[i * 128 + t + 1]) end
    end
    local s = rt:stats().tasks.some
    assert.same({ 1, 0, 1 }, { s.spawned, s.completed, s.failed })
    out:close()
  end)

  it("a trap in one warp's body is a fault of the runtime that names the block task", function()
    local rtf = support.runtime("sim")
    local p = support.compile(rtf, [[
task block void trapper(int *out) {
  if (warp == 3) __trap();
  barrier();
  out[thread] = 1;
}
]], "block_trap.cu")
    local out = rtf:buffer("int32", 128)
    local f = p.trapper(out)
    local err = support.error_of(f.await, f, 30)
    assert.truthy(err:find("__trap() in warp 3", 1, true), err)
    assert.truthy(err:find("running task trapper (block_trap.cu:1)", 1, true), err)
    local t0 = mw.now()
    rtf:close()
    assert.truthy(mw.now() - t0 < 5 * support.time_scale)
  end)

  it("a worker count that is not a multiple of 4: the last CTA never runs one", function()
    local rt6 = support.runtime("sim", { workers = 6 })
    local p = support.compile(rt6, RUN, "block_six.cu")
    local out = rt6:buffer("int32", 128 * 8)
    assert.is_nil(p.swap:bulk(8, out, 9):await(30))
    local got = out:read()
    for i = 0, 7 do for t = 0, 127 do assert.equals(swapped(i, t, 9), got[i * 128 + t + 1]) end end
    rt6:close()
  end)
end)

describe("block tasks' cuda image, without a GPU #slow", function()
  local function readable(path)
    local f = path and io.open(path, "rb")
    if f then f:close() end
    return f ~= nil
  end
  local function one_unit(env)
    local saved = {}
    for k, v in pairs(env) do
      saved[k] = os.getenv(k) or false
      support.setenv(k, v)
    end
    local ok, cubin, log = pcall(mw.compile_cubin, RUN, { chunkname = "block_run.cu" })
    for k, v in pairs(saved) do support.setenv(k, v or nil) end
    assert(ok, cubin)
    assert.is_string(cubin, log)
    assert.equals("\127ELF", cubin:sub(1, 4))
    return cubin
  end

  it("in one unit: linked with the device runtime, with a grid kernel for each block task", function()
    local home = os.getenv("CUDA_HOME")
    if not (readable(os.getenv("MOONWARP_CUDADEVRT")) or readable((home or "/usr/local/cuda") .. "/lib64/libcudadevrt.a")
        or readable("/usr/local/cuda/lib64/libcudadevrt.a")) then
      pending("no CUDA device runtime library (libcudadevrt.a) on this machine: block tasks build without grids")
      return
    end
    local cubin = one_unit { MOONWARP_BUILD = "one_unit" }
    assert.truthy(cubin:find("mw_grid_image\0", 1, true), "the image says it launches grids")
    assert.truthy(cubin:find("mw_grid_0\0", 1, true), "swap's grid kernel (kind 0)")
    assert.truthy(cubin:find("mw_block_area_bytes\0", 1, true))
    local plain = one_unit { MOONWARP_BUILD = "one_unit", MOONWARP_GRIDS = "0" }
    assert.truthy(plain:find("mw_grid_image\0", 1, true), "every image has the word the load reads (0 here)")
    assert.is_nil(plain:find("mw_grid_prime\0", 1, true), "MOONWARP_GRIDS=0 builds no grids")
    assert.is_nil(plain:find("mw_grid_0\0", 1, true))
  end)
end)
