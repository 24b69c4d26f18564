-- defs.lua - what one more program costs to load beside others: the time of a REPL-sized
-- definition (one small task) with 0, 10 and 60 programs loaded already, cold (a fresh compile
-- cache) and warm (the same sources again), on one backend.
--   luajit bench/defs.lua [backend] [counts...]     (counts: 0 10 60 by default)
-- MOONWARP_BUILD=one_unit or parts picks the build (mw.runtime's build option; parts here by default).
local mw = require "moonwarp"

local backend = arg[1] or "sim"
local counts = {}
for i = 2, #arg do counts[#counts + 1] = assert(tonumber(arg[i]), "counts are numbers") end
if #counts == 0 then counts = { 0, 10, 60 } end

local function setenv(name, value)
  local ffi = require "ffi"
  pcall(ffi.cdef, "int setenv(const char *, const char *, int);")
  ffi.C.setenv(name, value, 1)
end

-- a fresh cache folder for the cold rounds
local cache = os.tmpname()
os.remove(cache)
assert(os.execute("mkdir -p " .. cache) == 0)
setenv("MOONWARP_CACHE_DIR", cache)

local function program(i, salt)
  return ("task int p%d_%s(int x) { return x + %d; }\n"):format(i, salt, i)
end

-- one round: a runtime with n programs loaded, then the time of one more
local function round(n, salt)
  local rt = assert(mw.runtime { backend = backend, workers = 2, build = "parts" })
  for i = 1, n do assert(rt:compile(program(i, salt), ("loaded%d.lua"):format(i))) end
  local t0 = mw.now()
  local p = assert(rt:compile(program(0, salt .. "x"), "def.lua"))
  local took = mw.now() - t0
  assert(p["p0_" .. salt .. "x"](41):await(30) == 41, "the definition runs")
  rt:close()
  return took
end

local salt = ("s%d"):format(os.time() % 100000)
print(("one more definition on %s%s (s): programs loaded, cold, warm"):format(backend,
  ", build " .. (os.getenv("MOONWARP_BUILD") or "parts")))
for _, n in ipairs(counts) do
  local cold = round(n, salt .. "n" .. n)
  local warm = round(n, salt .. "n" .. n)
  print(("%4d  %7.2f  %7.2f"):format(n, cold, warm))
end
os.execute("rm -rf " .. cache)
