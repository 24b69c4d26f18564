-- compiler_spec.lua - the compiler front with no runtime and no GPU: the task parser, the
-- generated source, NVRTC compilation to a cubin, and the on-disk compile cache.
local mw = require "moonwarp"
local support = require "spec.support"

local FIB = support.FIB

describe("the task parser", function()
  -- source, text the error must contain
  local rows = {
    { "task int f(float x[]) { return 1; }", "p.cu:1: task f: cannot read parameter" },
    { "\n\ntask int f(struct s x) { return 1; }", "p.cu:3:" },
    { "task int f(int x) { return x; }\ntask int f(int y) { return y; }", "declared twice" },
    { "int helper(int x) { return x; }\n", "no task declared" },
    { "task float* f(int x) { return 0; }", "return type" },
    { "task int f(int x) {\n  if (x) { local int y; }\n  return x;\n}", "p.cu:2:" },
    { "task int f(int x) { return x; ", "unbalanced" },
  }
  for _, row in ipairs(rows) do
    it("rejects " .. row[1]:gsub("\n", " "):sub(1, 40) .. " naming the file and line", function()
      local out, err, code = mw.generate(row[1], { chunkname = "p.cu" })
      assert.is_nil(out)
      assert.equals("ECOMPILE", code)
      assert.truthy(err:find(row[2], 1, true), err)
    end)
  end

  it("accepts every parameter type the host can pass", function()
    local src = "task int all(bool b, char c, unsigned char uc, short s, unsigned short us, int i,"
      .. " unsigned u, long l, unsigned long ul, long long ll, int8_t i8, uint64_t u64,"
      .. " size_t z, float f, double d, const float *p, future fu) { return 0; }"
    assert.is_string(mw.generate(src))
  end)
end)

describe("the generated source", function()
  local gen = assert(mw.generate(FIB, { chunkname = "fib.cu" }))

  it("points the body and the locals at the user's file and lines", function()
    assert.truthy(gen:find('#line 1 "fib.cu"', 1, true))
    assert.truthy(gen:find('#line 2 "fib.cu"', 1, true)) -- the local declaration
  end)

  it("makes the body a state machine with a resume point per await", function()
    assert.truthy(gen:find("switch (_mw_resume(_c))", 1, true))
    assert.truthy(gen:find("mw_frame_fib::_mw_body", 1, true))
  end)

  it("dispatches every kind and has the executor entry", function()
    assert.truthy(gen:find("case 0u: {", 1, true))
    assert.truthy(gen:find("mw_executor_kernel", 1, true))
  end)

  it("differs for the sim backend only in its preamble", function()
    local sim = assert(mw.generate(FIB, { chunkname = "fib.cu", backend = "sim" }))
    assert.truthy(sim:find("#define MW_SIM 1", 1, true))
    assert.is_nil(gen:find("#define MW_SIM 1", 1, true))
  end)
end)

describe("NVRTC without a GPU #slow", function()
  it("compiles a program to an sm_90 cubin", function()
    local cubin, err = mw.compile_cubin(FIB, { arch = "sm_90" })
    assert.is_string(cubin, err)
    assert.equals("\127ELF", cubin:sub(1, 4))
  end)

  it("compiles cancel, try_await and the outcome readers to an sm_90 cubin", function()
    local src = [[
task int leaf(int x) { if (x < 0) fail(2, "negative"); return x; }
task long pick(int x) {
  local future a, b;
  local long r;
  a = spawn(leaf, x);
  b = spawn(leaf, -x);
  if (!cancel(b)) r = 1;
  try_await(a);
  try_await(b);
  r = failed(a) ? fail_code(a) : (long)value(a);
  if (cancelled(b) && fail_message(b)[0] == 't') r += 100;
  return r;
}
]]
    local cubin, err = mw.compile_cubin(src, { chunkname = "cancel.cu", arch = "sm_90" })
    assert.is_string(cubin, err)
    assert.equals("\127ELF", cubin:sub(1, 4))
  end)

  it("reports a compile error at the user's file and line, with the NVRTC log", function()
    local src = "task int f(int x) {\n  int y = x;\n  return y +;\n}\n"
    local cubin, log, code = mw.compile_cubin(src, { chunkname = "user.cu" })
    assert.is_nil(cubin)
    assert.equals("ECOMPILE", code)
    assert.truthy(log:find("user.cu(3)", 1, true), log)
  end)

  it("rejects an architecture it cannot target", function()
    local cubin, err, code = mw.compile_cubin(FIB, { arch = "gfx90a" })
    assert.is_nil(cubin)
    assert.equals("EINVAL", code)
    assert.truthy(err:find("sm_", 1, true), err)
  end)
end)

describe("NVRTC without a GPU, the generated code of every shape of task", function()
  -- what sim's C++ compiler accepts NVRTC may not (a builtin on a pointer to some frame structs,
  -- an empty one among them, once failed NVVM's verifier): frames with parameters only, locals
  -- only, neither, a buffer and a bulk spawn, a future parameter, and a task that uses every
  -- future reader
  local SRC = [[
task int none() { return 2; }
task void nothing() { }
task int only_local() {
  local int a;
  a = 3;
  return a;
}
task double scalars(bool b, char c, unsigned short us, int i, unsigned long ul, long long ll, float f, double d) {
  return (b ? 1.0 : 0.0) + c + us + i + (double)ul + (double)ll + f + d;
}
task void fill(float *p, int n) {
  if (index < (unsigned)n && lane == 0) p[index] = (float)index;
}
task int pass_on(future f) {
  await(f);
  return failed(f) ? -1 : (int)value(f);
}
task long everything(float *p, int n) {
  local future a, b, c, d;
  local long r;
  a = spawn(none);
  b = spawn(only_local);
  c = spawn_bulk(fill, n, p, n);
  await_all(a, b, c);
  r = (long)value(a) + value(b);
  a = spawn(nothing);
  try_await(a);
  if (failed(a) && fail_code(a) != 0 && fail_message(a)[0] == 'x') r += 1000;
  d = spawn(none);
  b = spawn(pass_on, d);
  if (cancel(b)) r += 100;
  try_await(b);
  if (cancelled(b)) r += 10;
  release(b);
  a = spawn(scalars, true, 'a', 7, -2, 5ul, 6ll, 0.5f, 0.25);
  await(a);
  r += (long)value(a);
  if (r < 0) fail(3, "negative");
  return r;
}
]]

  it("compiles to an sm_90 cubin", function()
    local cubin, log, code = mw.compile_cubin(SRC, { chunkname = "shapes.cu", arch = "sm_90" })
    if code == "ENODEV" then
      pending("no NVRTC on this machine: " .. tostring(log))
      return
    end
    assert.is_string(cubin, log)
    assert.equals("\127ELF", cubin:sub(1, 4))
  end)
end)

describe("the compile cache #sim", function()
  -- child processes find the module where this one does
  local paths = support.lua_paths()
  local dir
  before_each(function()
    dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. support.shell_quote(dir)) == 0)
  end)
  after_each(function() os.execute("rm -rf " .. support.shell_quote(dir)) end)

  -- compiles and runs a program on sim in a fresh process with the cache in dir
  local function run_once(extra_env)
    local script = [[
      local mw = require "moonwarp"
      local rt = assert(mw.runtime { backend = "sim" })
      local p = assert(rt:compile("task int twice(int x) { return 2 * x; }", "cache.cu"))
      io.write(p.twice(21):await())
      rt:close()
    ]]
    local env = paths .. "MOONWARP_CACHE_DIR=" .. support.shell_quote(dir) .. " "
      .. (extra_env or "")
    return support.run(env .. " luajit -e " .. support.shell_quote(script))
  end

  local function entries()
    local p = io.popen("ls " .. support.shell_quote(dir) .. " 2>/dev/null")
    local list = {}
    for line in p:lines() do if line:match("%.so$") then list[#list + 1] = line end end
    p:close()
    return list
  end

  it("stores a build and reuses it", function()
    local status, out = run_once()
    assert.equals(0, status, out)
    assert.equals("42", out)
    assert.equals(1, #entries())
    status, out = run_once()
    assert.equals(0, status, out)
    assert.equals("42", out)
    assert.equals(1, #entries())
  end)

  it("hands MOONWARP_DEVICE_DEFINE to the C++ compiler, keys builds by it, refuses a bad one", function()
    local script = support.shell_quote([[
      local mw = require "moonwarp"
      local rt = assert(mw.runtime { backend = "sim" })
      local p, err = rt:compile("task int k() {\n#ifdef MW_SPEC_DEFINE\n  return MW_SPEC_DEFINE;\n"
        .. "#else\n  return -1;\n#endif\n}\ntask int two() {\n#ifdef MW_SPEC_TWO\n  return MW_SPEC_TWO;\n"
        .. "#else\n  return -1;\n#endif\n}\n", "define.cu")
      local two = p and p.two():await()
      io.write(p and tostring(p.k():await()) .. (two ~= -1 and " " .. two or "") or ("refused: " .. err))
      rt:close()
    ]])
    local function with(define)
      local env = paths .. "MOONWARP_CACHE_DIR=" .. support.shell_quote(dir) .. " "
        .. (define and "MOONWARP_DEVICE_DEFINE=" .. support.shell_quote(define) .. " " or "")
      local status, out = support.run(env .. "luajit -e " .. script)
      assert.equals(0, status, out)
      return out
    end
    assert.equals("-1", with(nil))
    assert.equals("7", with("MW_SPEC_DEFINE=7"))
    assert.equals("8", with("MW_SPEC_DEFINE=8")) -- another build, not the one cached for 7
    assert.equals("-1", with(nil))
    assert.equals("7 2", with("MW_SPEC_DEFINE=7,MW_SPEC_TWO=2")) -- several, joined by commas
    for _, bad in ipairs { "A B", "A,", ",A", "A,,B", "A,B,C,D,E,F,G,H,I" } do
      assert.equals("refused: MOONWARP_DEVICE_DEFINE must be NAME or NAME=VALUE, or at most 8 of "
        .. "them joined by commas, of at most 239 characters in all, without blanks (got \"" .. bad .. "\")",
        with(bad))
    end
  end)

  it("recompiles a corrupted entry instead of loading it", function()
    assert.equals(0, (run_once()))
    local path = dir .. "/" .. entries()[1]
    local f = assert(io.open(path, "r+b"))
    f:seek("set", 200)
    f:write("corrupted!")
    f:close()
    local status, out = run_once()
    assert.equals(0, status, out)
    assert.equals("42", out)
  end)

  it("is off with MOONWARP_NO_CACHE=1", function()
    local status, out = run_once("MOONWARP_NO_CACHE=1")
    assert.equals(0, status, out)
    assert.equals(0, #entries())
  end)

  it("degrades to no cache when its directory cannot be made, and says so once", function()
    local file = dir .. "/a-file"
    io.open(file, "w"):close()
    local status, out = support.run(paths .. "MOONWARP_CACHE_DIR="
      .. support.shell_quote(file .. "/sub")
      .. " luajit -e " .. support.shell_quote([[
        local mw = require "moonwarp"
        local rt = assert(mw.runtime { backend = "sim" })
        local p = assert(rt:compile("task int one(int x) { return 1; }", "c.cu"))
        local q = assert(rt:compile("task int two(int x) { return 2; }", "d.cu"))
        io.write("results ", p.one(0):await(), " ", q.two(0):await())
        rt:close()
      ]]))
    assert.equals(0, status, out)
    assert.truthy(out:find("results 1 2", 1, true), out)
    local _, said = out:gsub("moonwarp: the compile cache ", "")
    assert.equals(1, said, out)
    assert.truthy(out:find(file .. "/sub folder cannot be made or written (Not a directory)", 1, true), out)
  end)

  it("writes the generated source where MOONWARP_DUMP_DIR says", function()
    assert.equals(0, (run_once("MOONWARP_DUMP_DIR=" .. support.shell_quote(dir))))
    local p = io.popen("ls " .. support.shell_quote(dir))
    local found = false
    for line in p:lines() do found = found or line:match("^moonwarp%-.*%.cpp$") ~= nil end
    p:close()
    assert.is_true(found)
  end)
end)
