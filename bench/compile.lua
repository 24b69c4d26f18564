-- compile.lua - how long a program load takes from source: the benchmarks' programs
-- (bench/tasks.lua) parsed, generated and compiled (NVRTC on cuda, the C++ compiler on sim), the
-- executor relaunched. Run it with MOONWARP_NO_CACHE=1 for the compiler's time (gpu.sh does),
-- and with MOONWARP_DUMP_DIR=dir to keep the generated source for ptxas -v and cuobjdump.
--   luajit bench/compile.lua [backend]
local mw = require "moonwarp"

local rt = assert(mw.runtime { backend = arg[1], frame_bytes = 512 })
local here = (arg and arg[0] or "bench/compile.lua"):match("^(.*)/[^/]*$") or "."
local source = dofile(here .. "/tasks.lua")
local t0 = mw.now()
local prog = assert(rt:compile(source, "bench/tasks.lua"))
local took = mw.now() - t0
assert(prog.fib(10):await(60) == 55, "the compiled program runs")
print(("compile of the bench programs on %s (cache %s): %.2f s"):format(rt.backend,
  os.getenv("MOONWARP_NO_CACHE") == "1" and "off" or "on", took))
rt:close()
