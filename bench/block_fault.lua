-- block_fault.lua - the block tasks' device fault in the suite's runtime, narrowed: runs
-- bench/blocks.lua's matmul and softmax in a runtime made as the suite makes it, or with one of
-- its differences from bench/blocks.lua alone, and says whether they ran:
--   luajit bench/block_fault.lua [backend] MODE [stack_bytes]
-- MODE: plain (default frames, block programs only), f512 (512-byte frames), tasks512 (512-byte
-- frames and bench/tasks.lua compiled and run first, as bench/suite.lua does; route needs the 512
-- bytes), cold512 (the same, its tasks not run before the block programs: the executor's first
-- launch has every program), after512 (the block programs first, measured, then bench/tasks.lua
-- compiled and run, then the block programs measured again in the image that has both), loaded512
-- (a small block program compiled first, so that the executor's first image is one linked with
-- the device runtime; then as tasks512), primed512 (the same, and its bulk block task run as a
-- grid launched from the device before the bench programs), dropped512 (primed512, its block
-- program then let go of, so that the image the bench programs bring has no device runtime)
local mw = require "moonwarp"
local backend, mode = arg[1], arg[2] or "tasks512"
if backend == "auto" then backend = nil end
local here = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "bench"
local modes = { plain = true, f512 = true, tasks512 = true, cold512 = true, after512 = true,
  loaded512 = true, primed512 = true, dropped512 = true }
assert(modes[mode], "mode: plain, f512, tasks512, cold512, after512, loaded512, primed512 or dropped512")
local stack = tonumber(arg[3]) -- each thread's stack budget beyond the kernel's own (default: 16 KiB)
assert(arg[3] == nil or stack, "stack_bytes: a number of bytes, got " .. tostring(arg[3]))
local rt = assert(mw.runtime { backend = backend, frame_bytes = mode ~= "plain" and 512 or nil,
  stack_bytes = stack })
local function tasks(run)
  local prog = assert(rt:compile(dofile(here .. "/tasks.lua"), "bench/tasks.lua"))
  if run then assert(prog.nop():await() == 1) end
end
if mode == "loaded512" or mode == "primed512" or mode == "dropped512" then
  local small = assert(rt:compile([[
task block void mark(int *out) { if (thread == 0) out[index] = (int)index + 1; }
]], "bench/block_fault.lua"))
  if mode ~= "loaded512" then
    local n = 4096
    local out = rt:buffer("int", n)
    assert(small.mark:bulk(n, out):await(60) == nil)
    local got = out:read()
    for i = 1, n do assert(got[i] == i, "mark " .. i) end
    local st = rt:stats()
    print(("primed: %d grids launched from the device"):format(st.grids))
  end
  if mode == "dropped512" then -- let go of: the next compile leaves it out of the image
    small = nil
    collectgarbage()
    collectgarbage()
  end
end
if mode ~= "plain" and mode ~= "f512" and mode ~= "after512" then tasks(mode ~= "cold512") end
local blocks = assert(loadfile(here .. "/blocks.lua"))("--module")
local ok, rows = pcall(blocks.measure, rt, rt.backend ~= "cuda")
local function report(what)
  local got, st = pcall(rt.stats, rt) -- a runtime that faulted may not answer
  print(("%s, %s%s%s: %s, %s grids launched from the device"):format(rt.backend, mode,
    stack and (", stack_bytes " .. stack) or "", what, ok and "ran" or ("FAILED: " .. tostring(rows)),
    got and st and tostring(st.grids) or "?"))
  if ok then
    for _, r in ipairs(rows) do print(("  %-28s %12.3f %s"):format(r[2], r[4], r[3])) end
  end
end
report(mode == "after512" and " (before the bench programs)" or "")
if ok and mode == "after512" then
  ok, rows = pcall(tasks, true)
  if ok then ok, rows = pcall(blocks.measure, rt, rt.backend ~= "cuda") end
  report(" (with the bench programs)")
end
pcall(rt.close, rt)
os.exit(ok and 0 or 1)
