-- c_tests_spec.lua - runs the C test programs of the layers below the Lua module (NVRTC, the
-- compile cache and the driver loader; the sim shim's warp collectives and fault catching).
local support = require "spec.support"

local build = os.getenv("MW_BUILD_DIR") or "build"

local programs = {
  { name = "test_jit", want = "(%d+)/(%d+) passed" },
  { name = "sim_shim_test", want = "(%d+) checks, (%d+) failed" },
}

describe("C tests", function()
  for _, p in ipairs(programs) do
    it(p.name .. " passes", function()
      local path = build .. "/" .. p.name
      assert.is_true(io.open(path) ~= nil, path .. " was not built")
      local status, out = support.run(support.shell_quote(path))
      assert.equals(0, status, out)
      local a, b = out:match(p.want)
      assert.is_not_nil(a, out)
      if p.name == "test_jit" then
        assert.equals(a, b, out)
      else
        assert.equals("0", b, out)
      end
    end)
  end
end)
