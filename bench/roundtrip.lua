-- roundtrip.lua - the host round trip from Lua on a program of one task, beside bench/roundtrip.c's
-- from C on the same program: the two differ by the Lua binding alone, where bench/core.lua's
-- round trip runs on the image of the whole bench set (bench/tasks.lua).
-- Usage: luajit bench/roundtrip.lua [backend [n [pad [steps [spawns [frame_bytes]]]]]]   (n round trips after
-- 200 warm ones, default 5000 on cuda, 500 elsewhere; each way once: the future left to the
-- collector as core.lua does, and closed right after its await as roundtrip.c does. pad,
-- default 0: tasks that never run beside the one that does, each a straight body of steps
-- (default 256) steps of ~9 instructions, so that the image grows as the bench set's does while
-- the round trip's own code stays the same; 13 tasks of 256 and 1 task of 3328 grow it alike
-- with other task counts. spawns 1: one more task that never runs but spawns, awaits, reads
-- and releases a future, so that the executor is built with what device spawns need, as for
-- the bench set, where a program of no spawns gets an executor without them. frame_bytes: the
-- runtime's option, as bench/core.lua sets it to 512; default the runtime's own)
local mw = require "moonwarp"

-- argument i as a whole number >= min, or def where it is not given; a clear refusal otherwise
local function whole(i, what, min, def)
  local a = arg and arg[i]
  if a == nil then return def end
  local v = tonumber(a)
  if not (v and v >= min and v == math.floor(v)) then
    io.stderr:write(("roundtrip.lua: %s must be a whole number >= %d, got '%s'\n"):format(what, min, a))
    os.exit(2)
  end
  return v
end
local backend = arg and arg[1]
local n = whole(2, "the count", 1, nil)
local pad = whole(3, "pad", 0, 0)
local steps = whole(4, "steps", 1, 256)
local spawns = whole(5, "spawns", 0, 0)
local frame_bytes = whole(6, "frame_bytes", 1, nil)
local rt = assert(mw.runtime { backend = backend, frame_bytes = frame_bytes })
n = n or (rt.backend == "cuda" and 5000 or 500)
local source = { "task int nop() { return 1; }\n" }
for k = 1, pad do -- a body the compiler cannot fold: dependent steps of float arithmetic
  source[#source + 1] = ([[
task float pad%d(float x, float y) {
  float a = x, b = y;
#pragma unroll
  for (int i = 0; i < %d; ++i) { a = a * b + (float)(i ^ %d); b = b * 0.5f + a * 1e-3f; }
  return a + b;
}
]]):format(k, steps, k)
end
if spawns > 0 then
  source[#source + 1] = [[
task long user(int n) {
  local future f;
  if (n < 1) return 0;
  f = spawn(user, n - 1);
  await(f);
  long v = (long)value(f) + 1;
  release(f);
  return v;
}
]]
end
local prog = assert(rt:compile(table.concat(source), "roundtrip.lua"))
local nop = prog.nop

local function percentile(t, p)
  table.sort(t)
  return t[math.max(1, math.ceil(#t * p))]
end

-- n round trips (after 200 warm ones); close: each future closed after its await
local function round_trips(close)
  local lat = {}
  for i = -199, n do
    local t0 = mw.now()
    local f = nop()
    local v = f:await()
    if close then f:close() end
    if i >= 1 then lat[i] = (mw.now() - t0) * 1e6 end
    assert(v == 1, "round trip: wrong result")
  end
  return percentile(lat, 0.5), percentile(lat, 0.99)
end

for _, close in ipairs { false, true } do
  local p50, p99 = round_trips(close)
  print(("Lua round trip on %s, a program of one task, %d, %s: p50 %.2f us, p99 %.2f us"):format(
    rt.backend, n, (close and "each future closed after its await" or "futures left to the collector") ..
    (pad > 0 and (", %d tasks of padding of %d steps"):format(pad, steps) or "") ..
    (spawns > 0 and ", a task that spawns beside it" or "") ..
    (frame_bytes and (", frames of %d bytes"):format(frame_bytes) or ""),
    p50, p99))
end
rt:close()
