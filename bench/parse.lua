-- parse.lua - how the parser and generator scale: mw.generate of programs of 1,000 to 16,000
-- one-line tasks, and the time per task (flat when the work is linear in the source).
--   luajit bench/parse.lua [backend]   (sim by default; cuda generates without a GPU)
local mw = require "moonwarp"
local backend = arg[1] or "sim"
print(("tasks  %-10s per task  (mw.generate, %s)"):format("seconds", backend))
for _, n in ipairs { 1000, 2000, 4000, 8000, 16000 } do
  local t = {}
  for i = 1, n do t[#t + 1] = ("task int t%d(int x) { return x + %d; }"):format(i, i) end
  local src = table.concat(t, "\n")
  local t0 = mw.now()
  assert(mw.generate(src, { chunkname = "parse.cu", backend = backend }))
  local s = mw.now() - t0
  print(("%5d  %-10.3f %6.1f us"):format(n, s, s / n * 1e6))
end
