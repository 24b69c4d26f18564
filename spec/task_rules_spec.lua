-- task_rules_spec.lua - the task language's rules around spawn and await: what the resumable
-- body cannot carry is a compile error at the user's file and line, in moonwarp's words, and the
-- C++ compiler's own messages come back without generated names or paths.
local mw = require "moonwarp"
local support = require "spec.support"

local LEAF = "task int leaf(int x) { return x * 10; }\n" -- line 1 of every source below

-- the source (after LEAF), the line and the words of its error
local REFUSED = {
  { "an await inside a switch", [[
task int f(int x) {
  local future a;
  local int r;
  switch (x) {
  case 1: a = spawn(leaf, 1); await(a); r = value(a) + 1; break;
  }
  return r;
}]], 6, "an await inside a switch (the switch on line 5) is not allowed" },
  { "an await in a switch whose case value is the await's line", [[
task int f(int x) {
  local future a;
  switch (x) {
  case 6: x = 2; break;
  default: a = spawn(leaf, 1);
    await(a);
  }
  return x;
}]], 7, "inside a switch" },
  { "two awaits on one line", [[
task int f(int x) {
  local future a, b;
  a = spawn(leaf, 1);
  b = spawn(leaf, 2);
  if (x) await(a); else await(b);
  return 0;
}]], 6, "two awaits on line 6: a task resumes at the line of its await, so each await needs a line of its own" },
  { "an initialised variable declared before an await", [[
task int f(int x) {
  local future a;
  int t = x + 1;
  a = spawn(leaf, t);
  await(a);
  return t;
}]], 4, "'t' is declared before the await on line 6 and would not keep its value across it: only 'local' variables" },
  { "an uninitialised variable declared before an await", [[
task int f(int x) {
  local future a;
  long t;
  t = x;
  a = spawn(leaf, 1);
  await(a);
  return t;
}]], 4, "'t' is declared before the await on line 7" },
  { "a for loop's variable around an await", [[
task int f(int x) {
  local future a;
  for (int i = 0; i < x; ++i) {
    a = spawn(leaf, i);
    await(a);
  }
  return 0;
}]], 4, "'i' is declared before the await on line 6" },
  { "a pointer in an enclosing block", [[
task int f(int *p) {
  local future a;
  if (p) {
    int *q = p + 1;
    a = spawn(leaf, 1);
    while (*q) {
      await(a);
      break;
    }
  }
  return 0;
}]], 5, "'q' is declared before the await on line 8" },
  { "an await inside an expression", [[
task int f(int x) {
  local future a;
  a = spawn(leaf, 1);
  x = (await(a), 1);
  return x;
}]], 5, "await(...) is a statement of its own" },
  { "an await in a condition", [[
task int f(int x) {
  local future a;
  a = spawn(leaf, 1);
  if (x && (try_await(a), 1)) x = 2;
  return x;
}]], 5, "try_await(...) is a statement of its own" },
  { "a spawn of no task", [[
task int f(int x) {
  local future a;
  a = spawn(no_such_task, x);
  await(a);
  return 0;
}]], 4, "spawn of 'no_such_task', which is not a task of this program (its tasks: leaf, f)" },
  { "a spawn with too many arguments", [[
task int f(int x) {
  local future a;
  a = spawn(leaf, x, 2);
  return 0;
}]], 4, "spawn(leaf, ...) passes 2 arguments, task leaf takes 1: int leaf(int x)" },
  { "a bulk spawn without its count", [[
task int f(int x) {
  local future a;
  a = spawn_bulk(leaf);
  return 0;
}]], 4, "spawn_bulk(leaf, ...) needs the number of instances after the task" },
  { "a bulk spawn of a task that spawns", [[
task void fan(int x) {
  local future a;
  a = spawn(leaf, x);
}
task int f(int x) {
  local future b;
  b = spawn_bulk(fan, 4, x);
  await(b);
  return 0;
}]], 8, "spawn_bulk of task fan, which spawns or awaits (line 4): bulk instances may not spawn or await" },
  { "a break outside any loop or switch (the body's own switch would take it)", [[
task int f(int x) {
  if (x > 3)
    break;
  return x;
}]], 4, "task f: 'break' outside any loop or switch" },
  { "a case label outside any switch", [[
task int f(int x) {
  local future a;
  a = spawn(leaf, x);
case 5:
  await(a);
  return value(a);
}]], 5, "task f: 'case' outside any switch" },
  { "an await of an integer", [[
task int f(int x) {
  local future a;
  local long h;
  await(a, h);
  return 0;
}]], 5, "await of 'h', which is declared 'long', not a future" },
  { "an await of an integer parameter", [[
task int f(int x) {
  await_all(x);
  return 0;
}]], 3, "await_all of 'x', which is declared 'int', not a future" },
  { "a spawn in helper code", [[
__device__ future helper(int x) {
  return spawn(leaf, x);
}
task int f(int x) { return x; }]], 3, "spawn(...) can only be used in a task body, not in helper code" },
  { "a block task that returns a value", [[
task block int f(float *x) {
  return 1;
}]], 2, "task f: a block task returns nothing: declare it 'task block void f(...)'" },
  { "a block task with a local", [[
task block void f(float *x) {
  local int k;
  x[0] = 1.0f;
}]], 3, "task f: a block task has no 'local' variables" },
  { "a block task that spawns", [[
task block void f(float *x) {
  x[0] = 1.0f;
  spawn(leaf, 1);
}]], 4, "task f: a block task cannot call spawn(): it runs on every warp of a worker CTA at once" },
  { "a block task that awaits", [[
task block void f(float *x) {
  await(x);
}]], 3, "task f: a block task cannot call await()" },
  { "value() in helper code", [[
__device__ long helper(future f) { return value(f); }
task int f(int x) { return x; }]], 2, "value(...) can only be used in a task body" },
}

-- sources the rules let through (each must generate)
local ACCEPTED = {
  { "declarations after the last await, in blocks that end before one, in loops without one", [[
task int f(int x) {
  local future a;
  local int i;
  for (int k = 0; k < 3; ++k) x += k;
  { int t = 2; x *= t; }
  a = spawn(leaf, x);
  for (i = 0; i < 2; ++i) {
    await(a);
    int seen = value(a);
    x += seen;
  }
  static int calls;
  long r = value(a) + x;
  return (int)r;
}]] },
  { "a switch without an await, spawn in a switch, awaits in if/else, loops and labels", [[
task int f(int x) {
  local future a;
  switch (x) { case 1: a = spawn(leaf, 1); break; default: a = spawn(leaf, 2); }
  if (x > 3)
    await(a);
  else {
    do {
      try_await(a);
    } while (0);
  }
again:
  while (x-- > 10) { await_all(a); if (x == 12) goto again; }
  return value(a) * x;
}]] },
  { "bulk spawns and future parameters", [[
task int g(future p, int n) {
  local future b;
  b = spawn_bulk(leaf, n, 3);
  await(p, b);
  return 0;
}]] },
}

describe("the task-language rules", function()
  for _, row in ipairs(REFUSED) do
    it("refuse " .. row[1] .. " at the user's line", function()
      local out, err, code = mw.generate(LEAF .. row[2], { chunkname = "rules.cu" })
      assert.is_nil(out, "generated: " .. row[1])
      assert.equals("ECOMPILE", code)
      assert.truthy(err:find("rules.cu:" .. row[3] .. ": ", 1, true), err)
      assert.truthy(err:find(row[4], 1, true), err)
    end)
  end

  for _, row in ipairs(ACCEPTED) do
    it("let through " .. row[1], function()
      local out, err = mw.generate(LEAF .. row[2], { chunkname = "rules.cu" })
      assert.is_string(out, err)
    end)
  end
end)

-- a program with mistakes the compiler finds: a spawn argument of the wrong type, a result of
-- the wrong type, value(f) where no single conversion is chosen, a member of value(f)
local MISTAKES = LEAF .. [[
task int f(int *p) {
  local future a;
  a = spawn(leaf, "seven");
  await(a);
  switch (value(a)) { case 1: return 0; }
  if (value(a).x) return 1;
  return p;
}
task int one() { return 1; }
]]

-- what the compiler's log must not show: the generated code's names and places
local GENERATED = { "mw_p0", "mw_q", "<mw-", "mw_frame_", "mw_args_", "mw_spawn", "mw_ctx", "mw_val",
  "_mw_ret_t", "_mw_fr", "/tmp/moonwarp-sim", "program.cpp", "__VA_ARGS__" }

local function in_user_terms(log)
  for _, g in ipairs(GENERATED) do
    assert.falsy(log:find(g, 1, true), "the log shows " .. g .. ":\n" .. log)
  end
  assert.truthy(log:find("value(f) converts to every arithmetic type", 1, true), log)
  -- each message once, though a self-contained task's text is compiled twice (its fast body)
  local seen, errors = {}, 0
  for line in log:gmatch("[^\n]+") do
    if line:find("error", 1, true) and not line:find("detected", 1, true) then
      assert.is_nil(seen[line], "the log says twice " .. line .. ":\n" .. log)
      seen[line], errors = true, errors + 1
    end
  end
  local tally = log:match("(%d+) errors? detected")
  if tally then assert.equals(errors, tonumber(tally), log) end
end

describe("compiler messages #sim", function()
  it("come back from the C++ compiler in the user's terms", function()
    local rt = support.runtime("sim")
    local prog, log, code = rt:compile(MISTAKES, "mistakes.cu")
    rt:close()
    assert.is_nil(prog)
    assert.equals("ECOMPILE", code)
    assert.truthy(log:find("In task 'f':", 1, true), log)
    assert.truthy(log:find("mistakes.cu:4:", 1, true), log)
    assert.truthy(log:find("it is parameter 1 of task 'leaf'", 1, true), log)
    assert.truthy(log:find("mistakes.cu:7:", 1, true), log)
    assert.truthy(log:find("mistakes.cu:8:", 1, true), log)
    in_user_terms(log)
  end)

  it("come back from NVRTC in the user's terms", function()
    local cubin, log, code = mw.compile_cubin(MISTAKES, { chunkname = "mistakes.cu" })
    assert.is_nil(cubin)
    assert.equals("ECOMPILE", code)
    assert.truthy(log:find("mistakes.cu(4)", 1, true), log)
    assert.truthy(log:find("mistakes.cu(6)", 1, true), log)
    in_user_terms(log)
  end)
end)
