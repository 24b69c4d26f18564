/* module.c - luaopen_moonwarp_core: registers the bound types and the module functions, and
 * holds the helpers every bound type shares (failure returns, number conversion, type names). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <string.h>

#include "binding.h"

void mwl_class(lua_State *L, const char *mt, const char *name, const luaL_Reg *meta,
               const luaL_Reg *methods, lua_CFunction index) {
  luaL_newmetatable(L, mt);
  luaL_register(L, NULL, meta);
  if (methods) {
    lua_newtable(L);
    luaL_register(L, NULL, methods);
    if (index) lua_pushcclosure(L, index, 1);
  } else {
    lua_pushcfunction(L, index);
  }
  lua_setfield(L, -2, "__index");
  lua_pushstring(L, name);
  lua_setfield(L, -2, "__metatable");
  lua_pop(L, 1);
}

void *mwl_test_udata(lua_State *L, int idx, const char *mt) {
  void *p = lua_touserdata(L, idx);
  int same;
  if (p == NULL || !lua_getmetatable(L, idx)) return NULL;
  luaL_getmetatable(L, mt);
  same = lua_rawequal(L, -1, -2);
  lua_pop(L, 2);
  return same ? p : NULL;
}

/* Pushes the luv-style failure triple: nil, message, code ("ENODEV"). */
int mwl_fail(lua_State *L, int err, const char *msg) {
  const char *name = mw_err_name(err);
  if (name == NULL) name = "EUNKNOWN";
  lua_pushnil(L);
  lua_pushstring(L, msg != NULL && msg[0] != '\0' ? msg : mw_strerror(err));
  lua_pushstring(L, name);
  return 3;
}

/* The same, with the runtime's detailed message (compiler log, CUDA error) when it has one. */
int mwl_fail_rt(lua_State *L, mwl_runtime *r, int err) {
  const char *msg = r != NULL && r->rt != NULL ? mw_runtime_last_error(r->rt) : NULL;
  return mwl_fail(L, err, msg);
}

/* Converts a Lua number to an integer of `bits` bits. Returns NULL, or why it cannot. */
const char *mwl_to_integer(lua_Number v, int bits, int is_signed, mw_value *out) {
  lua_Number lo, hi; /* the accepted range is [lo, hi) */
  if (v != floor(v)) return "number has no integer representation";
  lo = is_signed ? -ldexp(1.0, bits - 1) : 0.0;
  hi = is_signed ? ldexp(1.0, bits - 1) : ldexp(1.0, bits);
  if (!(v >= lo && v < hi)) return "value out of range";
  if (is_signed)
    out->i = (int64_t)v;
  else
    out->u = (uint64_t)v;
  return NULL;
}

/* The type of the value at idx as an error message names it: the moonwarp type names its
 * objects ("moonwarp.future"), "no value" for an absent argument, else Lua's name. */
const char *mwl_typename(lua_State *L, int idx) {
  static const char *const mts[] = {MWL_RUNTIME_MT, MWL_PROGRAM_MT, MWL_TASK_MT, MWL_BUFFER_MT,
                                    MWL_FUTURE_MT};
  size_t i;
  if (lua_type(L, idx) == LUA_TNONE) return "no value";
  for (i = 0; i < sizeof mts / sizeof mts[0]; i++)
    if (mwl_test_udata(L, idx, mts[i])) return mts[i];
  return luaL_typename(L, idx);
}

/* ---- 64-bit integers as LuaJIT cdata ----------------------------------------------------------
 * The C API cannot read or make FFI cdata; the Lua layer (moonwarp/init.lua) hands the binding
 * two functions once: reader(v) -> hi, lo, signed (nothing when v is no int64_t/uint64_t
 * cdata) and maker(hi, lo, signed) -> an int64_t or uint64_t cdata. Without them (no FFI) the
 * binding works with Lua numbers alone. */
#define MWL_INT64_READER "moonwarp.int64_reader"
#define MWL_INT64_MAKER "moonwarp.int64_maker"
#define MWL_TCDATA 10 /* lua_type of a LuaJIT cdata */

static int l_int64_helpers(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  lua_pushvalue(L, 1);
  lua_setfield(L, LUA_REGISTRYINDEX, MWL_INT64_READER);
  lua_pushvalue(L, 2);
  lua_setfield(L, LUA_REGISTRYINDEX, MWL_INT64_MAKER);
  return 0;
}

int mwl_is_cdata(lua_State *L, int idx) { return lua_type(L, idx) == MWL_TCDATA; }

/* The int64_t or uint64_t cdata at idx as its 64 bits; 0 when it is no such cdata. */
int mwl_cdata_int64(lua_State *L, int idx, uint64_t *bits, int *is_signed) {
  int ok = 0;
  idx = idx < 0 && idx > LUA_REGISTRYINDEX ? lua_gettop(L) + idx + 1 : idx;
  lua_getfield(L, LUA_REGISTRYINDEX, MWL_INT64_READER);
  if (lua_isfunction(L, -1)) {
    lua_pushvalue(L, idx);
    lua_call(L, 1, 3);
    if (lua_type(L, -3) == LUA_TNUMBER) {
      *bits = (uint64_t)lua_tonumber(L, -3) << 32 | (uint64_t)lua_tonumber(L, -2);
      *is_signed = lua_toboolean(L, -1);
      ok = 1;
    }
    lua_pop(L, 3);
  } else {
    lua_pop(L, 1);
  }
  return ok;
}

/* Pushes a 64-bit integer: a Lua number when it is exact as one (|v| <= 2^53), else an int64_t
 * or uint64_t cdata (a number, rounded, where the FFI is missing). */
void mwl_push_int64(lua_State *L, uint64_t bits, int is_signed) {
  int64_t sv = (int64_t)bits;
  int exact = is_signed ? (sv >= -(INT64_C(1) << 53) && sv <= (INT64_C(1) << 53))
                        : bits <= (UINT64_C(1) << 53);
  if (!exact) {
    lua_getfield(L, LUA_REGISTRYINDEX, MWL_INT64_MAKER);
    if (lua_isfunction(L, -1)) {
      lua_pushnumber(L, (lua_Number)(bits >> 32));
      lua_pushnumber(L, (lua_Number)(bits & 0xffffffffu));
      lua_pushboolean(L, is_signed);
      lua_call(L, 3, 1);
      return;
    }
    lua_pop(L, 1);
  }
  lua_pushnumber(L, is_signed ? (lua_Number)sv : (lua_Number)bits);
}

/* mw.now(): monotonic seconds, for timing scripts and benchmarks. */
static int l_now(lua_State *L) {
  lua_pushnumber(L, (lua_Number)mw__now());
  return 1;
}

/* core._methods(v): the method names of a moonwarp object (its type's method table, which
 * its protected metatable hides from Lua), sorted by the caller; {} for anything else. For the
 * REPL's completion. */
static int l_methods(lua_State *L) {
  int n = 0;
  lua_newtable(L);
  if (lua_type(L, 1) != LUA_TUSERDATA || !lua_getmetatable(L, 1)) return 1;
  lua_getfield(L, -1, "__index");
  if (lua_iscfunction(L, -1) && lua_getupvalue(L, -1, 1) == NULL) lua_pushnil(L);
  if (lua_istable(L, -1)) {
    lua_pushnil(L);
    while (lua_next(L, -2)) {
      lua_pop(L, 1);
      if (lua_type(L, -1) == LUA_TSTRING && lua_tostring(L, -1)[0] != '_') {
        lua_pushvalue(L, -1);
        lua_rawseti(L, 2, ++n);
      }
    }
  }
  lua_settop(L, 2);
  return 1;
}

static const luaL_Reg functions[] = {
    {"runtime", mwl_runtime_new},
    {"now", l_now},
    {"join", mwl_future_join},
    {"any", mwl_future_any},
    {"generate", mwl_generate},
    {"compile_cubin", mwl_compile_cubin},
    {"_int64_helpers", l_int64_helpers},
    {"_interrupts", mwl_interrupts},
    {"_interrupted", mwl_interrupted},
    {"_interruptible", mwl_interruptible_call},
    {"_nap", mwl_nap_lua},
    {"_poll_fds", mwl_poll_fds},
    {"_methods", l_methods},
    {NULL, NULL},
};

__attribute__((visibility("default"))) int luaopen_moonwarp_core(lua_State *L) {
  mwl_runtime_init(L);
  mwl_program_init(L);
  mwl_buffer_init(L);
  mwl_future_init(L);
  mwl_interrupt_hold(L);
  lua_newtable(L);
  luaL_register(L, NULL, functions);
  lua_pushstring(L, mw_version());
  lua_setfield(L, -2, "version");
  return 1;
}
