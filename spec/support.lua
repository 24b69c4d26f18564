-- support.lua - helpers shared by the specs: which backends to run against, compiling a
-- program that must compile, and running a command.
local mw = require "moonwarp"

local support = {}

--- The program most specs start from: recursive fib, spawning and awaiting on the device.
support.FIB = [[
task long fib(int n) {
  local future a, b;
  if (n < 2) return n;
  a = spawn(fib, n - 1);
  b = spawn(fib, n - 2);
  await_all(a, b);
  return value(a) + value(b);
}
]]

--- A program of nkinds tiny tasks k0 .. k<nkinds-1> (k<j>(x) returns x + j) and sweep(x, reps),
-- which spawns, awaits and sums every colliding kind in turn, reps times; the colliding kinds
-- (5 + 32 j: they share an entry of a warp's counter cache, 32 entries, and of a worker's device
-- entries, 64) come back as a list. sweep(x, reps) returns reps * (#colliding * x + their sum).
function support.kinds_program(nkinds)
  local colliding = {}
  for k = 5, nkinds - 1, 32 do colliding[#colliding + 1] = k end
  local parts = {}
  for k = 0, nkinds - 1 do parts[#parts + 1] = ("task int k%d(int x) { return x + %d; }"):format(k, k) end
  parts[#parts + 1] = [[
task long sweep(int x, int reps) {
  local future f;
  local long s;
  local int r;
  s = 0;
  for (r = 0; r < reps; ++r) {]]
  for _, k in ipairs(colliding) do
    parts[#parts + 1] = ("    f = spawn(k%d, x); await(f); s += (long)value(f); release(f);"):format(k)
  end
  parts[#parts + 1] = "  }\n  return s;\n}"
  return table.concat(parts, "\n"), colliding
end

--- A dependent chain: chain(n) spawns and awaits leaf n times, one after the other, and sums
-- what they return (n * (n - 1) / 2).
support.CHAIN = [[
task int leaf(int x) { return x; }
task long chain(int n) {
  local future f;
  local int i;
  local long s;
  s = 0;
  for (i = 0; i < n; ++i) {
    f = spawn(leaf, i);
    await(f);
    s += (long)value(f);
    release(f);
  }
  return s;
}
]]

--- down(n): the depth n, counted one spawn and await at a time, each spawn nested in the one
-- before it (a self-contained task: its spawns run in place while no worker is idle).
support.DOWN = [[
task long down(int n) {
  local future f;
  if (n == 0) return 0;
  f = spawn(down, n - 1);
  await(f);
  return value(f) + 1;
}
]]

--- hold(flag) waits for *flag and returns it, for at most about a second (so that a runtime
-- that faulted, or a spec that forgot the flag, can still stop).
support.HOLD = [[
task int hold(int *flag) {
  long long t0 = clock64();
  while (*(volatile int *)flag == 0 && clock64() - t0 < 2000000000LL)
    __nanosleep(10000);
  return *(volatile int *)flag;
}
]]

--- hold_long(flag) returns *flag once the host writes it (lane 0 watches), for at most about a
-- minute: for specs whose waits are long on purpose. Bounded by its naps, not by clock64(): on
-- sim that is the host's TSC, read by a warp whose thread may move between CPUs.
support.HOLD_LONG = [[
task int hold(int *flag) {
  int v = 0;
  if (lane == 0)
    for (int i = 0; i < 600000 && (v = *(volatile int *)flag) == 0; ++i) __nanosleep(100000);
  return __shfl_sync(0xffffffffu, v, 0);
}
]]

local cuda_checked, cuda_ok, cuda_reason

--- Whether the cuda backend can be used here, and if not why (mw.runtime's message). The
-- answer is found once, with a probe runtime that is closed straight away.
function support.cuda_available()
  if not cuda_checked then
    cuda_checked = true
    local rt, err, code = mw.runtime { backend = "cuda" }
    if rt then
      rt:close()
      cuda_ok = true
    else
      cuda_ok, cuda_reason = false, string.format("%s (%s)", tostring(err), tostring(code))
    end
  end
  return cuda_ok, cuda_reason
end

--- The backends a spec runs against: always "sim", and "cuda" where a GPU is usable.
function support.backends()
  local list = { "sim" }
  if support.cuda_available() then list[#list + 1] = "cuda" end
  return list
end

--- Runs fn(backend) inside a describe block per backend; the cuda block carries the tag #gpu,
-- the sim block #sim (a GPU run leaves sim out with --exclude-tags=sim).
-- Without a usable GPU the cuda block is reported as skipped (pending), with the reason, so it
-- is neither silent nor counted as passing.
-- Call it where describe() may be called (a spec file or a describe block): busted's functions
-- live in the caller's environment, not in the globals.
function support.each_backend(fn)
  local env = getfenv(2)
  for _, backend in ipairs(support.backends()) do
    env.describe(backend .. (backend == "cuda" and " #gpu" or " #sim"), function() fn(backend) end)
  end
  local ok, reason = support.cuda_available()
  if not ok then env.pending("cuda #gpu: skipped, no GPU: " .. reason) end
end

--- The factor by which a spec's "at once" bounds stretch: $MW_SPEC_TIME_SCALE (1 unless set;
-- scripts/gpu.sh sets it under compute-sanitizer, which runs the device many times slower).
support.time_scale = tonumber(os.getenv("MW_SPEC_TIME_SCALE")) or 1

--- it(name, fn) for a spec of one build ("parts", "one_unit", "tiered"), or pending with the
-- reason when $MOONWARP_BUILD forces another (it overrides the runtime's option). Call it where
-- it() may be called.
function support.it_build(build, name, fn)
  local env = getfenv(2)
  local forced = os.getenv("MOONWARP_BUILD")
  if forced and forced ~= "" and forced ~= build then
    env.pending(name .. " (MOONWARP_BUILD=" .. forced .. " overrides build = " .. build .. ")")
  else
    env.it(name, fn)
  end
end

--- A runtime on backend, which must open. Inside a test it is also closed when the test ends,
-- whatever the test did (its own close first): a test that fails before its close must not leave
-- the device's one executor taken from the tests after it.
local opened = {}
local function close_opened()
  for i = #opened, 1, -1 do
    pcall(opened[i].close, opened[i])
    opened[i] = nil
  end
end
function support.runtime(backend, opts)
  local o = { backend = backend }
  for k, v in pairs(opts or {}) do o[k] = v end
  local rt, err, code = mw.runtime(o)
  assert(rt, string.format("runtime %s: %s (%s)", backend, tostring(err), tostring(code)))
  local finally = getfenv(2).finally
  if type(finally) == "function" and pcall(finally, close_opened) then opened[#opened + 1] = rt end
  return rt
end

--- Compiles source on rt; the program must compile (the compiler's log is the error).
function support.compile(rt, source, chunkname)
  local prog, err, code = rt:compile(source, chunkname)
  assert(prog, string.format("compile %s failed (%s):\n%s", chunkname or "<string>",
    tostring(code), tostring(err)))
  return prog
end

--- Waits, processing completions, until pred() holds; fails naming what after limit seconds
-- (30 by default).
function support.wait_for(what, pred, limit)
  local t0 = mw.now()
  while not pred() do
    assert(mw.now() - t0 < (limit or 30), "timed out waiting for " .. what)
    mw.run(0.001)
  end
end

--- pcall returning only the error message (nil when fn did not raise).
function support.error_of(fn, ...)
  local ok, err = pcall(fn, ...)
  if ok then return nil end
  return tostring(err)
end

--- Runs a shell command; returns its exit status (a number) and its output (stdout+stderr).
function support.run(command)
  local marker = "__exit_status="
  local p = assert(io.popen("(" .. command .. ") 2>&1; echo " .. marker .. "$?"))
  local out = p:read("*a")
  p:close()
  local status = tonumber(out:match(marker .. "(%d+)%s*$"))
  out = out:gsub(marker .. "%d+%s*$", "")
  return status, out
end

--- Sets (value a string) or unsets (value nil) an environment variable of this process, for the
-- settings the library reads at the moment it needs them.
function support.setenv(name, value)
  local ffi = require "ffi"
  pcall(ffi.cdef, "int setenv(const char *, const char *, int); int unsetenv(const char *);")
  if value == nil then
    assert(ffi.C.unsetenv(name) == 0)
  else
    assert(ffi.C.setenv(name, value, 1) == 0)
  end
end

--- The environment words that give a command run by support.run this process's Lua paths (the
-- build under test): "LUA_PATH=... LUA_CPATH=... ".
function support.lua_paths()
  return "LUA_PATH=" .. support.shell_quote(package.path) .. " LUA_CPATH="
    .. support.shell_quote(package.cpath) .. " "
end

--- Quotes s for the shell.
function support.shell_quote(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

--- A fresh directory under the system's temporary one (remove it with support.rm_dir).
function support.temp_dir()
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p " .. support.shell_quote(dir)) == 0)
  return dir
end

function support.rm_dir(dir) os.execute("rm -rf " .. support.shell_quote(dir)) end

return support
