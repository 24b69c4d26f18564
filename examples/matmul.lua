-- matmul.lua - a tiled single-precision matrix multiply as block tasks: C = A * B (n x n, row-major), one
-- 64x64 tile of C a block-task instance, its CTA staging 64x16 slices of A and B in __shared__
-- memory; a driver task spawns the tiles in bulk and awaits them. Checked against the CPU.
--   luajit examples/matmul.lua [n]        (n a multiple of 64; default 512)
-- Loaded with loadfile(path)("--module") it runs nothing and returns { SOURCE = ..., check = ... }
-- (bench/suite.lua times the same tasks beside a standalone kernel of the same algorithm).
local M = {}

-- 128 threads (4 warps) a tile: thread t computes an 8 x 4 block of the tile's outputs (rows
-- (t / 16) * 8 .. + 7, columns (t % 16) * 4 .. + 3), the k dimension in steps of 16: each step
-- loads 64 x 16 of A (stored k-major) and 16 x 64 of B into shared memory, waits for every warp,
-- multiplies, waits again before the next load. bench/baselines.cu's mm_tile kernel is this
-- algorithm as a plain kernel (one 128-thread block a tile).
M.SOURCE = [[
#define TILE 64
#define KSTEP 16
task block void mm_tile(const float *A, const float *B, float *C, int n) {
  __shared__ float As[KSTEP][TILE], Bs[KSTEP][TILE];
  const int tiles = n / TILE;
  const int row0 = (int)(index / tiles) * TILE, col0 = (int)(index % tiles) * TILE;
  const int ty = thread / 16, tx = thread % 16;
  float acc[8][4];
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
  for (int k0 = 0; k0 < n; k0 += KSTEP) {
    // 1024 elements of each slice, 8 a thread
    for (int e = thread; e < TILE * KSTEP; e += nthreads) {
      const int ar = e / KSTEP, ak = e % KSTEP;   // A's slice: row ar, column k0 + ak
      As[ak][ar] = A[(long)(row0 + ar) * n + k0 + ak];
      const int bk = e / TILE, bc = e % TILE;     // B's slice: row k0 + bk, column bc
      Bs[bk][bc] = B[(long)(k0 + bk) * n + col0 + bc];
    }
    barrier();
    for (int k = 0; k < KSTEP; ++k) {
      float a[8], b[4];
      for (int i = 0; i < 8; ++i) a[i] = As[k][ty * 8 + i];
      for (int j = 0; j < 4; ++j) b[j] = Bs[k][tx * 4 + j];
      for (int i = 0; i < 8; ++i)
        for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
    }
    barrier();
  }
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 4; ++j) C[(long)(row0 + ty * 8 + i) * n + col0 + tx * 4 + j] = acc[i][j];
}

// the driver: every tile of C as one bulk spawn, awaited on the device
task int matmul(const float *A, const float *B, float *C, int n) {
  local future f;
  f = spawn_bulk(mm_tile, (unsigned)((n / TILE) * (n / TILE)), A, B, C, n);
  await(f);
  return n / TILE;
}
]]

-- A and B of size n, the same every run: small integers over 8, so every product and sum is
-- exact in single precision for n up to 2^11 and the check can ask for equality
function M.inputs(n)
  local ffi = require "ffi"
  local a, b = ffi.new("float[?]", n * n), ffi.new("float[?]", n * n)
  for i = 0, n * n - 1 do
    a[i] = ((i * 7) % 9 - 4) / 8
    b[i] = ((i * 5) % 11 - 5) / 8
  end
  return a, b
end

-- compares C (an FFI float array) with the CPU's product at `samples` entries (every entry when
-- samples is nil); returns true, or false and the first wrong entry
function M.check(n, a, b, c, samples)
  local function at(r, col)
    local s = 0
    for k = 0, n - 1 do s = s + a[r * n + k] * b[k * n + col] end
    return s
  end
  local total = samples or n * n
  for t = 0, total - 1 do
    local e = samples and (t * 2654435761) % (n * n) or t
    local r, col = math.floor(e / n), e % n
    local want = at(r, col)
    if c[e] ~= want then
      return false, ("C[%d][%d] = %.9g, want %.9g"):format(r, col, c[e], want)
    end
  end
  return true
end

if (...) == "--module" then return M end

local mw = require "moonwarp"
local ffi = require "ffi"
local n = tonumber(arg and arg[1] or 512)
if not (n and n >= 64 and n % 64 == 0 and n <= 2048) then
  io.stderr:write(("usage: luajit examples/matmul.lua [n]: n is a multiple of 64 from 64 to 2048, got %q\n"):format(tostring(arg[1])))
  os.exit(2)
end
local rt = assert(mw.runtime())
local prog = assert(rt:compile(M.SOURCE, "matmul.cu"))
local a, b = M.inputs(n)
local A, B, C = rt:buffer("float", n * n), rt:buffer("float", n * n), rt:buffer("float", n * n)
A:write_from(a, n * n)
B:write_from(b, n * n)
local t0 = mw.now()
local tiles = prog.matmul(A, B, C, n):await()
local took = mw.now() - t0
local c = ffi.new("float[?]", n * n)
C:read_into(c, n * n)
local ok, why = M.check(n, a, b, c, n <= 512 and nil or 4096)
assert(ok, why)
print(("matmul: %d x %d in %d x %d tiles on %s, %s checked, %.2f ms (%.3g GFLOP/s, first run)"):format(
  n, n, tiles, tiles, rt.backend, n <= 512 and "every entry" or "4096 entries", took * 1e3,
  2 * n ^ 3 / took / 1e9))
rt:close()
