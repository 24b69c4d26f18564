-- sp.lua - what the elided calls' stack check sees on a backend: for sp(n), the stack used, the limit, the
-- elided depth, the reference and the address at the leaf, before and after a refused deep recursion.
--   luajit bench/results/2026-12-06-v48/sp.lua [backend [stack_bytes [workers]]]   (from the repository root)
-- Needs the branch elide-default (mw_stack_used and the context's stack_lim).
package.path = "./?.lua;" .. package.path
local mw = require "moonwarp"
local support = require "spec.support"
local rt = mw.runtime{ backend = arg[1] or "sim", stack_bytes = tonumber(arg[2]), workers = tonumber(arg[3]) }
local p = assert(rt:compile([[
task long sp(int n, int what) {
  local future f;
  if (n == 0) {
    if (what == 0) return (long)mw_stack_used(_c);
    if (what == 1) return (long)_c->stack_lim;
    if (what == 2) return (long)_c->elide;
    if (what == 3) return (long)(_c->sp0 & 0xffffffffull);
    return (long)(mw_stack_here() & 0xffffffffull);
  }
  f = spawn(sp, n - 1, what);
  await(f);
  return value(f);
}
]] .. support.DOWN, "sp.lua"))
local function row(tag)
  for _, n in ipairs { 0, 1, 2, 3, 10, 40 } do
    local t = {}
    for what = 0, 4 do
      local ok, v = pcall(function() return p.sp(n, what):await(30) end)
      t[#t + 1] = ok and tostring(v) or ("ERR " .. tostring(v):sub(1, 40))
    end
    print(tag, "n=" .. n, "used lim elide sp0 here:", table.concat(t, " "))
  end
end
row("before")
print("down(100000)", pcall(function() return p.down(100000):await(60) end))
row("after")
print("down(12)", pcall(function() return p.down(12):await(60) end))
rt:close()
