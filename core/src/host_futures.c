/* host_futures.c - the host channel of a runtime: spawns through the inbox ring, host futures and
 * their slots, the completion ring, and the waits of blocking calls. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "util.h"

/* ---- completions and host futures ----------------------------------------------------------- */

/* Whether the device has closed host slot s since the host read its record (protocol.h,
 * completion ring, Closing); a faulted device never will, and nothing of it runs again. */
static int hslot_closed(mw_runtime *rt, uint32_t s) {
  mw__hslot *h = &rt->hs[s];
  if (!h->closing) return 1;
  if (!rt->faulted &&
      atomic_load_explicit((_Atomic uint32_t *)&rt->closed[s], memory_order_acquire) != h->gen)
    return 0;
  h->closing = 0;
  rt->nclosing_live--;
  return 1;
}

/* Host slot s, let go of, to the free list; by way of the closing ring while it is closing (a
 * spawn must not get it before the device closed it). Its closed word is not read here: the
 * device closes a slot microseconds after its record, which the host has only just read, so
 * the ring's reader (take_closed) is the one to look. */
void mw__hslot_free(mw_runtime *rt, uint32_t s) {
  rt->hs[s].live = 0;
  if (rt->hs[s].closing && !rt->faulted) {
    rt->closing[(rt->closing_head + rt->nclosing++) % rt->host_slots] = s;
  } else {
    hslot_closed(rt, s); /* closed, or a faulted device's: counted so */
    rt->hfree[rt->nhfree++] = s;
  }
}

/* The slots of the closing ring that the device has closed, oldest first, to the free list. */
static void take_closed(mw_runtime *rt) {
  while (rt->nclosing && hslot_closed(rt, rt->closing[rt->closing_head])) {
    rt->hfree[rt->nhfree++] = rt->closing[rt->closing_head];
    rt->closing_head = (rt->closing_head + 1) % rt->host_slots;
    rt->nclosing--;
  }
}

/* Returns host slot s to the free list once nothing holds it: it is complete, the script let go
 * of it, no host spawn it was given to is pending, and, if it was ever given to a task, the
 * device says its tasks hold it no more (hrefs, read by sweep_deferred; protocol.h, inbox). */
void mw__hslot_settle(mw_runtime *rt, uint32_t s) {
  mw__hslot *h = &rt->hs[s];
  if (!h->live || h->held || h->state == MW_ST_PENDING || h->holders || h->deferred) return;
  if (h->given) {
    h->deferred = 1;
    rt->ndeferred++;
    return;
  }
  mw__hslot_free(rt, s);
}

/* Frees the deferred host slots whose device holders have all let go: one read of hrefs. */
static void sweep_deferred(mw_runtime *rt) {
  if (!rt->ndeferred || rt->faulted) return;
  uint32_t *refs = malloc((size_t)rt->host_slots * sizeof *refs);
  if (!refs) return;
  rt->last_sweep = mw__now();
  if (rt->ops->d2h(rt->be, refs, rt->hrefs_dev, (size_t)rt->host_slots * sizeof *refs) == 0)
    for (uint32_t s = 0; s < rt->host_slots; ++s) {
      mw__hslot *h = &rt->hs[s];
      if (!h->deferred || refs[s]) continue;
      h->deferred = 0;
      h->given = 0;
      rt->ndeferred--;
      mw__hslot_free(rt, s);
    }
  free(refs);
}

/* The host futures spawn h was given let go of it: it has completed. */
static void release_holds(mw_runtime *rt, mw__hslot *h) {
  for (uint32_t i = 0; i < h->nholds; ++i) {
    mw__hslot *g = &rt->hs[h->holds[i]];
    if (g->holders) g->holders--;
    mw__hslot_settle(rt, h->holds[i]);
  }
  free(h->holds);
  h->holds = NULL;
  h->nholds = 0;
}

/* ---- the completion ring's records (protocol.h, LL words; completion ring) ----------------- */
/* Reads the completion of ticket t into *r if it has arrived whole; returns whether it has. */
int mw__comp_read(const mw_runtime *rt, uint64_t t, mw__comp_rec *r) {
  const mw_comp_cell *c = &rt->comp[t & (rt->comp_cap - 1)];
  uint32_t d[MW_COMP_WORDS], flag = MW_LL_FLAG(t);
  for (unsigned k = 0; k < MW_COMP_WORDS; ++k) {
    uint64_t w = atomic_load_explicit((_Atomic uint64_t *)&c->w[k], memory_order_acquire);
    if ((uint32_t)(w >> 32) != flag) return 0;
    d[k] = (uint32_t)w;
  }
  r->fut = d[MW_CO_W_FUT] | (uint64_t)d[MW_CO_W_FUT + 1] << 32;
  r->value = d[MW_CO_W_VALUE] | (uint64_t)d[MW_CO_W_VALUE + 1] << 32;
  r->status = d[MW_CO_W_STATUS] & 255u;
  r->rtype = (d[MW_CO_W_STATUS] >> 8) & 255u;
  r->kind = d[MW_CO_W_KIND];
  r->code = (int32_t)d[MW_CO_W_CODE];
  return 1;
}

static void set_result(mw_runtime *rt, mw__hslot *h, const mw__comp_rec *c, const char *cmsg) {
  mw_result *r = &h->res;
  memset(r, 0, sizeof *r);
  r->status = c->status == MW_ST_OK ? MW_OK : c->status == MW_ST_CANCELLED ? MW_ECANCELED
                                                                           : MW_EFAILED;
  r->code = c->code;
  mw_type ty = c->kind < MW_MAX_KINDS && !h->bulk ? (mw_type)rt->kind_ret[c->kind] : MW_T_VOID;
  r->type = ty;
  r->value.u = c->value;
  switch (c->rtype) { /* normalise to the public union: .i, .u or .d */
    case MW_RT_I32: r->value.i = (int32_t)(uint32_t)c->value; break;
    case MW_RT_U32: r->value.u = (uint32_t)c->value; break;
    case MW_RT_F32: {
      union { uint32_t u; float f; } x = {(uint32_t)c->value};
      r->value.d = x.f;
      break;
    }
    default: break;
  }
  if (r->status != MW_OK) {
    char msg[MW_MSG_BYTES + 1];
    memcpy(msg, cmsg, MW_MSG_BYTES);
    msg[MW_MSG_BYTES] = 0;
    /* the device keeps MW_MSG_BYTES - 1 characters of a message (protocol.h): one that fills
     * them was cut there (or is exactly that long), and says so */
    size_t n = strlen(msg);
    int cut = n == MW_MSG_BYTES - 1 && strcmp(msg + n - 3, "...") != 0;
    snprintf(r->message, sizeof r->message, "%s%s", msg, cut ? "..." : "");
    if (!cut) mw__user_message_line(rt, c->kind, r->message, sizeof r->message);
  }
}


/* Processes the completions that have arrived; returns how many. */
static int poll_ring(mw_runtime *rt) {
  int n = 0;
  if (!rt->comp) return 0;
  for (;;) {
    mw__comp_rec rec, *c = &rec;
    if (!mw__comp_read(rt, rt->comp_head, c)) break;
    uint32_t s = MW_FUT_SLOT(c->fut), gen = MW_FUT_GEN(c->fut);
    if (s < rt->host_slots && rt->hs[s].gen == gen && rt->hs[s].state == MW_ST_PENDING) {
      mw__hslot *h = &rt->hs[s];
      set_result(rt, h, c, rt->comp_msg + (size_t)(rt->comp_head & (rt->comp_cap - 1)) * MW_MSG_BYTES);
      h->state = c->status ? (uint8_t)c->status : MW_ST_OK;
      h->closing = 1; /* until the device's closed word says so (protocol.h, Closing) */
      rt->nclosing_live++;
      rt->in_flight--;
      rt->host_completed++;
      release_holds(rt, h);
      mw__hslot_settle(rt, s);
    }
    rt->comp_head++;
    ++n;
  }
  if (rt->watch) {
    /* where it stands first, then the drain: a watcher that finds the fd drained reads a head
     * past what was processed here (watch.c) */
    if (n) atomic_store(&rt->comp_head_pub, rt->comp_head);
    mw__watch_drain(rt);
  }
  return n;
}

/* The public poll also asks after the executor's health (at most every 200 us): an event loop
 * that only polls learns of a fault here (it fails every pending future). */
MW_API int mw_runtime_poll(mw_runtime *rt) {
  if (!rt) return 0;
  int n = poll_ring(rt);
  mw__check_alive(rt);
  return n;
}

/* ---- waiting (moonwarp.h, Waiting) --------------------------------------------------------
 * A blocking call looks for what it waits for, and between two looks calls wait_step: spins
 * first on cuda (a round trip takes tens of microseconds), yields a few times on sim (the
 * executor's threads need the CPU), then naps for a sixteenth of the time waited so far, from
 * WAIT_NAP_* up to WAIT_NAP_MAX_S: a long wait wakes its thread about a thousand times a second.
 * A wait for capacity (a free inbox cell or host future) naps from the start: the device frees
 * capacity at its own pace with thousands of spawns queued ahead, so a spin would only burn the
 * host's CPU once per spawn, and a nap lets several cells free up for the spawns that follow. */
/* 500 us: a device pipeline of a few stages or a fan-out answers in 100-400 us; a nap there
 * oversleeps by the kernel's timer slack (50 us by default) and cost the H200's 3-stage
 * pipeline 60 us at batch 2 with a 100 us spin (bench/NOTES.md). Long waits spin once. The naps
 * (mw__nap_ns) are a sixteenth of the time waited so far, with a 1 us timer slack: a wait that
 * ends after the spin is seen at most ~6 % late, where it was 12.5 % and 50 us (a 520 us bulk
 * task measured 620 us on the H200). */
#define WAIT_SPIN_CUDA_S 500e-6
#define WAIT_YIELDS_SIM 20u
#define WAIT_NAP_CUDA_S 20e-6
#define WAIT_NAP_SIM_S 50e-6
#define WAIT_NAP_MAX_S 1e-3
/* how long the host waits for the device to close the host futures it saw complete */
#define CLOSE_WAIT_S 10.0

typedef struct wait_state {
  double timeout, start, end;
  unsigned rounds;
  int spin; /* spin (cuda) or yield (sim) before the naps */
} wait_state;

/* A wait of up to timeout_s seconds (< 0: forever); its clock starts at the first step, so a
 * call that finds what it wants at once never reads the clock. */
static void wait_begin(wait_state *w, double timeout_s, int spin) {
  w->timeout = timeout_s;
  w->start = w->end = 0;
  w->rounds = 0;
  w->spin = spin;
}

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static int interrupted(mw_runtime *rt) {
  if (!rt->interrupt || !*rt->interrupt) return 0;
  mw__rt_error(rt, "interrupted");
  return 1;
}

/* After a look that found nothing: MW_EINTR when the interrupt flag is set, MW_ETIMEDOUT when
 * the time is up (the caller says what timed out), else 0 after a spin, a yield or a nap. A
 * signal to this thread cuts a nap short. */
static int wait_step(mw_runtime *rt, wait_state *w) {
  double now = mw__now();
  if (w->rounds++ == 0) {
    w->start = now;
    w->end = w->timeout < 0 ? 1e300 : now + w->timeout;
  }
  if (interrupted(rt)) return MW_EINTR;
  if (now >= w->end) return MW_ETIMEDOUT;
  double waited = now - w->start;
  int host_cpus = rt->ops->shares_cpus; /* sim: the executor needs these CPUs */
  if (w->spin && !host_cpus && waited < WAIT_SPIN_CUDA_S) {
    for (int i = 0; i < 8; ++i) cpu_relax();
    return 0;
  }
  if (w->spin && host_cpus && w->rounds <= WAIT_YIELDS_SIM) {
    sched_yield();
    return 0;
  }
  double nap = waited / MW_NAP_FRACTION, least = host_cpus ? WAIT_NAP_SIM_S : WAIT_NAP_CUDA_S;
  if (nap < least) nap = least;
  if (nap > WAIT_NAP_MAX_S) nap = WAIT_NAP_MAX_S;
  if (nap > w->end - now) nap = w->end - now;
  mw__nap_ns((long)(nap * 1e9));
  return interrupted(rt) ? MW_EINTR : 0;
}

MW_API int mw_runtime_set_interrupt(mw_runtime *rt, const volatile int *flag) {
  MW_NOT_NULL(rt, "mw_runtime_set_interrupt");
  rt->interrupt = flag;
  return 0;
}

/* wait_slot's wait, once the free list is empty. */
static int wait_slot_long(mw_runtime *rt, double timeout_s, uint32_t *slot) {
  wait_state w;
  wait_begin(&w, timeout_s, 0);
  for (;;) {
    if (!rt->nhfree && rt->nclosing) take_closed(rt);
    if (rt->nhfree) {
      *slot = rt->hfree[--rt->nhfree];
      return 0;
    }
    poll_ring(rt);
    if (rt->nclosing) take_closed(rt);
    if (rt->nhfree) continue;
    if (rt->ndeferred && mw__now() - rt->last_sweep > 1e-3) sweep_deferred(rt);
    if (rt->nhfree) continue;
    int rc = mw__check_alive(rt);
    if (rc) return rc;
    /* a closing slot is closed by the device within microseconds of its record: spin for it
     * (a nap of 20 us each time the free list runs dry halved a stream of host spawns) */
    w.spin = rt->nclosing != 0;
    if ((rc = wait_step(rt, &w))) {
      if (rc == MW_ETIMEDOUT) {
        mw__rt_error(rt, "all %u host futures are in use (raise host_futures, or release futures)",
                     rt->host_slots);
        rc = MW_ECAPACITY;
      }
      return rc;
    }
  }
}

/* Takes a free host slot, waiting as the timeout allows for one to be freed. */
static int wait_slot(mw_runtime *rt, double timeout_s, uint32_t *slot) {
  if (rt->nhfree) {
    *slot = rt->hfree[--rt->nhfree];
    return 0;
  }
  /* counted and timed only when it waits (mw_stats.waits_future) */
  double t0 = mw__now();
  rt->waits_future++;
  int rc = wait_slot_long(rt, timeout_s, slot);
  rt->waits_future_s += mw__now() - t0;
  return rc;
}

static int check_nargs(mw_runtime *rt, const mw__task *t, int nargs) {
  if (nargs == t->nparams) return 0;
  mw__rt_error(rt, "task %s takes %d argument%s, got %d", t->name, t->nparams,
               t->nparams == 1 ? "" : "s", nargs);
  return MW_EINVAL;
}

/* Lays out the task's parameters (nparams values, checked) as its frame expects them. */
static void marshal(const mw__task *t, const mw_value *args, uint8_t *out) {
  memset(out, 0, MW_INBOX_ARG_BYTES);
  for (int i = 0; i < t->nparams; ++i) {
    const mw__param *p = &t->params[i];
    uint8_t *d = out + p->offset;
    mw_value v = args[i];
    switch (p->type) {
      case MW_T_BOOL: *d = v.i != 0; break;
      case MW_T_I8: case MW_T_U8: *d = (uint8_t)v.i; break;
      case MW_T_I16: case MW_T_U16: { uint16_t x = (uint16_t)v.i; memcpy(d, &x, 2); break; }
      case MW_T_I32: case MW_T_U32: { uint32_t x = (uint32_t)v.i; memcpy(d, &x, 4); break; }
      case MW_T_F32: { float x = (float)v.d; memcpy(d, &x, 4); break; }
      case MW_T_F64: memcpy(d, &v.d, 8); break;
      default: memcpy(d, &v.u, 8); break; /* 64-bit integers, pointers, futures */
    }
  }
}

/* Whether inbox cell tk % cap is free for ticket tk (protocol.h, inbox ring). */
static int cell_free(const mw_runtime *rt, uint64_t tk) {
  return atomic_load_explicit((_Atomic uint64_t *)&rt->inbox_free[tk & (rt->inbox_cap - 1)],
                              memory_order_acquire) == tk;
}

/* Publishes the record d of ticket tk in its cell: every word with the ticket's flag. */
static void inbox_write(mw_runtime *rt, uint64_t tk, const uint32_t d[MW_INBOX_WORDS]) {
  mw_inbox_cell *cell = &rt->inbox[tk & (rt->inbox_cap - 1)];
  const uint32_t flag = MW_LL_FLAG(tk);
  for (unsigned k = 0; k < MW_INBOX_WORDS; ++k)
    atomic_store_explicit((_Atomic uint64_t *)&cell->w[k], MW_LL_WORD(d[k], flag),
                          memory_order_relaxed);
}

/* inbox_wait's wait, once the next cell is not free. */
static int inbox_wait_long(mw_runtime *rt, double timeout_s) {
  uint64_t tk = rt->inbox_tail;
  /* full: wait until half of it is free (the device takes spawns in order), so that the
   * spawns that follow find their cells without a wait each */
  uint64_t far = tk + rt->inbox_cap / 2 - 1;
  wait_state w;
  wait_begin(&w, timeout_s, 0);
  int rc;
  while (!cell_free(rt, tk) || !cell_free(rt, far)) {
    poll_ring(rt);
    if ((rc = mw__check_alive(rt))) return rc;
    if ((rc = wait_step(rt, &w))) {
      if (rc == MW_ETIMEDOUT) {
        mw__rt_error(rt, "the inbox is full: the device is not taking new tasks (capacity "
                         "exhausted?)");
        rc = MW_ECAPACITY;
      }
      return rc;
    }
  }
  return 0;
}

/* Waits up to timeout_s for the inbox cell of the next ticket to be free (spawns and cancel
 * requests). Returns 0, or an error code. */
static int inbox_wait(mw_runtime *rt, double timeout_s) {
  if (cell_free(rt, rt->inbox_tail)) return 0;
  /* counted and timed only when it waits (mw_stats.waits_inbox) */
  double t0 = mw__now();
  rt->waits_inbox++;
  int rc = inbox_wait_long(rt, timeout_s);
  rt->waits_inbox_s += mw__now() - t0;
  return rc;
}

/* A spawn given host futures as arguments holds them: each stays (its slot not reused) until
 * the spawn has completed and the device's tasks hold it no more (protocol.h, inbox ring). */
static void note_holds(mw_runtime *rt, const mw__task *t, const mw_value *args, mw__hslot *h) {
  for (int i = 0; i < t->nparams; ++i) {
    if (t->params[i].type != MW_T_FUTURE) continue;
    mw_future g = args[i].f;
    uint32_t gs = MW_FUT_SLOT(g);
    if (!g || gs >= rt->host_slots || rt->hs[gs].gen != MW_FUT_GEN(g) || !rt->hs[gs].live) continue;
    uint32_t *more = realloc(h->holds, sizeof *more * (h->nholds + 1));
    if (!more) continue; /* then only the device's count keeps it: still sound once it runs */
    h->holds = more;
    h->holds[h->nholds++] = gs;
    rt->hs[gs].holders++;
    rt->hs[gs].given = 1;
  }
}


/* Checks what every spawn of one call shares: the program, the task, the argument count and
 * the runtime's state. Returns the task, or NULL with *rc set. */
static const mw__task *spawn_check(mw_runtime *rt, const mw_program *p, int task, int nargs,
                                   int *rc) {
  if (p->rt != rt) {
    mw__rt_error(rt, "the program belongs to another runtime");
    *rc = MW_EINVAL;
    return NULL;
  }
  if (task < 0 || task >= p->parsed.ntasks) {
    mw__rt_error(rt, "no task #%d in the program", task);
    *rc = MW_ENOTASK;
    return NULL;
  }
  const mw__task *t = &p->parsed.tasks[task];
  if ((*rc = mw__usable(rt)) || (*rc = check_nargs(rt, t, nargs))) return NULL;
  return t;
}

/* One checked spawn: a host slot, the inbox cell of the next ticket, the record in it. held 0
 * lets go of the future at once (fire-and-forget). No clock read, system call or allocation
 * while both are free (a future among the arguments takes one allocation). */
static int spawn_one(mw_runtime *rt, const mw__task *t, uint32_t flags, uint32_t n,
                     const mw_value *args, double timeout_s, int held, mw_future *out) {
  int rc;
  uint32_t s;
  if ((rc = wait_slot(rt, timeout_s, &s))) return rc;
  mw__hslot *h = &rt->hs[s];
  /* the inbox cell for our ticket must be free */
  uint64_t tk = rt->inbox_tail;
  if ((rc = inbox_wait(rt, timeout_s))) {
    rt->hfree[rt->nhfree++] = s;
    return rc;
  }
  h->gen++;
  if (h->gen == 0) h->gen = 1;
  h->state = MW_ST_PENDING;
  h->held = (uint8_t)held;
  h->live = 1;
  h->bulk = (flags & MW_IN_BULK) != 0;
  h->kind = t->kind;
  h->cancel_sent = 0;
  h->ticket = tk;
  /* h->res is written whole when the future completes; nothing reads it before */
  note_holds(rt, t, args, h);
  mw_future f = MW_FUT_MAKE(s, h->gen);
  uint32_t d[MW_INBOX_WORDS] = {0};
  marshal(t, args, (uint8_t *)d);
  d[MW_IN_W_KIND] = t->kind;
  /* a block task's frame says so; one spawned alone is one instance (protocol.h, Block tasks) */
  d[MW_IN_W_FLAGS] = flags | (t->block ? MW_IN_BLOCK : 0u);
  d[MW_IN_W_FUT] = (uint32_t)f;
  d[MW_IN_W_FUT + 1] = (uint32_t)(f >> 32);
  d[MW_IN_W_BULK_N] = t->block && !(flags & MW_IN_BULK) ? 1u : n;
  inbox_write(rt, tk, d);
  rt->inbox_tail = tk + 1;
  rt->host_spawned++;
  rt->in_flight++;
  if (rt->watch) mw__watch_spawned(rt);
  if (out) *out = f;
  return 0;
}

static int spawn_common(mw_runtime *rt, const mw_program *p, int task, uint32_t flags, uint32_t n,
                        const mw_value *args, int nargs, double timeout_s, mw_future *out) {
  MW_NOT_NULL(out, "mw_spawn");
  *out = 0;
  MW_NOT_NULL(rt, "mw_spawn");
  MW_NOT_NULL(p, "mw_spawn");
  if (nargs && !args) return mw__null_arg("mw_spawn", "args");
  if ((flags & MW_IN_BULK) && n == 0) {
    mw__rt_error(rt, "mw_spawn_bulk: n must be at least 1 (instances to run)");
    return MW_EINVAL;
  }
  int rc;
  const mw__task *t = spawn_check(rt, p, task, nargs, &rc);
  return t ? spawn_one(rt, t, flags, n, args, timeout_s, 1, out) : rc;
}

MW_API int mw_spawn(mw_runtime *rt, const mw_program *p, int task, const mw_value *args,
                    int nargs, double timeout_s, mw_future *out) {
  return spawn_common(rt, p, task, 0, 0, args, nargs, timeout_s, out);
}

MW_API int mw_spawn_bulk(mw_runtime *rt, const mw_program *p, int task, uint32_t n,
                         const mw_value *args, int nargs, double timeout_s, mw_future *out) {
  return spawn_common(rt, p, task, MW_IN_BULK, n, args, nargs, timeout_s, out);
}

MW_API int mw_spawn_n(mw_runtime *rt, const mw_program *p, int task, uint32_t n,
                      const mw_value *args, int nargs, double timeout_s, mw_future *out,
                      uint32_t *spawned) {
  if (spawned) *spawned = 0;
  MW_NOT_NULL(rt, "mw_spawn_n");
  MW_NOT_NULL(p, "mw_spawn_n");
  if (nargs && !args) return mw__null_arg("mw_spawn_n", "args");
  int rc;
  const mw__task *t = spawn_check(rt, p, task, nargs, &rc);
  if (!t) return rc;
  uint32_t i;
  for (i = 0; i < n; ++i) {
    const mw_value *a = nargs ? args + (size_t)i * (size_t)nargs : NULL;
    if ((rc = spawn_one(rt, t, 0, 0, a, timeout_s, out != NULL, out ? &out[i] : NULL))) break;
  }
  if (spawned) *spawned = i;
  return rc;
}

static mw__hslot *lookup(mw_runtime *rt, mw_future f) {
  uint32_t s = MW_FUT_SLOT(f);
  if (!f || s >= rt->host_slots || rt->hs[s].gen != MW_FUT_GEN(f) || !rt->hs[s].held) {
    mw__rt_error(rt, "stale or foreign future");
    return NULL;
  }
  return &rt->hs[s];
}

MW_API int mw_future_poll(mw_runtime *rt, mw_future f, mw_result *out) {
  MW_NOT_NULL(rt, "mw_future_poll");
  mw__hslot *h = lookup(rt, f);
  if (!h) return MW_ESTALE;
  if (h->state == MW_ST_PENDING) {
    poll_ring(rt);
    if (h->state == MW_ST_PENDING) {
      mw__check_alive(rt);
      if (h->state == MW_ST_PENDING) return MW_EAGAIN;
    }
  }
  if (out) *out = h->res;
  return 0;
}

MW_API int mw_future_await(mw_runtime *rt, mw_future f, double timeout_s, mw_result *out) {
  MW_NOT_NULL(rt, "mw_future_await");
  wait_state w;
  wait_begin(&w, timeout_s, 1);
  for (;;) {
    int rc = mw_future_poll(rt, f, out);
    if (rc != MW_EAGAIN) return rc;
    if ((rc = wait_step(rt, &w))) {
      if (rc == MW_ETIMEDOUT) mw__rt_error(rt, "timed out after %.3f s", timeout_s);
      return rc;
    }
  }
}

MW_API int mw_future_await_any(mw_runtime *rt, const mw_future *fs, int n, double timeout_s,
                               int *index, mw_result *out) {
  MW_NOT_NULL(index, "mw_future_await_any");
  MW_NOT_NULL(rt, "mw_future_await_any");
  MW_NOT_NULL(fs, "mw_future_await_any");
  if (n < 1) {
    mw__rt_error(rt, "mw_future_await_any: n must be at least 1 (futures to wait for)");
    return MW_EINVAL;
  }
  for (int i = 0; i < n; ++i)
    if (!lookup(rt, fs[i])) {
      *index = i;
      return MW_ESTALE;
    }
  wait_state w;
  wait_begin(&w, timeout_s, 1);
  for (;;) {
    poll_ring(rt);
    mw__check_alive(rt); /* a fault fails every pending future: the loop below ends */
    for (int i = 0; i < n; ++i) {
      const mw__hslot *h = &rt->hs[MW_FUT_SLOT(fs[i])];
      if (h->state == MW_ST_PENDING) continue;
      *index = i;
      if (out) *out = h->res;
      return 0;
    }
    int rc = wait_step(rt, &w);
    if (rc) {
      if (rc == MW_ETIMEDOUT) mw__rt_error(rt, "timed out after %.3f s", timeout_s);
      return rc;
    }
  }
}

MW_API int mw_future_cancel(mw_runtime *rt, mw_future f, double timeout_s) {
  MW_NOT_NULL(rt, "mw_future_cancel");
  mw__hslot *h = lookup(rt, f);
  if (!h) return MW_ESTALE;
  if (h->state == MW_ST_PENDING) mw_runtime_poll(rt);
  if (h->state != MW_ST_PENDING) return 0; /* complete: a no-op */
  if (h->cancel_sent) return 1;
  int rc = mw__usable(rt);
  if (rc) return rc;
  /* a spawn the device has not taken yet is marked in its own cell: the device then completes
   * it as cancelled without running it (protocol.h, inbox ring) */
  int marked = 0;
  mw_inbox_cell *spawn = &rt->inbox[h->ticket & (rt->inbox_cap - 1)];
  if (!cell_free(rt, h->ticket + rt->inbox_cap)) {
    _Atomic uint64_t *fw = (_Atomic uint64_t *)&spawn->w[MW_IN_W_FLAGS];
    uint64_t old = atomic_load_explicit(fw, memory_order_relaxed);
    if ((uint32_t)(old >> 32) == MW_LL_FLAG(h->ticket)) {
      atomic_store_explicit(fw, old | MW_IN_CANCELLED, memory_order_relaxed);
      marked = 1;
    }
  }
  /* and the request itself, for a task the device has taken (or takes meanwhile) */
  if ((rc = inbox_wait(rt, timeout_s))) return rc; /* the mark alone may still stop a task not yet taken */
  if (h->state != MW_ST_PENDING) return marked; /* it completed while we waited for a cell */
  uint32_t d[MW_INBOX_WORDS] = {0};
  d[MW_IN_W_FLAGS] = MW_IN_CANCEL;
  d[MW_IN_W_FUT] = (uint32_t)f;
  d[MW_IN_W_FUT + 1] = (uint32_t)(f >> 32);
  inbox_write(rt, rt->inbox_tail, d);
  rt->inbox_tail++;
  h->cancel_sent = 1;
  return 1;
}

MW_API int mw_future_release(mw_runtime *rt, mw_future f) {
  MW_NOT_NULL(rt, "mw_future_release");
  mw__hslot *h = lookup(rt, f);
  if (!h) return MW_ESTALE;
  h->held = 0;
  mw__hslot_settle(rt, MW_FUT_SLOT(f));
  return 0;
}

/* Waits until the device has closed every host slot whose record the host has read
 * (protocol.h, completion ring, Closing), so the rows read after count the work of every task
 * the host saw complete. It follows each record within microseconds; the bound is for a device
 * that stopped answering. */
int mw__wait_closed(mw_runtime *rt) {
  wait_state w;
  wait_begin(&w, CLOSE_WAIT_S, 1); /* closed microseconds after its record: spin first */
  for (;;) {
    for (uint32_t s = 0; s < rt->host_slots && rt->nclosing_live; ++s) hslot_closed(rt, s);
    if (!rt->nclosing_live) return 0;
    int rc = mw__check_alive(rt);
    if (rc) return rc;
    if ((rc = wait_step(rt, &w))) {
      if (rc == MW_ETIMEDOUT)
        mw__rt_error(rt, "the executor did not close %u completed host futures within %.0f s",
                     rt->nclosing_live, CLOSE_WAIT_S);
      return rc;
    }
  }
}
