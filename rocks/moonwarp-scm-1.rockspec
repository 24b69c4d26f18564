-- moonwarp: device coroutines for LuaJIT on a persistent GPU executor (or its CPU sim).
-- From the repository root:
--   luarocks --lua-version=5.1 make rocks/moonwarp-scm-1.rockspec [--tree DIR]
-- Installs the module (moonwarp, moonwarp.core with the device process and libmoonwarp.so
-- beside it in lib/lua/5.1/moonwarp/), the `moonwarp` command, and moonwarp.h in the rock's
-- include/ (luarocks show --rock-dir moonwarp) for C hosts. No tests, no examples are built.
-- The module is built for LuaJIT (the Lua 5.1 API), so ask luarocks for 5.1: Debian's luarocks
-- defaults to the newest Lua installed and refuses to build without that version's headers.
-- (Where luarocks does use a newer Lua, the build still compiles against LuaJIT's headers,
-- found with pkg-config, but installs into that version's directories.)
rockspec_format = "3.0"
package = "moonwarp"
version = "scm-1"

source = {
  url = "git+file:///path/to/moonwarp",
}

description = {
  summary = "Device coroutines for LuaJIT: spawn/await tasks on a persistent GPU kernel",
  license = "MIT",
  detailed = [[
A Lua script declares tasks in CUDA C; moonwarp compiles them at run time (NVRTC, or the host
C++ compiler for the CPU sim backend) and runs them on a persistent kernel that lets tasks
spawn children and await them on the device. Loads on machines without a GPU; the sim backend
runs everywhere.]],
}

dependencies = {
  "lua >= 5.1",
}

build = {
  type = "cmake",
  variables = {
    CMAKE_BUILD_TYPE = "Release",
    CMAKE_INSTALL_PREFIX = "$(PREFIX)",
    MW_BUILD_EXAMPLES = "OFF",
    MW_BUILD_TESTS = "OFF",
    MW_ROCK = "ON",
    LUA_INCDIR = "$(LUA_INCDIR)",
    LIBDIR = "$(LIBDIR)",
    LUADIR = "$(LUADIR)",
    LIBFLAG = "$(LIBFLAG)",
  },
  install = {
    bin = { moonwarp = "bin/moonwarp" }, -- the REPL; LuaRocks wraps it with the tree's paths
  },
}
