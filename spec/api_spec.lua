-- api_spec.lua - the Lua API end to end, on every backend: compile, spawn, await, join/any,
-- buffers, argument checking, closed runtimes and compile errors on the user's own lines.
local mw = require "moonwarp"
local support = require "spec.support"

local SOURCE = support.FIB .. [[
task bool is_even(int x) { return x % 2 == 0; }
task char next_char(char c) { return c + 1; }
task int8_t neg8(int8_t x) { return -x; }
task short neg16(short x) { return -x; }
task uint16_t inc16(uint16_t x) { return x + 1; }
task int add(int a, int b) { return a + b; }
task unsigned int inc32(unsigned int x) { return x + 1u; }
task long long twice64(long long x) { return x * 2; }
task uint64_t inc64(uint64_t x) { return x + 1; }
task size_t size_of(size_t x) { return x; }
task float half(float x) { return x / 2.0f; }
task double third(double x) { return x / 3.0; }
task void nothing(int x) { (void)x; }
task int boom(int x) {
  if (x > 0) fail(7, "went off");
  return x;
}
task long plus_one(future f) {
  await(f);
  return value(f) + 1;
}
task int wait_flag(int *flag) {
  while (*(volatile int *)flag == 0) {
  }
  return 1;
}
task void iota(int *x, int n) {
  for (int i = lane; i < n; i += 32) x[i] = i * 3;
}
task double sum(double *x, int n) {
  double s = 0;
  for (int i = 0; i < n; i++) s += x[i];
  return s;
}
task void fill(float *x, float v, int n) {
  int i = index * 32 + lane;
  if (i < n) x[i] = v;
}
task void scale(float *x, float s, int n) {
  int i = index * 32 + lane;
  if (i < n) x[i] *= s;
}
task int takes_all(bool b, uint8_t u8, int16_t i16, float f, double d, int64_t i64, float *p) {
  (void)p;
  return (b ? 1 : 0) + u8 + i16 + (int)f + (int)d + (int)i64;
}
]]

local SMALL_SOURCE = "task int add(int a, int b) { return a + b; }\n"

local BAD_SOURCE = "task int good(int x) { return x; }\n" .. "\n"
  .. "task int bad(int x) { return x +; }\n"

support.each_backend(function(backend)
  local rt, prog

  local function open()
    rt = support.runtime(backend)
    prog = support.compile(rt, SOURCE, "api_tasks.cu")
  end

  setup(open)

  -- A test that breaks the runtime (a device fault) reports its own failure; the next tests
  -- get a fresh runtime rather than failing for the same reason.
  local lent = false
  before_each(function()
    if lent or rt.faulted then
      rt:close()
      open()
      lent = false
    end
  end)

  -- A test that opens a runtime of its own: on cuda a process runs one executor per device,
  -- so the shared runtime is closed first (and reopened for the next test).
  local function own_runtime()
    if backend == "cuda" then
      rt:close()
      lent = true
    end
  end

  teardown(function()
    if rt then rt:close() end
  end)

  it("opens a runtime of the requested backend", function()
    assert.equals(backend, rt.backend)
    assert.is_false(rt.faulted)
    assert.matches("^moonwarp%.runtime<" .. backend .. " ", tostring(rt))
  end)

  describe("results", function()
    -- task, arguments, expected value
    local rows = {
      { "fib", { 20 }, 6765 },
      { "is_even", { 4 }, true },
      { "is_even", { 3 }, false },
      { "next_char", { 64 }, 65 },
      { "neg8", { -127 }, 127 },
      { "neg16", { 1234 }, -1234 },
      { "inc16", { 65534 }, 65535 },
      { "add", { 2, -5 }, -3 },
      { "inc32", { 4294967294 }, 4294967295 },
      { "twice64", { 2 ^ 51 + 1 }, 2 ^ 52 + 2 },
      { "twice64", { -(2 ^ 40) }, -(2 ^ 41) },
      { "inc64", { 2 ^ 53 - 2 }, 2 ^ 53 - 1 },
      { "size_of", { 123456789 }, 123456789 },
      { "half", { 3 }, 1.5 },
      { "third", { 1 }, 1 / 3 },
    }
    for _, row in ipairs(rows) do
      local name, args, expected = row[1], row[2], row[3]
      it(string.format("%s(%s) returns %s", name, table.concat(args, ", "), tostring(expected)),
        function()
          local f = prog[name](unpack(args))
          local v = f:await()
          assert.equals(type(expected), type(v))
          assert.equals(expected, v)
        end)
    end

    it("returns nil for a void task", function()
      local f = prog.nothing(1)
      assert.equals(1, select("#", f:await()))
      assert.is_nil(f:await())
      assert.equals("ready", f:state())
    end)

    it("marshals every parameter type", function()
      local buf = rt:buffer("float", 4)
      local v = prog.takes_all(true, 200, -300, 2.5, 10.75, 1000, buf):await()
      assert.equals(1 + 200 - 300 + 2 + 10 + 1000, v)
      buf:close()
    end)

    it("passes a future to a future parameter", function()
      assert.equals(56, prog.plus_one(prog.fib(10)):await())
    end)

    describe("64-bit integers as LuaJIT cdata", function()
      local ffi = require "ffi"
      -- task, the argument, the result expected (a cdata result is compared as a cdata)
      local rows = {
        { "twice64", 5LL, 10 },                                      -- exact as a number
        { "twice64", 2LL ^ 53 + 1, 2LL ^ 54 + 2 },                   -- beyond 2^53: int64_t
        { "twice64", -(2LL ^ 60), -(2LL ^ 61) },
        { "inc64", 0xfffffffffffffffeULL, 0xffffffffffffffffULL },   -- uint64_t, all 64 bits
        { "inc32", 41ULL, 42 },                                      -- narrower parameters too
        { "neg8", -5LL, 5 },
      }
      for _, row in ipairs(rows) do
        it(("%s(%s) returns %s"):format(row[1], tostring(row[2]), tostring(row[3])), function()
          local v = prog[row[1]](row[2]):await()
          if type(row[3]) == "number" then
            assert.equals("number", type(v))
            assert.equals(row[3], v)
          else
            assert.is_true(ffi.istype(ffi.typeof(row[3]), v), tostring(v))
            assert.is_true(v == row[3], tostring(v))
          end
        end)
      end

      it("refuses a cdata out of the parameter's range, naming it", function()
        assert.equals("bad argument #1 to 'neg8' (value out of range for int8)",
          support.error_of(prog.neg8, 200LL))
        assert.equals("bad argument #1 to 'inc32' (value out of range for uint32)",
          support.error_of(prog.inc32, -1LL))
        assert.equals("bad argument #1 to 'twice64' (value out of range for int64)",
          support.error_of(prog.twice64, 0xffffffffffffffffULL))
        assert.truthy(support.error_of(prog.twice64, ffi.new("double", 1)):find("number expected", 1, true))
      end)
    end)

    it("returns the cached result when awaited again", function()
      local f = prog.fib(15)
      assert.equals(610, f:await())
      assert.equals(610, f:await())
      assert.is_true(f:done())
    end)
  end)

  describe("failures", function()
    it("raises the task's failure message from await", function()
      local f = prog.boom(1)
      local err = support.error_of(f.await, f)
      assert.is_string(err)
      assert.truthy(err:find("boom: went off", 1, true), err)
      assert.equals("failed", f:state())
      assert.is_true(f:done())
    end)

    it("raises the same failure when awaited again", function()
      local f = prog.boom(2)
      local first = support.error_of(f.await, f)
      local second = support.error_of(f.await, f)
      assert.is_string(first)
      assert.equals(first, second)
    end)

    it("propagates a child's failure to a task awaiting it", function()
      local err = support.error_of(function() return prog.plus_one(prog.boom(1)):await() end)
      assert.is_string(err)
      assert.truthy(err:find("went off", 1, true), err)
    end)

    it("mw.join waits for all, then raises the first failure", function()
      local slow = prog.fib(18)
      local err = support.error_of(mw.join, prog.add(1, 2), prog.boom(3), slow)
      assert.is_string(err)
      assert.truthy(err:find("went off", 1, true), err)
      assert.is_true(slow:done())
    end)
  end)

  describe("waiting", function()
    it("f:done() is false while the task runs and true once it finished", function()
      local flag = rt:buffer("int", 1)
      flag:write { 0 }
      local f = prog.wait_flag(flag)
      assert.is_false(f:done())
      assert.equals("pending", f:state())
      flag:write { 1 }
      assert.equals(1, f:await())
      assert.is_true(f:done())
      assert.equals("ready", f:state())
      flag:close()
    end)

    it("await with a timeout returns nil, 'timed out', 'ETIMEDOUT', and can be retried", function()
      local flag = rt:buffer("int", 1)
      flag:write { 0 }
      local f = prog.wait_flag(flag)
      local v, err, code = f:await(0.05)
      assert.is_nil(v)
      assert.equals("timed out", err)
      assert.equals("ETIMEDOUT", code)
      flag:write { 1 }
      assert.equals(1, f:await(30))
      flag:close()
    end)

    it("mw.join returns all values in argument order", function()
      local a, b, c, d = mw.join(prog.fib(12), prog.fib(5), prog.nothing(0), prog.is_even(2))
      assert.equals(144, a)
      assert.equals(5, b)
      assert.is_nil(c)
      assert.is_true(d)
      assert.equals(4, select("#", mw.join(prog.fib(1), prog.fib(2), prog.nothing(0), prog.fib(3))))
    end)

    it("mw.any returns the index and value of the first future to complete", function()
      local flag = rt:buffer("int", 1)
      flag:write { 0 }
      local gated = prog.wait_flag(flag)
      local i, v = mw.any(gated, prog.fib(10))
      assert.equals(2, i)
      assert.equals(55, v)
      flag:write { 1 }
      assert.equals(1, gated:await())
      flag:close()
    end)

    it("mw.any returns an already complete future at once", function()
      local done = prog.add(20, 22)
      assert.equals(42, done:await())
      local i, v = mw.any(prog.fib(12), done)
      assert.truthy(i == 1 or i == 2)
      if i == 2 then assert.equals(42, v) else assert.equals(144, v) end
    end)
  end)

  describe("buffers and FFI memory", function()
    local ffi = require "ffi"

    it("writes from and reads into FFI arrays and pointers, a task between", function()
      local n = 100000
      local src, dst = ffi.new("float[?]", n), ffi.new("float[?]", n)
      for i = 0, n - 1 do src[i] = i * 0.25 end
      local x = rt:buffer("float", n)
      x:write_from(src, n)
      local blocks = math.ceil(n / 32)
      assert.is_nil(prog.scale:bulk(blocks, x, 2, n):await())
      x:read_into(dst, n)
      for i = 0, n - 1, 997 do assert.equals(i * 0.5, dst[i], "element " .. i) end
      -- a pointer with a count, into the middle of the buffer
      local p = ffi.cast("float *", src) + 10
      x:write_from(p, 5, 101)
      assert.same({ 2.5, 2.75, 3, 3.25, 3.5 }, x:read(101, 5))
      x:close()
    end)

    it("writes and reads raw bytes as strings", function()
      local x = rt:buffer("int32", 4)
      local bytes = ffi.string(ffi.new("int32_t[4]", { 1, -2, 3, 70000 }), 16)
      x:write(bytes)
      assert.same({ 1, -2, 3, 70000 }, x:read())
      assert.equals(bytes, x:read_string())
      assert.equals(bytes:sub(5, 12), x:read_string(2, 2))
      x:write(bytes:sub(1, 4), 4)
      assert.same({ 1, -2, 3, 1 }, x:read())
      x:close()
    end)

    it("refuses what does not fit or is no FFI memory, naming the argument", function()
      local x = rt:buffer("double", 8)
      local rows = {
        { function() return x:write("abc") end, "a string of 3 bytes is not a whole number of double elements" },
        { function() return x:write(("\0"):rep(72)) end, "9 values from element 1 overrun the 8 elements" },
        { function() return x:write(42) end, "table or string expected, got number" },
        { function() return x:write_from({}, 1) end, "bad argument #1 to 'write_from' (FFI pointer or array expected, got table)" },
        { function() return x:write_from(ffi.new("int"), 1) end, "FFI pointer or array expected" },
        { function() return x:write_from(ffi.new("double[2]"), 3) end, "3 elements of double need 24 bytes, the array has 16" },
        { function() return x:read_into(ffi.new("double[8]"), 4, 6) end, "bad argument #3 to 'read_into' (4 values from element 6 overrun" },
        { function() return x:read_into(ffi.new("double[8]"), -1) end, "bad argument #2 to 'read_into'" },
      }
      for _, row in ipairs(rows) do
        local err = support.error_of(row[1])
        assert.truthy(err and err:find(row[2], 1, true), tostring(err))
      end
      x:close()
    end)

    it("gives a typed pointer to the elements where the host can reach them", function()
      local x = rt:buffer("int16", 3)
      x:write { 7, -8, 9 }
      local p, err, code = x:ptr()
      if backend == "sim" then
        assert.equals(-8, p[1])
        p[2] = 99
        assert.same({ 7, -8, 99 }, x:read())
      else
        assert.is_nil(p)
        assert.equals("EINVAL", code)
        assert.truthy(err:find("sim backend only", 1, true), err)
      end
      x:close()
    end)
  end)

  describe("bulk", function()
    it("runs n instances over a buffer", function()
      local n = 1000
      local x = rt:buffer("float", n)
      local blocks = math.ceil(n / 32)
      assert.is_nil(prog.fill:bulk(blocks, x, 2.5, n):await())
      local t = x:read()
      assert.equals(n, #t)
      for i = 1, n do
        if t[i] ~= 2.5 then assert.equals(2.5, t[i], "element " .. i) end
      end
      x:close()
    end)

    it("rejects an instance count that is not a positive integer", function()
      local x = rt:buffer("float", 1)
      for _, n in ipairs { 0, -1, 1.5, 0 / 0 } do
        local err = support.error_of(function() return prog.fill:bulk(n, x, 1, 1) end)
        assert.is_string(err, tostring(n))
        assert.truthy(err:find("bad argument #1 to 'bulk'", 1, true), err)
      end
      x:close()
    end)
  end)

  describe("buffers", function()
    -- element type, values that must come back unchanged
    local rows = {
      { "float", { 0.5, -2.25, 1e6, 0, 3.0625 } },
      { "double", { 0.1, -1e300, 2 ^ -1074, 1 / 3 } },
      { "int64", { 2 ^ 53, -(2 ^ 53), 2 ^ 40 + 1, -1, 0 } },
      { "uint64", { 2 ^ 53, 0, 1 } },
      { "int32", { 2147483647, -2147483648, 0 } },
      { "uint32", { 4294967295, 0 } },
      { "int16", { 32767, -32768 } },
      { "uint16", { 65535 } },
      { "int8", { 127, -128 } },
      { "uint8", { 255, 0 } },
    }
    for _, row in ipairs(rows) do
      local ty, values = row[1], row[2]
      it("round-trips " .. ty .. " values", function()
        local buf = rt:buffer(ty, #values)
        assert.equals(buf, buf:write(values))
        assert.same(values, buf:read())
        buf:close()
      end)
    end

    it("writes and reads ranges (1-based first element)", function()
      local buf = rt:buffer("int", 6)
      buf:write { 1, 2, 3, 4, 5, 6 }
      buf:write({ 70, 80 }, 3)
      assert.same({ 1, 2, 70, 80, 5, 6 }, buf:read())
      assert.same({ 80, 5 }, buf:read(4, 2))
      assert.same({ 6 }, buf:read(6))
      assert.same({}, buf:read(6, 0))
      buf:close()
    end)

    it("raises on out-of-range access and unrepresentable values", function()
      local buf = rt:buffer("int8", 4)
      local cases = {
        { buf.write, buf, { 1, 2, 3, 4, 5 } },
        { buf.write, buf, { 1, 2 }, 4 },
        { buf.write, buf, { 1 }, 0 },
        { buf.write, buf, { 128 } },
        { buf.write, buf, { 1.5 } },
        { buf.write, buf, { "1" } },
        { buf.read, buf, 5 },
        { buf.read, buf, 2, 4 },
        { buf.read, buf, 0 },
      }
      for i, case in ipairs(cases) do
        local err = support.error_of(unpack(case))
        assert.is_string(err, "case " .. i .. " did not raise")
        assert.truthy(err:find("bad argument", 1, true), err)
      end
      buf:close()
    end)

    it("has a length, type, count and address, and a tostring", function()
      local buf = rt:buffer("float", 1024)
      assert.equals(1024, #buf)
      assert.equals(1024, buf.count)
      assert.equals("float", buf.type)
      assert.is_number(buf.address)
      assert.truthy(buf.address > 0)
      assert.matches("^moonwarp%.buffer<float%[1024%] 0x%x+>$", tostring(buf))
      buf:close()
      assert.equals("moonwarp.buffer<float[1024] closed>", tostring(buf))
    end)

    it("knows the aliases int, long, char and bool", function()
      local expect = { int = "int32", long = "int64", char = "int8", bool = "uint8" }
      for alias, ty in pairs(expect) do
        local buf = rt:buffer(alias, 1)
        assert.equals(ty, buf.type)
        buf:close()
      end
    end)

    it("raises for an unknown element type or a bad count", function()
      for _, args in ipairs { { "float16", 4 }, { "float", 0 }, { "float", -1 }, { "float", 2.5 } } do
        local err = support.error_of(rt.buffer, rt, args[1], args[2])
        assert.is_string(err, args[1] .. " " .. args[2])
        assert.truthy(err:find("bad argument", 1, true), err)
      end
    end)

    it("is written by a task that takes it as a pointer", function()
      local n = 100
      local x = rt:buffer("int32", n)
      assert.is_nil(prog.iota(x, n):await())
      local t = x:read()
      for i = 1, n do
        if t[i] ~= (i - 1) * 3 then assert.equals((i - 1) * 3, t[i], "element " .. i) end
      end
      x:close()
    end)

    it("is read by a task that takes it as a pointer", function()
      local x = rt:buffer("double", 4)
      x:write { 0.5, 0.25, 2, 8 }
      assert.equals(10.75, prog.sum(x, 4):await())
      x:close()
    end)

    it("cannot be passed once closed", function()
      local x = rt:buffer("int32", 4)
      x:close()
      local err = support.error_of(prog.iota, x, 4)
      assert.is_string(err)
      assert.truthy(err:find("buffer is closed", 1, true), err)
      assert.truthy(support.error_of(x.read, x):find("buffer is closed", 1, true))
    end)
  end)

  describe("arguments", function()
    -- call, text the error must contain
    local rows = {
      { function() return prog.fib("x") end, "bad argument #1 to 'fib' (number expected, got string)" },
      { function() return prog.fib() end, "bad argument #1 to 'fib' (number expected, got no value)" },
      { function() return prog.fib(1, 2) end, "wrong number of arguments to 'fib' (expected 1, got 2)" },
      { function() return prog.fib(1.5) end, "bad argument #1 to 'fib'" },
      { function() return prog.fib(2 ^ 31) end, "bad argument #1 to 'fib'" },
      { function() return prog.add(1, nil) end, "bad argument #2 to 'add' (number expected, got nil)" },
      { function() return prog.neg8(128) end, "bad argument #1 to 'neg8'" },
      { function() return prog.inc32(-1) end, "bad argument #1 to 'inc32'" },
      { function() return prog.is_even(true) end, "bad argument #1 to 'is_even' (number expected, got boolean)" },
      { function() return prog.iota(12345, 1) end, "bad argument #1 to 'iota' (buffer expected, got number)" },
      { function() return prog.plus_one(5) end, "bad argument #1 to 'plus_one' (future expected, got number)" },
      { function() return prog.sum(prog.fib(1), 1) end, "bad argument #1 to 'sum' (buffer expected, got moonwarp.future)" },
      { function() return prog.takes_all(1, 0, 0, 0, 0, 0, nil) end, "bad argument #1 to 'takes_all' (boolean expected, got number)" },
    }
    for _, row in ipairs(rows) do
      it("raises " .. row[2], function()
        local err = support.error_of(row[1])
        assert.is_string(err, "did not raise")
        assert.truthy(err:find(row[2], 1, true), err)
      end)
    end

    it("raises for an unknown task, listing the program's tasks", function()
      local err = support.error_of(function() return prog.nope end)
      assert.is_string(err)
      assert.truthy(err:find("no task 'nope' in program (tasks: fib, is_even", 1, true), err)
    end)
  end)

  describe("task objects", function()
    it("describe themselves", function()
      local t = prog.fib
      assert.equals("fib", t.name)
      assert.equals("long fib(int n)", t.signature)
      assert.equals("moonwarp.task<long fib(int n)>", tostring(t))
      assert.same({ { name = "n", type = "int32" } }, t.params)
      assert.equals(t, prog.fib)
    end)

    it("are listed by prog:tasks() in source order", function()
      local tasks = prog:tasks()
      assert.equals("fib", tasks[1].name)
      assert.equals("is_even", tasks[2].name)
      assert.equals(prog.takes_all, tasks[#tasks])
    end)

    it("name the parameter types", function()
      local types = {}
      for i, p in ipairs(prog.takes_all.params) do types[i] = p.type end
      assert.same({ "bool", "uint8", "int16", "float", "double", "int64", "pointer" }, types)
    end)
  end)

  describe("tostring", function()
    it("of a future names its task, number and state", function()
      local f = prog.fib(5)
      assert.matches("^moonwarp%.future<fib#%d+ %a+>$", tostring(f))
      f:await()
      assert.matches("^moonwarp%.future<fib#%d+ ready>$", tostring(f))
      local g = prog.boom(1)
      pcall(g.await, g)
      assert.matches("^moonwarp%.future<boom#%d+ failed>$", tostring(g))
    end)

    it("of a program names its file and tasks", function()
      assert.matches("^moonwarp%.program<api_tasks%.cu: fib, is_even", tostring(prog))
    end)
  end)

  it("counts spawns and completions in rt:stats()", function()
    assert.equals(6765, prog.fib(20):await())
    local s = rt:stats()
    assert.is_number(s.completed)
    assert.truthy(s.host_spawned >= 1)
    assert.truthy(s.host_completed >= 1)
    assert.is_table(s.tasks.fib)
    assert.truthy(s.tasks.fib.completed >= 21891) -- fib(20) alone runs 21891 tasks
  end)

  describe("compile errors", function()
    -- The core puts #line directives in the generated source, so the compiler names the
    -- user's file and line: "file:3:" (gcc, parser) or "file(3)" (NVRTC).
    local function names_line(err, file, line)
      return err:find(file .. ":" .. line, 1, true) or err:find(file .. "(" .. line .. ")", 1, true)
    end

    it("name the user's file and line (compiler error)", function()
      local p, err, code = rt:compile(BAD_SOURCE, "bad_tasks.cu")
      assert.is_nil(p)
      assert.equals("ECOMPILE", code)
      assert.is_string(err)
      assert.truthy(names_line(err, "bad_tasks.cu", 3), err)
    end)

    it("name the user's file and line (malformed task declaration)", function()
      local src = "task int good(int x) { return x; }\n\ntask int bad(int x { return x; }\n"
      local p, err, code = rt:compile(src, "@decl.cu")
      assert.is_nil(p)
      assert.equals("ECOMPILE", code)
      assert.truthy(names_line(err, "decl.cu", 3), err)
      assert.falsy(err:find("@decl.cu", 1, true), err)
    end)

    it("name the calling script's line for a source given without a chunkname", function()
      local line = debug.getinfo(1, "l").currentline + 3 -- the line of 'broken' below
      local p, err, code = rt:compile([[
task int fine(int x) { return x; }
task int broken(int x) { return x +; }
]])
      assert.is_nil(p)
      assert.equals("ECOMPILE", code)
      assert.truthy(names_line(err, "api_spec.lua", line), err)
    end)

    it("of rt:compile_file name the file", function()
      local path = os.tmpname()
      local f = assert(io.open(path, "w"))
      f:write("task int ok(int x) { return x; }\ntask int nope(int x) { return x +; }\n")
      f:close()
      local p, err, code = rt:compile_file(path)
      os.remove(path)
      assert.is_nil(p)
      assert.equals("ECOMPILE", code)
      assert.truthy(names_line(err, path, 2), err)
    end)

    it("rt:compile_file of a missing file returns nil, message, EIO", function()
      local p, err, code = rt:compile_file("/nonexistent/tasks.cu")
      assert.is_nil(p)
      assert.equals("EIO", code)
      assert.truthy(err:find("/nonexistent/tasks.cu", 1, true), err)
    end)

    it("leave the runtime usable", function()
      assert.is_nil((rt:compile(BAD_SOURCE, "bad_tasks.cu")))
      assert.equals(55, prog.fib(10):await())
    end)
  end)

  it("compiles a file with rt:compile_file", function()
    local path = os.tmpname()
    local f = assert(io.open(path, "w"))
    f:write(SMALL_SOURCE)
    f:close()
    local p, err = rt:compile_file(path)
    os.remove(path)
    assert(p, err)
    assert.equals(path, p.add.file)
    assert.equals(7, p.add(3, 4):await())
  end)

  it("reclaims host futures that only garbage holds", function()
    own_runtime()
    local small = support.runtime(backend, { host_futures = 8 })
    local p = support.compile(small, SMALL_SOURCE, "small.cu")
    for i = 1, 100 do
      assert.is_not_nil(p.add(i, 1)) -- dropped at once: only the collector releases them
    end
    assert.equals(3, p.add(1, 2):await())
    small:close()
  end)

  it("counts the spawns that waited for a host future, and the time they waited", function()
    own_runtime()
    local small = support.runtime(backend, { host_futures = 4 })
    local p = support.compile(small, SMALL_SOURCE, "small.cu")
    local s0 = small:stats()
    assert.equals(0, s0.waits_future)
    assert.equals(0, s0.waits_future_s)
    assert.equals(0, s0.waits_inbox)
    p.add:spawn_many(64, function(i) return i, 1 end, { futures = false })
    assert.equals(3, p.add(1, 2):await(30))
    local s1 = small:stats()
    -- a wait frees at most the 4 futures there are: 60 spawns past the first 4 wait 15 times or more
    assert.is_true(s1.waits_future >= 15, tostring(s1.waits_future))
    assert.is_true(s1.waits_future_s > 0)
    assert.equals(0, s1.waits_inbox) -- 65 spawns never fill the inbox
    small:close()
  end)

  describe("after rt:close()", function()
    local rt2, prog2, f, buf

    setup(function()
      own_runtime()
      rt2 = support.runtime(backend)
      prog2 = support.compile(rt2, SMALL_SOURCE, "small.cu")
      f = prog2.add(1, 2)
      assert.equals(3, f:await())
      buf = rt2:buffer("int", 4)
      assert.is_true(rt2:close())
    end)

    -- object, call on it
    local rows = {
      { "rt:compile", function() return rt2:compile("task int x(int a) { return a; }") end },
      { "rt:buffer", function() return rt2:buffer("int", 1) end },
      { "rt:stats", function() return rt2:stats() end },
      { "prog.<task>", function() return prog2.add end },
      { "prog:tasks", function() return prog2:tasks() end },
      { "f:await", function() return f:await() end },
      { "f:done", function() return f:done() end },
      { "buf:read", function() return buf:read() end },
      { "buf:write", function() return buf:write { 1 } end },
      { "buf.address", function() return buf.address end },
    }
    for _, row in ipairs(rows) do
      it(row[1] .. " raises 'runtime is closed'", function()
        local err = support.error_of(row[2])
        assert.is_string(err, "did not raise")
        assert.truthy(err:find("runtime is closed", 1, true), err)
      end)
    end

    it("closing again is harmless and tostring still works", function()
      assert.is_true(rt2:close())
      assert.matches("closed", tostring(rt2))
      assert.matches("closed", tostring(f))
      assert.matches("closed", tostring(buf))
      assert.matches("closed", tostring(prog2))
      buf:close() -- frees nothing: the runtime freed it
      f:close()
    end)
  end)
end)
