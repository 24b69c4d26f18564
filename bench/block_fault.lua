-- block_fault.lua - the block tasks' device fault in the suite's runtime, narrowed: runs
-- bench/blocks.lua's matmul and softmax in a runtime made as the suite makes it, or with one of
-- its two differences from bench/blocks.lua alone (512-byte frames; the bench programs loaded
-- first), and says whether they ran:
--   luajit bench/block_fault.lua [backend] plain|f512|tasks512 [stack_bytes]
--   (plain: default frames, block programs only; f512: 512-byte frames; tasks512: 512-byte frames
--    and bench/tasks.lua first, as bench/suite.lua does; route needs the 512 bytes)
local mw = require "moonwarp"
local backend, mode = arg[1], arg[2] or "tasks512"
if backend == "auto" then backend = nil end
local here = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "bench"
assert(mode == "plain" or mode == "f512" or mode == "tasks512", "mode: plain, f512 or tasks512")
local stack = tonumber(arg[3]) -- each thread's stack budget beyond the kernel's own (default: 16 KiB)
local rt = assert(mw.runtime { backend = backend, frame_bytes = mode ~= "plain" and 512 or nil,
  stack_bytes = stack })
if mode == "tasks512" then
  local prog = assert(rt:compile(dofile(here .. "/tasks.lua"), "bench/tasks.lua"))
  assert(prog.nop():await() == 1)
end
local blocks = assert(loadfile(here .. "/blocks.lua"))("--module")
local ok, rows = pcall(blocks.measure, rt, rt.backend ~= "cuda")
local got, st = pcall(rt.stats, rt) -- a runtime that faulted may not answer
print(("%s, %s%s: %s, %s grids launched from the device"):format(rt.backend, mode,
  stack and (", stack_bytes " .. stack) or "", ok and "ran" or ("FAILED: " .. tostring(rows)), got and tostring(st.grids) or "?"))
if ok then
  for _, r in ipairs(rows) do print(("  %-28s %12.3f %s"):format(r[2], r[4], r[3])) end
end
pcall(rt.close, rt)
os.exit(ok and 0 or 1)
