/* runtime.c - the moonwarp.runtime type: options, lifetime, compile, buffers and stats. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "binding.h"

void mwl_runtime_ref(mwl_runtime *r) { r->refs++; }

void mwl_runtime_unref(mwl_runtime *r) {
  if (--r->refs > 0) return;
  free(r);
}

void mwl_runtime_check_open(lua_State *L, const mwl_runtime *r) {
  if (r == NULL || r->rt == NULL) luaL_error(L, MWL_CLOSED_MSG);
}

/* The userdata is a box holding the mwl_runtime, NULL until created and after __gc. */
static mwl_runtime **to_box(lua_State *L, int idx) {
  return (mwl_runtime **)luaL_checkudata(L, idx, MWL_RUNTIME_MT);
}

mwl_runtime *mwl_check_runtime(lua_State *L, int idx) {
  mwl_runtime *r = *to_box(L, idx);
  mwl_runtime_check_open(L, r);
  return r;
}

/* ---- options ---- */

static const char *const option_names[] = {"backend", "device",  "capacity", "host_futures",
                                           "workers", "frame_bytes", "spawn_timeout",
                                           "relaunch_timeout", "build", "stack_bytes", NULL};

/* The option value on the top of the stack as an integer in [0, max]; raises naming it. */
static lua_Number option_count(lua_State *L, const char *key, lua_Number max) {
  lua_Number v;
  if (lua_type(L, -1) != LUA_TNUMBER) {
    const char *msg = lua_pushfstring(L, "option '%s' must be a number, got %s", key,
                                      mwl_typename(L, -1));
    luaL_argerror(L, 1, msg);
  }
  v = lua_tonumber(L, -1);
  if (!(v >= 0 && v <= max && v == floor(v))) {
    const char *msg = lua_pushfstring(L, "option '%s' must be an integer in 0..%f, got %s", key,
                                      max, lua_tostring(L, -1));
    luaL_argerror(L, 1, msg);
  }
  return v;
}

/* The option value on the top of the stack as seconds >= 0; raises naming it. */
static double option_seconds(lua_State *L, const char *key) {
  lua_Number v = lua_type(L, -1) == LUA_TNUMBER ? lua_tonumber(L, -1) : -1;
  if (!(v >= 0 && v <= 1e9))
    luaL_argerror(L, 1, lua_pushfstring(L, "option '%s' must be a number of seconds >= 0, got %s",
                                        key, lua_type(L, -1) == LUA_TNUMBER ? lua_tostring(L, -1)
                                                                            : mwl_typename(L, -1)));
  return v;
}

/* The option value on the top of the stack as one of words (NULL-terminated; said as `said`);
 * raises naming it. The string stays valid: the options table holds it. */
static const char *option_word(lua_State *L, const char *key, const char *const *words,
                               const char *said) {
  const char *v = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
  for (int i = 0; v != NULL && words[i] != NULL; i++)
    if (strcmp(v, words[i]) == 0) return v;
  luaL_argerror(L, 1, lua_pushfstring(L, "option '%s' must be %s, got %s", key, said,
                                      v != NULL ? lua_pushfstring(L, "\"%s\"", v)
                                                : mwl_typename(L, -1)));
  return NULL;
}

static const char *const backends[] = {"auto", "cuda", "sim", NULL};
static const char *const builds[] = {"parts", "one_unit", "tiered", NULL};

static void read_options(lua_State *L, mw_runtime_desc *d, double *spawn_timeout) {
  memset(d, 0, sizeof *d);
  *spawn_timeout = MWL_SPAWN_TIMEOUT_S;
  if (lua_isnoneornil(L, 1)) return;
  if (lua_type(L, 1) != LUA_TTABLE) {
    const char *msg = lua_pushfstring(L, "table expected, got %s", mwl_typename(L, 1));
    luaL_argerror(L, 1, msg);
  }
  lua_pushnil(L);
  while (lua_next(L, 1)) {
    const char *key;
    int which = -1, i;
    if (lua_type(L, -2) == LUA_TSTRING) {
      key = lua_tostring(L, -2);
      for (i = 0; option_names[i] != NULL; i++)
        if (strcmp(key, option_names[i]) == 0) which = i;
    }
    if (which < 0) {
      lua_pushvalue(L, -2);
      lua_getglobal(L, "tostring"); /* keys of any type are named in the message */
      lua_insert(L, -2);
      lua_call(L, 1, 1);
      luaL_argerror(L, 1,
                    lua_pushfstring(L, "unknown option '%s' (options: backend, device, capacity, "
                                       "host_futures, workers, frame_bytes, spawn_timeout, "
                                       "relaunch_timeout, build, stack_bytes)",
                                    lua_tostring(L, -1)));
    }
    switch (which) {
    case 0: d->backend = option_word(L, "backend", backends, "\"auto\", \"cuda\" or \"sim\""); break;
    case 1: d->device = (int)option_count(L, "device", 2147483647.0); break;
    case 2: d->capacity = (uint32_t)option_count(L, "capacity", 4294967295.0); break;
    case 3: d->host_futures = (uint32_t)option_count(L, "host_futures", 4294967295.0); break;
    case 4: d->workers = (uint32_t)option_count(L, "workers", 4294967295.0); break;
    case 5: d->frame_bytes = (uint32_t)option_count(L, "frame_bytes", 4294967295.0); break;
    case 6: *spawn_timeout = option_seconds(L, "spawn_timeout"); break;
    case 7: d->relaunch_timeout = option_seconds(L, "relaunch_timeout"); break;
    case 8: d->build = option_word(L, "build", builds, "\"parts\", \"one_unit\" or \"tiered\""); break;
    case 9: d->stack_bytes = (uint32_t)option_count(L, "stack_bytes", 4294967295.0); break;
    }
    lua_pop(L, 1);
  }
}

/* ---- lifetime ---- */

/* mw.runtime{...}: the userdata is made first, empty, so that a failure halfway leaves an
 * object __gc handles; the anchor table (see binding.h) becomes its environment. */
int mwl_runtime_new(lua_State *L) {
  mw_runtime_desc desc;
  mwl_runtime **box, *r;
  const char *backend;
  double spawn_timeout;
  int rc;
  read_options(L, &desc, &spawn_timeout);
  box = (mwl_runtime **)lua_newuserdata(L, sizeof *box);
  *box = NULL;
  luaL_getmetatable(L, MWL_RUNTIME_MT);
  lua_setmetatable(L, -2);
  r = (mwl_runtime *)calloc(1, sizeof *r);
  if (r == NULL) return mwl_fail(L, MW_ENOMEM, NULL);
  rc = mw_runtime_create(&desc, &r->rt);
  if (rc == MW_EINVAL) { /* an option the core or the device refuses: misuse */
    free(r);
    return luaL_argerror(L, 1, mw_last_error());
  }
  if (rc < 0) {
    free(r);
    return mwl_fail(L, rc, mw_last_error());
  }
  r->refs = 1;
  r->spawn_timeout = spawn_timeout;
  mw_runtime_set_interrupt(r->rt, mwl_interrupt_flag()); /* Ctrl-C ends its waits (interrupt.c) */
  {
    mw_stats s;
    r->host_futures = mw_runtime_stats(r->rt, &s) == 0 ? s.host_futures : 0;
  }
  backend = mw_runtime_backend(r->rt);
  snprintf(r->backend, sizeof r->backend, "%s", backend != NULL ? backend : "?");
  *box = r;
  lua_createtable(L, 1, 0);
  lua_pushvalue(L, -2);
  lua_rawseti(L, -2, 1);
  lua_setfenv(L, -2);
  return 1;
}

/* Shared by rt:close() and __gc: closes the core runtime once, waiting up to deadline seconds
 * for running tasks (0: the default). Returns mw_runtime_close's code. */
static int runtime_close(mwl_runtime *r, double deadline) {
  int rc = 0;
  if (r == NULL || r->rt == NULL) return 0;
  rc = mw_runtime_close(r->rt, deadline);
  r->rt = NULL; /* its programs and buffers went with it */
  return rc;
}

/* rt:close([{deadline = s}]): a task still running after the deadline is abandoned (its
 * executor is torn down); then nil, message, "ETIMEDOUT". */
static int l_close(lua_State *L) {
  mwl_runtime *r = *to_box(L, 1);
  double deadline = 0;
  if (!lua_isnoneornil(L, 2)) {
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_pushnil(L);
    while (lua_next(L, 2)) { /* the only option is deadline */
      lua_pop(L, 1);
      if (lua_type(L, -1) != LUA_TSTRING || strcmp(lua_tostring(L, -1), "deadline") != 0) {
        lua_getglobal(L, "tostring");
        lua_pushvalue(L, -2);
        lua_call(L, 1, 1);
        return luaL_argerror(
            L, 2, lua_pushfstring(L, "unknown option '%s' (options: deadline)", lua_tostring(L, -1)));
      }
    }
    lua_getfield(L, 2, "deadline");
    if (!lua_isnil(L, -1)) {
      if (lua_type(L, -1) != LUA_TNUMBER || !(lua_tonumber(L, -1) > 0))
        return luaL_argerror(L, 2, "deadline must be a number of seconds > 0");
      deadline = lua_tonumber(L, -1);
    }
    lua_pop(L, 1);
  }
  int rc = runtime_close(r, deadline);
  if (rc < 0) return mwl_fail(L, rc, mw_last_error()); /* the runtime's own message is gone */
  lua_pushboolean(L, 1);
  return 1;
}

/* The collector (or the end of the script) closes a runtime nothing refers to any more. Tasks
 * still in flight then are given a second to finish; past it, closing waits for them up to the
 * default deadline, which is said on stderr first rather than waiting without a word. */
#define MWL_GC_GRACE_S 1.0
#define MWL_GC_DEADLINE_S 10.0
static void gc_close(mwl_runtime *r) {
  mw_stats st;
  double start = mw__now(), end = start + MWL_GC_GRACE_S;
  if (r == NULL || r->rt == NULL) return;
  for (;;) {
    memset(&st, 0, sizeof st);
    mw_runtime_poll(r->rt);
    if (mw_runtime_faulted(r->rt) || mw_runtime_stats(r->rt, &st) != 0 || st.in_flight == 0)
      break;
    if (mw__now() >= end) {
      fprintf(stderr,
              "moonwarp: closing a %s runtime that nothing refers to, with %llu task(s) still in "
              "flight: waiting up to %g s for them (rt:close{deadline = s} closes it sooner)\n",
              r->backend, (unsigned long long)st.in_flight, MWL_GC_DEADLINE_S);
      break;
    }
    mwl_nap(mw__now() - start, -1);
  }
  runtime_close(r, MWL_GC_DEADLINE_S);
}

static int l_gc(lua_State *L) {
  mwl_runtime **box = to_box(L, 1);
  if (*box != NULL) {
    gc_close(*box);
    mwl_runtime_unref(*box);
    *box = NULL;
  }
  return 0;
}

static int l_tostring(lua_State *L) {
  mwl_runtime *r = *to_box(L, 1);
  if (r == NULL || r->rt == NULL)
    lua_pushfstring(L, "moonwarp.runtime<%s closed>", r != NULL ? r->backend : "?");
  else
    lua_pushfstring(L, "moonwarp.runtime<%s %p>", r->backend, (void *)r->rt);
  return 1;
}

/* ---- programs ---- */

/* Strips Lua's chunkname prefixes: "@file" and "=name" both name the file as itself. */
static const char *chunk_filename(const char *name) {
  if (name != NULL && (name[0] == '@' || name[0] == '=')) return name + 1;
  return name;
}

/* Where a program given as a string literal sits in the calling script: when the caller's file
 * holds the source verbatim (a long string), its file name and first line, so compile errors
 * point into the script. 0 when it cannot be found. */
static int locate_in_caller(lua_State *L, const char *src, size_t len, char *file, size_t n) {
  lua_Debug ar;
  if (len < 8 || !lua_getstack(L, 1, &ar) || !lua_getinfo(L, "S", &ar) || ar.source[0] != '@')
    return 0;
  char *text;
  size_t flen;
  if (mw__read_file(ar.source + 1, &text, &flen)) return 0;
  const char *at = NULL;
  for (const char *p = text; p + len <= text + flen; ++p)
    if (*p == *src && memcmp(p, src, len) == 0) {
      if (at) { /* twice: ambiguous */
        free(text);
        return 0;
      }
      at = p;
    }
  int line = 0;
  if (at) {
    line = 1;
    for (const char *p = text; p < at; ++p) line += *p == '\n';
    snprintf(file, n, "%s", ar.source + 1);
  }
  free(text);
  return line;
}

/* Whether a compile reports on stderr what it compiles and how long it took: the option
 * verbose = true | false at optidx (0: none), else $MOONWARP_VERBOSE set to anything but "" or
 * "0". */
static int compile_verbose(lua_State *L, int optidx) {
  const char *env = getenv("MOONWARP_VERBOSE");
  int verbose = env && *env && strcmp(env, "0") != 0;
  if (!optidx) return verbose;
  lua_getfield(L, optidx, "verbose");
  if (!lua_isnil(L, -1)) {
    if (lua_type(L, -1) != LUA_TBOOLEAN)
      luaL_argerror(L, optidx, lua_pushfstring(L, "option 'verbose' must be true or false, got %s",
                                                  mwl_typename(L, -1)));
    verbose = lua_toboolean(L, -1);
  }
  lua_pop(L, 1);
  return verbose;
}

/* Compiles src; optidx is where the options table is (0: none). */
static int compile(lua_State *L, mwl_runtime *r, const char *src, size_t len, const char *name,
                   int optidx) {
  static const char *const own[] = {"verbose", NULL}; /* options of the binding's own */
  mw_compile_desc desc;
  mw_program *p = NULL;
  int rc;
  if (strlen(src) != len) return luaL_argerror(L, 2, "source contains a NUL byte");
  memset(&desc, 0, sizeof desc);
  if (optidx) mwl_compile_options(L, optidx, &desc, own); /* holds its strings on the stack */
  int verbose = compile_verbose(L, optidx);
  desc.filename = chunk_filename(name);
  char here[1024];
  if (name == NULL && (desc.first_line = locate_in_caller(L, src, len, here, sizeof here)) > 0)
    desc.filename = here;
  const char *what = desc.filename ? desc.filename : "a program";
  double t0 = mw__now();
  if (verbose) {
    fprintf(stderr, "moonwarp: compiling %s on %s...\n", what, mw_runtime_backend(r->rt));
    fflush(stderr);
  }
  rc = mw_program_compile(r->rt, src, &desc, &p);
  if (verbose) {
    if (rc < 0) fprintf(stderr, "moonwarp: %s: %s after %.2f s\n", what, mw_err_name(rc), mw__now() - t0);
    else fprintf(stderr, "moonwarp: %s ready in %.2f s\n", what, mw__now() - t0);
    fflush(stderr);
  }
  if (rc < 0 && optidx) mwl_option_error(L, optidx, rc, mw_runtime_last_error(r->rt));
  if (rc < 0) return mwl_fail_rt(L, r, rc);
  lua_getfenv(L, 1);
  mwl_program_push(L, lua_gettop(L), r, p);
  return 1;
}

/* rt:compile(source [, chunkname] [, options]) */
static int l_compile(lua_State *L) {
  mwl_runtime *r = mwl_check_runtime(L, 1);
  size_t len;
  const char *src = luaL_checklstring(L, 2, &len);
  int optidx = 0;
  const char *name = NULL;
  if (lua_type(L, 3) == LUA_TTABLE && lua_gettop(L) == 3) { /* rt:compile(source, options) */
    optidx = 3;
  } else {
    name = luaL_optstring(L, 3, NULL);
    if (!lua_isnoneornil(L, 4)) optidx = 4;
  }
  return compile(L, r, src, len, name, optidx);
}

/* rt:compile_file(path [, options]): the file's text, compiled with the path as its chunkname. */
static int l_compile_file(lua_State *L) {
  mwl_runtime *r = mwl_check_runtime(L, 1);
  const char *path = luaL_checkstring(L, 2);
  int optidx = lua_isnoneornil(L, 3) ? 0 : 3;
  if (optidx && lua_type(L, 3) != LUA_TTABLE) /* before the file is read */
    return luaL_argerror(L, 3, lua_pushfstring(L, "options must be a table, got %s",
                                               mwl_typename(L, 3)));
  char *text;
  size_t len;
  if (mw__read_file(path, &text, &len))
    return mwl_fail(L, MW_EIO, lua_pushfstring(L, "%s: %s", path, strerror(errno)));
  lua_pushlstring(L, text, len); /* held by the stack: a compile that raises leaks nothing */
  free(text);
  const char *src = lua_tostring(L, -1);
  return compile(L, r, src, len, path, optidx);
}

/* ---- stats ---- */

static void set_u64(lua_State *L, const char *key, uint64_t v) {
  lua_pushnumber(L, (lua_Number)v);
  lua_setfield(L, -2, key);
}

/* rt:stats(): the fields of mw_stats, and `tasks`: per task name {spawned, completed, failed,
 * cancelled, and instance_cycles for a bulk kind the device has timed}, keyed by
 * mw_runtime_kind_name ("name#kind" for a name defined twice). */
static int l_stats(lua_State *L) {
  mwl_runtime *r = mwl_check_runtime(L, 1);
  mw_stats s;
  uint64_t(*rows)[4];
  uint32_t *cycles;
  int rc, have, timed;
  uint32_t kind;
  memset(&s, 0, sizeof s);
  rc = mw_runtime_stats(r->rt, &s);
  if (rc < 0) return mwl_fail_rt(L, r, rc);
  lua_createtable(L, 0, 16);
  set_u64(L, "spawned", s.spawned);
  set_u64(L, "completed", s.completed);
  set_u64(L, "failed", s.failed);
  set_u64(L, "cancelled", s.cancelled);
  set_u64(L, "host_spawned", s.host_spawned);
  set_u64(L, "host_completed", s.host_completed);
  set_u64(L, "in_flight", s.in_flight);
  set_u64(L, "steals", s.steals);
  set_u64(L, "launches", s.launches);
  set_u64(L, "heartbeat", s.heartbeat);
  lua_pushnumber(L, s.uptime_s);
  lua_setfield(L, -2, "uptime_s");
  set_u64(L, "workers", s.workers);
  set_u64(L, "kinds", s.kinds);
  set_u64(L, "frames", s.frames);
  set_u64(L, "frames_in_use", s.frames_in_use);
  set_u64(L, "host_futures", s.host_futures);
  set_u64(L, "host_futures_held", s.host_futures_held);
  set_u64(L, "queued_inbox", s.queued_inbox);
  set_u64(L, "queued_global", s.queued_global);
  set_u64(L, "queued_local", s.queued_local);
  set_u64(L, "tier_swaps", s.tier_swaps);
  set_u64(L, "grids", s.grids);
  set_u64(L, "waits_future", s.waits_future);
  set_u64(L, "waits_inbox", s.waits_inbox);
  lua_pushnumber(L, s.waits_future_s);
  lua_setfield(L, -2, "waits_future_s");
  lua_pushnumber(L, s.waits_inbox_s);
  lua_setfield(L, -2, "waits_inbox_s");
  lua_pushnumber(L, s.heartbeat_age_s);
  lua_setfield(L, -2, "heartbeat_age_s");
  /* every kind's counters from one read */
  rows = (uint64_t(*)[4])lua_newuserdata(L, (s.kinds ? s.kinds : 1) * sizeof *rows);
  have = s.kinds && mw_runtime_kinds_stats(r->rt, 0, s.kinds, rows) == 0;
  lua_insert(L, -2); /* under the result */
  cycles = (uint32_t *)lua_newuserdata(L, (s.kinds ? s.kinds : 1) * sizeof *cycles);
  timed = have && mw_runtime_kinds_instance_cycles(r->rt, 0, s.kinds, cycles) == 0;
  lua_insert(L, -2);
  lua_newtable(L);
  for (kind = 0; kind < s.kinds && have; kind++) { /* the kinds of the programs it holds */
    const char *key;
    const uint64_t *row = rows[kind];
    if (mw_runtime_kind_name(r->rt, kind, &key) < 0) continue;
    lua_createtable(L, 0, 4);
    set_u64(L, "spawned", row[0]);
    set_u64(L, "completed", row[1]);
    set_u64(L, "failed", row[2]);
    set_u64(L, "cancelled", row[3]);
    if (timed && cycles[kind]) set_u64(L, "instance_cycles", cycles[kind]);
    lua_setfield(L, -2, key);
  }
  lua_setfield(L, -2, "tasks");
  return 1;
}

/* ---- traces ---- */

/* rt:trace_start([{events = n}]): records every run of a task body per worker until
 * rt:trace_stop; n is the buffer of each worker in runs (default 4096). Misuse (tracing already
 * on, a bad option) raises; a failure to allocate returns nil, message, code. */
static int l_trace_start(lua_State *L) {
  mwl_runtime *r = mwl_check_runtime(L, 1);
  uint32_t events = 0;
  if (!lua_isnoneornil(L, 2)) {
    if (lua_type(L, 2) != LUA_TTABLE)
      return luaL_argerror(L, 2, lua_pushfstring(L, "table expected, got %s", mwl_typename(L, 2)));
    lua_pushnil(L);
    while (lua_next(L, 2)) {
      if (lua_type(L, -2) != LUA_TSTRING || strcmp(lua_tostring(L, -2), "events") != 0) {
        lua_getglobal(L, "tostring");
        lua_pushvalue(L, -3);
        lua_call(L, 1, 1);
        return luaL_argerror(L, 2, lua_pushfstring(L, "unknown option '%s' (options: events)",
                                                   lua_tostring(L, -1)));
      }
      lua_Number v = lua_type(L, -1) == LUA_TNUMBER ? lua_tonumber(L, -1) : -1;
      if (!(v >= 1 && v <= MW_TRACE_MAX_EVENTS_PER_WORKER && v == floor(v)))
        return luaL_argerror(
            L, 2,
            lua_pushfstring(L, "option 'events' must be an integer in 1..%d, got %s",
                            (int)MW_TRACE_MAX_EVENTS_PER_WORKER,
                            lua_type(L, -1) == LUA_TNUMBER ? lua_tostring(L, -1)
                                                           : mwl_typename(L, -1)));
      events = (uint32_t)v;
      lua_pop(L, 1);
    }
  }
  int rc = mw_trace_start(r->rt, events);
  if (rc == MW_EINVAL) return luaL_error(L, "%s", mw_runtime_last_error(r->rt));
  if (rc < 0) return mwl_fail_rt(L, r, rc);
  lua_pushboolean(L, 1);
  return 1;
}

/* rt:trace_stop(path): ends the recording and writes it to path as a Chrome trace event JSON
 * file (open it in Perfetto or chrome://tracing). Returns the number of runs written and the
 * number dropped because a worker's buffer was full. A path that cannot be written returns nil,
 * message, "EIO" with tracing still on; stopping when tracing is not on raises. */
static int l_trace_stop(lua_State *L) {
  mwl_runtime *r = mwl_check_runtime(L, 1);
  const char *path = luaL_checkstring(L, 2);
  mw_trace_stats st;
  int rc = mw_trace_stop(r->rt, path, &st);
  if (rc == MW_EINVAL) return luaL_error(L, "%s", mw_runtime_last_error(r->rt));
  if (rc < 0) return mwl_fail_rt(L, r, rc);
  lua_pushnumber(L, (lua_Number)st.events);
  lua_pushnumber(L, (lua_Number)st.dropped);
  return 2;
}

/* ---- event loops ---- */

/* The runtimes whose fd was asked for (weak keys): mw.poll() polls them, which drains their fd
 * even when no coroutine waits. */
#define MWL_FD_RUNTIMES "moonwarp.fd_runtimes"

/* rt:fd(): a file descriptor that becomes readable when completions are pending, for an event
 * loop (luv's uv.new_poll, cqueues, poll(2)). When it is readable, call mw.poll() or rt:poll()
 * (or await), which drains it. The runtime owns it (closed with the runtime). The first call
 * starts the watcher thread that makes it readable (moonwarp.h, mw_runtime_fd, says how soon). */
static int l_fd(lua_State *L) {
  mwl_runtime *r = mwl_check_runtime(L, 1);
  int fd = -1, rc = mw_runtime_fd(r->rt, &fd);
  if (rc < 0) return mwl_fail_rt(L, r, rc);
  lua_getfield(L, LUA_REGISTRYINDEX, MWL_FD_RUNTIMES);
  lua_pushvalue(L, 1);
  lua_pushboolean(L, 1);
  lua_rawset(L, -3);
  lua_pop(L, 1);
  lua_pushinteger(L, fd);
  return 1;
}

/* rt:poll(): processes the completions that have arrived (and drains rt:fd()); never blocks.
 * Returns how many it processed. */
static int l_poll(lua_State *L) {
  mwl_runtime *r = mwl_check_runtime(L, 1);
  lua_pushinteger(L, mw_runtime_poll(r->rt));
  return 1;
}

/* core._poll_fds(): rt:poll() on every open runtime whose fd was asked for. */
int mwl_poll_fds(lua_State *L) {
  lua_getfield(L, LUA_REGISTRYINDEX, MWL_FD_RUNTIMES);
  lua_pushnil(L);
  while (lua_next(L, -2)) {
    mwl_runtime **box = (mwl_runtime **)lua_touserdata(L, -2);
    if (box != NULL && *box != NULL && (*box)->rt != NULL) mw_runtime_poll((*box)->rt);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  return 0;
}

/* ---- fields and methods ---- */

/* __index: `backend` and `faulted` are fields, readable after close; the rest are methods.
 * faulted is false, or the code ("EFAULT") of the fault that broke the runtime: a faulted
 * runtime fails whatever it is asked and must be closed. */
static int l_index(lua_State *L) {
  mwl_runtime *r = *to_box(L, 1);
  const char *key = lua_tostring(L, 2);
  if (key != NULL && strcmp(key, "backend") == 0) {
    if (r == NULL) return 0;
    lua_pushstring(L, r->backend);
    return 1;
  }
  if (key != NULL && strcmp(key, "faulted") == 0) {
    int f = r != NULL && r->rt != NULL ? mw_runtime_faulted(r->rt) : 0;
    if (f == 0)
      lua_pushboolean(L, 0);
    else
      lua_pushstring(L, mw_err_name(f));
    return 1;
  }
  lua_pushvalue(L, 2);
  lua_rawget(L, lua_upvalueindex(1));
  return 1;
}

static const luaL_Reg methods[] = {
    {"compile", l_compile}, {"compile_file", l_compile_file}, {"buffer", mwl_buffer_new},
    {"stats", l_stats},     {"close", l_close},               {"trace_start", l_trace_start},
    {"trace_stop", l_trace_stop}, {"fd", l_fd}, {"poll", l_poll}, {NULL, NULL},
};

static const luaL_Reg metamethods[] = {
    {"__gc", l_gc},
    {"__tostring", l_tostring},
    {NULL, NULL},
};

void mwl_runtime_init(lua_State *L) {
  mwl_class(L, MWL_RUNTIME_MT, "moonwarp.runtime", metamethods, methods, l_index);
  lua_newtable(L); /* MWL_FD_RUNTIMES, weak keys: it keeps no runtime open */
  lua_createtable(L, 0, 1);
  lua_pushliteral(L, "k");
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
  lua_setfield(L, LUA_REGISTRYINDEX, MWL_FD_RUNTIMES);
}
