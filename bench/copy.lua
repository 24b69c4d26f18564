-- copy.lua - buffer copies from and to an FFI array, each way timed alone, for comparing the
-- copy paths of a backend (MOONWARP_NO_STAGING=1: the cuda backend's copies travel as socket
-- payload instead of through its staging halves) in one run.
--   luajit bench/copy.lua [backend] [MB]   (defaults: auto, 256)
local mw = require "moonwarp"
local ffi = require "ffi"
local backend, mb = arg[1], tonumber(arg[2] or 256)
assert(mb and mb > 0, "usage: luajit bench/copy.lua [backend] [MB]")
local rt = assert(mw.runtime { backend = backend })
local n = math.floor(mb * 1048576 / 4)
local host = ffi.new("float[?]", n)
for i = 0, n - 1 do host[i] = i % 4093 end
local b = rt:buffer("float", n)
b:write_from(host, n) -- warm: the device pages, the staging region
local function best(fn)
  local t = math.huge
  for _ = 1, 5 do
    local t0 = mw.now()
    fn()
    t = math.min(t, mw.now() - t0)
  end
  return t
end
local tw = best(function() b:write_from(host, n) end)
ffi.fill(host, n * 4)
local tr = best(function() b:read_into(host, n) end)
for _, i in ipairs { 0, 1, math.floor(n / 2), n - 1 } do
  assert(host[i] == i % 4093, ("copy back differs at %d"):format(i))
end
local staging = os.getenv("MOONWARP_NO_STAGING") and "socket payload" or "default path"
print(("copy %d MB on %s (%s): write %.2f GB/s, read %.2f GB/s"):format(mb, rt.backend, staging,
  n * 4 / tw / 1e9, n * 4 / tr / 1e9))
b:close()
rt:close()
