-- trace_runs.lua - the runs of a task trace written by rt:trace_stop(path): its complete ("X")
-- events that keep(e) accepts (all when keep is nil), sorted by start; the file is removed.
-- Shared by bench/hops.lua and bench/stages.lua:  local runs = dofile(here .. "/trace_runs.lua")
local json = require "dkjson"

return function(path, keep)
  local f = assert(io.open(path))
  local doc = assert(json.decode(f:read("*a")))
  f:close()
  os.remove(path)
  local ev = {}
  for _, e in ipairs(doc.traceEvents) do
    if e.ph == "X" and (keep == nil or keep(e)) then ev[#ev + 1] = e end
  end
  table.sort(ev, function(a, b) return a.ts < b.ts end)
  return ev
end
