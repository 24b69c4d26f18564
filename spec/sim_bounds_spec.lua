-- sim_bounds_spec.lua - on sim, a task that writes past the end of a moonwarp buffer stops at
-- the fault (the buffer ends at a guard page) instead of corrupting the process: the runtime
-- reports the fault with the task, its file and line, the warp and the lane, and the process
-- goes on with new runtimes and buffers.
local mw = require "moonwarp"

-- fill(out, n) writes out[0 .. n-1], the lanes together
local FILL = [[
task void fill(float *out, int n) {
  for (int i = lane; i < n; i += 32) out[i] = 1.0f + i;
}
]]

describe("buffer overruns on sim #sim", function()
  it("fault at the overrun, name the task, and leave the process sound", function()
    local rt = assert(mw.runtime { backend = "sim", workers = 2 })
    local prog = assert(rt:compile(FILL, "overrun.lua"))
    local small = rt:buffer("float", 32)
    local ok, err = pcall(function() return prog.fill:bulk(1, small, 96 * 1024):await(30) end)
    assert.is_false(ok)
    err = tostring(err)
    assert.truthy(err:find("SIGSEGV", 1, true), err)
    assert.truthy(err:find("running task fill (overrun.lua:1)", 1, true), err)
    assert.truthy(err:find("in warp %d+ lane %d+"), err)
    pcall(function() rt:close() end)
    -- the process is sound: new runtimes, buffers and tasks work
    for _ = 1, 3 do
      local rt2 = assert(mw.runtime { backend = "sim", workers = 2 })
      local b = rt2:buffer("float", 1000)
      local p2 = assert(rt2:compile("task void put(float *o) { if (lane == 0) o[index] = 7.0f; }", "ok.lua"))
      p2.put:bulk(1000, b):await(30)
      local t = b:read()
      assert.equals(7, t[1])
      assert.equals(7, t[1000])
      rt2:close()
    end
  end)

  it("accesses up to the buffer's last element are fine", function()
    local rt = assert(mw.runtime { backend = "sim", workers = 2 })
    local prog = assert(rt:compile(FILL, "exact.lua"))
    for _, n in ipairs { 1, 31, 64, 1000, 4096 } do
      local b = rt:buffer("float", n)
      prog.fill:bulk(1, b, n):await(30)
      local t = b:read()
      assert.equals(n, t[n])
      b:close()
    end
    rt:close()
  end)
end)
