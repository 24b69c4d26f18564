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
// futures whose results ride in their handles, awaited again together, then one by one
task int again(int x) {
  local future f, g;
  f = spawn(sq, x);
  await(f);
  g = spawn(sq, x + 1);
  await(g);
  await_all(f, g);
  try_await(g, f, g);
  return value(f) + value(g);
}
// a child that is not pure (it spawns and awaits) in the same pattern
task int outer(int x) {
  local future f;
  f = spawn(twice, x);
  await(f);
  return value(f) + 1;
}
// arguments with a side effect (evaluated once), a spawn over two lines, a child without
// parameters, one without a result, and a failure at the second line of the pair
task int seven() { return 7; }
task void check(int x) { if (x < 0) fail(3, "checked a negative number"); }
task int once(int n) {
  local future f;
  local int i, s;
  s = 0;
  for (i = 0; i < n;) {
    f = spawn(sq,
              i++);
    await(f);
    s += value(f);
  }
  f = spawn(seven);
  await(f);
  s += value(f);
  f = spawn(check, n - 1);
  await(f);
  return s;
}
// a pair whose await shares its line with the spawn's ';', after another await
task int lines(int x) {
  local future f, g;
  g = spawn(twice, x); await(g); f = spawn(seven)
  ; await(f);
  return value(g) + value(f);
}
]]

-- A child that ran at its spawn and ended OK carries a result that 32 bits can hold in its
-- handle, with no future slot; a wider one, or a failure, takes a slot. Either way the task and
-- the host read the same value, of every result type.
local TYPES = [[
task long id_long(long x) { return x; }
task unsigned long id_ulong(unsigned long x) { return x; }
task int id_int(int x) { return x; }
task unsigned id_uint(unsigned x) { return x; }
task char id_char(char x) { return x; }
task bool id_bool(bool x) { return x; }
task float id_float(float x) { return x; }
task double id_double(double x) { return x; }
task long via_long(long x) { local future f; f = spawn(id_long, x); await(f); return value(f); }
task unsigned long via_ulong(unsigned long x) { local future f; f = spawn(id_ulong, x); await(f); return value(f); }
task int via_int(int x) { local future f; f = spawn(id_int, x); await(f); return value(f); }
task unsigned via_uint(unsigned x) { local future f; f = spawn(id_uint, x); await(f); return value(f); }
task char via_char(char x) { local future f; f = spawn(id_char, x); await(f); return value(f); }
task bool via_bool(bool x) { local future f; f = spawn(id_bool, x); await(f); return value(f); }
task float via_float(float x) { local future f; f = spawn(id_float, x); await(f); return value(f); }
task double via_double(double x) { local future f; f = spawn(id_double, x); await(f); return value(f); }
// the same future read once more: handed to a task, awaited with another, cancelled, looked at
task double peek(future f) { await(f); return (double)value(f); }
task double handed(double x) {
  local future f, g, h;
  f = spawn(id_double, x);
  await(f);
  g = spawn(peek, f);
  h = spawn(id_double, x + 1.0);
  await_all(g, f, h);
  if (cancel(f) || failed(f) || cancelled(f) || fail_code(f) != 0) return -1.0;
  release(f);
  return value(g) + value(h);
}
// n spawns with a result of each width, on a runtime of few future slots
task long churn(int n) {
  local future f;
  local int i;
  local long s;
  s = 0;
  for (i = 0; i < n; ++i) {
    f = spawn(id_long, (i & 1) ? (long)i : (long)i << 40 | 7);
    await(f);
    s += value(f) & 0xffff;
    release(f);
  }
  return s;
}
]]

-- Each spec below runs on the default build, where the pair is compiled as one statement so
-- that a child that ran at its spawn skips the await (generate.c, put_fused_pair), and on
-- MW_NO_DIRECT_FUSE, the pair as written (a variant): setup compiles with
-- MOONWARP_DEVICE_DEFINE set to it.
local function compiled(backend, define, src, name, opts)
  local old = os.getenv("MOONWARP_DEVICE_DEFINE")
  if define then support.setenv("MOONWARP_DEVICE_DEFINE", define) end
  local ok, rt, prog = pcall(function()
    local r = support.runtime(backend, opts)
    return r, support.compile(r, src, name)
  end)
  support.setenv("MOONWARP_DEVICE_DEFINE", old)
  assert(ok, rt)
  return rt, prog
end

for _, define in ipairs { false, "MW_NO_DIRECT_FUSE" } do
local build = define and " (" .. define .. ")" or ""
support.each_backend(function(backend)
  describe("a spawn awaited by the next statement" .. build, function()
    local rt, prog
    setup(function() rt, prog = compiled(backend, define, SOURCE, "spawn_now.cu") end)
    teardown(function() rt:close() end)

    it("evaluates a spawn's arguments once, over lines, of any count, with or without a result", function()
      for n = 1, 40 do
        local s = 7
        for i = 0, n - 1 do s = s + i * i end
        assert.equals(s, prog.once(n):await(30), n)
      end
      for x = 0, 5 do assert.equals(2 * x * x + 7, prog.lines(x):await(30), x) end
      local f = prog.once(0)
      local err = support.error_of(f.await, f, 30)
      assert.truthy(tostring(err):find("checked a negative number", 1, true), err)
      assert.equals(0, rt:stats().in_flight)
    end)

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

    it("lets a task await its finished children again, several at once", function()
      for x = 0, 20 do assert.equals(x * x + (x + 1) * (x + 1), prog.again(x):await(30)) end
      assert.equals(0, rt:stats().in_flight)
    end)

    it("runs a child that spawns and awaits itself the general way", function()
      assert.equals(2 * 81 + 1, prog.outer(9):await(30))
      for i = 1, 50 do assert.equals(2 * i * i + 1, prog.outer(i):await(30)) end
    end)
  end)
end)


support.each_backend(function(backend)
  describe("a child that ran at its spawn" .. build, function()
    local rt, prog
    setup(function() rt, prog = compiled(backend, define, TYPES, "inline_results.cu", { capacity = 64 }) end)
    teardown(function() rt:close() end)

    it("gives its result exactly, narrow or wide, of every type", function()
      local cases = {
        long = { 0LL, 5LL, -5LL, 2147483647LL, -2147483648LL, 2147483648LL, -2147483649LL,
                 2LL ^ 40, -(2LL ^ 40), 2LL ^ 40 + 1, 0x7fffffffffffffffLL, -0x8000000000000000LL },
        ulong = { 0ULL, 4294967295ULL, 4294967296ULL, 0xffffffffffffffffULL, 0x8000000000000000ULL,
                  0xfffffffe00000001ULL },
        int = { 0, 1, -1, 2147483647, -2147483648 },
        uint = { 0, 1, 2147483648, 4294967295 },
        char = { 0, 100, -3, -128 },
        bool = { true, false },
        float = { 0, -1.5, 3.25, -0.0, 1 / 0 },
        double = { 0, 1.0, 0.5, -0.0, 0.1, -2.75, 1e300, -1 / 0, 2 ^ 40 + 0.125 },
      }
      for ty, values in pairs(cases) do
        for _, v in ipairs(values) do
          local got = prog["via_" .. ty](v):await(30)
          assert.equals(v, got, ty .. " " .. tostring(v))
          if ty == "double" or ty == "float" then -- the sign of a zero too
            assert.equals(1 / v, 1 / got, ty .. " " .. tostring(v))
          end
        end
      end
      assert.is_true(prog.via_double(0 / 0):await(30) ~= prog.via_double(0 / 0):await(30)) -- NaN
    end)

    it("is complete and OK to every reader, and can be handed on", function()
      assert.equals(2.5 + 3.5, prog.handed(2.5):await(30))
      assert.equals(0.1 + 1.1, prog.handed(0.1):await(30)) -- a wide result: in a slot
      assert.equals(0, rt:stats().in_flight)
    end)

    it("leaves no future slot behind, with narrow and wide results", function()
      local n = 20000
      local s = 0
      for i = 0, n - 1 do s = s + (i % 2 == 1 and i % 65536 or 7) end
      local before = rt:stats().tasks.id_long
      assert.equals(s, prog.churn(n):await(60 * support.time_scale)) -- 20,000 spawns: minutes under racecheck
      local after = rt:stats().tasks.id_long
      assert.equals(n, after.spawned - before.spawned)
      assert.equals(n, after.completed - before.completed)
      assert.equals(0, rt:stats().in_flight)
    end)
  end)
end)

end

-- A bulk task that the next statement awaits: its spawner runs up to four instances itself,
-- more go to the workers; every instance runs once either way, and the first failure is the
-- task's.
local BULK = [[
task void mark(int *x, int n, int bad) {
  if (lane == 0) x[index] += (int)index + 1;
  if ((int)index == bad) fail(11, "instance failed on purpose");
}
task long marks(int *x, int n, int bad) {
  local future f;
  local long s;
  local int i;
  f = spawn_bulk(mark, n, x, n, bad);
  try_await(f);
  s = 0;
  for (i = 0; i < n; ++i) s = s * 10 + x[i];
  if (failed(f)) return -(s * 100 + fail_code(f));
  return s;
}
task long strict_marks(int *x, int n, int bad) {
  local future f;
  f = spawn_bulk(mark, n, x, n, bad);
  await(f);
  return 1;
}
]]

support.each_backend(function(backend)
  describe("a bulk task awaited by the next statement", function()
    local rt, prog
    setup(function()
      rt = support.runtime(backend)
      prog = support.compile(rt, BULK, "bulk_now.cu")
    end)
    teardown(function() rt:close() end)

    local function zeros(n)
      local x = rt:buffer("int32", math.max(n, 1))
      local t = {}
      for i = 1, math.max(n, 1) do t[i] = 0 end
      x:write(t)
      return x
    end
    local function digits(n)
      local s = 0
      for i = 1, n do s = s * 10 + i end
      return s
    end

    it("runs each instance once, few or many", function()
      for n = 0, 7 do
        local x = zeros(n)
        local before = rt:stats().tasks.mark
        assert.equals(digits(n), prog.marks(x, n, -1):await(30), n)
        local after = rt:stats().tasks.mark
        assert.equals(1, after.spawned - before.spawned, n)
        assert.equals(1, after.completed - before.completed, n)
        x:close()
      end
    end)

    it("times its instances, and rt:stats() says what one took", function()
      local x = zeros(5)
      assert.equals(digits(5), prog.marks(x, 5, -1):await(30))
      x:close()
      local tasks = rt:stats().tasks
      assert.equals("number", type(tasks.mark.instance_cycles))
      assert.is_true(tasks.mark.instance_cycles > 0)
      assert.is_nil(tasks.marks.instance_cycles) -- not a bulk task: never timed
    end)

    it("runs the instances after a failed one, and fails with the first failure", function()
      for n = 1, 6 do
        for bad = 0, n - 1 do
          local x = zeros(n)
          local before = rt:stats().tasks.mark
          assert.equals(-(digits(n) * 100 + 11), prog.marks(x, n, bad):await(30), n .. " " .. bad)
          assert.equals(1, rt:stats().tasks.mark.failed - before.failed)
          x:close()
        end
      end
      local x = zeros(3)
      local f = prog.strict_marks(x, 3, 1)
      local err = support.error_of(f.await, f, 30)
      assert.truthy(tostring(err):find("mark: instance failed on purpose", 1, true), err)
      x:close()
      assert.equals(0, rt:stats().in_flight)
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
task void v(int x) { if (x < 0) fail(1, "never"); }
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
  a = spawn_bulk(v, 2, 9);
  await(a);
  a = spawn_bulk(v, 2, 10);
  x++;
  await(a);
  return value(b);
}
]])
    local marked = {}
    for n in text:gmatch("_MWsn%(k, (%d)%)") do marked[#marked + 1] = tonumber(n) end
    assert.same({ 1, 2 }, marked)
    for n = 3, 8 do assert.truthy(text:find("spawn(k, " .. n .. ")", 1, true), n) end
    assert.truthy(text:find("_MWsn_bulk(v, 2, 9)", 1, true))
    assert.truthy(text:find("  a = spawn_bulk(v, 2, 10);", 1, true))
  end)
end)
