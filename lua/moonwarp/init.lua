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
--   runtime  rt.backend, rt.faulted, rt:compile(src [, chunkname]), rt:compile_file(path),
--            rt:buffer(type, n), rt:stats(), rt:close()
--   program  prog.<task>, prog:task(name), prog:tasks()
--   task     task(...) spawns; task:bulk(n, ...) spawns n instances (index 0..n-1);
--            task.name, task.signature, task.params ({name=, type=} each), task.result
--   future   f:await([timeout_s]), f:done(), f:state(), f:cancel(), f:close()
--   buffer   buf:write(t [, first]), buf:read([first [, count]]), buf:close(),
--            #buf, buf.type, buf.count, buf.size, buf.address
-- Every object has __tostring, and __gc behind its explicit close; closing a runtime closes
-- its programs, futures and buffers, and any later use of them raises "runtime is closed".
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

--- mw.any(f1, f2, ...): index, value of the first future to complete.
M.any = core.any

--- mw.now(): a monotonic clock in seconds, for timing.
M.now = core.now

--- mw.generate(source [, {chunkname=, backend=}]): the device source generated for a program
-- (what NVRTC or the host compiler is given). nil, message, code when it cannot be read.
M.generate = core.generate

--- mw.compile_cubin(source [, {chunkname=, arch="sm_90"}]): compiles a program with NVRTC
-- into a cubin (a string), with no GPU needed. nil, log, code on failure.
M.compile_cubin = core.compile_cubin

--- Lua coroutines that await device futures: mw.async(fn, ...), mw.run([timeout]), mw.poll().
-- See moonwarp/async.lua for the contract with outside event loops.
local async = require "moonwarp.async"
async.install(debug.getregistry()["moonwarp.future"], core.now)
M.async = async.async
M.run = async.run
M.poll = async.poll

--- The element types rt:buffer accepts, and their aliases.
M.buffer_types = {
  "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float", "double",
  int = "int32", long = "int64", char = "int8", bool = "uint8",
}

return M
