-- rocks_spec.lua - `luarocks make` builds and installs the module into a tree from which a
-- plain luajit loads it. Slow: it configures and builds the whole project once.
--
-- luarocks is asked for Lua 5.1 (LuaJIT's API and directories) explicitly: Debian's luarocks
-- defaults to the newest Lua installed (5.2 next to busted), whose headers are not there, and
-- it refuses to build anything without them.
local support = require "spec.support"

local ROCKSPEC = "rocks/moonwarp-scm-1.rockspec"

describe("luarocks make " .. ROCKSPEC .. " #slow", function()

  local have_luarocks = support.run("command -v luarocks >/dev/null") == 0
  if not have_luarocks then
    pending("luarocks is not installed: the rockspec is not checked")
    return
  end

  it("passes luarocks lint", function()
    local status, out = support.run("luarocks --lua-version=5.1 lint " .. ROCKSPEC)
    assert.equals(0, status, out)
  end)

  local tree
  local had_build_dir = support.run("test -e build.luarocks") == 0

  setup(function()
    tree = os.tmpname()
    os.remove(tree)
  end)

  teardown(function()
    if tree then support.run("rm -rf " .. support.shell_quote(tree)) end
    if not had_build_dir then support.run("rm -rf build.luarocks") end -- luarocks' build dir
  end)

  it("installs a module that luajit can require", function()
    local status, out = support.run("luarocks --lua-version=5.1 make " .. ROCKSPEC .. " --tree "
      .. support.shell_quote(tree))
    assert.equals(0, status, out)

    local lua_path = tree .. "/share/lua/5.1/?.lua;" .. tree .. "/share/lua/5.1/?/init.lua"
    local lua_cpath = tree .. "/lib/lua/5.1/?.so"
    local version = require("moonwarp").version
    -- only the tree on the paths (no ";;"), run from / so that nothing else can be found
    status, out = support.run("cd / && LUA_PATH=" .. support.shell_quote(lua_path)
      .. " LUA_CPATH=" .. support.shell_quote(lua_cpath)
      .. [[ luajit -e 'local mw = require "moonwarp"; print("version " .. mw.version)']])
    assert.equals(0, status, out)
    assert.equals("version " .. version .. "\n", out)

    -- the C library and the device process beside core.so, nothing else among the modules,
    -- and no tests or examples built
    local libdir = tree .. "/lib/lua/5.1"
    for _, f in ipairs { "moonwarp/core.so", "moonwarp/libmoonwarp.so", "moonwarp/moonwarp-device" } do
      assert.equals(0, (support.run("test -f " .. support.shell_quote(libdir .. "/" .. f))), f)
    end
    status, out = support.run("cd " .. support.shell_quote(libdir) .. " && find . -type f | sort")
    assert.equals("./moonwarp/core.so\n./moonwarp/libmoonwarp.so\n./moonwarp/moonwarp-device\n", out)
    for _, f in ipairs { "api_bad_input_test", "test_jit", "sim_shim_test", "hello_host" } do
      assert.is_not.equals(0, (support.run("test -e build.luarocks/" .. f)), f .. " was built")
    end

    -- a C host built against the header in the rock's include/ and the installed library
    status, out = support.run("luarocks --lua-version=5.1 --tree " .. support.shell_quote(tree)
      .. " show --rock-dir moonwarp")
    assert.equals(0, status, out)
    local rockdir = out:gsub("%s+$", "")
    local exe = tree .. "/hello_host"
    status, out = support.run("cc examples/hello_host.c -I" .. support.shell_quote(rockdir .. "/include")
      .. " -L" .. support.shell_quote(libdir .. "/moonwarp") .. " -lmoonwarp -Wl,-rpath,"
      .. support.shell_quote(libdir .. "/moonwarp") .. " -o " .. support.shell_quote(exe)
      .. " && cd / && MOONWARP_BACKEND=sim " .. support.shell_quote(exe) .. " 12")
    assert.equals(0, status, out)
    assert.truthy(out:find("fib(12) = 144 on sim", 1, true), out)

    -- the REPL command, wrapped by LuaRocks with the tree's paths
    status, out = support.run("cd / && printf '1 + 2\\n:quit\\n' | MOONWARP_BACKEND=sim "
      .. support.shell_quote(tree .. "/bin/moonwarp"))
    assert.equals(0, status, out)
    assert.truthy(out:find("mw> 3\n", 1, true), out)
  end)
end)
