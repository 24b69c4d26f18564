-- pipeline.lua - three dependent data-parallel stages over a device buffer, chained on the device:
-- one driver task spawns each stage as a bulk task and awaits it; the host awaits only the driver.
local mw = require "moonwarp"

local n = tonumber(arg and arg[1]) or 100000
local rt = assert(mw.runtime())
local prog = assert(rt:compile [[
#define CHUNK 256
// each bulk instance covers CHUNK elements, its 32 lanes striding through them
task void scale(float *x, int n, float s) {
  for (int i = index * CHUNK + lane; i < n && i < (int)(index + 1) * CHUNK; i += 32) x[i] *= s;
}
task void shift(float *x, int n, float c) {
  for (int i = index * CHUNK + lane; i < n && i < (int)(index + 1) * CHUNK; i += 32) x[i] += c;
}
task void square(float *x, int n) {
  for (int i = index * CHUNK + lane; i < n && i < (int)(index + 1) * CHUNK; i += 32) x[i] *= x[i];
}
task int pipeline(float *x, int n) {
  local future f;
  local unsigned blocks;
  blocks = (n + CHUNK - 1) / CHUNK;
  f = spawn_bulk(scale, blocks, x, n, 2.0f);
  await(f);
  f = spawn_bulk(shift, blocks, x, n, 1.0f);
  await(f);
  f = spawn_bulk(square, blocks, x, n);
  await(f);
  return 3;
}
]])

local x = rt:buffer("float", n)
local input = {}
for i = 1, n do input[i] = (i % 97) / 8 end
x:write(input)
local stages = prog.pipeline(x, n):await()
local out = x:read()
for i = 1, n do
  local want = (input[i] * 2 + 1) ^ 2
  assert(math.abs(out[i] - want) <= 1e-5 * want, ("element %d: got %g, want %g"):format(i, out[i], want))
end
print(("pipeline: %d stages over %d floats on %s, all results checked"):format(stages, n, rt.backend))
rt:close()
