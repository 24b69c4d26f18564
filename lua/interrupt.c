/* interrupt.c - Ctrl-C for interactive use: a SIGINT handler that the REPL turns on, which
 * interrupts the await that is waiting (await, join, any, a spawn waiting for capacity) and,
 * while the REPL evaluates a line, the Lua code that is running.
 *
 * Modes (core._interrupts(mode), from the main thread):
 *   "off"   the handler that was there before is back; waits are not interruptible (default)
 *   "idle"  SIGINT only sets a flag: the REPL's line reader sees it (its poll() returns EINTR,
 *           the handler is installed without SA_RESTART) and drops the line
 *   "eval"  the flag, and a count hook that raises "interrupted" at the next Lua instruction
 *           (what luajit's own REPL does), so a Lua loop stops too. A trace compiled by the
 *           JIT runs no hooks (the REPL runs the lines typed with the JIT off for that reason);
 *           a second Ctrl-C while the first is not taken ends the process.
 * A wait in the binding, while the mode is not "off", waits in slices of MWL_WAIT_SLICE_S and
 * raises "interrupted" when the flag is set between two of them; the future stays usable (the
 * task runs on; f:cancel() stops it). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <signal.h>
#include <string.h>

#include "binding.h"

enum { MODE_OFF, MODE_IDLE, MODE_EVAL };

static volatile sig_atomic_t pending; /* a SIGINT not yet taken */
static volatile sig_atomic_t mode = MODE_OFF;
static lua_State *main_L;           /* where the hook goes: the main thread of the state */
static struct sigaction previous;   /* the handler before "idle"/"eval" */
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
  if (pending && mode == MODE_EVAL) {
    /* a second Ctrl-C while the first is not taken: the code running does not reach a hook
     * (a loop compiled by the JIT does not), so the process ends as it would without us */
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

int mwl_interruptible(void) { return mode != MODE_OFF; }

double mwl_wait_slice(double left) {
  if (mode == MODE_OFF) return left;
  return left < 0 || left > MWL_WAIT_SLICE_S ? MWL_WAIT_SLICE_S : left;
}

void mwl_interrupt_check(lua_State *L) {
  if (mode == MODE_OFF || !pending) return;
  pending = 0;
  unhook();
  luaL_error(L, "interrupted");
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
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: a blocked read or poll returns EINTR */
    main_L = L;
    main_thread = pthread_self();
    pending = 0;
    if (sigaction(SIGINT, &sa, &previous) != 0) return luaL_error(L, "cannot catch SIGINT");
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
