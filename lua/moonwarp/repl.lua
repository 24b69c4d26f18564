--- moonwarp.repl: the `moonwarp` command, which runs scripts as luajit does and, with none,
-- an interactive session.
--
-- The session is a LuaJIT read-eval-print loop with the module loaded as `mw` and a runtime
-- ready as `rt`. Expressions print their values (futures print their state), `=expr` too;
-- statements run; an incomplete chunk continues on the next line; no error ends the session.
-- def(source) compiles a program on `rt` and makes its tasks globals:
-- `def [[task long sq(long x) { return x * x; }]]`, then `sq(7):await()`.
-- Commands: :tasks (loaded tasks with signatures), :stats (the runtime's counters), :help,
-- :quit. On a terminal, Debian's lua-readline gives line editing, history kept across sessions
-- (~/.moonwarp_history, or $MOONWARP_HISTORY; "" keeps none) and tab completion of globals,
-- fields, methods and task names; without it input is plain (said once). Ctrl-C drops the line
-- being typed, or interrupts what the line runs: an await (the task runs on: f:cancel() stops
-- it) or a Lua loop (the lines typed run with the JIT off so that the interrupt reaches them).
local mw = require "moonwarp"
local core = require "moonwarp.core"

local M = {}

M.usage = [==[
usage: moonwarp [options] [script [args]]
  -e chunk   run the Lua string chunk
  -l name    require library name into the global name
  -i         start the interactive session after the script or -e
  -v         print the version
  -h, --help print this help
  --         stop taking options
  -          run standard input as the script
With no script, -e or -v: the interactive session, with `mw` (the module) and `rt` (a runtime;
MOONWARP_BACKEND picks its backend) ready; :help inside it.
]==]

local function show(v)
  if type(v) == "table" and getmetatable(v) == nil then
    local keys = {}
    for k in pairs(v) do keys[#keys + 1] = k end
    table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
    local parts = {}
    for _, k in ipairs(keys) do parts[#parts + 1] = tostring(k) .. " = " .. tostring(v[k]) end
    return "{ " .. table.concat(parts, ", ") .. " }"
  end
  return tostring(v)
end

local function pack(...) return { n = select("#", ...), ... } end

-- An error's message as the session shows it: the session's own position is not the
-- user's, so it is dropped.
local function error_text(msg)
  return (tostring(msg):gsub("^[^\n]-moonwarp/repl%.lua:%d+: ", ""))
end

-- An error handler for xpcall(chunk, ...): the message, and a traceback of the frames between
-- the error and the line's own chunk (the functions the line called), when there are any.
local function traceback_to(chunk)
  return function(e)
    local lines, level = {}, 2
    while true do
      local info = debug.getinfo(level, "fSln")
      if info == nil or info.func == chunk or info.func == xpcall then break end
      if info.what ~= "C" and not info.short_src:find("moonwarp/repl%.lua$") then
        local name = info.name and ("function '" .. info.name .. "'")
          or ("function <" .. info.short_src .. ":" .. info.linedefined .. ">")
        lines[#lines + 1] = ("\t%s:%d: in %s"):format(info.short_src, info.currentline, name)
      end
      level = level + 1
    end
    if #lines == 0 then return error_text(e) end
    return error_text(e) .. "\nstack traceback:\n" .. table.concat(lines, "\n")
  end
end

---- completion -------------------------------------------------------------------------------

local KEYWORDS = { "and", "break", "do", "else", "elseif", "end", "false", "for", "function",
  "goto", "if", "in", "local", "nil", "not", "or", "repeat", "return", "then", "true", "until",
  "while" }

-- Fields that the moonwarp types compute (their methods come from core._methods).
local FIELDS = {
  ["moonwarp.runtime"] = { "backend", "faulted" },
  ["moonwarp.buffer"] = { "type", "count", "size", "address", "backend" },
  ["moonwarp.task"] = { "name", "signature", "kind", "file", "line", "result", "params", "bulk" },
}

-- The names one can write after `v.` or `v:`.
local function names_of(v)
  local out, seen = {}, {}
  local function add(k)
    if type(k) == "string" and not seen[k] then
      seen[k] = true
      out[#out + 1] = k
    end
  end
  if type(v) == "table" then
    local t, depth = v, 0
    while type(t) == "table" and depth < 8 do
      for k in pairs(t) do add(k) end
      local mt = getmetatable(t)
      t = type(mt) == "table" and mt.__index or nil
      depth = depth + 1
    end
  elseif type(v) == "string" then
    for k in pairs(string) do add(k) end
  elseif type(v) == "userdata" then
    for _, k in ipairs(core._methods(v)) do add(k) end
    for _, k in ipairs(FIELDS[getmetatable(v)] or {}) do add(k) end
    if getmetatable(v) == "moonwarp.program" then
      local ok, tasks = pcall(v.tasks, v)
      if ok then for _, t in ipairs(tasks) do add(t.name) end end
    end
  end
  return out
end

--- The completions of word (what precedes the cursor since the last blank or bracket) in env:
-- globals, keywords, or the fields, methods and task names after `a.b.` or `a:`.
function M.complete(env, word)
  local base, sep, part = word:match("^(.-)([.:])([%w_]*)$")
  local names, prefix = {}, ""
  if base then
    if not base:match("^[%a_][%w_]*$") and not base:match("^[%a_][%w_.:]*[%w_]$") then return {} end
    local v = env
    for name in base:gmatch("[^.:]+") do
      local ok, nv = pcall(function() return v[name] end)
      if not ok or nv == nil then return {} end
      v = nv
    end
    names, prefix = names_of(v), base .. sep
  else
    if word ~= "" and not word:match("^[%a_][%w_]*$") then return {} end
    part = word
    names = names_of(env)
    for _, k in ipairs(KEYWORDS) do names[#names + 1] = k end
  end
  local out, seen = {}, {}
  for _, k in ipairs(names) do
    if k:match("^[%a_][%w_]*$") and k:sub(1, #part) == part and not seen[k] then
      seen[k] = true
      out[#out + 1] = prefix .. k
    end
  end
  table.sort(out)
  return out
end

---- the session ------------------------------------------------------------------------------

--- Runs a session. opts:
--   input(prompt)  the next line, nil at the end of input, or false when the line was dropped
--                  (Ctrl-C)
--   output(s)      writes s
--   backend        the runtime's backend (nil: MOONWARP_BACKEND, else auto)
--   env            the globals the lines run in (default: a table that reads through to _G)
--   interrupts     true when SIGINT is caught (core._interrupts): lines run in "eval" mode
--   status(s)      shows s as a passing line while a compile runs, and clears it with nil
--                  (a terminal's session writes it to stderr; default: nothing)
-- Returns when input ends or on :quit.
function M.session(opts)
  local input, output = opts.input, opts.output
  local env = opts.env or setmetatable({}, { __index = _G })
  env.mw = mw
  -- definitions come one at a time: each costs what it alone costs to compile (build = "parts")
  local ok, rt, err = pcall(mw.runtime, { backend = opts.backend, build = "parts" })
  if not ok or not rt then
    output(("moonwarp: no runtime (%s); rt = mw.runtime { ... } makes one\n")
      :format(tostring(ok and err or rt)))
    rt = nil
  end
  env.rt = rt
  local programs = setmetatable({}, { __mode = "k" }) -- def's programs, per runtime
  env.def = function(source)
    local r = env.rt
    if r == nil then error("def: no runtime (rt is nil)", 2) end
    if opts.status then opts.status("compiling the definition...") end
    -- programs whose every task a later definition replaced are let go of: the runtime drops
    -- them (and reuses their kinds) once nothing runs them and nothing here refers to them
    collectgarbage()
    local t0 = mw.now()
    local ok, prog, perr = pcall(r.compile, r, source, "repl")
    local took = mw.now() - t0
    if opts.status then opts.status(nil) end
    if not ok then error(error_text(prog), 2) end
    if not prog then error(perr, 0) end
    programs[r] = programs[r] or {}
    local names, defined = {}, {}
    for _, t in ipairs(prog:tasks()) do
      env[t.name] = t
      names[#names + 1] = t.signature
      defined[t.name] = true
    end
    -- the programs before this one keep those of their tasks not defined again
    local kept = {}
    for _, old in ipairs(programs[r]) do
      for _, t in ipairs(old:tasks()) do
        if not defined[t.name] then kept[#kept + 1] = old break end
      end
    end
    kept[#kept + 1] = prog
    programs[r] = kept
    -- a compile long enough to notice says how long it took (the cache makes the next one quick)
    local slow = took >= 1 and (" (compiled in %.1f s)"):format(took) or ""
    return "defined: " .. table.concat(names, "; ") .. slow
  end

  local commands = {}
  function commands.tasks()
    local n, seen, lines = 0, {}, {}
    local list = env.rt and programs[env.rt] or {}
    for i = #list, 1, -1 do -- the latest definition of each name
      for _, t in ipairs(list[i]:tasks()) do
        if not seen[t.name] then
          seen[t.name] = true
          table.insert(lines, 1, "  " .. t.signature .. "\n")
          n = n + 1
        end
      end
    end
    for _, line in ipairs(lines) do output(line) end
    if n == 0 then output("  (no tasks: def [[task ...]])\n") end
  end
  function commands.stats()
    if env.rt == nil then error("no runtime (rt is nil)", 0) end
    local s = env.rt:stats()
    local keys = {}
    for k, v in pairs(s) do if type(v) ~= "table" then keys[#keys + 1] = k end end
    table.sort(keys)
    for _, k in ipairs(keys) do output(("  %-16s %s\n"):format(k, tostring(s[k]))) end
    local names = {}
    for name in pairs(s.tasks or {}) do names[#names + 1] = name end
    table.sort(names)
    if #names > 0 then
      output(("  %-16s %10s %10s %10s %10s\n"):format("task", "spawned", "completed", "failed",
        "cancelled"))
    end
    for _, name in ipairs(names) do
      local t = s.tasks[name]
      output(("  %-16s %10s %10s %10s %10s\n"):format(name, tostring(t.spawned),
        tostring(t.completed), tostring(t.failed), tostring(t.cancelled)))
    end
  end
  function commands.help()
    output("  def [[task ...]]   compile a program on rt; its tasks become globals\n"
      .. "  fib(20)            spawn: a future; fib(20):await() waits for its value\n"
      .. "  =expr              print expr (an expression alone prints too)\n"
      .. "  Ctrl-C             drop the line, or interrupt the await or loop it runs\n"
      .. "  :tasks  :stats  :quit (or Ctrl-D)\n")
  end

  -- Runs one complete chunk and prints its values or its error.
  -- (an expression's chunk returns its values packed, given pack as its argument: a call
  -- in it is then no tail call, and an error keeps the line's position)
  local function run(chunk, expr)
    setfenv(chunk, env)
    local body = chunk
    if opts.interrupts then
      jit.off(chunk, true)
      body = function(...)
        core._interrupts("eval") -- inside xpcall: an interrupt raised at once lands there too
        return chunk(...)
      end
    end
    local res = pack(xpcall(body, traceback_to(chunk), pack))
    if opts.interrupts then core._interrupts("idle") end
    if not res[1] then
      output(tostring(res[2]) .. "\n")
    elseif expr then
      local v = res[2]
      for i = 1, v.n do output(show(v[i]) .. (i < v.n and "\t" or "\n")) end
    end
  end

  -- Takes one line; returns false on :quit.
  local buffer = nil
  local function step(line)
    local cmd = not buffer and line:match("^%s*:(%a+)%s*$")
    if cmd == "quit" or cmd == "q" then return false end
    if cmd then
      if commands[cmd] then
        local cok, cerr = pcall(commands[cmd])
        if not cok then output("  " .. error_text(cerr) .. "\n") end
      else
        output("  unknown command :" .. cmd .. " (:help lists them)\n")
      end
      return true
    end
    if not buffer and line:match("^%s*=") then line = line:match("^%s*=(.*)$") end -- as Lua 5.1's
    buffer = buffer and (buffer .. "\n" .. line) or line
    -- text only: a line that starts with ESC (a key without line editing) is not bytecode
    local chunk, eerr = load("return " .. buffer, "=repl", "t")
    local expr, cerr = chunk ~= nil, nil
    if expr then
      chunk = load("local __mw_pack = ...; return __mw_pack(" .. buffer .. "\n)", "=repl", "t")
        or chunk
    else
      chunk, cerr = load(buffer, "=repl", "t")
    end
    -- incomplete (the text ended where more was due, as an expression or a statement): read on
    if not chunk and (eerr:find("near '<eof>'$") or cerr:find("near '<eof>'$")) then
      return true
    end
    buffer = nil
    if not chunk then
      output(cerr .. "\n")
    else
      run(chunk, expr)
    end
    return true
  end

  output(("moonwarp %s on %s; :help for help\n"):format(mw.version,
    rt and rt.backend or "no runtime"))
  while true do
    local line = input(buffer and ">> " or "mw> ")
    if line == nil then break end
    if line == false then
      buffer = nil
    else
      local sok, more = pcall(step, line)
      if opts.interrupts then core._interrupts("idle") end -- whatever happened in the line
      if not sok then
        buffer = nil
        output(error_text(more) .. "\n")
      elseif not more then
        break
      end
    end
  end
  output("\n")
  if env.rt then pcall(env.rt.close, env.rt) end
  return true
end

---- input ------------------------------------------------------------------------------------

local ffi = require "ffi"
ffi.cdef [[
  struct mwrepl_pollfd { int fd; short events; short revents; };
  int mwrepl_poll(struct mwrepl_pollfd *fds, unsigned long nfds, int timeout) __asm__("poll");
  int mwrepl_isatty(int fd) __asm__("isatty");
]]

local function history_file()
  local h = os.getenv("MOONWARP_HISTORY")
  if h then return h end
  local home = os.getenv("HOME")
  return home and home .. "/.moonwarp_history" or ""
end

-- Line input through GNU readline (lua-readline's alternate interface, so that the session's
-- own loop waits in poll() and sees Ctrl-C): editing, history, completion. Returns the input
-- function and a function that saves the history.
local function readline_input(RL, env)
  -- readline's own signal handling off: the session takes Ctrl-C itself and cleans up
  -- readline's state as its documentation asks of an application that does
  local ok, lib = pcall(function()
    pcall(ffi.cdef, [[
      extern int rl_catch_signals;
      void rl_free_line_state(void);
      void rl_callback_sigcleanup(void);
      void rl_cleanup_after_signal(void);
    ]])
    -- the library lua-readline's C part is linked with (already loaded: the same instance)
    local found, l = pcall(ffi.load, "libreadline.so.8")
    if not found then l = ffi.load("readline") end
    l.rl_catch_signals = 0
    return l
  end)
  if not ok then lib = nil end
  RL.set_options { histfile = history_file(), keeplines = 1000, completion = true }
  RL.set_readline_name("moonwarp")
  RL.set_completion_append_character("")
  RL.set_complete_function(function(text, from, to)
    RL.set_completion_append_character("") -- readline resets it to " " before each completion
    local ok, list = pcall(M.complete, env, text:sub(from, to))
    return ok and list or {}
  end)
  local fds = ffi.new("struct mwrepl_pollfd[1]")
  fds[0].fd, fds[0].events = 0, 1 -- POLLIN
  local last
  local function input(prompt)
    core._interrupted() -- a Ctrl-C that came before the prompt showed is not this line's
    local line, got = nil, false
    RL.handler_install(prompt, function(l)
      line, got = l, true
      RL.handler_remove()
    end)
    while not got do
      local r = ffi.C.mwrepl_poll(fds, 1, -1)
      if core._interrupted() then
        if lib then
          lib.rl_free_line_state()
          lib.rl_callback_sigcleanup()
          lib.rl_cleanup_after_signal()
        end
        RL.handler_remove()
        io.write("^C\n")
        io.flush()
        return false
      end
      if r > 0 then RL.read_char() end
    end
    if line and line:match("%S") and line ~= last then
      RL.add_history(line)
      last = line
    end
    return line
  end
  return input, function() if history_file() ~= "" then RL.save_history() end end
end

-- Plain line input (no terminal, or no lua-readline).
local function plain_input(interactive)
  return function(prompt)
    if interactive then core._interrupted() end -- one that came before the prompt showed
    io.write(prompt)
    io.flush()
    local line = io.read("*l")
    if interactive and core._interrupted() then
      io.write("^C\n")
      return false
    end
    return line
  end
end

--- The interactive session on standard input and output (readline on a terminal).
function M.interactive(env)
  local tty = ffi.C.mwrepl_isatty(0) == 1
  local input, finish = nil, function() end
  local output = function(s) io.write(s) io.flush() end
  if tty then
    local ok, RL = pcall(require, "readline")
    if ok and type(RL) == "table" then
      input, finish = readline_input(RL, env)
    else
      output("moonwarp: lua-readline is not installed: no line editing, history or completion "
        .. "(apt-get install lua-readline)\n")
    end
    core._interrupts("idle")
  end
  input = input or plain_input(tty)
  local status = tty and ffi.C.mwrepl_isatty(2) == 1 and function(s)
    io.stderr:write(s and ("\r" .. s) or "\r\27[K")
    io.stderr:flush()
  end or nil
  local ok, err = pcall(M.session, {
    backend = os.getenv("MOONWARP_BACKEND"),
    input = input,
    output = output,
    env = env,
    interrupts = tty,
    status = status,
  })
  pcall(finish)
  if tty then core._interrupts("off") end
  if not ok then
    io.stderr:write("moonwarp: ", tostring(err), "\n")
    return false
  end
  return true
end

---- the command ------------------------------------------------------------------------------

local function fail(msg)
  io.stderr:write("moonwarp: ", msg, "\n")
  return false
end

-- Runs a loaded chunk with args; reports an error with its traceback.
local function run_chunk(chunk, err, ...)
  if not chunk then return fail(err) end
  local res = pack(xpcall(chunk, debug.traceback, ...))
  if not res[1] then return fail(tostring(res[2])) end
  return true
end

--- The `moonwarp` command. argv: its arguments (arg[1..] of the launcher); argv0: the
-- launcher's name. Returns true on success.
function M.main(argv, argv0)
  argv = argv or {}
  local i, n = 1, #argv
  local interactive, did = false, false
  while i <= n do
    local a = argv[i]
    if a == "--" then
      i = i + 1
      break
    elseif a == "-" or a:sub(1, 1) ~= "-" then
      break
    elseif a == "-h" or a == "--help" then
      io.write(M.usage)
      return true
    elseif a == "-v" then
      io.write("moonwarp ", mw.version, " (", jit and jit.version or _VERSION, ")\n")
      did = true
    elseif a == "-i" then
      interactive = true
    elseif a:sub(1, 2) == "-e" then
      local src = #a > 2 and a:sub(3) or argv[i + 1]
      if src == nil then return fail("'-e' needs an argument\n" .. M.usage) end
      if #a == 2 then i = i + 1 end
      if not run_chunk(loadstring(src, "=(command line)")) then return false end
      did = true
    elseif a:sub(1, 2) == "-l" then
      local name = #a > 2 and a:sub(3) or argv[i + 1]
      if name == nil then return fail("'-l' needs an argument\n" .. M.usage) end
      if #a == 2 then i = i + 1 end
      local ok, lib = pcall(require, name)
      if not ok then return fail(tostring(lib)) end
      _G[name] = lib
    else
      return fail("unrecognized option '" .. a .. "'\n" .. M.usage)
    end
    i = i + 1
  end
  if i <= n then -- a script, then its arguments
    local script = argv[i]
    local sarg = { [0] = script }
    sarg[-1] = argv0 or "moonwarp"
    for k = i + 1, n do sarg[k - i] = argv[k] end
    _G.arg = sarg
    local chunk, err
    if script == "-" then chunk, err = loadfile() else chunk, err = loadfile(script) end
    if not run_chunk(chunk, err, unpack(sarg, 1, n - i)) then return false end
    did = true
  end
  if interactive or not did then return M.interactive(_G) end
  return true
end

return M
