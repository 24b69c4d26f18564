/* compiler.c - the compiler front without a runtime: mw.generate (the generated source of a
 * program) and mw.compile_cubin (NVRTC to a cubin; needs NVRTC, not a GPU). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "binding.h"

static int is_ident(const char *s, size_t n) {
  if (n == 0 || (s[0] >= '0' && s[0] <= '9')) return 0;
  for (size_t i = 0; i < n; ++i) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
      return 0;
  }
  return 1;
}

/* The macro text of a number: an integer as one, else the shortest decimal that reads back as
 * the same double. */
static void number_text(lua_Number v, char *buf, size_t cap) {
  if (v == floor(v) && fabs(v) < 9.2e18) {
    snprintf(buf, cap, "%lld", (long long)v);
    return;
  }
  for (int prec = 15; prec <= 17; ++prec) {
    snprintf(buf, cap, "%.*g", prec, v);
    if (strtod(buf, NULL) == v) return;
  }
}

/* tostring(key) of the key at idx, as a new string on the stack */
static const char *key_text(lua_State *L, int idx) {
  if (idx < 0) idx = lua_gettop(L) + idx + 1;
  lua_getglobal(L, "tostring");
  lua_pushvalue(L, idx);
  lua_call(L, 1, 1);
  return lua_tostring(L, -1);
}

/* defines = { NAME = number | string | boolean }: "NAME=VALUE" strings into anchor[1..] */
static int read_defines(lua_State *L, int idx, int tbl, int anchor) {
  int n = 0;
  if (lua_type(L, tbl) != LUA_TTABLE)
    luaL_argerror(L, idx, lua_pushfstring(L, "option 'defines' must be a table of NAME = value, "
                                             "got %s", mwl_typename(L, tbl)));
  lua_pushnil(L);
  while (lua_next(L, tbl)) {
    size_t klen = 0, vlen = 0;
    const char *key = lua_type(L, -2) == LUA_TSTRING ? lua_tolstring(L, -2, &klen) : NULL;
    if (key == NULL)
      luaL_argerror(L, idx, lua_pushfstring(L, "option 'defines': key %s is not a name (write "
                                               "defines = { NAME = value })", key_text(L, -2)));
    if (!is_ident(key, klen))
      luaL_argerror(L, idx, lua_pushfstring(L, "option 'defines': '%s' is not an identifier", key));
    switch (lua_type(L, -1)) {
    case LUA_TBOOLEAN:
      if (lua_toboolean(L, -1)) lua_pushstring(L, key); /* NAME: defined as 1 */
      else lua_pushnil(L);                              /* false: left undefined */
      break;
    case LUA_TNUMBER: {
      char num[64];
      lua_Number v = lua_tonumber(L, -1);
      if (v != v || v == HUGE_VAL || v == -HUGE_VAL)
        luaL_argerror(L, idx, lua_pushfstring(L, "option 'defines': the value of '%s' must be a "
                                                 "finite number", key));
      number_text(v, num, sizeof num);
      lua_pushfstring(L, "%s=%s", key, num);
      break;
    }
    case LUA_TSTRING: {
      const char *v = lua_tolstring(L, -1, &vlen);
      if (strlen(v) != vlen)
        luaL_argerror(L, idx, lua_pushfstring(L, "option 'defines': the value of '%s' contains "
                                                 "a NUL byte", key));
      lua_pushfstring(L, "%s=%s", key, v);
      break;
    }
    default:
      luaL_argerror(L, idx, lua_pushfstring(L, "option 'defines': the value of '%s' must be a "
                                               "number, string or boolean, got %s", key,
                                            mwl_typename(L, -1)));
    }
    if (lua_isnil(L, -1)) lua_pop(L, 1);
    else lua_rawseti(L, anchor, ++n);
    lua_pop(L, 1);
  }
  return n;
}

/* include_dirs = { "dir", ... }: the strings into anchor[first..] */
static int read_include_dirs(lua_State *L, int idx, int tbl, int anchor, int first) {
  if (lua_type(L, tbl) != LUA_TTABLE)
    luaL_argerror(L, idx, lua_pushfstring(L, "option 'include_dirs' must be a list of directory "
                                             "names, got %s", mwl_typename(L, tbl)));
  int n = (int)lua_objlen(L, tbl);
  lua_pushnil(L);
  while (lua_next(L, tbl)) {
    lua_Number k = lua_type(L, -2) == LUA_TNUMBER ? lua_tonumber(L, -2) : 0;
    if (!(k >= 1 && k <= n && k == floor(k)))
      luaL_argerror(L, idx, lua_pushfstring(L, "option 'include_dirs' must be a list of directory "
                                               "names (found the key %s)", key_text(L, -2)));
    lua_pop(L, 1);
  }
  for (int i = 1; i <= n; ++i) {
    size_t len;
    lua_rawgeti(L, tbl, i);
    if (lua_type(L, -1) != LUA_TSTRING)
      luaL_argerror(L, idx, lua_pushfstring(L, "option 'include_dirs': entry %d must be a string, "
                                               "got %s", i, mwl_typename(L, -1)));
    const char *dir = lua_tolstring(L, -1, &len);
    if (strlen(dir) != len || len == 0)
      luaL_argerror(L, idx, lua_pushfstring(L, "option 'include_dirs': entry %d %s", i,
                                            len ? "contains a NUL byte" : "is empty"));
    lua_rawseti(L, anchor, first + i - 1);
  }
  return n;
}

static int cmp_strings(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* An array of the n strings anchor[first..], in a userdata stored at anchor[key]. */
static const char *const *string_array(lua_State *L, int anchor, int first, int n, int key) {
  if (n == 0) return NULL;
  const char **v = (const char **)lua_newuserdata(L, sizeof *v * (size_t)n);
  for (int i = 0; i < n; ++i) {
    lua_rawgeti(L, anchor, first + i);
    v[i] = lua_tostring(L, -1); /* held by the anchor */
    lua_pop(L, 1);
  }
  lua_rawseti(L, anchor, key);
  return v;
}

void mwl_compile_options(lua_State *L, int idx, mw_compile_desc *d, const char *const *also) {
  if (lua_type(L, idx) != LUA_TTABLE)
    luaL_argerror(L, idx, lua_pushfstring(L, "options must be a table, got %s", mwl_typename(L, idx)));
  lua_newtable(L);
  int anchor = lua_gettop(L), ndefs = 0, ndirs = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    const char *key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
    int known = 0;
    for (int i = 0; key && also && also[i] && !known; ++i) known = !strcmp(key, also[i]);
    if (known) {
    } else if (key && !strcmp(key, "defines")) {
      ndefs = read_defines(L, idx, lua_gettop(L), anchor);
      d->ndefines = ndefs;
      d->defines = string_array(L, anchor, 1, ndefs, -1);
      /* in one order whatever the table's: the same defines make the same compile (cache key) */
      if (ndefs > 1) qsort((void *)d->defines, (size_t)ndefs, sizeof *d->defines, cmp_strings);
    } else if (key && !strcmp(key, "debug")) {
      if (lua_type(L, -1) != LUA_TBOOLEAN)
        luaL_argerror(L, idx, lua_pushfstring(L, "option 'debug' must be true or false, got %s",
                                                 mwl_typename(L, -1)));
      d->debug = lua_toboolean(L, -1);
    } else if (key && !strcmp(key, "include_dirs")) {
      ndirs = read_include_dirs(L, idx, lua_gettop(L), anchor, 100000);
      d->ninclude_dirs = ndirs;
      d->include_dirs = string_array(L, anchor, 100000, ndirs, -2);
    } else {
      luaL_Buffer b;
      luaL_buffinit(L, &b);
      for (int i = 0; also && also[i]; ++i) {
        luaL_addstring(&b, also[i]);
        luaL_addstring(&b, ", ");
      }
      luaL_addstring(&b, "defines, include_dirs, debug");
      luaL_pushresult(&b);
      luaL_argerror(L, idx, lua_pushfstring(L, "unknown option '%s' (options: %s)",
                                            key_text(L, -3), lua_tostring(L, -1)));
    }
    lua_pop(L, 1);
  }
}

void mwl_option_error(lua_State *L, int idx, int rc, const char *msg) {
  if (rc == MW_EINVAL && msg && !strncmp(msg, "option '", 8)) luaL_argerror(L, idx, msg);
}

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

/* mw.compile_cubin(source [, {chunkname=, arch="sm_90", frame_bytes=, defines=, include_dirs=,
 * debug=}]) -> cubin bytes (a string) or nil, log, code ("ECOMPILE" with NVRTC's log, "ENODEV"
 * without NVRTC). frame_bytes: the frame size of the runtimes the cubin is for (mw.runtime's
 * option of that name). */
int mwl_compile_cubin(lua_State *L) {
  static const char *const own[] = {"chunkname", "arch", "frame_bytes", NULL};
  size_t len;
  const char *src = luaL_checklstring(L, 1, &len);
  mw_compile_desc d;
  memset(&d, 0, sizeof d);
  d.filename = opt_string(L, 2, "chunkname", NULL);
  d.arch = opt_string(L, 2, "arch", "sm_90");
  if (lua_type(L, 2) == LUA_TTABLE) {
    lua_getfield(L, 2, "frame_bytes");
    if (!lua_isnil(L, -1)) {
      lua_Number v = lua_type(L, -1) == LUA_TNUMBER ? lua_tonumber(L, -1) : -1;
      if (!(v >= 0 && v <= 4294967295.0 && v == (lua_Number)(uint32_t)v))
        luaL_argerror(L, 2, lua_pushfstring(L, "option 'frame_bytes' must be a whole number of bytes, got %s",
                                               lua_type(L, -1) == LUA_TNUMBER ? lua_tostring(L, -1)
                                                                               : mwl_typename(L, -1)));
      d.frame_bytes = (uint32_t)v;
    }
    lua_pop(L, 1);
  }
  if (!lua_isnoneornil(L, 2)) mwl_compile_options(L, 2, &d, own);
  if (strlen(src) != len) return luaL_argerror(L, 1, "source contains a NUL byte");
  void *cubin = NULL;
  size_t size = 0;
  char *log = NULL;
  int rc = mw_compile_cubin_desc(src, &d, &cubin, &size, &log);
  if (rc) {
    if (log == NULL) mwl_option_error(L, 2, rc, mw_last_error()); /* refused before compiling */
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
