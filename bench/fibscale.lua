-- fibscale.lua - fib at several sizes on one runtime: how the tasks per second grow with the
-- work (a tree too small for the workers shows its start and tail; a large one, what the
-- workers sustain), with the steals of a run beside. bench/NOTES.md v58 read the whole-GPU
-- bound from it (a worker CTA is four warps: 132 / 264 / 528 workers are 33 / 66 / 132 SMs).
--   luajit bench/fibscale.lua [backend [workers [n...]]]   (workers 0: the runtime's default;
--   n defaults to 26 28 30 32 34 on cuda, 14 16 18 on sim)
local mw = require "moonwarp"

local backend = arg[1] or "auto"
local workers = tonumber(arg[2] or "0")
if not workers or workers < 0 or workers % 1 ~= 0 then
  error(("fibscale.lua: workers must be a whole number (0: the runtime's default), got %q"):format(arg[2]), 0)
end
local sizes = {}
for i = 3, #arg do
  local n = tonumber(arg[i])
  if not n or n < 1 or n > 40 or n % 1 ~= 0 then
    error(("fibscale.lua: each n must be a whole number from 1 to 40, got %q"):format(arg[i]), 0)
  end
  sizes[#sizes + 1] = n
end
local rt = assert(mw.runtime { backend = backend, workers = workers > 0 and workers or nil, frame_bytes = 512 })
local here = (arg and arg[0] or "bench/fibscale.lua"):match("^(.*)/[^/]*$") or "."
local prog = assert(rt:compile(dofile(here .. "/tasks.lua"), "bench/tasks.lua"))
if #sizes == 0 then sizes = rt.backend == "cuda" and { 26, 28, 30, 32, 34 } or { 14, 16, 18 } end

local function fibn(k) local a, b = 0, 1 for _ = 1, k do a, b = b, a + b end return a end
prog.fib(12):await(60)
print(("fib at several sizes on %s, %d workers, %s"):format(rt.backend, rt:stats().workers, os.date("!%Y-%m-%d")))
print(("%-8s %12s %12s %12s %14s"):format("n", "tasks", "best ms", "M tasks/s", "steals a run"))
for _, n in ipairs(sizes) do
  local best, s0 = math.huge, rt:stats().steals
  for _ = 1, 3 do
    local t0 = mw.now()
    assert(prog.fib(n):await(120) == fibn(n), "fib result")
    best = math.min(best, mw.now() - t0)
  end
  local tasks = 2 * fibn(n + 1) - 1
  print(("%-8d %12d %12.3f %12.2f %14d"):format(n, tasks, best * 1e3, tasks / best / 1e6,
    math.floor((rt:stats().steals - s0) / 3)))
end
rt:close()
