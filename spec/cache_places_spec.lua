-- cache_places_spec.lua - the compile cache does not depend on where a program's source sits
-- (the script's path, the line it starts on): the same source from another file, folder or line
-- loads the first build; and every message still names the user's own file and line.
local mw = require "moonwarp"
local support = require "spec.support"

local q = support.shell_quote
local ffi = require "ffi"
pcall(ffi.cdef, "int chdir(const char *); char *getcwd(char *, size_t);")

-- t: lanes 0-15 spawn at line 5, lanes 16-31 sync at line 7 (a divergence the sim sees);
-- s: a spawn at line 13 whose argument differs per lane; bad: an assert at line 17
local SRC = [==[
task int leaf(int x) { return x; }
task int t(int u) {
  local future f;
  if (lane < 16)
    f = spawn(leaf, 1);
  else
    __syncwarp();
  return 0;
}
task int s(int u) {
  local future f;
  u = u + 1;
  f = spawn(leaf, lane);
  await(f);
  return value(f);
}
task int bad(int u) { assert(u == 0); return u; }
]==] .. support.FIB -- fib from line 18, its await_all at line 23

-- a helper with an error at line 2, a task with one at line 4
local BAD = [==[
static int helper(int x) {
  return x + undefined_helper_name;
}
task int broken(int x) { return x + undefined_task_name; }
]==]

local temp_dir, rm_dir = support.temp_dir, support.rm_dir

-- Writes dir/rel: a script that compiles `source` (given without a chunkname, so the compile
-- finds it in the script) on the runtime it is given, its first line `pad` + 3 of the script;
-- options: Lua source of the compile's options table, if any.
local function write_script(dir, rel, pad, source, options)
  assert(os.execute("mkdir -p " .. q((dir .. "/" .. rel):match("^(.*)/"))) == 0)
  local f = assert(io.open(dir .. "/" .. rel, "w"))
  -- not a tail call: the compile looks at its caller
  f:write("local rt = ...\n", ("-- padding\n"):rep(pad), "local p, err, code = rt:compile([[\n",
    source, "]]", options and ", " .. options or "", ")\nreturn p, err, code\n")
  f:close()
end

-- Runs dir/rel on rt from dir (so the script's name, and every message, is the short rel):
-- the program, or nil, message, code.
local function compile_at(rt, dir, rel)
  local buf = ffi.new("char[4096]")
  local cwd = ffi.string(assert(ffi.C.getcwd(buf, 4096)))
  assert(ffi.C.chdir(dir) == 0)
  local ok, p, err, code = pcall(function() return assert(loadfile(rel))(rt) end)
  ffi.C.chdir(cwd)
  assert(ok, p)
  return p, err, code
end

-- the entries of the cache folder (its builds)
local function cache_entries(cache)
  local n = 0
  local p = io.popen("ls " .. q(cache) .. " 2>/dev/null")
  for _ in p:lines() do n = n + 1 end
  p:close()
  return n
end

-- where each script holds SRC: its first line is the script's line pad + 3
local PLACES = { { rel = "one.lua", pad = 0 }, { rel = "sub/dir/two.lua", pad = 40 } }
local function line_in(place, line) return place.pad + 2 + line end

-- whether a compiler's message names file and line: "file:3:" (gcc) or "file(3)" (NVRTC)
local function names_line(err, file, line)
  return err:find(file .. ":" .. line, 1, true) or err:find(file .. "(" .. line .. ")", 1, true)
end

-- A describe block's folder: at setup a fresh one, its cache/ the compile cache, with the scripts
-- of SRC at PLACES and what more(dir, place) writes for each; at teardown the cache setting is
-- put back and the folder goes. The table's dir and cache are set once setup has run.
local function folder_with_scripts(more)
  local f, old_cache = {}, nil
  setup(function()
    f.dir = temp_dir()
    f.cache = f.dir .. "/cache"
    old_cache = os.getenv("MOONWARP_CACHE_DIR")
    support.setenv("MOONWARP_CACHE_DIR", f.cache)
    for _, place in ipairs(PLACES) do
      write_script(f.dir, place.rel, place.pad, SRC)
      more(f.dir, place)
    end
  end)
  teardown(function()
    support.setenv("MOONWARP_CACHE_DIR", old_cache)
    rm_dir(f.dir)
  end)
  return f
end

support.each_backend(function(backend)
  local f = folder_with_scripts(function(dir, place)
    write_script(dir, "bad_" .. place.rel:gsub("/", "_"), place.pad, BAD)
  end)

  it("reuses the build of a project whose include folder moved, and not once a header changed",
    function()
      local function project(root, value)
        assert(os.execute("mkdir -p " .. q(root .. "/inc")) == 0)
        local h = assert(io.open(root .. "/inc/answer.h", "w"))
        h:write("static __device__ int answer() { return ", value, "; }\n")
        h:close()
      end
      local src = '#include "answer.h"\ntask int ask() { return answer(); }\n'
      local function load(root)
        local rt = support.runtime(backend)
        -- closed whatever happens: cuda runs one executor per device in a process
        local ok, v = pcall(function()
          local p = assert(rt:compile(src, "ask.lua", { include_dirs = { root .. "/inc" } }))
          return p.ask():await(30)
        end)
        rt:close()
        assert(ok, v)
        return v
      end
      project(f.dir .. "/here", 42)
      assert.equals(42, load(f.dir .. "/here"))
      local builds = cache_entries(f.cache)
      -- the same project, moved: the same build
      assert(os.execute("mv " .. q(f.dir .. "/here") .. " " .. q(f.dir .. "/there")) == 0)
      assert.equals(42, load(f.dir .. "/there"))
      assert.equals(builds, cache_entries(f.cache))
      -- an edited header: a new build, with the new value
      project(f.dir .. "/there", 43)
      assert.equals(43, load(f.dir .. "/there"))
      assert.is_true(cache_entries(f.cache) > builds)
    end)

  it("reuses the build of the same source from another file, folder and line", function()
    local builds
    for i, place in ipairs(PLACES) do
      local rt = support.runtime(backend)
      local t0 = mw.now()
      local p = assert(compile_at(rt, f.dir, place.rel))
      local took = mw.now() - t0
      assert.equals(55, p.fib(10):await(30))
      rt:close()
      if i == 1 then
        builds = cache_entries(f.cache)
        assert.is_true(builds >= 1)
      else -- a cache hit: nothing new in the cache, and no compiler's time
        assert.equals(builds, cache_entries(f.cache))
        assert.is_true(took < 1, ("the second compile took %.2f s"):format(took))
      end
    end
    -- the same source under a chunkname of its own, from its first line: the same build again
    local rt = support.runtime(backend)
    local p = support.compile(rt, SRC, "@elsewhere/named.cu")
    assert.equals(55, p.fib(10):await(30))
    rt:close()
    assert.equals(builds, cache_entries(f.cache))
  end)

  it("names each place's own file and line in compile errors", function()
    for _, place in ipairs(PLACES) do
      local rt = support.runtime(backend)
      local rel = "bad_" .. place.rel:gsub("/", "_")
      local p, err, code = compile_at(rt, f.dir, rel)
      rt:close()
      assert.is_nil(p)
      assert.equals("ECOMPILE", code)
      for _, line in ipairs { 2, 4 } do
        assert.truthy(names_line(err, rel, line_in(place, line)), err)
      end
      assert.falsy(err:find("<mw-", 1, true), err)
    end
  end)

  it("names each program's own file when programs of several files are loaded at once", function()
    local rt = support.runtime(backend)
    local one = assert(compile_at(rt, f.dir, PLACES[1].rel))
    local two = assert(compile_at(rt, f.dir, PLACES[2].rel))
    assert.equals(55, one.fib(10):await(30))
    assert.equals(8, two.fib(6):await(30))
    local p, err = compile_at(rt, f.dir, "bad_" .. PLACES[2].rel:gsub("/", "_"))
    assert.is_nil(p)
    assert.truthy(names_line(err, "bad_sub_dir_two.lua", line_in(PLACES[2], 4)), err)
    assert.falsy(err:find("one.lua", 1, true), err)
    rt:close()
  end)
end)

describe("sim's messages from a build made elsewhere #sim", function()
  local f = folder_with_scripts(function(dir, place)
    write_script(dir, "g/" .. place.rel, place.pad, SRC, "{ debug = true }")
  end)

  -- each place on a runtime of its own (the second loads the first's build), both on one, and
  -- each built for a debugger (which names the user's places itself)
  for _, how in ipairs { "alone", "one runtime", "debug" } do
    it("name each place's own file and lines (" .. how .. ")", function()
      local shared = how == "one runtime" and support.runtime("sim")
      for _, place in ipairs(PLACES) do
        local rt = shared or support.runtime("sim")
        local rel = (how == "debug" and "g/" or "") .. place.rel
        local p = assert(compile_at(rt, f.dir, rel))
        -- a divergence across call sites: both lanes' lines
        local err = support.error_of(function() return p.t(0):await(30) end)
        assert.truthy(err:find(rel .. ":" .. line_in(place, 5), 1, true), err)
        assert.truthy(err:find(rel .. ":" .. line_in(place, 7), 1, true), err)
        -- a spawn whose arguments differ between lanes: its line
        err = support.error_of(function() return p.s(0):await(30) end)
        assert.equals("s: spawn with different arguments per lane at line " .. line_in(place, 13),
          err)
        assert.is_false(rt.faulted)
        if not shared then rt:close() end
      end
      if shared then shared:close() end
    end)
  end

  it("name the place of a failed assert", function()
    for _, place in ipairs(PLACES) do
      local rt = support.runtime("sim")
      local p = assert(compile_at(rt, f.dir, place.rel))
      local err = support.error_of(function() return p.bad(1):await(30) end)
      rt:close()
      local want = ("assertion `u == 0' failed at %s:%d"):format(place.rel, line_in(place, 17))
      assert.truthy(err:find(want, 1, true), err)
    end
  end)

  it("name the user's line of an await in a trace", function()
    local json = require "dkjson"
    local place = PLACES[2]
    local rt = support.runtime("sim")
    local p = assert(compile_at(rt, f.dir, place.rel))
    local path = f.dir .. "/trace.json"
    assert(rt:trace_start())
    p.fib(8):await(30)
    assert(rt:trace_stop(path))
    rt:close()
    local fh = assert(io.open(path))
    local doc = assert(json.decode(fh:read("*a"), 1, nil))
    fh:close()
    local resumed = 0
    for _, e in ipairs(doc.traceEvents) do
      if e.ph == "X" and e.args and e.args.resume_line then
        assert.equals(line_in(place, 23), e.args.resume_line)
        resumed = resumed + 1
      end
    end
    assert.is_true(resumed > 0)
  end)
end)
