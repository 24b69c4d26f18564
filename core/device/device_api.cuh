/* device_api.cuh - the device API that generated task code calls: spawn, await, value, release,
 * the levels of a warp's inline chain, its children and how a level finishes.
 *
 * The second of the executor's three files, compiled after runtime.cuh (its state, queues and
 * handshakes) and before executor.cuh (the scheduler loop); see runtime.cuh's opening comment. */
#ifndef MW_DEVICE_API_CUH
#define MW_DEVICE_API_CUH

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
  const char *parts[] = {what, MW_DIVERGED_AT};
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
  /* the call site: the file (sim: the running task's, mw_kind_file) and line of the code */
  if (MW_CONVERGE(mw_kind_file(c->kind), line, key)) {
    mw_fail(c, MW_FAIL_DIVERGED, mw_divergence_msg(c, what, line));
    return true;
  }
  return false;
}

/* Lane 0 of a spawn of kind (ki, argument struct args) by the running level: the child's
 * future, its slot pending with two references (the task and its owner) and first among the
 * level's children (*sib: the link it stores), and its frame in *f, reserved now: capacity means
 * frames (none free: the future fails with the capacity error and *f is MW_NONE). The argument
 * futures' holds go with the frame. MW_FUT_NOSLOT from a bulk instance (they share a frame and
 * may not own children) or with no slot free; MW_FUT_SKIPPED, *cx set, from a cancelled task
 * (it spawns nothing more and ends cancelled). */
__device__ __forceinline__ mw_u64 mw_spawn_slot(mw_ctx *c, mw_u32 kind, const mw_kind_info *ki, const void *args,
                                                mw_u32 *f, mw_u32 *cx, mw_u32 *sib) {
  mw_level *L = MW_LV(c);
  mw_u32 s = MW_NONE, gen = 0;
  if (c->bulk) return MW_FUT_NOSLOT;
  if (c->cancelled) {
    *cx = 1;
    return MW_FUT_SKIPPED;
  }
  if ((s = mw_slot_alloc(c, &gen)) == MW_NONE) return MW_FUT_NOSLOT;
  MW_PROBE(MW_PR_SLOT_INIT);
  mw_slot *sl = &c->slots[s];
  sl->kind = kind;
  sl->status = MW_ST_PENDING;
  sl->refs = 2;
  sl->fref = 0;
  sl->sibling = *sib = L->children;
  mw_count(c, kind, MW_CNT_SPAWNED);
  *f = mw_frame_alloc(c);
  if (*f == MW_NONE) {
    sl->refs = 1;
    mw_count(c, kind, MW_CNT_FAILED);
    mw_complete_slot(c, s, gen, MW_ST_FAILED, 0, ki->rtype, MW_FAIL_CAPACITY,
                     "no free task frame (capacity exhausted)", mw_kind_name(kind));
    sl->sibling = L->children;
  } else if (ki->futargs) { /* its handles leave with it: nothing spawned so far is private */
    MW_WS(c)->epoch++;
    mw_take_holds(c, ki->futargs, (const mw_u8 *)args);
  }
  L->children = s + 1;
  return MW_FUT_MAKE(s, gen);
}

/* Spawns a task of kind with the argument struct args (the kind's args_bytes; the same in
 * every lane). A plain spawn becomes a record of this warp (protocol.h); a bulk spawn a frame
 * in the global run queue at once. Collective; returns the future in every lane. */
__device__ __noinline__ future mw_spawn_raw(mw_ctx *c, mw_u32 kind, const void *args, mw_u32 bulk_n, bool bulk,
                               int line) {
  MW_PROBE(MW_PR_SPAWN);
  future fu;
  fu.h = 0;
  const mw_kind_info *ki = mw_kind(kind);
  mw_u64 key = kind;
#ifdef MW_SIM
  for (mw_u32 i = 0; i < ki->args_bytes; ++i) key = (key ^ ((const mw_u8 *)args)[i]) * 1099511628211ull;
#endif
  if (mw_diverged(c, "spawn", line, key)) return fu;
  mw_tick(c);
  mw_u64 h = 0;
  mw_u32 r = MW_NONE, f = MW_NONE, cx = 0, sib = 0; /* sib: lane 0's, the record's sibling link */
  mw_u32 tgen = 0; /* lane 0's: the child's generation */
  if (c->lane == 0) {
    MW_PROBE(MW_PR_SPAWN0);
    h = mw_spawn_slot(c, kind, ki, args, &f, &cx, &sib);
    if (f != MW_NONE && !bulk) {
      r = mw_rec_get(c);
      tgen = MW_GEN_OF(MW_LV(c)->flags);
      tgen += tgen < MW_GEN_MAX;
    }
  }
  h = mw_bcast64(h);
  mw_u32 meta = mw_bcast((r & 255u) | cx << 8 | (f != MW_NONE) << 9);
  if (meta & (1u << 8)) c->cancelled = 1;
  if (!(meta & (1u << 9))) {
    fu.h = h;
    return fu;
  }
  r = meta & 255u;
  const mw_u32 *src = (const mw_u32 *)args;
  if (!bulk) {
    /* the record: each lane copies its share of the arguments (every lane holds the same) */
    mw_rec *rec = &MW_WS(c)->rec[r];
    mw_u32 *dst = (mw_u32 *)rec->args;
    for (mw_u32 i = c->lane; i * 4 < ki->args_bytes; i += 32) dst[i] = src[i];
    __syncwarp();
    if (c->lane == 0) {
      rec->kind = kind;
      rec->fut = h;
      rec->frame = f;
      rec->flags = MW_RF_SPAWN;
      rec->epoch = MW_WS(c)->epoch;
      rec->sibling = sib; /* as stored in its slot (not read back from device memory) */
      rec->gen = tgen;
      MW_WS(c)->last_rec = r;
      mw_rec_ready(c, r);
    }
  } else {
    f = mw_bcast(f);
    mw_frame_hdr *fh = mw_frame(c, f);
    mw_u32 *dst = (mw_u32 *)((mw_u8 *)fh + MW_FRAME_HDR_BYTES);
    mw_frame_from_args(dst, src, ki, c->lane, 32);
    __syncwarp();
    if (c->lane == 0) {
      mw_frame_hdr_fresh(fh, kind, h, MW_FR_BULK, bulk_n);
      c->slots[MW_FUT_SLOT(h)].fref = mw_frame_open(c, f);
      if (bulk_n && (ki->flags & MW_KIND_LEAF) && !MW_NO_BULK_JOIN) { /* protocol.h, Joining a bulk task */
        r = mw_rec_get(c);
        mw_rec *rec = &MW_WS(c)->rec[r];
        rec->frame = f;
        rec->flags = MW_RF_BULK;
        rec->kind = kind;
        rec->fut = 0;
        MW_FENCE(); /* the frame before the record: a thief may hand it to another CTA */
        mw_rec_ready(c, r);
        MW_LV(c)->bulk = f + 1;
      } else if (bulk_n == 0) { /* nothing to run: complete now */
        mw_frame_free(c, f);
        mw_count(c, kind, MW_CNT_COMPLETED);
        mw_complete_slot(c, MW_FUT_SLOT(h), MW_FUT_GEN(h), MW_ST_OK, 0, MW_RT_VOID, 0, 0, 0);
        mw_slot_unref(c, MW_FUT_SLOT(h), MW_FUT_GEN(h), 1);
      } else {
        mw_gq_push(c->st, f);
      }
    }
  }
  __syncwarp();
  fu.h = h;
  return fu;
}

/* Spawns a block task of kind (protocol.h, Block tasks): n instances (bulk), else one. Its frame
 * goes to the global run queue at once, for a worker CTA to hold and run; an await of it never
 * runs it inline, it suspends until the CTA completes it. (The generated spawns of block kinds
 * call this, so spawns of warp tasks pay nothing for it.) Collective. */
__device__ __noinline__ future mw_spawn_block(mw_ctx *c, mw_u32 kind, const void *args, mw_u32 n, bool bulk,
                                              int line) {
  MW_PROBE(MW_PR_SPAWN);
  future fu;
  fu.h = 0;
  const mw_kind_info *ki = mw_kind(kind);
  mw_u64 key = kind ^ (mw_u64)n << 40;
#ifdef MW_SIM
  for (mw_u32 i = 0; i < ki->args_bytes; ++i) key = (key ^ ((const mw_u8 *)args)[i]) * 1099511628211ull;
#endif
  if (mw_diverged(c, "spawn", line, key)) return fu;
  mw_tick(c);
  if (!bulk) n = 1;
  mw_u64 h = 0;
  mw_u32 f = MW_NONE, cx = 0;
  if (c->lane == 0) {
    mw_u32 sib = 0;
    h = mw_spawn_slot(c, kind, ki, args, &f, &cx, &sib);
  }
  h = mw_bcast64(h);
  if (mw_bcast(cx)) c->cancelled = 1;
  f = mw_bcast(f);
  if (f != MW_NONE) {
    mw_frame_hdr *fh = mw_frame(c, f);
    mw_frame_from_args((mw_u32 *)((mw_u8 *)fh + MW_FRAME_HDR_BYTES), (const mw_u32 *)args, ki, c->lane, 32);
    __syncwarp();
    if (c->lane == 0) {
      mw_frame_hdr_fresh(fh, kind, h, MW_FR_BLOCK, n);
      c->slots[MW_FUT_SLOT(h)].fref = mw_frame_open(c, f);
      if (n == 0) { /* nothing to run: complete now */
        if (ki->futargs) mw_drop_holds(c, ki->futargs, (const mw_u8 *)fh + MW_FRAME_HDR_BYTES);
        mw_frame_free(c, f);
        mw_count(c, kind, MW_CNT_COMPLETED);
        mw_complete_slot(c, MW_FUT_SLOT(h), MW_FUT_GEN(h), MW_ST_OK, 0, MW_RT_VOID, 0, 0, 0);
        mw_slot_unref(c, MW_FUT_SLOT(h), MW_FUT_GEN(h), 1);
      } else {
        mw_gq_push(c->st, f); /* its fence publishes the frame */
      }
    }
    __syncwarp();
  }
  fu.h = h;
  return fu;
}

/* Where the await in progress keeps its futures: after the running level's frame. */
__device__ __forceinline__ mw_u32 mw_await_off(mw_ctx *c) {
  return c->off + mw_round16(mw_kind(c->kind)->frame_bytes);
}

__device__ __noinline__ bool mw_await_more(mw_ctx *c);

__device__ __forceinline__ bool mw_leaf_call_ok(mw_ctx *c, const mw_kind_info *ki);
__device__ __noinline__ void mw_run_leaf(mw_ctx *c, mw_u32 r, mw_u32 off);
__device__ __noinline__ void mw_run_pure(mw_ctx *c, mw_u32 r, mw_u32 off);

/* Whether the spawn in record rec, of kind ki, which this warp claimed for a plain call, may
 * run with no level (mw_run_pure): a pure kind whose private completion needs nothing of a
 * level (what mw_finish_plain checks: no future arguments or result, no cancellation, the
 * warp's epoch, not a host future). MW_NO_PURE_CALL gives every leaf a level, to compare.
 * Lane 0. */
__device__ __forceinline__ mw_u32 mw_pure_ok(mw_ctx *c, const mw_kind_info *ki, const mw_rec *rec) {
#ifdef MW_NO_PURE_CALL
  return 0;
#else
  return (ki->flags & MW_KIND_PURE) && !ki->futargs && ki->rtype != MW_RT_FUTURE &&
         !(rec->flags & MW_RF_CANCELLED) && rec->epoch == MW_WS(c)->epoch &&
         MW_FUT_SLOT(rec->fut) >= c->host_slots;
#endif
}

/* The await of one future h that is this warp's latest spawn, still in its record, of a kind
 * that never awaits (the chain's step: spawn, then await at once): the child is claimed and
 * run at once as a plain call (mw_run_leaf), with none of the await's bookkeeping (the
 * futures noted on the lane stack, the look at each). What mw_await_more would do for it, in
 * fewer steps; anything else (a nested root waiting, a stop, a trace, a cancellation, no room
 * on the lane stack) takes the general path. Collective. Returns true when the await is
 * complete (the level's bad notes a failure of the child), false to take the general path. */
__device__ __noinline__ bool mw_await_leaf(mw_ctx *c, mw_u64 h) {
  mw_u32 go = 0;
  if (c->lane == 0 && !c->cancelled && !c->nest && !c->yield && c->status == MW_RUN_DONE &&
      c->d + 1 < MW_LEVELS) {
    MW_PROBE(MW_PR_LEAF_CLAIM);
    mw_wstate *ws = MW_WS(c);
    mw_u32 r = ws->last_rec;
    mw_rec *rec = &ws->rec[r];
    mw_u32 rs = mw_ld32(&rec->state);
    if (MW_REC_ST(rs) == MW_REC_READY && rec->fut == h && (rec->flags & MW_RF_SPAWN)) {
      const mw_kind_info *ki = mw_kind(rec->kind);
      mw_u32 coff = mw_round16(mw_await_off(c) + 8u); /* as the general path places it */
      if (mw_leaf_call_ok(c, ki) && coff + ki->frame_bytes <= MW_LSTACK_BYTES &&
          atomicCAS(&rec->state, rs, (rs & ~15u) | MW_REC_OWNED) == rs)
        go = 1u | mw_pure_ok(c, ki, rec) << 1 | r << 4 | coff << 12;
    }
  }
  go = mw_bcast(go);
  if (!go) return false;
  if (go & 2u) {
    mw_run_pure(c, (go >> 4) & 255u, go >> 12);
    return true;
  }
  mw_run_leaf(c, (go >> 4) & 255u, go >> 12);
  if (c->lane == 0) { /* its result is the newest of the recent results */
    mw_level *L = MW_LV(c);
    int k = mw_kid_recent(c, h);
    L->bad = k >= 0 && MW_WS(c)->kid[k].status == MW_ST_OK ? 0ull : h;
    L->naw = L->cur = 1;
  }
  __syncwarp();
  return true;
}

/* The await of one future h that completed elsewhere, and OK, before the await came: its slot
 * reads CLOSED at h's generation (a fan-out's awaits of children other warps ran). Its result
 * is noted for value() (ws->seen_*, which release() forgets), the level left as the general path
 * leaves it (mw_await_more: nothing bad, every future looked at), and nothing else is done: no
 * futures noted on the lane stack, no records searched, no bulk join. Anything else (pending,
 * failed, stale, a stop, a cancellation, a nested root waiting) takes the general path.
 * Collective. Returns true when the await is complete. */
__device__ __noinline__ bool mw_await_closed(mw_ctx *c, mw_u64 h) {
  MW_PROBE(MW_PR_AWAIT_CLOSED);
  mw_u32 go = 0;
  if (c->lane == 0 && !c->cancelled && !c->nest && !c->yield && c->status == MW_RUN_DONE &&
      mw_is_future(h) && !MW_FUT_IS_INLINE(h) && MW_FUT_SLOT(h) < c->nslots) {
    const mw_slot *sl = &c->slots[MW_FUT_SLOT(h)];
    const mw_u64 ctl = mw_ld64(&sl->ctl);
    if ((mw_u32)(ctl >> 32) == MW_FUT_GEN(h) && (mw_u32)ctl == MW_CTL_CLOSED) {
      MW_FENCE(); /* the result before its CLOSED (protocol.h, slots) */
      if (sl->status == MW_ST_OK) {
        mw_wstate *ws = MW_WS(c);
        ws->seen_fut = h;
        ws->seen_value = sl->value;
        ws->seen_rtype = sl->rtype;
        mw_level *L = MW_LV(c);
        L->bad = 0;
        L->naw = L->cur = 1;
        go = 1;
      }
    }
  }
  return mw_bcast(go) != 0;
}

/* Starts an await of fs[0..n) (protocol.h: the levels). Collective. Returns true when the body
 * must return now: a child runs inline first (MW_RUN_CALL), or the level suspended
 * (MW_RUN_SUSPEND; it touches nothing of its frame after, it may run on elsewhere already).
 * Returns false when every future is complete, or the task is to stop (mw_after_await then
 * stops it, or handles a failure among the futures). */
__device__ __noinline__ void mw_await_bulk(mw_ctx *c, mw_u64 h);
__device__ __noinline__ bool mw_await(mw_ctx *c, const future *fs, mw_u32 n, int line) {
  MW_PROBE(MW_PR_AWAIT);
  if (mw_diverged(c, "await", line, n ? fs[0].h : 0)) return false;
  if (c->bulk) {
    mw_fail(c, MW_FAIL_BULK_AWAIT, "a bulk instance cannot await");
    return false;
  }
  /* an await whose futures all carry their results never comes here (MW_AWAIT_, mw_await_done) */
  if (n == 1 && c->ran == fs[0].h && c->ran) { /* it ran at its spawn (mw_spawn_now) */
    c->ran = 0;
    return false;
  }
  mw_tick(c);
  if (n == 1 && mw_await_leaf(c, fs[0].h)) return false;
  if (n == 1 && mw_await_closed(c, fs[0].h)) return false;
  if (n == 1) mw_await_bulk(c, fs[0].h);
  mw_u32 off = mw_await_off(c);
  if (off + 8u * n > MW_LSTACK_BYTES) {
    mw_fail(c, MW_FAIL_CAPACITY, "await of more futures than the lane stack holds");
    return false;
  }
  mw_u64 *aw = (mw_u64 *)(c->stk + off);
  for (mw_u32 i = 0; i < n; ++i) aw[i] = fs[i].h;
  if (c->lane == 0) {
    mw_level *L = MW_LV(c);
    L->naw = (mw_u16)n;
    L->cur = 0;
    L->bad = 0;
    L->resume = (mw_u32)line;
  }
  return mw_await_more(c);
}

/* Level d + 1 set up for the spawn in record rec, claimed by this warp, its frame at off of the
 * lane stacks (its arguments are copied by the caller); the warp's depth counts it. Lane 0. */
__device__ __forceinline__ void mw_level_child(mw_ctx *c, mw_u64 fut, mw_u32 kind, mw_u32 frame, mw_u32 flags,
                                               mw_u32 epoch, mw_u32 sibling, mw_u32 off) {
  mw_wstate *ws = MW_WS(c);
  mw_level *K = &ws->lv[c->d + 1];
  K->fut = fut;
  K->bad = 0;
  K->kind = kind;
  K->resume = 0;
  K->frame = frame;
  K->children = 0;
  K->flags = flags;
  K->epoch = epoch;
  K->off = off;
  K->sibling = sibling;
  K->naw = K->cur = 0;
  K->bulk = 0;
  ws->depth = c->d + 2;
}
__device__ void mw_level_from_rec(mw_ctx *c, const mw_rec *rec, mw_u32 off) {
  mw_level_child(c, rec->fut, rec->kind, rec->frame /* reserved */,
                 ((rec->flags & MW_RF_CANCELLED) ? MW_LV_CANCELLED : 0u) | rec->gen << MW_GEN_SHIFT, rec->epoch,
                 rec->sibling, off);
}

/* Sets level d + 1 up for the spawn in record r, which this warp claimed (OWNED), and ends the
 * run of level d with MW_RUN_CALL: the trampoline runs the child next. Collective. */
__device__ __noinline__ void mw_call_child(mw_ctx *c, mw_u32 r, mw_u32 off) {
  MW_PROBE(MW_PR_CALL);
  mw_wstate *ws = MW_WS(c);
  mw_rec *rec = &ws->rec[r];
  mw_u32 kind = 0;
  if (c->lane == 0) {
    kind = rec->kind;
    mw_level_from_rec(c, rec, off);
  }
  kind = mw_bcast(kind);
  const mw_kind_info *ki = mw_kind(kind);
  mw_frame_from_args((mw_u32 *)(c->stk + off), (const mw_u32 *)rec->args, ki, 0, 1);
  __syncwarp();
  if (c->lane == 0) {
    /* no fence before FREE: the lanes' reads of the record are ordered by the __syncwarp, and
     * no other warp acts on a record that leaves OWNED (protocol.h, spawn records).
     * MW_CALL_FENCE keeps the CTA fence here, to compare. */
#ifdef MW_CALL_FENCE
    {
      MW_PROBE(MW_PR_FENCE_CALL);
      MW_FENCE_CTA();
    }
#endif
    mw_st32(&rec->state, (rec->state & ~15u) | MW_REC_FREE);
  }
  c->status = MW_RUN_CALL;
}

__device__ __noinline__ bool mw_suspend(mw_ctx *c);
__device__ __noinline__ void mw_root_from_rec(mw_ctx *c, mw_rec *r, mw_u32 lv, mw_u32 off);
__device__ __noinline__ void mw_finish_level(mw_ctx *c);

/* Whether a claimed child of kind ki may run as a plain call from the await (mw_run_leaf): it
 * never awaits, and nothing wants the trampoline between runs (a trace records each run there,
 * a trace switch is taken up there). Lane 0. MW_NO_LEAF_CALL keeps every child on the
 * trampoline, to compare. */
__device__ __forceinline__ bool mw_leaf_call_ok(mw_ctx *c, const mw_kind_info *ki) {
#ifdef MW_NO_LEAF_CALL
  return false;
#else
  return (ki->flags & MW_KIND_LEAF) && !c->trace_ev && !c->trace_due;
#endif
}

/* Completes future fut of a child of kind that ended done with c->value, privately (protocol.h,
 * Private completion): counted, its frame (MW_NONE: none) freed, the result in its slot, and an
 * entry among the warp's recent results for level lv, which awaits it. Lane 0. */
__device__ void mw_complete_private(mw_ctx *c, mw_u32 kind, mw_u64 fut, mw_u32 frame, mw_u32 sibling,
                                    mw_u32 epoch, mw_u32 lv) {
  MW_PROBE(MW_PR_PRIVATE);
  const mw_kind_info *ki = mw_kind(kind);
  mw_count(c, kind, MW_CNT_COMPLETED);
  if (frame != MW_NONE) mw_frame_free(c, frame);
  mw_slot *sl = &c->slots[MW_FUT_SLOT(fut)];
  mw_slot_result(sl, MW_ST_OK, c->value, ki->rtype, 0, 0, 0);
  mw_st64(&sl->ctl, ((mw_u64)MW_FUT_GEN(fut) << 32) | MW_CTL_CLOSED);
  mw_kid *K = mw_kid_new(c);
  K->fut = fut;
  K->value = c->value;
  K->sibling = sibling;
  K->epoch = epoch;
  K->status = MW_ST_OK;
  K->rtype = (mw_u8)ki->rtype;
  K->level = (mw_u8)lv;
  K->priv = 1;
  K->state = MW_KID_DONE;
}

/* MW_PLAIN_FINISH: the trampoline finishes an inline child that ended done with nothing to let
 * go the short way too. Faster per task on one worker (fib's finish 3,040 -> 2,338 cycles) but
 * fib on 1056 workers ran 69 M/s against 78 with the general way, twice in one run
 * (bench/NOTES.md): a variant until that is understood. */
#ifdef MW_PLAIN_FINISH
#define MW_TRAMPOLINE_PLAIN_FINISH 1
#else
#define MW_TRAMPOLINE_PLAIN_FINISH 0
#endif
/* Finishes the running level the short way when it is an inline child that ended done, owns
 * no children, holds no futures and returns none, and completes privately (protocol.h, Private
 * completion): what mw_finish_level does in that case. Lane 0. Returns false, having done
 * nothing, for any other case. */
__device__ bool mw_finish_plain(mw_ctx *c) {
  mw_wstate *ws = MW_WS(c);
  mw_level *L = MW_LV(c);
  const mw_kind_info *ki = mw_kind(L->kind);
  mw_u32 s = MW_FUT_SLOT(L->fut);
  if (c->cancelled || c->status != MW_RUN_DONE || L->children || ki->futargs ||
      ki->rtype == MW_RT_FUTURE || (L->flags & (MW_LV_CANCELLED | MW_LV_ROOT | MW_LV_PUBLIC)) ||
      L->epoch != ws->epoch || s < c->host_slots)
    return false;
  MW_PROBE(MW_PR_FINISH);
  mw_complete_private(c, L->kind, L->fut, L->frame, L->sibling, L->epoch, c->d - 1);
  ws->depth = c->d;
  return true;
}

/* Level d's run goes on after something ran above it on this warp from its await (a leaf child,
 * a bulk task's instances): its kind, frame offset and resume point as they were, a fresh
 * outcome. It was running its body, not failed, not cancelled when it started that; a
 * cancellation that came meanwhile (the periodic work marks the levels) stops it at its await
 * as on the trampoline. Collective. */
__device__ __forceinline__ void mw_level_back(mw_ctx *c, mw_u32 kind, mw_u32 off, mw_u32 resume) {
  mw_u32 cx = 0;
  if (c->lane == 0) cx = (MW_LV(c)->flags & MW_LV_CANCELLED) != 0;
  c->kind = kind;
  c->off = off;
  c->resume = resume;
  mw_run_fresh(c);
  c->cancelled = mw_bcast(cx);
}

/* Runs the child in record r, claimed by this warp (OWNED), at once as level d + 1, from the
 * await of level d: set up as mw_call_child does, run through mw_dispatch_leaf, finished, and
 * level d's run goes on with its state as it was. The child never awaits, so it ends in this
 * call, done or failed, and its result is in the warp's recent results like any inline child's.
 * The call graph stays acyclic: a leaf body does not reach mw_await_more. Collective. */
__device__ __noinline__ void mw_run_leaf(mw_ctx *c, mw_u32 r, mw_u32 off) {
  const mw_u32 kind = c->kind, poff = c->off, resume = c->resume;
  mw_call_child(c, r, off);
  c->d++;
  mw_u32 a = 0;
  if (c->lane == 0) {
    mw_level *K = MW_LV(c);
    a = K->kind | (K->flags & MW_LV_CANCELLED ? MW_KW_CANCELLED : 0u);
  }
  a = mw_bcast(a);
  c->kind = a & MW_KW_KIND;
  c->off = off;
  c->resume = 0;
  mw_run_fresh(c);
  c->cancelled = (a & MW_KW_CANCELLED) != 0;
  if (!c->cancelled) { /* cancelled before it started: it never runs */
    MW_PROBE(MW_PR_RUN);
    {
      MW_TASK_IN();
      mw_dispatch_leaf(c, c->kind, c->stk + off);
      MW_TASK_OUT();
    }
    __syncwarp();
  }
  if (c->lane == 0 && !mw_finish_plain(c)) mw_finish_level(c);
  __syncwarp();
  c->d--;
  mw_level_back(c, kind, poff, resume);
}

/* Runs the pure leaf in record r, claimed by this warp (OWNED), from the await of future h =
 * its spawn by level d, with no level of its own: its arguments to the lane stack at off, its
 * body called, and, done, completed privately from the record's fields (what mw_finish_plain
 * does from a level's). A failure sets the level up as mw_call_child would and finishes it the
 * general way. Level d's await is then complete (its bad notes a failure) and its run goes on
 * as it was. Collective. */
__device__ __noinline__ void mw_run_pure(mw_ctx *c, mw_u32 r, mw_u32 off) {
  mw_wstate *ws = MW_WS(c);
  mw_rec *rec = &ws->rec[r];
  const mw_u32 kind = rec->kind, resume = c->resume; /* every lane reads the record it owns */
  const mw_kind_info *ki = mw_kind(kind);
  mw_frame_from_args((mw_u32 *)(c->stk + off), (const mw_u32 *)rec->args, ki, 0, 1);
  c->resume = 0;
  c->value = 0;
  {
    MW_PROBE(MW_PR_PURE_BODY);
    MW_TASK_IN();
    mw_dispatch_leaf(c, kind, c->stk + off);
    MW_TASK_OUT();
  }
  __syncwarp();
  c->resume = resume;
  if (c->lane == 0) {
    MW_PROBE(MW_PR_FINISH);
    mw_level *L = MW_LV(c);
    const mw_u64 h = rec->fut;
    if (c->status == MW_RUN_DONE) {
      mw_complete_private(c, kind, h, rec->frame, rec->sibling, rec->epoch, c->d);
      L->bad = 0;
    } else { /* the general finish, on a level set up for it */
      mw_level_from_rec(c, rec, off);
      c->d++;
      mw_finish_level(c);
      c->d--;
      L->bad = h;
    }
    L->naw = L->cur = 1;
    mw_st32(&rec->state, (rec->state & ~15u) | MW_REC_FREE);
  }
  __syncwarp();
  mw_run_fresh(c);
}

#ifdef MW_ELIDE
/* An elided call that its task's cancellation stopped: one spawned, one cancelled. Collective. */
__device__ __noinline__ void mw_count_cancelled_call(mw_ctx *c, mw_u32 kind) {
  if (c->lane == 0) {
    mw_count(c, kind, MW_CNT_SPAWNED);
    mw_count(c, kind, MW_CNT_CANCELLED);
  }
  __syncwarp();
}
#endif

/* The end of a spawn-now whose child ran here: h is the slot taken for it (nobody has seen it),
 * c->status and c->value the child's outcome, coff where its frame was (or would have been) on
 * the lane stacks. Returns its future (see mw_spawn_now). Collective. */
__device__ __forceinline__ future mw_now_finish(mw_ctx *c, mw_u32 kind, mw_u64 h, mw_u32 coff) {
  if (c->lane == 0) {
    mw_wstate *ws = MW_WS(c);
    mw_level *L = MW_LV(c);
    const mw_kind_info *ki = mw_kind(kind);
    const mw_u32 s = MW_FUT_SLOT(h), gen = MW_FUT_GEN(h);
    mw_u64 inl = 0;
#ifndef MW_NO_INLINE_RESULT
    if (c->status == MW_RUN_DONE) inl = mw_inline_handle(c->value, ki->rtype);
#endif
    mw_count(c, kind, MW_CNT_SPAWNED);
    if (inl) { /* the slot goes back as it came: its generation was never seen */
      mw_slot_free(c, s, gen - 1u);
      mw_count(c, kind, MW_CNT_COMPLETED);
      h = inl;
      L->bad = 0;
    } else {
      mw_slot *sl = &c->slots[s];
      const mw_u32 sib = L->children, ep = ws->epoch;
      sl->kind = kind;
      sl->status = MW_ST_PENDING;
      sl->refs = 2; /* the task + its owner */
      sl->fref = 0;
      sl->sibling = sib;
      L->children = s + 1;
      if (c->status == MW_RUN_DONE) {
        mw_complete_private(c, kind, h, MW_NONE, sib, ep, c->d);
        L->bad = 0;
      } else { /* the general finish, on a level set up for it */
        mw_level_child(c, h, kind, MW_NONE, 0u, ep, sib, coff);
        c->d++;
        mw_finish_level(c);
        c->d--;
        L->bad = h;
      }
    }
    L->naw = L->cur = 1;
  }
  __syncwarp();
  mw_run_fresh(c);
  h = mw_bcast64(h);
  c->ran = MW_FUT_IS_INLINE(h) ? 0 : h;
  future fu;
  fu.h = h;
  return fu;
}

/* The spawn of a child that the next statement awaits (the compiler saw 'f = spawn(t, ...);'
 * then 'await(f);' or 'try_await(f);'): nobody but this task can hold f before that await, so
 * a pure child (it never spawns, awaits, releases or cancels) runs here and now, as a plain
 * call (work-first): its arguments to the lane stack, its body, and its handle. A child that
 * ended OK with a result that fits gets an inline handle (protocol.h, handles): the slot taken
 * before its body ran goes back unseen. Otherwise the slot is its future, completed privately
 * among the warp's recent results, and c->ran tells the await that follows that f is complete
 * (its level's bad notes a failure). No record, no frame, no claim, no fence. Anything else (not
 * a pure kind, a cancellation, a stop, a woken task to nest, a trace, a bulk instance, no room
 * on the lane stack, no free slot) takes the spawn's general path, and the await then finds
 * the child as it finds any other. MW_NO_INLINE_RESULT: every child completes in its slot.
 * (The generated spawn-now of a pure task calls the body itself when it can: task_api.cuh,
 * mw_direct_ok; this is its way when it cannot.) Collective. */
__device__ __noinline__ future mw_spawn_now(mw_ctx *c, mw_u32 kind, const void *args, int line) {
  MW_PROBE(MW_PR_SPAWN);
  const mw_kind_info *ki = mw_kind(kind);
  const mw_u32 coff = mw_round16(mw_await_off(c) + 8u); /* where the general await puts it */
  mw_u32 go = 0;
#ifndef MW_NO_SPAWN_NOW
  if (c->lane == 0) /* lane 0's view: a trace is lane 0's */
    go = (ki->flags & MW_KIND_PURE) && !ki->futargs && ki->rtype != MW_RT_FUTURE && !c->bulk &&
         !c->cancelled && !c->nest && !c->yield && !c->trace_ev && !c->trace_due &&
         c->status == MW_RUN_DONE && c->d + 1 < MW_LEVELS && coff + ki->frame_bytes <= MW_LSTACK_BYTES;
#endif
  if (!mw_bcast(go)) return mw_spawn_raw(c, kind, args, 0u, false, line);
  future fu;
  fu.h = 0;
  if (mw_diverged(c, "spawn", line, mw_spawn_key(kind, args, ki->args_bytes))) return fu;
  mw_tick(c);
  mw_u64 h = 0;
  if (c->lane == 0 && !c->cancelled && !c->nest && !c->yield && !c->trace_due && !c->trace_ev) {
    MW_PROBE(MW_PR_SLOT_INIT);
    mw_u32 gen, s = mw_slot_alloc(c, &gen);
    if (s != MW_NONE) h = MW_FUT_MAKE(s, gen);
  }
  h = mw_bcast64(h);
  if (!h) /* what the tick brought, or no free slot: the general path says which */
    return mw_spawn_raw(c, kind, args, 0u, false, line);
  mw_frame_from_args((mw_u32 *)(c->stk + coff), (const mw_u32 *)args, ki, 0, 1);
  const mw_u32 resume = c->resume;
  c->resume = 0;
  c->value = 0;
  {
    MW_PROBE(MW_PR_PURE_BODY);
    MW_TASK_IN();
    mw_dispatch_leaf(c, kind, c->stk + coff);
    MW_TASK_OUT();
  }
  __syncwarp();
  c->resume = resume;
  return mw_now_finish(c, kind, h, coff);
}

/* The end of a spawn-now whose body the generated code called itself (task_api.cuh,
 * mw_direct_done) when its child failed or returned bits that no inline handle carries: the
 * result is stored as a body's is (on sim, lanes that returned different values fail it), and
 * the child gets the slot that mw_direct_ok saw free in the warp's cache. Collective. */
__device__ __noinline__ future mw_now_end(mw_ctx *c, mw_u32 kind, mw_u64 bits) {
  mw_store_bits(c, bits);
  mw_u64 h = 0;
  if (c->lane == 0) {
    mw_u32 gen, s = mw_slot_alloc(c, &gen);
    h = MW_FUT_MAKE(s, gen);
  }
  h = mw_bcast64(h);
  return mw_now_finish(c, kind, h, mw_round16(mw_await_off(c) + 8u));
}

/* Goes on with the await in progress from the future it looked at last: complete ones are
 * passed (the first failure noted), the first spawn of this warp still in a record runs inline
 * (MW_RUN_CALL), and at the first one pending elsewhere the level suspends on the rest. Called
 * by mw_await, and by the body when it resumes at its await (after an inline child, or after
 * it was woken: then nothing is left to wait for). Collective. */
__device__ __noinline__ bool mw_await_more(mw_ctx *c) {
  MW_PROBE(MW_PR_MORE);
  enum { ALL_DONE = 0, CALL = 1, SUSPEND = 2, NEST = 3, LEAF = 4 };
  mw_u32 act = ALL_DONE, arg = 0, coff = 0;
  mw_rec *nest = 0;
again:
  act = ALL_DONE;
  arg = 0;
#ifdef MW_ELIDE
  const bool may_nest = !c->elide; /* an elided call returns to its spawner, never to the trampoline */
#else
  const bool may_nest = true;
#endif
  if (c->nest && may_nest && !c->cancelled && c->d + 1 < MW_LEVELS) {
    /* a woken task waited in the CTA: run it first, above this level (protocol.h, levels) */
    c->nest = 0;
    nest = mw_cta_claim(c, MW_PICK_WOKEN, MW_REC_TAKEN);
  }
  if (c->lane == 0 && !c->cancelled) {
    mw_level *L = MW_LV(c);
    mw_u32 aoff = mw_await_off(c);
    const mw_u64 *aw = (const mw_u64 *)(c->stk + aoff);
    coff = mw_round16(aoff + 8u * L->naw);
    if (nest) {
      if (L->cur < L->naw &&
          coff + mw_kind(mw_frame(c, nest->frame)->kind)->frame_bytes <= MW_LSTACK_BYTES) {
        act = NEST;
      } else { /* nothing to wait for, or no room: back it goes */
        mw_st32(&nest->state, (nest->state & ~15u) | MW_REC_READY);
        nest = 0;
      }
    }
    if (c->yield && L->cur < L->naw) {
      /* the executor is to stop: the spawns awaited here go to the global queue, the level
       * suspends on them (and the levels below on it in turn): the warp can leave */
      for (mw_u32 i = L->cur; i < L->naw; ++i) {
        mw_u32 rs;
        int r = mw_rec_find(c, aw[i], &rs);
        mw_rec *rec = r >= 0 ? &MW_WS(c)->rec[r] : 0;
        if (rec && atomicCAS(&rec->state, rs, (rs & ~15u) | MW_REC_OWNED) == rs) {
          mw_gq_push(c->st, mw_rec_to_frame(c, rec));
          mw_st32(&rec->state, (rs & ~15u) | MW_REC_FREE);
        }
      }
    }
    for (; act != NEST && L->cur < L->naw; L->cur++) {
      mw_u64 h = aw[L->cur];
      mw_u32 s = MW_FUT_SLOT(h);
      if (MW_FUT_IS_INLINE(h)) continue; /* complete, OK */
      if (!mw_is_future(h) || s >= c->nslots) {
        if (!L->bad) L->bad = mw_is_future(h) || h == 0 ? MW_BAD_STALE : h;
        continue;
      }
      int k = mw_kid_find(c, h);
      if (k >= 0) { /* it ran inline already */
        if (MW_WS(c)->kid[k].status != MW_ST_OK && !L->bad) L->bad = h;
        continue;
      }
      mw_u32 rs;
      int r = mw_rec_find(c, h, &rs);
      if (r >= 0 && c->d + 1 < MW_LEVELS) {
        mw_rec *rec = &MW_WS(c)->rec[r];
        const mw_kind_info *ki = mw_kind(rec->kind);
        if (coff + ki->frame_bytes <= MW_LSTACK_BYTES &&
            atomicCAS(&rec->state, rs, (rs & ~15u) | MW_REC_OWNED) == rs) {
          act = mw_leaf_call_ok(c, ki) ? LEAF : CALL;
          arg = (mw_u32)r;
          break;
        }
      }
      mw_u64 ctl = mw_ld64(&c->slots[s].ctl);
      if ((mw_u32)(ctl >> 32) == MW_FUT_GEN(h) && (mw_u32)ctl == MW_CTL_CLOSED) {
        MW_FENCE(); /* the result before its CLOSED */
        if (mw_ld32(&c->slots[s].status) != MW_ST_OK && !L->bad) L->bad = h;
        continue;
      }
      act = SUSPEND; /* pending elsewhere, or a spawn of this warp it cannot run here */
      break;
    }
  }
  act = mw_bcast(act | arg << 4 | coff << 12);
  if ((act & 15u) == NEST) {
    mw_root_from_rec(c, nest, c->d + 1, act >> 12);
    c->status = MW_RUN_CALL;
    return true;
  }
  if ((act & 15u) == CALL) {
    mw_call_child(c, (act >> 4) & 255u, act >> 12);
    return true;
  }
  if ((act & 15u) == LEAF) { /* it ran here and then: the await goes on from it */
    mw_run_leaf(c, (act >> 4) & 255u, act >> 12);
    nest = 0;
    goto again;
  }
  if ((act & 15u) == SUSPEND) return mw_suspend(c);
  return false;
}

/* The running level waits for the futures of its await from the one it looked at last: its
 * frame goes to device memory (a frame reserved at its spawn, else a fresh one), it registers
 * on each (protocol.h, join: Suspend) and leaves the warp, unless they all completed meanwhile
 * or a canceller came (then it goes on here). Collective. Returns true when it suspended. */
__device__ __noinline__ bool mw_suspend(mw_ctx *c) {
  MW_PROBE(MW_PR_SUSPEND);
  mw_level *L = MW_LV(c);
  mw_u32 ok = 1;
  if (c->lane == 0 && L->frame == MW_NONE) {
    L->frame = mw_frame_alloc(c);
    ok = L->frame != MW_NONE;
  }
  if (!mw_bcast(ok)) {
    mw_fail(c, MW_FAIL_CAPACITY, "no free task frame to suspend in (capacity exhausted)");
    return false;
  }
  mw_u32 res = 0; /* 1: suspended, 2: cancelled */
  if (c->lane == 0) {
    mw_wstate *ws = MW_WS(c);
    mw_u32 f = L->frame, kind = L->kind;
    mw_frame_hdr *fh = mw_frame(c, f);
    mw_u32 s = MW_FUT_SLOT(L->fut);
    if (!(L->flags & MW_LV_PUBLIC)) { /* the frame gets its header once; fref tells cancellers */
      mw_frame_hdr_fresh(fh, kind, L->fut, (s < c->host_slots ? MW_FR_HOST : 0u) | MW_GEN_BITS(L->flags), 0); /* resume,
                                                   children and await_f[0] are written below */
      c->slots[s].fref = mw_frame_open(c, f);
      L->flags |= MW_LV_PUBLIC;
    }
    /* the frame as lane 0 sees it (its locals are task-uniform) */
    const mw_u32 *src = (const mw_u32 *)(c->stk + c->off);
    mw_u32 *dst = (mw_u32 *)((mw_u8 *)fh + MW_FRAME_HDR_BYTES);
    for (mw_u32 i = 0; i * 4 < mw_kind(kind)->frame_bytes; ++i) dst[i] = src[i];
    fh->resume = L->resume;
    fh->children = L->children;
    fh->await_f[0] = L->bad;
    mw_kids_forget(c, c->d); /* its children's results stay in their slots */
    /* what it ran inline so far is counted before it may be woken and complete elsewhere */
    if (mw_counts_dirty(c, ws)) mw_flush_counts(c);
    const mw_u64 *aw = (const mw_u64 *)(c->stk + mw_await_off(c));
    mw_u32 n = L->naw - L->cur;
    mw_u64 ep = mw_ld64(&fh->join) & 0xffffffff00000000ull;
    mw_st64(&fh->join, ep | (MW_JOIN_HOLD + n));
    if (c->trace_ev) c->trace_run.t1 = MW_GLOBALTIMER(); /* the run's end, before anyone can resume it */
    /* the frame before any registration, and join before reading the own CANCEL bit: SC,
     * pairs with the canceller's fence (protocol.h, Cancellation) */
    __threadfence();
    if (mw_cancel_asked(c, L->fut)) {
      mw_add64(&fh->join, (mw_u64)0 - (MW_JOIN_HOLD + n)); /* nothing registered */
      res = 2;
    } else {
      mw_u32 done = 0;
      for (mw_u32 i = L->cur; i < L->naw; ++i) {
        mw_u32 status = MW_ST_OK;
        int rc = mw_register(c, f, aw[i], &status);
        if (rc == 0) continue;
        ++done;
        mw_u64 bad = rc == 1 ? (status != MW_ST_OK ? aw[i] : 0) : rc == 2 ? MW_BAD_STALE : MW_BAD_NODES;
        if (bad) mw_cas64(&fh->await_f[0], 0ull, bad);
      }
      mw_u64 sub = MW_JOIN_HOLD + done;
      mw_u32 b = (mw_u32)(mw_add64(&fh->join, (mw_u64)0 - sub) - sub);
      if (b & MW_JOIN_WOKEN) res = 2; /* a canceller came while we registered: it left us awake */
      else if (b & MW_JOIN_COUNT) res = 1;
    }
    if (res == 1) {
      ws->depth = c->d; /* the level has left the warp */
    } else {
      if (c->trace_ev) c->trace_run.t1 = 0; /* it goes on: its run has not ended */
      MW_FENCE();
      L->bad = mw_ld64(&fh->await_f[0]); /* completions noted their failures there */
      L->cur = L->naw;
      if (res == 2) L->flags |= MW_LV_CANCELLED;
    }
  }
  res = mw_bcast(res);
  if (res == 1) {
    c->status = MW_RUN_SUSPEND;
    return true;
  }
  if (res == 2) c->cancelled = 1;
  return false;
}

/* Runs right after an await completed (inline or on wake-up). Stops the task if it was asked
 * to cancel. Else, with await (tolerant false), fails the task if an awaited future failed or
 * was cancelled; with try_await (tolerant true) the task goes on and reads the outcome with
 * failed(), cancelled(), fail_code(), fail_message(). Either way a stale future fails the
 * task. Collective. Returns true if the task must stop (the body returns). */
__device__ __noinline__ bool mw_after_await(mw_ctx *c, bool tolerant) {
  MW_PROBE(MW_PR_AFTER);
  /* every lane reads the level's outcome between lane 0's writes of it (before the first
   * __syncwarp, and at the next await, after the second) */
  __syncwarp();
  const mw_u64 bad = MW_LV(c)->bad;
  __syncwarp();
  if (c->cancelled) return true;
  if (c->status == MW_RUN_FAIL) return true;
  if (!bad) return false;
  if (bad == MW_BAD_STALE) {
    mw_fail(c, MW_FAIL_STALE, "awaited a stale or invalid future");
  } else if (bad == MW_BAD_NODES) {
    mw_fail(c, MW_FAIL_CAPACITY, "no free waiter node (capacity exhausted)");
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

#ifdef MW_ELIDE
__device__ __noinline__ future mw_elide_done_slow(mw_ctx *c, mw_u32 kind, mw_u32 rtype, mw_u64 bits) {
  return mw_elide_done(c, kind, rtype, bits);
}
#endif
/* An await in a fast body (task_api.cuh, MW_AWAIT_FAST) whose futures do not all carry their
 * results: the general await and its end, which find every future complete (an elided call's
 * children ran at their spawns) and so never suspend. Collective. */
__device__ __noinline__ bool mw_await_elided(mw_ctx *c, const future *fs, mw_u32 n, int line, bool tolerant) {
  return mw_await(c, fs, n, line) || mw_after_await(c, tolerant);
}

/* The outcome of future h as task code reads it: an enum mw_status (PENDING while it runs),
 * its value bits and result type once complete, its failure code and message once FAILED or
 * CANCELLED. A stale handle reads as FAILED with MW_FAIL_STALE. A child that ran inline is
 * read from the warp's recent results. Lane 0. */
__device__ __noinline__ mw_u32 mw_outcome(mw_ctx *c, mw_u64 h, mw_u64 *value, mw_u32 *rtype, int *code,
                             const char **msg) {
  MW_PROBE(MW_PR_OUTCOME);
  *value = 0;
  *rtype = MW_RT_I64;
  *code = 0;
  *msg = "";
  if (h == MW_FUT_NOSLOT) {
    *code = MW_FAIL_CAPACITY;
    *msg = "no free future slot for the spawn (capacity exhausted)";
    return MW_ST_FAILED;
  }
  if (h == MW_FUT_SKIPPED) {
    *code = MW_FAIL_CANCELLED;
    *msg = "the spawn was skipped: the spawning task was cancelled";
    return MW_ST_CANCELLED;
  }
  if (MW_FUT_IS_INLINE(h)) {
    *value = mw_inline_bits(h);
    *rtype = MW_FUT_INLINE_RTYPE(h);
    return MW_ST_OK;
  }
  if (h != 0 && MW_FUT_SLOT(h) < c->nslots) {
    mw_slot *sl = &c->slots[MW_FUT_SLOT(h)];
    int k = mw_kid_find(c, h);
    mw_u32 status;
    if (k >= 0) {
      mw_kid *K = &MW_WS(c)->kid[k];
      *value = K->value;
      *rtype = K->rtype;
      status = K->status;
    } else {
      mw_u64 ctl = mw_ld64(&sl->ctl);
      mw_u32 og = (mw_u32)(ctl >> 32), g = MW_FUT_GEN(h), w = (mw_u32)ctl;
      if ((og == g && w != MW_CTL_CLOSED) || (og + 1u == g && w == MW_CTL_CLOSED)) return MW_ST_PENDING;
      if (og != g) {
        *code = MW_FAIL_STALE;
        *msg = "stale or invalid future";
        return MW_ST_FAILED;
      }
      MW_FENCE(); /* the result before its CLOSED */
      *value = sl->value;
      *rtype = sl->rtype;
      status = sl->status;
    }
    if (status != MW_ST_OK) {
      *code = sl->code;
      *msg = sl->msg;
    }
    return status;
  }
  *code = MW_FAIL_STALE;
  *msg = "stale or invalid future";
  return MW_ST_FAILED;
}

/* value(f): the result of a completed future. Reading a pending or stale one fails the task
 * at its next device call; the value read is 0. Collective. */
__device__ __noinline__ mw_val mw_value_of(mw_ctx *c, future f, int line) {
  MW_PROBE(MW_PR_VALUE);
  mw_val v;
  v.bits = 0;
  v.rtype = MW_RT_I64;
  mw_u32 meta = 0;
  if (MW_FUT_IS_INLINE(f.h)) { /* a child that ran at its spawn: the handle is the result */
    v.bits = mw_inline_bits(f.h);
    v.rtype = MW_FUT_INLINE_RTYPE(f.h);
    return v;
  }
  {
    /* the common case: one of the two children that completed last here, done. Every
     * lane reads the entry (the same shared words: no broadcast, no divergence) between two
     * __syncwarps: lane 0's writes of it before, and its next ones (a release) after. */
    __syncwarp();
    int k = mw_kid_recent(c, f.h);
    const mw_wstate *ws = MW_WS(c);
    const mw_kid *K = k >= 0 ? &ws->kid[k] : 0;
    bool ok = K && K->status == MW_ST_OK;
    if (ok) {
      v.bits = K->value;
      v.rtype = K->rtype;
    } else if (f.h == ws->seen_fut && f.h != 0) { /* the future the latest await found complete */
      ok = true;
      v.bits = ws->seen_value;
      v.rtype = ws->seen_rtype;
    }
    __syncwarp();
    if (ok) return v;
  }
  if (c->lane == 0) {
    int code;
    const char *msg;
    mw_u32 st = mw_outcome(c, f.h, &v.bits, &v.rtype, &code, &msg);
    bool ok = st != MW_ST_PENDING && !(st == MW_ST_FAILED && code == MW_FAIL_STALE) &&
              f.h != MW_FUT_NOSLOT && f.h != MW_FUT_SKIPPED;
    meta = v.rtype | (ok ? 256u : 0u);
  }
  (void)line;
  v.bits = mw_bcast64(v.bits);
  meta = mw_bcast(meta);
  v.rtype = meta & 255u;
  if (!(meta & 256u) && c->status != MW_RUN_FAIL)
    mw_fail(c, MW_FAIL_NOT_READY, "value() of a future that is not complete");
  return v;
}

/* failed(f): true when a completed future failed or was cancelled. Collective. */
__device__ __noinline__ bool mw_failed_of(mw_ctx *c, future f) {
  mw_u32 r = 0;
  if (c->lane == 0) {
    mw_u64 v;
    mw_u32 rt;
    int code;
    const char *msg;
    mw_u32 st = mw_outcome(c, f.h, &v, &rt, &code, &msg);
    r = st == MW_ST_FAILED || st == MW_ST_CANCELLED;
  }
  return mw_bcast(r) != 0;
}

/* cancelled(f), fail_code(f), fail_message(f): whether a completed future was cancelled; its
 * failure code (0 unless it failed or was cancelled; MW_FAIL_CANCELLED = -9 when cancelled);
 * its message ("" unless it failed or was cancelled; valid while the future is held). For use
 * after try_await. Collective. */
__device__ __noinline__ bool mw_cancelled_of(mw_ctx *c, future f) {
  mw_u32 r = 0;
  if (c->lane == 0) {
    mw_u64 v;
    mw_u32 rt;
    int code;
    const char *msg;
    r = mw_outcome(c, f.h, &v, &rt, &code, &msg) == MW_ST_CANCELLED;
  }
  return mw_bcast(r) != 0;
}
__device__ __noinline__ int mw_fail_code_of(mw_ctx *c, future f) {
  int code = 0;
  if (c->lane == 0) {
    mw_u64 v;
    mw_u32 rt;
    const char *msg;
    mw_outcome(c, f.h, &v, &rt, &code, &msg);
  }
  return (int)mw_bcast((mw_u32)code);
}
__device__ __noinline__ const char *mw_fail_message_of(mw_ctx *c, future f) {
  const char *msg = "";
  if (c->lane == 0) {
    mw_u64 v;
    mw_u32 rt;
    int code;
    mw_outcome(c, f.h, &v, &rt, &code, &msg);
  }
  return (const char *)(mw_u64)mw_bcast64((mw_u64)msg);
}

/* cancel(f): asks the task of future f (a child, or any future the task holds) to stop; see
 * protocol.h, Cancellation. True when the request was delivered (f was pending), false when f
 * was complete or not a live future. Collective. */
__device__ __noinline__ bool mw_cancel_of(mw_ctx *c, future f, int line) {
  if (mw_diverged(c, "cancel", line, f.h)) return false;
  mw_u32 r = 0;
  if (c->lane == 0) {
    if (mw_kid_find(c, f.h) >= 0) r = 0; /* it ran inline: complete */
    else r = mw_cancel_queued(c, f.h) ? 1u : (mw_u32)mw_cancel_fut(c, f.h);
  }
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

/* ---- owning children ------------------------------------------------------------------------ */
/* The sibling link of owned child slot s (index + 1 in ch): from the warp's recent results or a
 * record when it has one, else from device memory. Lane 0. */
__device__ mw_u32 mw_sibling_of(mw_ctx *c, mw_u32 ch) {
  int k = mw_kid_of_slot(c, ch - 1);
  return k >= 0 ? MW_WS(c)->kid[k].sibling : mw_ld32(&c->slots[ch - 1].sibling);
}

/* The owner lets go of child future h (generation gen of slot s): the slot loses the owner's
 * reference. A child that completed privately while no handle left the warp is freed at once,
 * with no atomic. k is h's entry among the recent results (mw_kid_find), or -1. Lane 0. */
__device__ void mw_drop_child_at(mw_ctx *c, mw_u64 h, int k) {
  mw_u32 s = MW_FUT_SLOT(h), gen = MW_FUT_GEN(h);
  if (k >= 0) {
    mw_kid *K = &MW_WS(c)->kid[k];
    mw_u32 n = K->priv ? 2u : 1u; /* a private completion kept the producer's reference */
    bool mine = K->priv && K->epoch == MW_WS(c)->epoch;
    K->state = MW_KID_NONE;
    K->priv = 0;
    K->fut = 0;
    MW_WS(c)->kid_used &= ~(1u << (mw_u32)k);
    if (mine) mw_slot_free(c, s, gen);
    else mw_slot_unref(c, s, gen, n);
    return;
  }
  mw_slot_unref(c, s, gen, 1);
}
/* The same, with h's entry found here. Lane 0. */
__device__ void mw_drop_child(mw_ctx *c, mw_u64 h) { mw_drop_child_at(c, h, mw_kid_find(c, h)); }

/* release(f): the running task gives up a child future it owns before it finishes (children
 * are otherwise released when their parent finishes), so a loop of spawns holds one slot, not
 * one per iteration. f must not be used afterwards. Collective. */
__device__ __noinline__ void mw_release(mw_ctx *c, future f) {
  MW_PROBE(MW_PR_RELEASE);
  if (c->lane == 0 && MW_WS(c)->seen_fut == f.h) MW_WS(c)->seen_fut = 0; /* value() of it fails now */
  if (c->lane == 0 && mw_is_future(f.h) && MW_FUT_SLOT(f.h) < c->nslots) {
    mw_level *L = MW_LV(c);
    mw_u32 s = MW_FUT_SLOT(f.h);
    int k;
    if (L->children == s + 1 && (k = mw_kid_recent(c, f.h)) >= 0) {
      /* the common case: the latest spawn, which just completed here */
      L->children = MW_WS(c)->kid[k].sibling;
      mw_drop_child_at(c, f.h, k);
    } else if (L->children == s + 1) { /* the latest spawn */
      L->children = mw_sibling_of(c, s + 1);
      mw_drop_child(c, f.h);
    } else {
      for (mw_u32 prev = L->children; prev;) {
        mw_u32 next = mw_sibling_of(c, prev);
        if (next == s + 1) { /* one of ours: unlink it */
          mw_u32 after = mw_sibling_of(c, next);
          c->slots[prev - 1].sibling = after;
          int pk = mw_kid_of_slot(c, prev - 1);
          if (pk >= 0) MW_WS(c)->kid[pk].sibling = after;
          for (mw_u32 i = 0; i < MW_RECS; ++i)
            if (MW_WS(c)->rec[i].fut && MW_FUT_SLOT(MW_WS(c)->rec[i].fut) == prev - 1) MW_WS(c)->rec[i].sibling = after;
          mw_drop_child(c, f.h);
          break;
        }
        prev = next;
      }
    }
  }
  __syncwarp();
}

/* ---- finishing a level ---------------------------------------------------------------------- */
/* Finishes the running level: completes its future (privately when it can), releases its
 * children, its holds and its frame. A level that ends cancelled cancels the children it still
 * owns first. Lane 0. */
__device__ __noinline__ void mw_finish_level(mw_ctx *c) {
  MW_PROBE(MW_PR_FINISH);
  mw_wstate *ws = MW_WS(c);
  mw_level *L = MW_LV(c);
  mw_u32 kind = L->kind;
  const mw_kind_info *ki = mw_kind(kind);
  mw_u64 fut = L->fut;
  mw_u32 s = MW_FUT_SLOT(fut), gen = MW_FUT_GEN(fut);
  /* a host future's record leaves first (protocol.h, completion ring): its ticket now, its
   * latency under the outcome's reading */
  const bool host = s < c->host_slots;
  const mw_u64 ticket = host ? mw_add64(&c->st->comp_tail, 1) : 0;
  mw_u32 status;
  int code = 0;
  const char *msg = 0, *prefix = 0;
  char buf[MW_MSG_BYTES];
  if (c->cancelled || (L->flags & MW_LV_CANCELLED)) {
    status = MW_ST_CANCELLED;
    code = MW_FAIL_CANCELLED;
    mw_cancel_msg(buf, kind);
    msg = buf;
  } else if (c->status == MW_RUN_DONE) {
    status = MW_ST_OK;
  } else if (c->fail_fut) {
    /* an awaited child failed or was cancelled: this task ends the same way, with its message */
    mw_u64 v;
    mw_u32 rt;
    const char *cmsg;
    status = mw_outcome(c, c->fail_fut, &v, &rt, &code, &cmsg) == MW_ST_CANCELLED ? MW_ST_CANCELLED
                                                                                 : MW_ST_FAILED;
    for (int i = 0; i < MW_MSG_BYTES; ++i) buf[i] = cmsg[i];
    msg = buf;
  } else {
    status = MW_ST_FAILED;
    code = c->fail_code;
    msg = c->fail_msg ? c->fail_msg : "failed";
    prefix = mw_kind_name(kind);
  }
  if (status == MW_ST_CANCELLED)
    for (mw_u32 ch = L->children; ch; ch = mw_sibling_of(c, ch)) {
      mw_u64 h = 0;
      for (mw_u32 i = 0; i < MW_RECS && !h; ++i)
        if ((ws->rec[i].flags & MW_RF_SPAWN) && MW_FUT_SLOT(ws->rec[i].fut) == ch - 1) h = ws->rec[i].fut;
      if (!h || !mw_cancel_queued(c, h)) mw_cancel_owned(c, ch - 1);
    }
  if (ki->futargs && !c->lost) mw_drop_holds(c, ki->futargs, c->stk + c->off);
  mw_u64 value = status == MW_ST_OK ? c->value : 0;
  if (host) mw_host_record(c, ticket, s, gen, status, value, ki->rtype, code, msg, prefix);
  if (ki->rtype == MW_RT_FUTURE && status == MW_ST_OK) ws->epoch++; /* a handle leaves in it */
  bool root = (L->flags & MW_LV_ROOT) != 0;
  bool priv = !root && !(L->flags & MW_LV_PUBLIC) && L->epoch == ws->epoch && !host;
  /* counted, children and frame let go before the completion, which adds the counters to the
   * rows for whoever waits */
  MW_PROBE(MW_PR_FIN_LET_GO); /* from here to the completion (a scope of its own) */
  mw_count(c, kind, status == MW_ST_OK ? MW_CNT_COMPLETED
                    : status == MW_ST_CANCELLED ? MW_CNT_CANCELLED : MW_CNT_FAILED);
  for (mw_u32 ch = L->children; ch;) {
    int k = mw_kid_of_slot(c, ch - 1);
    mw_u32 next = k >= 0 ? ws->kid[k].sibling : mw_ld32(&c->slots[ch - 1].sibling);
    if (k >= 0) mw_drop_child_at(c, ws->kid[k].fut, k);
    else mw_slot_unref(c, ch - 1, MW_NONE, 1);
    ch = next;
  }
  L->children = 0;
  mw_kids_forget(c, c->d);
  if (L->flags & MW_LV_PUBLIC) mw_frame_release(c, L->frame);
  else if (L->frame != MW_NONE) mw_frame_free(c, L->frame);
  MW_PROBE(MW_PR_COMPLETE);
  mw_slot *sl = &c->slots[s];
  if (priv) { /* protocol.h, Private completion */
    mw_slot_result(sl, status, value, ki->rtype, code, msg, prefix);
    mw_st64(&sl->ctl, ((mw_u64)gen << 32) | MW_CTL_CLOSED);
  } else if (host) {
    mw_close_slot(c, s, gen, status); /* its record went first */
  } else {
    mw_complete_slot(c, s, gen, status, value, ki->rtype, code, msg, prefix);
    mw_slot_unref(c, s, gen, 1); /* the producer's reference */
  }
  if (!root) { /* the result for the level that awaits it, one below */
    mw_kid *K = mw_kid_new(c);
    K->fut = fut;
    K->value = value;
    K->sibling = L->sibling;
    K->epoch = L->epoch;
    K->status = (mw_u8)status;
    K->rtype = (mw_u8)ki->rtype;
    K->level = (mw_u8)(c->d - 1);
    K->priv = priv;
    K->state = MW_KID_DONE;
  }
  ws->depth = c->d;
}

#endif /* MW_DEVICE_API_CUH */
