/* compiler.c - the compiler front without a runtime: mw.generate (the generated source of a
 * program) and mw.compile_cubin (NVRTC to a cubin; needs NVRTC, not a GPU). */
#include <stdlib.h>
#include <string.h>

#include "binding.h"

static const char *opt_string(lua_State *L, int idx, const char *key, const char *def) {
  const char *v = def;
  if (lua_isnoneornil(L, idx)) return def;
  luaL_checktype(L, idx, LUA_TTABLE);
  lua_getfield(L, idx, key);
  if (!lua_isnil(L, -1)) {
    if (lua_type(L, -1) != LUA_TSTRING)
      luaL_error(L, "bad option '%s' (string expected, got %s)", key, luaL_typename(L, -1));
    v = lua_tostring(L, -1);
  }
  lua_pop(L, 1); /* the string stays alive in the options table */
  return v;
}

/* mw.generate(source [, {chunkname=, backend="cuda"|"sim"}]) -> generated source
 * or nil, message, "ECOMPILE" when the task declarations cannot be read. */
int mwl_generate(lua_State *L) {
  size_t len;
  const char *src = luaL_checklstring(L, 1, &len);
  const char *name = opt_string(L, 2, "chunkname", NULL);
  const char *backend = opt_string(L, 2, "backend", "cuda");
  if (strcmp(backend, "cuda") != 0 && strcmp(backend, "sim") != 0)
    return luaL_argerror(L, 2, "backend must be \"cuda\" or \"sim\"");
  if (strlen(src) != len) return luaL_argerror(L, 1, "source contains a NUL byte");
  char *out = NULL, *err = NULL;
  int rc = mw_generate_source(src, name, backend, &out, &err);
  if (rc) {
    lua_pushnil(L);
    lua_pushstring(L, err ? err : mw_strerror(rc));
    lua_pushstring(L, mw_err_name(rc));
    free(err);
    return 3;
  }
  lua_pushstring(L, out);
  free(out);
  return 1;
}

/* mw.compile_cubin(source [, {chunkname=, arch="sm_90"}]) -> cubin bytes (a string)
 * or nil, log, code ("ECOMPILE" with NVRTC's log, "ENODEV" without NVRTC). */
int mwl_compile_cubin(lua_State *L) {
  size_t len;
  const char *src = luaL_checklstring(L, 1, &len);
  const char *name = opt_string(L, 2, "chunkname", NULL);
  const char *arch = opt_string(L, 2, "arch", "sm_90");
  if (strlen(src) != len) return luaL_argerror(L, 1, "source contains a NUL byte");
  void *cubin = NULL;
  size_t size = 0;
  char *log = NULL;
  int rc = mw_compile_cubin(src, name, arch, &cubin, &size, &log);
  if (rc) {
    lua_pushnil(L);
    lua_pushstring(L, log ? log : mw_last_error());
    lua_pushstring(L, mw_err_name(rc));
    free(log);
    return 3;
  }
  lua_pushlstring(L, (const char *)cubin, size);
  free(cubin);
  free(log);
  return 1;
}
