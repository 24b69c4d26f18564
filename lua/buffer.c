/* buffer.c - the moonwarp.buffer type: typed device memory, written and read from Lua tables,
 * strings and (through moonwarp/init.lua) FFI memory. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "binding.h"

enum { K_INT, K_UINT, K_FLOAT };

static const struct etype {
  const char *name;
  size_t size;
  int kind;
} etypes[] = {
    {"int8", 1, K_INT},   {"uint8", 1, K_UINT},  {"int16", 2, K_INT}, {"uint16", 2, K_UINT},
    {"int32", 4, K_INT},  {"uint32", 4, K_UINT}, {"int64", 8, K_INT}, {"uint64", 8, K_UINT},
    {"float", 4, K_FLOAT}, {"double", 8, K_FLOAT},
};
#define NETYPES ((int)(sizeof etypes / sizeof etypes[0]))

static const struct {
  const char *alias, *name;
} aliases[] = {{"int", "int32"}, {"long", "int64"}, {"char", "int8"}, {"bool", "uint8"}};

static int find_etype(const char *name) {
  size_t i;
  int j;
  for (i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
    if (strcmp(name, aliases[i].alias) == 0) name = aliases[i].name;
  for (j = 0; j < NETYPES; j++)
    if (strcmp(name, etypes[j].name) == 0) return j;
  return -1;
}

mwl_buffer *mwl_test_buffer(lua_State *L, int idx) {
  return (mwl_buffer *)mwl_test_udata(L, idx, MWL_BUFFER_MT);
}

int mwl_buffer_belongs(mwl_buffer *b, mwl_runtime *r) {
  return b->r == r && r != NULL && r->rt != NULL && b->b != NULL;
}

static void check_open(lua_State *L, mwl_buffer *b) {
  mwl_runtime_check_open(L, b->r);
  if (b->b == NULL) luaL_error(L, "buffer is closed");
}

mwl_buffer *mwl_check_buffer(lua_State *L, int idx) {
  mwl_buffer *b = (mwl_buffer *)luaL_checkudata(L, idx, MWL_BUFFER_MT);
  check_open(L, b);
  return b;
}

/* The integer at idx as a count or position in [lo, hi]; raises naming argument arg. */
static size_t check_index(lua_State *L, int arg, const char *what, lua_Number lo, lua_Number hi) {
  lua_Number v = luaL_checknumber(L, arg);
  if (!(v >= lo && v <= hi && v == (lua_Number)(uint64_t)v)) {
    if (hi >= 4294967296.0)
      luaL_argerror(L, arg, lua_pushfstring(L, "%s must be an integer in %f..2^53, got %s", what, lo,
                                            lua_tostring(L, arg)));
    luaL_argerror(L, arg, lua_pushfstring(L, "%s must be an integer in %f..%f, got %s", what, lo,
                                          hi, lua_tostring(L, arg)));
  }
  return (size_t)v;
}

/* rt:buffer(type, n): n elements of type, uninitialised. The userdata exists, closed, before
 * the allocation, so a failure after it leaks nothing. */
int mwl_buffer_new(lua_State *L) {
  mwl_runtime *r = mwl_check_runtime(L, 1);
  const char *tname = luaL_checkstring(L, 2);
  int et = find_etype(tname);
  lua_Number max;
  size_t n;
  mwl_buffer *b;
  int rc;
  if (et < 0)
    return luaL_argerror(L, 2, lua_pushfstring(L, "unknown element type '%s' (int8 uint8 int16 "
                                                  "uint16 int32 uint32 int64 uint64 float "
                                                  "double; int long char bool)",
                                               tname));
  max = (lua_Number)(SIZE_MAX / etypes[et].size);
  if (max > 9007199254740992.0) max = 9007199254740992.0; /* 2^53: exact as a Lua number */
  n = check_index(L, 3, "element count", 1, max);
  b = (mwl_buffer *)lua_newuserdata(L, sizeof *b);
  b->r = NULL;
  b->b = NULL;
  b->count = n;
  b->etype = et;
  luaL_getmetatable(L, MWL_BUFFER_MT);
  lua_setmetatable(L, -2);
  lua_getfenv(L, 1);
  lua_setfenv(L, -2);
  b->r = r;
  mwl_runtime_ref(r);
  rc = mw_buffer_alloc(r->rt, n * etypes[et].size, &b->b);
  if (rc < 0) {
    b->b = NULL;
    return mwl_fail_rt(L, r, rc);
  }
  return 1;
}

/* Stores the Lua value at idx as element type et at dst; returns NULL or why it cannot. */
static const char *store(lua_State *L, int idx, const struct etype *et, unsigned char *dst) {
  mw_value v;
  lua_Number x;
  const char *why;
  if (et->kind != K_FLOAT && lua_type(L, idx) == LUA_TBOOLEAN) {
    x = lua_toboolean(L, idx);
  } else if (lua_type(L, idx) == LUA_TNUMBER) {
    x = lua_tonumber(L, idx);
  } else {
    return lua_pushfstring(L, "number expected, got %s", mwl_typename(L, idx));
  }
  if (et->kind == K_FLOAT) {
    if (et->size == 4) {
      float f = (float)x;
      memcpy(dst, &f, 4);
    } else {
      memcpy(dst, &x, 8);
    }
    return NULL;
  }
  why = mwl_to_integer(x, (int)et->size * 8, et->kind == K_INT, &v);
  if (why != NULL) return lua_pushfstring(L, "%s for %s", why, et->name);
  switch (et->size) { /* little-endian hosts and devices: the low bytes of v */
  case 1: { uint8_t u = (uint8_t)v.u; memcpy(dst, &u, 1); break; }
  case 2: { uint16_t u = (uint16_t)v.u; memcpy(dst, &u, 2); break; }
  case 4: { uint32_t u = (uint32_t)v.u; memcpy(dst, &u, 4); break; }
  default: memcpy(dst, &v.u, 8); break;
  }
  return NULL;
}

static lua_Number load(const struct etype *et, const unsigned char *src) {
  switch (et->kind * 16 + (int)et->size) {
  case K_INT * 16 + 1: { int8_t x; memcpy(&x, src, 1); return x; }
  case K_INT * 16 + 2: { int16_t x; memcpy(&x, src, 2); return x; }
  case K_INT * 16 + 4: { int32_t x; memcpy(&x, src, 4); return x; }
  case K_INT * 16 + 8: { int64_t x; memcpy(&x, src, 8); return (lua_Number)x; }
  case K_UINT * 16 + 1: { uint8_t x; memcpy(&x, src, 1); return x; }
  case K_UINT * 16 + 2: { uint16_t x; memcpy(&x, src, 2); return x; }
  case K_UINT * 16 + 4: { uint32_t x; memcpy(&x, src, 4); return x; }
  case K_UINT * 16 + 8: { uint64_t x; memcpy(&x, src, 8); return (lua_Number)x; }
  case K_FLOAT * 16 + 4: { float x; memcpy(&x, src, 4); return x; }
  default: { double x; memcpy(&x, src, 8); return x; }
  }
}

/* The elements first..first+n-1 (1-based) checked against the buffer: raises naming argument
 * arg when they overrun it. */
static void check_span(lua_State *L, mwl_buffer *b, int arg, size_t first, size_t n) {
  if (n > b->count - first + 1)
    luaL_argerror(L, arg, lua_pushfstring(L, "%d values from element %d overrun the %d elements "
                                             "of the buffer",
                                          (int)n, (int)first, (int)b->count));
}

/* buf:write(s [, first]) for a string s: its bytes, a whole number of elements, copied as
 * they are (no table in between). */
static int write_string(lua_State *L, mwl_buffer *b) {
  const struct etype *et = &etypes[b->etype];
  size_t len, first;
  const char *s = lua_tolstring(L, 2, &len);
  if (len % et->size)
    return luaL_argerror(L, 2, lua_pushfstring(L, "a string of %d bytes is not a whole number of "
                                                  "%s elements", (int)len, et->name));
  first = lua_isnoneornil(L, 3) ? 1 : check_index(L, 3, "first element", 1, (lua_Number)b->count);
  check_span(L, b, 2, first, len / et->size);
  int rc = len ? mw_buffer_write(b->b, (first - 1) * et->size, s, len) : 0;
  if (rc < 0) return mwl_fail_rt(L, b->r, rc);
  lua_settop(L, 1);
  return 1;
}

/* buf:write(t [, first]): t[1..#t] into elements first..first+#t-1 (1-based); a string is
 * taken as raw bytes. Returns buf. */
static int b_write(lua_State *L) {
  mwl_buffer *b = mwl_check_buffer(L, 1);
  const struct etype *et = &etypes[b->etype];
  size_t n, first, i;
  unsigned char *tmp;
  int rc;
  if (lua_type(L, 2) == LUA_TSTRING) return write_string(L, b);
  if (lua_type(L, 2) != LUA_TTABLE)
    return luaL_argerror(L, 2, lua_pushfstring(L, "table or string expected, got %s",
                                               mwl_typename(L, 2)));
  n = lua_objlen(L, 2);
  first = lua_isnoneornil(L, 3) ? 1 : check_index(L, 3, "first element", 1, (lua_Number)b->count);
  if (n > b->count - first + 1)
    return luaL_argerror(L, 2, lua_pushfstring(L, "%d values from element %d overrun the %d "
                                                  "elements of the buffer",
                                               (int)n, (int)first, (int)b->count));
  lua_settop(L, 2);
  if (n == 0) {
    lua_settop(L, 1);
    return 1;
  }
  tmp = (unsigned char *)lua_newuserdata(L, n * et->size);
  for (i = 0; i < n; i++) {
    const char *why;
    lua_rawgeti(L, 2, (int)(i + 1));
    why = store(L, -1, et, tmp + i * et->size);
    if (why != NULL)
      return luaL_argerror(L, 2, lua_pushfstring(L, "element %d: %s", (int)(i + 1), why));
    lua_pop(L, 1);
  }
  rc = mw_buffer_write(b->b, (first - 1) * et->size, tmp, n * et->size);
  if (rc < 0) return mwl_fail_rt(L, b->r, rc);
  lua_settop(L, 1);
  return 1;
}

/* buf:read([first [, count]]): elements first..first+count-1 as a table (default: to the end). */
static int b_read(lua_State *L) {
  mwl_buffer *b = mwl_check_buffer(L, 1);
  const struct etype *et = &etypes[b->etype];
  size_t first, n, i;
  unsigned char *tmp;
  int rc;
  first = lua_isnoneornil(L, 2) ? 1 : check_index(L, 2, "first element", 1, (lua_Number)b->count);
  n = lua_isnoneornil(L, 3) ? b->count - first + 1
                            : check_index(L, 3, "count", 0, (lua_Number)(b->count - first + 1));
  if (n > (size_t)INT32_MAX) return luaL_argerror(L, 3, "too many elements for a Lua table");
  tmp = (unsigned char *)lua_newuserdata(L, n * et->size + 1);
  if (n > 0) {
    rc = mw_buffer_read(b->b, (first - 1) * et->size, tmp, n * et->size);
    if (rc < 0) return mwl_fail_rt(L, b->r, rc);
  }
  lua_createtable(L, (int)n, 0);
  for (i = 0; i < n; i++) {
    lua_pushnumber(L, load(et, tmp + i * et->size));
    lua_rawseti(L, -2, (int)(i + 1));
  }
  return 1;
}

/* buf:read_string([first [, count]]): the elements' bytes as a Lua string (no table). */
static int b_read_string(lua_State *L) {
  mwl_buffer *b = mwl_check_buffer(L, 1);
  const struct etype *et = &etypes[b->etype];
  size_t first = lua_isnoneornil(L, 2) ? 1 : check_index(L, 2, "first element", 1, (lua_Number)b->count);
  size_t n = lua_isnoneornil(L, 3) ? b->count - first + 1
                                   : check_index(L, 3, "count", 0, (lua_Number)(b->count - first + 1));
  unsigned char *tmp = (unsigned char *)lua_newuserdata(L, n * et->size + 1);
  if (n > 0) {
    int rc = mw_buffer_read(b->b, (first - 1) * et->size, tmp, n * et->size);
    if (rc < 0) return mwl_fail_rt(L, b->r, rc);
  }
  lua_pushlstring(L, (const char *)tmp, n * et->size);
  return 1;
}

/* buf:_copy(address, count, first, to_device): count elements between host memory at address
 * and elements first.. of the buffer. The address comes from moonwarp/init.lua, which takes it
 * from an FFI pointer or array it has checked; scripts call write_from and read_into. */
static int b_copy(lua_State *L) {
  mwl_buffer *b = mwl_check_buffer(L, 1);
  const struct etype *et = &etypes[b->etype];
  lua_Number addr = luaL_checknumber(L, 2);
  size_t n = check_index(L, 3, "count", 0, (lua_Number)b->count);
  size_t first = lua_isnoneornil(L, 4) ? 1 : check_index(L, 4, "first element", 1, (lua_Number)b->count);
  int to_device = lua_toboolean(L, 5), rc = 0;
  void *host = (void *)(uintptr_t)addr;
  check_span(L, b, 3, first, n);
  if (n > 0 && host == NULL) return luaL_argerror(L, 2, "NULL pointer");
  if (n > 0)
    rc = to_device ? mw_buffer_write(b->b, (first - 1) * et->size, host, n * et->size)
                   : mw_buffer_read(b->b, (first - 1) * et->size, host, n * et->size);
  if (rc < 0) return mwl_fail_rt(L, b->r, rc);
  lua_settop(L, 1);
  return 1;
}

/* Shared by buf:close() and __gc: frees the device memory once, if the runtime still owns it
 * (mw_runtime_close already freed it otherwise). */
static void buffer_close(mwl_buffer *b) {
  if (b->b != NULL && b->r != NULL && b->r->rt != NULL) mw_buffer_free(b->b);
  b->b = NULL;
}

/* buf:close(): idempotent, and harmless after the runtime closed (which freed the memory). */
static int b_close(lua_State *L) {
  mwl_buffer *b = (mwl_buffer *)luaL_checkudata(L, 1, MWL_BUFFER_MT);
  buffer_close(b);
  return 0;
}

static int b_gc(lua_State *L) {
  mwl_buffer *b = (mwl_buffer *)luaL_checkudata(L, 1, MWL_BUFFER_MT);
  buffer_close(b);
  if (b->r != NULL) {
    mwl_runtime_unref(b->r);
    b->r = NULL;
  }
  return 0;
}

static int b_len(lua_State *L) {
  mwl_buffer *b = (mwl_buffer *)luaL_checkudata(L, 1, MWL_BUFFER_MT);
  lua_pushnumber(L, (lua_Number)b->count);
  return 1;
}

static int b_tostring(lua_State *L) {
  mwl_buffer *b = (mwl_buffer *)luaL_checkudata(L, 1, MWL_BUFFER_MT);
  char text[96];
  if (b->b == NULL || b->r == NULL || b->r->rt == NULL)
    snprintf(text, sizeof text, "moonwarp.buffer<%s[%zu] closed>", etypes[b->etype].name,
             b->count);
  else
    snprintf(text, sizeof text, "moonwarp.buffer<%s[%zu] 0x%llx>", etypes[b->etype].name,
             b->count, (unsigned long long)mw_buffer_address(b->b));
  lua_pushstring(L, text);
  return 1;
}

static const luaL_Reg methods[] = {
    {"write", b_write},
    {"read", b_read},
    {"read_string", b_read_string},
    {"_copy", b_copy},
    {"close", b_close},
    {NULL, NULL},
};

/* __index: type, count, size (bytes), address and backend are fields; the rest are methods. */
static int b_index(lua_State *L) {
  mwl_buffer *b = (mwl_buffer *)luaL_checkudata(L, 1, MWL_BUFFER_MT);
  const char *key = lua_tostring(L, 2);
  if (key != NULL) {
    if (strcmp(key, "type") == 0) {
      lua_pushstring(L, etypes[b->etype].name);
      return 1;
    }
    if (strcmp(key, "count") == 0) {
      lua_pushnumber(L, (lua_Number)b->count);
      return 1;
    }
    if (strcmp(key, "size") == 0) {
      lua_pushnumber(L, (lua_Number)(b->count * etypes[b->etype].size));
      return 1;
    }
    if (strcmp(key, "backend") == 0) { /* its runtime's backend: "sim" memory is the host's */
      check_open(L, b);
      lua_pushstring(L, b->r->backend);
      return 1;
    }
    if (strcmp(key, "address") == 0) {
      check_open(L, b);
      lua_pushnumber(L, (lua_Number)mw_buffer_address(b->b));
      return 1;
    }
  }
  lua_pushvalue(L, 2);
  lua_rawget(L, lua_upvalueindex(1));
  return 1;
}

static const luaL_Reg metamethods[] = {
    {"__gc", b_gc},
    {"__tostring", b_tostring},
    {"__len", b_len},
    {NULL, NULL},
};

void mwl_buffer_init(lua_State *L) {
  mwl_class(L, MWL_BUFFER_MT, "moonwarp.buffer", metamethods, methods, b_index);
}
