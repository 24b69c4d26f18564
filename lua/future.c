/* future.c - the moonwarp.future type (await, done, state, cancel) and mw.join / mw.any.
 *
 * A future holds the host's hold on a core future until f:close() or __gc releases it. The
 * first time a result is seen (await, poll) it is copied into the userdata, so a future can be
 * awaited again and its state read without asking the core. */
#define _POSIX_C_SOURCE 200809L
#include <stddef.h>
#include <string.h>

#include "binding.h"


/* mw_future_await inside a wait's scope (interrupt.c): Ctrl-C ends it with MW_EINTR, after
 * which the caller raises "interrupted" (mwl_interrupt_check). timeout < 0 waits for ever. */
static int await_core(mwl_future *fu, double timeout, mw_result *res) {
  int rc;
  mwl_wait_enter();
  rc = mw_future_await(fu->r->rt, fu->f, timeout, res);
  mwl_wait_leave();
  return rc;
}

/* Makes an empty future of runtime r (no core future yet: f == 0), anchor at anchor_idx as
 * its environment, and leaves it on the stack. The caller fills f once the spawn succeeded,
 * so a failure in between leaks nothing. */
mwl_future *mwl_future_new(lua_State *L, int anchor_idx, mwl_runtime *r, const char *name) {
  size_t len = strlen(name);
  mwl_future *fu = (mwl_future *)lua_newuserdata(L, offsetof(mwl_future, name) + len + 1);
  memset(fu, 0, offsetof(mwl_future, name));
  memcpy(fu->name, name, len + 1);
  luaL_getmetatable(L, MWL_FUTURE_MT);
  lua_setmetatable(L, -2);
  lua_pushvalue(L, anchor_idx);
  lua_setfenv(L, -2);
  fu->r = r;
  mwl_runtime_ref(r);
  fu->id = ++r->next_id;
  return fu;
}

mwl_future *mwl_test_future(lua_State *L, int idx) {
  return (mwl_future *)mwl_test_udata(L, idx, MWL_FUTURE_MT);
}

/* An open future: its runtime open and the host's hold not given up. */
static void check_open(lua_State *L, mwl_future *fu) {
  mwl_runtime_check_open(L, fu->r);
  if (fu->f == 0) luaL_error(L, "future is closed");
}

mwl_future *mwl_check_future(lua_State *L, int idx) {
  mwl_future *fu = (mwl_future *)luaL_checkudata(L, idx, MWL_FUTURE_MT);
  check_open(L, fu);
  return fu;
}

/* Records the outcome of mw_future_poll / mw_future_await: rc 0 means res is final (the
 * task's own status in res.status); a failure code with a matching res.status is taken as
 * final too. Returns 1 if the future now has its result. */
static int settle(mwl_future *fu, int rc, const mw_result *res) {
  if (fu->have) return 1;
  if (rc == 0 || ((rc == MW_EFAILED || rc == MW_ECANCELED || rc == MW_EFAULT) && res->status == rc)) {
    fu->res = *res;
    fu->have = 1;
  }
  return fu->have;
}

/* Polls the core once unless the result is already here. Returns the poll's code (0 settled,
 * MW_EAGAIN pending, else an error). */
static int poll_once(mwl_future *fu) {
  mw_result res;
  int rc;
  if (fu->have) return 0;
  memset(&res, 0, sizeof res);
  rc = mw_future_poll(fu->r->rt, fu->f, &res);
  if (settle(fu, rc, &res)) return 0;
  return rc == 0 ? MW_EAGAIN : rc;
}

/* Pushes the value of a settled, successful future. */
static void push_value(lua_State *L, const mw_result *res) {
  switch (res->type) {
  case MW_T_VOID: lua_pushnil(L); break;
  case MW_T_BOOL: lua_pushboolean(L, res->value.u != 0); break;
  case MW_T_I8:
  case MW_T_I16:
  case MW_T_I32: lua_pushnumber(L, (lua_Number)res->value.i); break;
  case MW_T_I64: mwl_push_int64(L, res->value.u, 1); break; /* beyond 2^53: an int64_t cdata */
  case MW_T_U8:
  case MW_T_U16:
  case MW_T_U32: lua_pushnumber(L, (lua_Number)res->value.u); break;
  case MW_T_U64:
  case MW_T_PTR:
  case MW_T_FUTURE: mwl_push_int64(L, res->value.u, 0); break;
  case MW_T_F32:
  case MW_T_F64: lua_pushnumber(L, res->value.d); break;
  default: lua_pushnil(L); break;
  }
}

/* Raises the failure of a settled future as a plain message ("fib: message"), without a
 * position: it comes from the task, not from the line that awaited. */
static int raise_failure(lua_State *L, const mwl_future *fu) {
  if (fu->res.message[0] != '\0')
    lua_pushlstring(L, fu->res.message, strnlen(fu->res.message, sizeof fu->res.message));
  else
    lua_pushfstring(L, "%s: %s", fu->name, mw_strerror(fu->res.status));
  return lua_error(L);
}

/* Pushes the value of a settled future, or raises its failure. */
static void push_result(lua_State *L, const mwl_future *fu) {
  if (fu->res.status != MW_OK) raise_failure(L, fu);
  push_value(L, &fu->res);
}

static const char *state_name(const mwl_future *fu) {
  if (!fu->have) return "pending";
  switch (fu->res.status) {
  case MW_OK: return "ready";
  case MW_ECANCELED: return "cancelled";
  default: return "failed";
  }
}

/* f:await([timeout_s]): the value; raises the task's failure; nil, "timed out", "ETIMEDOUT". */
static int f_await(lua_State *L) {
  mwl_future *fu = mwl_check_future(L, 1);
  double timeout = -1;
  mw_result res;
  int rc;
  if (!lua_isnoneornil(L, 2)) {
    timeout = luaL_checknumber(L, 2);
    if (timeout != timeout) return luaL_argerror(L, 2, "timeout is NaN");
  }
  if (!fu->have) {
    memset(&res, 0, sizeof res);
    rc = await_core(fu, timeout, &res);
    settle(fu, rc, &res);
    mwl_interrupt_check(L); /* Ctrl-C: "interrupted"; the future can be awaited again */
    if (rc == MW_EINTR) return luaL_error(L, "interrupted");
    if (rc == MW_ETIMEDOUT) return mwl_fail(L, rc, NULL); /* "timed out", not a stale detail */
    if (!fu->have) return mwl_fail_rt(L, fu->r, rc == 0 ? MW_EAGAIN : rc);
  }
  push_result(L, fu);
  return 1;
}

/* f:done(): true once the future has completed (in any way); never blocks. */
static int f_done(lua_State *L) {
  mwl_future *fu = mwl_check_future(L, 1);
  int rc = poll_once(fu);
  if (rc != 0 && rc != MW_EAGAIN) return mwl_fail_rt(L, fu->r, rc);
  lua_pushboolean(L, rc == 0);
  return 1;
}

/* f:state(): "pending", "ready", "failed" or "cancelled"; never blocks. */
static int f_state(lua_State *L) {
  mwl_future *fu = mwl_check_future(L, 1);
  int rc = poll_once(fu);
  if (rc != 0 && rc != MW_EAGAIN) return mwl_fail_rt(L, fu->r, rc);
  lua_pushstring(L, state_name(fu));
  return 1;
}

/* f:cancel(): asks the task to stop (one that has not started never runs; a running one stops
 * at its next spawn or await; its children are cancelled too). true when the request was
 * delivered (the future was pending), false when it had completed already; nil, message, code
 * when it could not be sent (ECAPACITY: the inbox stayed full for spawn_timeout). */
static int f_cancel(lua_State *L) {
  mwl_future *fu = mwl_check_future(L, 1);
  int rc;
  if (fu->have) {
    lua_pushboolean(L, 0);
    return 1;
  }
  mwl_wait_enter(); /* waiting for a free inbox cell: Ctrl-C ends it */
  rc = mw_future_cancel(fu->r->rt, fu->f, fu->r->spawn_timeout);
  mwl_wait_leave();
  mwl_interrupt_check(L);
  if (rc == MW_EINTR) return luaL_error(L, "interrupted");
  if (rc < 0) return mwl_fail_rt(L, fu->r, rc);
  lua_pushboolean(L, rc == 1);
  return 1;
}

/* Shared by f:close() and __gc: gives up the host's hold once. */
static void future_release(mwl_future *fu) {
  if (fu->f == 0 || fu->r == NULL) return;
  if (fu->r->rt != NULL) mw_future_release(fu->r->rt, fu->f);
  fu->r->held--;
  fu->f = 0;
}

/* f:close(): gives up the host's hold (the task runs on); idempotent, harmless after the
 * runtime closed. The future cannot be awaited or passed to a task afterwards. */
static int f_close(lua_State *L) {
  mwl_future *fu = (mwl_future *)luaL_checkudata(L, 1, MWL_FUTURE_MT);
  future_release(fu);
  return 0;
}

static int f_gc(lua_State *L) {
  mwl_future *fu = (mwl_future *)luaL_checkudata(L, 1, MWL_FUTURE_MT);
  future_release(fu);
  if (fu->r != NULL) {
    mwl_runtime_unref(fu->r);
    fu->r = NULL;
  }
  return 0;
}

/* "moonwarp.future<fib#17 pending>"; the number counts the runtime's spawns from 1. */
static int f_tostring(lua_State *L) {
  mwl_future *fu = (mwl_future *)luaL_checkudata(L, 1, MWL_FUTURE_MT);
  const char *state;
  if (fu->r == NULL || fu->r->rt == NULL || fu->f == 0)
    state = "closed";
  else {
    poll_once(fu);
    state = state_name(fu);
  }
  lua_pushfstring(L, "moonwarp.future<%s#%d %s>", fu->name, (int)fu->id, state);
  return 1;
}

/* ---- join and any ---- */


/* A trailing number among join's or any's arguments is a timeout in seconds: it is removed
 * from the stack and returned; -1 (wait forever) when there is none. */
static double take_timeout(lua_State *L, const char *fname) {
  int n = lua_gettop(L);
  double t;
  if (n == 0 || lua_type(L, n) != LUA_TNUMBER) return -1;
  t = lua_tonumber(L, n);
  if (!(t >= 0)) luaL_error(L, "bad timeout to '%s' (a number of seconds >= 0 expected)", fname);
  lua_pop(L, 1);
  return t;
}

/* mw.join(f1, f2, ... [, timeout_s]): waits for all, then returns their values in order;
 * raises the first failure (in argument order) once all are done. When the timeout runs out
 * first: nil, "timed out", "ETIMEDOUT" (the futures stay usable). Ctrl-C raises "interrupted"
 * (the futures stay usable). */
int mwl_future_join(lua_State *L) {
  double timeout = take_timeout(L, "join");
  double deadline = timeout < 0 ? 0 : mw__now() + timeout;
  int n = lua_gettop(L), i, err = 0, err_i = 0, stop = 0;
  for (i = 1; i <= n; i++) mwl_check_future(L, i);
  mwl_wait_enter(); /* nothing raises until its leave */
  for (i = 1; i <= n && !stop; i++) {
    mwl_future *fu = (mwl_future *)lua_touserdata(L, i);
    mw_result res;
    int rc;
    if (fu->have) continue;
    memset(&res, 0, sizeof res);
    if (timeout < 0) {
      rc = mw_future_await(fu->r->rt, fu->f, -1, &res);
    } else {
      double left = deadline - mw__now();
      rc = mw_future_await(fu->r->rt, fu->f, left > 0 ? left : 0, &res);
    }
    if (rc == MW_EINTR || rc == MW_ETIMEDOUT) {
      stop = rc;
    } else if (!settle(fu, rc, &res) && err == 0) {
      err = rc == 0 ? MW_EAGAIN : rc;
      err_i = i;
    }
  }
  mwl_wait_leave();
  mwl_interrupt_check(L);
  if (stop == MW_EINTR) return luaL_error(L, "interrupted");
  if (stop == MW_ETIMEDOUT) return mwl_fail(L, MW_ETIMEDOUT, "timed out");
  for (i = 1; i <= n; i++) {
    mwl_future *fu = (mwl_future *)lua_touserdata(L, i);
    if (fu->have && fu->res.status != MW_OK) raise_failure(L, fu);
    if (i == err_i) {
      const char *msg = mw_runtime_last_error(fu->r->rt);
      return luaL_error(L, "%s#%d: %s", fu->name, (int)fu->id,
                        msg != NULL && msg[0] != '\0' ? msg : mw_strerror(err));
    }
  }
  luaL_checkstack(L, n, "too many results");
  for (i = 1; i <= n; i++) push_value(L, &((mwl_future *)lua_touserdata(L, i))->res);
  return n;
}

/* The wait of mw.any when its futures belong to several runtimes: polls each in turn and naps
 * between rounds (interrupt.c, mwl_nap). Returns 0 with *which set, or an MW_E* (the failing
 * future in *which). Runs inside a wait's scope: raises nothing. */
static int any_across(lua_State *L, int n, double timeout, int *which) {
  double start = mw__now();
  for (;;) {
    double now;
    int i;
    for (i = 1; i <= n; i++) {
      mwl_future *fu = (mwl_future *)lua_touserdata(L, i);
      int rc = poll_once(fu);
      if (rc == MW_EAGAIN) continue;
      *which = i;
      return rc;
    }
    if (*mwl_interrupt_flag()) return MW_EINTR;
    now = mw__now();
    if (timeout >= 0 && now - start >= timeout) return MW_ETIMEDOUT;
    mwl_nap(now - start, timeout >= 0 ? timeout - (now - start) : -1);
  }
}

/* mw.any(f1, f2, ... [, timeout_s]): index and value of the first future to complete (in
 * argument order when several are complete); raises its failure if it failed. Waits as
 * mw_future_await does (moonwarp.h, Waiting): spins or yields briefly, then naps; Ctrl-C raises
 * "interrupted" (the futures stay usable). */
int mwl_future_any(lua_State *L) {
  double timeout = take_timeout(L, "any");
  int n = lua_gettop(L), i, which = 0, rc, one_runtime = 1;
  mwl_runtime *r;
  mw_future *fs;
  mw_result res;
  if (n == 0) return luaL_argerror(L, 1, "future expected, got no value");
  for (i = 1; i <= n; i++) mwl_check_future(L, i);
  r = ((mwl_future *)lua_touserdata(L, 1))->r;
  for (i = 1; i <= n; i++) {
    mwl_future *fu = (mwl_future *)lua_touserdata(L, i);
    if (fu->have) { /* settled earlier: no wait */
      lua_pushinteger(L, i);
      push_result(L, fu);
      return 2;
    }
    if (fu->r != r) one_runtime = 0;
  }
  memset(&res, 0, sizeof res);
  if (one_runtime) {
    fs = (mw_future *)lua_newuserdata(L, (size_t)n * sizeof *fs);
    for (i = 0; i < n; i++) fs[i] = ((mwl_future *)lua_touserdata(L, i + 1))->f;
    mwl_wait_enter();
    rc = mw_future_await_any(r->rt, fs, n, timeout, &which, &res);
    mwl_wait_leave();
    which += 1;
    lua_pop(L, 1);
    if (rc == 0) settle((mwl_future *)lua_touserdata(L, which), 0, &res);
  } else {
    mwl_wait_enter();
    rc = any_across(L, n, timeout, &which);
    mwl_wait_leave();
  }
  mwl_interrupt_check(L);
  if (rc == MW_EINTR) return luaL_error(L, "interrupted");
  if (rc == MW_ETIMEDOUT) return mwl_fail(L, MW_ETIMEDOUT, "timed out");
  if (rc != 0) {
    mwl_future *fu = (mwl_future *)lua_touserdata(L, which >= 1 && which <= n ? which : 1);
    const char *msg = mw_runtime_last_error(fu->r->rt);
    return luaL_error(L, "%s#%d: %s", fu->name, (int)fu->id,
                      msg != NULL && msg[0] != '\0' ? msg : mw_strerror(rc));
  }
  lua_pushinteger(L, which);
  push_result(L, (mwl_future *)lua_touserdata(L, which));
  return 2;
}

static const luaL_Reg methods[] = {
    {"await", f_await}, {"done", f_done},     {"state", f_state},
    {"cancel", f_cancel}, {"close", f_close}, {NULL, NULL},
};

static const luaL_Reg metamethods[] = {
    {"__gc", f_gc},
    {"__tostring", f_tostring},
    {NULL, NULL},
};

void mwl_future_init(lua_State *L) {
  mwl_class(L, MWL_FUTURE_MT, "moonwarp.future", metamethods, methods, NULL);
}
