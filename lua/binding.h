/* binding.h - the types and cross-file helpers of the Lua binding (moonwarp.core).
 *
 * Ownership. A runtime is one mwl_runtime, allocated apart from any userdata and reference
 * counted: the runtime userdata holds one reference and every program, task, buffer and future
 * userdata of that runtime holds one more. mw_runtime_close() frees the core runtime together
 * with its programs and buffers, so after it `rt` is NULL and every object that points here
 * treats its own core pointer as dead without touching it. The mwl_runtime itself is freed by
 * whichever __gc drops the last reference, so the order in which the collector finalizes the
 * objects of one runtime does not matter.
 *
 * Reachability. Every userdata of a runtime has as its environment a table that holds the
 * runtime userdata (the runtime's anchor, shared by all of them; a program's environment is its
 * own table holding the anchor plus its cached task objects). So a live future, buffer,
 * program or task keeps its runtime open; the runtime is closed by rt:close() or by the
 * collector only once none of them is reachable.
 *
 * Errors. Misuse raises (luaL_error, the argument named); runtime failures return
 * nil, message, code where code is the MW_E* name ("ENODEV").
 */
#ifndef MWL_BINDING_H
#define MWL_BINDING_H

#include <stdint.h>

#include <lauxlib.h>
#include <lua.h>

#include "moonwarp.h"
#include "util.h" /* the core's helpers (mw__now), built into this module with the core */

#define MWL_RUNTIME_MT "moonwarp.runtime"
#define MWL_PROGRAM_MT "moonwarp.program"
#define MWL_TASK_MT "moonwarp.task"
#define MWL_BUFFER_MT "moonwarp.buffer"
#define MWL_FUTURE_MT "moonwarp.future"

#define MWL_CLOSED_MSG "runtime is closed"

/* The naps of a wait the binding makes itself (mw.any over several runtimes, mw.run, gc):
 * a sixteenth of the time waited (MW_NAP_FRACTION), within these bounds (moonwarp.h, Waiting). */
#define MWL_NAP_MIN_S 50e-6
#define MWL_NAP_MAX_S 1e-3

/* Host spawns wait this long for inbox or host-future capacity before they fail. */
#define MWL_SPAWN_TIMEOUT_S 10.0

typedef struct mwl_runtime {
  mw_runtime *rt;      /* NULL once closed */
  int refs;            /* userdata pointing here; freed at 0 */
  char backend[8];     /* "cuda" or "sim", kept for tostring after close */
  uint64_t next_id;    /* per-runtime future numbers, for tostring */
  uint64_t held;       /* futures spawned and not yet released */
  uint64_t held_at_gc; /* `held` after a spawn last forced a collection */
  uint64_t host_futures; /* the runtime's host futures (0: unknown) */
  double spawn_timeout; /* how long a spawn waits for capacity (option spawn_timeout) */
} mwl_runtime;

/* A program's Lua objects (the program and its task objects) share one count: when the last
 * is collected the program is let go of (mw_program_release). */
typedef struct mwl_progref {
  int refs;
  mwl_runtime *r;
  mw_program *p;
} mwl_progref;

typedef struct mwl_program {
  mwl_runtime *r;
  mw_program *p; /* owned by the core runtime; dead once r->rt is NULL */
  mwl_progref *ref;
} mwl_program;

typedef struct mwl_task {
  mwl_runtime *r;
  mw_program *p;
  int index; /* in the program */
  mwl_progref *ref;
} mwl_task;

typedef struct mwl_buffer {
  mwl_runtime *r;
  mw_buffer *b; /* NULL once closed; dead once r->rt is NULL */
  size_t count; /* elements */
  int etype;    /* index into the element-type table of buffer.c */
} mwl_buffer;

typedef struct mwl_future {
  mwl_runtime *r;
  mw_future f; /* 0 once released */
  uint64_t id;
  int have;      /* res holds the final result */
  mw_result res;
  char name[1]; /* the task's name; the userdata is allocated longer */
} mwl_future;

/* module.c */
int mwl_fail(lua_State *L, int err, const char *msg); /* pushes nil, msg, code; returns 3 */
/* Registers the metatable mt of a userdata type: the metamethods meta (__gc, __tostring...),
 * __index (the table of methods; with index too, index with that table as its upvalue 1; index
 * alone without methods), and __metatable = name, so scripts can neither see nor change it. */
void mwl_class(lua_State *L, const char *mt, const char *name, const luaL_Reg *meta,
               const luaL_Reg *methods, lua_CFunction index);
/* The userdata at idx when its metatable is mt's (luaL_testudata, which Lua 5.1 lacks), else
 * NULL; never raises. */
void *mwl_test_udata(lua_State *L, int idx, const char *mt);
int mwl_generate(lua_State *L);      /* mw.generate, compiler.c */
int mwl_compile_cubin(lua_State *L); /* mw.compile_cubin, compiler.c */
/* compiler.c: the compile options of the table at idx (defines, include_dirs, debug) into d;
 * the keys in also (NULL-terminated, may be NULL) are the caller's; any other key raises, as
 * does a value of the wrong shape, naming the option (argument idx). Pushes one value, which
 * holds the strings and arrays d points to: keep it on the stack until the compile is done. */
void mwl_compile_options(lua_State *L, int idx, mw_compile_desc *d, const char *const *also);
/* Raises a compile's MW_EINVAL that concerns an option ("option '...": moonwarp.h) as a bad
 * argument idx; returns otherwise. */
void mwl_option_error(lua_State *L, int idx, int rc, const char *msg);
int mwl_fail_rt(lua_State *L, mwl_runtime *r, int err);
const char *mwl_to_integer(lua_Number v, int bits, int is_signed, mw_value *out);
/* 64-bit integers as LuaJIT cdata (module.c): whether idx holds a cdata; its bits when it is an
 * int64_t or uint64_t one; a push that keeps integers beyond 2^53 exact. */
int mwl_is_cdata(lua_State *L, int idx);
int mwl_cdata_int64(lua_State *L, int idx, uint64_t *bits, int *is_signed);
void mwl_push_int64(lua_State *L, uint64_t bits, int is_signed);
const char *mwl_typename(lua_State *L, int idx);

/* runtime.c */
void mwl_runtime_init(lua_State *L);
int mwl_runtime_new(lua_State *L);
mwl_runtime *mwl_check_runtime(lua_State *L, int idx); /* raises if closed */
void mwl_runtime_ref(mwl_runtime *r);
void mwl_runtime_unref(mwl_runtime *r);
void mwl_runtime_check_open(lua_State *L, const mwl_runtime *r);
int mwl_poll_fds(lua_State *L); /* core._poll_fds() */

/* program.c */
void mwl_program_init(lua_State *L);
void mwl_program_push(lua_State *L, int anchor_idx, mwl_runtime *r, mw_program *p);
mwl_program *mwl_check_program(lua_State *L, int idx);
mwl_task *mwl_check_task(lua_State *L, int idx);

/* buffer.c */
void mwl_buffer_init(lua_State *L);
int mwl_buffer_new(lua_State *L); /* rt:buffer(type, n) */
int mwl_buffer_belongs(mwl_buffer *b, mwl_runtime *r); /* open and of runtime r */
mwl_buffer *mwl_check_buffer(lua_State *L, int idx);
mwl_buffer *mwl_test_buffer(lua_State *L, int idx); /* NULL if not a buffer; no check of state */

/* future.c */
void mwl_future_init(lua_State *L);
mwl_future *mwl_future_new(lua_State *L, int anchor_idx, mwl_runtime *r, const char *name);
mwl_future *mwl_check_future(lua_State *L, int idx);
mwl_future *mwl_test_future(lua_State *L, int idx);
int mwl_future_join(lua_State *L);
int mwl_future_any(lua_State *L);

/* interrupt.c: Ctrl-C during waits, and in the REPL */
int mwl_interrupts(lua_State *L);   /* core._interrupts(mode) */
int mwl_interrupted(lua_State *L);  /* core._interrupted() */
int mwl_interruptible_call(lua_State *L); /* core._interruptible(fn, ...) */
int mwl_nap_lua(lua_State *L);      /* core._nap(waited_s [, most_s]) */
void mwl_interrupt_hold(lua_State *L); /* the state holds the wait handler until it closes (luaopen) */
const volatile int *mwl_interrupt_flag(void); /* set while a Ctrl-C is not taken (the runtimes' flag) */
/* A wait's scope: Ctrl-C is caught between enter and leave (interrupt.c says how). Nothing may
 * raise a Lua error between the two: leave first, then mwl_interrupt_check. */
void mwl_wait_enter(void);
void mwl_wait_leave(void);
void mwl_interrupt_check(lua_State *L); /* raises "interrupted" when a SIGINT came */
void mwl_nap(double waited, double most); /* one nap of a wait of waited s, at most most s (< 0: no bound) */

#endif /* MWL_BINDING_H */
