-- compile_options_spec.lua - the options of a compile (rt:compile, rt:compile_file,
-- mw.compile_cubin): defines for one program, include directories and debug for the whole
-- compile, their part in the compile cache's key, and the errors of bad options.
local mw = require "moonwarp"
local support = require "spec.support"

local q = support.shell_quote

local temp_dir, rm_dir = support.temp_dir, support.rm_dir

-- spec/fixtures, absolute: files that stay where they are from run to run, so that the compiles
-- that name them hit the compile cache on the next run
local FIXTURES = (function()
  local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
  if here:sub(1, 1) ~= "/" then here = assert(io.popen("pwd")):read("*l") .. "/" .. here end
  return here .. "/fixtures"
end)()

local function write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

-- compiled on rt with options; the program must compile
local function compile(rt, source, name, opts)
  local prog, err, code = rt:compile(source, name, opts)
  assert(prog, string.format("compile %s failed (%s):\n%s", name, tostring(code), tostring(err)))
  return prog
end

support.each_backend(function(backend)
  describe("defines", function()
    local rt
    setup(function() rt = support.runtime(backend) end)
    teardown(function() rt:close() end)

    it("give a program its values, each program its own", function()
      local src = "task int n_of() { return N; }\n"
      local a = compile(rt, src, "defines_a.lua", { defines = { N = 64 } })
      local b = compile(rt, src, "defines_b.lua", { defines = { N = 3 } })
      assert.equals(64, a.n_of():await(30))
      assert.equals(3, b.n_of():await(30))
    end)

    it("stay out of the programs loaded after", function()
      compile(rt, "task int with_n() { return N; }\n", "with_n.lua", { defines = { N = 5 } })
      local c = compile(rt, [[
task int n_or_minus_one() {
#ifdef N
  return N;
#else
  return -1;
#endif
}
]], "no_defines.lua")
      assert.equals(-1, c.n_or_minus_one():await(30))
    end)

    it("take numbers, strings and booleans (false leaves the name undefined)", function()
      local p = compile(rt, [[
task int flags() {
  int r = 0;
#ifdef ON
  r += ON;
#endif
#ifdef OFF
  r += 100;
#endif
  return r;
}
task double half() { return HALF; }
task int expr(int x) { return TWICE + EMPTY 0; }
task long big() { return BIG; }
task int neg() { return 10 - NEG; }
]], "values.lua", { defines = { ON = true, OFF = false, HALF = 0.5, TWICE = "(2 * X_)",
  X_ = "x", EMPTY = "", BIG = 2 ^ 40, NEG = -3 } })
      assert.equals(1, p.flags():await(30))
      assert.equals(0.5, p.half():await(30))
      assert.equals(14, p.expr(7):await(30))
      assert.equals(2 ^ 40, p.big():await(30))
      assert.equals(13, p.neg():await(30))
    end)

    it("reach helper code, local declarations and bodies; the generated code does not see them",
      function()
        -- names the generated code would use if it were not kept to reserved ones
        local names = { N = 4, n = 1, c = 2, w = 3, h = 5, line = 6, body = 7, resume = 8, r = 9,
          fr = 10, p0 = 11 }
        local p = compile(rt, [[
static __device__ int times_n(int x) { return x * N; }
task long inc(future f) {
  await(f);
  return value(f) + 1;
}
task int leaf(int x) { return x; }
task long outer(int x) {
  local int buf[N];
  local future a, b;
  buf[N - 1] = times_n(x);
  a = spawn(leaf, buf[N - 1]);
  b = spawn(inc, a);
  await(b);
  return value(b) + (long)sizeof(buf) + n + c + w + h + line + body + resume + r + fr + p0;
}
]], "generated_names.lua", { defines = names })
        -- times_n(2) = 8, inc: 9, sizeof(int[4]) = 16, the names 1 + 2 + 3 + 5 + 6 + 7 + 8 + 9 + 10 + 11
        assert.equals(9 + 16 + 62, p.outer(2):await(30))
      end)

    it("reach #if lines in task bodies, around spawns and awaits", function()
      local src = [[
task int leaf(int x) { return x; }
task int pick(int x) {
  local future f, g;
  local int r;
#if TWICE
  f = spawn(leaf, 2 * x);
#else
  f = spawn(leaf, x);
#endif
  await(f);
  r = (int)value(f);
#ifdef EXTRA
  g = spawn(leaf, 100);
  await(g);
  r += (int)value(g);
#endif
  return r;
}
]]
      local with = compile(rt, src, "body_if_with.lua", { defines = { TWICE = 1, EXTRA = true } })
      local without = compile(rt, src, "body_if_without.lua", { defines = { TWICE = 0 } })
      assert.equals(114, with.pick(7):await(30))
      assert.equals(7, without.pick(7):await(30))
    end)

    it("that break the task code give the compiler's message at the user's line", function()
      local prog, err, code = rt:compile("task int broken(int x) {\n  return x + N;\n}\n",
        "broken_define.lua", { defines = { N = "oops(" } })
      assert.is_nil(prog)
      assert.equals("ECOMPILE", code)
      assert.truthy(err:find(backend == "sim" and "broken_define.lua:2:" or "broken_define.lua(2)",
        1, true), err)
      for _, generated in ipairs { "program.cpp", "moonwarp.cu", "moonwarp-sim", "<moonwarp>" } do
        assert.is_nil(err:find(generated, 1, true), err)
      end
    end)

    if backend == "sim" then
      it("of a name that is a macro already where the program starts are refused by the compile",
        function()
          -- INT_MAX: <limits.h>, which the sim's headers include
          local prog, err, code = rt:compile("task int again() { return 1; }\n",
            "defines_again.lua", { defines = { INT_MAX = 2 } })
          assert.is_nil(prog)
          assert.equals("ECOMPILE", code)
          assert.truthy(err:find("defines_again.lua", 1, true), err)
          assert.truthy(err:find("option 'defines': 'INT_MAX' is a macro already", 1, true), err)
        end)
    end

    it("are taken by rt:compile_file, and rt:compile(source, options) without a name", function()
      local p = assert(rt:compile_file(FIXTURES .. "/from_file.cu", { defines = { FILE_N = 21 } }))
      assert.equals(21, p.from_file():await(30))
      local s = assert(rt:compile("task int unnamed() { return UN; }\n", { defines = { UN = 4 } }))
      assert.equals(4, s.unnamed():await(30))
    end)
  end)

  describe("include directories", function()
    local rt, dir
    -- a runtime per test, one at a time: cuda runs one executor per device in a process
    before_each(function() rt = support.runtime(backend) end)
    after_each(function() rt:close() end)
    -- opts_scale.h (scaled(x) = x * SCALE), opts_nested.h (includes it), opts_fast.h and
    -- opts_slow.h (speed() = 9 and 1)
    setup(function() dir = FIXTURES .. "/include" end)

    it("find a program's #include, under the program's defines", function()
      local p = compile(rt, '#include "opts_nested.h"\ntask int sc(int x) { return scaled(x); }\n',
        "include.lua", { include_dirs = { dir }, defines = { SCALE = 3 } })
      assert.equals(21, p.sc(7):await(30))
    end)

    it("read an #include where it is, under its #if", function()
      local src = [[
#ifdef FAST
#include "opts_fast.h"
#else
#include "opts_slow.h"
#endif
task int how_fast() { return speed(); }
]]
      -- headers are read at file scope, shared by the programs of a runtime: the two speed()
      -- would clash in one
      local fast = compile(rt, src, "fast.lua", { include_dirs = { dir }, defines = { FAST = true } })
      assert.equals(9, fast.how_fast():await(30))
      rt:close()
      rt = support.runtime(backend)
      local slow = compile(rt, src, "slow.lua", { include_dirs = { dir } })
      assert.equals(1, slow.how_fast():await(30))
    end)

    it("are needed: without them the header is not found", function()
      local prog, err, code = rt:compile('#include "opts_fast.h"\ntask int f() { return speed(); }\n',
        "no_dirs.lua")
      assert.is_nil(prog)
      assert.equals("ECOMPILE", code)
      assert.truthy(err:find("opts_fast.h", 1, true), err)
      assert.truthy(err:find("no_dirs.lua", 1, true), err)
    end)

    it("given relative are kept as they were meant when the working directory changes", function()
      local ffi = require "ffi"
      pcall(ffi.cdef, "int chdir(const char *); char *getcwd(char *, size_t);")
      local buf = ffi.new("char[4096]")
      local cwd = ffi.string(assert(ffi.C.getcwd(buf, 4096)))
      local parent, base = dir:match("^(.*)/([^/]+)$")
      local ok, err = pcall(function()
        assert(ffi.C.chdir(parent) == 0)
        local p = compile(rt, '#include "opts_fast.h"\ntask int rel() { return speed(); }\n',
          "relative.lua", { include_dirs = { base } })
        assert(ffi.C.chdir("/") == 0)
        -- the next program's compile compiles the first one again
        local s = compile(rt, "task int seven() { return 7; }\n", "after_chdir.lua")
        assert.equals(9, p.rel():await(30))
        assert.equals(7, s.seven():await(30))
      end)
      ffi.C.chdir(cwd)
      assert(ok, err)
    end)
  end)

  describe("a program's #define", function()
    -- a runtime per test, one at a time: cuda runs one executor per device in a process
    local FIRST = "#define ALREADY 1\ntask int uses_already() { return ALREADY; }\n"
    local SECOND = "task int again() { return ALREADY; }\n"

    support.it_build("parts", "does not reach another program compiled on its own (build = parts)", function()
      local rt = support.runtime(backend, { build = "parts" })
      local first = compile(rt, FIRST, "defines_already.lua")
      local second = compile(rt, SECOND, "defines_again.lua", { defines = { ALREADY = 2 } })
      local a, b = first.uses_already():await(30), second.again():await(30)
      rt:close()
      assert.equals(1, a)
      assert.equals(2, b)
    end)

    support.it_build("one_unit", "is in force for the programs after it in one unit, and a define of its name is refused",
      function()
        local rt = support.runtime(backend, { build = "one_unit" })
        compile(rt, FIRST, "defines_already.lua")
        local prog, err, code = rt:compile(SECOND, "defines_again.lua", { defines = { ALREADY = 2 } })
        rt:close()
        assert.is_nil(prog)
        assert.equals("ECOMPILE", code)
        assert.truthy(err:find("defines_again.lua", 1, true), err)
        assert.truthy(err:find("option 'defines': 'ALREADY' is a macro already", 1, true), err)
      end)
  end)

  describe("debug", function()
    it("compiles a program that runs as it does without", function()
      local rt = support.runtime(backend)
      local p = compile(rt, support.FIB, "debug_fib.lua", { debug = true })
      local v = p.fib(12):await(60)
      rt:close()
      assert.equals(144, v)
    end)
  end)
end)

describe("bad compile options #sim", function()
  local rt
  setup(function() rt = support.runtime("sim") end)
  teardown(function() rt:close() end)

  local SRC = "task int one() { return 1; }\n"
  -- (the calls below are not tail calls, which would leave the function's name out of the
  -- message)
  local rows = {
    { 5, "options must be a table, got number" },
    { { defines = { N = 1 }, optimise = true },
      "unknown option 'optimise' (options: verbose, defines, include_dirs, debug)" },
    { { defines = "N=1" }, "option 'defines' must be a table of NAME = value, got string" },
    { { defines = { "N=1" } }, "option 'defines': key 1 is not a name (write defines = { NAME = value })" },
    { { defines = { ["N-1"] = 1 } }, "option 'defines': 'N-1' is not an identifier" },
    { { defines = { ["1N"] = 1 } }, "option 'defines': '1N' is not an identifier" },
    { { defines = { ["N=2"] = 1 } }, "option 'defines': 'N=2' is not an identifier" },
    { { defines = { N = {} } }, "option 'defines': the value of 'N' must be a number, string or boolean, got table" },
    { { defines = { N = print } }, "option 'defines': the value of 'N' must be a number, string or boolean, got function" },
    { { defines = { N = 0 / 0 } }, "option 'defines': the value of 'N' must be a finite number" },
    { { defines = { N = "1\n#define X 2" } }, "option 'defines': the value of 'N' must be one line" },
    { { defines = { N = "1 \\" } }, "option 'defines': the value of 'N' ends with a backslash" },
    { { defines = { N = "a\0b" } }, "option 'defines': the value of 'N' contains a NUL byte" },
    { { defines = { N = "1 /* one" } }, "option 'defines': the value of 'N' opens a comment it does not close" },
    { { defines = { MW_SIM = 1 } }, "option 'defines': 'MW_SIM' is reserved for moonwarp and the compilers (names starting with _, MW_ or mw_)" },
    { { defines = { mw_ctx = 1 } }, "option 'defines': 'mw_ctx' is reserved" },
    { { defines = { _c = 1 } }, "option 'defines': '_c' is reserved" },
    { { defines = { __CUDACC__ = 1 } }, "option 'defines': '__CUDACC__' is reserved" },
    { { defines = { spawn = 1 } }, "option 'defines': 'spawn' is a word of the task language" },
    { { defines = { lane = 1 } }, "option 'defines': 'lane' is a word of the task language" },
    { { include_dirs = "inc" }, "option 'include_dirs' must be a list of directory names, got string" },
    { { include_dirs = { "spec", 3 } }, "option 'include_dirs': entry 2 must be a string, got number" },
    { { include_dirs = { "spec", "" } }, "option 'include_dirs': entry 2 is empty" },
    { { include_dirs = { dir = "spec" } }, "option 'include_dirs' must be a list of directory names (found the key dir)" },
    { { include_dirs = { "spec/no/such/dir" } }, "option 'include_dirs': no directory 'spec/no/such/dir' (No such file or directory)" },
    { { include_dirs = { "spec/support.lua" } }, "option 'include_dirs': 'spec/support.lua' is not a directory" },
    { { debug = 1 }, "option 'debug' must be true or false, got number" },
    { { debug = "lineinfo" }, "option 'debug' must be true or false, got string" },
    { { verbose = 1 }, "option 'verbose' must be true or false, got number" },
  }
  for _, row in ipairs(rows) do
    local opts, want = row[1], row[2]
    it("raises " .. want:sub(1, 70), function()
      local err = support.error_of(function() local p = rt:compile(SRC, "bad_opts.lua", opts) return p end)
      assert.truthy(err, "no error")
      assert.truthy(err:find("bad argument #3 to 'compile' (" .. want, 1, true), err)
      assert.is_nil(err:find("moonwarp-sim", 1, true), err)
    end)
  end

  it("names the argument where the options stand", function()
    local err = support.error_of(function() local p = rt:compile(SRC, { debug = 2 }) return p end)
    assert.truthy(err and err:find("bad argument #2 to 'compile' (option 'debug'", 1, true), err)
    err = support.error_of(function() local p = rt:compile_file("spec/support.lua", 7) return p end)
    assert.truthy(err and err:find("bad argument #2 to 'compile_file' (options must be a table", 1, true), err)
    err = support.error_of(function() local p = rt:compile_file("spec/support.lua", { what = 1 }) return p end)
    assert.truthy(err and err:find("bad argument #2 to 'compile_file' (unknown option 'what'", 1, true), err)
    err = support.error_of(function() local c = mw.compile_cubin(SRC, { defines = { ["a b"] = 1 } }) return c end)
    assert.truthy(err and err:find("bad argument #2 to 'compile_cubin' (option 'defines': 'a b' is not an identifier", 1, true), err)
    for _, bad in ipairs { "512", 100, 200.5, -16 } do
      err = support.error_of(function() local c = mw.compile_cubin(SRC, { frame_bytes = bad }) return c end)
      assert.truthy(err and err:find("bad argument #2 to 'compile_cubin' (option 'frame_bytes' must be", 1, true), err)
    end
    err = support.error_of(function() local c = mw.compile_cubin(SRC, { frame_bytes = 100 }) return c end)
    assert.truthy(err:find("option 'frame_bytes' must be a multiple of 16 in 128..65536, got 100", 1, true), err)
    err = support.error_of(function() local p = rt:compile(SRC, "frames.lua", { frame_bytes = 512 }) return p end)
    assert.truthy(err and err:find("unknown option 'frame_bytes'", 1, true), err)
    -- mw.compile_cubin builds as MOONWARP_BUILD says, and refuses what mw.runtime refuses
    local old = os.getenv("MOONWARP_BUILD")
    support.setenv("MOONWARP_BUILD", "fast")
    local cubin, msg, code = mw.compile_cubin(SRC)
    support.setenv("MOONWARP_BUILD", old)
    assert.is_nil(cubin)
    assert.equals("EINVAL", code)
    assert.truthy(msg and msg:find('MOONWARP_BUILD must be "parts", "one_unit" or "tiered", got "fast"', 1, true), msg)
    for _, row in ipairs {
      { "MOONWARP_GRIDS", "yes", 'MOONWARP_GRIDS must be 0 or 1, got "yes"' },
      { "MOONWARP_CUDADEVRT", "/nonexistent/libcudadevrt.a", 'MOONWARP_CUDADEVRT names no readable file' },
    } do
      old = os.getenv(row[1])
      support.setenv(row[1], row[2])
      cubin, msg, code = mw.compile_cubin(SRC)
      support.setenv(row[1], old)
      assert.is_nil(cubin)
      assert.equals("EINVAL", code)
      assert.truthy(msg and msg:find(row[3], 1, true), msg)
    end
  end)

  it("leave the runtime as it was", function()
    assert.is_not_nil(support.error_of(function() return rt:compile(SRC, "x.lua", { defines = { lane = 1 } }) end))
    local p = compile(rt, SRC, "after_bad.lua", { defines = {} })
    assert.equals(1, p.one():await(30))
  end)
end)

describe("a task too big for the runtime's frames #sim", function()
  it("fails to compile at the task's line, saying to raise frame_bytes", function()
    local rt = assert(mw.runtime { backend = "sim", frame_bytes = 128 })
    local p, err = rt:compile("// a task too big\ntask long big(int n) {\n  local long a[40];\n  a[0] = n;\n  return a[0];\n}\n",
      "frames.lua")
    rt:close()
    assert.is_nil(p)
    assert.truthy(err:find("frames.lua:2:", 1, true), err)
    assert.truthy(err:find("task big: its parameters and locals do not fit in a frame; raise frame_bytes", 1, true), err)
  end)
end)

describe("a verbose compile #sim", function()
  local paths = "LUA_PATH=" .. q(package.path) .. " LUA_CPATH=" .. q(package.cpath) .. " "
  local cache
  setup(function() cache = temp_dir() end)
  teardown(function() rm_dir(cache) end)
  -- compiles a one-line program in a fresh process (a cache of its own: the first run compiles,
  -- the others load, and both report); env is put before the command, options is Lua source;
  -- returns the exit status and stdout+stderr
  local function run(env, options, src)
    local script = [[
      local mw = require "moonwarp"
      local rt = assert(mw.runtime { backend = "sim", workers = 2 })
      local p, err = rt:compile(]] .. ("%q"):format(src or "task int one() { return 1; }\n") ..
      [[, "verbose_prog.lua", ]] .. options .. [[)
      if p then io.write("result ", p.one():await(30), "\n") else io.write("failed\n") end
      rt:close()
    ]]
    return support.run(paths .. "MOONWARP_CACHE_DIR=" .. q(cache) .. " " .. env .. " luajit -e " .. q(script))
  end

  it("says what it compiles and how long it took when MOONWARP_VERBOSE is set", function()
    local status, out = run("MOONWARP_VERBOSE=1", "nil")
    assert.equals(0, status, out)
    assert.truthy(out:find("moonwarp: compiling verbose_prog.lua on sim...", 1, true), out)
    assert.truthy(out:match("moonwarp: verbose_prog%.lua ready in %d+%.%d%d s"), out)
    assert.truthy(out:find("result 1", 1, true), out)
  end)

  it("says nothing unless asked, or with MOONWARP_VERBOSE=0, or with verbose = false", function()
    for _, case in ipairs { { "", "nil" }, { "MOONWARP_VERBOSE=0", "nil" },
                             { "MOONWARP_VERBOSE=1", "{ verbose = false }" } } do
      local status, out = run(case[1], case[2])
      assert.equals(0, status, out)
      assert.is_nil(out:find("moonwarp:", 1, true), out)
      assert.truthy(out:find("result 1", 1, true), out)
    end
  end)

  it("is an option too, and reports a compile that fails with its error's name", function()
    local status, out = run("", "{ verbose = true }", "task int one() { return nope; }\n")
    assert.equals(0, status, out)
    assert.truthy(out:find("moonwarp: compiling verbose_prog.lua on sim...", 1, true), out)
    assert.truthy(out:match("moonwarp: verbose_prog%.lua: ECOMPILE after %d+%.%d%d s"), out)
    assert.truthy(out:find("failed", 1, true), out)
  end)
end)

describe("the sim compile's flags #sim", function()
  local dir
  before_each(function() dir = temp_dir() end)
  after_each(function() rm_dir(dir) end)

  -- the C++ compiler's command lines, each a line of the log, while fn runs
  local function flags_of(fn)
    local log = dir .. "/cxx.log"
    -- each line: PART <the first line of the source compiled> ARGS <the arguments>
    write(dir .. "/cxx.sh", 'src=; for a in "$@"; do case "$a" in *.cpp) src=$a;; esac; done\n' ..
      'echo "PART $(head -1 "$src" 2>/dev/null) ARGS $*" >> ' .. q(log) .. '\nexec c++ "$@"\n')
    local old_cxx, old_nc = os.getenv("MOONWARP_CXX"), os.getenv("MOONWARP_NO_CACHE")
    support.setenv("MOONWARP_CXX", "sh " .. dir .. "/cxx.sh")
    support.setenv("MOONWARP_NO_CACHE", "1")
    local ok, err = pcall(fn)
    support.setenv("MOONWARP_CXX", old_cxx)
    support.setenv("MOONWARP_NO_CACHE", old_nc)
    assert(ok, err)
    local lines = {}
    for line in io.lines(log) do lines[#lines + 1] = line end
    return lines
  end

  it("are -O1 -g, or -O0 -g with debug, and -I each directory, for each program on its own",
    function()
      local inc = dir .. "/inc"
      assert(os.execute("mkdir -p " .. q(inc)) == 0)
      local lines = flags_of(function()
        local rt = support.runtime("sim", { workers = 2 })
        compile(rt, "task int a() { return 1; }\n", "flags_a.lua")
        local b = compile(rt, "task int b() { return 2; }\n", "flags_b.lua",
          { debug = true, include_dirs = { inc } })
        local c = compile(rt, "task int c() { return 3; }\n", "flags_c.lua")
        assert.equals(2, b.b():await(30))
        assert.equals(3, c.c():await(30))
        rt:close()
      end)
      -- each compile's line, with the part it compiled (the generated source's first line)
      local parts = {}
      for _, l in ipairs(lines) do
        local what = l:match("^PART (.-) ARGS ")
        if what and what:find("a task program", 1, true) then parts[#parts + 1] = " " .. l .. " " end
      end
      assert.equals(3, #parts, table.concat(lines, "\n"))
      -- a, then b (debug, the include directory), then c as a
      assert.truthy(parts[1]:find(" -O1 -g ", 1, true), parts[1])
      assert.is_nil(parts[1]:find(" -I " .. inc .. " ", 1, true), parts[1])
      assert.truthy(parts[2]:find(" -O0 -g ", 1, true), parts[2])
      assert.truthy(parts[2]:find(" -I " .. inc .. " ", 1, true), parts[2])
      assert.truthy(parts[3]:find(" -O1 -g ", 1, true), parts[3])
      assert.is_nil(parts[3]:find(" -I " .. inc .. " ", 1, true), parts[3])
      -- the executor's part is built for a debugger while a program is
      local exec = {}
      for _, l in ipairs(lines) do
        local what = l:match("^PART (.-) ARGS ")
        if what and what:find("the device runtime", 1, true) then exec[#exec + 1] = " " .. l .. " " end
      end
      assert.equals(2, #exec, table.concat(lines, "\n"))
      assert.truthy(exec[1]:find(" -O1 -g ", 1, true), exec[1])
      assert.truthy(exec[2]:find(" -O0 -g ", 1, true), exec[2])
    end)
end)

-- compiles and runs value() on backend in a fresh process with the cache in `cache`; the
-- options are Lua source
local function run_once(backend, cache, options)
  local paths = "LUA_PATH=" .. q(package.path) .. " LUA_CPATH=" .. q(package.cpath) .. " "
  local script = [[
    local mw = require "moonwarp"
    local rt = assert(mw.runtime { backend = "]] .. backend .. [[", workers = 2 })
    local p = assert(rt:compile('#include "opts_value.h"\ntask int value_of() { return V + H; }\n',
      "cache_opts.lua", ]] .. options .. [[))
    io.write(p.value_of():await(30))
    rt:close()
  ]]
  return support.run(paths .. "MOONWARP_CACHE_DIR=" .. q(cache) .. " luajit -e " .. q(script))
end

-- the entries of the cache folder whose names end in .ext
local function cache_entries(cache, ext)
  local list = {}
  local p = io.popen("ls " .. q(cache) .. " 2>/dev/null")
  for line in p:lines() do
    if line:sub(-#ext - 1) == "." .. ext then list[#list + 1] = cache .. "/" .. line end
  end
  p:close()
  return list
end

-- Rewrites a cache entry whole and well-formed (size and checksum right) around a payload that
-- is no image: what another version or a changed system could leave.
local function rewrite_entry(path, payload)
  local ffi = require "ffi"
  pcall(ffi.cdef, [[int crypto_generichash(unsigned char *out, size_t outlen, const unsigned char *in,
    unsigned long long inlen, const unsigned char *key, size_t keylen);]])
  local sodium = ffi.load("sodium")
  local digest = ffi.new("unsigned char[32]")
  assert.equals(0, sodium.crypto_generichash(digest, 32, payload, #payload, nil, 0))
  local size = ""
  for i = 0, 7 do size = size .. string.char(i < 4 and bit.band(bit.rshift(#payload, 8 * i), 255) or 0) end
  local f = assert(io.open(path, "wb"))
  f:write("MWC1\0\0\0\0", size, ffi.string(digest, 32), payload)
  f:close()
end

-- A cached image that the backend refuses is removed and compiled again (ext: the entries'
-- suffix on that backend).
local function check_refused_entry_rebuilt(backend, ext)
  local dir = temp_dir()
  local cache = dir .. "/cache"
  write(dir .. "/opts_value.h", "#define H 100\n")
  local options = ("{ include_dirs = { %q }, defines = { V = 5 } }"):format(dir)
  local status, out = run_once(backend, cache, options)
  assert.equals(0, status, out)
  local list = cache_entries(cache, ext)
  assert.equals(1, #list)
  local payload = "not an executor image"
  rewrite_entry(list[1], payload)
  status, out = run_once(backend, cache, options)
  assert.equals(0, status, out)
  assert.equals("105", out)
  local f = assert(io.open(list[1], "rb"))
  local rebuilt = f:read("*a")
  f:close()
  rm_dir(dir)
  assert.is_nil(rebuilt:find(payload, 1, true), "the entry was not built again")
  assert.is_true(#rebuilt > 1000)
end

describe("the compile cache with options #sim", function()
  local dir, cache
  before_each(function()
    dir = temp_dir()
    cache = dir .. "/cache"
  end)
  after_each(function() rm_dir(dir) end)

  it("keeps a build per set of options and per header content, and reuses each", function()
    write(dir .. "/opts_value.h", "#define H 100\n")
    local function opts(v, debug)
      return ("{ include_dirs = { %q }, defines = { V = %d }%s }"):format(dir, v,
        debug and ", debug = true" or "")
    end
    local function expect(options, want, n)
      local status, out = run_once("sim", cache, options)
      assert.equals(0, status, out)
      assert.equals(want, out)
      assert.equals(n, #cache_entries(cache, "so"))
    end
    expect(opts(1), "101", 1)
    expect(opts(2), "102", 2)  -- another define: not the first build
    expect(opts(1), "101", 2)  -- the same options: the first build again
    expect(opts(1, true), "101", 3) -- debug: a build of its own
    write(dir .. "/opts_value.h", "#define H 200\n")
    expect(opts(1), "201", 4)  -- the header changed: compiled again
    expect(opts(1), "201", 4)
  end)

  it("removes a cached build that does not load and builds it again", function()
    check_refused_entry_rebuilt("sim", "so")
  end)
end)

describe("the compile cache on cuda #gpu", function()
  local ok, reason = support.cuda_available()
  if not ok then
    pending("skipped, no GPU: " .. reason)
    return
  end
  it("removes a cached cubin that the driver refuses and compiles it again", function()
    check_refused_entry_rebuilt("cuda", "cubin")
  end)
end)

describe("NVRTC with compile options, without a GPU #slow", function()
  local dir
  setup(function()
    dir = temp_dir()
    write(dir .. "/opts_flavour.h", "#define FLAVOUR_OF_HEADER 7\n")
  end)
  teardown(function() rm_dir(dir) end)

  local SRC = [[
#include "opts_flavour.h"
#if FLAVOUR != FLAVOUR_OF_HEADER
#error FLAVOUR is not the header's
#endif
task int flavour() { return FLAVOUR; }
]]

  it("compiles with a define and an include directory, and not without them", function()
    local cubin, err = mw.compile_cubin(SRC, { chunkname = "flavour.cu", include_dirs = { dir },
      defines = { FLAVOUR = 7 } })
    assert.is_string(cubin, err)
    assert.equals("\127ELF", cubin:sub(1, 4))
    local none, log, code = mw.compile_cubin(SRC, { chunkname = "flavour.cu", include_dirs = { dir },
      defines = { FLAVOUR = 8 } })
    assert.is_nil(none)
    assert.equals("ECOMPILE", code)
    assert.truthy(log:find("FLAVOUR is not the header's", 1, true), log)
    none, log, code = mw.compile_cubin(SRC, { chunkname = "flavour.cu", defines = { FLAVOUR = 7 } })
    assert.is_nil(none)
    assert.truthy(log:find("opts_flavour.h", 1, true), log)
  end)

  it("gives full debug information with debug = true, line information only without", function()
    local opts = { chunkname = "debug.cu" }
    local plain = assert(mw.compile_cubin(support.FIB, opts))
    opts.debug = true
    local debug = assert(mw.compile_cubin(support.FIB, opts))
    assert.truthy(plain:find(".debug_line", 1, true))
    assert.is_nil(plain:find(".debug_info", 1, true))
    assert.truthy(debug:find(".debug_info", 1, true))
  end)

  -- a task's parameters and locals fit in a frame of the runtime's frame_bytes: a program that
  -- needs bigger frames compiles for a runtime that has them, as mw.runtime{frame_bytes=} says
  it("compiles for the frames of frame_bytes, and refuses a task too big for them at its line", function()
    local big = "task long big(int n) {\n  local long a[40];\n  a[0] = n;\n  return a[0];\n}\n"
    local none, log, code = mw.compile_cubin(big, { chunkname = "frames.cu" })
    assert.is_nil(none)
    assert.equals("ECOMPILE", code)
    assert.truthy(log:find("task big: its parameters and locals do not fit in a frame; raise frame_bytes", 1, true), log)
    assert.truthy(log:find("frames.cu(1)", 1, true), log)
    local cubin, err = mw.compile_cubin(big, { chunkname = "frames.cu", frame_bytes = 512 })
    assert.is_string(cubin, err)
    assert.equals("\127ELF", cubin:sub(1, 4))
  end)

  it("reports a define that breaks the task code at the user's file and line", function()
    local cubin, log, code = mw.compile_cubin("task int f(int x) {\n  return x + N;\n}\n",
      { chunkname = "nvrtc_define.cu", defines = { N = "oops(" } })
    assert.is_nil(cubin)
    assert.equals("ECOMPILE", code)
    assert.truthy(log:find("nvrtc_define.cu(2)", 1, true), log)
    assert.is_nil(log:find("moonwarp.cu", 1, true), log) -- NVRTC's tally names the generated file
    assert.truthy(log:find("errors detected.", 1, true), log)
  end)
end)
