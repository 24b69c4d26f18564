-- kdiag.lua - spec/kinds_spec.lua's program of NK kinds, alone: the sweep's values against the
-- right ones, and a host spawn of a few kinds (build = parts, as the spec loads it).
--   luajit bench/results/2026-12-05-h100-v46/kdiag.lua [NK [reps [backend]]]   (from the repository root)
-- The runs of v46 used NK 2100 and 100 with reps 7, under MOONWARP_DEVICE_DEFINE variants.
package.path = "./?.lua;" .. package.path
local mw = require "moonwarp"
local support = require "spec.support"
local NK, reps = tonumber(arg[1] or 2100), tonumber(arg[2] or 7)
if not NK or NK < 6 or NK % 1 ~= 0 or not reps or reps < 1 or reps % 1 ~= 0 then
  io.stderr:write("usage: luajit kdiag.lua [NK (whole, 6 or more) [reps (whole, 1 or more) [backend]]]\n")
  os.exit(2)
end
local rt = mw.runtime { backend = arg[3] or "cuda", build = "parts" }
local t = os.clock()
local src, colliding = support.kinds_program(NK)
local p = rt:compile(src, "kinds.cu")
local sum = 0
for _, k in ipairs(colliding) do sum = sum + k end
local ks = {}
for _, k in ipairs { 0, 5, 37, NK - 1 } do
  if k < NK then ks[#ks + 1] = ("k%d(1)=%s"):format(k, tostring(p["k" .. k](1):await(30))) end
end
local got, want = {}, {}
for i = 1, 4 do
  got[i] = tostring(p.sweep(1000 + i, reps):await(30))
  want[i] = tostring(reps * (#colliding * (1000 + i) + sum))
end
print(("NK %d reps %d define %s: compile %.1f s cpu; %s; sweep %s, want %s"):format(NK, reps,
  os.getenv("MOONWARP_DEVICE_DEFINE") or "-", os.clock() - t, table.concat(ks, " "),
  table.concat(got, " "), table.concat(want, " ")))
rt:close()
