-- random_bodies_spec.lua - seeded random task bodies (nested if/else, for/while/do loops with
-- break and continue, early returns, spawn/await/await_all/try_await of leaf tasks inside all of
-- them, value() in arithmetic and compound assignments) run on sim and compared with a
-- sequential reference: one syntax tree gives both the task source and a Lua evaluation of it.
-- MW_RANDOM_SEED=n runs the programs grown from seed n.
local support = require "spec.support"

local BASE_SEED = tonumber(os.getenv("MW_RANDOM_SEED")) or 20260401
local PROGRAMS = 3         -- each one compile, on a runtime of its own
local BODIES = 60          -- tasks per program (4 of them leaves)
local INPUTS = { 0, 7, -13 } -- each body runs with each

-- Park-Miller: exact in doubles, the same on every platform
local function rng(seed)
  local s = seed % 2147483646 + 1
  return function(n)
    s = s * 48271 % 2147483647
    return s % n
  end
end

-- C's integer division and remainder (truncation toward zero)
local function cdiv(a, b)
  local q = a / b
  return q >= 0 and math.floor(q) or math.ceil(q)
end
local function cmod(a, b) return a - cdiv(a, b) * b end
local function trunc(x) return x >= 0 and math.floor(x) or math.ceil(x) end

local M = 1000003 -- every variable is reduced modulo M after each assignment

-- the leaf tasks: their source, and what each returns
local LEAVES = [[
task long leaf(long x) { return (x % 100003) * 3 + 1; }
task long pair(long x, int y) { return (x % 1000) * y - 7; }
task double half(long x) { return (double)(x % 1000) * 0.5; }
task long deep(long x, int d) {
  local future a;
  if (d <= 0) return x % 1000;
  a = spawn(deep, x + 3, d - 1);
  await(a);
  return (value(a) * 2 + x) % 100003;
}
]]
local function deep(x, d)
  if d <= 0 then return cmod(x, 1000) end
  return cmod(deep(x + 3, d - 1) * 2 + x, 100003)
end
local LEAF = {
  leaf = function(a) return cmod(a[1], 100003) * 3 + 1 end,
  pair = function(a) return cmod(a[1], 1000) * a[2] - 7 end,
  half = function(a) return cmod(a[1], 1000) * 0.5 end,
  deep = function(a) return deep(a[1], a[2]) end,
}

local NV, NF = 4, 3 -- long locals v0..v3, integer futures f0..f2 (and one double future h)

-- ---- the generator: a syntax tree ---------------------------------------------------------

local function generator(seed)
  local r = rng(seed)
  local g = { loops = 0, stats = { statements = 0, awaits = 0, spawns = 0, loops = 0, ifs = 0,
    returns = 0, breaks = 0, continues = 0 } }

  -- an integer expression; ctrs: the loop counters in scope; avoid: the futures not to read
  -- (spawned, not yet awaited)
  local NONE = {}
  local function expr(depth, ctrs, avoid)
    avoid = avoid or NONE
    local k = r(depth > 0 and 9 or 5)
    if k == 0 then return { k = "const", v = r(21) } end
    if k == 1 then return { k = "var", i = r(NV) } end
    if k == 2 then
      local f = r(NF)
      if not avoid[f] then return { k = "val", f = f } end
      return { k = "param" }
    end
    if k == 3 then
      if #ctrs > 0 then return { k = "ctr", i = ctrs[1 + r(#ctrs)] } end
      return { k = "param" }
    end
    if k == 4 then return { k = "param" } end
    local a = expr(depth - 1, ctrs, avoid)
    if k == 5 then return { k = "bin", op = "+", a = a, b = expr(depth - 1, ctrs, avoid) } end
    if k == 6 then return { k = "bin", op = "-", a = a, b = expr(depth - 1, ctrs, avoid) } end
    if k == 7 then return { k = "mulc", a = a, c = 1 + r(9) } end
    if r(2) == 0 then return { k = "divc", a = a, c = 2 + r(6) } end
    return { k = "modc", a = a, c = 2 + r(16) }
  end

  local function cond(ctrs, avoid)
    avoid = avoid or NONE
    local k = r(8)
    if k <= 2 then
      local ops = { "<", ">", "==", "!=", "<=", ">=" }
      return { k = "cmp", op = ops[1 + r(#ops)], a = expr(1, ctrs, avoid), b = expr(1, ctrs, avoid) }
    end
    if k == 3 then return { k = "even", a = expr(2, ctrs, avoid) } end
    if k == 4 and not avoid.h then
      return { k = "half", op = r(2) == 0 and "<" or ">=", c = r(500) }
    end
    if k == 5 then
      local f = r(NF)
      if not avoid[f] then return { k = "failed", f = f } end
    end
    if k == 6 then return { k = "and", a = cond(ctrs, avoid), b = cond(ctrs, avoid) } end
    if k == 7 then return { k = "not", a = cond(ctrs, avoid) } end
    return { k = "or", a = cond(ctrs, avoid), b = cond(ctrs, avoid) }
  end

  -- a statement that neither awaits nor leaves its block (the middle of a spawn group)
  local function simple(ctrs, avoid)
    avoid = avoid or NONE
    local v = r(NV)
    local k = r(4)
    if k == 0 then return { k = "assign", v = v, e = expr(2, ctrs, avoid) } end
    if k == 1 then
      local f = r(NF)
      if avoid[f] then return { k = "assign", v = v, e = expr(1, ctrs, avoid) } end
      local ops = { "+=", "-=", "*=" }
      return { k = "compound", v = v, op = ops[1 + r(3)], src = { k = "val", f = f } }
    end
    if k == 2 then
      return { k = "compound", v = v, op = r(2) == 0 and "+=" or "-=", src = expr(2, ctrs, avoid) }
    end
    if not avoid.h and r(2) == 0 then
      return { k = "compound", v = v, op = r(2) == 0 and "+=" or "-=", src = { k = "hval" } }
    end
    return { k = "temp", v = v, e = expr(2, ctrs, avoid) }
  end

  local TASKS = { "leaf", "pair", "deep" }
  local function spawn_of(f, ctrs)
    local t = TASKS[1 + r(#TASKS)]
    local args = { expr(2, ctrs) }
    if t == "pair" then args[2] = { k = "modc", a = expr(1, ctrs), c = 100 } end
    if t == "deep" then args[2] = { k = "modc", a = expr(1, ctrs), c = 3 } end
    return { f = f, task = t, args = args }
  end

  -- a spawn group: spawns, statements not reading them, an await of them, uses of the values
  local function group(ctrs)
    local f = r(NF)
    local grp = { k = "group", spawns = { spawn_of(f, ctrs) }, middle = {}, after = {} }
    local kinds = { "await", "try_await", "await_all" }
    grp.await = kinds[1 + r(3)]
    local pending = { [f] = true }
    if r(4) == 0 then -- the double future too
      grp.spawns[2] = { f = "h", task = "half", args = { expr(1, ctrs, pending) } }
      grp.await = "await_all"
      pending.h = true
    end
    for _ = 1, r(3) do grp.middle[#grp.middle + 1] = simple(ctrs, pending) end
    local ops = { "+=", "-=", "*=" }
    grp.after[1] = { k = "compound", v = r(NV), op = ops[1 + r(3)], src = { k = "val", f = f } }
    g.stats.spawns = g.stats.spawns + #grp.spawns
    g.stats.awaits = g.stats.awaits + 1
    return grp
  end

  local block
  local function statement(depth, ctrs, in_loop)
    g.stats.statements = g.stats.statements + 1
    local k = depth > 0 and r(12) or r(5)
    if k <= 1 then return simple(ctrs) end
    if k <= 3 then return group(ctrs) end
    if k == 4 and depth <= 0 and not in_loop then return simple(ctrs) end
    if k == 4 and in_loop then
      if r(2) == 0 then
        g.stats.breaks = g.stats.breaks + 1
        return { k = "break_if", c = cond(ctrs) }
      end
      g.stats.continues = g.stats.continues + 1
      return { k = "continue_if", c = cond(ctrs) }
    end
    if k == 5 then
      g.stats.returns = g.stats.returns + 1
      return { k = "return_if", c = cond(ctrs), e = expr(2, ctrs) }
    end
    if k <= 7 then
      g.stats.ifs = g.stats.ifs + 1
      local s = { k = "if", c = cond(ctrs), t = block(depth - 1, ctrs, in_loop) }
      if r(2) == 0 then s.e = block(depth - 1, ctrs, in_loop) end
      return s
    end
    if #ctrs >= 2 then return group(ctrs) end
    g.stats.loops = g.stats.loops + 1
    local ctr = #ctrs
    local inner = { ctr }
    for _, c in ipairs(ctrs) do inner[#inner + 1] = c end
    local kinds = { "for", "while", "do" }
    return { k = kinds[1 + r(3)], ctr = ctr, n = r(5), body = block(depth - 1, inner, true) }
  end

  function block(depth, ctrs, in_loop)
    local b = {}
    for _ = 1, 1 + r(4) do b[#b + 1] = statement(depth, ctrs, in_loop) end
    return b
  end

  function g.body() return block(3, {}, false) end
  return g
end

-- ---- the task source -----------------------------------------------------------------------

local function c_expr(e)
  if e.k == "const" then return tostring(e.v) end
  if e.k == "var" then return "v" .. e.i end
  if e.k == "ctr" then return "i" .. e.i end
  if e.k == "val" then return "value(f" .. e.f .. ")" end
  if e.k == "hval" then return "value(h)" end
  if e.k == "param" then return "s" end
  if e.k == "bin" then return "(" .. c_expr(e.a) .. " " .. e.op .. " " .. c_expr(e.b) .. ")" end
  if e.k == "mulc" then return "(" .. c_expr(e.a) .. " * " .. e.c .. ")" end
  if e.k == "divc" then return "(" .. c_expr(e.a) .. " / " .. e.c .. ")" end
  if e.k == "modc" then return "(" .. c_expr(e.a) .. " % " .. e.c .. ")" end
  error("expression " .. e.k)
end

local function c_cond(c)
  if c.k == "cmp" then return "(" .. c_expr(c.a) .. " " .. c.op .. " " .. c_expr(c.b) .. ")" end
  if c.k == "even" then return "(" .. c_expr(c.a) .. " % 2 == 0)" end
  if c.k == "half" then return "(value(h) " .. c.op .. " " .. c.c .. ")" end
  if c.k == "failed" then return "failed(f" .. c.f .. ")" end
  if c.k == "and" then return "(" .. c_cond(c.a) .. " && " .. c_cond(c.b) .. ")" end
  if c.k == "or" then return "(" .. c_cond(c.a) .. " || " .. c_cond(c.b) .. ")" end
  if c.k == "not" then return "!" .. c_cond(c.a) end
  error("condition " .. c.k)
end

local function c_future(f) return f == "h" and "h" or "f" .. f end

local c_block
local function c_stmt(s, out, ind)
  local function put(line) out[#out + 1] = ind .. line end
  local function reduce(v) put(("v%d %%= %d;"):format(v, M)) end
  if s.k == "assign" then
    put(("v%d = %s;"):format(s.v, c_expr(s.e)))
    reduce(s.v)
  elseif s.k == "compound" then
    put(("v%d %s %s;"):format(s.v, s.op, c_expr(s.src)))
    reduce(s.v)
  elseif s.k == "temp" then -- an ordinary variable in a block with no await
    put(("{ long t = %s; v%d = (v%d + t) %% %d; }"):format(c_expr(s.e), s.v, s.v, M))
  elseif s.k == "group" then
    local names = {}
    for _, sp in ipairs(s.spawns) do
      local args = {}
      for _, a in ipairs(sp.args) do args[#args + 1] = c_expr(a) end
      put(("%s = spawn(%s, %s);"):format(c_future(sp.f), sp.task, table.concat(args, ", ")))
      names[#names + 1] = c_future(sp.f)
    end
    for _, m in ipairs(s.middle) do c_stmt(m, out, ind) end
    put(("%s(%s);"):format(s.await, table.concat(names, ", ")))
    for _, a in ipairs(s.after) do c_stmt(a, out, ind) end
  elseif s.k == "if" then
    put(("if (%s) {"):format(c_cond(s.c)))
    c_block(s.t, out, ind .. "  ")
    if s.e then
      put("} else {")
      c_block(s.e, out, ind .. "  ")
    end
    put("}")
  elseif s.k == "for" then
    put(("for (i%d = 0; i%d < %d; ++i%d) {"):format(s.ctr, s.ctr, s.n, s.ctr))
    c_block(s.body, out, ind .. "  ")
    put("}")
  elseif s.k == "while" then
    put(("i%d = 0;"):format(s.ctr))
    put(("while (i%d < %d) {"):format(s.ctr, s.n))
    put(("  ++i%d;"):format(s.ctr))
    c_block(s.body, out, ind .. "  ")
    put("}")
  elseif s.k == "do" then
    put(("i%d = 0;"):format(s.ctr))
    put("do {")
    put(("  ++i%d;"):format(s.ctr))
    c_block(s.body, out, ind .. "  ")
    put(("} while (i%d < %d);"):format(s.ctr, s.n))
  elseif s.k == "break_if" then
    put(("if (%s) break;"):format(c_cond(s.c)))
  elseif s.k == "continue_if" then
    put(("if (%s) continue;"):format(c_cond(s.c)))
  elseif s.k == "return_if" then
    put(("if (%s) return %s;"):format(c_cond(s.c), c_expr(s.e)))
  else
    error("statement " .. s.k)
  end
end
function c_block(b, out, ind)
  for _, s in ipairs(b) do c_stmt(s, out, ind) end
end

local function c_task(name, body)
  local out = { ("task long %s(long s) {"):format(name),
    "  local long v0, v1, v2, v3;", "  local int i0, i1, i2;", "  local future f0, f1, f2, h;",
    "  v0 = s; v1 = 1; v2 = 2; v3 = 3;",
    "  f0 = spawn(leaf, s);", "  f1 = spawn(pair, s, 3);", "  f2 = spawn(deep, s, 1);",
    "  h = spawn(half, s);", "  await_all(f0, f1, f2, h);" }
  c_block(body, out, "  ")
  out[#out + 1] = "  return (v0 + 3 * v1 + 5 * v2 + 7 * v3) % 1000000007;"
  out[#out + 1] = "}"
  return table.concat(out, "\n")
end

-- ---- the reference: the same tree, evaluated in order --------------------------------------

local function eval_expr(e, env)
  if e.k == "const" then return e.v end
  if e.k == "var" then return env.v[e.i] end
  if e.k == "ctr" then return env.i[e.i] end
  if e.k == "val" then return env.f[e.f] end
  if e.k == "hval" then return env.f.h end
  if e.k == "param" then return env.s end
  if e.k == "bin" then
    local a, b = eval_expr(e.a, env), eval_expr(e.b, env)
    return e.op == "+" and a + b or a - b
  end
  if e.k == "mulc" then return eval_expr(e.a, env) * e.c end
  if e.k == "divc" then return cdiv(eval_expr(e.a, env), e.c) end
  if e.k == "modc" then return cmod(eval_expr(e.a, env), e.c) end
end

local CMP = {
  ["<"] = function(a, b) return a < b end, [">"] = function(a, b) return a > b end,
  ["=="] = function(a, b) return a == b end, ["!="] = function(a, b) return a ~= b end,
  ["<="] = function(a, b) return a <= b end, [">="] = function(a, b) return a >= b end,
}
local function eval_cond(c, env)
  if c.k == "cmp" then return CMP[c.op](eval_expr(c.a, env), eval_expr(c.b, env)) end
  if c.k == "even" then return cmod(eval_expr(c.a, env), 2) == 0 end
  if c.k == "half" then return CMP[c.op](env.f.h, c.c) end
  if c.k == "failed" then return false end
  if c.k == "and" then return eval_cond(c.a, env) and eval_cond(c.b, env) end
  if c.k == "or" then return eval_cond(c.a, env) or eval_cond(c.b, env) end
  if c.k == "not" then return not eval_cond(c.a, env) end
end

-- returns nil, "break", "continue" or "return" (with the value)
local eval_block
local function eval_stmt(s, env)
  if s.k == "assign" then
    env.v[s.v] = cmod(eval_expr(s.e, env), M)
  elseif s.k == "compound" then
    local x, y = env.v[s.v], eval_expr(s.src, env)
    if s.op == "+=" then x = x + y elseif s.op == "-=" then x = x - y else x = x * y end
    env.v[s.v] = cmod(trunc(x), M) -- a double value: the long keeps its truncation
  elseif s.k == "temp" then
    env.v[s.v] = cmod(env.v[s.v] + eval_expr(s.e, env), M)
  elseif s.k == "group" then
    local results = {}
    for _, sp in ipairs(s.spawns) do -- arguments are evaluated at the spawn
      local args = {}
      for _, a in ipairs(sp.args) do args[#args + 1] = eval_expr(a, env) end
      results[#results + 1] = { sp.f, LEAF[sp.task](args) }
    end
    for _, m in ipairs(s.middle) do eval_stmt(m, env) end
    for _, res in ipairs(results) do env.f[res[1]] = res[2] end
    for _, a in ipairs(s.after) do eval_stmt(a, env) end
  elseif s.k == "if" then
    if eval_cond(s.c, env) then return eval_block(s.t, env) end
    if s.e then return eval_block(s.e, env) end
  elseif s.k == "for" or s.k == "while" or s.k == "do" then
    env.i[s.ctr] = 0
    local first = true
    while (s.k == "do" and first) or env.i[s.ctr] < s.n do
      first = false
      if s.k ~= "for" then env.i[s.ctr] = env.i[s.ctr] + 1 end
      local how, val = eval_block(s.body, env)
      if how == "return" then return how, val end
      if how == "break" then break end
      if s.k == "for" then env.i[s.ctr] = env.i[s.ctr] + 1 end
    end
  elseif s.k == "break_if" then
    if eval_cond(s.c, env) then return "break" end
  elseif s.k == "continue_if" then
    if eval_cond(s.c, env) then return "continue" end
  elseif s.k == "return_if" then
    if eval_cond(s.c, env) then return "return", eval_expr(s.e, env) end
  end
end
function eval_block(b, env)
  for _, s in ipairs(b) do
    local how, val = eval_stmt(s, env)
    if how then return how, val end
  end
end

local function reference(body, s)
  local env = { s = s, v = { [0] = s, 1, 2, 3 }, i = { [0] = 0, 0, 0 },
    f = { [0] = LEAF.leaf { s }, LEAF.pair { s, 3 }, LEAF.deep { s, 1 }, h = LEAF.half { s } } }
  local how, val = eval_block(body, env)
  if how == "return" then return val end
  return cmod(env.v[0] + 3 * env.v[1] + 5 * env.v[2] + 7 * env.v[3], 1000000007)
end

-- ---- the spec ------------------------------------------------------------------------------

describe("random task bodies against a sequential reference #sim", function()
  it(("give the reference's result (%d programs of %d bodies from seed %d)"):format(PROGRAMS,
    BODIES, BASE_SEED), function()
    local totals = { bodies = 0, runs = 0, statements = 0, awaits = 0, spawns = 0, loops = 0,
      ifs = 0, returns = 0, breaks = 0, continues = 0 }
    for p = 1, PROGRAMS do
      local tasks, bodies, seeds = { LEAVES }, {}, {}
      for b = 1, BODIES do
        local seed = BASE_SEED + (p - 1) * BODIES + b
        local g = generator(seed)
        bodies[b] = g.body()
        seeds[b] = seed
        tasks[#tasks + 1] = c_task("r" .. b, bodies[b])
        for k, v in pairs(g.stats) do totals[k] = totals[k] + v end
      end
      local source = table.concat(tasks, "\n") .. "\n"
      local rt = support.runtime("sim")
      local prog = support.compile(rt, source, ("random_%d.cu"):format(p))
      local futures = {}
      for b = 1, BODIES do
        for j, s in ipairs(INPUTS) do futures[#futures + 1] = { b, s, prog["r" .. b](s), j } end
      end
      for _, fu in ipairs(futures) do
        local b, s = fu[1], fu[2]
        local ok, got = pcall(fu[3].await, fu[3], 60)
        local want = reference(bodies[b], s)
        if not ok or got ~= want then
          local lines = {}
          for line in source:gmatch("[^\n]*\n?") do lines[#lines + 1] = line end
          error(("seed %d (task r%d of random_%d.cu), input %d: got %s, the reference %s\n%s"):format(
            seeds[b], b, p, s, tostring(got), tostring(want), c_task("r" .. b, bodies[b])), 0)
        end
        totals.runs = totals.runs + 1
      end
      totals.bodies = totals.bodies + BODIES
      rt:close()
    end
    print(("  [random bodies: seeds %d..%d, %d bodies, %d runs; %d statements, %d loops, %d ifs, "
      .. "%d spawns, %d awaits, %d early returns, %d breaks, %d continues]"):format(BASE_SEED + 1,
      BASE_SEED + PROGRAMS * BODIES, totals.bodies, totals.runs, totals.statements, totals.loops,
      totals.ifs, totals.spawns, totals.awaits, totals.returns, totals.breaks, totals.continues))
  end)
end)
