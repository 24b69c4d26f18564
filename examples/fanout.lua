-- fanout.lua - data-dependent fan-out: a router task reads per-expert item counts on the device
-- and spawns one task per non-empty expert, then sums their results; the host sees one future.
local mw = require "moonwarp"

local nexperts = tonumber(arg and arg[1]) or 48
-- 64 futures in the frame: more than the default 256-byte frame holds
local rt = assert(mw.runtime { frame_bytes = 1024 })
local prog = assert(rt:compile [[
// one expert: a weighted sum over its slice of items, lanes in parallel, reduced by shuffles
task long expert(int *items, int first, int count, int weight) {
  long s = 0;
  for (int i = lane; i < count; i += 32) s += (long)items[first + i] * weight;
  for (int d = 16; d > 0; d /= 2) s += __shfl_down_sync(0xffffffffu, s, d);
  return __shfl_sync(0xffffffffu, s, 0);
}

task long route(int *counts, int *items, int nexperts) {
  local future fs[64];
  local int e, k, first;
  local long total;
  k = 0;
  first = 0;
  for (e = 0; e < nexperts; ++e) {       // how many children: decided by the data
    if (counts[e] > 0) fs[k++] = spawn(expert, items, first, counts[e], e + 1);
    first += counts[e];
  }
  total = 0;
  for (e = 0; e < k; ++e) {
    await(fs[e]);
    total += (long)value(fs[e]);
  }
  return total;
}
]])

math.randomseed(7)
local counts, items, want, nitems = {}, {}, 0, 0
for e = 1, nexperts do
  counts[e] = math.random(0, 3) == 0 and 0 or math.random(1, 200) -- some experts get nothing
  for _ = 1, counts[e] do
    nitems = nitems + 1
    items[nitems] = math.random(-1000, 1000)
    want = want + items[nitems] * e
  end
end
local cbuf, ibuf = rt:buffer("int32", nexperts), rt:buffer("int32", math.max(nitems, 1))
cbuf:write(counts)
if nitems > 0 then ibuf:write(items) end
local got = prog.route(cbuf, ibuf, nexperts):await()
local spawned = 0
for e = 1, nexperts do if counts[e] > 0 then spawned = spawned + 1 end end
print(("fanout: %d experts, %d spawned from data, %d items, total %d on %s"):format(
  nexperts, spawned, nitems, got, rt.backend))
assert(got == want, ("total %d, want %d"):format(got, want))
rt:close()
