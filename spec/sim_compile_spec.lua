-- sim_compile_spec.lua - the sim backend's C++ compile: started without a shell (a command
-- with arguments in MOONWARP_CXX works, a missing compiler is a clear error), and nothing of
-- the process is disturbed while the executor's threads run.
local mw = require "moonwarp"
local support = require "spec.support"

describe("the sim backend's compiler #sim", function()
  local function with_env(vars, fn)
    local old = {}
    for k, v in pairs(vars) do
      old[k] = os.getenv(k)
      support.setenv(k, v)
    end
    local ok, err = pcall(fn)
    for k in pairs(vars) do support.setenv(k, old[k]) end
    assert(ok, err)
  end

  it("takes a compiler command with arguments from MOONWARP_CXX", function()
    with_env({ MOONWARP_CXX = "env c++", MOONWARP_NO_CACHE = "1" }, function()
      local rt = assert(mw.runtime { backend = "sim", workers = 2 })
      local prog = assert(rt:compile("task int twice(int x) { return 2 * x; }", "cxx_args.lua"))
      assert.equals(42, prog.twice(21):await(30))
      rt:close()
    end)
  end)

  it("says which compiler could not be started", function()
    with_env({ MOONWARP_CXX = "/nonexistent/c++", MOONWARP_NO_CACHE = "1" }, function()
      local rt = assert(mw.runtime { backend = "sim", workers = 2 })
      local ok, err = rt:compile("task int one() { return 1; }", "missing_cxx.lua")
      assert.is_nil(ok)
      assert.truthy(tostring(err):find("cannot start the C++ compiler /nonexistent/c++", 1, true), err)
      -- the runtime is still usable once a compiler is there again
      support.setenv("MOONWARP_CXX", nil)
      local prog = assert(rt:compile("task int one() { return 1; }", "after.lua"))
      assert.equals(1, prog.one():await(30))
      rt:close()
    end)
  end)

  it("compiles while the executor's threads run tasks", function()
    with_env({ MOONWARP_NO_CACHE = "1" }, function()
      local rt = assert(mw.runtime { backend = "sim", workers = 4 })
      local prog = assert(rt:compile(support.FIB, "busy.lua"))
      local f = prog.fib(16)
      local second = assert(rt:compile("task int seven() { return 7; }", "second.lua"))
      assert.equals(7, second.seven():await(30))
      assert.equals(987, f:await(60))
      rt:close()
    end)
  end)
end)
