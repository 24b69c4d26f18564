-- summary.lua - a busted output handler: one character per test while it runs, then the
-- details of every failure and error, the message of every skipped (pending) test, and last
-- exactly one line "N passed, N failed, N skipped". Errors (in a test, a describe block or a
-- spec file) count as failed; pending tests count as skipped. With MW_SPEC_TRACE=1 it writes a
-- line as each test starts and ends instead of the characters, so a test that hangs is named.
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
  local started

  handler.testStart = function(element)
    started = os.clock()
    write("start: ", handler.getFullName(element), "\n")
    return nil, true
  end

  handler.testEnd = function(element, _, status)
    if trace then
      write(string.format("%s: %s (%.2f s cpu)\n", status, handler.getFullName(element),
        os.clock() - (started or os.clock())))
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

  if trace then busted.subscribe({ "test", "start" }, handler.testStart) end
  busted.subscribe({ "test", "end" }, handler.testEnd, { predicate = handler.cancelOnPending })
  busted.subscribe({ "suite", "end" }, handler.suiteEnd)
  busted.subscribe({ "error", "file" }, handler.errorOutside)
  busted.subscribe({ "failure", "file" }, handler.errorOutside)
  busted.subscribe({ "error", "describe" }, handler.errorOutside)
  busted.subscribe({ "failure", "describe" }, handler.errorOutside)

  return handler
end
