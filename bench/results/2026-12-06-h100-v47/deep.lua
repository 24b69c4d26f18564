-- deep.lua - down(n) (n spawns nested one in another, each awaited) on one backend at one stack_bytes:
-- how deep spawns that run in place nest before the stack bound fails them.
--   luajit bench/results/2026-12-06-h100-v47/deep.lua [backend [n [stack_bytes [workers]]]]   (from the repository root; n is tried, then 100, 400, 2000)
package.path = "./?.lua;" .. package.path
local mw = require "moonwarp"
local support = require "spec.support"
local rt = mw.runtime{ backend = arg[1] or "sim", stack_bytes = tonumber(arg[3]), workers = tonumber(arg[4]) }
local p = rt:compile(support.DOWN, "deep.lua")
for _, n in ipairs { tonumber(arg[2]) or 50, 100, 400, 2000 } do
  local ok, v = pcall(function() return p.down(n):await(60) end)
  print(n, ok, v)
end
print(rt:stats().workers)
rt:close()
