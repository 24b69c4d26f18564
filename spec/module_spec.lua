-- module_spec.lua - loading the module, runtime options, and what happens without a GPU.
local support = require "spec.support"

describe("require 'moonwarp'", function()
  it("loads without a GPU, driver or compiler and exposes the API", function()
    local mw = require "moonwarp"
    assert.is_string(mw.version)
    assert.matches("^%d+%.%d+", mw.version)
    for _, name in ipairs { "runtime", "join", "any", "now" } do
      assert.is_function(mw[name], name)
    end
  end)

  it("has a monotonic clock in seconds", function()
    local mw = require "moonwarp"
    local a = mw.now()
    local b = mw.now()
    assert.is_number(a)
    assert.truthy(b >= a)
    assert.truthy(b - a < 1)
  end)

  it("keeps the C module under moonwarp.core", function()
    local core = require "moonwarp.core"
    assert.equals(require("moonwarp").version, core.version)
  end)

  it("gives each object type a name and hides its metatable behind it", function()
    local mw = require "moonwarp"
    local rt = assert(mw.runtime { backend = "sim" })
    local prog = assert(rt:compile("task int one() { return 1; }", "meta.cu"))
    local buf = rt:buffer("int32", 4)
    local f = prog.one()
    local objects = { runtime = rt, program = prog, task = prog.one, buffer = buf, future = f }
    for name, obj in pairs(objects) do
      assert.equals("moonwarp." .. name, getmetatable(obj), name)
      assert.truthy(tostring(obj):find("^moonwarp%." .. name), tostring(obj))
    end
    assert.equals(1, f:await(30))
    assert.equals(4, #buf)
    rt:close()
  end)
end)

describe("mw.runtime options", function()
  local mw = require "moonwarp"

  -- Each row: options, then text the error must contain.
  local misuse = {
    { "sim", "table expected, got string" },
    { 42, "table expected, got number" },
    { { backend = 1 }, "'backend'" },
    { { backend = "opencl" }, "'backend'" },
    { { device = "0" }, "'device'" },
    { { device = -1 }, "'device'" },
    { { capacity = -1 }, "'capacity'" },
    { { capacity = 0 / 0 }, "'capacity'" },
    { { capacity = 1.5 }, "'capacity'" },
    { { capacity = 2 ^ 40 }, "'capacity'" },
    { { host_futures = true }, "'host_futures'" },
    { { workers = 1 / 0 }, "'workers'" },
    { { frame_bytes = {} }, "'frame_bytes'" },
    { { build = "fast" }, "option 'build' must be \"parts\", \"one_unit\" or \"tiered\", got \"fast\"" },
    { { build = 1 }, "option 'build' must be \"parts\", \"one_unit\" or \"tiered\", got number" },
    { { capacty = 10 }, "unknown option 'capacty'" },
    { { [1] = "sim" }, "unknown option '1'" },
    -- limits the core or the device sets: refused, never clamped
    { { backend = "sim", frame_bytes = 100 }, "option 'frame_bytes' must be a multiple of 16 in 128..65536" },
    { { backend = "sim", frame_bytes = 65552 }, "option 'frame_bytes'" },
    { { backend = "sim", capacity = 2 ^ 26 + 1 }, "option 'capacity' must be at most 67108864" },
    { { backend = "sim", capacity = 8, host_futures = 16 }, "option 'host_futures' must be at most the capacity (8)" },
    { { backend = "sim", workers = 1000 }, "option 'workers' must be at most 64 on this sim device" },
  }
  for _, row in ipairs(misuse) do
    local opts, expected = row[1], row[2]
    it("raises naming the problem for " .. expected, function()
      local err = support.error_of(mw.runtime, opts)
      assert.is_string(err, "mw.runtime did not raise")
      assert.truthy(err:find(expected, 1, true), err)
      assert.truthy(err:find("bad argument #1", 1, true), err)
    end)
  end

  -- mw.runtime's error with $name set to value (restored after), or nil when it opened
  local function refusal(name, value)
    local old = os.getenv(name)
    support.setenv(name, value)
    local ok, rt = pcall(mw.runtime, { backend = "sim" })
    support.setenv(name, old)
    if ok and rt then rt:close() end
    assert.is_false(ok, name .. "=" .. value)
    return rt
  end

  it("refuses a MOONWARP_BUILD that names no build, saying so", function()
    local err = refusal("MOONWARP_BUILD", "fast")
    assert.truthy(err:find('MOONWARP_BUILD must be "parts", "one_unit" or "tiered", got "fast"', 1, true), err)
  end)

  it("refuses a MOONWARP_ONE_UNIT_LINKED that is not 0 or 1, saying so", function()
    local err = refusal("MOONWARP_ONE_UNIT_LINKED", "yes")
    assert.truthy(err:find('MOONWARP_ONE_UNIT_LINKED must be 0 or 1, got "yes"', 1, true), err)
  end)

  it("refuses a MOONWARP_SIM_CHAOS that is not a whole number, saying so", function()
    for _, bad in ipairs { "often", "-5", "10x", "99999999999" } do
      local err = refusal("MOONWARP_SIM_CHAOS", bad)
      assert.truthy(err:find("MOONWARP_SIM_CHAOS must be a whole number N (a pause at about one in N atomics "
        .. 'and fences; 0: none) up to 1000000000, got "' .. bad .. '"', 1, true), err)
    end
  end)

  it("refuses a MOONWARP_CARVEOUT that is not a percent, saying so", function()
    for _, bad in ipairs { "half", "101", "-2", "50%" } do
      local err = refusal("MOONWARP_CARVEOUT", bad)
      assert.truthy(err:find('MOONWARP_CARVEOUT must be a percent from 0 to 100 (or -1: the driver\'s choice), got "'
        .. bad .. '"', 1, true), err)
    end
    local old = os.getenv("MOONWARP_CARVEOUT")
    support.setenv("MOONWARP_CARVEOUT", "0")
    local rt = assert(mw.runtime { backend = "sim" })
    rt:close()
    support.setenv("MOONWARP_CARVEOUT", old)
  end)

  it("refuses a MOONWARP_GRIDS or MOONWARP_GRID_PRIME that is not 0 or 1, a MOONWARP_GRID_MIN that is not a count and a MOONWARP_CUDADEVRT that names no file, saying so", function()
    local err = refusal("MOONWARP_GRIDS", "on")
    assert.truthy(err:find('MOONWARP_GRIDS must be 0 or 1, got "on"', 1, true), err)
    err = refusal("MOONWARP_GRID_PRIME", "no")
    assert.truthy(err:find('MOONWARP_GRID_PRIME must be 0 or 1, got "no"', 1, true), err)
    for _, bad in ipairs { "many", "-1", "12k", "99999999999" } do
      err = refusal("MOONWARP_GRID_MIN", bad)
      assert.truthy(err:find('MOONWARP_GRID_MIN must be a whole number of instances (0: never a grid), got "'
        .. bad .. '"', 1, true), err)
    end
    err = refusal("MOONWARP_CUDADEVRT", "/nonexistent/libcudadevrt.a")
    assert.truthy(err:find('MOONWARP_CUDADEVRT names no readable file (the CUDA device runtime library, '
      .. 'libcudadevrt.a): "/nonexistent/libcudadevrt.a"', 1, true), err)
    local names, saved = { "MOONWARP_GRIDS", "MOONWARP_GRID_MIN", "MOONWARP_GRID_PRIME" }, {}
    for i, name in ipairs(names) do saved[i] = os.getenv(name) end
    support.setenv("MOONWARP_GRIDS", "0")
    support.setenv("MOONWARP_GRID_MIN", "64")
    support.setenv("MOONWARP_GRID_PRIME", "0")
    local rt = assert(mw.runtime { backend = "sim" })
    rt:close()
    for i, name in ipairs(names) do support.setenv(name, saved[i]) end
  end)

  it("accepts no argument at all (all defaults)", function()
    local rt, err = mw.runtime()
    assert.is_truthy(rt or err)
    if rt then
      assert.is_string(rt.backend)
      rt:close()
    end
  end)
end)

describe("mw.runtime without a GPU", function()
  local mw = require "moonwarp"
  local have_gpu = support.cuda_available()

  if have_gpu then
    pending("backend = 'cuda' found a GPU; the no-GPU behaviour is checked on machines without one")
    return
  end

  it("returns nil, a message saying what is missing, and ENODEV", function()
    local rt, err, code = mw.runtime { backend = "cuda" }
    assert.is_nil(rt)
    assert.equals("ENODEV", code)
    assert.is_string(err)
    assert.truthy(#err > 0)
    -- names the missing piece: the driver library, a device, or CUDA itself
    local lower = err:lower()
    assert.truthy(lower:find("cuda", 1, true) or lower:find("driver", 1, true)
      or lower:find("device", 1, true) or lower:find("gpu", 1, true), err)
  end)

  it("falls back to sim with backend = 'auto'", function()
    local rt, err = mw.runtime { backend = "auto" }
    assert(rt, err)
    assert.equals("sim", rt.backend)
    rt:close()
  end)
end)

describe("a runtime closed by the collector #sim", function()
  local function script(body)
    local path = os.tmpname()
    local f = assert(io.open(path, "w"))
    f:write('local mw = require "moonwarp"\n', 'local rt = assert(mw.runtime { backend = "sim" })\n',
      body)
    f:close()
    local t0 = require("moonwarp").now()
    local status, out = support.run(support.lua_paths() .. "luajit " .. support.shell_quote(path))
    os.remove(path)
    return status, out, require("moonwarp").now() - t0
  end

  it("closes at script exit at once, and silently, when its tasks are done", function()
    local status, out, took = script [[
local p = rt:compile("task int quick(int n) { return n; }")
p.quick(1) -- never awaited
print("end")
]]
    assert.equals(0, status, out)
    assert.equals("end\n", out)
    assert.is_true(took < 5, "took " .. took .. " s")
  end)

  it("says on stderr that it waits when a task never returns, and waits only the deadline #slow", function()
    local status, out, took = script [[
local p = rt:compile("task int forever(int n) { volatile long x = 0; for (;;) x += n; return 0; }")
p.forever(1)
print("end")
]]
    assert.equals(0, status, out)
    assert.truthy(out:find("end\n", 1, true), out)
    assert.truthy(out:find("moonwarp: closing a sim runtime that nothing refers to, with 1 task(s) "
      .. "still in flight: waiting up to 10 s", 1, true), out)
    assert.is_true(took < 20, "took " .. took .. " s")
  end)
end)
