-- a runtime of NK kinds (parts): the sweep's value, and one host spawn of a few kinds
NK = tonumber(arg[1] or 2100)
local mw = require "moonwarp"
local rt = mw.runtime { backend = "cuda", build = "parts" }
local t = os.clock()
local p = rt:compile(dofile(arg[2]), "kinds.cu")
local COLLIDING = {}
for k = 5, NK - 1, 32 do COLLIDING[#COLLIDING + 1] = k end
local sum = 0
for _, k in ipairs(COLLIDING) do sum = sum + k end
local ks = {}
for _, k in ipairs { 0, 5, 37, NK - 1 } do ks[#ks + 1] = ("k%d(1)=%s"):format(k, tostring(p["k" .. k](1):await(30))) end
local got = {}
for i = 1, 4 do got[i] = p.sweep(1000 + i, 7):await(30) end
print(("NK %d define %s: compile %.1f s cpu; %s; sweep %s, want %d"):format(NK, os.getenv("MOONWARP_DEVICE_DEFINE") or "-",
  os.clock() - t, table.concat(ks, " "), table.concat(got, " "), 7 * (#COLLIDING * 1001 + sum)))
rt:close()
