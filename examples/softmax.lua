-- softmax.lua - a row-wise softmax as block tasks: y[r] = exp(x[r] - max(x[r])) / sum(exp(x[r] - max(x[r]))),
-- one row a block-task instance, its 4 warps reducing through __shared__ memory and barriers; a
-- driver task spawns the rows in bulk and awaits them. Checked against the CPU.
--   luajit examples/softmax.lua [rows] [cols]        (default 1024 x 1024)
-- Loaded with loadfile(path)("--module") it runs nothing and returns { SOURCE = ..., check = ... }
-- (bench/suite.lua times the same tasks beside a standalone kernel of the same algorithm).
local M = {}

-- 128 threads a row: each strides over the row for its maximum, the warps combine theirs with
-- shuffles, then the 4 warps' through shared memory; the same for the sum of the exponentials;
-- then each writes its elements. bench/baselines.cu's softmax_row kernel is this algorithm as a
-- plain kernel (one 128-thread block a row).
M.SOURCE = [[
task block void softmax_row(const float *x, float *y, int cols) {
  __shared__ float part[4];
  const float *in = x + (long)index * cols;
  float *out = y + (long)index * cols;
  float m = -3.402823466e38f; // the lowest float
  for (int i = thread; i < cols; i += nthreads) m = fmaxf(m, in[i]);
  for (int o = 16; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if (lane == 0) part[warp] = m;
  barrier();
  m = fmaxf(fmaxf(part[0], part[1]), fmaxf(part[2], part[3]));
  barrier(); // every warp has read the maxima before part is written again
  float s = 0.0f;
  for (int i = thread; i < cols; i += nthreads) s += __expf(in[i] - m);
  for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (lane == 0) part[warp] = s;
  barrier();
  const float inv = 1.0f / (part[0] + part[1] + part[2] + part[3]);
  for (int i = thread; i < cols; i += nthreads) out[i] = __expf(in[i] - m) * inv;
}

// the driver: every row as one bulk spawn, awaited on the device
task int softmax(const float *x, float *y, int rows, int cols) {
  local future f;
  f = spawn_bulk(softmax_row, (unsigned)rows, x, y, cols);
  await(f);
  return rows;
}
]]

-- x of rows x cols, the same every run
function M.inputs(rows, cols)
  local ffi = require "ffi"
  local x = ffi.new("float[?]", rows * cols)
  for i = 0, rows * cols - 1 do x[i] = ((i * 37) % 101 - 50) / 10 end
  return x
end

-- compares y (an FFI float array) with the CPU's softmax at `samples` rows spread over all of
-- them (every row when samples is nil), within 1e-5 relative plus 1e-7 absolute (the device
-- sums in another order and uses the fast exponential); true, or false and the first wrong one
function M.check(rows, cols, x, y, samples)
  local total = samples and math.min(samples, rows) or rows
  for t = 0, total - 1 do
    local r = samples and math.floor(t * rows / total) or t
    local base, m, s = r * cols, -math.huge, 0
    for i = 0, cols - 1 do m = math.max(m, x[base + i]) end
    for i = 0, cols - 1 do s = s + math.exp(x[base + i] - m) end
    for i = 0, cols - 1 do
      local want, got = math.exp(x[base + i] - m) / s, y[base + i]
      if math.abs(got - want) > 1e-5 * want + 1e-7 then
        return false, ("y[%d][%d] = %.9g, want %.9g"):format(r, i, got, want)
      end
    end
  end
  return true
end

if (...) == "--module" then return M end

local mw = require "moonwarp"
local ffi = require "ffi"
local rows, cols = tonumber(arg and arg[1] or 1024), tonumber(arg and arg[2] or 1024)
for i, v in ipairs { rows or false, cols or false } do
  if not (v and v >= 1 and v % 1 == 0) then
    io.stderr:write(("usage: luajit examples/softmax.lua [rows] [cols]: whole numbers from 1, got %q\n"):format(tostring(arg[i])))
    os.exit(2)
  end
end
local rt = assert(mw.runtime())
local prog = assert(rt:compile(M.SOURCE, "softmax.cu"))
local x = M.inputs(rows, cols)
local X, Y = rt:buffer("float", rows * cols), rt:buffer("float", rows * cols)
X:write_from(x, rows * cols)
local t0 = mw.now()
assert(prog.softmax(X, Y, rows, cols):await() == rows)
local took = mw.now() - t0
local y = ffi.new("float[?]", rows * cols)
Y:read_into(y, rows * cols)
local ok, why = M.check(rows, cols, x, y, rows <= 1024 and nil or 256)
assert(ok, why)
print(("softmax: %d rows of %d on %s, %s checked, %.2f ms (%.3g GB/s in and out, first run)"):format(
  rows, cols, rt.backend, rows <= 1024 and "every row" or "256 rows", took * 1e3,
  2 * rows * cols * 4 / took / 1e9))
rt:close()
