-- block_examples_spec.lua - the block-task examples (examples/matmul.lua, examples/softmax.lua) run
-- as a user runs them, their results checked against the CPU by the examples themselves; and their
-- checks fail on a wrong result.
local support = require "spec.support"

local function run_example(backend, cmd)
  local env = "MOONWARP_BACKEND=" .. backend .. " " .. support.lua_paths()
  return support.run(env .. cmd)
end

support.each_backend(function(backend)
  local big = backend == "cuda"
  it("examples/matmul.lua multiplies, every entry checked", function()
    local n = big and 512 or 128
    local status, out = run_example(backend, "luajit examples/matmul.lua " .. n)
    assert.equals(0, status, out)
    assert.truthy(out:find(("matmul: %d x %d in %d x %d tiles on %s, every entry checked"):format(n, n,
      n / 64, n / 64, backend), 1, true), out)
  end)

  it("examples/softmax.lua normalizes every row, checked", function()
    local rows, cols = big and 1024 or 96, big and 1024 or 200
    local status, out = run_example(backend, ("luajit examples/softmax.lua %d %d"):format(rows, cols))
    assert.equals(0, status, out)
    assert.truthy(out:find(("softmax: %d rows of %d on %s, every row checked"):format(rows, cols, backend),
      1, true), out)
  end)
end)

describe("the block-task examples' checks #sim", function()
  local ffi = require "ffi"
  it("find a wrong entry of the product", function()
    local mm = assert(loadfile("examples/matmul.lua"))("--module")
    local n = 64
    local a, b = mm.inputs(n)
    local c = ffi.new("float[?]", n * n)
    for r = 0, n - 1 do
      for col = 0, n - 1 do
        local s = 0
        for k = 0, n - 1 do s = s + a[r * n + k] * b[k * n + col] end
        c[r * n + col] = s
      end
    end
    assert.is_true(mm.check(n, a, b, c))
    c[5 * n + 7] = c[5 * n + 7] + 0.125
    local ok, why = mm.check(n, a, b, c)
    assert.is_false(ok)
    assert.truthy(why:find("C[5][7]", 1, true), why)
  end)

  it("find a wrong element of a row", function()
    local sm = assert(loadfile("examples/softmax.lua"))("--module")
    local rows, cols = 3, 40
    local x = sm.inputs(rows, cols)
    local y = ffi.new("float[?]", rows * cols)
    for r = 0, rows - 1 do
      local m, s = -math.huge, 0
      for i = 0, cols - 1 do m = math.max(m, x[r * cols + i]) end
      for i = 0, cols - 1 do s = s + math.exp(x[r * cols + i] - m) end
      for i = 0, cols - 1 do y[r * cols + i] = math.exp(x[r * cols + i] - m) / s end
    end
    assert.is_true(sm.check(rows, cols, x, y))
    y[2 * cols + 9] = y[2 * cols + 9] * 1.001
    local ok, why = sm.check(rows, cols, x, y)
    assert.is_false(ok)
    assert.truthy(why:find("y[2][9]", 1, true), why)
  end)
end)
