-- spawn_now_spec.lua - a spawn that the next statement awaits ('f = spawn(t, ...);' then
-- 'await(f);' or 'try_await(f);'): the compiler marks it, and a pure child then runs at once on
-- the spawner's warp as a call. What the task sees must not change: values, failures, counts,
-- the future afterwards (passed on, read, released), and children that are not pure.
local mw = require "moonwarp"
local support = require "spec.support"

local SOURCE = [[
task int sq(int x) {
  if (x < 0) fail(5, "no square of a negative number");
  return x * x;
}
task int twice(int x) {
  local future f;
  f = spawn(sq, x);
  await(f);
  return 2 * value(f);
}
task int read_it(future f) { return value(f) + 1; }
// sq(i) awaited at once, n times; the last future is handed on after its await
task long run(int n) {
  local future f, g;
  local int i;
  local long s;
  s = 0;
  for (i = 0; i < n; ++i) {
    if (i > 0) release(f);
    f = spawn(sq, i);
    await(f);
    s += value(f);
  }
  g = spawn(read_it, f);
  await(g);
  return s * 1000 + value(g);
}
// failures: await fails the task with the child's message; try_await leaves it to the task
task int strict(int x) {
  local future f;
  f = spawn(sq, x);
  await(f);
  return value(f);
}
task int tolerant(int x) {
  local future f;
  f = spawn(sq, x);
  try_await(f);
  if (failed(f)) return fail_code(f) * 100 + (cancelled(f) ? 1 : 0);
  return value(f);
}
// a child that is not pure (it spawns and awaits) in the same pattern
task int outer(int x) {
  local future f;
  f = spawn(twice, x);
  await(f);
  return value(f) + 1;
}
]]

support.each_backend(function(backend)
  describe("a spawn awaited by the next statement", function()
    local rt, prog
    setup(function()
      rt = support.runtime(backend)
      prog = support.compile(rt, SOURCE, "spawn_now.cu")
    end)
    teardown(function() rt:close() end)

    it("gives each child's value, and its future stays good after the await", function()
      local before = rt:stats().tasks.sq
      local n = 500
      local s = 0
      for i = 0, n - 1 do s = s + i * i end
      local last = (n - 1) * (n - 1)
      assert.equals(s * 1000 + last + 1, prog.run(n):await(30))
      local after = rt:stats().tasks.sq
      assert.equals(n, after.spawned - before.spawned)
      assert.equals(n, after.completed - before.completed)
      assert.equals(0, rt:stats().in_flight)
    end)

    it("fails the awaiting task with the child's failure, or leaves it to try_await", function()
      assert.equals(49, prog.strict(7):await(30))
      local f = prog.strict(-1)
      local err = support.error_of(f.await, f, 30)
      assert.truthy(tostring(err):find("no square of a negative number", 1, true), err)
      assert.equals(36, prog.tolerant(6):await(30))
      assert.equals(500, prog.tolerant(-3):await(30))
      local st = rt:stats()
      assert.equals(0, st.in_flight)
    end)

    it("runs a child that spawns and awaits itself the general way", function()
      assert.equals(2 * 81 + 1, prog.outer(9):await(30))
      for i = 1, 50 do assert.equals(2 * i * i + 1, prog.outer(i):await(30)) end
    end)
  end)
end)

describe("the compiler #sim", function()
  -- which spawns it compiles as spawn-now: the generated source names them _MWsn
  local dir
  setup(function()
    dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. support.shell_quote(dir)) == 0)
  end)
  teardown(function() os.execute("rm -rf " .. support.shell_quote(dir)) end)

  local function generated(src)
    local old = os.getenv("MOONWARP_DUMP_DIR")
    support.setenv("MOONWARP_DUMP_DIR", dir)
    local rt = support.runtime("sim")
    local ok, err = pcall(support.compile, rt, src, "marks.cu")
    rt:close()
    support.setenv("MOONWARP_DUMP_DIR", old)
    assert(ok, err)
    -- the generated file that holds the program's bodies (one unit, or the program's part)
    local p = io.popen("ls " .. support.shell_quote(dir) .. "/*.cpp")
    for path in p:lines() do
      local f = assert(io.open(path))
      local text = f:read("*a")
      f:close()
      if text:find("spawn(k, 3)", 1, true) then
        p:close()
        return text
      end
    end
    p:close()
    error("no generated source with the program's bodies in " .. dir)
  end

  it("marks a spawn that the next statement awaits, and no other", function()
    local text = generated([[
task int k(int x) { return x; }
task int t(int x) {
  local future a, b;
  a = spawn(k, 1);
  await(a);
  a = spawn(k, 2);
  try_await(a);
  b = spawn(k, 3);
  x++;
  await(b);
  if (x) b = spawn(k, 4);
  await(b);
  a = spawn(k, 5);
  await(b);
  a = spawn(k, 6); b = spawn(k, 7);
  await_all(a, b);
  { a = spawn(k, 8); } await(a);
  return value(a);
}
]])
    local marked = {}
    for n in text:gmatch("_MWsn%(k, (%d)%)") do marked[#marked + 1] = tonumber(n) end
    assert.same({ 1, 2 }, marked)
    for n = 3, 8 do assert.truthy(text:find("spawn(k, " .. n .. ")", 1, true), n) end
  end)
end)
