/* program.c - the moonwarp.program and moonwarp.task types: task lookup, argument marshalling
 * and spawning. A program's environment table holds the runtime anchor at [1] and its task
 * objects by name, so prog.fib returns the same object every time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "binding.h"

#define MAX_ARGS 64

mwl_program *mwl_check_program(lua_State *L, int idx) {
  mwl_program *pr = (mwl_program *)luaL_checkudata(L, idx, MWL_PROGRAM_MT);
  mwl_runtime_check_open(L, pr->r);
  return pr;
}

mwl_task *mwl_check_task(lua_State *L, int idx) {
  mwl_task *t = (mwl_task *)luaL_checkudata(L, idx, MWL_TASK_MT);
  mwl_runtime_check_open(L, t->r);
  return t;
}

/* Pushes a program userdata; the anchor at anchor_idx goes into its environment. */
void mwl_program_push(lua_State *L, int anchor_idx, mwl_runtime *r, mw_program *p) {
  mwl_program *pr = (mwl_program *)lua_newuserdata(L, sizeof *pr);
  pr->r = NULL;
  pr->p = p;
  pr->ref = (mwl_progref *)malloc(sizeof *pr->ref);
  if (pr->ref == NULL) luaL_error(L, "out of memory");
  pr->ref->refs = 1;
  pr->ref->r = r;
  pr->ref->p = p;
  luaL_getmetatable(L, MWL_PROGRAM_MT);
  lua_setmetatable(L, -2);
  lua_createtable(L, 1, 4);
  lua_pushvalue(L, anchor_idx);
  lua_rawseti(L, -2, 1);
  lua_setfenv(L, -2);
  pr->r = r;
  mwl_runtime_ref(r);
}

/* ---- tasks ---- */

/* Pushes the task object for index i of the program at prog_idx, made once and cached. */
static void push_task(lua_State *L, int prog_idx, mwl_program *pr, int i) {
  mw_task_info info;
  mwl_task *t;
  int env;
  if (mw_program_task(pr->p, i, &info) < 0) luaL_error(L, "no task #%d in program", i + 1);
  lua_getfenv(L, prog_idx);
  env = lua_gettop(L);
  lua_getfield(L, env, info.name);
  if (!lua_isnil(L, -1)) {
    lua_replace(L, env);
    return;
  }
  lua_pop(L, 1);
  t = (mwl_task *)lua_newuserdata(L, sizeof *t);
  t->r = NULL;
  t->p = pr->p;
  t->index = i;
  t->ref = pr->ref;
  pr->ref->refs++;
  luaL_getmetatable(L, MWL_TASK_MT);
  lua_setmetatable(L, -2);
  lua_rawgeti(L, env, 1);
  lua_setfenv(L, -2);
  t->r = pr->r;
  mwl_runtime_ref(pr->r);
  lua_pushvalue(L, -1);
  lua_setfield(L, env, info.name);
  lua_replace(L, env);
}

static void task_info(lua_State *L, const mwl_task *t, mw_task_info *info) {
  if (mw_program_task(t->p, t->index, info) < 0) luaL_error(L, "task is gone from its program");
}

static int arg_error(lua_State *L, int argn, const char *fname, const char *msg) {
  return luaL_error(L, "bad argument #%d to '%s' (%s)", argn, fname, msg);
}

static int type_error(lua_State *L, int argn, const char *fname, const char *expected, int idx) {
  return arg_error(L, argn, fname,
                   lua_pushfstring(L, "%s expected, got %s", expected, mwl_typename(L, idx)));
}

/* Reads the Lua value at idx as a parameter of type ty into *out; raises naming argument argn
 * of function fname. */
static void marshal(lua_State *L, mwl_runtime *r, int idx, mw_type ty, int argn,
                    const char *fname, mw_value *out) {
  static const struct {
    int bits, is_signed;
  } ints[MW_T__COUNT] = {[MW_T_I8] = {8, 1},   [MW_T_U8] = {8, 0},   [MW_T_I16] = {16, 1},
                         [MW_T_U16] = {16, 0}, [MW_T_I32] = {32, 1}, [MW_T_U32] = {32, 0},
                         [MW_T_I64] = {64, 1}, [MW_T_U64] = {64, 0}};
  out->u = 0;
  switch (ty) {
  case MW_T_BOOL:
    if (lua_type(L, idx) != LUA_TBOOLEAN) type_error(L, argn, fname, "boolean", idx);
    out->i = lua_toboolean(L, idx);
    return;
  case MW_T_F32:
  case MW_T_F64:
    if (lua_type(L, idx) != LUA_TNUMBER) type_error(L, argn, fname, "number", idx);
    out->d = lua_tonumber(L, idx);
    return;
  case MW_T_PTR: {
    mwl_buffer *b = mwl_test_buffer(L, idx);
    if (b == NULL) type_error(L, argn, fname, "buffer", idx);
    if (!mwl_buffer_belongs(b, r))
      arg_error(L, argn, fname, b->b == NULL ? "buffer is closed" : "buffer of another runtime");
    out->u = mw_buffer_address(b->b);
    return;
  }
  case MW_T_FUTURE: {
    mwl_future *f = mwl_test_future(L, idx);
    if (f == NULL) type_error(L, argn, fname, "future", idx);
    if (f->r != r) arg_error(L, argn, fname, "future of another runtime");
    if (f->f == 0) arg_error(L, argn, fname, "future is closed");
    out->f = f->f;
    return;
  }
  default:
    if (ty > MW_T_BOOL && ty < MW_T_F32) {
      const char *why;
      uint64_t bits;
      int is_signed;
      if (mwl_is_cdata(L, idx) && mwl_cdata_int64(L, idx, &bits, &is_signed)) {
        /* an int64_t or uint64_t cdata: exact, checked against the parameter's range */
        int b = ints[ty].bits;
        int neg = is_signed && (int64_t)bits < 0;
        int fits = ints[ty].is_signed
                       ? (neg ? b == 64 || (int64_t)bits >= -(INT64_C(1) << (b - 1))
                              : bits < (UINT64_C(1) << (b - 1)))
                       : !neg && (b == 64 || bits < (UINT64_C(1) << b));
        if (!fits)
          arg_error(L, argn, fname, lua_pushfstring(L, "value out of range for %s", mw_type_name(ty)));
        out->u = bits;
        return;
      }
      if (lua_type(L, idx) != LUA_TNUMBER) type_error(L, argn, fname, "number", idx);
      why = mwl_to_integer(lua_tonumber(L, idx), ints[ty].bits, ints[ty].is_signed, out);
      if (why != NULL)
        arg_error(L, argn, fname, lua_pushfstring(L, "%s for %s", why, mw_type_name(ty)));
      return;
    }
    arg_error(L, argn, fname, "parameter of a type the binding cannot pass");
  }
}

/* After a spawn found no capacity: the host futures may be held by garbage. Collects when this
 * script holds every one of them (nothing else can free one), else only once the futures held
 * have grown by half since the last such collection, so that a full inbox alone does not cost a
 * collection per spawn. */
static void collect_for_capacity(lua_State *L, mwl_runtime *r) {
  if ((r->host_futures && r->held >= r->host_futures) ||
      r->held > r->held_at_gc + r->held_at_gc / 2) {
    lua_gc(L, LUA_GCCOLLECT, 0);
    r->held_at_gc = r->held;
  }
  mwl_runtime_check_open(L, r);
}

static int no_capacity(int rc) {
  return rc == MW_ECAPACITY || rc == MW_ETIMEDOUT || rc == MW_EAGAIN;
}

/* Spawns task t with the Lua arguments at first..top (bulk: n instances, n > 0), argument
 * numbers in messages counted from argn0. Returns the future, or nil, message, code. */
static int spawn(lua_State *L, mwl_task *t, int first, uint32_t n, int argn0, const char *fname) {
  mw_task_info info;
  mw_value args[MAX_ARGS];
  mwl_runtime *r = t->r;
  mwl_future *fu;
  int nargs = lua_gettop(L) - first + 1, i, rc, anchor;
  task_info(L, t, &info);
  if (info.nparams > MAX_ARGS) return luaL_error(L, "task '%s' has too many parameters", info.name);
  if (fname == NULL) fname = info.name;
  if (nargs > info.nparams)
    return luaL_error(L, "wrong number of arguments to '%s' (expected %d, got %d)", fname,
                      info.nparams, nargs);
  for (i = 0; i < info.nparams; i++)
    marshal(L, r, first + i, info.param_types[i], argn0 + i, fname, &args[i]);
  lua_getfenv(L, 1);
  anchor = lua_gettop(L);
  fu = mwl_future_new(L, anchor, r, info.name);
  if (n == 0)
    rc = mw_spawn(r->rt, t->p, t->index, args, info.nparams, 0, &fu->f);
  else
    rc = mw_spawn_bulk(r->rt, t->p, t->index, n, args, info.nparams, 0, &fu->f);
  if (no_capacity(rc)) {
    collect_for_capacity(L, r);
    /* then wait, up to spawn_timeout; Ctrl-C ends the wait */
    mwl_wait_enter();
    if (n == 0)
      rc = mw_spawn(r->rt, t->p, t->index, args, info.nparams, r->spawn_timeout, &fu->f);
    else
      rc = mw_spawn_bulk(r->rt, t->p, t->index, n, args, info.nparams, r->spawn_timeout, &fu->f);
    mwl_wait_leave();
    if (rc < 0) fu->f = 0;
    mwl_interrupt_check(L);
    if (rc == MW_EINTR) return luaL_error(L, "interrupted");
  }
  if (rc < 0) {
    fu->f = 0;
    return mwl_fail_rt(L, r, rc);
  }
  r->held++;
  return 1;
}

/* Pushes the arguments of spawn i (1-based) of spawn_many from its args (at index 3): args(i)'s
 * results, or args[i] (a table of the arguments; for a task of one parameter the bare value
 * too). Leaves exactly nparams values. */
static void spawn_many_args(lua_State *L, int i, int nparams, const char *fname) {
  int top = lua_gettop(L), got, k;
  if (lua_type(L, 3) == LUA_TFUNCTION) {
    lua_pushvalue(L, 3);
    lua_pushinteger(L, i);
    lua_call(L, 1, LUA_MULTRET);
    got = lua_gettop(L) - top;
  } else {
    lua_rawgeti(L, 3, i);
    if (nparams == 1 && lua_type(L, -1) != LUA_TTABLE) {
      got = 1;
    } else if (lua_type(L, -1) != LUA_TTABLE) {
      luaL_error(L, "bad argument #2 to 'spawn_many' (element %d: a table of %d arguments "
                    "expected, got %s)", i, nparams, mwl_typename(L, -1));
      return;
    } else {
      int tab = lua_gettop(L);
      got = (int)lua_objlen(L, tab);
      if (got > nparams) got = nparams + 1; /* too many: said below */
      for (k = 1; k <= nparams; k++) lua_rawgeti(L, tab, k);
      lua_remove(L, tab);
      if (got <= nparams) got = nparams;
    }
  }
  if (got > nparams)
    luaL_error(L, "wrong number of arguments to '%s' (expected %d, got more)", fname, nparams);
  lua_settop(L, top + nparams); /* fewer: the rest are nil, which marshal names */
}

/* task:spawn_many(n [, args [, {futures = false}]]): n spawns of the task in one call. args
 * gives the arguments of spawn i (1..n): a function called as args(i) that returns them, or a
 * table whose element i is a table of them (a bare value where the task has one parameter);
 * none for a task without parameters. Every argument is checked before the first spawn. Returns
 * a table of the n futures; with futures = false the spawns are fire-and-forget (the host lets
 * go of each at once and its result is dropped; rt:stats() counts them) and it returns n.
 * Capacity is waited for as a spawn waits (spawn_timeout for each); when it runs out: nil,
 * message, code, then what was spawned (the table of those futures, or their number). */
static int task_spawn_many(lua_State *L) {
  mwl_task *t = mwl_check_task(L, 1);
  mwl_runtime *r = t->r;
  mw_task_info info;
  lua_Number nn;
  uint32_t n, done = 0, k;
  int keep = 1, i, j, rc = 0, result = 0, np;
  mw_value *vals = NULL;
  mw_future *outs = NULL;
  char fname[48];
  if (lua_type(L, 2) != LUA_TNUMBER) return type_error(L, 1, "spawn_many", "number", 2);
  nn = lua_tonumber(L, 2);
  if (!(nn >= 0 && nn <= 16777216.0 && nn == (lua_Number)(uint32_t)nn))
    return arg_error(L, 1, "spawn_many",
                     lua_pushfstring(L, "spawn count must be an integer in 0..16777216, got %s",
                                     lua_tostring(L, 2)));
  n = (uint32_t)nn;
  task_info(L, t, &info);
  np = info.nparams;
  if (np > MAX_ARGS) return luaL_error(L, "task '%s' has too many parameters", info.name);
  if (!lua_isnoneornil(L, 4)) {
    if (lua_type(L, 4) != LUA_TTABLE) return type_error(L, 3, "spawn_many", "table", 4);
    lua_pushnil(L);
    while (lua_next(L, 4)) {
      if (lua_type(L, -2) != LUA_TSTRING || strcmp(lua_tostring(L, -2), "futures") != 0)
        return arg_error(L, 3, "spawn_many", "unknown option (options: futures)");
      if (lua_type(L, -1) != LUA_TBOOLEAN)
        return arg_error(L, 3, "spawn_many", "option 'futures' must be a boolean");
      keep = lua_toboolean(L, -1);
      lua_pop(L, 1);
    }
  }
  lua_settop(L, 3);
  if (lua_isnil(L, 3)) {
    if (np > 0)
      return arg_error(L, 2, "spawn_many",
                       lua_pushfstring(L, "task '%s' takes %d argument%s: a table or a function "
                                          "expected, got nil", info.name, np, np == 1 ? "" : "s"));
  } else if (lua_type(L, 3) != LUA_TFUNCTION && lua_type(L, 3) != LUA_TTABLE) {
    return type_error(L, 2, "spawn_many", "table or function", 3);
  }
  /* every argument, checked, before anything is spawned (scratch memory the collector owns) */
  if (np > 0 && n > 0) {
    vals = (mw_value *)lua_newuserdata(L, (size_t)n * (size_t)np * sizeof *vals);
    for (k = 0; k < n; k++) {
      int base;
      snprintf(fname, sizeof fname, "spawn_many[%u]", (unsigned)(k + 1));
      spawn_many_args(L, (int)k + 1, np, fname);
      base = lua_gettop(L) - np + 1;
      for (j = 0; j < np; j++)
        marshal(L, r, base + j, info.param_types[j], j + 1, fname, &vals[(size_t)k * np + j]);
      lua_settop(L, 4);
    }
  }
  if (keep) {
    int anchor;
    outs = n ? (mw_future *)lua_newuserdata(L, (size_t)n * sizeof *outs) : NULL;
    lua_getfenv(L, 1);
    anchor = lua_gettop(L);
    lua_createtable(L, (int)n, 0);
    result = lua_gettop(L);
    for (k = 0; k < n; k++) { /* made first: nothing can fail once tasks are spawned */
      mwl_future_new(L, anchor, r, info.name);
      lua_rawseti(L, result, (int)k + 1);
    }
  }
  while (done < n) {
    uint32_t made = 0;
    rc = mw_spawn_n(r->rt, t->p, t->index, n - done, vals ? vals + (size_t)done * np : NULL, np,
                    0, outs ? outs + done : NULL, &made);
    done += made;
    if (rc == 0 || !no_capacity(rc)) break;
    collect_for_capacity(L, r);
    mwl_wait_enter();
    made = 0;
    rc = mw_spawn_n(r->rt, t->p, t->index, n - done, vals ? vals + (size_t)done * np : NULL, np,
                    r->spawn_timeout, outs ? outs + done : NULL, &made);
    mwl_wait_leave();
    done += made;
    if (rc == 0 || rc == MW_EINTR || !no_capacity(rc)) break;
    if (made == 0) break; /* nothing moved within spawn_timeout */
  }
  if (keep) {
    for (k = 0; k < done; k++) {
      lua_rawgeti(L, result, (int)k + 1);
      ((mwl_future *)lua_touserdata(L, -1))->f = outs[k];
      lua_pop(L, 1);
    }
    for (k = n; k > done; k--) { /* the futures not spawned go */
      lua_pushnil(L);
      lua_rawseti(L, result, (int)k);
    }
    r->held += done;
  }
  if (rc == MW_EINTR) {
    mwl_interrupt_check(L);
    return luaL_error(L, "interrupted");
  }
  mwl_interrupt_check(L);
  if (rc < 0) {
    i = mwl_fail_rt(L, r, rc);
    if (keep)
      lua_pushvalue(L, result);
    else
      lua_pushnumber(L, (lua_Number)done);
    return i + 1;
  }
  if (keep)
    lua_pushvalue(L, result);
  else
    lua_pushnumber(L, (lua_Number)n);
  return 1;
}

/* task(...): spawn; arguments counted from #1 as the task's parameters. */
static int task_call(lua_State *L) {
  mwl_task *t = mwl_check_task(L, 1);
  return spawn(L, t, 2, 0, 1, NULL);
}

/* task:bulk(n, ...): n instances; n is argument #1, the parameters follow from #2 (numbered
 * as the call reads, whether or not it is written with a colon). */
static int task_bulk(lua_State *L) {
  mwl_task *t = mwl_check_task(L, 1);
  lua_Number n;
  if (lua_type(L, 2) != LUA_TNUMBER) return type_error(L, 1, "bulk", "number", 2);
  n = lua_tonumber(L, 2);
  if (!(n >= 1 && n <= 4294967295.0 && n == (lua_Number)(uint32_t)n))
    return arg_error(L, 1, "bulk",
                     lua_pushfstring(L, "instance count must be an integer in 1..4294967295, "
                                        "got %s", lua_tostring(L, 2)));
  return spawn(L, t, 3, (uint32_t)n, 2, "bulk");
}

static int task_index(lua_State *L) {
  mwl_task *t = mwl_check_task(L, 1);
  const char *key = luaL_checkstring(L, 2);
  mw_task_info info;
  int i;
  task_info(L, t, &info);
  if (strcmp(key, "name") == 0) {
    lua_pushstring(L, info.name);
  } else if (strcmp(key, "signature") == 0) {
    lua_pushstring(L, info.signature);
  } else if (strcmp(key, "kind") == 0) {
    lua_pushinteger(L, (lua_Integer)info.kind);
  } else if (strcmp(key, "file") == 0) {
    lua_pushstring(L, info.file);
  } else if (strcmp(key, "line") == 0) {
    lua_pushinteger(L, info.line);
  } else if (strcmp(key, "result") == 0) {
    lua_pushstring(L, mw_type_name(info.ret));
  } else if (strcmp(key, "params") == 0) {
    lua_createtable(L, info.nparams, 0);
    for (i = 0; i < info.nparams; i++) {
      mw_type ty = info.param_types[i];
      lua_createtable(L, 0, 2);
      lua_pushstring(L, info.param_names[i]);
      lua_setfield(L, -2, "name");
      lua_pushstring(L, mw_type_name(ty));
      lua_setfield(L, -2, "type");
      lua_rawseti(L, -2, i + 1);
    }
  } else if (strcmp(key, "bulk") == 0) {
    lua_pushcfunction(L, task_bulk);
  } else if (strcmp(key, "spawn_many") == 0) {
    lua_pushcfunction(L, task_spawn_many);
  } else {
    lua_pushnil(L);
  }
  return 1;
}

static int task_tostring(lua_State *L) {
  mwl_task *t = (mwl_task *)luaL_checkudata(L, 1, MWL_TASK_MT);
  mw_task_info info;
  if (t->r == NULL || t->r->rt == NULL || mw_program_task(t->p, t->index, &info) < 0)
    lua_pushliteral(L, "moonwarp.task<closed>");
  else
    lua_pushfstring(L, "moonwarp.task<%s>", info.signature);
  return 1;
}

/* Drops one of the program's Lua references; the last lets the core drop the program. */
static void progref_drop(mwl_progref *ref) {
  if (ref == NULL || --ref->refs > 0) return;
  if (ref->r != NULL && ref->r->rt != NULL) mw_program_release(ref->p);
  free(ref);
}

static int task_gc(lua_State *L) {
  mwl_task *t = (mwl_task *)luaL_checkudata(L, 1, MWL_TASK_MT);
  progref_drop(t->ref);
  t->ref = NULL;
  if (t->r != NULL) {
    mwl_runtime_unref(t->r);
    t->r = NULL;
  }
  return 0;
}

/* ---- programs ---- */

/* prog:task(name): the task object, for names a method would shadow (a task called "tasks"). */
static int prog_task(lua_State *L) {
  mwl_program *pr = mwl_check_program(L, 1);
  const char *name = luaL_checkstring(L, 2);
  int i = mw_program_find(pr->p, name), n, j;
  if (i >= 0) {
    push_task(L, 1, pr, i);
    return 1;
  }
  n = mw_program_task_count(pr->p);
  lua_pushfstring(L, "no task '%s' in program (tasks:", name);
  for (j = 0; j < n; j++) {
    mw_task_info info;
    if (mw_program_task(pr->p, j, &info) == 0)
      lua_pushfstring(L, "%s %s", j > 0 ? "," : "", info.name);
    else
      lua_pushliteral(L, "");
  }
  lua_pushliteral(L, ")");
  lua_concat(L, n + 2);
  return luaL_error(L, "%s", lua_tostring(L, -1));
}

/* prog:tasks(): the task objects, in source order. */
static int prog_tasks(lua_State *L) {
  mwl_program *pr = mwl_check_program(L, 1);
  int n = mw_program_task_count(pr->p), i;
  lua_createtable(L, n > 0 ? n : 0, 0);
  for (i = 0; i < n; i++) {
    push_task(L, 1, pr, i);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

static int prog_index(lua_State *L) {
  luaL_checkudata(L, 1, MWL_PROGRAM_MT);
  lua_pushvalue(L, 2);
  lua_rawget(L, lua_upvalueindex(1)); /* methods first */
  if (!lua_isnil(L, -1)) return 1;
  lua_pop(L, 1);
  luaL_checkstring(L, 2);
  lua_settop(L, 2);
  return prog_task(L);
}

static int prog_tostring(lua_State *L) {
  mwl_program *pr = (mwl_program *)luaL_checkudata(L, 1, MWL_PROGRAM_MT);
  int n, j;
  mw_task_info info;
  if (pr->r == NULL || pr->r->rt == NULL) {
    lua_pushliteral(L, "moonwarp.program<closed>");
    return 1;
  }
  n = mw_program_task_count(pr->p);
  lua_pushfstring(L, "moonwarp.program<%s:",
                  n > 0 && mw_program_task(pr->p, 0, &info) == 0 && info.file ? info.file
                                                                              : "<string>");
  for (j = 0; j < n; j++) {
    if (mw_program_task(pr->p, j, &info) == 0)
      lua_pushfstring(L, "%s %s", j > 0 ? "," : "", info.name);
    else
      lua_pushliteral(L, "");
  }
  lua_pushliteral(L, ">");
  lua_concat(L, n + 2);
  return 1;
}

static int prog_gc(lua_State *L) {
  mwl_program *pr = (mwl_program *)luaL_checkudata(L, 1, MWL_PROGRAM_MT);
  progref_drop(pr->ref);
  pr->ref = NULL;
  if (pr->r != NULL) {
    mwl_runtime_unref(pr->r);
    pr->r = NULL;
  }
  return 0;
}

static const luaL_Reg prog_methods[] = {
    {"tasks", prog_tasks},
    {"task", prog_task},
    {NULL, NULL},
};

static const luaL_Reg prog_meta[] = {
    {"__gc", prog_gc},
    {"__tostring", prog_tostring},
    {NULL, NULL},
};

static const luaL_Reg task_meta[] = {
    {"__gc", task_gc},
    {"__tostring", task_tostring},
    {"__call", task_call},
    {NULL, NULL},
};

void mwl_program_init(lua_State *L) {
  mwl_class(L, MWL_PROGRAM_MT, "moonwarp.program", prog_meta, prog_methods, prog_index);
  mwl_class(L, MWL_TASK_MT, "moonwarp.task", task_meta, NULL, task_index);
}
