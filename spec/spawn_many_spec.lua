-- spawn_many_spec.lua - task:spawn_many(n, args [, {futures = false}]): many spawns of one task in
-- one call, with their futures or fire-and-forget.
local mw = require "moonwarp"
local support = require "spec.support"

local SOURCE = [[
task int sq(int x) { return x * x; }
task double axpy(double a, int x, double y) { return a * x + y; }
task int one() { return 1; }
task long sum(future a, future b) {
  await_all(a, b);
  return (long)value(a) + (long)value(b);
}
]]

support.each_backend(function(backend)
  local rt, prog
  setup(function()
    rt = support.runtime(backend)
    prog = support.compile(rt, SOURCE, "spawn_many.cu")
  end)
  teardown(function() rt:close() end)

  it("takes the arguments of spawn i from args(i), and returns the futures in order", function()
    local fs = prog.axpy:spawn_many(100, function(i) return 0.5, i, 1 end)
    assert.equals(100, #fs)
    for i = 1, 100 do assert.equals(0.5 * i + 1, fs[i]:await()) end
    assert.equals(fs[1], fs[1]) -- ordinary futures
    assert.truthy(tostring(fs[100]):find("^moonwarp.future<axpy#%d+ ready>$"))
  end)

  it("takes them from a table of argument tables, or of bare values for one parameter", function()
    local fs = prog.axpy:spawn_many(3, { { 2, 1, 0 }, { 2, 2, 0.5 }, { 1, 3, 1 } })
    assert.same({ 2, 4.5, 4 }, { mw.join(fs[1], fs[2], fs[3]) })
    local sq = prog.sq:spawn_many(4, { 1, 2, { 3 }, 4 })
    assert.same({ 1, 4, 9, 16 }, { mw.join(unpack(sq)) })
  end)

  it("needs no arguments for a task without parameters; n = 0 spawns nothing", function()
    local fs = prog.one:spawn_many(5)
    assert.equals(5, #fs)
    assert.same({ 1, 1, 1, 1, 1 }, { mw.join(unpack(fs)) })
    assert.same({}, prog.sq:spawn_many(0, {}))
  end)

  it("passes futures as arguments, held as a single spawn holds them", function()
    local a, b = prog.sq(3), prog.sq(4)
    local fs = prog.sum:spawn_many(10, function() return a, b end)
    a:close()
    b:close()
    for i = 1, 10 do assert.equals(25, fs[i]:await()) end
  end)

  it("fire-and-forget: futures = false returns n, and every task completes and is counted", function()
    local before = rt:stats()
    local n = 5000 -- more than the inbox holds at once
    assert.equals(n, prog.sq:spawn_many(n, function(i) return i % 1000 end, { futures = false }))
    support.wait_for("the fire-and-forget tasks", function() -- this task's own count: tasks
      return rt:stats().tasks.sq.completed - before.tasks.sq.completed >= n -- of other tests may end meanwhile
    end)
    local s = rt:stats()
    assert.equals(n, s.host_spawned - before.host_spawned)
    assert.equals(n, s.tasks.sq.completed - before.tasks.sq.completed)
    assert.is_true(s.host_futures_held <= before.host_futures_held) -- none held (they would be 5000)
  end)

  it("checks every argument before spawning anything, naming the spawn", function()
    local before = rt:stats().host_spawned
    local cases = {
      { function() return prog.sq:spawn_many(3, { 1, "x", 3 }) end,
        "bad argument #1 to 'spawn_many[2]' (number expected, got string)" },
      { function() return prog.axpy:spawn_many(2, function(i) return 1, i + 0.5, 0 end) end,
        "bad argument #2 to 'spawn_many[1]' (number has no integer representation for int32)" },
      { function() return prog.axpy:spawn_many(2, { { 1, 2, 3 }, { 1, 2 } }) end,
        "bad argument #3 to 'spawn_many[2]' (number expected, got nil)" },
      { function() return prog.axpy:spawn_many(2, { { 1, 2, 3, 4 } }) end,
        "wrong number of arguments to 'spawn_many[1]' (expected 3, got more)" },
      { function() return prog.axpy:spawn_many(2, { 7 }) end,
        "bad argument #2 to 'spawn_many' (element 1: a table of 3 arguments expected, got number)" },
      { function() return prog.sq:spawn_many(2) end,
        "bad argument #2 to 'spawn_many' (task 'sq' takes 1 argument: a table or a function expected, got nil)" },
      { function() return prog.sq:spawn_many(2, "x") end,
        "bad argument #2 to 'spawn_many' (table or function expected, got string)" },
      { function() return prog.sq:spawn_many(-1, {}) end,
        "bad argument #1 to 'spawn_many' (spawn count must be an integer in 0..16777216, got -1)" },
      { function() return prog.sq:spawn_many(1.5, {}) end, "spawn count must be an integer" },
      { function() return prog.sq:spawn_many("3", {}) end,
        "bad argument #1 to 'spawn_many' (number expected, got string)" },
      { function() return prog.sq:spawn_many(1, { 1 }, { future = false }) end,
        "bad argument #3 to 'spawn_many' (unknown option (options: futures))" },
      { function() return prog.sq:spawn_many(1, { 1 }, { futures = 0 }) end,
        "option 'futures' must be a boolean" },
      { function() return prog.sq:spawn_many(1, { 1 }, 5) end,
        "bad argument #3 to 'spawn_many' (table expected, got number)" },
    }
    for _, c in ipairs(cases) do
      local err = support.error_of(c[1])
      assert.truthy(err and err:find(c[2], 1, true), tostring(err) .. "\nwanted: " .. c[2])
    end
    assert.equals(before, rt:stats().host_spawned)
  end)
end)

describe("spawn_many at capacity #sim", function()
  it("waits spawn_timeout for host futures, then returns nil, message, code and what it spawned", function()
    local rt = support.runtime("sim", { host_futures = 4, spawn_timeout = 0.2 })
    local prog = support.compile(rt, SOURCE, "spawn_many_cap.cu")
    local fs, err, code, made = prog.sq:spawn_many(6, { 1, 2, 3, 4, 5, 6 })
    assert.is_nil(fs)
    assert.equals("ECAPACITY", code)
    assert.truthy(err:find("host futures are in use", 1, true), err)
    assert.equals(4, #made) -- the four held futures
    assert.same({ 1, 4, 9, 16 }, { mw.join(unpack(made)) })
    -- fire-and-forget spawns let go of their host futures: many more than 4 go through
    for _, f in ipairs(made) do f:close() end
    assert.equals(100, prog.sq:spawn_many(100, function(i) return i end, { futures = false }))
    support.wait_for("the spawns", function() return rt:stats().host_completed >= 104 end)
    rt:close()
  end)
end)

-- The executor's variants of the host channel (bench/NOTES.md), built on sim: a stream of
-- fire-and-forget spawns from one spawn_many, every one completed once (bench/profile_chain.lua
-- asserts it). MW_TAKE_PEEK=0 reads every cell of a take before it claims them (the default
-- claims a full batch first), MW_GQ_POP_RUN=1u pops one cell of the global queue at a time
-- (the default pops runs and hands them to the CTA's waiting warps).
describe("the host channel's other builds #sim", function()
  local paths = support.lua_paths()
  for _, define in ipairs { "MW_TAKE_PEEK=0", "MW_GQ_POP_RUN=1u" } do
    it("completes every spawn of a stream once with " .. define, function()
      -- bounded: a spawn lost would keep the script waiting for its count (status 124)
      local status, out = support.run(paths .. "MOONWARP_DEVICE_DEFINE=" .. define
        .. " timeout 300 luajit bench/profile_chain.lua sim 20000 8 stream")
      assert.equals(0, status, out)
      assert.truthy(out:find("20000 host spawns in a stream in", 1, true), out)
    end)
  end
end)
