# common.sh - sourced by scripts/test.sh and scripts/run.sh: installs what is missing (Debian),
# builds the project in build/, and points LUA_PATH/LUA_CPATH at the module built there.
#
# Environment:
#   MW_BUILD_DIR    build directory (default: build under the repository root)
#   MW_BUILD_TYPE   CMake build type (default: RelWithDebInfo)
#   MW_NO_INSTALL=1 never install packages, only report what is missing
#   MW_SANITIZE=1   build the host code with AddressSanitizer and UndefinedBehaviorSanitizer
#                   (in build-sanitize/) and run LuaJIT with their runtimes preloaded
# On the GPU machine, source .gpu/env.sh first: it provides luajit and busted without apt.

MW_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ "${MW_SANITIZE:-0}" = 1 ]; then
  MW_BUILD_DIR=${MW_BUILD_DIR:-$MW_ROOT/build-sanitize}
  MW_BUILD_TYPE=${MW_BUILD_TYPE:-Debug}
  MW_CMAKE_EXTRA="-DMW_SANITIZE=ON"
  # the sanitizer runtimes must come first in a luajit that was not built with them; leaks are
  # not checked (LuaJIT's own allocations at exit would be reported)
  export LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
fi
MW_BUILD_DIR=${MW_BUILD_DIR:-$MW_ROOT/build}
MW_BUILD_TYPE=${MW_BUILD_TYPE:-RelWithDebInfo}

mw_log() { printf '%s\n' "$*" >&2; }

# The busted runner script: /usr/bin/busted (Debian), else the one on PATH.
mw_busted_script() {
  if [ -f /usr/bin/busted ]; then
    echo /usr/bin/busted
  elif command -v busted >/dev/null 2>&1; then
    command -v busted
  else
    return 1
  fi
}

# mw_busted ARGS...: runs busted under LuaJIT. A runner that is a Lua script is given to
# luajit (Debian's starts with "#!/usr/bin/env lua", which may be another Lua); a runner that
# is a wrapper (the GPU machine's) already runs luajit itself.
mw_busted() {
  local script
  script=$(mw_busted_script) || { mw_log "busted not found"; return 1; }
  if head -n 1 "$script" | grep -q '^#!.*lua'; then
    luajit "$script" "$@"
  else
    "$script" "$@"
  fi
}

# mw_have PACKAGE: whether what the Debian package provides is usable here. Checked by what
# the build needs rather than by dpkg, so tools that come from elsewhere (a prefix on PATH,
# the GPU machine's unpacked packages) count too.
mw_have() {
  case "$1" in
    build-essential) command -v cc >/dev/null 2>&1 && command -v c++ >/dev/null 2>&1 &&
                     command -v make >/dev/null 2>&1 ;;
    cmake) command -v cmake >/dev/null 2>&1 ;;
    pkg-config) command -v pkg-config >/dev/null 2>&1 ;;
    luajit) command -v luajit >/dev/null 2>&1 ;;
    libluajit-5.1-dev) pkg-config --exists luajit 2>/dev/null ;;
    lua-busted) mw_busted_script >/dev/null ;;
    lua-dkjson) luajit -e 'require "dkjson"' >/dev/null 2>&1 ;;
    lua-readline) luajit -e 'require "readline"' >/dev/null 2>&1 ;;
    lua-luv) luajit -e 'require "luv"' >/dev/null 2>&1 ;;
    luarocks) command -v luarocks >/dev/null 2>&1 ;;
    clang) command -v clang >/dev/null 2>&1 ;;
    libsodium-dev) pkg-config --exists libsodium 2>/dev/null ;;
    libboost-context-dev)
      echo '#include <boost/context/fiber.hpp>' |
        ${CXX:-c++} -x c++ -std=c++17 -fsyntax-only - >/dev/null 2>&1 ;;
    *) return 1 ;;
  esac
}

# Installs the missing packages with apt-get when running as root; otherwise names them and
# fails. luarocks is needed only by spec/rocks_spec.lua, clang only by the parser's fuzz target
# (scripts/fuzz.sh), lua-readline only by the REPL's line editing (and its spec) and lua-luv
# only by examples/luv.lua (and its spec), so their absence alone is not fatal.
mw_ensure_packages() {
  local pkgs="build-essential cmake pkg-config luajit libluajit-5.1-dev lua-busted lua-dkjson lua-readline lua-luv luarocks clang libsodium-dev libboost-context-dev"
  local missing="" required="" p
  for p in $pkgs; do
    if ! mw_have "$p"; then
      missing="$missing $p"
      case "$p" in luarocks|clang|lua-readline|lua-luv) ;; *) required="$required $p" ;; esac
    fi
  done
  [ -z "$missing" ] && return 0
  if [ "${MW_NO_INSTALL:-0}" != 1 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    mw_log "installing:$missing"
    if DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
       DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >&2; then
      return 0
    fi
    mw_log "apt-get could not install:$missing"
  fi
  if [ -n "$required" ]; then
    mw_log "missing packages:$required"
    mw_log "install them (as root): apt-get install$required"
    return 1
  fi
  mw_log "note: missing$missing; spec/rocks_spec.lua (luarocks), the fuzz target (clang), the REPL's line editing (lua-readline) or examples/luv.lua (lua-luv) will be skipped"
  return 0
}

# Configures (once) and builds the project; the output goes to build.log in the build
# directory and is shown only when the build fails.
mw_build() {
  local log
  mkdir -p "$MW_BUILD_DIR" || return 1
  log="$MW_BUILD_DIR/build.log"
  if { [ -f "$MW_BUILD_DIR/CMakeCache.txt" ] ||
       cmake -S "$MW_ROOT" -B "$MW_BUILD_DIR" -DCMAKE_BUILD_TYPE="$MW_BUILD_TYPE" ${MW_CMAKE_EXTRA:-}; } >"$log" 2>&1 &&
     cmake --build "$MW_BUILD_DIR" -j "$(nproc 2>/dev/null || echo 4)" >>"$log" 2>&1; then
    return 0
  fi
  tail -n 60 "$log" >&2
  mw_log "build failed (full log: $log)"
  return 1
}

# LUA_PATH/LUA_CPATH: the module from the build tree first, then whatever was set, then
# LuaJIT's defaults (";;").
mw_lua_env() {
  export MW_BUILD_DIR # the build the specs' child processes (bin/moonwarp) take too
  export LUA_PATH="$MW_BUILD_DIR/lua/?.lua;$MW_BUILD_DIR/lua/?/init.lua;${LUA_PATH:-};"
  export LUA_CPATH="$MW_BUILD_DIR/lua/?.so;${LUA_CPATH:-};"
}

mw_prepare() {
  mw_ensure_packages || return 1
  mw_build || return 1
  mw_lua_env
}
