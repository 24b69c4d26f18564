-- repl_spec.lua - the `moonwarp` command: its interactive session driven line by line, its
-- completion, its command line as luajit's, and the whole of it on a pseudo-terminal (line
-- editing, history, completion, Ctrl-C) as a person at a keyboard meets it.
local repl = require "moonwarp.repl"
local support = require "spec.support"

-- Runs a session over lines; returns everything it wrote (prompts included).
local function session(lines, backend)
  local i, out = 0, {}
  repl.session {
    backend = backend or "sim",
    input = function(prompt)
      out[#out + 1] = prompt
      i = i + 1
      return lines[i]
    end,
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

  it("shows a passing status line while a definition compiles, and how long a slow one took", function()
    local shown, out, i = {}, {}, 0
    -- a constant of its own, so the compile is not a cache hit
    local lines = { ("def [[task int k() { return %d; }]]"):format(os.time() % 100000 + 7), ":quit" }
    repl.session {
      backend = "sim",
      input = function() i = i + 1 return lines[i] end,
      output = function(s) out[#out + 1] = s end,
      status = function(s) shown[#shown + 1] = s or "(cleared)" end,
    }
    assert.same({ "compiling the definition...", "(cleared)" }, shown)
    local text = table.concat(out)
    assert.truthy(text:find("defined: int k()", 1, true), text)
    local took = text:match("%(compiled in ([%d.]+) s%)")
    if took then assert.is_true(tonumber(took) >= 1, text) end -- only a compile of 1 s or more says so
  end)

  it("shows a compile error with the line in the definition", function()
    local out = session { "def [[task int bad(int x) {", "  return x +;", "}]]" }
    assert.truthy(out:find("repl:2", 1, true), out)
  end)

  it("prints =expr, and keeps going after errors, a closed runtime and a bad command", function()
    local out = session { "=6 * 7", "rt:close()", ":stats", ":tasks", "def [[task int f() { return 1; }]]",
      ":nosuch", "error('boom')", "= 1 +", "2", ":quit", "=99" }
    assert.truthy(out:find("mw> 42\n", 1, true), out)
    assert.truthy(out:find("runtime is closed", 1, true), out)
    assert.truthy(out:find("unknown command :nosuch", 1, true), out)
    assert.truthy(out:find("repl:1: boom", 1, true), out)
    assert.truthy(out:find(">> 3\n", 1, true), out)
    assert.falsy(out:find("99", 1, true), out) -- :quit ended it
    assert.falsy(out:find("repl.lua", 1, true), out) -- no position of the session's own code
  end)

  it("starts without a runtime when none can be made, and says why", function()
    local out = session({ "1 + 1", "rt", "def [[task int f() { return 1; }]]" }, "bogus")
    assert.truthy(out:find("no runtime (", 1, true), out)
    assert.truthy(out:find("bogus", 1, true), out)
    assert.truthy(out:find("mw> 2\n", 1, true), out)
    assert.truthy(out:find("def: no runtime", 1, true), out)
  end)

  it("shows the frames of the functions a line called, not the session's", function()
    local out = session { "function g() error('deep') end", "local function h() g() end h()" }
    assert.truthy(out:find("repl:1: deep\nstack traceback:\n\trepl:1: in function", 1, true), out)
    assert.falsy(out:find("xpcall", 1, true), out)
  end)
end)

describe("the REPL's completion #sim", function()
  local mw = require "moonwarp"
  local rt, env

  setup(function()
    rt = support.runtime("sim")
    local prog = support.compile(rt, support.FIB)
    env = setmetatable({ mw = mw, rt = rt, prog = prog, fib = prog.fib, fut = prog.fib(3),
      buf = rt:buffer("float", 4), t = { alpha = 1, beta = { gamma = 2 } } }, { __index = _G })
  end)
  teardown(function() rt:close() end)

  local function complete(word) return repl.complete(env, word) end

  it("completes globals and keywords", function()
    local words = complete("f")
    local set = {}
    for _, w in ipairs(words) do
      assert.equals("f", w:sub(1, 1))
      set[w] = true
    end
    assert.truthy(set.fib and set.fut and set["for"] and set["function"], table.concat(words, " "))
    assert.truthy(table.concat(complete("wh"), " "):find("while", 1, true))
    assert.truthy(table.concat(complete("pri"), " "):find("print", 1, true))
  end)

  it("completes fields of tables, to any depth", function()
    assert.same({ "t.alpha" }, complete("t.al"))
    assert.same({ "t.beta.gamma" }, complete("t.beta.g"))
    assert.same({ "mw.run", "mw.runtime" }, complete("mw.run"))
    assert.same({ "string.format" }, complete("string.form"))
  end)

  it("completes methods and fields of runtimes, futures, buffers and task names of programs", function()
    assert.same({ "rt:stats" }, complete("rt:sta"))
    assert.same({ "rt.backend" }, complete("rt.back"))
    assert.same({ "fut:await" }, complete("fut:aw"))
    assert.same({ "buf:write", "buf:write_from" }, complete("buf:wri"))
    assert.same({ "buf.count" }, complete("buf.cou"))
    assert.same({ "prog.fib" }, complete("prog.fi"))
    assert.same({ "fib.signature" }, complete("fib.sig"))
  end)

  it("offers nothing for what it cannot resolve", function()
    assert.same({}, complete("nosuch.x"))
    assert.same({}, complete("t.alpha.x"))
    assert.same({}, complete("1+"))
  end)
end)

describe("the moonwarp command #sim", function()
  local function moonwarp(args, stdin)
    return support.run((stdin and ("printf %s | "):format(support.shell_quote(stdin)) or "")
      .. "MOONWARP_BACKEND=sim luajit bin/moonwarp " .. args)
  end

  it("prints its usage for --help and -h, and refuses an unknown option with it", function()
    local status, out = moonwarp("--help")
    assert.equals(0, status, out)
    assert.truthy(out:find("usage: moonwarp [options] [script [args]]", 1, true), out)
    status, out = moonwarp("-h")
    assert.equals(0, status, out)
    status, out = moonwarp("-x")
    assert.equals(1, status, out)
    assert.truthy(out:find("unrecognized option '-x'", 1, true), out)
    assert.truthy(out:find("usage:", 1, true), out)
  end)

  it("runs a script with its arguments in arg and ..., and fails with the script's error", function()
    local script = os.tmpname()
    local f = assert(io.open(script, "w"))
    f:write([[
local mw = require "moonwarp"
local a, b = ...
print("args", arg[0] == ... and "?" or "ok", arg[1], arg[2], a, b, #arg)
local rt = assert(mw.runtime { backend = "sim" })
local prog = rt:compile("task int sq(int x) { return x * x; }")
print("sq", prog.sq(tonumber(a)):await())
if b == "fail" then error("boom from the script") end
]])
    f:close()
    local status, out = moonwarp(support.shell_quote(script) .. " 12 x")
    assert.equals(0, status, out)
    assert.truthy(out:find("args\tok\t12\tx\t12\tx\t2", 1, true), out)
    assert.truthy(out:find("sq\t144", 1, true), out)
    assert.falsy(out:find("mw>", 1, true), out) -- no session after a script
    status, out = moonwarp(support.shell_quote(script) .. " 3 fail")
    assert.equals(1, status, out)
    assert.truthy(out:find("moonwarp: " .. script .. ":7: boom from the script", 1, true), out)
    assert.truthy(out:find("stack traceback:", 1, true), out)
    status, out = moonwarp("/nonexistent/x.lua")
    assert.equals(1, status, out)
    assert.truthy(out:find("cannot open /nonexistent/x.lua", 1, true), out)
    os.remove(script)
  end)

  it("runs -e chunks and -l libraries in order, a script from standard input with -, and -i after them",
    function()
      local status, out = moonwarp([[-l dkjson -e "x = 20" -e "print(x + 1, dkjson ~= nil)"]])
      assert.equals(0, status, out)
      assert.equals("21\ttrue\n", out)
      status, out = moonwarp("-e 'error(\"bad\")'")
      assert.equals(1, status, out)
      assert.truthy(out:find("moonwarp: (command line):1: bad", 1, true), out)
      status, out = moonwarp("- 5", "print('from stdin', ...)")
      assert.equals(0, status, out)
      assert.equals("from stdin\t5\n", out)
      status, out = moonwarp("-e 'y = 6' -i", "y * 7\n")
      assert.equals(0, status, out)
      assert.truthy(out:find("mw> 42\n", 1, true), out)
      status, out = moonwarp("-v")
      assert.equals(0, status, out)
      assert.truthy(out:find("^moonwarp %d+%.%d+%.%d+"), out)
    end)

  it("runs from the tree with nothing on the Lua paths, from any directory", function()
    local root = support.run("pwd") == 0 and select(2, support.run("pwd")):gsub("%s+$", "")
    local status, out = support.run("cd / && env -u LUA_PATH -u LUA_CPATH MOONWARP_BACKEND=sim "
      .. "luajit " .. support.shell_quote(root .. "/bin/moonwarp") .. " -e 'print(require(\"moonwarp\").version)'")
    assert.equals(0, status, out)
    assert.equals(require("moonwarp").version .. "\n", out)
  end)
end)

describe("the moonwarp command on a terminal #sim #slow", function()
  local pty = require "spec.pty"
  local mw = require "moonwarp"
  local have_readline = pcall(require, "readline")
  local history

  before_each(function()
    history = os.tmpname()
    os.remove(history)
  end)
  after_each(function() os.remove(history) end)

  local function start(env)
    local e = { "MOONWARP_BACKEND=sim", "MOONWARP_HISTORY=" .. history, "HOME=/nonexistent" }
    for _, v in ipairs(env or {}) do e[#e + 1] = v end
    local p = pty.spawn({ "luajit", "bin/moonwarp" }, e)
    p:expect("mw> ")
    return p
  end

  local function pause(s)
    local t = mw.now()
    while mw.now() - t < s do end
  end

  -- Control keys are sent once the session rests at its prompt: typed ahead while a line runs
  -- (the terminal in its cooked mode then), Ctrl-D is an end of file readline does not see and
  -- Ctrl-C interrupts that line. Ordinary text may be typed ahead.
  -- (wait: seconds for the session to end; a task that runs on is abandoned at the close
  -- deadline, 10 s, and a sanitizer build tears down slowly)
  local function quit(p, wait)
    p:settle("mw> ")
    p:send("\4") -- Ctrl-D at an empty prompt ends the session
    local code, why = p:wait(wait or 20)
    assert.equals(0, code, (why or "") .. "\n" .. p:text())
  end

  if not have_readline then
    pending("lua-readline is not installed: line editing, history and completion are not checked")
  else
    it("edits lines, completes globals, methods and task names, and keeps history across sessions",
      function()
        local p = start()
        p:send("1 + 2\r")
        p:expect("\n3\n")
        p:send("=2*21\r")
        p:expect("\n42\n")
        p:send("x = 5\027[D6\r") -- Left, then a 6 before the 5: 65
        p:send("x\r")
        p:expect("\n65\n")
        p:send("rt:sta\t")
        p:expect("rt:stats")
        p:send("().workers\r")
        p:expect("\n4\n")
        p:send("def [[task int twice(int v) { return 2 * v; }]]\r")
        p:expect("defined: int twice(int v)")
        p:settle("mw> ")
        p:send("twi\t")
        p:expect("twice")
        p:send("(21):await()\r")
        p:expect("\n42\n")
        p:send("hist_value = 7\r")
        p:expect("hist_value = 7")
        quit(p)
        local f = assert(io.open(history), "no history file was written")
        local saved = f:read("*a")
        f:close()
        assert.truthy(saved:find("hist_value = 7", 1, true), saved)

        p = start()
        p:send("\027[A\r") -- Up: the last line of the session before
        p:expect("hist_value = 7")
        p:expect("mw> ")
        p:send("hist_value\r")
        p:expect("\n7\n")
        quit(p)
      end)
  end

  -- Ctrl-C, again every 3 s until the session shows text: a key typed before the line has left
  -- readline's raw mode is read as a character, not a signal, and a key typed on a half-typed
  -- line before the prompt reads keys is lost; on a loaded machine (a sanitizer build beside
  -- other work) either moment can be late
  local function ctrl_c_until(p, text)
    for _ = 1, 6 do
      p:send("\3")
      if pcall(p.expect, p, text, 3) then return end
    end
    p:expect(text, 1)
  end
  local function interrupt(p) ctrl_c_until(p, "interrupted") end

  it("drops the line on Ctrl-C and interrupts an await or a Lua loop, and the session goes on",
    function()
      local p = start()
      p:send("def [[task int spin(int n) { volatile long x = 0; "
        .. "for (long i = 0; i < 4000000000L; i++) x += i; return n; }]]\r")
      p:expect("defined: int spin(int n)")
      p:settle("mw> ")
      p:send("partial = line +")
      pause(0.2)
      ctrl_c_until(p, "^C") -- the half-typed line dropped
      p:expect("mw> ")
      p:send("1 + 1\r")
      p:expect("\n2\n")
      p:send("f = spin(1)\r")
      p:expect("f = spin(1)")
      p:expect("mw> ")
      p:send("f:await()\r")
      p:expect("f:await()")
      pause(0.5)
      interrupt(p)
      p:expect("mw> ")
      p:send("f:state()\r")
      p:expect("pending") -- the task runs on
      p:send("f:cancel()\r")
      p:expect("true")
      p:expect("mw> ")
      p:send("while true do end\r")
      p:expect("while true do end")
      pause(0.5)
      interrupt(p)
      p:expect("mw> ")
      p:send("3 * 3\r")
      p:expect("\n9\n")
      quit(p, 60) -- spin runs on (it never spawns or awaits): the close abandons it
    end)

  it("says once that line editing needs lua-readline when it cannot load it, and works without",
    function()
      -- the module's own paths only: readline is not found there
      local p = start { "LUA_PATH=" .. (os.getenv("LUA_PATH") or ""):gsub(";;", ";"):gsub(";$", ""),
        "LUA_CPATH=" .. (os.getenv("LUA_CPATH") or ""):gsub(";;", ";"):gsub(";$", "") }
      p:send("4 * 4\r")
      p:expect("\n16\n")
      p:settle("mw> ")
      p:send("half a line")
      pause(0.2)
      p:send("\3")
      p:expect("mw> ")
      p:send("5 * 5\r")
      p:expect("\n25\n")
      quit(p)
      local text = p:text()
      local _, n = text:gsub("lua%-readline is not installed", "")
      assert.equals(1, n, text)
    end)
end)
