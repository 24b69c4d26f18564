-- blocks.lua - the block-task examples timed: examples/matmul.lua's matmul and examples/softmax.lua's
-- softmax, each a bulk spawn of block tasks awaited by a driver task, checked once, then timed from
-- the host's spawn of the driver to its await. bench/suite.lua takes its rows from measure(); run
-- alone it prints them for one worker count (the kernels of the same algorithms are in
-- bench/baselines.cu):
--   luajit bench/blocks.lua [backend] [workers]      (default: auto, the runtime's default)
local mw = require "moonwarp"
local ffi = require "ffi"

local M = {}
local here = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "bench"

local function median(t)
  table.sort(t)
  return t[math.ceil(#t / 2)]
end
local function timed(reps, fn)
  local t = {}
  for r = 1, reps do
    local t0 = mw.now()
    fn()
    t[r] = mw.now() - t0
  end
  return median(t)
end

-- { { workload, figure, unit, value, "higher" }, ... } measured on runtime rt; small: sizes for sim
function M.measure(rt, small)
  local examples = here .. "/../examples/"
  local mm = assert(loadfile(examples .. "matmul.lua"))("--module")
  local sm = assert(loadfile(examples .. "softmax.lua"))("--module")
  local mprog = assert(rt:compile(mm.SOURCE, "examples/matmul.lua"))
  local sprog = assert(rt:compile(sm.SOURCE, "examples/softmax.lua"))
  local rows = {}
  local n = small and 128 or 2048
  local a, b = mm.inputs(n)
  local A, B, C = rt:buffer("float", n * n), rt:buffer("float", n * n), rt:buffer("float", n * n)
  A:write_from(a, n * n)
  B:write_from(b, n * n)
  mprog.matmul(A, B, C, n):await()
  local c = ffi.new("float[?]", n * n)
  C:read_into(c, n * n)
  assert(mm.check(n, a, b, c, 1024))
  local t = timed(small and 3 or 10, function() mprog.matmul(A, B, C, n):await() end)
  rows[#rows + 1] = { "block tasks", ("matmul %d x %d"):format(n, n), "GFLOP/s", 2 * n ^ 3 / t / 1e9, "higher" }
  A:close(); B:close(); C:close()
  local r, cols = small and 256 or 8192, small and 256 or 4096
  local x = sm.inputs(r, cols)
  local X, Y = rt:buffer("float", r * cols), rt:buffer("float", r * cols)
  X:write_from(x, r * cols)
  sprog.softmax(X, Y, r, cols):await()
  local y = ffi.new("float[?]", r * cols)
  Y:read_into(y, r * cols)
  assert(sm.check(r, cols, x, y, 64))
  t = timed(small and 3 or 10, function() sprog.softmax(X, Y, r, cols):await() end)
  rows[#rows + 1] = { "block tasks", ("softmax %d rows of %d"):format(r, cols), "GB/s", 2 * r * cols * 4 / t / 1e9, "higher" }
  X:close(); Y:close()
  return rows
end

if (...) == "--module" then return M end

local backend, workers = arg and arg[1], arg and tonumber(arg[2])
if arg and arg[2] and not (workers and workers >= 4 and workers % 1 == 0) then
  io.stderr:write(('workers must be a whole number of at least 4 (one worker CTA), got "%s"\n'):format(arg[2]))
  os.exit(2)
end
local rt = assert(mw.runtime { backend = backend, workers = workers })
local rows = M.measure(rt, rt.backend ~= "cuda")
local st = rt:stats()
print(("block tasks on %s, %d workers, %d of their bulk spawns run as grids launched from the device, %s"):format(
  rt.backend, st.workers, st.grids, os.date("!%Y-%m-%d")))
for _, r in ipairs(rows) do print(("%-28s %12.3f %s"):format(r[2], r[4], r[3])) end
rt:close()
