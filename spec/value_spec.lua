-- value_spec.lua - value(f) and the outcome readers in every arithmetic and boolean context:
-- each expression written with value(f) gives what the same expression gives with a plain
-- long (integer results) or double (floating results) of the same value, on sim and under NVRTC
-- (where C would differ, the check says what the rule gives: a float side computes in double,
-- comparisons between signed and unsigned are exact).
local mw = require "moonwarp"
local support = require "spec.support"

-- the futures and the plain variables of the same value the checks compare them with
local VALUES = {
  a = { task = "li", arg = "7", plain = "long", ref = "7L" },
  n = { task = "li", arg = "-3", plain = "long", ref = "-3L" },
  d = { task = "ld", arg = "2.5", plain = "double", ref = "2.5" },
  f = { task = "lf", arg = "1.5f", plain = "double", ref = "1.5" },
  u = { task = "lu", arg = "5000000000ull", plain = "unsigned long long", ref = "5000000000ull" },
}
local ORDER = { "a", "n", "d", "f", "u" }

-- { text, code comparing the value() form with the plain form, whether NVRTC compiles it too }
local checks = {}
local seen = {}
-- NVRTC takes long over these (0.15 s a check): it gets every fourth check and the first of
-- each operator (op)
local function add(text, code, op)
  checks[#checks + 1] = { text, code, #checks % 4 == 3 or not seen[op or text] }
  seen[op or text] = true
end

-- x op= V for every arithmetic type of x, with each operator; the values rotate
local LHS = { "char", "signed char", "unsigned char", "short", "unsigned short", "int", "unsigned",
  "long", "unsigned long", "long long", "unsigned long long", "float", "double" }
local FLOATING = { float = true, double = true }
local function compound(t, op, v, init)
  add(("%s x = %d; x %s value(%s)"):format(t, init, op, v),
    ("{ %s x = %d, y = %d; x %s value(%s); y %s p%s; if (x != y) return @ID@; }"):format(
      t, init, init, op, v, op, v), op)
end
for i, t in ipairs(LHS) do
  for j, op in ipairs { "+=", "-=", "*=", "/=" } do
    compound(t, op, ({ "a", "n", "d", "f" })[(i + j) % 4 + 1], 40)
  end
  if not FLOATING[t] then
    for j, op in ipairs { "%=", "&=", "|=", "^=" } do
      if (i + j) % 2 == 0 then compound(t, op, (i + j) % 4 == 0 and "a" or "n", 45) end
    end
    compound(t, (i % 2 == 0) and "<<=" or ">>=", "a", 1)
  end
end

-- V op c and c op V with constants of every kind (and an enum); the values and sides rotate
local CONSTS = { "3", "3u", "3UL", "3LL", "(short)3", "true", "GREEN", "2.0", "2.0f" }
local FLOATC = { ["2.0"] = true, ["2.0f"] = true }
local turn = 0
local function binary(op, integral, cmp)
  for _, c in ipairs(CONSTS) do
    if not (integral and FLOATC[c]) then
      turn = turn + 1
      local v = integral and ({ "a", "n" })[turn % 2 + 1] or ({ "a", "n", "d" })[turn % 3 + 1]
      if op == "<<" or op == ">>" then v = "a" end -- a small non-negative shift of 7
      local cast = cmp and "bool" or ((v == "d" or FLOATC[c]) and "double" or "long long")
      -- a float constant meets an integer result in double, as the rule says (C would use float)
      local l, r, pl, pr = "value(" .. v .. ")", c, "p" .. v, c == "2.0f" and "(double)2.0f" or c
      if turn % 2 == 0 then l, r, pl, pr = r, l, pr, pl end
      add(("%s %s %s"):format(l, op, r),
        ("if ((%s)(%s %s %s) != (%s)(%s %s %s)) return @ID@;"):format(cast, l, op, r, cast, pl, op, pr),
        op)
    end
  end
end
for _, op in ipairs { "+", "-", "*", "/" } do binary(op, false, false) end
for _, op in ipairs { "%", "&", "|", "^", "<<", ">>" } do binary(op, true, false) end
for _, op in ipairs { "<", ">", "<=", ">=", "==", "!=" } do binary(op, false, true) end

-- between two results, unary operators, conversions, boolean contexts, the outcome readers
for _, e in ipairs {
  { "value(a) + value(d)", "double" }, { "value(a) * value(n)", "long long" },
  { "value(a) / value(n)", "long long" }, { "value(a) % value(n)", "long long" },
  { "value(d) - value(f)", "double" }, { "value(a) << value(a)", "long long" },
  { "value(a) < value(d)", "bool" }, { "value(n) == value(n)", "bool" },
  { "-value(a)", "long long" }, { "-value(d)", "double" }, { "+value(n)", "long long" },
  { "~value(a)", "long long" }, { "!value(a)", "bool" }, { "!value(d)", "bool" },
  { "value(a) && value(d)", "bool" }, { "value(a) || 0", "bool" },
  { "value(n) ? 1 : 2", "int" }, { "value(a) > 5 ? value(a) : value(n)", "long long" },
  { "(int)value(d)", "int" }, { "(float)value(f)", "float" }, { "(unsigned char)value(a)", "int" },
  { "value(u) / 1000", "long long" }, { "value(u) > 4000000000u", "bool" },
  { "value(u) * 2", "unsigned long long" }, { "value(u) + value(a)", "unsigned long long" },
  { "value(u) > -1", "bool" }, { "value(f) * 4", "double" }, { "value(f) + 0.25f", "double" },
} do
  local plain = e[1]:gsub("value%((%a)%)", "p%1")
  if e[1] == "value(u) > -1" then plain = "true" end -- exact, where C would make -1 unsigned
  add(e[1], ("if ((%s)(%s) != (%s)(%s)) return @ID@;"):format(e[2], e[1], e[2], plain))
end
add("if (value(a)) ...", "{ int x = 0, y = 0; if (value(a)) x = 1; if (pa) y = 1; if (x != y) return @ID@; }")
add("while (value(n)) break", "{ int x = 0; while (value(n)) { x = 1; break; } if (x != 1) return @ID@; }")
add("buf[value(a)]", "{ long arr[8] = {0, 1, 2, 3, 4, 5, 6, 70}; if (arr[value(a)] != 70) return @ID@; }")
add("ptr + value(a)", "{ long arr[8] = {0, 1, 2, 3, 4, 5, 6, 70}; if (*(arr + value(a)) != 70) return @ID@; }")
add("long x = value(a)", "{ long x = value(a); if (x != pa) return @ID@; }")
add("double x = value(d)", "{ double x = value(d); if (x != pd) return @ID@; }")
add("float x = value(f)", "{ float x = value(f); if (x != 1.5f) return @ID@; }")
add("bool x = value(n)", "{ bool x = value(n); if (!x) return @ID@; }")
add("x += failed(a)", "{ long x = 1; x += failed(a); x += cancelled(a) * 2; if (x != 1) return @ID@; }")
add("x -= fail_code(a)", "{ int x = 4; x -= fail_code(a); if (x != 4 || failed(a) || !!cancelled(a)) return @ID@; }")
add("fail_message(a)[0]", "{ if (fail_message(a)[0] != 0) return @ID@; }")

-- the program: the futures, the plain values, then the checks picked (each returns its number)
local function program(pick)
  local lines = { "enum color { RED = 1, GREEN = 2 };",
    "task long li(long x) { return x; }",
    "task double ld(double x) { return x; }",
    "task float lf(float x) { return x; }",
    "task unsigned long long lu(unsigned long long x) { return x; }",
    "task int contexts(int unused) {",
    "  local future a, n, d, f, u;" }
  for _, k in ipairs(ORDER) do
    lines[#lines + 1] = ("  %s = spawn(%s, %s);"):format(k, VALUES[k].task, VALUES[k].arg)
  end
  lines[#lines + 1] = "  await_all(a, n, d, f, u);"
  for _, k in ipairs(ORDER) do
    lines[#lines + 1] = ("  %s p%s = %s;"):format(VALUES[k].plain, k, VALUES[k].ref)
  end
  for i, c in ipairs(checks) do
    if pick(i) then lines[#lines + 1] = "  " .. c[2]:gsub("@ID@", tostring(i)) end
  end
  lines[#lines + 1] = "  return 0;"
  lines[#lines + 1] = "}"
  return table.concat(lines, "\n") .. "\n"
end

describe("value(f) in arithmetic #sim", function()
  it(("gives what a plain long or double gives, in %d expressions"):format(#checks), function()
    local rt = support.runtime("sim")
    local prog = support.compile(rt, program(function() return true end), "contexts.cu")
    local bad = prog.contexts(0):await()
    assert(bad == 0, ("check %d differs: %s"):format(bad, checks[bad] and checks[bad][1] or "?"))
    print(("  [value(f): %d expressions, each as a plain long or double gives it]"):format(#checks))
    rt:close()
  end)

  it("compiles under NVRTC too #slow", function()
    local src = program(function(i) return checks[i][3] end)
    local cubin, err = mw.compile_cubin(src, { chunkname = "contexts.cu", arch = "sm_90" })
    assert.is_string(cubin, err)
  end)
end)
