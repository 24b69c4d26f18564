-- repl_spec.lua - the interactive session of the `moonwarp` command, driven line by line.
local repl = require "moonwarp.repl"

-- Runs a session over lines; returns everything it wrote.
local function session(lines)
  local i, out = 0, {}
  repl.session {
    backend = "sim",
    input = function() i = i + 1 return lines[i] end,
    output = function(s) out[#out + 1] = s end,
  }
  return table.concat(out)
end

local FIB = {
  "def [[",
  "task long fib(int n) {",
  "  local future a, b;",
  "  if (n < 2) return n;",
  "  a = spawn(fib, n - 1);",
  "  b = spawn(fib, n - 2);",
  "  await_all(a, b);",
  "  return value(a) + value(b);",
  "}",
  "]]",
}

local function with(lines)
  local all = {}
  for _, l in ipairs(FIB) do all[#all + 1] = l end
  for _, l in ipairs(lines) do all[#all + 1] = l end
  return all
end

describe("the moonwarp REPL #sim", function()
  it("defines tasks, spawns, prints futures with their state and awaits", function()
    local out = session(with { "f = fib(20)", "f:await()", "f", ":quit" })
    assert.truthy(out:find("defined: long fib(int n)", 1, true), out)
    assert.truthy(out:find("6765", 1, true), out)
    assert.truthy(out:find("moonwarp.future<fib#%d+ ready>"), out)
  end)

  it("lists the loaded tasks and the runtime's counters", function()
    local out = session(with { "fib(10):await()", ":tasks", ":stats" })
    assert.truthy(out:find("  long fib(int n)\n", 1, true), out)
    assert.truthy(out:find("completed%s+%d+"), out)
    assert.truthy(out:find("in_flight%s+0"), out)
    -- per kind: fib(10) is 177 tasks, all completed
    assert.truthy(out:find("\n  fib%s+177%s+177%s+0%s+0\n"), out)
  end)

  it("continues an incomplete chunk and reports errors without leaving", function()
    local out = session { "x = 1 +", "2", "x", "nosuch()", "x * 2" }
    assert.truthy(out:find("\n3\n", 1, true) or out:find(" 3\n", 1, true), out)
    assert.truthy(out:find("attempt to call global 'nosuch'", 1, true), out)
    assert.truthy(out:find("6\n", 1, true), out)
  end)

  it("defines a new program while tasks are in flight, losing none of them", function()
    local out = session(with {
      "fs = {} for i = 1, 20 do fs[i] = fib(15) end",
      "def [[task int triple(int x) { return 3 * x; }]]",
      "triple(14):await()",
      "ok = true for i = 1, 20 do ok = ok and fs[i]:await() == 610 end",
      "ok",
    })
    assert.truthy(out:find("defined: int triple(int x)", 1, true), out)
    assert.truthy(out:find("\nmw> 42\n", 1, true) or out:find("42\n", 1, true), out)
    assert.truthy(out:find("true\n", 1, true), out)
  end)

  it("shows a compile error with the line in the definition", function()
    local out = session { "def [[task int bad(int x) {", "  return x +;", "}]]" }
    assert.truthy(out:find("repl:2", 1, true), out)
  end)
end)
