-- chart.lua - draws a suite's figures as an SVG: one bar per figure, moonwarp beside its
-- baseline, each pair scaled to its own maximum. bench/suite.lua draws its run with it; alone it
-- redraws a run's bench.csv:  luajit bench/chart.lua DIR/bench.csv "cuda, 2026-12-06"  (writes DIR/bench.svg)
local M = {}

-- rows: { workload, figure, unit, moonwarp, baseline (number or not), ... }; title: the run's words
function M.svg(rows, title)
  local svg = {}
  local w, bar, gap = 900, 14, 10
  local h = 40 + #rows * (2 * bar + gap)
  svg[#svg + 1] = ('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">'):format(w, h)
  svg[#svg + 1] = ('<text x="10" y="20" font-size="14">moonwarp (blue) vs baseline (grey), %s</text>'):format(title)
  for i, r in ipairs(rows) do
    local y = 40 + (i - 1) * (2 * bar + gap)
    local mv, bv = r[4], tonumber(r[5]) or 0
    local top = math.max(mv, bv, 1e-12)
    svg[#svg + 1] = ('<text x="10" y="%d">%s: %s (%s)</text>'):format(y + bar, r[1], r[2], r[3])
    svg[#svg + 1] = ('<rect x="330" y="%d" width="%.1f" height="%d" fill="#3a6ea5"/>'):format(y, 450 * mv / top, bar - 2)
    svg[#svg + 1] = ('<text x="%.1f" y="%d">%.3g</text>'):format(335 + 450 * mv / top, y + bar - 3, mv)
    if bv > 0 then
      svg[#svg + 1] = ('<rect x="330" y="%d" width="%.1f" height="%d" fill="#999"/>'):format(y + bar, 450 * bv / top, bar - 2)
      svg[#svg + 1] = ('<text x="%.1f" y="%d">%.3g</text>'):format(335 + 450 * bv / top, y + 2 * bar - 3, bv)
    end
  end
  svg[#svg + 1] = "</svg>\n"
  return table.concat(svg, "\n")
end

-- the rows of a bench.csv as suite.lua writes it
function M.read_csv(path)
  local rows = {}
  for line in assert(io.open(path)):lines() do
    local wl, fig, unit, mv, bv, ratio = line:match('^"([^"]*)","([^"]*)",([^,]*),([^,]*),([^,]*),(.*)$')
    if wl and tonumber(mv) then rows[#rows + 1] = { wl, fig, unit, tonumber(mv), tonumber(bv) or bv, ratio } end
  end
  return rows
end

if arg and arg[0] and arg[0]:match("chart%.lua$") and arg[1] then
  local path = arg[1]
  local out = (path:match("^(.*)/[^/]*$") or ".") .. "/bench.svg"
  local f = assert(io.open(out, "w"))
  f:write(M.svg(M.read_csv(path), arg[2] or "cuda"))
  f:close()
  print("wrote " .. out)
end
return M
