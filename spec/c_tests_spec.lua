-- c_tests_spec.lua - runs the C test programs of the layers below the Lua module (NVRTC, the
-- compile cache and the driver loader; the sim shim's warp collectives and fault catching; the C
-- API's answers to bad input).
local support = require "spec.support"

local build = os.getenv("MW_BUILD_DIR") or "build"

local programs = {
  { name = "test_jit", want = "(%d+)/(%d+) passed" },
  { name = "sim_shim_test", want = "(%d+) checks, (%d+) failed" },
  { name = "api_bad_input_test", want = "(%d+) checks, (%d+) failed" },
}

describe("C tests #slow", function()
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
        print(("  [%s: %s of %s passed]"):format(p.name, a, b))
      else
        assert.equals("0", b, out)
        print(("  [%s: %s checks, none failed]"):format(p.name, a))
      end
    end)
  end
end)

describe("the parser's fuzz target #slow", function()
  local has_clang = support.run("command -v clang") == 0
  if not has_clang then
    pending("fuzz_parse: skipped, clang is not installed (scripts/fuzz.sh needs it)")
    return
  end
  it("takes 20000 inputs grown from spec/fuzz_seeds without a crash, leak or UB", function()
    local seed = tonumber(os.getenv("MW_FUZZ_SEED")) or 20261202
    local status, out = support.run("bash scripts/fuzz.sh 20000 " .. seed)
    assert.equals(0, status, out)
    assert.truthy(out:find("Done 20000 runs", 1, true), out)
    print(("  [fuzz_parse: 20000 runs from seed %d]"):format(seed))
  end)
end)

describe("cmake --install #slow", function()
  it("puts the library, the device process, the header and moonwarp.pc where a C host finds them",
    function()
      local prefix = os.tmpname()
      os.remove(prefix)
      local q = support.shell_quote
      local status, out = support.run("cmake --install " .. q(build) .. " --prefix " .. q(prefix)
        .. " >/dev/null && cd " .. q(prefix) .. " && find . -type f | sort")
      assert.equals(0, status, out)
      for _, f in ipairs { "./include/moonwarp.h", "./lib/libmoonwarp.so", "./libexec/moonwarp/moonwarp-device",
        "./lib/pkgconfig/moonwarp.pc", "./lib/lua/5.1/moonwarp/core.so",
        "./share/lua/5.1/moonwarp/init.lua" } do
        assert.truthy(out:find(f .. "\n", 1, true), f .. " missing in:\n" .. out)
      end
      -- the .pc file is found relative to itself, so the prefix given at install time holds
      status, out = support.run("PKG_CONFIG_PATH=" .. q(prefix .. "/lib/pkgconfig")
        .. " sh -c 'cc examples/hello_host.c $(pkg-config --cflags --libs moonwarp) -Wl,-rpath,"
        .. prefix .. "/lib -o " .. prefix .. "/hello_host' && MOONWARP_BACKEND=sim "
        .. q(prefix .. "/hello_host") .. " 11")
      assert.equals(0, status, out)
      assert.truthy(out:find("fib(11) = 89 on sim", 1, true), out)
      support.run("rm -rf " .. q(prefix))
    end)

  it("an installed library starts the device process from libexec", function()
    if support.run("command -v strace >/dev/null") ~= 0 then
      pending("strace is not installed: the program the library starts cannot be seen")
      return
    end
    local prefix = os.tmpname()
    os.remove(prefix)
    local q = support.shell_quote
    local status, out = support.run("cmake --install " .. q(build) .. " --prefix " .. q(prefix)
      .. " >/dev/null && cc examples/hello_host.c -I" .. q(prefix .. "/include") .. " -L"
      .. q(prefix .. "/lib") .. " -lmoonwarp -Wl,-rpath," .. q(prefix .. "/lib") .. " -o "
      .. q(prefix .. "/hello_host"))
    assert.equals(0, status, out)
    -- a cuda runtime starts it with or without a GPU (without one, the process says so)
    status, out = support.run("MOONWARP_BACKEND=cuda strace -f -e trace=execve "
      .. q(prefix .. "/hello_host") .. " 5 2>&1")
    support.run("rm -rf " .. q(prefix))
    assert.truthy(out:find("/libexec/moonwarp/moonwarp-device\"", 1, true), out)
  end)
end)
