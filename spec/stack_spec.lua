-- stack_spec.lua - the executor's stack: a spawn of a self-contained task runs as a plain call
-- when no worker is idle (elided calls), so such calls nest on the thread's stack; past the
-- runtime's stack_bytes a spawn fails with a capacity error naming the option, the task's
-- spawner sees it, and the runtime goes on. One worker, so that no worker is ever idle.
local mw = require "moonwarp"
local support = require "spec.support"

local DEEP = support.DOWN

describe("the runtime option stack_bytes", function()
  it("is refused outside 4096..524288, naming the option", function()
    for _, bad in ipairs { 100, 4095, 524289, -1, 1.5 } do
      local err = support.error_of(mw.runtime, { backend = "sim", stack_bytes = bad })
      assert.truthy(err and err:find("stack_bytes", 1, true), tostring(err))
    end
    local err = support.error_of(mw.runtime, { backend = "sim", stack_bytes = "big" })
    assert.truthy(err and err:find("option 'stack_bytes' must be a number", 1, true), tostring(err))
  end)
end)

support.each_backend(function(backend)
  describe("spawns nested in place", function()
    it("run deep enough for ordinary recursion, and fail past the stack with its option named", function()
      local rt = support.runtime(backend, { workers = 1 })
      local p = support.compile(rt, DEEP, "deep.cu")
      assert.equals(30LL, p.down(30):await(30))
      -- far past any stack: the deepest spawn fails, and so does every level above it
      local err = support.error_of(function() return p.down(100000):await(60) end)
      assert.truthy(err and err:find("spawns nested too deep for the executor's stack", 1, true), tostring(err))
      assert.truthy(err:find("stack_bytes", 1, true), err)
      assert.truthy(err:find("down", 1, true), err)
      -- the runtime goes on, and the counts add up: every level spawned ended
      assert.equals(12LL, p.down(12):await(30))
      support.wait_for("the counters to settle", function()
        local st = rt:stats()
        return st.spawned == st.completed + st.failed + st.cancelled
      end)
      local st = rt:stats()
      assert.is_true(st.failed >= 2, "the deepest spawn and the levels above it fail: " .. st.failed)
      rt:close()
    end)
  end)
end)

-- A void task runs in place as a task with a result does: its spawns nest (so a depth past the
-- stack fails as down's does), its side effects all happen, and its counts add up.
local VOID = [[
task void vdown(int *hits, int n) {
  local future f;
  if (lane == 0) atomicAdd(hits, 1);
  if (n == 0) return;
  f = spawn(vdown, hits, n - 1);
  await(f);
}
task void vtree(int *hits, int d) {
  local future a, b;
  if (lane == 0) atomicAdd(hits, 1);
  if (d == 0) return;
  a = spawn(vtree, hits, d - 1);
  b = spawn(vtree, hits, d - 1);
  await_all(a, b);
}
]]

support.each_backend(function(backend)
  describe("a void task's spawns run in place", function()
    it("nest, do all their work and count as tasks", function()
      local rt = support.runtime(backend, { workers = 1 })
      local p = support.compile(rt, VOID, "void.cu")
      local hits = rt:buffer("int", 1)
      hits:write { 0 }
      p.vtree(hits, 12):await(60)
      assert.equals(8191, hits:read()[1]) -- 2^13 - 1 calls, each once
      hits:write { 0 }
      local err = support.error_of(function() return p.vdown(hits, 100000):await(60) end)
      assert.truthy(err and err:find("spawns nested too deep for the executor's stack", 1, true), tostring(err))
      hits:write { 0 }
      p.vdown(hits, 12):await(30)
      assert.equals(13, hits:read()[1])
      support.wait_for("the counters to settle", function()
        local st = rt:stats()
        return st.spawned == st.completed + st.failed + st.cancelled
      end)
      assert.is_true(rt:stats().completed >= 8191 + 13)
      rt:close()
    end)
  end)
end)

-- What runs in place runs the task's fast body (nvrtc/generate.c, put_task_fast: the same text
-- compiled a second time for elided calls): its locals, arrays too, start at zero as a frame's
-- do; a failure deep in a subtree run in place reaches the await above it with its message; and
-- try_await leaves it to the task with its code, beside a sibling's value.
local FAST = [[
task int tally(int n) {
  local int parts[3];
  local long seen;
  local future a, b;
  if (parts[0] != 0 || parts[2] != 0 || seen != 0) return -1000000;
  parts[0] = n;
  if (n < 2) return parts[0];
  a = spawn(tally, n - 1);
  b = spawn(tally, n - 2);
  await_all(a, b);
  seen = value(a);
  parts[2] = (int)seen + (int)value(b);
  return parts[2];
}
task int fails_at(int n, int k) {
  local future a, b;
  if (n == k) fail(7, "the level at k");
  if (n < 2) return n;
  a = spawn(fails_at, n - 1, k);
  b = spawn(fails_at, n - 2, k);
  await_all(a, b);
  return value(a) + value(b);
}
task int tolerant(int n, int k) {
  local future a, b;
  a = spawn(fails_at, n, k);
  b = spawn(tally, n);
  try_await(a, b);
  return failed(a) ? fail_code(a) * 1000 + (int)value(b) : -1;
}
]]

support.each_backend(function(backend)
  describe("a spawn run in place", function()
    it("keeps a task's meaning: zeroed locals, failures with their message, try_await", function()
      local rt = support.runtime(backend, { workers = 1 })
      local p = support.compile(rt, FAST, "fast.cu")
      assert.equals(987, p.tally(16):await(60))
      local err = support.error_of(function() return p.fails_at(16, 3):await(60) end)
      assert.truthy(err and err:find("the level at k", 1, true), tostring(err))
      assert.equals(7144, p.tolerant(12, 4):await(60)) -- code 7, fib(12) = 144
      assert.equals(-1, p.tolerant(12, 40):await(60)) -- nothing failed
      assert.equals(987, p.tally(16):await(60)) -- and the runtime goes on
      support.wait_for("the counters to settle", function()
        local st = rt:stats()
        return st.spawned == st.completed + st.failed + st.cancelled
      end)
      assert.is_true(rt:stats().failed > 0)
      rt:close()
    end)
  end)
end)

-- The budget is the option's on cuda (sim's lanes use 96 KiB whatever it says): a depth that a
-- 4 KiB stack cannot take, a 64 KiB one can.
describe("cuda #gpu", function()
  local ok, reason = support.cuda_available()
  if not ok then
    pending("stack_bytes on cuda: skipped, no GPU: " .. reason)
    return
  end
  it("stack_bytes sets how deep spawns nest in place", function()
    local small = support.runtime("cuda", { workers = 1, stack_bytes = 4096 })
    local p = support.compile(small, DEEP, "deep.cu")
    -- a spawn is elided only once the worker's periodic work (every 64 spawns) has seen no
    -- worker idle: some hundreds of spawns first, whether they pass or meet the bound
    pcall(function() return p.down(200):await(60) end)
    local err = support.error_of(function() return p.down(100):await(60) end)
    assert.truthy(err and err:find("spawns nested too deep", 1, true), tostring(err))
    small:close()
    local big = support.runtime("cuda", { workers = 1, stack_bytes = 65536 })
    p = support.compile(big, DEEP, "deep.cu")
    assert.equals(200LL, p.down(200):await(60))
    assert.equals(100LL, p.down(100):await(60))
    big:close()
  end)
end)
