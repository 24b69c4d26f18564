-- summary.lua - a busted output handler: one character per test while it runs, then the
-- details of every failure and error, the message of every skipped (pending) test, and last
-- exactly one line "N passed, N failed, N skipped". Errors (in a test, a describe block or a
-- spec file) count as failed; pending tests count as skipped. With MW_SPEC_TRACE=1 it writes a
-- line as each test starts and ends instead of the characters, so a test that hangs is named,
-- with the test's wall and CPU seconds, and a line with each spec file's wall seconds (its
-- setup included), so a time-bounded run shows where its time went.
--
--   luajit /usr/bin/busted -o spec/output/summary.lua
return function(options)
  local busted = require "busted"
  local handler = require "busted.outputHandlers.base"()
  local pretty = require "pl.pretty"

  local function write(...)
    io.stdout:write(...)
    io.stdout:flush()
  end

  local marks = { success = ".", failure = "F", error = "E", pending = "s" }

  local function message_text(m)
    if type(m) == "string" then return m end
    if m == nil then return "(no message)" end
    return pretty.write(m)
  end

  local function where(item)
    local trace = item.element and item.element.trace or item.trace
    if trace and trace.short_src then
      return trace.short_src .. ":" .. tostring(trace.currentline)
    end
    return "?"
  end

  local function describe_failure(kind, item)
    local text = kind .. ": " .. item.name .. " (" .. where(item) .. ")\n"
      .. message_text(item.message)
    if options.verbose and item.trace and item.trace.traceback then
      text = text .. "\n" .. item.trace.traceback
    end
    return text
  end

  local trace = os.getenv("MW_SPEC_TRACE") == "1"
  local started, started_wall, file_wall

  -- wall seconds (CLOCK_MONOTONIC): os.clock() is the process's CPU time
  local ffi = require "ffi"
  pcall(ffi.cdef, "struct mw_spec_timespec { long tv_sec; long tv_nsec; };"
    .. "int clock_gettime(int clk, struct mw_spec_timespec *ts);")
  local ts = ffi.new("struct mw_spec_timespec")
  local function wall()
    ffi.C.clock_gettime(1, ts)
    return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
  end

  handler.testStart = function(element)
    started, started_wall = os.clock(), wall()
    write("start: ", handler.getFullName(element), "\n")
    return nil, true
  end

  handler.testEnd = function(element, _, status)
    if trace then
      write(string.format("%s: %s (%.2f s, %.2f s cpu)\n", status, handler.getFullName(element),
        wall() - (started_wall or wall()), os.clock() - (started or os.clock())))
    else
      write(marks[status] or "?")
    end
    return nil, true
  end

  handler.errorOutside = function()
    write("E")
    return nil, true
  end

  handler.suiteEnd = function()
    write("\n")
    for _, item in ipairs(handler.failures) do
      write("\n", describe_failure("FAILED", item), "\n")
    end
    for _, item in ipairs(handler.errors) do
      write("\n", describe_failure("ERROR", item), "\n")
    end
    if #handler.pendings > 0 then write("\n") end
    for _, item in ipairs(handler.pendings) do
      local text = "skipped: " .. item.name
      if type(item.message) == "string" and item.message ~= item.name then
        text = text .. ": " .. item.message
      end
      write(text, "\n")
    end
    write(string.format("%d passed, %d failed, %d skipped\n", handler.successesCount,
      handler.failuresCount + handler.errorsCount, handler.pendingsCount))
    return nil, true
  end

  handler.fileStart = function()
    file_wall = wall()
    return nil, true
  end

  handler.fileEnd = function(file)
    write(string.format("file: %s (%.1f s)\n", file and file.name or "?", wall() - (file_wall or wall())))
    return nil, true
  end

  if trace then
    busted.subscribe({ "test", "start" }, handler.testStart)
    busted.subscribe({ "file", "start" }, handler.fileStart)
    busted.subscribe({ "file", "end" }, handler.fileEnd)
  end
  busted.subscribe({ "test", "end" }, handler.testEnd, { predicate = handler.cancelOnPending })
  busted.subscribe({ "suite", "end" }, handler.suiteEnd)
  busted.subscribe({ "error", "file" }, handler.errorOutside)
  busted.subscribe({ "failure", "file" }, handler.errorOutside)
  busted.subscribe({ "error", "describe" }, handler.errorOutside)
  busted.subscribe({ "failure", "describe" }, handler.errorOutside)

  return handler
end
