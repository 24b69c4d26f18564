--- moonwarp.repl: the interactive session behind the `moonwarp` command.
--
-- A LuaJIT read-eval-print loop with the module loaded as `mw` and a runtime ready as `rt`.
-- Expressions print their values (futures print their state); statements run; an incomplete
-- chunk continues on the next line. def(source) compiles a program and makes its tasks
-- globals: `def [[task long sq(long x) { return x * x; }]]`, then `sq(7):await()`.
-- Commands: :tasks (loaded tasks with signatures), :stats (the runtime's counters),
-- :help, :quit.
local mw = require "moonwarp"

local M = {}

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

--- Runs a session reading lines from input (a function returning a line or nil) and writing
-- with output (a function taking a string). Returns when input ends or on :quit.
function M.session(opts)
  local input, output = opts.input, opts.output
  local rt, err = mw.runtime { backend = opts.backend }
  if not rt then
    output("moonwarp: no runtime: " .. tostring(err) .. "\n")
    return false
  end
  local programs = {}
  local env = setmetatable({ mw = mw, rt = rt }, { __index = _G })
  env.def = function(source)
    local prog, perr = rt:compile(source, "repl")
    if not prog then error(perr, 0) end
    programs[#programs + 1] = prog
    local names = {}
    for _, t in ipairs(prog:tasks()) do
      env[t.name] = t
      names[#names + 1] = t.signature
    end
    return "defined: " .. table.concat(names, "; ")
  end

  local commands = {}
  function commands.tasks()
    local n = 0
    for _, prog in ipairs(programs) do
      for _, t in ipairs(prog:tasks()) do
        output("  " .. t.signature .. "\n")
        n = n + 1
      end
    end
    if n == 0 then output("  (no tasks: def [[task ...]])\n") end
  end
  function commands.stats()
    local s = rt:stats()
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
    output("  def [[task ...]]   compile a program; its tasks become globals\n"
      .. "  fib(20)            spawn: a future; fib(20):await() waits for its value\n"
      .. "  :tasks  :stats  :quit\n")
  end

  output(("moonwarp %s on %s; :help for help\n"):format(mw.version, rt.backend))
  local buffer = nil
  while true do
    output(buffer and ">> " or "mw> ")
    local line = input()
    if line == nil then break end
    local cmd = not buffer and line:match("^%s*:(%a+)%s*$")
    if cmd == "quit" or cmd == "q" then break end
    if cmd then
      if commands[cmd] then commands[cmd]() else output("  unknown command :" .. cmd .. "\n") end
    else
      buffer = buffer and (buffer .. "\n" .. line) or line
      local chunk, cerr = loadstring("return " .. buffer, "=repl")
      if not chunk then chunk, cerr = loadstring(buffer, "=repl") end
      if not chunk and cerr:find("<eof>", 1, true) then
        -- incomplete: read on
      else
        local text = buffer
        buffer = nil
        if not chunk then
          output(cerr .. "\n")
        else
          setfenv(chunk, env)
          local res = pack(xpcall(chunk, debug.traceback))
          if not res[1] then
            output(tostring(res[2]):gsub("\nstack traceback:.*", "") .. "\n")
          else
            for i = 2, res.n do output(show(res[i]) .. (i < res.n and "\t" or "\n")) end
          end
          local _ = text
        end
      end
    end
  end
  output("\n")
  rt:close()
  return true
end

--- The `moonwarp` command: a session on standard input and output.
function M.main()
  return M.session {
    backend = os.getenv("MOONWARP_BACKEND"),
    input = function() return io.read("*l") end,
    output = function(s) io.write(s) io.flush() end,
  }
end

return M
