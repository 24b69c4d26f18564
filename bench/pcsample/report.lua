-- report.lua - bench/pcsample/pcsample.c's samples read against the kernel's SASS: the samples
-- by stall reason, by function of the executor (the noinline functions inside its kernel), and
-- the instructions that drew the most, with their reasons.
-- Usage: luajit bench/pcsample/report.lua SAMPLES CUBIN [top] [function-pattern]
--   (nvdisasm from $NVDISASM or the PATH; top: instructions listed, default 40; a pattern keeps
--   the functions whose names match it)
local samples_path, cubin, top, pattern = arg[1], arg[2], tonumber(arg[3] or 40), arg[4]
if not (samples_path and cubin) then
  io.stderr:write("usage: luajit bench/pcsample/report.lua SAMPLES CUBIN [top] [function-pattern]\n")
  os.exit(2)
end

for _, path in ipairs { samples_path, cubin } do
  local f = io.open(path, "rb")
  if not f then
    io.stderr:write(("report.lua: cannot read %s\n"):format(path))
    os.exit(2)
  end
  f:close()
end
if not (top and top >= 1 and top == math.floor(top)) then
  io.stderr:write(("report.lua: top must be a whole number >= 1, got '%s'\n"):format(arg[3]))
  os.exit(2)
end

-- the SASS: offset -> instruction and the function it is in
local nvdisasm = os.getenv("NVDISASM") or "nvdisasm"
local pipe = assert(io.popen(("%s %q 2>&1"):format(nvdisasm, cubin)))
local insn, fn_of = {}, {}
local fn = "?"
for line in pipe:lines() do
  local label = line:match("^(%$?[%w_$.]+):%s*$")
  if label and not label:match("^%.L") then
    -- an internal function: $kernel$_Z<len><name>...; the kernel itself by its own name
    local inner = label:match("^%$[%w_]+%$_Z%d+([%a_][%w_]*)")
    if inner then
      local len = tonumber(label:match("^%$[%w_]+%$_Z(%d+)"))
      fn = len and inner:sub(1, len) or inner
      local targ = len and inner:sub(len + 1):match("^ILj(%d+)E") -- a template's value: mw_take_inbox_w<2>
      if targ then fn = fn .. "<" .. targ .. ">" end
    elseif not label:match("^%$") and not label:match("^%.") then
      fn = label
    end
  end
  local off, text = line:match("/%*(%x+)%*/%s+(.-)%s*;?%s*/%*")
  if not off then off, text = line:match("/%*(%x+)%*/%s+(.-)%s*;%s*$") end
  if off and text and text:match("^[%u@]") then
    local o = tonumber(off, 16)
    insn[o], fn_of[o] = text, fn
  end
end
pipe:close()
if not next(insn) then
  io.stderr:write(("report.lua: no instructions read from %s with %s\n"):format(cubin, nvdisasm))
  os.exit(1)
end

-- the samples
local reasons, rows, header = {}, {}, nil
for line in io.lines(samples_path) do
  if line:match("^# pcsample:") then header = line end
  local rs = line:match("^# reasons: (.*)$")
  if rs then for r in rs:gmatch("%S+") do reasons[#reasons + 1] = r:gsub("^smsp__pcsamp_warps_issue_stalled_", "") end end
  if not line:match("^#") then
    local f, pc, rest = line:match("^(%S+) 0x(%x+) (.*)$")
    if f then
      -- CUPTI counts each stall twice: as X and, when the warp issued nothing, as X_not_issued
      -- too; the sum and the shares count the first kind only
      local n, sum = {}, 0
      for v in rest:gmatch("%d+") do
        n[#n + 1] = tonumber(v)
        if not (reasons[#n] or ""):match("_not_issued$") then sum = sum + n[#n] end
      end
      rows[#rows + 1] = { kernel = f, pc = tonumber(pc, 16), n = n, sum = sum }
    end
  end
end
print(header or "# (no header)")

local function top_reasons(n, total, k)
  local idx = {}
  for i = 1, #n do if n[i] > 0 and not (reasons[i] or ""):match("_not_issued$") then idx[#idx + 1] = i end end
  table.sort(idx, function(a, b) return n[a] > n[b] end)
  local parts = {}
  for j = 1, math.min(k, #idx) do
    parts[#parts + 1] = ("%s %.0f%%"):format(reasons[idx[j]] or ("#" .. idx[j]), 100 * n[idx[j]] / total)
  end
  return table.concat(parts, ", ")
end

-- by function (kept by the pattern), and in all
local by_fn, total, all = {}, 0, {}
for _, r in ipairs(rows) do
  local f = fn_of[r.pc] or ("?" .. r.kernel)
  r.fn = f
  if not pattern or f:match(pattern) then
    local e = by_fn[f] or { n = {}, sum = 0 }
    by_fn[f] = e
    for i, v in ipairs(r.n) do
      e.n[i] = (e.n[i] or 0) + v
      all[i] = (all[i] or 0) + v
    end
    e.sum = e.sum + r.sum
    total = total + r.sum
  end
end
if total == 0 then
  print("no samples" .. (pattern and (" in functions matching " .. pattern) or ""))
  os.exit(0)
end
for i = 1, #reasons do all[i] = all[i] or 0 end
print(("%d samples%s: %s"):format(total, pattern and (" in functions matching " .. pattern) or "",
  top_reasons(all, total, 8)))
local fns = {}
for f, e in pairs(by_fn) do fns[#fns + 1] = { f = f, e = e } end
table.sort(fns, function(a, b) return a.e.sum > b.e.sum end)
print("\nby function (samples, share, top reasons)")
for i = 1, math.min(30, #fns) do
  local e = fns[i].e
  print(("%-28s %9d %5.1f%%  %s"):format(fns[i].f, e.sum, 100 * e.sum / total, top_reasons(e.n, e.sum, 4)))
end
table.sort(rows, function(a, b) return a.sum > b.sum end)
print(("\nthe %d instructions with the most samples"):format(top))
local shown = 0
for _, r in ipairs(rows) do
  if shown >= top then break end
  if not pattern or r.fn:match(pattern) then
    shown = shown + 1
    print(("%06x %-22s %7d %5.1f%%  %-44s %s"):format(r.pc, r.fn:sub(1, 22), r.sum, 100 * r.sum / total,
      (insn[r.pc] or "?"):sub(1, 44), top_reasons(r.n, r.sum, 3)))
  end
end
