/* interrupt.c - Ctrl-C (SIGINT): while a script waits (await, join, any, mw.run, a spawn waiting
 * for capacity) it raises "interrupted" there at once; in the REPL it also drops the line being
 * typed and stops the Lua code a line runs.
 *
 * Waits. A wait in the binding is a scope (mwl_wait_enter / mwl_wait_leave, nested scopes count
 * once). The outermost scope makes sure this file's wait handler is the one installed (one
 * sigaction call that reads the disposition; a second that installs the handler only when another
 * took its place) and marks the thread as waiting; the leave only clears the mark, so a round
 * trip from Lua costs one system call, not three. The handler stays installed between waits and
 * there does what the disposition it replaced would do: it calls that handler (in a script
 * luajit runs, luajit's own, which raises "interrupted!" at the next Lua instruction, a point a
 * wait in C never reaches, and leaves the default behind) or, for the default, ends the process;
 * a script that ignores SIGINT (SIG_IGN) is left alone. It takes the replaced disposition's
 * flags (SA_RESTART as before outside waits; the waits' naps are never restarted). When the last
 * Lua state that loaded this code closes, the replaced disposition is put back, so no handler is
 * left pointing into unloaded code. In a wait the handler sets a flag, the runtimes' interrupt
 * flag (mw_runtime_set_interrupt): the core's wait returns MW_EINTR before its next nap, at once
 * since the signal cuts the nap short; the binding then raises "interrupted" after its scope
 * ended. The future stays valid (the task runs on; f:cancel() stops it) and can be awaited
 * again. A second Ctrl-C while the first is not taken (Lua code that mw.run resumed runs on
 * without waiting) ends the process, as it would without moonwarp.
 *
 * REPL modes (core._interrupts(mode), from the main thread):
 *   "off"   the handler that was there before is back; only the waits' scopes catch SIGINT
 *   "idle"  SIGINT only sets the flag: the REPL's line reader sees it (its poll() returns EINTR,
 *           the handler is installed without SA_RESTART) and drops the line
 *   "eval"  the flag, and a count hook that raises "interrupted" at the next Lua instruction
 *           (what luajit's own REPL does), so a Lua loop stops too. A trace compiled by the
 *           JIT runs no hooks (the REPL runs the lines typed with the JIT off for that reason);
 *           a second Ctrl-C while the first is not taken ends the process.
 * While the mode is not "off" the waits' scopes install nothing: the REPL's handler is there. */
#define _XOPEN_SOURCE 700 /* SA_ONSTACK besides POSIX 2008 */
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include "binding.h"

enum { MODE_OFF, MODE_IDLE, MODE_EVAL };

_Static_assert(sizeof(sig_atomic_t) == sizeof(int), "the core reads the flag as an int");

static volatile sig_atomic_t pending; /* a SIGINT not yet taken */
static volatile sig_atomic_t mode = MODE_OFF;
static volatile sig_atomic_t wait_caught; /* a wait's scope is open, its handler installed */
static lua_State *main_L;           /* where the hook goes: the main thread of the state */
static struct sigaction previous;   /* the handler before "idle"/"eval" */
static struct sigaction chained;    /* the disposition the wait handler replaced: run outside waits */
static int holders;                 /* Lua states that loaded this code (mwl_interrupt_hold) */
static int wait_depth;              /* nested wait scopes */
static pthread_t main_thread;       /* the thread that runs Lua and waits */

static void hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  lua_sethook(L, NULL, 0, 0);
  pending = 0;
  luaL_error(L, "interrupted");
}

static void on_sigint(int sig) {
  if (!pthread_equal(pthread_self(), main_thread)) {
    /* the kernel picked another thread (a sim worker, a driver thread): the one to interrupt
     * is the one blocked in read/poll/await */
    pthread_kill(main_thread, sig);
    return;
  }
  if (pending && (mode == MODE_EVAL || (mode == MODE_OFF && wait_caught))) {
    /* a second Ctrl-C while the first is not taken: the code running does not reach a hook or
     * a wait (a loop compiled by the JIT does not), so the process ends as it would without us */
    signal(SIGINT, SIG_DFL);
    raise(SIGINT);
    return;
  }
  pending = 1;
  /* lua_sethook may be called from a signal handler (the Lua manual says so; luajit does it) */
  if (mode == MODE_EVAL && main_L != NULL)
    lua_sethook(main_L, hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
}

/* Removes the hook if it is this file's (a debugger's hook stays). */
static void unhook(void) {
  if (main_L != NULL && lua_gethook(main_L) == hook) lua_sethook(main_L, NULL, 0, 0);
}

/* Outside waits: what the disposition the wait handler replaced would have done. */
static void chain(int sig, siginfo_t *info, void *ctx) {
  struct sigaction c = chained;
  if (c.sa_flags & SA_RESETHAND) signal(sig, SIG_DFL); /* a one-shot handler, as the kernel would */
  if (c.sa_flags & SA_SIGINFO) {
    c.sa_sigaction(sig, info, ctx);
  } else if (c.sa_handler == SIG_DFL) {
    signal(sig, SIG_DFL);
    raise(sig); /* delivered when this handler returns: the process ends */
  } else if (c.sa_handler != SIG_IGN) {
    c.sa_handler(sig);
  }
}

/* The wait handler (mwl_wait_enter installs it, it stays between waits). */
static void on_sigint_wait(int sig, siginfo_t *info, void *ctx) {
  if (mode == MODE_OFF && !wait_caught) {
    chain(sig, info, ctx);
    return;
  }
  on_sigint(sig);
}

static int is_wait_handler(const struct sigaction *sa) {
  return (sa->sa_flags & SA_SIGINFO) && sa->sa_sigaction == on_sigint_wait;
}

static int catch_sigint(struct sigaction *was) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0; /* no SA_RESTART: a blocked read, poll or nap returns EINTR */
  return sigaction(SIGINT, &sa, was);
}

const volatile int *mwl_interrupt_flag(void) { return (const volatile int *)&pending; }

void mwl_wait_enter(void) {
  struct sigaction cur;
  if (wait_depth++ > 0 || mode != MODE_OFF) return;
  if (sigaction(SIGINT, NULL, &cur) != 0) return;
  if (!is_wait_handler(&cur)) {
    struct sigaction sa;
    if (!(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_IGN) return; /* ignored: it stays so */
    if (holders == 0) return; /* no state holds this code: nothing would put the disposition back */
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigint_wait;
    sa.sa_mask = cur.sa_mask;
    sa.sa_flags = SA_SIGINFO | (cur.sa_flags & (SA_RESTART | SA_ONSTACK));
    chained = cur; /* before the handler that reads it is installed */
    if (sigaction(SIGINT, &sa, NULL) != 0) return;
  }
  main_thread = pthread_self();
  pending = 0;
  wait_caught = 1;
}

void mwl_wait_leave(void) {
  if (wait_depth > 0) --wait_depth;
  if (wait_depth > 0 || !wait_caught) return;
  wait_caught = 0; /* the handler stays: outside waits it does what the replaced disposition did */
}

/* The anchor's __gc: the last state that held this code puts back what the handlers replaced. */
static int interrupt_release(lua_State *L) {
  struct sigaction cur;
  (void)L;
  if (holders > 0 && --holders > 0) return 0;
  if (mode != MODE_OFF) { /* a REPL that did not switch back */
    mode = MODE_OFF;
    main_L = NULL;
    sigaction(SIGINT, &previous, NULL);
  }
  if (sigaction(SIGINT, NULL, &cur) == 0 && is_wait_handler(&cur)) sigaction(SIGINT, &chained, NULL);
  return 0;
}

void mwl_interrupt_hold(lua_State *L) {
  static const char key = 0; /* the registry's key: this variable's address */
  lua_pushlightuserdata(L, (void *)&key);
  lua_rawget(L, LUA_REGISTRYINDEX);
  int held = !lua_isnil(L, -1);
  lua_pop(L, 1);
  if (held) return;
  lua_pushlightuserdata(L, (void *)&key);
  lua_newuserdata(L, 1);
  lua_newtable(L);
  lua_pushcfunction(L, interrupt_release);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  lua_rawset(L, LUA_REGISTRYINDEX);
  ++holders;
}

void mwl_interrupt_check(lua_State *L) {
  if (!pending) return;
  pending = 0;
  unhook();
  luaL_error(L, "interrupted");
}

void mwl_nap(double waited, double most) {
  double nap = waited / MW_NAP_FRACTION;
  if (nap < MWL_NAP_MIN_S) nap = MWL_NAP_MIN_S;
  if (nap > MWL_NAP_MAX_S) nap = MWL_NAP_MAX_S;
  if (most >= 0 && nap > most) nap = most;
  if (nap <= 0) return;
  mw__nap_ns((long)(nap * 1e9)); /* a signal (Ctrl-C) cuts it short */
}

/* core._nap(waited_s [, most_s]): one nap of a wait that has lasted waited_s (a sixteenth of it,
 * 50 us to 1 ms, at most most_s); raises "interrupted" on Ctrl-C. For the Lua layer's waits. */
int mwl_nap_lua(lua_State *L) {
  double waited = luaL_checknumber(L, 1), most = luaL_optnumber(L, 2, -1);
  mwl_wait_enter();
  if (!pending) mwl_nap(waited, most);
  mwl_wait_leave();
  if (pending) { /* without a position: core._interruptible gives it its caller's */
    pending = 0;
    unhook();
    lua_pushliteral(L, "interrupted");
    return lua_error(L);
  }
  return 0;
}

/* core._interruptible(fn, ...): fn(...) inside a wait's scope (Ctrl-C raises "interrupted" at the
 * waits in it); returns its results, raises its error after the scope ended: a bare
 * "interrupted" (core._nap's) at the position of the line that called the Lua function calling
 * this one (mw.run's caller). fn must not yield. */
int mwl_interruptible_call(lua_State *L) {
  int base, rc;
  luaL_checktype(L, 1, LUA_TFUNCTION);
  base = lua_gettop(L);
  mwl_wait_enter();
  rc = lua_pcall(L, base - 1, LUA_MULTRET, 0);
  mwl_wait_leave();
  if (rc == 0 && pending) { /* one that came after the last wait in fn */
    pending = 0;
    unhook();
    lua_pushliteral(L, "interrupted");
    rc = LUA_ERRRUN;
  }
  if (rc != 0) {
    if (lua_type(L, -1) == LUA_TSTRING && strcmp(lua_tostring(L, -1), "interrupted") == 0) {
      luaL_where(L, 2);
      lua_pushliteral(L, "interrupted");
      lua_concat(L, 2);
    }
    return lua_error(L);
  }
  return lua_gettop(L);
}

/* core._interrupts(mode): sets the mode ("off", "idle", "eval"); returns the one before.
 * Switching mode keeps a pending interrupt's flag for _interrupted(); entering "eval" with one
 * pending raises it at once. */
int mwl_interrupts(lua_State *L) {
  static const char *const names[] = {"off", "idle", "eval", NULL};
  int m = luaL_checkoption(L, 1, NULL, names);
  int was = mode;
  if (m != MODE_OFF && !lua_pushthread(L))
    return luaL_error(L, "interrupts are set from the main thread, not a coroutine");
  lua_pop(L, 1);
  if (m != MODE_OFF && was == MODE_OFF) {
    main_L = L;
    main_thread = pthread_self();
    pending = 0;
    if (catch_sigint(&previous) != 0) return luaL_error(L, "cannot catch SIGINT");
  }
  mode = m;
  unhook();
  /* a Ctrl-C that came after the line was entered and before it runs interrupts it */
  if (m == MODE_EVAL && pending && main_L != NULL)
    lua_sethook(main_L, hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
  if (m == MODE_OFF && was != MODE_OFF) {
    sigaction(SIGINT, &previous, NULL);
    main_L = NULL;
    pending = 0;
  }
  lua_pushstring(L, names[was]);
  return 1;
}

/* core._interrupted(): whether a SIGINT came since the last call (and takes it). */
int mwl_interrupted(lua_State *L) {
  int p = pending != 0;
  pending = 0;
  lua_pushboolean(L, p);
  return 1;
}
