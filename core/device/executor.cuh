/* executor.cuh - the executor: the trampoline of a warp's inline chain, bulk instances, the
 * scheduler loop and the kernel.
 *
 * The last of the executor's three files, after runtime.cuh and device_api.cuh; see
 * runtime.cuh's opening comment. */
#ifndef MW_EXECUTOR_CUH
#define MW_EXECUTOR_CUH

/* ---- the executor --------------------------------------------------------------------------- */

/* Runs the task set up at level 0 and every child it runs inline, until level 0 finishes or
 * suspends: a trampoline, so an inline child is a level of the lane stacks, not a call.
 * Collective. */
__device__ __noinline__ void mw_run_chain(mw_ctx *c) {
  mw_wstate *ws = MW_WS(c);
  c->d = 0;
  for (;;) {
    mw_level *L = &ws->lv[c->d];
    { MW_PROBE(MW_PR_EMPTY); }
    if (c->trace_due) {
      if (c->lane == 0) {
        mw_u32 tg = mw_ld32(&c->st->trace_gen);
        if (tg != c->trace_gen) mw_trace_switch(c, tg);
      }
      c->trace_due = 0;
    }
    mw_u32 a = 0, resume = 0;
    if (c->lane == 0) {
      a = L->kind | (L->flags & MW_LV_CANCELLED ? MW_KW_CANCELLED : 0u) | L->off * MW_KW_OFF;
      resume = L->resume;
    }
    a = mw_bcast(a);
    c->resume = mw_bcast(resume);
    c->kind = a & MW_KW_KIND;
    c->off = a / MW_KW_OFF;
    mw_run_fresh(c);
    c->cancelled = (a & MW_KW_CANCELLED) != 0;
    if (!(c->resume == 0 && c->cancelled)) { /* cancelled before it started: it never runs */
      if (c->trace_ev) mw_trace_begin(c, c->kind, L->fut, c->resume);
      {
        MW_PROBE(MW_PR_RUN);
        {
          MW_TASK_IN();
          mw_dispatch(c, c->kind, c->stk + c->off);
          MW_TASK_OUT();
        }
        __syncwarp();
      }
      if (c->trace_ev)
        mw_trace_end(c, c->cancelled ? MW_TR_CANCELLED
                        : c->status == MW_RUN_DONE ? MW_TR_DONE
                        : c->status == MW_RUN_FAIL ? MW_TR_FAILED : MW_TR_AWAIT, 0);
    } else if (c->trace_ev) {
      mw_trace_begin(c, c->kind, L->fut, 0);
      mw_trace_end(c, MW_TR_CANCELLED, 0);
    }
    if (c->status == MW_RUN_CALL) {
      c->d++;
      continue;
    }
    if (c->status != MW_RUN_SUSPEND && c->lane == 0 &&
        !(MW_TRAMPOLINE_PLAIN_FINISH && mw_finish_plain(c)))
      mw_finish_level(c);
    __syncwarp();
    if (c->d == 0) return;
    c->d--; /* the level below resumes at its await */
  }
}

/* Level lv (0, or a nested root above a waiting level) from record r of this CTA, claimed by
 * this warp: a spawn runs from its arguments (its reserved frame kept for a suspension); a
 * runnable task from its frame. Its frame goes at byte off of the lane stacks. Collective. */
__device__ __noinline__ void mw_root_from_frame(mw_ctx *c, mw_u32 f, mw_u32 lv, mw_u32 off);
/* Lane 0: level lv of this warp starts a task (what each way of starting one sets). */
__device__ __forceinline__ void mw_level_start(mw_ctx *c, mw_u32 lv, mw_u64 fut, mw_u32 kind, mw_u32 frame,
                                               mw_u32 flags, mw_u32 off, mw_u32 resume, mw_u32 children,
                                               mw_u64 bad, mw_u32 sibling) {
  mw_level *L = &MW_WS(c)->lv[lv];
  L->fut = fut;
  L->bad = bad;
  L->kind = kind;
  L->resume = resume;
  L->frame = frame;
  L->children = children;
  L->flags = flags;
  L->epoch = 0;
  L->off = off;
  L->sibling = sibling;
  L->naw = L->cur = 0;
  L->bulk = 0;
  MW_WS(c)->depth = lv + 1;
}
__device__ __noinline__ void mw_root_from_rec(mw_ctx *c, mw_rec *r, mw_u32 lv, mw_u32 off) {
  mw_u32 spawn = 0, f = 0, kind = 0;
  if (c->lane == 0) {
    spawn = (r->flags & MW_RF_SPAWN) != 0;
    f = r->frame;
    kind = r->kind;
    if (spawn)
      mw_level_start(c, lv, r->fut, kind, f,
                     MW_LV_ROOT | r->gen << MW_GEN_SHIFT |
                         ((r->flags & MW_RF_CANCELLED) || mw_cancel_asked(c, r->fut) ? MW_LV_CANCELLED : 0u),
                     off, 0, 0, 0, r->sibling);
  }
  __syncwarp(); /* every lane after lane 0's acquire of the record (its claim) */
  spawn = mw_bcast(spawn);
  if (!spawn) {
    f = mw_bcast(f);
    if (c->lane == 0) {
      MW_FENCE_CTA();
      mw_st32(&r->state, (r->state & ~15u) | MW_REC_FREE);
    }
    mw_root_from_frame(c, f, lv, off);
    return;
  }
  kind = mw_bcast(kind);
  const mw_kind_info *ki = mw_kind(kind);
  mw_frame_from_args((mw_u32 *)(c->stk + off), (const mw_u32 *)r->args, ki, 0, 1);
  __syncwarp();
  if (c->lane == 0) {
    MW_FENCE_CTA();
    mw_st32(&r->state, (r->state & ~15u) | MW_REC_FREE);
  }
}

/* Level lv from frame f (a plain task from the global queue or another warp's take of the
 * inbox, or a woken one; a frame this warp's take kept: mw_root_own). A frame that resumes after
 * a suspension stops if a canceller woke it or asked. Collective. */
__device__ __noinline__ void mw_root_from_frame(mw_ctx *c, mw_u32 f, mw_u32 lv, mw_u32 off) {
  MW_PROBE(MW_PR_ROOT);
  mw_frame_hdr *fh = mw_frame(c, f);
  mw_u32 kind = 0;
  if (c->lane == 0) {
    MW_FENCE(); /* the frame after the hand-over that brought it here */
    kind = fh->kind;
    const mw_u32 resume = fh->resume, ff = fh->flags;
    bool cx = (ff & MW_FR_CANCEL) || mw_cancel_asked(c, fh->fut) ||
              (resume && ((mw_u32)mw_ld64(&fh->join) & MW_JOIN_WOKEN));
    mw_level_start(c, lv, fh->fut, kind, f, MW_LV_ROOT | MW_LV_PUBLIC | (cx ? MW_LV_CANCELLED : 0u) | MW_GEN_BITS(ff),
                   off, resume, fh->children, fh->await_f[0], 0);
  }
  __syncwarp(); /* every lane after lane 0's acquire of the frame */
  kind = mw_bcast(kind);
  const mw_u32 *src = (const mw_u32 *)((mw_u8 *)fh + MW_FRAME_HDR_BYTES);
  mw_u32 *dst = (mw_u32 *)(c->stk + off);
  for (mw_u32 i = 0; i * 4 < mw_kind(kind)->frame_bytes; ++i) dst[i] = src[i];
  __syncwarp();
}

/* Level 0 from frame f, which this warp's take of the inbox made just now and kept (protocol.h,
 * inbox ring: Own frames): what mw_root_from_frame reads back from the frame comes from the
 * take's registers instead (c->own_*), a fresh frame's header being known. The arguments go to
 * the lane stacks by shuffles from the lanes that read them, zeroes past them as in the frame.
 * Collective. */
__device__ __noinline__ void mw_root_own(mw_ctx *c, mw_u32 f) {
  MW_PROBE(MW_PR_ROOT);
  const mw_u32 kind = c->own_kind;
  if (c->lane == 0)
    mw_level_start(c, 0, c->own_fut, kind, f,
                   MW_LV_ROOT | MW_LV_PUBLIC |
                       ((MW_OWN_CANCEL_READ || c->own_cancels) && mw_cancel_asked(c, c->own_fut) ? MW_LV_CANCELLED : 0u) |
                       MW_GEN_BITS(c->own_flags),
                   0, 0, 0, 0, 0);
  mw_u32 *dst = (mw_u32 *)c->stk;
  const mw_u32 words = (mw_kind(kind)->frame_bytes + 3u) / 4u, args = MW_INBOX_ARG_BYTES / 4u;
  for (mw_u32 i = 0; i < words && i < args; i += 2) {
    const mw_u32 from = c->own_lane0 + (i >> 1);
    const mw_u32 x = __shfl_sync(MW_FULL, c->own_lo, from), y = __shfl_sync(MW_FULL, c->own_hi, from);
    dst[i] = x;
    if (i + 1 < words) dst[i + 1] = y;
  }
  for (mw_u32 i = args; i < words; ++i) dst[i] = 0;
  __syncwarp();
}

/* Whether frame f is a bulk task or a block task: its MW_FR_BULK and MW_FR_BLOCK flags.
 * Collective. */
__device__ mw_u32 mw_frame_class(mw_ctx *c, mw_u32 f) {
  mw_u32 b = 0;
  if (c->lane == 0) {
    MW_FENCE(); /* the frame after the hand-over that brought it here */
    b = mw_frame(c, f)->flags & (MW_FR_BULK | MW_FR_BLOCK);
  }
  __syncwarp(); /* every lane after lane 0's acquire of the frame */
  return mw_bcast(b);
}

/* How many more workers each worker that joins a bulk task invites (through the global queue):
 * 2 makes a tree, so a bulk task reaches every idle worker in about log2(workers) hand-overs,
 * where 1 made a chain of as many hand-overs as workers. The global queue holds the invitations
 * (mw_state.gq_cap counts MW_BULK_FANOUT per worker). */
#ifndef MW_BULK_FANOUT
#define MW_BULK_FANOUT 2u
#endif
/* MW_BOARD_ALL=1: every idle warp may join a posted bulk task, with no seats (to compare) */
#ifndef MW_BOARD_ALL
#define MW_BOARD_ALL 0
#endif
/* MW_NO_BOARD=1: bulk tasks are shared through global-queue invitations only (to compare) */
#ifndef MW_NO_BOARD
#define MW_NO_BOARD 0
#endif

/* One instance of a bulk task: through mw_dispatch on a worker that took it from the queue,
 * through mw_dispatch_leaf when the level that awaits it joins (the call graph stays acyclic). */
template <bool JOIN> __device__ __forceinline__ void mw_bulk_dispatch(mw_ctx *c, mw_u32 kind, mw_u8 *frame);
template <> __device__ __forceinline__ void mw_bulk_dispatch<false>(mw_ctx *c, mw_u32 kind, mw_u8 *frame) {
  mw_dispatch(c, kind, frame);
}
template <> __device__ __forceinline__ void mw_bulk_dispatch<true>(mw_ctx *c, mw_u32 kind, mw_u8 *frame) {
  mw_dispatch_leaf(c, kind, frame);
}


/* A claim takes 1 / MW_BULK_CHUNK_DIV of a worker's fair share of the instances, at most
 * MW_BULK_CHUNK_MAX and at least 1 */
#ifndef MW_BULK_CHUNK_DIV
#define MW_BULK_CHUNK_DIV 8u
#endif
#ifndef MW_BULK_CHUNK_MAX
#define MW_BULK_CHUNK_MAX 64u
#endif

/* Lane 0 of the worker that counted a bulk or block task's last instance: completes its future
 * fut (kind, frame flags fl: cancelled, failed with the message its slot keeps, or done), drops
 * the futures its arguments (args) hold and the slot's reference. */
__device__ __noinline__ void mw_bulk_complete(mw_ctx *c, mw_u64 fut, mw_u32 kind, mw_u32 fl, const mw_u8 *args) {
  const mw_u32 s = MW_FUT_SLOT(fut), g = MW_FUT_GEN(fut);
  mw_slot *sl = &c->slots[s];
  char msg[MW_MSG_BYTES];
  if (fl & MW_FR_CANCEL) {
    mw_cancel_msg(msg, kind);
    mw_count(c, kind, MW_CNT_CANCELLED);
    mw_complete_slot(c, s, g, MW_ST_CANCELLED, 0, MW_RT_VOID, MW_FAIL_CANCELLED, msg, 0);
  } else if (fl & MW_FR_FAILED) {
    MW_FENCE(); /* the message, stored by the instance that failed */
    for (int q = 0; q < MW_MSG_BYTES; ++q) msg[q] = sl->msg[q];
    mw_count(c, kind, MW_CNT_FAILED);
    mw_complete_slot(c, s, g, MW_ST_FAILED, 0, MW_RT_VOID, sl->code, msg, 0);
  } else {
    mw_count(c, kind, MW_CNT_COMPLETED);
    mw_complete_slot(c, s, g, MW_ST_OK, 0, MW_RT_VOID, 0, 0, 0);
  }
  const mw_u32 futargs = mw_kind(kind)->futargs;
  if (futargs) mw_drop_holds(c, futargs, args);
  if (s >= c->host_slots) mw_slot_unref(c, s, g, 1);
}

/* Runs instances of bulk frame f (this worker holds a reference) until none are left to claim,
 * each in a copy of the frame at byte off of the lane stacks; the worker that finishes the last
 * instance completes the future. A cancelled bulk task runs no more instances: the worker that
 * sees the request claims the rest and skips them. c->kind, c->off and c->bulk are set for the
 * instances; the caller restores what it needs. Collective.
 * Alone (a join of a bulk task nobody else can reach: its record claimed, nothing invited, as
 * many instances as mw_alone allows), the counters are this warp's: no claims, no invitations; it
 * runs every instance, looking for the task's cancellation before each. Each chunk's instances
 * are timed into the kind's hint (protocol.h, Running a bulk task's instances alone). */
template <bool JOIN>
__device__ __noinline__ void mw_bulk_chunks(mw_ctx *c, mw_u32 f, mw_u32 off, bool alone) {
  mw_state *st = c->st;
  mw_frame_hdr *h = mw_frame(c, f);
  mw_u32 kind = mw_bcast(c->lane == 0 ? h->kind : 0u);
  mw_u32 n = mw_bcast(c->lane == 0 ? h->bulk_n : 0u);
  const mw_kind_info *ki = mw_kind(kind);
  c->bulk = 1;
  c->cancelled = 0;
  c->kind = kind;
  c->off = off;
  mw_u32 chunk = n / (st->nworkers * MW_BULK_CHUNK_DIV);
  chunk = chunk < 1 ? 1 : (chunk > MW_BULK_CHUNK_MAX ? MW_BULK_CHUNK_MAX : chunk);
  bool shared = false;
  mw_u64 fut = mw_bcast64(c->lane == 0 ? h->fut : 0ull);
  mw_u32 next = 0; /* alone: the next instance */
  mw_u32 seen = c->lane == 0 ? *mw_hint(st, kind) : 0u; /* the kind's hint */
  mw_probe_bulk_mark(c->lane, c->cw, fut, 0);
  for (;;) {
    /* a joining level keeps up its periodic work (polling, its levels' cancellation, the host's
     * stop), and claims on until no instance is left: until its first claim invited others, no
     * one else may reach the frame, so a join that stopped early could leave instances nobody
     * runs. Its cancellation or a stop takes effect at the await, after the join. Alone, it
     * looks for the task's cancellation before each instance and needs no other work. */
    if (JOIN && !alone) mw_tick(c);
    /* a poller goes on taking from the inbox while it runs a long bulk task: host spawns and
     * cancel requests (this task's own included) are not held up by it */
    if (mw_bcast(c->lane == 0 ? (mw_u32)mw_poll_due(c) : 0u)) {
      mw_u32 g = mw_take_inbox(c, 1);
      if (g != MW_NONE && c->lane == 0) mw_gq_push(st, g);
    }
    mw_u32 i = 0, skip = 0;
    if (c->lane == 0) {
      MW_PROBE(MW_PR_BULK_CLAIM);
      if (JOIN && alone) {
        i = next;
        skip = i < n && mw_cancel_asked(c, fut);
        next = skip ? n : i + chunk;
      } else if (mw_cancel_asked(c, fut)) {
        i = atomicExch(&h->bulk_next, n); /* [i, n) is ours to skip; later claims find n */
        skip = 1;
      } else {
        i = atomicAdd(&h->bulk_next, chunk);
        if (!shared) { /* post it on the board for every idle warp; when the board is full, invite
                        * up to MW_BULK_FANOUT more workers, each of which does the same */
          shared = true;
          mw_u32 k = 0;
          while (k < MW_BULK_FANOUT && i + (k + 2) * chunk <= n) ++k;
          /* seats: a worker for each chunk left after this one (all of them with MW_BOARD_ALL) */
          const mw_u32 left = n > i + chunk ? (n - i - chunk + chunk - 1u) / chunk : 0u;
          const mw_u32 seats = MW_BOARD_ALL || left > 0x7fffffffu ? 0x7fffffffu : left;
          if (k && !MW_NO_BOARD && mw_board_post(c, f, seats)) k = 0;
          if (k) {
            atomicAdd(&h->bulk_refs, k);
            for (mw_u32 j = 0; j < k; ++j) mw_gq_push(st, f);
          }
        }
      }
    }
    i = mw_bcast(i);
    skip = mw_bcast(skip);
    if (i >= n) {
      if (c->lane == 0) mw_board_remove(c, f); /* every instance is claimed */
      break;
    }
    mw_probe_bulk_mark(c->lane, c->cw, fut, 1);
    mw_u32 end = skip ? n : (i + chunk < n ? i + chunk : n);
    mw_u32 failed = 0;
    if (skip && c->lane == 0) atomicOr(&h->flags, (mw_u32)MW_FR_CANCEL);
    if (c->trace_ev && !skip) mw_trace_begin(c, kind, fut, i);
    const mw_u32 *src = (const mw_u32 *)((mw_u8 *)h + MW_FRAME_HDR_BYTES);
    const long long t0 = clock64();
    for (mw_u32 k = i; k < end && !skip; ++k) {
      MW_PROBE(MW_PR_INSTANCE);
      mw_u32 *dst = (mw_u32 *)(c->stk + off);
      for (mw_u32 w = 0; w * 4 < ki->frame_bytes; ++w) dst[w] = src[w];
      c->index = k;
      c->resume = 0;
      c->status = MW_RUN_DONE;
      c->fail_fut = 0;
      {
        MW_TASK_IN();
        mw_bulk_dispatch<JOIN>(c, kind, c->stk + off);
        MW_TASK_OUT();
      }
      __syncwarp();
      if (c->status != MW_RUN_DONE && !failed) {
        failed = 1;
        if (c->lane == 0) { /* the first failure wins; the message is kept in the slot */
          if (!(atomicOr(&h->flags, (mw_u32)MW_FR_FAILED) & MW_FR_FAILED)) {
            mw_slot *sl = &c->slots[MW_FUT_SLOT(fut)];
            sl->code = c->fail_code;
            mw_compose(sl->msg, mw_kind_name(kind), c->fail_msg ? c->fail_msg : "failed");
          }
        }
      }
    }
    if (c->trace_ev && !skip) mw_trace_end(c, failed ? MW_TR_FAILED : MW_TR_DONE, end - i);
    mw_u32 completed = 0;
    if (c->lane == 0) {
      if (!skip && !failed) mw_inst_time(c, kind, end - i, t0, &seen);
      MW_PROBE(MW_PR_BULK_DONE);
      bool last;
      if (JOIN && alone) {
        last = end == n;
      } else {
        MW_FENCE();
        last = atomicAdd(&h->bulk_done, end - i) + (end - i) == n;
      }
      if (last) mw_bulk_complete(c, fut, kind, mw_ld32(&h->flags), (const mw_u8 *)src);
      completed = last;
      if (last) mw_board_remove(c, f);
    }
    mw_probe_bulk_mark(c->lane, c->cw, fut, 2);
    if (mw_bcast(completed)) return; /* every instance claimed and finished */
  }
}

/* Runs instances of a bulk frame that this worker took from the global queue until none are
 * left to claim (mw_bulk_chunks); the last reference frees the frame. Collective. */
__device__ __noinline__ void mw_run_bulk(mw_ctx *c, mw_u32 f) {
  MW_PROBE(MW_PR_BULK);
#ifdef MW_SIM
  if (c->lane == 0) c->gw->running = mw_frame(c, f)->kind + 1; /* for a fault report: which task the warp ran */
#endif
  mw_bulk_chunks<false>(c, f, 0, false);
  if (c->lane == 0) mw_bulk_drop(c, f);
  c->bulk = 0;
  c->index = 0;
#ifdef MW_SIM
  if (c->lane == 0) c->gw->running = 0;
#endif
  __syncwarp();
}

/* How long (ns) a join that claimed the last instances waits for the workers still running
 * theirs before its await suspends (protocol.h, Joining a bulk task); 0: it suspends at once. */
#ifndef MW_JOIN_SPIN_NS
#define MW_JOIN_SPIN_NS 20000u
#endif
/* Lane 0 of a join whose instances are all claimed: watches bulk future h's slot until it is
 * complete, cancellation is asked, the executor stops, or MW_JOIN_SPIN_NS pass. Only a hint for
 * the await that follows, which reads the slot itself. Pending is ctl (gen, word) or, while
 * nobody registered on it, (gen - 1, CLOSED) (protocol.h, future slots): the common case here,
 * since the join is the task's only awaiter and has not registered yet. */
__device__ __forceinline__ void mw_join_linger(mw_ctx *c, mw_u64 h) {
  if (MW_JOIN_SPIN_NS == 0u) return;
  MW_PROBE(MW_PR_LINGER);
  const mw_u64 *ctl = &c->slots[MW_FUT_SLOT(h)].ctl;
  const mw_u32 g = MW_FUT_GEN(h);
  const mw_u64 t0 = MW_GLOBALTIMER();
  for (;;) {
    const mw_u64 v = mw_ld64(ctl);
    const mw_u32 og = (mw_u32)(v >> 32), w = (mw_u32)v;
    const bool unstarted = og + 1u == g && w == MW_CTL_CLOSED;
    if (!unstarted && (og != g || w == MW_CTL_CLOSED || (w & MW_CTL_CANCEL))) return;
    if (MW_GLOBALTIMER() - t0 > MW_JOIN_SPIN_NS || mw_ld32(&c->st->stop)) return;
    __nanosleep(100);
  }
}

/* The await of one future h that is the latest bulk task its level spawned, still in its record
 * (protocol.h, Joining a bulk task): the warp claims the record and runs the instances left to
 * claim, in a frame after the level's, then drops the record's reference; the await goes on as
 * usual (complete if the last instance finished meanwhile, else it suspends). Not while the
 * level is to stop or a trace records runs: the record then runs as any other. Collective. */
__device__ __noinline__ void mw_await_bulk(mw_ctx *c, mw_u64 h) {
  MW_PROBE(MW_PR_JOIN);
  mw_u32 go = 0;
  if (c->lane == 0) {
    mw_wstate *ws = MW_WS(c);
    mw_level *L = MW_LV(c);
    const mw_u32 f = L->bulk - 1u;
    mw_u32 coff = mw_round16(mw_await_off(c) + 8u);
    if (L->bulk && !c->cancelled && !c->nest && !c->yield && !c->trace_ev && !c->trace_due &&
        c->d + 1 < MW_LEVELS) {
      L->bulk = 0;
      for (mw_u32 i = 0; i < MW_RECS; ++i) {
        mw_rec *r = &ws->rec[i];
        mw_u32 st = mw_ld32(&r->state);
        if (MW_REC_ST(st) != MW_REC_READY || !(r->flags & MW_RF_BULK) || r->frame != f) continue;
        /* h's (read before the claim: a record that changed hands since fails the CAS) */
        if (mw_frame(c, f)->fut != h || coff + mw_kind(r->kind)->frame_bytes > MW_LSTACK_BYTES) break;
        if (atomicCAS(&r->state, st, (st & ~15u) | MW_REC_OWNED) == st) {
          MW_FENCE_CTA();
          mw_st32(&r->state, (st & ~15u) | MW_REC_FREE);
          go = 1u | (mw_u32)mw_alone(c, r->kind, mw_frame(c, f)->bulk_n) << 1 | f << 2; /* the record's reference is the join's */
        }
        break;
      }
    }
  }
  go = mw_bcast(go);
  if (!go) return;
  const mw_u32 f = go >> 2, kind = c->kind, poff = c->off, resume = c->resume;
  const bool alone = (go >> 1) & 1u;
#ifdef MW_SIM
  const mw_u32 running = c->gw->running;
  if (c->lane == 0) c->gw->running = mw_frame(c, f)->kind + 1;
#endif
  /* the instances run as level d + 1 with nothing of their own: they may not own children */
  c->d++;
  if (c->lane == 0) {
    mw_level *K = MW_LV(c);
    K->fut = 0;
    K->children = 0;
    K->flags = 0;
    K->naw = K->cur = 0;
    K->bulk = 0;
  }
  {
    MW_PROBE(alone ? MW_PR_JOIN_ALONE : MW_PR_JOIN_GO); /* the joins that claimed their record */
    mw_bulk_chunks<true>(c, f, mw_round16(mw_await_off(c) + 8u), alone);
  }
  if (c->lane == 0) {
    if (alone) mw_frame_free(c, f); /* the only reference, and nobody else saw the frame */
    else mw_bulk_drop(c, f);
    if (!alone) mw_join_linger(c, h);
  }
  c->d--;
  c->bulk = 0;
  c->index = 0;
#ifdef MW_SIM
  if (c->lane == 0) c->gw->running = running;
#endif
  mw_level_back(c, kind, poff, resume);
}

/* The next task for this idle warp: its own newest record (a woken task runs where it woke, a
 * spawn its parent left behind), else the oldest aged record of another warp of its CTA, else
 * the global run queue. Collective. Sets *rec (a claimed record) or returns a frame. */
__device__ __noinline__ mw_u32 mw_next(mw_ctx *c, mw_rec **rec) {
  mw_u32 f = MW_NONE;
  mw_u64 rp = 0;
  if (c->lane == 0) {
    mw_wstate *ws = MW_WS(c);
    mw_rec *best = 0;
    mw_u32 bs = 0;
    for (mw_u32 i = 0; i < MW_RECS; ++i) {
      mw_rec *r = &ws->rec[i];
      mw_u32 s = mw_ld32(&r->state);
      if (MW_REC_ST(s) == MW_REC_READY && (!best || r->t0 >= best->t0)) {
        best = r;
        bs = s;
      }
    }
    if (best && atomicCAS(&best->state, bs, (bs & ~15u) | MW_REC_OWNED) == bs) rp = (mw_u64)best;
  }
  rp = mw_bcast64(rp);
  if (!rp) { /* another warp's record of the CTA, else the global queue */
    mw_rec *r = mw_cta_claim(c, MW_PICK_STEAL, MW_REC_TAKEN);
    rp = (mw_u64)r;
    if (r && c->lane == 0) MW_WS(c)->steals++;
    if (!r && c->lane == 0) f = mw_gq_pop_cta(c);
  }
  *rec = (mw_rec *)rp;
  return mw_bcast(f);
}

/* Whether this warp has a READY record of its own (MW_BULK_ONLY_FROM). Collective. */
__device__ __forceinline__ bool mw_own_ready(mw_ctx *c) {
  mw_u32 r = 0;
  if (c->lane == 0)
    for (mw_u32 i = 0; i < MW_RECS; ++i) r |= MW_REC_ST(mw_ld32(&MW_WS(c)->rec[i].state)) == MW_REC_READY;
  return mw_bcast(r) != 0;
}

/* Hands everything this warp holds to device memory before it leaves, so that a relaunch
 * with a different number of workers loses nothing: its records become frames in the global
 * queue, its caches go back to the free lists, its counters to its rows. Lane 0. */
__device__ __noinline__ void mw_flush(mw_ctx *c) {
  mw_wstate *ws = MW_WS(c);
  mw_state *st = c->st;
  for (mw_u32 i = 0; i < MW_RECS; ++i) {
    mw_rec *r = &ws->rec[i];
    mw_u32 s = mw_ld32(&r->state);
    while (MW_REC_ST(s) == MW_REC_TAKEN) s = mw_ld32(&r->state); /* a thief is copying it */
    if (MW_REC_ST(s) != MW_REC_READY || atomicCAS(&r->state, s, (s & ~15u) | MW_REC_OWNED) != s) continue;
    mw_gq_push(st, mw_rec_to_frame(c, r));
    mw_st32(&r->state, (s & ~15u) | MW_REC_FREE);
  }
  for (mw_u32 i = 0; i < MW_KIDS; ++i) ws->kid[i].state = MW_KID_NONE;
  ws->kid_used = 0;
  if (ws->nfree_frames) mw_fring_give(st, ws->free_frames, ws->nfree_frames);
  ws->nfree_frames = 0;
  while (ws->nfree_slots) {
    --ws->nfree_slots;
    mw_stack_push(&st->slot_head, st->slot_next, ws->free_slots[ws->nfree_slots]);
  }
  while (ws->nfree_nodes) mw_node_push(c, ws->free_nodes[--ws->nfree_nodes]);
  mw_flush_counts(c);
  ws->depth = 0;
}

/* The stop barrier (protocol.h, Stopping): true when every worker arrived and all leave,
 * false when the host withdrew the stop first and this worker goes back to work. Lane 0. */
__device__ bool mw_stop_barrier(mw_state *st) {
  mw_u32 n = st->nworkers;
  atomicAdd(&st->stop_arrived, 1u);
  for (mw_u32 nap = 1024;;) {
    mw_u32 a = mw_ld32(&st->stop_arrived);
    if (a >= n) return true;
    if (!mw_ld32(&st->stop) && atomicCAS(&st->stop_arrived, a, a - 1u) == a) return false;
    __nanosleep(nap);
#ifdef MW_SIM
    /* sim: a short nap is a yield, and a barrier that a task which never returns keeps open
     * (its runtime closed past the deadline and abandoned) would keep host threads busy for as
     * long as the process lives: the naps grow to 200 us */
    if (nap < 200000u) nap *= 2;
#endif
  }
}

/* ---- block tasks (protocol.h, Block tasks) --------------------------------------------------
 * A block task's instances run on every warp of one worker CTA at once. The worker that takes
 * its frame is the host warp: it holds the CTA's block slot (mw_blk_slot: MW_BLK) and the CTA's
 * other warps arrive at their loop's top; the last arrival sets RUN, and the warps run the
 * instances that the host warp claims, one at a time, with the CTA barrier between them
 * (bar.sync 1 on the GPU: nothing else in the executor uses barrier 1). */
#ifndef MW_SIM
extern __shared__ __align__(16) mw_u8 mw_block_area[]; /* MW_BLOCK_SMEM bytes of dynamic shared memory */
#endif

/* The CTA's block area, where the running block task's __shared__ variables are. */
__device__ mw_u8 *mw_block_smem(mw_ctx *c) {
#ifdef MW_SIM
  return c->st->sim_block + (mw_u64)(c->wid / MW_CTA_WARPS) * MW_BLOCK_SMEM;
#else
  (void)c;
  return mw_block_area;
#endif
}

#ifdef MW_SIM
/* sim: what barrier() throws in every lane when the warps of the CTA met at different places;
 * the instance's run catches it (the barrier they met at stands for the instance's end). */
struct mw_blk_abort {};

/* sim: string s, or a number's digits, after dst[n], up to MW_MSG_BYTES; returns the new length. */
__device__ int mw_blk_put(char *dst, int n, const char *s) {
  while (s && *s && n < MW_MSG_BYTES - 1) dst[n++] = *s++;
  dst[n] = 0;
  return n;
}
__device__ int mw_blk_put_u(char *dst, int n, unsigned v) {
  char d[12];
  int k = 0;
  do { d[k++] = (char)('0' + v % 10u); v /= 10u; } while (v && k < 11);
  while (k && n < MW_MSG_BYTES - 1) dst[n++] = d[--k];
  dst[n] = 0;
  return n;
}

/* sim, lane 0: the block task that the CTA runs fails with msg unless an instance failed before
 * (the first failure's message is kept, as for a bulk task). */
__device__ void mw_blk_fail(mw_ctx *c, const char *msg) {
  const mw_u32 v = mw_ld32(&MW_BLK(c)->word);
  mw_frame_hdr *h = mw_frame(c, mw_ld32(&MW_BLK(c)->own[MW_BLK_HOST(v)]) - 1u);
  if (atomicOr(&h->flags, (mw_u32)MW_FR_FAILED) & MW_FR_FAILED) return;
  mw_slot *sl = &c->slots[MW_FUT_SLOT(h->fut)];
  sl->code = MW_FAIL_DIVERGED;
  mw_compose(sl->msg, mw_kind_name(h->kind), msg);
}

/* sim, lane 0 of the warp whose arrival completed a barrier that found the warps at different
 * places: "<task>: warps at different barriers: line 5 (warp 0), line 7 (warps 1 2 3)". */
__device__ void mw_blk_diverged(mw_ctx *c) {
  const mw_blk_slot *b = MW_BLK(c);
  char m[MW_MSG_BYTES];
  int n = mw_blk_put(m, 0, MW_BLK_DIVERGED + 2); /* the task's name and ": " come with mw_compose */
  mw_u32 done = 0;
  for (mw_u32 w = 0; w < MW_CTA_WARPS; ++w) {
    if (done & (1u << w)) continue;
    const int at = (int)mw_ld32((const mw_u32 *)&b->line[w]);
    if (done) n = mw_blk_put(m, n, ", ");
    if (at == MW_BLK_AT_END) n = mw_blk_put(m, n, "the end of the body");
    else if (at == MW_BLK_AT_LOST) n = mw_blk_put(m, n, "lanes diverged");
    else if (at == MW_BLK_AT_NEXT) n = mw_blk_put(m, n, "the executor");
    else n = mw_blk_put_u(m, mw_blk_put(m, n, "line "), (unsigned)at);
    mw_u32 ws = 0;
    for (mw_u32 k = w; k < MW_CTA_WARPS; ++k)
      if ((int)mw_ld32((const mw_u32 *)&b->line[k]) == at) ws |= 1u << k;
    done |= ws;
    n = mw_blk_put(m, n, __popc((int)ws) > 1 ? " (warps" : " (warp");
    for (mw_u32 k = 0; k < MW_CTA_WARPS; ++k)
      if (ws & (1u << k)) n = mw_blk_put_u(m, mw_blk_put(m, n, " "), k);
    n = mw_blk_put(m, n, ")");
  }
  mw_blk_fail(c, m);
}

/* sim, lane 0 of each warp of the CTA: the CTA barrier, arrived at place at (a line of the body,
 * or MW_BLK_AT_*). True when every warp arrived at the same place; else the task fails with the
 * places (the arrival that completes the barrier writes it) and every warp learns it. A wait
 * leaves the warp when the runtime faulted (its other warps may have stopped). */
__device__ bool mw_blk_bar_sim(mw_ctx *c, int at) {
  mw_blk_slot *b = MW_BLK(c);
  mw_st32((mw_u32 *)&b->line[c->cw], (mw_u32)at);
  MW_FENCE_CTA();
  const mw_u32 old = atomicAdd(&b->bar, 1u), g = old >> 4;
  if ((old & 15u) + 1u == MW_CTA_WARPS) {
    bool bad = false;
    for (mw_u32 w = 0; w < MW_CTA_WARPS; ++w) {
      const int l = (int)mw_ld32((const mw_u32 *)&b->line[w]);
      bad |= l != at || l == MW_BLK_AT_LOST;
    }
    if (bad) mw_blk_diverged(c);
    mw_st32(&b->bad, bad);
    MW_FENCE_CTA();
    atomicExch(&b->bar, (g + 1u) << 4);
    return !bad;
  }
  const int was = __mw_sim_task(0); /* the executor's wait: not stopped as task code is */
  for (mw_u32 nap = 256; (mw_ld32(&b->bar) >> 4) == g;) {
    if (__mw_sim_faulted()) {
      MW_BLK(c)->in[c->cw] = 0;
      __mw_sim_fail_warp("stopped: another warp faulted");
    }
    __nanosleep(nap);
    if (nap < 200000u) nap *= 2;
  }
  __mw_sim_task(was);
  MW_FENCE_CTA();
  return !mw_ld32(&b->bad);
}
#endif

/* The CTA barrier of the executor's own steps (at: MW_BLK_AT_*); on sim false when the warps
 * were not all there. Collective. */
__device__ __forceinline__ bool mw_blk_sync(mw_ctx *c, int at) {
  __syncwarp();
#ifdef MW_SIM
  return mw_bcast(c->lane == 0 ? (mw_u32)mw_blk_bar_sim(c, at) : 0u) != 0;
#else
  (void)c;
  (void)at;
  asm volatile("bar.sync 1, %0;" ::"r"(MW_CTA_WARPS * 32u) : "memory");
  return true;
#endif
}

/* barrier() in a block task's body: every warp of the CTA. On sim, lanes of one warp at
 * different lines, or warps at different barriers or at the body's end, fail the task with the
 * lines (the body stops there: mw_blk_abort). Collective. */
__device__ void mw_block_barrier(mw_ctx *c, int line) {
#ifdef MW_SIM
  if (MW_CONVERGE(mw_kind_file(c->kind), line, 0ull)) {
    /* the lanes' lines: the lowest and the highest */
    const int lo = (int)__reduce_min_sync(MW_FULL, (unsigned)line), hi = (int)__reduce_max_sync(MW_FULL, (unsigned)line);
    if (c->lane == 0) {
      char m[MW_MSG_BYTES];
      int n = mw_blk_put(m, 0, MW_BLK_DIVERGED + 2);
      n = mw_blk_put_u(m, mw_blk_put(m, n, "line "), (unsigned)lo);
      n = mw_blk_put_u(m, mw_blk_put(m, n, ", line "), (unsigned)hi);
      n = mw_blk_put_u(m, mw_blk_put(m, n, " (lanes of warp "), c->cw);
      mw_blk_put(m, n, ")");
      mw_blk_fail(c, m);
    }
    line = MW_BLK_AT_LOST;
  }
  if (!mw_blk_sync(c, line)) throw mw_blk_abort();
#else
  (void)line;
  mw_blk_sync(c, 0);
#endif
}

/* Lane 0 of the host warp: the next instance of block frame f (MW_NONE: none left). A cancelled
 * task's instances left are claimed and skipped. A claim invites up to MW_BULK_FANOUT more CTAs
 * through the global queue (each invitation a reference), once per run, while warps are idle
 * (mw_state.hungry), and never past one reference per worker CTA. */
__device__ mw_u32 mw_blk_claim(mw_ctx *c, mw_u32 f, bool *invited);
/* Lane 0: k instances of block frame f ended (run or skipped); the last completes its future. */
__device__ __noinline__ void mw_blk_done(mw_ctx *c, mw_u32 f, mw_u32 k) {
  mw_frame_hdr *h = mw_frame(c, f);
  MW_FENCE(); /* what the CTA's warps wrote, before the count another CTA may complete with */
  if (atomicAdd(&h->bulk_done, k) + k != h->bulk_n) return;
  MW_FENCE();
  mw_bulk_complete(c, h->fut, h->kind, mw_ld32(&h->flags), (const mw_u8 *)h + MW_FRAME_HDR_BYTES);
}
__device__ mw_u32 mw_blk_claim(mw_ctx *c, mw_u32 f, bool *invited) {
  mw_frame_hdr *h = mw_frame(c, f);
  const mw_u32 n = h->bulk_n;
  if (mw_cancel_asked(c, h->fut)) {
    const mw_u32 i = atomicExch(&h->bulk_next, n); /* [i, n) is ours to skip */
    if (i < n) {
      atomicOr(&h->flags, (mw_u32)MW_FR_CANCEL);
      mw_blk_done(c, f, n - i);
    }
    return MW_NONE;
  }
  const mw_u32 i = atomicAdd(&h->bulk_next, 1u);
  if (i >= n) return MW_NONE;
  if (!*invited) { /* while idle warps wait, and its references stay fewer than the CTAs */
    const mw_u32 left = n - i - 1u, ctas = c->st->nworkers / MW_CTA_WARPS, refs = mw_ld32(&h->bulk_refs);
    mw_u32 k = left < MW_BULK_FANOUT ? left : MW_BULK_FANOUT;
    if (refs + k > ctas) k = ctas > refs ? ctas - refs : 0u;
    if (k && mw_ld32(&c->st->hungry)) {
      *invited = true;
      atomicAdd(&h->bulk_refs, k);
      for (mw_u32 j = 0; j < k; ++j) mw_gq_push(c->st, f);
    }
  }
  return i;
}

/* Every warp of the CTA, once the slot is RUN (host: the host warp): runs the instances the host
 * warp claims until none is left. The warps read the frame (own[host]) after their first
 * barrier together. lost (sim): this warp was restarted inside an instance's body (its lanes
 * diverged): it goes to that instance's end, where the others learn it failed. Collective. */
__device__ __noinline__ void mw_block_run(mw_ctx *c, mw_u32 host, bool lost) {
  mw_blk_slot *b = MW_BLK(c);
  const bool is_host = c->cw == host;
  if (c->lane == 0) b->in[c->cw] = host + 1u;
  bool invited = false, first = true;
  mw_u32 f = 0, kind = 0;
  mw_frame_hdr *h = 0;
  const mw_kind_info *ki = 0;
#ifdef MW_SIM
  const mw_u32 running = c->gw->running;
#endif
  for (;;) {
    /* the next instance: claimed by the host warp, read by every warp after the barrier (the
     * end of the instance a restarted warp left, instead) */
    if (!lost && is_host && c->lane == 0) mw_st32(&b->index, mw_blk_claim(c, mw_ld32(&b->own[host]) - 1u, &invited));
    mw_blk_sync(c, lost ? MW_BLK_AT_LOST : MW_BLK_AT_NEXT);
    if (first) {
      first = false;
      f = mw_bcast(c->lane == 0 ? mw_ld32(&b->own[host]) - 1u : 0u);
      if (c->lane == 0) MW_FENCE(); /* the frame, which the host warp acquired from the queue */
      __syncwarp();
      h = mw_frame(c, f);
      kind = mw_bcast(c->lane == 0 ? h->kind : 0u);
      ki = mw_kind(kind);
#ifdef MW_SIM
      if (c->lane == 0) c->gw->running = kind + 1; /* for a fault report: which task the warp ran */
#endif
    }
    if (lost) {
      lost = false;
    } else {
      const mw_u32 i = mw_bcast(c->lane == 0 ? mw_ld32(&b->index) : 0u);
      if (i == MW_NONE) break;
      const mw_u32 *src = (const mw_u32 *)((mw_u8 *)h + MW_FRAME_HDR_BYTES);
      mw_u32 *dst = (mw_u32 *)c->stk;
      for (mw_u32 w = 0; w * 4 < ki->frame_bytes; ++w) dst[w] = src[w];
      c->index = i;
      c->kind = kind;
      c->off = 0;
      c->bulk = 1;
      c->resume = 0;
      c->status = MW_RUN_DONE;
      c->fail_fut = 0;
      c->cancelled = 0;
      bool ended = true; /* the body returned: the warps meet at its end */
      const bool traced = is_host && c->trace_ev; /* lane 0 of the host warp: an event an instance */
      if (traced) mw_trace_begin(c, kind, h->fut, i);
#ifdef MW_SIM
      const int was = __mw_sim_task(1); /* MW_TASK_IN, with the body's abort caught */
      try {
        mw_dispatch(c, kind, c->stk);
      } catch (mw_blk_abort &) {
        ended = false; /* the barrier that failed was where the warps met */
      }
      __mw_sim_task(was);
#else
      mw_dispatch(c, kind, c->stk);
#endif
      __syncwarp();
      if (c->status != MW_RUN_DONE && c->lane == 0) { /* the first failure's message is kept */
        if (!(atomicOr(&h->flags, (mw_u32)MW_FR_FAILED) & MW_FR_FAILED)) {
          mw_slot *sl = &c->slots[MW_FUT_SLOT(h->fut)];
          sl->code = c->fail_code;
          mw_compose(sl->msg, mw_kind_name(kind), c->fail_msg ? c->fail_msg : "failed");
        }
      }
      if (ended) mw_blk_sync(c, MW_BLK_AT_END);
      if (traced) mw_trace_end(c, (mw_ld32(&h->flags) & MW_FR_FAILED) ? MW_TR_FAILED : MW_TR_DONE, 1u);
    }
    if (is_host && c->lane == 0) mw_blk_done(c, f, 1u);
  }
  /* every warp is past the last barrier: the frame's reference goes, the slot is free */
  if (c->lane == 0) {
    b->in[c->cw] = 0;
#ifdef MW_SIM
    c->gw->running = running;
#endif
    if (is_host) {
      mw_bulk_drop(c, f);
      const mw_u32 v = mw_ld32(&b->word);
      MW_FENCE_CTA();
      mw_st32(&b->word, (MW_BLK_SEQ(v) + 1u) << 12 | MW_BLK_FREE);
    }
  }
  c->bulk = 0;
  c->index = 0;
  c->kind = 0;
  __syncwarp();
}

/* Lane 0 of a warp that arrived at the CTA's hold, the slot now v: waits until the slot is RUN
 * (true) or the hold is withdrawn (false). The host warp withdraws it when the CTA's warps have
 * not all arrived within MW_BLOCK_HOLD_NS, and when the executor stops. */
__device__ bool mw_blk_wait(mw_ctx *c, mw_u32 v, bool host) {
  mw_blk_slot *b = MW_BLK(c);
  const mw_u64 t0 = MW_GLOBALTIMER();
  for (mw_u32 nap = 32;;) {
    const mw_u32 w = mw_ld32(&b->word);
    if (MW_BLK_SEQ(w) != MW_BLK_SEQ(v) || MW_BLK_STATE(w) == MW_BLK_FREE) return false;
    if (MW_BLK_STATE(w) == MW_BLK_RUN) return true;
    if (host && (MW_GLOBALTIMER() - t0 > MW_BLOCK_HOLD_NS || mw_ld32(&c->st->stop))) {
      if (atomicCAS(&b->word, w, (MW_BLK_SEQ(w) + 1u) << 12 | MW_BLK_FREE) == w) return false;
      continue; /* an arrival came first */
    }
    __nanosleep(nap);
#ifdef MW_SIM
    if (nap < 8192u) nap *= 2; /* sim: a nap under 2 us is a yield: sleep, for the busy warps' threads */
#else
    if (nap < 1024u) nap *= 2;
#endif
  }
}

#ifdef MW_GRIDS
/* Block tasks launched as a grid (protocol.h, Block tasks, "As a grid"). The image defines
 * mw_grid_launch: a grid of count blocks of kind's body, fire-and-forget, whose block b runs
 * instance first + b; false when kind has no grid or the launch failed. */
__device__ bool mw_grid_launch(mw_state *st, mw_u32 kind, mw_u32 f, mw_u32 first, mw_u32 count);

/* One block of a block task's grid (the kernel the image generates for each block kind): runs
 * instance first + blockIdx.x of frame f with a context that holds what a block body reads
 * (lane, warp, instance, the settings), counts it, and the grid's last block to end returns the
 * frame to the global queue (the grid's reference), after the block that counted the task's
 * last instance marked it MW_FR_GRID_LAST for a worker to complete. */
template <class F>
__device__ __forceinline__ void mw_grid_run(mw_state *st, mw_u32 f, mw_u32 first, mw_u32 kbase) {
  mw_ctx c;
  c.st = st;
  c.frames = st->frames;
  c.frame_bytes = st->frame_bytes;
  c.lane = threadIdx.x & 31u;
  c.cw = threadIdx.x >> 5;
  c.cn = MW_CTA_WARPS;
  c.index = first + blockIdx.x;
  c.bulk = 1;
  mw_frame_hdr *h = mw_frame(&c, f);
  c.kind = h->kind;
  reinterpret_cast<F *>((mw_u8 *)h + MW_FRAME_HDR_BYTES)->_mw_body(&c, kbase);
  __syncthreads(); /* every warp's stores before the count */
  if (threadIdx.x == 0) {
    MW_FENCE();
    if (atomicAdd(&h->bulk_done, 1u) + 1u == h->bulk_n) atomicOr(&h->flags, (mw_u32)MW_FR_GRID_LAST);
    MW_FENCE();
    if (atomicAdd(&h->children, 1u) + 1u == gridDim.x) mw_gq_push(st, f);
  }
}

/* Lane 0 of the warp that took block frame f (its reference is ours), when its unclaimed
 * instances are at least st->grid_min: claims them all and launches them as a grid, which takes
 * the reference; true when f is dealt with. A launch that fails fails the task. */
__device__ bool mw_grid_try(mw_ctx *c, mw_u32 f, mw_frame_hdr *h) {
  const mw_u32 min = mw_ld32(&c->st->grid_min), n = h->bulk_n;
  if (!min || n - mw_ld32(&h->bulk_next) < min) return false;
  const mw_u32 i = atomicExch(&h->bulk_next, n);
  if (i < n) {
    h->children = 0; /* the grid's blocks that ended */
    if (mw_grid_launch(c->st, h->kind, f, i, n - i)) {
      atomicAdd(&c->st->grids, 1ull);
      return true;
    }
    if (!(atomicOr(&h->flags, (mw_u32)MW_FR_FAILED) & MW_FR_FAILED)) {
      mw_slot *sl = &c->slots[MW_FUT_SLOT(h->fut)];
      sl->code = MW_FAIL_CAPACITY;
      mw_compose(sl->msg, mw_kind_name(h->kind), "its grid could not be launched from the device");
    }
    mw_blk_done(c, f, n - i);
  }
  mw_bulk_drop(c, f);
  return true;
}
#endif

/* A block frame f that this warp took (its reference is ours): the warp holds it for its CTA and
 * runs it with the CTA's other warps, or hands it on: to the global queue when this CTA has
 * fewer than MW_CTA_WARPS warps (it never holds one), when another block task is held here, or
 * when the hold was withdrawn; dropped when every instance is claimed (an invitation that came
 * late) or skipped (cancelled before it ran). Collective. */
__device__ __noinline__ void mw_run_block(mw_ctx *c, mw_u32 f) {
  mw_u32 go = 0;
  if (c->lane == 0) {
    mw_state *st = c->st;
    mw_frame_hdr *h = mw_frame(c, f);
    mw_blk_slot *b = MW_BLK(c);
    bool invited = true;
#ifdef MW_GRIDS
    if ((mw_ld32(&h->flags) & MW_FR_GRID_LAST) &&
        (atomicAnd(&h->flags, ~(mw_u32)MW_FR_GRID_LAST) & MW_FR_GRID_LAST)) {
      /* its grid counted the last instance: complete it here, once */
      MW_FENCE();
      mw_bulk_complete(c, h->fut, h->kind, mw_ld32(&h->flags), (const mw_u8 *)h + MW_FRAME_HDR_BYTES);
      mw_bulk_drop(c, f);
    } else if (c->cn == MW_CTA_WARPS && !mw_cancel_asked(c, h->fut) && mw_grid_try(c, f, h)) {
      /* launched as a grid (or every instance was claimed already: dropped) */
    } else
#endif
    if (c->cn < MW_CTA_WARPS) {
      mw_gq_push(st, f);
      __nanosleep(10000); /* and naps, as an idle warp would, rather than take it back at once */
    } else if (mw_ld32(&h->bulk_next) >= h->bulk_n) {
      mw_bulk_drop(c, f);
    } else if (mw_cancel_asked(c, h->fut)) {
      mw_blk_claim(c, f, &invited);
      mw_bulk_drop(c, f);
    } else {
      mw_st32(&MW_BLK(c)->own[c->cw], f + 1u);
      MW_FENCE_CTA(); /* the frame's index before the hold that shows it */
      const mw_u32 v = mw_ld32(&b->word);
      const mw_u32 nv = (v & ~0xfffu) | c->cw << 8 | (1u << c->cw) << 4 | MW_BLK_HELD;
      if (MW_BLK_STATE(v) != MW_BLK_FREE || atomicCAS(&b->word, v, nv) != v) mw_gq_push(st, f);
      else if (mw_blk_wait(c, nv, true)) go = 1;
      else mw_gq_push(st, f); /* withdrawn: for a CTA whose warps are idle */
    }
  }
  if (mw_bcast(go)) mw_block_run(c, c->cw, false);
}

/* A warp at its loop's top that found a block task held in its CTA: arrives, and runs it with
 * the others once every warp is in (protocol.h, Block tasks). Collective. */
__device__ __noinline__ void mw_block_arrive(mw_ctx *c) {
  mw_u32 host = MW_NONE;
  if (c->lane == 0) {
    mw_blk_slot *b = MW_BLK(c);
    const mw_u32 bit = 1u << c->cw;
    if (c->idle) { /* at work from now on, as a warp that took a task */
      c->idle = 0;
      atomicSub(&c->st->hungry, 1u);
    }
    for (;;) {
      const mw_u32 v = mw_ld32(&b->word);
      if (MW_BLK_STATE(v) != MW_BLK_HELD || (MW_BLK_MASK(v) & bit)) break;
      mw_u32 nv = v | bit << 4;
      if (MW_BLK_MASK(nv) == (1u << MW_CTA_WARPS) - 1u) nv = (nv & ~15u) | MW_BLK_RUN;
      if (atomicCAS(&b->word, v, nv) == v) {
        if (mw_blk_wait(c, nv, false)) host = MW_BLK_HOST(nv);
        break;
      }
    }
  }
  host = mw_bcast(host);
  if (host != MW_NONE) mw_block_run(c, host, false);
}

/* Runs a task taken by the loop: a record, or a frame (plain, bulk or block; own: one this warp
 * made from the inbox just now, protocol.h "Own frames"). Collective. */
__device__ void mw_run_task(mw_ctx *c, mw_rec *rec, mw_u32 f, bool own) {
  c->yield = 0;
  c->nest = 0;
  if (c->lane == 0 && mw_counts_dirty(c, MW_WS(c))) mw_flush_counts(c); /* what ran before, for the host */
  if (rec) {
    mw_u32 bf = MW_NONE;
    if (c->lane == 0 && (rec->flags & MW_RF_BULK)) { /* a bulk task nobody joined: its reference is ours */
      bf = rec->frame;
      MW_FENCE_CTA();
      mw_st32(&rec->state, (rec->state & ~15u) | MW_REC_FREE);
    }
    bf = mw_bcast(bf);
    if (bf != MW_NONE) {
      if (c->lane == 0) MW_FENCE(); /* the frame (pairs with the spawner's fence before the record) */
      __syncwarp();
      return mw_run_bulk(c, bf);
    }
    mw_root_from_rec(c, rec, 0, 0);
  } else {
    /* a frame this warp's take kept is known from the take (Own frames: no fence either) */
    const mw_u32 cls = own ? c->own_flags & (MW_FR_BULK | MW_FR_BLOCK) : mw_frame_class(c, f);
    if (cls & MW_FR_BLOCK) return mw_run_block(c, f);
    if (cls & MW_FR_BULK) return mw_run_bulk(c, f);
    if (own) mw_root_own(c, f);
    else mw_root_from_frame(c, f, 0, 0);
  }
  mw_run_chain(c);
}

/* The worker's state in shared memory: a __shared__ array of the CTA on the GPU, host memory
 * the sim backend allocates for all CTAs. */
#ifdef MW_SIM
#define MW_CTA_STATE(st, cta) ((st)->sim_cta + (mw_u64)(cta) * MW_CTA_WARPS)
#else
#define MW_CTA_STATE(st, cta) mw_cta_shared
#endif

/* The longest nap of an idle worker between two looks for work, in ns. Idle workers spin on
 * the global queue's head and the CTA's records: the longer they nap, the less their reads and
 * CASes hold up the L2 for the workers that run tasks (measured: bench/NOTES.md). A poller
 * naps at most MW_POLL_NAP_MAX, so a host spawn is seen soon. */
#ifndef MW_IDLE_NAP_MAX
#define MW_IDLE_NAP_MAX 8192u
#endif
#ifndef MW_POLL_NAP_MAX
#define MW_POLL_NAP_MAX 1024u
#endif
/* An idle poller that took a spawn less than this long ago (ns) does not nap at all (on sim it
 * does: its warps are threads of a machine with few cores). */
#ifndef MW_POLL_HOT_NS
#ifdef MW_SIM
#define MW_POLL_HOT_NS 0ull
#else
#define MW_POLL_HOT_NS 1000000ull
#endif
#endif
__device__ void mw_executor(mw_state *st) {
  mw_u8 stack[MW_LSTACK_BYTES] __attribute__((aligned(16)));
  mw_ctx c;
  c.st = st;
  c.slots = st->slots;
  c.frames = st->frames;
  c.nodes = st->nodes;
  c.frame_bytes = st->frame_bytes;
  c.nslots = st->nslots;
  c.host_slots = st->host_slots;
  c.cache_cap = st->cache_cap;
  c.inbox = st->inbox;
  c.inbox_free = st->inbox_free;
  c.comp = st->comp;
  c.comp_msg = st->comp_msg;
  c.closed = st->closed;
  c.inbox_cap = st->inbox_cap;
  c.comp_cap = st->comp_cap;
  c.lane = threadIdx.x & 31u;
  c.wid = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  c.stats = st->stats + (mw_u64)c.wid * MW_STAT_ENTRIES;
  mw_u32 cta = c.wid / MW_CTA_WARPS;
  c.cw = c.wid % MW_CTA_WARPS;
  mw_u32 nw = st->nworkers;
  c.cn = nw - cta * MW_CTA_WARPS < MW_CTA_WARPS ? nw - cta * MW_CTA_WARPS : MW_CTA_WARPS;
  c.cta = MW_CTA_STATE(st, cta);
  c.ws = &c.cta[c.cw];
  c.stk = stack;
  c.d = 0;
  c.bulk = 0;
  c.index = 0;
  c.cancelled = 0;
  c.idle = 0;
  c.calls = 0;
  c.lost = 0;
  c.nest = 0;
  c.yield = 0;
  c.trace_due = 0;
  c.take_w = 2;
  c.ran = 0;
  c.ran_kind = MW_NONE;
  c.ran_n = 0;
  c.kind = 0;
  c.off = 0;
  c.trace_gen = 0;
  c.trace_ev = 0;
  c.trace_head = 0;
#ifdef MW_ELIDE
  c.sp0 = 0; /* set by the outermost elided call (mw_elide_enter) */
#ifdef MW_SIM
  c.stack_lim = MW_SIM_STACK_BYTES;
#else
  c.stack_lim = st->stack_bytes;
#endif
  c.elide = 0;
  c.hungry_seen = 1; /* no elided call before the periodic work has seen few warps hungry */
  c.hungry_max = MW_ELIDE_HUNGRY_OF(st->nworkers);
  c.elide_gen = MW_ELIDE_GEN_OF(st->nworkers);
#endif
#ifndef MW_SIM
  { /* a fresh launch: the CTA's shared state starts empty */
    mw_u32 *p = (mw_u32 *)MW_WS(&c);
    for (mw_u32 i = c.lane; i < sizeof(mw_wstate) / 4; i += 32) p[i] = 0;
    if (c.cw == 0) /* and its block slot */
      for (mw_u32 i = c.lane; i < sizeof(mw_blk_slot) / 4; i += 32) ((mw_u32 *)MW_BLK(&c))[i] = 0;
#if defined(MW_PROBES)
    for (mw_u32 i = c.lane; i < MW_NPROBES; i += 32) mw_probe_acc[c.cw][i][0] = mw_probe_acc[c.cw][i][1] = 0;
    for (mw_u32 i = c.lane; i < MW_DIV_LINES; i += 32) mw_probe_div[c.cw][i][0] = mw_probe_div[c.cw][i][1] = 0;
    if (c.lane < 4) mw_probe_bulk[c.cw][c.lane] = 0;
#endif
    __syncthreads();
  }
#endif
  if (c.wid >= nw) return;
  c.gw = &st->workers[c.wid];
  { /* the kinds its device counter entries hold (protocol.h, per-worker rows) */
    const mw_stat_entry *en = c.stats;
    for (mw_u32 i = c.lane; i < MW_STAT_ENTRIES; i += 32)
      MW_WS(&c)->row_kind[i] = (mw_u16)mw_ld32(&en[i].kind);
    __syncwarp();
  }
#ifdef MW_SIM
  /* lanes that diverge across call sites cannot be trusted to go on: the warp is restarted,
   * and the levels it was running fail with the divergence message (their frames on the lane
   * stacks are gone: the innermost fails, each level below it ends with its failure) */
  __mw_sim_restart_on_divergence();
  if (c.lane == 0 && MW_WS(&c)->depth) {
    for (mw_u32 d = MW_WS(&c)->depth; d-- > 0;) {
      c.d = d;
      c.off = MW_LV(&c)->off;
      c.kind = MW_LV(&c)->kind;
      c.status = MW_RUN_FAIL;
      c.fail_code = MW_FAIL_DIVERGED;
      c.fail_msg = c.gw->abort_msg;
      c.fail_fut = 0;
      c.cancelled = 0;
      c.value = 0;
      c.lost = 1;
      MW_LV(&c)->flags |= MW_LV_PUBLIC; /* never private: its level below learns from the slot */
      mw_finish_level(&c);
    }
    MW_WS(&c)->depth = 0;
    c.lost = 0;
  }
  __syncwarp();
  /* a warp restarted inside a block task's body: that instance fails with the divergence
   * message, and the warp goes on with its CTA (protocol.h, Block tasks) */
  if (mw_bcast(MW_BLK(&c)->in[c.cw])) {
    if (c.lane == 0) mw_blk_fail(&c, c.gw->abort_msg);
    mw_block_run(&c, MW_BLK(&c)->in[c.cw] - 1u, true);
  }
#endif
  mw_u32 nap = 32, tasks = 0, idle = 0;
  bool poller = c.wid < MW_POLLERS;
#ifdef MW_BULK_ONLY_FROM
  /* MW_BULK_ONLY_FROM=N, a measuring variant (bench/NOTES.md, bulk-only warps): workers N and up
   * take bulk tasks from the board and run their own records, and nothing else: no inbox, no
   * global queue, no stealing, not counted in hungry */
  const bool general = c.wid < (mw_u32)(MW_BULK_ONLY_FROM);
#else
  const bool general = true;
#endif
  mw_u64 hot = 0; /* a poller: when it last took a spawn from the idle loop */
  for (;;) {
    mw_u32 stop = 0;
    if (c.lane == 0) {
      stop = mw_ld32(&st->stop);
      /* the CTA's block slot: one shared load (a CTA of fewer warps never holds one) */
      stop |= (MW_BLK_STATE(mw_ld32(&MW_BLK(&c)->word)) == MW_BLK_HELD) << 1;
      /* in flight together with the stop flag's load; one predictable branch while off */
      mw_u32 tg = mw_ld32(&st->trace_gen);
      if (tg != c.trace_gen) mw_trace_switch(&c, tg);
      if (idle && poller && (idle & 255) == 0) st->ctl->heartbeat = MW_GLOBALTIMER();
    }
    stop = mw_bcast(stop);
    if (stop & 2u) { /* a block task is held in this CTA: arrive (protocol.h, Block tasks) */
      mw_block_arrive(&c);
      continue;
    }
    if (stop) {
      mw_u32 leave = 0;
      if (c.lane == 0) {
        mw_flush(&c);
        if (c.idle) atomicSub(&st->hungry, 1u);
        c.idle = 0;
        leave = mw_stop_barrier(st);
      }
      if (mw_bcast(leave)) break;
      continue;
    }
    mw_rec *rec = 0;
    mw_u32 f = MW_NONE;
    /* a poller looks at the inbox every MW_POLL_NS even while there is local work, and with
     * MW_POLLER_INBOX_FIRST before the queues while the host streams (its last take found more
     * than one spawn) */
    if (mw_bcast(c.lane == 0 ? (mw_u32)((MW_POLLER_INBOX_FIRST && poller && c.take_w > 2u) || mw_poll_due(&c)) : 0u)) {
      MW_PROBE_OF(c, MW_PR_LOOK);
      f = mw_take_inbox(&c, MW_TAKE_BATCHES);
    }
    bool own = f != MW_NONE; /* a frame this warp wrote from the inbox itself */
    if (f == MW_NONE && (general || mw_own_ready(&c))) {
      MW_PROBE_OF(c, MW_PR_NEXT);
      f = mw_next(&c, &rec);
    }
    if (f == MW_NONE && !rec && general && (poller || (idle & 1023) == 1023)) {
      {
        MW_PROBE_OF(c, MW_PR_LOOK); /* every look at the inbox, empty or not (inbox_take: those that found spawns) */
        f = mw_take_inbox(&c, MW_TAKE_BATCHES);
      }
      own = f != MW_NONE;
      if (own && poller) hot = MW_GLOBALTIMER(); /* the host is at work */
    }
    if (f == MW_NONE && !rec) f = mw_bcast(c.lane == 0 ? mw_board_join(&c) : MW_NONE); /* a bulk task's reference */
    if (f == MW_NONE && !rec) {
      ++idle;
      if (c.lane == 0) {
        c.gw->idle_loops++;
        if (!c.idle && general) { /* now idle: counted as hungry */
          c.idle = 1;
          atomicAdd(&st->hungry, 1u);
        }
        mw_wstate *ws = MW_WS(&c); /* and its counters up to date */
        if (mw_counts_dirty(&c, ws) || ws->frames_taken || ws->frames_freed || ws->steals) mw_flush_counts(&c);
        else if (c.gw->queued) mw_flush_counts(&c); /* its snapshot of queued records too */
      }
      if (poller && MW_GLOBALTIMER() - hot < MW_POLL_HOT_NS) continue; /* no nap while the host is at work */
      __nanosleep(nap);
      if (nap < (poller ? MW_POLL_NAP_MAX : MW_IDLE_NAP_MAX)) nap *= 2;
      continue;
    }
    if (c.lane == 0 && c.idle) {
      c.idle = 0;
      atomicSub(&st->hungry, 1u);
    }
    idle = 0;
    nap = 32;
    if (c.lane == 0 && (++tasks & 4095) == 0) st->ctl->heartbeat = MW_GLOBALTIMER();
    mw_run_task(&c, rec, f, own);
  }
#if defined(MW_PROBES) && !defined(MW_SIM)
  if (c.lane == 0) {
    const char *names[MW_NPROBES] = {"run", "finish", "spawn", "await", "await_more", "after_await",
                                     "value", "release", "loop", "call_child", "rec_get", "tick",
                                     "spawn_lane0", "complete", "outcome", "empty_probe", "bulk_join",
                                     "run_bulk", "suspend", "root_frame", "complete_slot",
                                     "bulk_instance", "fence_ready", "fence_call", "slot_init",
                                     "private", "bcast", "bcast_div", "leaf_claim", "pure_body",
                                     "bulk_claim", "bulk_done", "join_claimed", "join_alone",
                                     "join_linger", "no_seat", "inbox_take", "comp_write", "await_closed",
                                     "slot_pop", "frame_take", "rec_evict", "cs_flush", "cs_fence",
                                     "cs_xchg", "take_free", "fin_let_go", "look", "next", "take_frames",
                                     "take_cas", "take_push", "take_load", "take_peek", "gq_turn", "gq_pop"};
    for (int i = 0; i < MW_NPROBES; ++i)
      if (mw_probe_acc[c.cw][i][1])
        printf("probe worker %u %-12s calls %10lld  cycles/call %8lld\n", c.wid, names[i],
               mw_probe_acc[c.cw][i][1], mw_probe_acc[c.cw][i][0] / mw_probe_acc[c.cw][i][1]);
    for (int i = 0; i < MW_DIV_LINES; ++i)
      if (mw_probe_div[c.cw][i][1])
        printf("probe worker %u diverged at line %u of the generated source: %u broadcasts\n", c.wid,
               mw_probe_div[c.cw][i][0], mw_probe_div[c.cw][i][1]);
    if (mw_probe_bulk[c.cw][0])
      printf("probe worker %u bulk timeline %llu %llu %llu\n", c.wid, mw_probe_bulk[c.cw][1],
             mw_probe_bulk[c.cw][2], mw_probe_bulk[c.cw][3]);
  }
#endif
  if (c.lane == 0) {
    __threadfence_system();
    atomicAdd((mw_u32 *)&st->ctl->exited, 1u);
  }
  __syncwarp();
}

#endif /* MW_EXECUTOR_CUH */
