/* runtime.cuh - the device executor: worker loop, queues, pools, futures and the device API of tasks.
 *
 * Compiled at run time together with the generated task code: by NVRTC for the GPU, by the host
 * C++ compiler against sim_shim.h for the sim backend. All layouts and handshakes with the host
 * are in protocol.h. A worker is a warp; every function here marked "collective" must be called
 * by all 32 lanes together: lane 0 does the work and the result is broadcast.
 *
 * The generated code defines, after this file: the kind table (mw_kind_rtype, mw_kind_name) and
 * mw_dispatch(), which runs one step of a task body.
 */
#ifndef MW_RUNTIME_CUH
#define MW_RUNTIME_CUH

#define MW_FULL 0xffffffffu

#ifdef MW_SIM
#define MW_GLOBALTIMER() __mw_globaltimer()
#define MW_CONVERGE(what, line, key) __mw_sim_converge(MW_FULL, what, line, key)
#else
__device__ __forceinline__ mw_u64 mw_globaltimer_dev() {
  mw_u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
#define MW_GLOBALTIMER() mw_globaltimer_dev()
#define MW_CONVERGE(what, line, key) 0
#endif

/* The generator checks that the host's layout of each argument struct is the compiler's. */
#ifdef MW_SIM
#define MW_CHECK_OFFSET(type, member, off) \
  static_assert(__builtin_offsetof(type, member) == (off), "moonwarp: argument layout of " #type)
#else
#define MW_CHECK_OFFSET(type, member, off) static_assert(true, "")
#endif

/* MW_FENCE orders this thread's accesses before and after it (release or acquire with the
 * volatile/atomic access next to it). Where an order between a store and a later load of other
 * threads' data is needed (the deque's owner and thieves), __threadfence() (SC) is used. */
#ifdef MW_SIM
#define MW_FENCE() __threadfence()
#else
#define MW_FENCE() asm volatile("fence.acq_rel.gpu;" ::: "memory")
#endif

#ifndef MW_POLLERS
#define MW_POLLERS 4u
#endif

/* ---- futures as task code sees them -------------------------------------------------------- */
struct future {
  mw_u64 h;
};

/* A future that could not get a slot: awaiting it fails with MW_FAIL_CAPACITY. */
#define MW_FUT_NOSLOT 0xfffffffffffffffeull
/* The future of a spawn that a cancelled task skipped: reads as cancelled. */
#define MW_FUT_SKIPPED 0xfffffffffffffffdull

enum { MW_RUN_DONE = 0, MW_RUN_SUSPEND = 1, MW_RUN_FAIL = 2 };

struct mw_ctx {
  mw_state *st;
  mw_worker *w;
  mw_u32 wid, lane;
  mw_u32 frame;      /* index of the running frame */
  mw_frame_hdr *hdr; /* its header */
  mw_u8 *home;       /* its payload in device memory; the body runs on a per-lane copy */
  mw_u32 index;      /* bulk instance index, 0 for plain tasks */
  mw_u32 resume;     /* resume point, read by every lane before any lane runs the body */
  mw_u32 bulk;       /* 1 while running a bulk instance */
  int status;        /* MW_RUN_* set by the body's exits */
  int fail_code;
  mw_u64 value;      /* result bits */
  const char *fail_msg;
  mw_u64 fail_fut;   /* failed child whose message is propagated, 0 if none */
  mw_u32 cancelled;  /* the task saw its cancellation (start, spawn or await): it ends cancelled */
  mw_u64 polled;     /* pollers: when this worker last looked at the inbox (globaltimer, lane 0) */
  char msgbuf[64];   /* a message composed at run time (fail_msg may point here) */
  /* tracing, lane 0 only (NULL in the other lanes): see protocol.h, task traces */
  mw_u32 trace_gen;  /* the mw_state.trace_gen this worker acted on last */
  mw_u32 trace_cap;
  mw_u64 trace_n;    /* its head's count */
  mw_trace_head *trace_head;
  mw_trace_ev *trace_ev; /* its events; NULL while it records nothing */
  mw_trace_ev trace_run; /* the run being recorded (kept here, not live across the body) */
};

__device__ void mw_dispatch(mw_ctx *c, mw_u32 kind);
__device__ mw_u32 mw_kind_rtype(mw_u32 kind);
__device__ const char *mw_kind_name(mw_u32 kind);

/* ---- small helpers -------------------------------------------------------------------------- */
__device__ __forceinline__ mw_u32 mw_bcast(mw_u32 v) { return __shfl_sync(MW_FULL, v, 0); }
__device__ __forceinline__ mw_u64 mw_bcast64(mw_u64 v) {
  return (mw_u64)__shfl_sync(MW_FULL, (unsigned long long)v, 0);
}
__device__ __forceinline__ mw_u32 mw_ld32(const mw_u32 *p) { return *(const volatile mw_u32 *)p; }
__device__ __forceinline__ mw_u64 mw_ld64(const mw_u64 *p) { return *(const volatile mw_u64 *)p; }
__device__ __forceinline__ void mw_st32(mw_u32 *p, mw_u32 v) { *(volatile mw_u32 *)p = v; }
__device__ __forceinline__ void mw_st64(mw_u64 *p, mw_u64 v) { *(volatile mw_u64 *)p = v; }
__device__ __forceinline__ mw_u64 mw_cas64(mw_u64 *p, mw_u64 cmp, mw_u64 v) {
  return (mw_u64)atomicCAS((unsigned long long *)p, (unsigned long long)cmp, (unsigned long long)v);
}
__device__ __forceinline__ mw_u64 mw_xchg64(mw_u64 *p, mw_u64 v) {
  return (mw_u64)atomicExch((unsigned long long *)p, (unsigned long long)v);
}
__device__ __forceinline__ mw_u64 mw_add64(mw_u64 *p, mw_u64 v) {
  return (mw_u64)atomicAdd((unsigned long long *)p, (unsigned long long)v);
}
__device__ __forceinline__ mw_u64 mw_or64(mw_u64 *p, mw_u64 v) {
  return (mw_u64)atomicOr((unsigned long long *)p, (unsigned long long)v);
}
__device__ __forceinline__ mw_frame_hdr *mw_frame(mw_state *st, mw_u32 f) {
  return (mw_frame_hdr *)(st->frames + (mw_u64)f * st->frame_bytes);
}
__device__ __forceinline__ mw_stat_row *mw_stat(mw_ctx *c, mw_u32 kind) {
  return &c->st->stats[(mw_u64)c->wid * MW_MAX_KINDS + (kind < MW_MAX_KINDS ? kind : 0)];
}
__device__ void mw_strcpy(char *dst, const char *src, int cap, int at) {
  int i = at;
  for (; src && *src && i < cap - 1; ++src, ++i) dst[i] = *src;
  dst[i] = 0;
}

/* ---- free stacks: Treiber stacks with a tag against ABA ------------------------------------
 * head = tag << 32 | (index + 1); next[i] links entries. Lane 0 only. */
__device__ mw_u32 mw_stack_pop(mw_u64 *head, mw_u32 *next) {
  for (;;) {
    mw_u64 h = mw_ld64(head);
    mw_u32 top = (mw_u32)h;
    if (top == 0) return MW_NONE;
    mw_u32 nx = mw_ld32(&next[top - 1]);
    mw_u64 n = ((h >> 32) + 1) << 32 | nx;
    if (mw_cas64(head, h, n) == h) {
      MW_FENCE();
      return top - 1;
    }
  }
}
__device__ void mw_stack_push(mw_u64 *head, mw_u32 *next, mw_u32 i) {
  for (;;) {
    mw_u64 h = mw_ld64(head);
    mw_st32(&next[i], (mw_u32)h);
    MW_FENCE(); /* the link before the head that publishes it */
    mw_u64 n = ((h >> 32) + 1) << 32 | (mw_u64)(i + 1);
    if (mw_cas64(head, h, n) == h) return;
  }
}

/* Per-worker caches in front of the stacks: no atomics while a worker recycles its own. */
__device__ mw_u32 mw_frame_alloc(mw_ctx *c) {
  mw_worker *w = c->w;
  mw_u32 f = w->nfree_frames ? w->free_frames[--w->nfree_frames]
                             : mw_stack_pop(&c->st->frame_head, c->st->frame_next);
  if (f != MW_NONE) w->frames_taken++;
  return f;
}
__device__ void mw_frame_free(mw_ctx *c, mw_u32 f) {
  mw_worker *w = c->w;
  w->frames_freed++;
  if (w->nfree_frames < c->st->cache_cap) {
    w->free_frames[w->nfree_frames++] = f;
    return;
  }
  mw_stack_push(&c->st->frame_head, c->st->frame_next, f);
}
__device__ mw_u32 mw_slot_alloc(mw_ctx *c) {
  mw_worker *w = c->w;
  if (w->nfree_slots) return w->free_slots[--w->nfree_slots];
  return mw_stack_pop(&c->st->slot_head, c->st->slot_next);
}
__device__ void mw_slot_free(mw_ctx *c, mw_u32 s) {
  mw_worker *w = c->w;
  if (w->nfree_slots < c->st->cache_cap) {
    w->free_slots[w->nfree_slots++] = s;
    return;
  }
  mw_stack_push(&c->st->slot_head, c->st->slot_next, s);
}
/* Drops one reference to a device slot; the last one frees it. Host slots are the host's. */
__device__ void mw_slot_unref(mw_ctx *c, mw_u32 s) {
  if (s < c->st->host_slots) return;
  MW_FENCE();
  if (atomicSub(&c->st->slots[s].refs, 1u) == 1u) mw_slot_free(c, s);
}

/* ---- global run queue: bounded MPMC (sequence per cell) -------------------------------------
 * Cell i holds ticket t when gq_seq[i] == t + 1; free for ticket t when gq_seq[i] == t.
 * Capacity exceeds the number of frames plus bulk references, so a push never finds it full. */
__device__ void mw_gq_push(mw_state *st, mw_u32 f) {
  mw_u64 t = mw_add64(&st->gq_tail, 1);
  mw_u64 i = t & (st->gq_cap - 1);
  while (mw_ld64(&st->gq_seq[i]) != t) __nanosleep(32); /* a slow consumer of t - cap */
  mw_st32(&st->gq[i], f);
  MW_FENCE();
  mw_st64(&st->gq_seq[i], t + 1);
}
__device__ mw_u32 mw_gq_pop(mw_state *st) {
  for (;;) {
    mw_u64 t = mw_ld64(&st->gq_head);
    mw_u64 i = t & (st->gq_cap - 1);
    mw_u64 s = mw_ld64(&st->gq_seq[i]);
    if (s != t + 1) {
      if (s < t + 1) return MW_NONE; /* empty (or the producer of t is still writing) */
      continue;                      /* head moved on */
    }
    if (mw_cas64(&st->gq_head, t, t + 1) == t) {
      MW_FENCE();
      mw_u32 f = mw_ld32(&st->gq[i]);
      MW_FENCE();
      mw_st64(&st->gq_seq[i], t + st->gq_cap);
      return f;
    }
  }
}

/* ---- per-worker deque (Chase-Lev) ------------------------------------------------------------ */
__device__ void mw_deque_push(mw_ctx *c, mw_u32 f) {
  mw_worker *w = c->w;
  mw_u64 b = w->bottom, t = mw_ld64(&w->top);
  if (b - t >= MW_DEQUE_CAP) {
    mw_gq_push(c->st, f);
    return;
  }
  mw_st32(&w->buf[b % MW_DEQUE_CAP], f);
  MW_FENCE(); /* the entry before bottom (pairs with the thief's fence after bottom) */
  mw_st64(&w->bottom, b + 1);
}
__device__ mw_u32 mw_deque_pop(mw_ctx *c) {
  mw_worker *w = c->w;
  mw_u64 b = w->bottom;
  if (b == mw_ld64(&w->top)) return MW_NONE;
  b -= 1;
  mw_st64(&w->bottom, b);
  __threadfence(); /* bottom before top: a thief and the owner cannot both take the last */
  mw_u64 t = mw_ld64(&w->top);
  if ((long long)(t - b) > 0) { /* t > b: empty */
    mw_st64(&w->bottom, b + 1);
    return MW_NONE;
  }
  mw_u32 f = mw_ld32(&w->buf[b % MW_DEQUE_CAP]);
  if (t == b) { /* the last entry: race the thieves for it */
    if (mw_cas64(&w->top, t, t + 1) != t) f = MW_NONE;
    mw_st64(&w->bottom, b + 1);
  }
  return f;
}
__device__ mw_u32 mw_deque_steal(mw_worker *v) {
  mw_u64 t = mw_ld64(&v->top);
  __threadfence();
  mw_u64 b = mw_ld64(&v->bottom);
  if ((long long)(b - t) <= 0) return MW_NONE;
  mw_u32 f = mw_ld32(&v->buf[t % MW_DEQUE_CAP]);
  if (mw_cas64(&v->top, t, t + 1) != t) return MW_NONE;
  __threadfence();
  return f;
}

/* Makes f the next task of this worker; the previous LIFO task goes to the deque. Lane 0. */
__device__ void mw_make_runnable(mw_ctx *c, mw_u32 f) {
  mw_worker *w = c->w;
  if (w->lifo != MW_NONE) mw_deque_push(c, w->lifo);
  w->lifo = f;
}

/* Sets frame f up for a new task: its join gets the next epoch and no bits. Returns the fref
 * its future slot carries (protocol.h). Lane 0, owning the free frame. */
__device__ mw_u64 mw_frame_open(mw_state *st, mw_u32 f) {
  mw_frame_hdr *fh = mw_frame(st, f);
  mw_u64 ep = ((mw_ld64(&fh->join) >> 32) + 1) & 0xffffffffull;
  mw_st64(&fh->join, ep << 32);
  return (ep << 32) | (mw_u64)(f + 1);
}

/* Gives the running task's frame back (protocol.h, join: Finish). A task a canceller woke
 * first takes back its first registration if that future is still pending, so the future is
 * free for another awaiter at once. Lane 0. */
__device__ void mw_frame_release(mw_ctx *c, mw_frame_hdr *h, mw_u32 f) {
  if ((mw_u32)mw_ld64(&h->join) & MW_JOIN_WOKEN) {
    mw_u64 fh = h->await_f[1];
    if (fh) {
      mw_slot *sl = &c->st->slots[MW_FUT_SLOT(fh)];
      for (;;) {
        mw_u64 old = mw_ld64(&sl->ctl);
        mw_u32 w = (mw_u32)old;
        if ((mw_u32)(old >> 32) != MW_FUT_GEN(fh) || w == MW_CTL_CLOSED || (w & MW_CTL_WAITER) != f + 1)
          break; /* completed: its completion counts itself off */
        if (mw_cas64(&sl->ctl, old, old & ~(mw_u64)MW_CTL_WAITER) == old) {
          mw_add64(&h->join, ~0ull); /* the registration its completion would have counted off */
          break;
        }
      }
    }
    MW_FENCE();
    if ((mw_u32)mw_or64(&h->join, MW_JOIN_DONE) & MW_JOIN_COUNT) return; /* the last completion frees it */
  }
  mw_frame_free(c, f);
}

/* Whether the task of future fut was asked to cancel: its slot is pending for fut's generation
 * with the CANCEL bit. Lane 0. */
__device__ bool mw_cancel_asked(mw_state *st, mw_u64 fut) {
  mw_u64 ctl = mw_ld64(&st->slots[MW_FUT_SLOT(fut)].ctl);
  mw_u32 w = (mw_u32)ctl;
  return (mw_u32)(ctl >> 32) == MW_FUT_GEN(fut) && w != MW_CTL_CLOSED && (w & MW_CTL_CANCEL);
}

/* Asks the task of future fut to stop (protocol.h, Cancellation). Lane 0. Returns 1 when the
 * request was delivered (the future was pending, or already asked), 0 when it was complete or
 * the handle names no live future. */
__device__ int mw_cancel_fut(mw_ctx *c, mw_u64 fut) {
  mw_state *st = c->st;
  mw_u32 s = MW_FUT_SLOT(fut), g = MW_FUT_GEN(fut);
  if (fut == 0 || s >= st->nslots) return 0;
  mw_slot *sl = &st->slots[s];
  for (;;) {
    mw_u64 old = mw_ld64(&sl->ctl), nv;
    mw_u32 og = (mw_u32)(old >> 32), w = (mw_u32)old;
    if (og == g && w != MW_CTL_CLOSED) {
      if (w & MW_CTL_CANCEL) return 1; /* asked already */
      nv = old | MW_CTL_CANCEL;
    } else if (og + 1u == g && w == MW_CTL_CLOSED) {
      nv = ((mw_u64)g << 32) | MW_CTL_CANCEL; /* not started, nobody waits */
    } else {
      return 0; /* complete, or a stale handle */
    }
    if (mw_cas64(&sl->ctl, old, nv) == old) break;
  }
  __threadfence(); /* CANCEL before reading the frame's join (SC: pairs with the await's fence) */
  mw_u64 fr = mw_ld64(&sl->fref);
  if ((mw_u32)fr == 0) return 1; /* no frame yet: the task sees CANCEL when it starts */
  mw_u32 f = (mw_u32)fr - 1;
  mw_frame_hdr *fh = mw_frame(st, f);
  for (;;) {
    mw_u64 j = mw_ld64(&fh->join);
    mw_u32 b = (mw_u32)j;
    if ((j >> 32) != (fr >> 32) || (b & MW_JOIN_WOKEN)) return 1; /* another task's frame now */
    if (mw_cas64(&fh->join, j, j | MW_JOIN_WOKEN) != j) continue;
    if (!(b & MW_JOIN_HOLD) && (b & MW_JOIN_COUNT)) { /* suspended: wake it, to stop */
      MW_FENCE();
      mw_make_runnable(c, f);
    }
    return 1;
  }
}

/* Cancels a child the running task owns (its reference keeps the slot's generation): the
 * generation is the slot's, or the next one while the child has not started. Lane 0. */
__device__ void mw_cancel_owned(mw_ctx *c, mw_u32 s) {
  mw_slot *sl = &c->st->slots[s];
  mw_u64 ctl = mw_ld64(&sl->ctl);
  mw_u32 g = (mw_u32)(ctl >> 32);
  if ((mw_u32)ctl == MW_CTL_CLOSED) {
    MW_FENCE(); /* the status of a completed child is written before its CLOSED */
    if (mw_ld32(&sl->status) != MW_ST_PENDING) return; /* complete */
    g += 1;                                          /* not started yet */
  }
  mw_cancel_fut(c, MW_FUT_MAKE(s, g));
}

/* "task 'name' was cancelled" into buf (MW_MSG_BYTES). */
__device__ void mw_cancel_msg(char *buf, mw_u32 kind) {
  mw_strcpy(buf, "task '", MW_MSG_BYTES, 0);
  int n = 0;
  while (buf[n]) ++n;
  mw_strcpy(buf, mw_kind_name(kind), MW_MSG_BYTES, n);
  while (buf[n]) ++n;
  mw_strcpy(buf, "' was cancelled", MW_MSG_BYTES, n);
}

/* ---- completion --------------------------------------------------------------------------- */
/* One awaited future of frame waiter completed (protocol.h, join: Completion). Lane 0. */
__device__ void mw_wake(mw_ctx *c, mw_u32 waiter, mw_u64 fut, mw_u32 status) {
  mw_frame_hdr *wh = mw_frame(c->st, waiter);
  if (status != MW_ST_OK) {
    /* the first failed child is the one reported; written before the join decrement */
    mw_cas64(&wh->await_f[0], 0ull, fut);
  }
  MW_FENCE();
  mw_u32 b = (mw_u32)mw_add64(&wh->join, ~0ull) - 1u; /* minus one: COUNT > 0, no borrow */
  if (b == 0)
    mw_make_runnable(c, waiter);
  else if (!(b & MW_JOIN_COUNT) && (b & MW_JOIN_DONE))
    mw_frame_free(c, waiter); /* its task finished by cancellation: the last completion frees */
}

/* Publishes the result of slot s (generation gen) and wakes its waiter; lane 0. */
__device__ void mw_complete_slot(mw_ctx *c, mw_u32 s, mw_u32 gen, mw_u32 status, mw_u64 value,
                                 mw_u32 rtype, int code, const char *msg, const char *prefix) {
  mw_state *st = c->st;
  mw_slot *sl = &st->slots[s];
  sl->value = value;
  sl->status = status;
  sl->rtype = rtype;
  sl->code = code;
  sl->msg[0] = 0;
  if (status != MW_ST_OK) {
    if (prefix) {
      mw_strcpy(sl->msg, prefix, MW_MSG_BYTES, 0);
      int n = 0;
      while (sl->msg[n]) ++n;
      mw_strcpy(sl->msg, ": ", MW_MSG_BYTES, n);
      mw_strcpy(sl->msg, msg, MW_MSG_BYTES, n + 2);
    } else {
      mw_strcpy(sl->msg, msg, MW_MSG_BYTES, 0);
    }
  }
  MW_FENCE(); /* the result before CLOSED (pairs with the awaiter's fence after it) */
  mw_u64 old = mw_xchg64(&sl->ctl, ((mw_u64)gen << 32) | MW_CTL_CLOSED);
  mw_u32 word = (mw_u32)old;
  mw_u64 fut = MW_FUT_MAKE(s, gen);
  if ((mw_u32)(old >> 32) == gen && word != MW_CTL_CLOSED && (word & MW_CTL_WAITER))
    mw_wake(c, (word & MW_CTL_WAITER) - 1, fut, status);
  if (s < st->host_slots) {
    mw_u64 t = mw_add64(&st->comp_tail, 1);
    mw_comp_cell *cell = &st->comp[t & (st->comp_cap - 1)];
    volatile mw_comp_cell *vc = cell;
    vc->fut = fut;
    vc->value = value;
    vc->status = status;
    vc->rtype = rtype;
    vc->code = code;
    vc->kind = sl->kind;
    for (int i = 0; i < MW_MSG_BYTES; ++i) vc->msg[i] = sl->msg[i];
    __threadfence_system(); /* the record before its seq (pairs with the host's acquire) */
    vc->seq = t + 1;
  }
}

/* Finishes the running task: completes its future, releases its children and frame. A task
 * that ends cancelled cancels the children it still owns first. Lane 0. */
__device__ void mw_finish(mw_ctx *c) {
  mw_frame_hdr *h = c->hdr;
  mw_u32 kind = h->kind;
  mw_u64 fut = h->fut;
  mw_u32 s = MW_FUT_SLOT(fut), gen = MW_FUT_GEN(fut);
  mw_stat_row *row = mw_stat(c, kind);
  mw_u32 status;
  int code = 0;
  const char *msg = 0, *prefix = 0;
  char buf[MW_MSG_BYTES];
  if (c->cancelled) {
    status = MW_ST_CANCELLED;
    code = MW_FAIL_CANCELLED;
    mw_cancel_msg(buf, kind);
    msg = buf;
  } else if (c->status == MW_RUN_DONE) {
    status = MW_ST_OK;
  } else if (c->fail_fut) {
    /* an awaited child failed or was cancelled: this task ends the same way, with its message */
    mw_slot *cs = &c->st->slots[MW_FUT_SLOT(c->fail_fut)];
    status = cs->status == MW_ST_CANCELLED ? MW_ST_CANCELLED : MW_ST_FAILED;
    code = cs->code;
    for (int i = 0; i < MW_MSG_BYTES; ++i) buf[i] = cs->msg[i];
    msg = buf;
  } else {
    status = MW_ST_FAILED;
    code = c->fail_code;
    msg = c->fail_msg;
    prefix = mw_kind_name(kind);
  }
  if (status == MW_ST_CANCELLED)
    for (mw_u32 ch = h->children; ch; ch = c->st->slots[ch - 1].sibling) mw_cancel_owned(c, ch - 1);
  mw_complete_slot(c, s, gen, status, status == MW_ST_OK ? c->value : 0, mw_kind_rtype(kind), code,
                   msg, prefix);
  if (status == MW_ST_OK) row->completed++;
  else if (status == MW_ST_CANCELLED) row->cancelled++;
  else row->failed++;
  for (mw_u32 ch = h->children; ch;) {
    mw_u32 next = c->st->slots[ch - 1].sibling;
    mw_slot_unref(c, ch - 1);
    ch = next;
  }
  mw_slot_unref(c, s);
  mw_frame_release(c, h, c->frame);
}

/* ---- the device API used by generated code -------------------------------------------------- */

/* Records a failure of the running task; the body returns right after. All lanes. */
__device__ void mw_fail(mw_ctx *c, int code, const char *msg) {
  c->status = MW_RUN_FAIL;
  c->fail_code = code;
  c->fail_msg = msg;
  c->fail_fut = 0;
}

/* "<what> with different arguments per lane at line <line>" into c->msgbuf */
__device__ const char *mw_divergence_msg(mw_ctx *c, const char *what, int line) {
  char *m = c->msgbuf;
  int n = 0;
  const char *parts[] = {what, " with different arguments per lane at line "};
  for (int p = 0; p < 2; ++p)
    for (const char *s = parts[p]; *s && n < 50; ++s) m[n++] = *s;
  char digits[12];
  int k = 0;
  unsigned v = line > 0 ? (unsigned)line : 0u;
  do { digits[k++] = (char)('0' + v % 10); v /= 10; } while (v && k < 11);
  while (k && n < 63) m[n++] = digits[--k];
  m[n] = 0;
  return m;
}

__device__ bool mw_diverged(mw_ctx *c, const char *what, int line, mw_u64 key) {
  if (MW_CONVERGE(what, line, key)) {
    mw_fail(c, MW_FAIL_DIVERGED, mw_divergence_msg(c, what, line));
    return true;
  }
  return false;
}

/* Spawns a task of kind with the argument struct args (args_bytes) into a frame whose payload
 * is frame_payload bytes, the rest zeroed. Collective; returns the future in every lane. */
__device__ future mw_spawn_raw(mw_ctx *c, mw_u32 kind, const void *args, mw_u32 args_bytes,
                               mw_u32 frame_payload, mw_u32 bulk_n, bool bulk, int line) {
  future fu;
  fu.h = 0;
  mw_u64 key = kind;
#ifdef MW_SIM
  for (mw_u32 i = 0; i < args_bytes; ++i) key = (key ^ ((const mw_u8 *)args)[i]) * 1099511628211ull;
#endif
  if (mw_diverged(c, "spawn", line, key)) return fu;
  mw_state *st = c->st;
  mw_u64 h = 0;
  mw_u32 f = MW_NONE, cx = 0;
  if (c->lane == 0) {
    if (c->bulk) {
      h = MW_FUT_NOSLOT; /* bulk instances share a frame: they may not own children */
    } else if (c->cancelled || mw_cancel_asked(st, c->hdr->fut)) {
      h = MW_FUT_SKIPPED; /* a cancelled task spawns nothing more; it ends cancelled */
      cx = 1;
    } else {
      mw_u32 s = mw_slot_alloc(c);
      if (s == MW_NONE) {
        h = MW_FUT_NOSLOT;
      } else {
        mw_slot *sl = &st->slots[s];
        mw_u32 gen = (mw_u32)(mw_ld64(&sl->ctl) >> 32) + 1;
        h = MW_FUT_MAKE(s, gen);
        sl->refs = 2; /* the task + its owner */
        sl->kind = kind;
        sl->status = MW_ST_PENDING;
        sl->sibling = c->hdr->children;
        c->hdr->children = s + 1;
        f = mw_frame_alloc(c);
        mw_stat(c, kind)->spawned++;
        if (f == MW_NONE) {
          sl->refs = 1;
          sl->fref = 0;
          mw_complete_slot(c, s, gen, MW_ST_FAILED, 0, mw_kind_rtype(kind), MW_FAIL_CAPACITY,
                           "no free task frame (capacity exhausted)", mw_kind_name(kind));
          mw_stat(c, kind)->failed++;
        } else {
          mw_frame_hdr *fh = mw_frame(st, f);
          fh->kind = kind;
          fh->resume = 0;
          fh->fut = h;
          fh->children = 0;
          fh->flags = bulk ? MW_FR_BULK : 0;
          fh->await_f[0] = fh->await_f[1] = 0;
          sl->fref = mw_frame_open(st, f);
          fh->bulk_n = bulk_n;
          fh->bulk_next = 0;
          fh->bulk_done = 0;
          fh->bulk_refs = 1;
        }
      }
    }
  }
  h = mw_bcast64(h);
  f = mw_bcast(f);
  if (mw_bcast(cx)) c->cancelled = 1;
  if (f != MW_NONE) {
    /* all lanes hold the same args: each copies and zeroes its share of the payload */
    mw_u32 *dst = (mw_u32 *)((mw_u8 *)mw_frame(st, f) + MW_FRAME_HDR_BYTES);
    const mw_u32 *src = (const mw_u32 *)args;
    for (mw_u32 i = c->lane; i * 4 < frame_payload; i += 32) dst[i] = i * 4 < args_bytes ? src[i] : 0u;
    __syncwarp();
    if (c->lane == 0) {
      MW_FENCE();
      if (bulk && bulk_n == 0) {
        /* nothing to run: complete now */
        mw_complete_slot(c, MW_FUT_SLOT(h), MW_FUT_GEN(h), MW_ST_OK, 0, MW_RT_VOID, 0, 0, 0);
        mw_slot_unref(c, MW_FUT_SLOT(h));
        mw_frame_free(c, f);
      } else {
        mw_make_runnable(c, f);
      }
    }
  }
  __syncwarp();
  fu.h = h;
  return fu;
}

/* Frame semantics: a task body runs on a per-lane copy of its frame (parameters and locals),
 * like ordinary locals of SIMT code, so `k++` or `total += x` executed by every lane changes
 * each lane's copy once. Before the task suspends, lane 0's copy is saved to the frame in
 * device memory, and every lane reloads it on resume: frame locals carry task-uniform state
 * across awaits. Collective. */
__device__ void mw_save_frame(mw_ctx *c, const void *local, mw_u32 bytes) {
  if (c->lane == 0) {
    const mw_u8 *s = (const mw_u8 *)local;
    mw_u32 i = 0;
    for (; i + 4 <= bytes; i += 4) *(mw_u32 *)(c->home + i) = *(const mw_u32 *)(s + i);
    for (; i < bytes; ++i) c->home[i] = s[i];
  }
  __syncwarp();
}

/* Registers the running task as the waiter of fs[0..n) and decides whether it must suspend
 * (protocol.h, join: Await). Collective. Returns true when the task is suspended: the caller
 * returns at once and touches nothing of the frame (it may already run on another warp).
 * Returns false when every future is complete, or the task was cancelled (the task goes on;
 * mw_after_await stops it, or handles a failure among the futures). */
__device__ bool mw_await(mw_ctx *c, const future *fs, mw_u32 n, int line) {
  if (mw_diverged(c, "await", line, n ? fs[0].h : 0)) return false;
  MW_FENCE(); /* every lane's frame writes before lane 0 registers the waiter */
  __syncwarp();
  if (c->bulk) {
    mw_fail(c, MW_FAIL_BULK_AWAIT, "a bulk instance cannot await");
    return false;
  }
  mw_u32 suspend = 0;
  if (c->lane == 0) {
    mw_state *st = c->st;
    mw_frame_hdr *h = c->hdr;
    mw_u32 me = c->frame + 1, done = 0;
    h->await_f[0] = h->await_f[1] = 0;
    mw_u64 ep = mw_ld64(&h->join) & 0xffffffff00000000ull;
    mw_st64(&h->join, ep | (MW_JOIN_HOLD + n));
    /* the frame (locals, resume point, join) before any registration, and join before reading
     * the own CANCEL bit: SC, pairs with the canceller's fence (protocol.h, Cancellation) */
    __threadfence();
    if (c->cancelled || mw_cancel_asked(st, h->fut)) {
      mw_add64(&h->join, (mw_u64)0 - (MW_JOIN_HOLD + n)); /* nothing registered */
      n = 0;
    }
    for (mw_u32 i = 0; i < n; ++i) {
      mw_u64 fh = fs[i].h;
      if (fh == 0 || fh == MW_FUT_NOSLOT || fh == MW_FUT_SKIPPED) {
        if (!h->await_f[0]) h->await_f[0] = fh ? fh : 1;
        ++done;
        continue;
      }
      mw_u32 s = MW_FUT_SLOT(fh), g = MW_FUT_GEN(fh);
      if (s >= st->nslots) {
        if (!h->await_f[0]) h->await_f[0] = 1;
        ++done;
        continue;
      }
      mw_slot *sl = &st->slots[s];
      for (;;) {
        mw_u64 old = mw_ld64(&sl->ctl);
        mw_u32 og = (mw_u32)(old >> 32), w = (mw_u32)old;
        if (og == g && w == MW_CTL_CLOSED) { /* already complete */
          MW_FENCE();
          if (sl->status != MW_ST_OK && !h->await_f[0]) h->await_f[0] = fh;
          ++done;
          break;
        }
        bool pending = og == g && !(w & MW_CTL_WAITER);            /* keeps a CANCEL bit */
        bool unstarted = og + 1u == g && w == MW_CTL_CLOSED;
        if (pending || unstarted) {
          mw_u64 nv = ((mw_u64)g << 32) | (pending ? (w & MW_CTL_CANCEL) : 0u) | me;
          if (mw_cas64(&sl->ctl, old, nv) == old) {
            if (!h->await_f[1]) h->await_f[1] = fh; /* the first registration, see finish */
            break;
          }
          continue;
        }
        /* stale handle, or another task already waits on it */
        if (!h->await_f[0]) h->await_f[0] = (og == g) ? 2 : 1;
        ++done;
        break;
      }
    }
    if (n) {
      MW_FENCE();
      mw_u64 sub = MW_JOIN_HOLD + done;
      mw_u32 b = (mw_u32)(mw_add64(&h->join, (mw_u64)0 - sub) - sub);
      /* WOKEN: a canceller came while we registered; it left the wake-up to us: go on */
      suspend = !(b & MW_JOIN_WOKEN) && (b & MW_JOIN_COUNT);
    }
  }
  suspend = mw_bcast(suspend);
  return suspend != 0;
}

/* Runs right after an await completed (inline or on wake-up). Stops the task if it was asked
 * to cancel. Else, with await (tolerant false), fails the task if an awaited future failed or
 * was cancelled; with try_await (tolerant true) the task goes on and reads the outcome with
 * failed(), cancelled(), fail_code(), fail_message(). Either way a stale future, or one another
 * task awaits, fails the task. Collective. Returns true if the task must stop (the body
 * returns). */
__device__ bool mw_after_await(mw_ctx *c, bool tolerant) {
  mw_u64 bad = 0;
  mw_u32 cx = 0;
  if (c->lane == 0) {
    MW_FENCE();
    bad = mw_ld64(&c->hdr->await_f[0]);
    cx = c->cancelled || mw_cancel_asked(c->st, c->hdr->fut);
  }
  bad = mw_bcast64(bad);
  if (mw_bcast(cx)) {
    c->cancelled = 1;
    return true;
  }
  if (c->status == MW_RUN_FAIL) return true;
  if (!bad) return false;
  if (bad == 1) {
    mw_fail(c, MW_FAIL_STALE, "awaited a stale or invalid future");
  } else if (bad == 2) {
    mw_fail(c, MW_FAIL_AWAITED, "awaited a future another task awaits");
  } else if (tolerant) {
    return false;
  } else if (bad == MW_FUT_NOSLOT) {
    mw_fail(c, MW_FAIL_CAPACITY, "awaited a spawn that found no free future slot");
  } else if (bad == MW_FUT_SKIPPED) {
    mw_fail(c, MW_FAIL_CANCELLED, "awaited a spawn that a cancelled task skipped");
  } else {
    c->status = MW_RUN_FAIL;
    c->fail_fut = bad;
  }
  return true;
}

/* A future's result bits, typed on read by the producer's result type. */
struct mw_val {
  mw_u64 bits;
  mw_u32 rtype;
  __device__ double as_double() const {
    switch (rtype) {
      case MW_RT_F64: { union { mw_u64 u; double d; } x; x.u = bits; return x.d; }
      case MW_RT_F32: { union { mw_u32 u; float f; } x; x.u = (mw_u32)bits; return x.f; }
      case MW_RT_I32: return (double)(int)(mw_u32)bits;
      case MW_RT_U32: return (double)(mw_u32)bits;
      case MW_RT_U64: case MW_RT_PTR: case MW_RT_FUTURE: return (double)bits;
      default: return (double)(long long)bits;
    }
  }
  __device__ long long as_i64() const {
    switch (rtype) {
      case MW_RT_F64: case MW_RT_F32: return (long long)as_double();
      case MW_RT_I32: return (long long)(int)(mw_u32)bits;
      case MW_RT_U32: return (long long)(mw_u32)bits;
      default: return (long long)bits;
    }
  }
  __device__ bool is_float() const { return rtype == MW_RT_F32 || rtype == MW_RT_F64; }
  __device__ operator bool() const { return is_float() ? as_double() != 0.0 : bits != 0; }
  __device__ operator char() const { return (char)as_i64(); }
  __device__ operator signed char() const { return (signed char)as_i64(); }
  __device__ operator unsigned char() const { return (unsigned char)as_i64(); }
  __device__ operator short() const { return (short)as_i64(); }
  __device__ operator unsigned short() const { return (unsigned short)as_i64(); }
  __device__ operator int() const { return (int)as_i64(); }
  __device__ operator unsigned() const { return (unsigned)as_i64(); }
  __device__ operator long() const { return (long)as_i64(); }
  __device__ operator unsigned long() const { return (unsigned long)as_i64(); }
  __device__ operator long long() const { return as_i64(); }
  __device__ operator unsigned long long() const { return (unsigned long long)as_i64(); }
  __device__ operator float() const { return (float)as_double(); }
  __device__ operator double() const { return as_double(); }
};

/* Arithmetic between results: integer results stay 64-bit integers, a float side makes double. */
#define MW_VAL_ARITH(op)                                                                   \
  __device__ inline mw_val operator op(const mw_val &a, const mw_val &b) {                 \
    mw_val r;                                                                              \
    if (a.is_float() || b.is_float()) {                                                    \
      union { mw_u64 u; double d; } x;                                                     \
      x.d = a.as_double() op b.as_double();                                                \
      r.bits = x.u;                                                                        \
      r.rtype = MW_RT_F64;                                                                 \
    } else {                                                                               \
      r.bits = (mw_u64)(a.as_i64() op b.as_i64());                                         \
      r.rtype = MW_RT_I64;                                                                 \
    }                                                                                      \
    return r;                                                                              \
  }                                                                                        \
  __device__ inline mw_val operator op(const mw_val &a, long long b) {                     \
    mw_val v; v.bits = (mw_u64)b; v.rtype = MW_RT_I64; return a op v;                       \
  }                                                                                        \
  __device__ inline mw_val operator op(long long a, const mw_val &b) {                     \
    mw_val v; v.bits = (mw_u64)a; v.rtype = MW_RT_I64; return v op b;                       \
  }                                                                                        \
  __device__ inline mw_val operator op(const mw_val &a, int b) { return a op (long long)b; } \
  __device__ inline mw_val operator op(int a, const mw_val &b) { return (long long)a op b; } \
  __device__ inline mw_val operator op(const mw_val &a, long b) { return a op (long long)b; } \
  __device__ inline mw_val operator op(long a, const mw_val &b) { return (long long)a op b; } \
  __device__ inline double operator op(const mw_val &a, double b) { return a.as_double() op b; } \
  __device__ inline double operator op(double a, const mw_val &b) { return a op b.as_double(); } \
  __device__ inline float operator op(const mw_val &a, float b) { return (float)a.as_double() op b; } \
  __device__ inline float operator op(float a, const mw_val &b) { return a op (float)b.as_double(); }
MW_VAL_ARITH(+)
MW_VAL_ARITH(-)
MW_VAL_ARITH(*)
MW_VAL_ARITH(/)
#undef MW_VAL_ARITH
#define MW_VAL_CMP(op)                                                                     \
  __device__ inline bool operator op(const mw_val &a, const mw_val &b) {                   \
    return (a.is_float() || b.is_float()) ? a.as_double() op b.as_double()                 \
                                          : a.as_i64() op b.as_i64();                      \
  }                                                                                        \
  __device__ inline bool operator op(const mw_val &a, long long b) {                       \
    return a.is_float() ? a.as_double() op(double) b : a.as_i64() op b;                   \
  }                                                                                        \
  __device__ inline bool operator op(const mw_val &a, int b) { return a op (long long)b; } \
  __device__ inline bool operator op(const mw_val &a, double b) { return a.as_double() op b; }
MW_VAL_CMP(<)
MW_VAL_CMP(>)
MW_VAL_CMP(<=)
MW_VAL_CMP(>=)
MW_VAL_CMP(==)
MW_VAL_CMP(!=)
#undef MW_VAL_CMP

/* value(f): the result of a completed future. Reading a pending or stale one fails the task
 * at its next device call; the value read is 0. Collective. */
__device__ mw_val mw_value_of(mw_ctx *c, future f, int line) {
  mw_val v;
  v.bits = 0;
  v.rtype = MW_RT_I64;
  mw_u32 ok = 1;
  if (c->lane == 0) {
    if (f.h == 0 || f.h == MW_FUT_NOSLOT || MW_FUT_SLOT(f.h) >= c->st->nslots) {
      ok = 0;
    } else {
      mw_slot *sl = &c->st->slots[MW_FUT_SLOT(f.h)];
      mw_u64 ctl = mw_ld64(&sl->ctl);
      if ((mw_u32)(ctl >> 32) != MW_FUT_GEN(f.h) || (mw_u32)ctl != MW_CTL_CLOSED) {
        ok = 0;
      } else {
        MW_FENCE();
        v.bits = sl->value;
        v.rtype = sl->rtype;
      }
    }
  }
  (void)line;
  v.bits = mw_bcast64(v.bits);
  v.rtype = mw_bcast(v.rtype);
  if (!mw_bcast(ok) && c->status != MW_RUN_FAIL)
    mw_fail(c, MW_FAIL_NOT_READY, "value() of a future that is not complete");
  return v;
}

/* failed(f): true when a completed future failed or was cancelled. Collective. */
__device__ bool mw_failed_of(mw_ctx *c, future f) {
  mw_u32 r = 0;
  if (c->lane == 0 && f.h && f.h != MW_FUT_NOSLOT && f.h != MW_FUT_SKIPPED &&
      MW_FUT_SLOT(f.h) < c->st->nslots) {
    mw_slot *sl = &c->st->slots[MW_FUT_SLOT(f.h)];
    mw_u64 ctl = mw_ld64(&sl->ctl);
    r = (mw_u32)ctl == MW_CTL_CLOSED && (mw_u32)(ctl >> 32) == MW_FUT_GEN(f.h);
    if (r) {
      MW_FENCE();
      r = sl->status != MW_ST_OK;
    }
  } else if (c->lane == 0) {
    r = 1;
  }
  return mw_bcast(r) != 0;
}

/* The outcome of future f as task code reads it: an enum mw_status (PENDING while it runs), with
 * its failure code and message once FAILED or CANCELLED. A stale handle reads as FAILED with
 * MW_FAIL_STALE. Lane 0. */
__device__ mw_u32 mw_outcome(mw_state *st, mw_u64 fh, int *code, const char **msg) {
  *code = 0;
  *msg = "";
  if (fh == MW_FUT_NOSLOT) {
    *code = MW_FAIL_CAPACITY;
    *msg = "no free future slot for the spawn (capacity exhausted)";
    return MW_ST_FAILED;
  }
  if (fh == MW_FUT_SKIPPED) {
    *code = MW_FAIL_CANCELLED;
    *msg = "the spawn was skipped: the spawning task was cancelled";
    return MW_ST_CANCELLED;
  }
  if (fh != 0 && MW_FUT_SLOT(fh) < st->nslots) {
    mw_slot *sl = &st->slots[MW_FUT_SLOT(fh)];
    mw_u64 ctl = mw_ld64(&sl->ctl);
    mw_u32 og = (mw_u32)(ctl >> 32), g = MW_FUT_GEN(fh), w = (mw_u32)ctl;
    if ((og == g && w != MW_CTL_CLOSED) || (og + 1u == g && w == MW_CTL_CLOSED)) return MW_ST_PENDING;
    if (og == g) {
      MW_FENCE(); /* the result before its CLOSED */
      mw_u32 status = sl->status;
      if (status != MW_ST_OK) {
        *code = sl->code;
        *msg = sl->msg;
      }
      return status;
    }
  }
  *code = MW_FAIL_STALE;
  *msg = "stale or invalid future";
  return MW_ST_FAILED;
}

/* cancelled(f), fail_code(f), fail_message(f): whether a completed future was cancelled; its
 * failure code (0 unless it failed or was cancelled; MW_FAIL_CANCELLED = -9 when cancelled);
 * its message ("" unless it failed or was cancelled; valid while the future is held). For use
 * after try_await. Collective. */
__device__ bool mw_cancelled_of(mw_ctx *c, future f) {
  mw_u32 r = 0;
  if (c->lane == 0) {
    int code;
    const char *msg;
    r = mw_outcome(c->st, f.h, &code, &msg) == MW_ST_CANCELLED;
  }
  return mw_bcast(r) != 0;
}
__device__ int mw_fail_code_of(mw_ctx *c, future f) {
  int code = 0;
  if (c->lane == 0) {
    const char *msg;
    mw_outcome(c->st, f.h, &code, &msg);
  }
  return (int)mw_bcast((mw_u32)code);
}
__device__ const char *mw_fail_message_of(mw_ctx *c, future f) {
  const char *msg = "";
  if (c->lane == 0) {
    int code;
    mw_outcome(c->st, f.h, &code, &msg);
  }
  return (const char *)(mw_u64)mw_bcast64((mw_u64)msg);
}

/* cancel(f): asks the task of future f (a child, or any future the task holds) to stop; see
 * protocol.h, Cancellation. True when the request was delivered (f was pending), false when f
 * was complete or not a live future. Collective. */
__device__ bool mw_cancel_of(mw_ctx *c, future f, int line) {
  if (mw_diverged(c, "cancel", line, f.h)) return false;
  mw_u32 r = 0;
  if (c->lane == 0) r = (mw_u32)mw_cancel_fut(c, f.h);
  return mw_bcast(r) != 0;
}

/* The body's return value as result bits; on sim, lanes returning different values fail. */
__device__ void mw_store_bits(mw_ctx *c, mw_u64 bits) {
  if (c->status != MW_RUN_DONE) return;
  if (MW_CONVERGE("return", 0, bits)) {
    mw_fail(c, MW_FAIL_DIVERGED, "lanes returned different values (a task returns one value)");
    return;
  }
  c->value = bits;
}
template <class T> __device__ void mw_store_result(mw_ctx *c, T r) {
  mw_store_bits(c, (mw_u64)(long long)r);
}
__device__ void mw_store_result(mw_ctx *c, bool r) { mw_store_bits(c, r ? 1u : 0u); }
__device__ void mw_store_result(mw_ctx *c, float r) {
  union { float f; mw_u32 u; } x;
  x.f = r;
  mw_store_bits(c, x.u);
}
__device__ void mw_store_result(mw_ctx *c, double r) {
  union { double d; mw_u64 u; } x;
  x.d = r;
  mw_store_bits(c, x.u);
}
__device__ void mw_store_result(mw_ctx *c, future r) { mw_store_bits(c, r.h); }
__device__ void mw_store_result(mw_ctx *c, mw_val r) { mw_store_bits(c, r.bits); }

/* release(f): the running task gives up a child future it owns before it finishes (children
 * are otherwise released when their parent finishes), so a loop of spawns holds one slot, not
 * one per iteration. f must not be used afterwards. Collective. */
__device__ void mw_release(mw_ctx *c, future f) {
  if (c->lane == 0 && f.h && f.h != MW_FUT_NOSLOT) {
    mw_u32 s = MW_FUT_SLOT(f.h);
    mw_u32 *link = &c->hdr->children;
    while (*link && *link != s + 1) link = &c->st->slots[*link - 1].sibling;
    if (*link) { /* one of ours: unlink and drop the owner's reference */
      *link = c->st->slots[s].sibling;
      mw_slot_unref(c, s);
    }
  }
  __syncwarp();
}

/* ---- what task bodies write --------------------------------------------------------------- */
#define spawn(task, ...) mw_spawn__##task(_c, __LINE__, ##__VA_ARGS__)
#define spawn_bulk(task, n, ...) mw_spawn_bulk__##task(_c, __LINE__, (n), ##__VA_ARGS__)
#define value(f) mw_value_of(_c, (f), __LINE__)
#define failed(f) mw_failed_of(_c, (f))
#define cancelled(f) mw_cancelled_of(_c, (f))
#define fail_code(f) mw_fail_code_of(_c, (f))
#define fail_message(f) mw_fail_message_of(_c, (f))
#define cancel(f) mw_cancel_of(_c, (f), __LINE__)
#define release(f) mw_release(_c, (f))
#define fail(code, msg) return (mw_fail(_c, (code), (msg)), _mw_ret_t())
#define MW_AWAIT_(k, tolerant, ...)                                                       \
  do {                                                                                    \
    if (_c->lane == 0) _c->hdr->resume = (k);                                             \
    mw_save_frame(_c, this, (mw_u32)sizeof(*this));                                       \
    {                                                                                     \
      const future _mw_fs[] = {__VA_ARGS__};                                              \
      if (mw_await(_c, _mw_fs, (mw_u32)(sizeof(_mw_fs) / sizeof(future)), __LINE__))      \
        return (_c->status = MW_RUN_SUSPEND, _mw_ret_t());                                \
    }                                                                                     \
    case (k):                                                                             \
      if (mw_after_await(_c, (tolerant))) return _mw_ret_t();                              \
  } while (0)
/* The resume point is the user's line number (NVRTC has no __COUNTER__): one await per line.
 * try_await(f, ...) waits like await but leaves a failed or cancelled future to the task. */
#define await(...) MW_AWAIT_(__LINE__, false, __VA_ARGS__)
#define await_all(...) MW_AWAIT_(__LINE__, false, __VA_ARGS__)
#define try_await(...) MW_AWAIT_(__LINE__, true, __VA_ARGS__)

/* ---- the executor --------------------------------------------------------------------------- */

/* ---- task traces (protocol.h): lane 0 only; nothing here runs while tracing is off ---------- */

/* Takes up a change of mw_state.trace_gen: the buffer of a new recording, or none. */
__device__ __noinline__ void mw_trace_switch(mw_ctx *c, mw_u32 gen) {
  mw_state *st = c->st;
  MW_FENCE(); /* gen before the fields the host wrote ahead of it */
  c->trace_ev = 0;
  c->trace_head = 0;
  mw_u8 *buf = (mw_u8 *)mw_ld64((const mw_u64 *)&st->trace_buf);
  mw_u32 nw = mw_ld32(&st->trace_workers), cap = mw_ld32(&st->trace_cap);
  if ((gen & 1u) && buf && c->wid < nw) {
    c->trace_head = (mw_trace_head *)buf + c->wid;
    c->trace_ev = (mw_trace_ev *)(buf + (mw_u64)nw * sizeof(mw_trace_head)) + (mw_u64)c->wid * cap;
    c->trace_cap = cap;
    c->trace_n = mw_ld64(&c->trace_head->count);
  }
  c->trace_gen = gen;
  __threadfence_system(); /* the events written so far before the ack (the host reads them next) */
  mw_u32 *ack = (mw_u32 *)mw_ld64((const mw_u64 *)&st->trace_ack);
  if (ack) mw_st32(&ack[c->wid], gen);
}

/* The start of a run (see mw_trace_ev). */
__device__ __noinline__ void mw_trace_begin(mw_ctx *c, mw_u32 kind, mw_u64 fut, mw_u32 arg) {
  c->trace_run.kind = (mw_u16)kind;
  c->trace_run.fut = fut;
  c->trace_run.arg = arg;
  c->trace_run.t0 = MW_GLOBALTIMER();
}

/* Its end: the event goes to the worker's buffer, or is counted as dropped. */
__device__ __noinline__ void mw_trace_end(mw_ctx *c, mw_u32 end, mw_u32 n) {
  mw_trace_ev *r = &c->trace_run;
  r->t1 = MW_GLOBALTIMER();
  r->end = (mw_u8)end;
  r->n = (mw_u8)n;
  mw_u64 k = c->trace_n++;
  if (k < c->trace_cap) c->trace_ev[k] = *r;
  c->trace_head->count = k + 1;
}

/* Takes one spawn from the host inbox and makes it a task in a fresh frame; cancel requests
 * met on the way are carried out (no frame needed). Collective. Returns the frame, or MW_NONE
 * if the inbox is empty or no frame is free. */
__device__ mw_u32 mw_take_inbox(mw_ctx *c) {
  mw_state *st = c->st;
  mw_u64 t = 0;
  mw_u32 f = MW_NONE;
  if (c->lane == 0) {
    for (int round = 0; round < 16; ++round) {
      t = mw_ld64(&st->inbox_head);
      volatile mw_inbox_cell *cell = &st->inbox[t & (st->inbox_cap - 1)];
      if (cell->seq != t + 1) break;
      __threadfence_system(); /* seq before the payload (pairs with the host's release) */
      if (cell->flags & MW_IN_CANCEL) {
        if (mw_cas64(&st->inbox_head, t, t + 1) != t) continue; /* another worker took it */
        mw_u64 fut = cell->fut;
        __threadfence_system();
        cell->seq = t + st->inbox_cap; /* the cell is free again */
        mw_cancel_fut(c, fut);
        continue;
      }
      f = mw_frame_alloc(c);
      if (f != MW_NONE && mw_cas64(&st->inbox_head, t, t + 1) != t) {
        mw_frame_free(c, f); /* another worker took it */
        f = MW_NONE;
      }
      break;
    }
  }
  f = mw_bcast(f);
  if (f == MW_NONE) return MW_NONE;
  t = mw_bcast64(t);
  volatile mw_inbox_cell *cell = &st->inbox[t & (st->inbox_cap - 1)];
  mw_frame_hdr *fh = mw_frame(st, f);
  /* payload: the argument struct, then zeroes up to the frame's end */
  mw_u32 *dst = (mw_u32 *)((mw_u8 *)fh + MW_FRAME_HDR_BYTES);
  const volatile mw_u32 *src = (const volatile mw_u32 *)cell->args;
  mw_u32 payload = st->frame_bytes - MW_FRAME_HDR_BYTES;
  for (mw_u32 i = c->lane; i * 4 < payload; i += 32)
    dst[i] = i < MW_INBOX_ARG_BYTES / 4 ? src[i] : 0u;
  __syncwarp();
  if (c->lane == 0) {
    mw_u64 fut = cell->fut;
    mw_u32 kind = cell->kind, flags = cell->flags, bn = cell->bulk_n;
    __threadfence_system();
    cell->seq = t + st->inbox_cap; /* the cell is free again */
    fh->kind = kind;
    fh->resume = 0;
    fh->fut = fut;
    fh->children = 0;
    fh->flags = MW_FR_HOST | ((flags & MW_IN_BULK) ? MW_FR_BULK : 0);
    fh->await_f[0] = fh->await_f[1] = 0;
    fh->bulk_n = bn;
    fh->bulk_next = 0;
    fh->bulk_done = 0;
    fh->bulk_refs = 1;
    mw_u32 s = MW_FUT_SLOT(fut);
    mw_slot *sl = &st->slots[s];
    sl->kind = kind;
    sl->refs = 1;
    sl->fref = mw_frame_open(st, f);
    mw_stat(c, kind)->spawned++;
    MW_FENCE();
    if (kind >= st->nkinds) {
      mw_complete_slot(c, s, MW_FUT_GEN(fut), MW_ST_FAILED, 0, MW_RT_VOID, MW_FAIL_BAD_KIND,
                       "no such task kind in the executor", 0);
      mw_stat(c, kind)->failed++;
      mw_frame_free(c, f);
      f = MW_NONE;
    } else if (flags & MW_IN_CANCELLED) { /* cancelled by the host before it got here */
      char buf[MW_MSG_BYTES];
      mw_cancel_msg(buf, kind);
      mw_complete_slot(c, s, MW_FUT_GEN(fut), MW_ST_CANCELLED, 0, mw_kind_rtype(kind),
                       MW_FAIL_CANCELLED, buf, 0);
      mw_stat(c, kind)->cancelled++;
      mw_frame_free(c, f);
      f = MW_NONE;
    } else if ((flags & MW_IN_BULK) && bn == 0) {
      mw_complete_slot(c, s, MW_FUT_GEN(fut), MW_ST_OK, 0, MW_RT_VOID, 0, 0, 0);
      mw_stat(c, kind)->completed++;
      mw_frame_free(c, f);
      f = MW_NONE;
    }
  }
  return mw_bcast(f);
}

/* Whether this worker is a poller that has not looked at the inbox for 20 us: a busy poller
 * still takes host spawns and cancel requests (which would otherwise wait until the device has
 * nothing else to do). Collective. */
#define MW_POLL_NS 20000ull
__device__ bool mw_poll_due(mw_ctx *c) {
  mw_u32 due = 0;
  if (c->lane == 0 && c->wid < MW_POLLERS) {
    mw_u64 now = MW_GLOBALTIMER();
    if (now - c->polled >= MW_POLL_NS) {
      c->polled = now;
      due = 1;
    }
  }
  return mw_bcast(due) != 0;
}

/* Picks the next task: the inbox when a poll is due, LIFO slot, own deque, inbox (pollers),
 * global queue, then stealing. Collective. */
__device__ mw_u32 mw_next(mw_ctx *c, mw_u32 idle) {
  mw_u32 f = MW_NONE;
  mw_state *st = c->st;
  if (mw_poll_due(c)) {
    f = mw_take_inbox(c);
    if (f != MW_NONE) return f;
  }
  if (c->lane == 0) {
    mw_worker *w = c->w;
    f = w->lifo;
    if (f != MW_NONE) w->lifo = MW_NONE;
    if (f == MW_NONE) f = mw_deque_pop(c);
  }
  f = mw_bcast(f);
  if (f != MW_NONE) return f;
  if (c->wid < MW_POLLERS || (idle & 1023) == 1023) {
    f = mw_take_inbox(c);
    if (f != MW_NONE) return f;
  }
  if (c->lane == 0) {
    f = mw_gq_pop(st);
    for (int tries = 0; f == MW_NONE && tries < 4 && st->nworkers > 1; ++tries) {
      mw_worker *w = c->w;
      w->rng = w->rng * 1664525u + 1013904223u;
      mw_u32 v = (w->rng >> 8) % st->nworkers;
      if (v == c->wid) continue;
      f = mw_deque_steal(&st->workers[v]);
      if (f != MW_NONE) w->steals++;
    }
  }
  return mw_bcast(f);
}

/* Runs one step of frame f: the body until it returns or suspends. Collective. */
__device__ void mw_run_plain(mw_ctx *c, mw_u32 f) {
  c->frame = f;
  c->hdr = mw_frame(c->st, f);
  c->home = (mw_u8 *)c->hdr + MW_FRAME_HDR_BYTES;
  c->index = 0;
  c->bulk = 0;
  c->status = MW_RUN_DONE;
  c->fail_code = 0;
  c->fail_msg = 0;
  c->fail_fut = 0;
  c->value = 0;
  c->cancelled = 0;
  MW_FENCE();
  mw_u32 kind = c->hdr->kind;
  c->resume = c->hdr->resume;
  if (c->trace_ev) mw_trace_begin(c, kind, c->hdr->fut, c->resume);
  mw_u32 cx = 0;
  if (c->lane == 0 && c->resume == 0) cx = mw_cancel_asked(c->st, c->hdr->fut);
  if (mw_bcast(cx)) { /* cancelled before it started: the body never runs */
    c->cancelled = 1;
    if (c->trace_ev) mw_trace_end(c, MW_TR_CANCELLED, 0);
    if (c->lane == 0) mw_finish(c);
    __syncwarp();
    return;
  }
#ifdef MW_SIM
  if (c->lane == 0) c->w->running = f + 1; /* so a restarted warp knows whose body it left */
#endif
  mw_dispatch(c, kind); /* copies the frame, __syncwarp(), runs the body */
#ifdef MW_SIM
  if (c->lane == 0) c->w->running = 0;
#endif
  __syncwarp();
  if (c->trace_ev)
    mw_trace_end(c, c->cancelled ? MW_TR_CANCELLED
                    : c->status == MW_RUN_DONE ? MW_TR_DONE
                    : c->status == MW_RUN_SUSPEND ? MW_TR_AWAIT : MW_TR_FAILED, 0);
  if (c->status == MW_RUN_SUSPEND) return; /* the frame belongs to its waker now */
  if (c->lane == 0) mw_finish(c);
  __syncwarp();
}

/* Runs instances of a bulk frame until none are left to claim; the worker that finishes the
 * last instance completes the future; the last reference frees the frame. A cancelled bulk
 * task runs no more instances: the worker that sees the request claims the rest and skips
 * them. Collective. */
__device__ void mw_run_bulk(mw_ctx *c, mw_u32 f) {
  mw_state *st = c->st;
  mw_frame_hdr *h = mw_frame(st, f);
  c->frame = f;
  c->hdr = h;
  c->home = (mw_u8 *)h + MW_FRAME_HDR_BYTES;
  c->bulk = 1;
  c->cancelled = 0;
  mw_u32 n = h->bulk_n;
  mw_u32 chunk = n / (st->nworkers * 8u);
  chunk = chunk < 1 ? 1 : (chunk > 64 ? 64 : chunk);
  mw_u32 kind = h->kind;
  bool shared = false;
  for (;;) {
    /* a poller goes on taking from the inbox while it runs a long bulk task: host spawns and
     * cancel requests (this task's own included) are not held up by it */
    if (mw_poll_due(c)) {
      mw_u32 g = mw_take_inbox(c);
      if (g != MW_NONE && c->lane == 0) mw_deque_push(c, g);
    }
    mw_u32 i = 0, skip = 0;
    if (c->lane == 0) {
      if (mw_cancel_asked(st, h->fut)) {
        i = atomicExch(&h->bulk_next, n); /* [i, n) is ours to skip; later claims find n */
        skip = 1;
      } else {
        i = atomicAdd(&h->bulk_next, chunk);
        if (!shared && i + chunk < n) { /* let another worker join in */
          atomicAdd(&h->bulk_refs, 1u);
          mw_deque_push(c, f);
          shared = true;
        }
      }
    }
    i = mw_bcast(i);
    skip = mw_bcast(skip);
    if (i >= n) break;
    mw_u32 end = skip ? n : (i + chunk < n ? i + chunk : n);
    mw_u32 failed = 0;
    if (skip && c->lane == 0) atomicOr(&h->flags, (mw_u32)MW_FR_CANCEL);
    if (c->trace_ev && !skip) mw_trace_begin(c, kind, h->fut, i);
    for (mw_u32 k = i; k < end && !skip; ++k) {
      c->index = k;
      c->resume = 0;
      c->status = MW_RUN_DONE;
      c->fail_fut = 0;
      mw_dispatch(c, kind);
      __syncwarp();
      if (c->status != MW_RUN_DONE && !failed) {
        failed = 1;
        if (c->lane == 0) { /* the first failure wins; the message is kept in the frame */
          if (!(atomicOr(&h->flags, (mw_u32)MW_FR_FAILED) & MW_FR_FAILED)) {
            mw_slot *sl = &st->slots[MW_FUT_SLOT(h->fut)];
            sl->code = c->fail_code;
            mw_strcpy(sl->msg, mw_kind_name(kind), MW_MSG_BYTES, 0);
            int m = 0;
            while (sl->msg[m]) ++m;
            mw_strcpy(sl->msg, ": ", MW_MSG_BYTES, m);
            mw_strcpy(sl->msg, c->fail_msg ? c->fail_msg : "failed", MW_MSG_BYTES, m + 2);
          }
        }
      }
    }
    if (c->trace_ev && !skip) mw_trace_end(c, failed ? MW_TR_FAILED : MW_TR_DONE, end - i);
    if (c->lane == 0) {
      MW_FENCE();
      if (atomicAdd(&h->bulk_done, end - i) + (end - i) == n) {
        mw_slot *sl = &st->slots[MW_FUT_SLOT(h->fut)];
        mw_u32 s = MW_FUT_SLOT(h->fut), g = MW_FUT_GEN(h->fut);
        mw_u32 fl = mw_ld32(&h->flags);
        char msg[MW_MSG_BYTES];
        if (fl & MW_FR_CANCEL) {
          mw_cancel_msg(msg, kind);
          mw_complete_slot(c, s, g, MW_ST_CANCELLED, 0, MW_RT_VOID, MW_FAIL_CANCELLED, msg, 0);
          mw_stat(c, kind)->cancelled++;
        } else if (fl & MW_FR_FAILED) {
          for (int q = 0; q < MW_MSG_BYTES; ++q) msg[q] = sl->msg[q];
          mw_complete_slot(c, s, g, MW_ST_FAILED, 0, MW_RT_VOID, sl->code, msg, 0);
          mw_stat(c, kind)->failed++;
        } else {
          mw_complete_slot(c, s, g, MW_ST_OK, 0, MW_RT_VOID, 0, 0, 0);
          mw_stat(c, kind)->completed++;
        }
        mw_slot_unref(c, s);
      }
    }
  }
  if (c->lane == 0) {
    MW_FENCE();
    if (atomicSub(&h->bulk_refs, 1u) == 1u) mw_frame_free(c, f);
  }
  c->bulk = 0;
  __syncwarp();
}

/* Hands everything this worker holds to shared structures before it exits, so that a relaunch
 * with a different number of workers loses nothing. Lane 0. */
__device__ void mw_flush(mw_ctx *c) {
  mw_worker *w = c->w;
  mw_state *st = c->st;
  if (w->lifo != MW_NONE) mw_gq_push(st, w->lifo);
  w->lifo = MW_NONE;
  for (mw_u32 f; (f = mw_deque_pop(c)) != MW_NONE;) mw_gq_push(st, f);
  while (w->nfree_frames) mw_stack_push(&st->frame_head, st->frame_next, w->free_frames[--w->nfree_frames]);
  while (w->nfree_slots) mw_stack_push(&st->slot_head, st->slot_next, w->free_slots[--w->nfree_slots]);
}

/* The stop barrier (protocol.h, Stopping): true when every worker arrived and all leave,
 * false when the host withdrew the stop first and this worker goes back to work. Lane 0. */
__device__ bool mw_stop_barrier(mw_state *st) {
  mw_u32 n = st->nworkers;
  atomicAdd(&st->stop_arrived, 1u);
  for (;;) {
    mw_u32 a = mw_ld32(&st->stop_arrived);
    if (a >= n) return true;
    if (!mw_ld32(&st->stop) && atomicCAS(&st->stop_arrived, a, a - 1u) == a) return false;
    __nanosleep(1024);
  }
}

__device__ void mw_executor(mw_state *st) {
  mw_ctx c;
  c.st = st;
  c.lane = threadIdx.x & 31u;
  c.wid = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  if (c.wid >= st->nworkers) return;
  c.w = &st->workers[c.wid];
  c.bulk = 0;
  c.cancelled = 0;
  c.polled = 0;
  c.trace_gen = 0;
  c.trace_ev = 0;
  c.trace_head = 0;
#ifdef MW_SIM
  /* lanes that diverge across call sites cannot be trusted to go on: the warp is restarted,
   * and the task it was running fails with the divergence message */
  __mw_sim_restart_on_divergence();
  if (c.lane == 0 && c.w->running) {
    c.frame = c.w->running - 1;
    c.hdr = mw_frame(st, c.frame);
    c.home = (mw_u8 *)c.hdr + MW_FRAME_HDR_BYTES;
    c.status = MW_RUN_FAIL;
    c.fail_code = MW_FAIL_DIVERGED;
    c.fail_msg = c.w->abort_msg;
    c.fail_fut = 0;
    c.cancelled = 0;
    c.value = 0;
    mw_finish(&c);
    c.w->running = 0;
  }
  __syncwarp();
#endif
  mw_u32 idle = 0, nap = 32, tasks = 0;
  bool poller = c.wid < MW_POLLERS;
  for (;;) {
    mw_u32 stop = 0;
    if (c.lane == 0) {
      stop = mw_ld32(&st->stop);
      /* in flight together with the stop flag's load; one predictable branch while off */
      mw_u32 tg = mw_ld32(&st->trace_gen);
      if (tg != c.trace_gen) mw_trace_switch(&c, tg);
      if (idle && poller && (idle & 255) == 0) st->ctl->heartbeat = MW_GLOBALTIMER();
    }
    if (mw_bcast(stop)) {
      mw_u32 leave = 0;
      if (c.lane == 0) {
        mw_flush(&c);
        leave = mw_stop_barrier(st);
      }
      if (mw_bcast(leave)) break;
      continue;
    }
    mw_u32 f = mw_next(&c, idle);
    if (f == MW_NONE) {
      ++idle;
      if (c.lane == 0) c.w->idle_loops++;
      __nanosleep(nap);
      if (nap < 4096) nap *= 2;
      continue;
    }
    idle = 0;
    nap = 32;
    if (c.lane == 0 && (++tasks & 4095) == 0) st->ctl->heartbeat = MW_GLOBALTIMER();
    if (mw_frame(st, f)->flags & MW_FR_BULK)
      mw_run_bulk(&c, f);
    else
      mw_run_plain(&c, f);
  }
  if (c.lane == 0) {
    __threadfence_system();
    atomicAdd((mw_u32 *)&st->ctl->exited, 1u);
  }
  __syncwarp();
}

#endif /* MW_RUNTIME_CUH */
