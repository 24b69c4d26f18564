-- roundtrip.lua - the host round trip from Lua on a program of one task, beside bench/roundtrip.c's
-- from C on the same program: the two differ by the Lua binding alone, where bench/core.lua's
-- round trip runs on the image of the whole bench set (bench/tasks.lua).
-- Usage: luajit bench/roundtrip.lua [backend [n [pad [steps]]]]   (n round trips after 200 warm
-- ones, default 5000 on cuda, 500 elsewhere; each way once: the future left to the collector as
-- core.lua does, and closed right after its await as roundtrip.c does. pad, default 0: tasks
-- that never run beside the one that does, each a straight body of steps (default 256) steps of
-- ~9 instructions, so that the image grows as the bench set's does while the round trip's own
-- code stays the same; 13 tasks of 256 and 1 task of 3328 grow it alike with other task counts)
local mw = require "moonwarp"

local backend = arg and arg[1]
local n = arg and arg[2] and tonumber(arg[2])
if arg and arg[2] and not (n and n >= 1 and n == math.floor(n)) then
  io.stderr:write(("roundtrip.lua: the count must be a whole number >= 1, got '%s'\n"):format(arg[2]))
  os.exit(2)
end
local rt = assert(mw.runtime { backend = backend })
n = n or (rt.backend == "cuda" and 5000 or 500)
local pad = arg and arg[3] and tonumber(arg[3]) or 0
if not (pad >= 0 and pad == math.floor(pad)) then
  io.stderr:write(("roundtrip.lua: pad must be a whole number >= 0, got '%s'\n"):format(arg[3]))
  os.exit(2)
end
local steps = arg and arg[4] and tonumber(arg[4]) or 256
if not (steps >= 1 and steps == math.floor(steps)) then
  io.stderr:write(("roundtrip.lua: steps must be a whole number >= 1, got '%s'\n"):format(arg[4]))
  os.exit(2)
end
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
    (pad > 0 and (", %d tasks of padding of %d steps"):format(pad, steps) or ""),
    p50, p99))
end
rt:close()
