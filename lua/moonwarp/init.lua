--- moonwarp: device coroutines for Lua, run by a persistent GPU executor (or its CPU sim).
--
-- Loading this module needs no GPU, driver or CUDA toolkit: those are opened when a runtime
-- asks for them, and a runtime that cannot get them says what is missing.
--
--   local mw = require "moonwarp"
--   local rt = assert(mw.runtime{ backend = "auto" })   -- "cuda", "sim"; device, capacity, ...
--   local prog = assert(rt:compile[[
--     task long fib(int n) {
--       local future a, b;
--       if (n < 2) return n;
--       a = spawn(fib, n - 1);
--       b = spawn(fib, n - 2);
--       await_all(a, b);
--       return value(a) + value(b);
--     }
--   ]])
--   print(prog.fib(20):await())                 --> 6765
--   print(mw.join(prog.fib(10), prog.fib(11)))  --> 55  89
--   rt:close()
--
-- Conventions: misuse (wrong argument types, unknown options or tasks, a closed runtime)
-- raises an error naming the argument; failures a script may want to handle (no GPU, a
-- compile error, a timeout, capacity) return nil, message, code, where code is the name of
-- the error ("ENODEV", "ECOMPILE", "ETIMEDOUT", ...). A task's own failure is raised by
-- f:await() with the task's message ("fib: message").
--
-- Numbers: an integer parameter takes a Lua number (exact up to 2^53) or an int64_t/uint64_t
-- cdata (5LL, 0xffffffffffffffffULL: exact, range-checked). A 64-bit result comes back as a
-- Lua number while it is exact as one (|v| <= 2^53), else as an int64_t or uint64_t cdata.
-- Buffer elements, addresses and counters travel as Lua numbers.
--
-- Objects:
--   runtime  rt.backend, rt.faulted, rt:compile(src [, chunkname] [, options]) (or
--            rt:compile(src, options)), rt:compile_file(path [, options]), rt:buffer(type, n),
--            rt:stats(), rt:close(), rt:fd() (readable while completions are pending, for
--            event loops), rt:poll() (processes them; drains the fd)
--   options  of a compile: { defines = { NAME = number | string | boolean } (this program's
--            macros: true is 1, false leaves NAME undefined), include_dirs = { dir, ... },
--            debug = true (NVRTC -G, sim -g -O0), verbose = true (what it compiles and how
--            long it took, on stderr; also $MOONWARP_VERBOSE=1) }; include_dirs and debug
--            apply to the runtime's whole compile (all its programs are compiled together)
--   program  prog.<task>, prog:task(name), prog:tasks()
--   task     task(...) spawns; task:bulk(n, ...) spawns n instances (index 0..n-1);
--            task:spawn_many(n, args [, {futures = false}]) spawns n times (args(i) or args[i]);
--            task.name, task.signature, task.params ({name=, type=} each), task.result
--   future   f:await([timeout_s]), f:done(), f:state(), f:cancel(), f:close()
--   buffer   buf:write(t or s [, first]), buf:read([first [, count]]), buf:read_string(...),
--            buf:write_from(ptr, n [, first]), buf:read_into(ptr, n [, first]), buf:ptr(),
--            buf:close(), #buf, buf.type, buf.count, buf.size, buf.address, buf.backend
-- Every object has __tostring, and __gc behind its explicit close; closing a runtime closes
-- its programs, futures and buffers, and any later use of them raises "runtime is closed".
-- Waits (await, join, any, run, a spawn waiting for capacity) nap rather than spin once they
-- grow long, and Ctrl-C raises "interrupted" at them (the futures stay valid).
local core = require "moonwarp.core"

-- 64-bit integers that Lua numbers cannot hold travel as LuaJIT FFI cdata (see Numbers above)
do
  local ok, ffi = pcall(require, "ffi")
  if ok then
    local i64, u64 = ffi.typeof("int64_t"), ffi.typeof("uint64_t")
    local two32 = ffi.new("uint64_t", 4294967296)
    core._int64_helpers(function(v)
      local signed = ffi.istype(i64, v)
      if not signed and not ffi.istype(u64, v) then return end
      local u = ffi.cast(u64, v)
      return tonumber(u / two32), tonumber(u % two32), signed
    end, function(hi, lo, signed)
      local u = ffi.new(u64, hi) * two32 + lo
      return signed and ffi.cast(i64, u) or u
    end)
  end
end

local M = {}

--- The library's version string.
M.version = core.version

--- mw.runtime{ backend=, device=, capacity=, host_futures=, workers=, frame_bytes= }
-- Returns a runtime, or nil, message, code (e.g. "ENODEV" when backend = "cuda" finds no GPU).
M.runtime = core.runtime

--- mw.join(f1, f2, ...): waits for all; their values in order; raises the first failure.
M.join = core.join

--- mw.any(f1, f2, ... [, timeout_s]): index, value of the first future to complete.
M.any = core.any

--- mw.now(): a monotonic clock in seconds, for timing.
M.now = core.now

--- mw.generate(source [, {chunkname=, backend=}]): the device source generated for a program
-- (what NVRTC or the host compiler is given). nil, message, code when it cannot be read.
M.generate = core.generate

--- mw.compile_cubin(source [, {chunkname=, arch="sm_90", frame_bytes=, defines=, include_dirs=, debug=}]):
-- compiles a program with NVRTC into a cubin (a string), with no GPU needed, with the compile
-- options of rt:compile, for runtimes of frame_bytes (default 256). nil, log, code on failure.
M.compile_cubin = core.compile_cubin

--- Lua coroutines that await device futures: mw.async(fn, ...), mw.run([timeout]), mw.poll().
-- See moonwarp/async.lua for the contract with outside event loops.
local async = require "moonwarp.async"
async.install(debug.getregistry()["moonwarp.future"], core.now, core)
M.async = async.async
M.run = async.run
M.poll = async.poll

--- Buffers and FFI memory, without Lua tables in between (LuaJIT's FFI):
--   buf:write_from(src, count [, first])  count elements' bytes from src, an FFI pointer or
--                                         array, into elements first.. (1-based)
--   buf:read_into(dst, count [, first])   the other way
--   buf:ptr()                             the elements as a typed FFI pointer where the host can
--                                         reach them (sim); nil, message, "EINVAL" on cuda
-- buf:write(s) and buf:read_string() take and give the raw bytes as a Lua string.
do
  local ok, ffi = pcall(require, "ffi")
  local methods = select(2, debug.getupvalue(debug.getregistry()["moonwarp.buffer"].__index, 1))
  local ctypes = {
    int8 = "int8_t", uint8 = "uint8_t", int16 = "int16_t", uint16 = "uint16_t", int32 = "int32_t",
    uint32 = "uint32_t", int64 = "int64_t", uint64 = "uint64_t", float = "float", double = "double",
  }
  local function address(fname, p, count, first, buf)
    if type(p) ~= "cdata" then
      error(("bad argument #1 to '%s' (FFI pointer or array expected, got %s)"):format(fname, type(p)), 3)
    end
    local ct = tostring(ffi.typeof(p)) -- "ctype<float *>", "ctype<float [100]>"
    local okp, vp = pcall(ffi.cast, "const void *", p)
    if not okp or not (ct:find("*", 1, true) or ct:find("[", 1, true)) then
      error(("bad argument #1 to '%s' (FFI pointer or array expected, got %s)"):format(fname,
        tostring(ffi.typeof(p))), 3)
    end
    if vp == nil and count ~= 0 then
      error(("bad argument #1 to '%s' (a NULL pointer)"):format(fname), 3)
    end
    if type(count) ~= "number" or count < 0 or count % 1 ~= 0 then
      error(("bad argument #2 to '%s' (a count of elements expected, got %s)"):format(fname,
        tostring(count)), 3)
    end
    first = first or 1
    if type(first) ~= "number" or first < 1 or first % 1 ~= 0 or first + count - 1 > buf.count then
      error(("bad argument #3 to '%s' (%s values from element %s overrun the %d elements of the "
        .. "buffer)"):format(fname, tostring(count), tostring(first), buf.count), 3)
    end
    -- an array knows its size: the elements must fit in it
    if ct:find("[", 1, true) then
      local need = count * ffi.sizeof(ctypes[buf.type])
      if need > ffi.sizeof(p) then
        error(("bad argument #2 to '%s' (%d elements of %s need %d bytes, the array has %d)")
          :format(fname, count, buf.type, need, ffi.sizeof(p)), 3)
      end
    end
    return tonumber(ffi.cast("uintptr_t", vp))
  end
  if ok and methods then
    methods.write_from = function(buf, src, count, first)
      return buf:_copy(address("write_from", src, count, first, buf), count, first, true)
    end
    methods.read_into = function(buf, dst, count, first)
      return buf:_copy(address("read_into", dst, count, first, buf), count, first, false)
    end
    methods.ptr = function(buf)
      if buf.backend ~= "sim" then
        return nil, "buf:ptr() needs memory the host can reach: the sim backend only", "EINVAL"
      end
      return ffi.cast(ctypes[buf.type] .. " *", buf.address)
    end
  end
end

--- The element types rt:buffer accepts, and their aliases.
M.buffer_types = {
  "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float", "double",
  int = "int32", long = "int64", char = "int8", bool = "uint8",
}

return M
