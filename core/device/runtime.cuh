/* runtime.cuh - the device executor: the warp's inline chain, spawn records, futures, the scheduler loop and the task API.
 *
 * Compiled at run time after task_api.cuh (what task code sees) and with the generated task code,
 * alone or in one unit with it: by NVRTC for the GPU, by the host
 * C++ compiler against sim_shim.h for the sim backend. The layouts and handshakes with the host,
 * and between warps, are in protocol.h (read its closing paragraph first). A worker is a warp;
 * every function marked "collective" is called by all 32 lanes together: lane 0 does the work
 * and the result is broadcast. Functions marked "lane 0" run in lane 0 only.
 *
 * The generated code defines, before these files, MW_FRAME_PAYLOAD (bytes of parameters and
 * locals a frame holds) and MW_LSTACK_BYTES (bytes of each lane's stack of inline frames); the
 * image's link part (nvrtc/generate.c) defines the kind table (mw_kind_tab, mw_kind_name) and
 * mw_dispatch(), which runs one step of a task body through its program's dispatch.
 *
 * Where the time goes is the design: the common path (spawn a child, await it, it returns, read
 * its value, release it) touches shared memory and the lane stacks only. Device memory is read
 * when a future comes from elsewhere, and fenced when something is handed to another warp.
 */
#ifndef MW_RUNTIME_CUH
#define MW_RUNTIME_CUH


/* CTAs of the executor that must fit on one SM at once (the kernel's launch bounds): more caps
 * the registers per thread (255 at 1 or 2, 168 at 3, 128 at 4), for more workers per SM */
#ifndef MW_MIN_CTAS
#define MW_MIN_CTAS 1
#endif

#ifndef MW_POLLERS
#define MW_POLLERS 4u
#endif
#define MW_POLL_NS 20000ull /* a busy poller looks at the inbox this often */


/* The warp's shared state, the CTA's states and the running level. On the GPU the worker CTA's
 * states are a __shared__ array (warp w of the CTA is threads 32w..32w+31: the launch's block is
 * MW_CTA_WARPS warps); an address derived from it is a shared-memory address to the compiler:
 * its loads are shared loads (no generic-to-shared resolution), and its stores cannot alias the
 * context in local memory, so the context's fields are not read again after each of them. On sim
 * the states are host memory that the host allocates (mw_state.sim_cta). */
#ifndef MW_SIM
__shared__ mw_wstate mw_cta_shared[MW_CTA_WARPS];
#endif
#if defined(MW_SIM) || defined(MW_GENERIC_WS) /* MW_GENERIC_WS: the old addressing, to compare */
#define MW_WS(c) ((c)->ws)
#define MW_CTAS(c) ((c)->cta)
#else
#define MW_WS(c) (&mw_cta_shared[threadIdx.x >> 5])
#define MW_CTAS(c) (mw_cta_shared)
#endif
#define MW_LV(c) (&MW_WS(c)->lv[(c)->d])

/* sim: task code runs between MW_TASK_IN and MW_TASK_OUT (sim_shim.h: it is stopped there after
 * a fault elsewhere); nothing on the GPU */
#ifdef MW_SIM
#define MW_TASK_IN() const int mw_was_task = __mw_sim_task(1)
#define MW_TASK_OUT() __mw_sim_task(mw_was_task)
#else
#define MW_TASK_IN() (void)0
#define MW_TASK_OUT() (void)0
#endif


/* ---- probes (cuda, MOONWARP_PROBES=1 at compile time): where a warp's cycles go --------------
 * MW_PROBE(id) times the rest of its scope in lane 0 (clock64) into a per-warp table in shared
 * memory; each warp that ran anything prints its table when the executor stops (printf, flushed
 * when the runtime closes). A measuring aid for bench/NOTES.md, off in every normal build. */
#if defined(MW_PROBES) && !defined(MW_SIM)
#define MW_NPROBES 48
__shared__ long long mw_probe_acc[MW_CTA_WARPS][MW_NPROBES][2];
struct mw_probe_scope {
  mw_u32 lane, w;
  int id;
  long long t0;
  __device__ mw_probe_scope(mw_u32 l, mw_u32 cw, int i) : lane(l), w(cw), id(i), t0(clock64()) {}
  __device__ ~mw_probe_scope() {
    if (lane == 0) {
      mw_probe_acc[w][id][0] += clock64() - t0;
      mw_probe_acc[w][id][1]++;
    }
  }
};
#define MW_PROBE_CAT2(a, b) a##b
#define MW_PROBE_CAT(a, b) MW_PROBE_CAT2(a, b)
#define MW_PROBE(id) mw_probe_scope MW_PROBE_CAT(mw_probe_, __LINE__)(c->lane, c->cw, (id))
#else
#define MW_PROBE(id) (void)0
#endif
enum { MW_PR_RUN, MW_PR_FINISH, MW_PR_SPAWN, MW_PR_AWAIT, MW_PR_MORE, MW_PR_AFTER, MW_PR_VALUE,
       MW_PR_RELEASE, MW_PR_LOOP, MW_PR_CALL, MW_PR_RECGET, MW_PR_TICK, MW_PR_SPAWN0, MW_PR_COMPLETE,
       MW_PR_OUTCOME, MW_PR_EMPTY, MW_PR_JOIN, MW_PR_BULK, MW_PR_SUSPEND, MW_PR_ROOT, MW_PR_SLOT,
       MW_PR_INSTANCE, MW_PR_FENCE_READY, MW_PR_FENCE_CALL, MW_PR_SLOT_INIT, MW_PR_PRIVATE,
       MW_PR_BCAST, MW_PR_BCAST_DIV, MW_PR_LEAF_CLAIM, MW_PR_PURE_BODY, MW_PR_BULK_CLAIM, MW_PR_BULK_DONE, MW_PR_JOIN_GO, MW_PR_JOIN_ALONE,
       MW_PR_LINGER, MW_PR_NO_SEAT, MW_PR_TAKE, MW_PR_COMP, MW_PR_AWAIT_CLOSED,
       MW_PR_SLOT_POP, MW_PR_FRAME_TAKE, MW_PR_REC_EVICT };

/* Probes: every broadcast counted (calls of "bcast"), and those that found the warp diverged
 * (not every lane active: the shuffle then takes the slow collective path), in "bcast_div",
 * with the source lines of the diverged ones (printed at the end as "diverged at line"). */
#if defined(MW_PROBES) && !defined(MW_SIM)
#define MW_DIV_LINES 48
__shared__ unsigned mw_probe_div[MW_CTA_WARPS][MW_DIV_LINES][2]; /* line, count */
__device__ __forceinline__ void mw_probe_bcast(int line) {
  const unsigned m = __activemask();
  if ((threadIdx.x & 31u) != (unsigned)__ffs((int)m) - 1u) return;
  const unsigned w = threadIdx.x >> 5;
  atomicAdd((unsigned long long *)&mw_probe_acc[w][MW_PR_BCAST][1], 1ull);
  if (m == MW_FULL) return;
  atomicAdd((unsigned long long *)&mw_probe_acc[w][MW_PR_BCAST_DIV][1], 1ull);
  for (int i = 0; i < MW_DIV_LINES; ++i) {
    unsigned l = atomicCAS(&mw_probe_div[w][i][0], 0u, (unsigned)line);
    if (l == 0u || l == (unsigned)line) {
      atomicAdd(&mw_probe_div[w][i][1], 1u);
      return;
    }
  }
}
/* Probes: the timeline of the latest bulk task each warp ran (global timer, ns): when it first
 * entered the task, began its first instance and left it for the last time (printed as "bulk
 * timeline"), to tell the chip's fill and tail from the instances' own time. */
__shared__ unsigned long long mw_probe_bulk[MW_CTA_WARPS][4]; /* fut, enter, first, leave */
__device__ __forceinline__ void mw_probe_bulk_mark(mw_u32 lane, mw_u32 w, mw_u64 fut, int what) {
  if (lane) return;
  unsigned long long t = MW_GLOBALTIMER();
  if (mw_probe_bulk[w][0] != fut) {
    mw_probe_bulk[w][0] = fut;
    mw_probe_bulk[w][1] = t;
    mw_probe_bulk[w][2] = mw_probe_bulk[w][3] = 0;
  }
  if (what == 1 && !mw_probe_bulk[w][2]) mw_probe_bulk[w][2] = t;
  if (what == 2) mw_probe_bulk[w][3] = t;
}
#else
#define mw_probe_bcast(line) (void)0
#define mw_probe_bulk_mark(lane, w, fut, what) (void)0
#endif

/* ---- small helpers -------------------------------------------------------------------------- */
/* A broadcast mostly follows a section only lane 0 ran, after which the compiler does not
 * always reconverge the warp (calls and loops inside): a shuffle in a diverged warp takes its
 * slow collective path (a spawn's two cost about 900 cycles each, bench/NOTES.md). The
 * __syncwarp first takes most of that back. */
__device__ __forceinline__ mw_u32 mw_bcast_at(mw_u32 v, int line) {
  __syncwarp();
  mw_probe_bcast(line);
  (void)line;
  return __shfl_sync(MW_FULL, v, 0);
}
__device__ __forceinline__ mw_u64 mw_bcast64_at(mw_u64 v, int line) {
  __syncwarp();
  mw_probe_bcast(line);
  (void)line;
  return (mw_u64)__shfl_sync(MW_FULL, (unsigned long long)v, 0);
}
/* lane 0's value in every lane (the line names the call site to the probes) */
#define mw_bcast(v) mw_bcast_at((v), __LINE__)
#define mw_bcast64(v) mw_bcast64_at((v), __LINE__)
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
__device__ __forceinline__ mw_u32 mw_round16(mw_u32 n) { return (n + 15u) & ~15u; }
__device__ __forceinline__ mw_frame_hdr *mw_frame(mw_ctx *c, mw_u32 f) {
  return (mw_frame_hdr *)(c->frames + (mw_u64)f * c->frame_bytes);
}
__device__ __forceinline__ bool mw_is_future(mw_u64 h) {
  return h != 0 && h != MW_FUT_NOSLOT && h != MW_FUT_SKIPPED;
}
__device__ void mw_strcpy(char *dst, const char *src, int cap, int at) {
  int i = at;
  for (; src && *src && i < cap - 1; ++src, ++i) dst[i] = *src;
  dst[i] = 0;
}
/* dst = "prefix: msg" (or msg alone), at most MW_MSG_BYTES with the NUL */
__device__ void mw_compose(char *dst, const char *prefix, const char *msg) {
  int n = 0;
  dst[0] = 0;
  if (prefix) {
    mw_strcpy(dst, prefix, MW_MSG_BYTES, 0);
    while (dst[n]) ++n;
    mw_strcpy(dst, ": ", MW_MSG_BYTES, n);
    while (dst[n]) ++n;
  }
  mw_strcpy(dst, msg, MW_MSG_BYTES, n);
}

/* A level's kind, its cancelled flag and its frame's offset in the lane stacks (at most 16 KiB),
 * broadcast in one word. */
#define MW_KW_KIND (MW_MAX_KINDS - 1u)
#define MW_KW_CANCELLED MW_MAX_KINDS
#define MW_KW_OFF (2u * MW_MAX_KINDS)

/* The running level's outcome as a run starts: done, no failure, no result yet. */
__device__ __forceinline__ void mw_run_fresh(mw_ctx *c) {
  c->status = MW_RUN_DONE;
  c->fail_code = 0;
  c->fail_msg = 0;
  c->fail_fut = 0;
  c->value = 0;
}

/* ---- counters (protocol.h, per-worker rows): lane 0 ---------------------------------------- */
enum { MW_CNT_SPAWNED = 0, MW_CNT_COMPLETED, MW_CNT_FAILED, MW_CNT_CANCELLED };
/* The worker's device entry for cache entry e's kind (protocol.h, per-worker rows), retagged
 * first if it holds another kind. Lane 0. */
__device__ __forceinline__ mw_u64 *mw_stat_counts(mw_ctx *c, mw_wstate *ws, mw_u32 k) {
  mw_u32 d = k & (MW_STAT_ENTRIES - 1u);
  mw_stat_entry *en = c->st->stats + (mw_u64)c->wid * MW_STAT_ENTRIES + d;
  mw_u64 *n = (mw_u64 *)&en->n;
  if (ws->row_kind[d] != k) { /* the kind it held goes to its spill row */
    mw_u64 *spill = (mw_u64 *)&c->st->spill[ws->row_kind[d]];
    for (int j = 0; j < 4; ++j) {
      mw_u64 v = mw_xchg64(&n[j], 0);
      if (v) mw_add64(&spill[j], v);
    }
    mw_st32(&en->kind, k);
    ws->row_kind[d] = (mw_u16)k;
  }
  return n;
}
/* Adds cache entry e's counts to the rows. Lane 0. */
__device__ __forceinline__ void mw_flush_entry(mw_ctx *c, mw_wstate *ws, mw_u32 e) {
  mw_u64 *n = mw_stat_counts(c, ws, ws->cnt_kind[e]);
  for (int j = 0; j < 4; ++j)
    if (ws->cnt[e][j]) {
      mw_add64(&n[j], ws->cnt[e][j]);
      ws->cnt[e][j] = 0;
    }
}
/* Cache entry e, which holds another kind, is given to kind: its counts go to the rows first. */
__device__ __noinline__ void mw_count_miss(mw_ctx *c, mw_u32 e, mw_u32 kind) {
  mw_wstate *ws = MW_WS(c);
  if (ws->dirty & (1u << e)) {
    mw_flush_entry(c, ws, e);
    ws->dirty &= ~(1u << e);
  }
  ws->cnt_kind[e] = (mw_u16)kind;
}
/* Counts n of kind at once. Lane 0. */
__device__ __forceinline__ void mw_count_n(mw_ctx *c, mw_u32 kind, mw_u32 which, mw_u32 n) {
  mw_count_in(c, MW_WS(c), kind, which, n);
}
__device__ __forceinline__ void mw_count(mw_ctx *c, mw_u32 kind, mw_u32 which) { mw_count_n(c, kind, which, 1u); }
/* The runs of a kind that mw_count_ran kept in the context, into the warp's counters; and
 * whether the warp has counts its rows lack. Lane 0. */
__device__ __forceinline__ void mw_fold_ran(mw_ctx *c) {
  if (!c->ran_n) return;
  mw_count_in(c, MW_WS(c), c->ran_kind, 0u, c->ran_n);
  mw_count_in(c, MW_WS(c), c->ran_kind, 1u, c->ran_n);
  c->ran_n = 0;
}
__device__ __noinline__ void mw_count_ran_switch(mw_ctx *c, mw_u32 kind) {
  if (c->lane == 0) mw_fold_ran(c);
  c->ran_kind = kind;
  c->ran_n = 1;
}
__device__ __forceinline__ bool mw_counts_dirty(const mw_ctx *c, const mw_wstate *ws) { return ws->dirty || c->ran_n; }
/* Adds the warp's counters to its rows (atomics whose results nobody waits for; a retag's
 * exchanges excepted). */
__device__ __noinline__ void mw_flush_counts(mw_ctx *c) {
  mw_wstate *ws = MW_WS(c);
  mw_fold_ran(c);
  for (mw_u32 m = ws->dirty; m; m &= m - 1) mw_flush_entry(c, ws, (mw_u32)(__ffs((int)m) - 1));
  ws->dirty = 0;
  if (ws->frames_taken) mw_add64(&c->gw->frames_taken, ws->frames_taken);
  if (ws->frames_freed) mw_add64(&c->gw->frames_freed, ws->frames_freed);
  if (ws->steals) mw_add64(&c->gw->steals, ws->steals);
  ws->frames_taken = ws->frames_freed = ws->steals = 0;
  mw_u32 q = 0;
  for (mw_u32 r = 0; r < MW_RECS; ++r) q += (ws->rec[r].state & 15u) == MW_REC_READY;
  c->gw->queued = q;
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
    MW_FENCE(); /* the link (and the entry's contents) before the head that publishes it */
    mw_u64 n = ((h >> 32) + 1) << 32 | (mw_u64)(i + 1);
    if (mw_cas64(head, h, n) == h) return;
  }
}
/* Waiter nodes link their free stack through the high word of the node itself. */
__device__ mw_u32 mw_node_pop(mw_ctx *c) {
  mw_u64 *head = &c->st->node_head;
  for (;;) {
    mw_u64 h = mw_ld64(head);
    mw_u32 top = (mw_u32)h;
    if (top == 0) return MW_NONE;
    mw_u32 nx = (mw_u32)(mw_ld64(&c->nodes[top - 1]) >> 32);
    if (mw_cas64(head, h, ((h >> 32) + 1) << 32 | nx) == h) {
      MW_FENCE();
      return top - 1;
    }
  }
}
__device__ void mw_node_push(mw_ctx *c, mw_u32 i) {
  mw_u64 *head = &c->st->node_head;
  for (;;) {
    mw_u64 h = mw_ld64(head);
    mw_st64(&c->nodes[i], (mw_u64)(mw_u32)h << 32);
    MW_FENCE();
    if (mw_cas64(head, h, ((h >> 32) + 1) << 32 | (mw_u64)(i + 1)) == h) return;
  }
}

/* ---- the free frame ring (protocol.h): lane 0, out of line (a cache's refill or overflow) --- */
#define MW_FRING_TAKE_MAX 32u /* frames one take from the ring asks for at most */
/* Takes up to want (<= MW_FRING_TAKE_MAX) free frames into out[]; returns how many (0: none is
 * free). The cells' loads are all in flight before any is looked at. */
__device__ __noinline__ mw_u32 mw_fring_take(mw_state *st, mw_u32 *out, mw_u32 want) {
  const mw_u64 mask = st->frame_rmask;
  for (;;) {
    const mw_u64 h = mw_ld64(&st->frame_rhead);
    mw_u64 v[MW_FRING_TAKE_MAX];
#pragma unroll
    for (mw_u32 i = 0; i < MW_FRING_TAKE_MAX; ++i)
      if (i < want) v[i] = mw_ld64(&st->frame_ring[(h + i) & mask]);
    mw_u32 n = 0;
#pragma unroll
    for (mw_u32 i = 0; i < MW_FRING_TAKE_MAX; ++i)
      if (i < want && n == i && (mw_u32)(v[i] >> 32) == (mw_u32)(h + i + 1u)) n = i + 1u;
    if (n == 0) {
      if (mw_ld64(&st->frame_rtail) == h) return 0; /* none free */
      __nanosleep(32); /* a giver is between its ticket and its store */
      continue;
    }
    if (mw_cas64(&st->frame_rhead, h, h + n) != h) continue;
    MW_FENCE();
#pragma unroll
    for (mw_u32 i = 0; i < MW_FRING_TAKE_MAX; ++i)
      if (i < n) out[i] = (mw_u32)v[i];
    return n;
  }
}
/* Gives the n (>= 1) frames in[] back. */
__device__ __noinline__ void mw_fring_give(mw_state *st, const mw_u32 *in, mw_u32 n) {
  MW_FENCE(); /* the frames' last uses before anyone takes them again */
  const mw_u64 t = mw_add64(&st->frame_rtail, n), mask = st->frame_rmask;
  for (mw_u32 i = 0; i < n; ++i) mw_st64(&st->frame_ring[(t + i) & mask], MW_FRING(t + i, in[i]));
}

/* ---- the warp's caches in front of the free lists (no atomics while a warp recycles its own) -
 * The frame cache goes to the ring and back half a cache at a time (MW_FRAME_CHAIN frames at
 * most; 1: one at a time, to compare): a warp that takes many frames (a poller taking host
 * spawns) or frees many (the workers that run them) crosses the contended tickets once per
 * half cache, not once per frame. */
#ifndef MW_FRAME_CHAIN
#define MW_FRAME_CHAIN 8u
#endif
__device__ mw_u32 mw_frame_alloc(mw_ctx *c) {
  mw_wstate *ws = MW_WS(c);
  mw_u32 half = c->cache_cap / 2 < MW_FRAME_CHAIN ? c->cache_cap / 2 : MW_FRAME_CHAIN;
  if (!ws->nfree_frames) {
    MW_PROBE(MW_PR_FRAME_TAKE); /* the warp's cache is empty: the frame ring */
    ws->nfree_frames = mw_fring_take(c->st, ws->free_frames, half > 1 ? half : 1u);
  }
  if (!ws->nfree_frames) return MW_NONE;
  ws->frames_taken++;
  return ws->free_frames[--ws->nfree_frames];
}
/* Makes the warp's cache hold n (<= MW_CACHE_CAP) frames, or as many as are free: the next
 * frames mw_frame_alloc gives, free_frames[nfree_frames - 1] first. Returns how many it holds,
 * at most n. */
__device__ mw_u32 mw_frames_cached(mw_ctx *c, mw_u32 n) {
  mw_wstate *ws = MW_WS(c);
  if (ws->nfree_frames < n) ws->nfree_frames += mw_fring_take(c->st, ws->free_frames + ws->nfree_frames, n - ws->nfree_frames);
  return ws->nfree_frames < n ? ws->nfree_frames : n;
}
__device__ void mw_frame_free(mw_ctx *c, mw_u32 f) {
  mw_wstate *ws = MW_WS(c);
  ws->frames_freed++;
  mw_u32 half = c->cache_cap / 2 < MW_FRAME_CHAIN ? c->cache_cap / 2 : MW_FRAME_CHAIN;
  if (ws->nfree_frames >= c->cache_cap && half > 1) { /* full: its newer half goes back */
    ws->nfree_frames -= half;
    mw_fring_give(c->st, &ws->free_frames[ws->nfree_frames], half);
  }
  if (ws->nfree_frames < c->cache_cap) {
    ws->free_frames[ws->nfree_frames++] = f;
    return;
  }
  mw_fring_give(c->st, &f, 1);
}
/* A free device slot and the generation its next handle gets. */
__device__ mw_u32 mw_slot_alloc(mw_ctx *c, mw_u32 *gen) {
  mw_wstate *ws = MW_WS(c);
  if (ws->nfree_slots) {
    --ws->nfree_slots;
    *gen = ws->slot_gen[ws->nfree_slots];
    return ws->free_slots[ws->nfree_slots];
  }
  MW_PROBE(MW_PR_SLOT_POP); /* the warp's cache is empty: the shared free list */
  mw_u32 s = mw_stack_pop(&c->st->slot_head, c->st->slot_next);
  if (s != MW_NONE) *gen = (mw_u32)(mw_ld64(&c->slots[s].ctl) >> 32) + 1u;
  return s;
}
/* Frees device slot s whose last handle had generation gen (its ctl is (gen, CLOSED));
 * MW_NONE: not known here, read it. */
__device__ void mw_slot_free(mw_ctx *c, mw_u32 s, mw_u32 gen) {
  mw_wstate *ws = MW_WS(c);
  if (ws->nfree_slots < c->cache_cap) {
    if (gen == MW_NONE) gen = (mw_u32)(mw_ld64(&c->slots[s].ctl) >> 32);
    ws->slot_gen[ws->nfree_slots] = gen + 1u;
    ws->free_slots[ws->nfree_slots++] = s;
    return;
  }
  mw_stack_push(&c->st->slot_head, c->st->slot_next, s);
}
__device__ mw_u32 mw_node_alloc(mw_ctx *c) {
  mw_wstate *ws = MW_WS(c);
  return ws->nfree_nodes ? ws->free_nodes[--ws->nfree_nodes] : mw_node_pop(c);
}
__device__ void mw_node_free(mw_ctx *c, mw_u32 n) {
  mw_wstate *ws = MW_WS(c);
  if (ws->nfree_nodes < MW_CACHE_CAP) {
    ws->free_nodes[ws->nfree_nodes++] = n;
    return;
  }
  mw_node_push(c, n);
}
/* Drops n references to slot s (generation gen) with an atomic: the last one frees it. Host
 * slots count holders in hrefs; the host frees them. Lane 0. */
__device__ void mw_slot_unref(mw_ctx *c, mw_u32 s, mw_u32 gen, mw_u32 n) {
  if (s < c->host_slots) {
    MW_FENCE();
    atomicSub(&c->st->hrefs[s], n);
    return;
  }
  MW_FENCE();
  if (atomicSub(&c->slots[s].refs, n) == n) mw_slot_free(c, s, gen);
}
/* A holder's reference to future h (the caller holds it already, so never from 0). */
__device__ void mw_slot_hold(mw_ctx *c, mw_u64 h) {
  mw_u32 s = MW_FUT_SLOT(h);
  if (!mw_is_future(h) || s >= c->nslots) return;
  if (s < c->host_slots) atomicAdd(&c->st->hrefs[s], 1u);
  else atomicAdd(&c->slots[s].refs, 1u);
}
/* Drops the references a task took on the futures among its arguments. Lane 0. */
__device__ void mw_drop_holds(mw_ctx *c, mw_u32 futargs, const mw_u8 *args) {
  for (mw_u32 m = futargs; m; m &= m - 1) {
    mw_u64 h = ((const mw_u64 *)args)[__ffs((int)m) - 1];
    mw_u32 s = MW_FUT_SLOT(h);
    if (mw_is_future(h) && s < c->nslots) mw_slot_unref(c, s, MW_FUT_GEN(h), 1);
  }
}
__device__ void mw_take_holds(mw_ctx *c, mw_u32 futargs, const mw_u8 *args) {
  for (mw_u32 m = futargs; m; m &= m - 1) mw_slot_hold(c, ((const mw_u64 *)args)[__ffs((int)m) - 1]);
}

/* ---- global run queue: bounded MPMC (sequence per cell) -------------------------------------
 * Cell i holds ticket t when gq_seq[i] == t + 1; free for ticket t when gq_seq[i] == t.
 * Capacity exceeds the number of frames plus bulk references, so a push never finds it full.
 * The push's fence also publishes the frame it carries. Lane 0. */
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

/* mw_gq_pop for an idle warp: one warp of a CTA at a time (mw_wstate.gq_turn of the CTA's first
 * warp, protocol.h), so that the idle warps of the chip race for a queue cell one per CTA, not
 * one per warp (host spawns from C 1.9 -> 2.4 M/s, bench/NOTES.md v33); a warp that finds
 * another of its CTA popping waits for its turn (a pop's few loads and a CAS), then pops too.
 * (It once halved a bulk saxpy while each joiner of a bulk task pushed invitations that idle
 * warps queued up here for; a task now has one cell of the board and no invitations while the
 * board has room: mw_board_post.) MW_GQ_LEAVE_EMPTY, a variant, leaves the queue at once while
 * it looks empty: no help to that saxpy, fib(30) on 528 workers 377 against 357 M tasks/s in
 * one run each (bench/NOTES.md, v59).
 * Leaving the queue to the other and napping instead, as this did before, held cells in the
 * queue while warps slept: fib(30) on 528 workers 150 -> 360 M tasks/s (bench/NOTES.md, "the
 * queue's turn"). Lane 0. */
#ifndef MW_GQ_EVERY_WARP
#define MW_GQ_EVERY_WARP 0 /* 1: every idle warp pops (to compare) */
#endif
__device__ mw_u32 mw_gq_pop_cta(mw_ctx *c) {
  if (MW_GQ_EVERY_WARP) return mw_gq_pop(c->st);
  mw_u32 *turn = &MW_CTAS(c)[0].gq_turn;
  while (*(volatile mw_u32 *)turn || atomicCAS(turn, 0u, 1u) != 0u) {
#ifdef MW_GQ_LEAVE_EMPTY /* a variant: no wait while the queue looks empty */
    if (mw_ld64(&c->st->gq_head) >= mw_ld64(&c->st->gq_tail)) return MW_NONE;
#endif
    __nanosleep(64);
  }
  const mw_u32 f = mw_gq_pop(c->st);
  atomicExch(turn, 0u);
  return f;
}

/* Sets frame f up for a new task: its join gets the next epoch and no bits. Returns the fref
 * its future slot carries (protocol.h). Lane 0, owning the free frame. */
__device__ mw_u64 mw_frame_open(mw_ctx *c, mw_u32 f) {
  mw_frame_hdr *fh = mw_frame(c, f);
  mw_u64 ep = ((mw_ld64(&fh->join) >> 32) + 1) & 0xffffffffull;
  mw_st64(&fh->join, ep << 32);
  return (ep << 32) | (mw_u64)(f + 1);
}

/* Gives a finished task's frame back (protocol.h, join: Finish). Lane 0. */
__device__ void mw_frame_release(mw_ctx *c, mw_u32 f) {
  mw_frame_hdr *h = mw_frame(c, f);
  if ((mw_u32)mw_ld64(&h->join) & MW_JOIN_WOKEN) {
    MW_FENCE();
    if ((mw_u32)mw_or64(&h->join, MW_JOIN_DONE) & MW_JOIN_COUNT) return; /* the last completion frees it */
  }
  mw_frame_free(c, f);
}

/* A frame header for a task that has not run yet (resume 0, no children, nothing awaited). */
__device__ __forceinline__ void mw_frame_hdr_fresh(mw_frame_hdr *fh, mw_u32 kind, mw_u64 fut, mw_u32 flags,
                                                   mw_u32 bulk_n) {
  fh->kind = kind;
  fh->resume = 0;
  fh->fut = fut;
  fh->children = 0;
  fh->flags = flags;
  fh->await_f[0] = fh->await_f[1] = 0;
  fh->bulk_n = bulk_n;
  fh->bulk_next = fh->bulk_done = 0;
  fh->bulk_refs = 1;
}
/* Drops one reference to bulk frame f: the last one frees it. Lane 0. */
__device__ void mw_bulk_drop(mw_ctx *c, mw_u32 f) {
  MW_FENCE(); /* what this worker did with the frame before another may reuse it */
  if (atomicSub(&mw_frame(c, f)->bulk_refs, 1u) == 1u) mw_frame_free(c, f);
}
/* ---- the bulk board (protocol.h, The bulk board) ---------------------------------------- */
/* MW_BOARD_REPOST=1: a worker that joined a posted bulk task posts it again, in another cell, and
 * invites through the global queue once the board is full, as every worker did before (to
 * compare: each bulk task then filled the board with copies of itself and pushed two
 * invitations a joiner, which idle warps popped and dropped) */
#ifndef MW_BOARD_REPOST
#define MW_BOARD_REPOST 0
#endif
/* Posts bulk frame f, on which this worker holds a reference; false when the board is full.
 * True, and nothing done, when f is on the board already (this worker joined it there, or
 * another joiner posted it first): every idle warp sees it there. Lane 0. */
__device__ bool mw_board_post(mw_ctx *c, mw_u32 f, mw_u32 seats) {
  mw_state *st = c->st;
  if (!MW_BOARD_REPOST)
    for (mw_u32 k = 0; k < MW_BOARD; ++k)
      if ((mw_u32)mw_ld64(&st->board[k]) == f + 1u) return true; /* posted, or removed: all claimed */
  mw_frame_hdr *h = mw_frame(c, f);
  atomicAdd(&h->bulk_refs, 1u); /* the board's reference */
  const mw_u64 v = (mw_u64)(atomicAdd(&st->board_seq, 1u) & 0x7fffffffu) << 32 | (f + 1u);
  for (mw_u32 k = 0; k < MW_BOARD; ++k) {
    if (mw_ld64(&st->board[k]) != 0) continue;
    mw_st32(&st->board_seats[k], seats); /* a hint: before the cell shows the task */
    MW_FENCE(); /* release: the frame (the spawner may be this warp) and the seats before the cell */
    if (mw_cas64(&st->board[k], 0ull, v) == 0ull) return true;
  }
  atomicSub(&h->bulk_refs, 1u); /* never the last: the caller holds one */
  return false;
}

/* A bulk frame posted on the board, with a reference taken for this worker; MW_NONE when the
 * board is empty. Lane 0. */
__device__ __noinline__ mw_u32 mw_board_join(mw_ctx *c) {
  mw_state *st = c->st;
  mw_u64 v[MW_BOARD];
  for (mw_u32 k = 0; k < MW_BOARD; ++k) v[k] = mw_ld64(&st->board[k]);
  for (mw_u32 k = 0; k < MW_BOARD; ++k) {
    if (!v[k] || (v[k] & MW_BOARD_GONE)) continue;
    /* a seat first (protocol.h, The bulk board): none left, and this warp stays out */
    if ((int)mw_ld32(&st->board_seats[k]) <= 0 || (int)atomicSub(&st->board_seats[k], 1u) <= 0) {
      MW_PROBE(MW_PR_NO_SEAT);
      continue;
    }
    atomicAdd(&st->board_users[k], 1u);
    __threadfence(); /* SC: pairs with the remover's (store buffering) */
    const bool held = mw_ld64(&st->board[k]) == v[k];
    if (held) {
      atomicAdd(&mw_frame(c, (mw_u32)v[k] - 1u)->bulk_refs, 1u);
      __threadfence(); /* the reference before the users count drops */
    }
    atomicSub(&st->board_users[k], 1u);
    if (held) return (mw_u32)v[k] - 1u;
  }
  return MW_NONE;
}

/* Takes bulk frame f off the board if it is posted there; this worker holds a reference on it
 * and every instance is claimed. Lane 0. */
__device__ void mw_board_remove(mw_ctx *c, mw_u32 f) {
  mw_state *st = c->st;
  for (mw_u32 k = 0; k < MW_BOARD; ++k) {
    const mw_u64 v = mw_ld64(&st->board[k]);
    if ((mw_u32)v != f + 1u || (v & MW_BOARD_GONE)) continue;
    if (mw_cas64(&st->board[k], v, v | MW_BOARD_GONE) != v) continue;
    __threadfence(); /* SC: pairs with the joiners' */
    while (mw_ld32(&st->board_users[k])) __nanosleep(32);
    __threadfence(); /* the joiners' references before the board's is dropped */
    mw_st64(&st->board[k], 0ull);
    atomicSub(&mw_frame(c, f)->bulk_refs, 1u); /* the board's: never the last, ours is held */
  }
}

/* MW_NO_BULK_JOIN=1: a level never runs the instances of a bulk task it awaits (to compare) */
#ifndef MW_NO_BULK_JOIN
#define MW_NO_BULK_JOIN 0
#endif
/* A task's frame from its argument words: the arguments, then zeroed locals. Words first to
 * frame_bytes in steps of step from word first (one lane all of it, or the lanes together). */
__device__ __forceinline__ void mw_frame_from_args(mw_u32 *dst, const mw_u32 *src, const mw_kind_info *ki,
                                                   mw_u32 first, mw_u32 step) {
  for (mw_u32 i = first; i * 4 < ki->frame_bytes; i += step) dst[i] = i * 4 < ki->args_bytes ? src[i] : 0u;
}

/* ---- spawn records (protocol.h, the warp's shared state) ----------------------------------- */
#define MW_REC_ST(w) ((w)&15u)

/* Turns record r, which this lane 0 has claimed (OWNED or TAKEN), into a frame in device memory
 * that any worker can run: a spawn's reserved frame is written from its arguments, a runnable
 * task has one already. The caller publishes it (the global queue's fence). Lane 0. */
__device__ mw_u32 mw_rec_to_frame(mw_ctx *c, mw_rec *r) {
  mw_u32 f = r->frame;
  if (!(r->flags & MW_RF_SPAWN)) return f;
  mw_frame_hdr *fh = mw_frame(c, f);
  mw_u32 kind = r->kind;
  const mw_kind_info *ki = mw_kind(kind);
  mw_frame_hdr_fresh(fh, kind, r->fut,
                     ((r->flags & MW_RF_CANCELLED) ? MW_FR_CANCEL : 0u /* it never runs */) | r->gen << MW_GEN_SHIFT, 0);
  mw_frame_from_args((mw_u32 *)((mw_u8 *)fh + MW_FRAME_HDR_BYTES), (const mw_u32 *)r->args, ki, 0, 1);
  c->slots[MW_FUT_SLOT(r->fut)].fref = mw_frame_open(c, f);
  return f;
}

/* A free record of this warp. When all are in use the oldest waiting one goes to the global
 * run queue (as a frame) to make room. Lane 0. */
__device__ mw_u32 mw_rec_get(mw_ctx *c) {
  MW_PROBE(MW_PR_RECGET);
  mw_wstate *ws = MW_WS(c);
  for (;;) {
    mw_u32 oldest = MW_NONE;
    mw_u64 t_old = ~0ull;
    for (mw_u32 i = 0; i < MW_RECS; ++i) {
      mw_u32 s = mw_ld32(&ws->rec[i].state);
      if (MW_REC_ST(s) == MW_REC_FREE) return i;
      if (MW_REC_ST(s) == MW_REC_READY && ws->rec[i].t0 < t_old) {
        t_old = ws->rec[i].t0;
        oldest = i;
      }
    }
    if (oldest == MW_NONE) { /* every record is being copied by a thief: a moment */
      __nanosleep(64);
      continue;
    }
    MW_PROBE(MW_PR_REC_EVICT); /* every record in use: the oldest goes to the global queue */
    mw_rec *r = &ws->rec[oldest];
    mw_u32 s = mw_ld32(&r->state);
    if (MW_REC_ST(s) != MW_REC_READY || atomicCAS(&r->state, s, (s & ~15u) | MW_REC_OWNED) != s) continue;
    mw_gq_push(c->st, mw_rec_to_frame(c, r));
    mw_st32(&r->state, (s & ~15u) | MW_REC_FREE);
    return oldest;
  }
}

/* Makes record r (FREE, this warp's) READY with what its fields hold now. Lane 0, after the
 * lanes that wrote its arguments passed a __syncwarp. */
__device__ void mw_rec_ready(mw_ctx *c, mw_u32 r) {
  mw_rec *rec = &MW_WS(c)->rec[r];
  rec->t0 = MW_GLOBALTIMER();
  rec->calls = c->calls;
  mw_u32 seq = (rec->state >> 4) + 1u;
  {
    MW_PROBE(MW_PR_FENCE_READY);
    MW_FENCE_CTA(); /* the record before its state (pairs with the thief's acquire) */
  }
  mw_st32(&rec->state, seq << 4 | MW_REC_READY);
}

/* A runnable task with a frame (a woken task) goes to this warp's records: it runs next here,
 * unless another warp takes it first. Lane 0. */
__device__ void mw_make_runnable(mw_ctx *c, mw_u32 f) {
  mw_u32 r = mw_rec_get(c);
  if (r == MW_NONE) {
    mw_gq_push(c->st, f);
    return;
  }
  mw_rec *rec = &MW_WS(c)->rec[r];
  rec->frame = f;
  rec->flags = 0;
  rec->kind = MW_NONE;
  rec->fut = 0;
  mw_rec_ready(c, r);
}

/* ---- finding a child: a record still waiting, or a recent inline result ------------------- */
/* The READY record of this warp that spawns future h, or -1; *st its state word. The latest
 * spawn's is looked at first. Lane 0. */
__device__ int mw_rec_find(mw_ctx *c, mw_u64 h, mw_u32 *st) {
  mw_wstate *ws = MW_WS(c);
  mw_u32 j = ws->last_rec;
  mw_u32 s = mw_ld32(&ws->rec[j].state);
  if (MW_REC_ST(s) == MW_REC_READY && ws->rec[j].fut == h) {
    *st = s;
    return (int)j;
  }
  int found = -1;
#pragma unroll
  for (int i = 0; i < (int)MW_RECS; ++i) {
    s = mw_ld32(&ws->rec[i].state);
    if (MW_REC_ST(s) == MW_REC_READY && ws->rec[i].fut == h) {
      found = i;
      *st = s;
    }
  }
  return found;
}
/* The entry of future h among this warp's recent inline results, or -1: the newest first. Lane 0. */
__device__ int mw_kid_find(mw_ctx *c, mw_u64 h) {
  mw_wstate *ws = MW_WS(c);
  for (mw_u32 m = ws->kid_used, n = ws->kid_next; m;) {
    mw_u32 j = (--n) % MW_KIDS;
    if (!(m & (1u << j))) continue;
    if (ws->kid[j].fut == h) return (int)j;
    m &= ~(1u << j);
  }
  return -1;
}
/* The entry of future h if it is one of the two newest of this warp's recent inline results
 * (the child an await just ran, or the pair of an await_all), else -1: what mw_kid_find would
 * find first, in a few loads. Lane 0, or every lane after a __syncwarp. */
__device__ __forceinline__ int mw_kid_recent(mw_ctx *c, mw_u64 h) {
  mw_wstate *ws = MW_WS(c);
  mw_u32 used = ws->kid_used, n = ws->kid_next;
  mw_u32 j = (n - 1u) % MW_KIDS, i = (n - 2u) % MW_KIDS;
  if (((used >> j) & 1u) && ws->kid[j].fut == h) return (int)j;
  if (((used >> i) & 1u) && ws->kid[i].fut == h) return (int)i;
  return -1;
}
/* Forgets entry k. A child that completed privately still holds its producer's reference in
 * its slot (nothing else could see it): it is dropped now, the owner's stays. Lane 0. */
__device__ void mw_kid_drop(mw_ctx *c, mw_kid *k) {
  if (k->priv) mw_slot_unref(c, MW_FUT_SLOT(k->fut), MW_FUT_GEN(k->fut), 1);
  k->state = MW_KID_NONE;
  k->priv = 0;
  k->fut = 0;
  MW_WS(c)->kid_used &= ~(1u << (mw_u32)(k - MW_WS(c)->kid));
}
__device__ mw_kid *mw_kid_new(mw_ctx *c) {
  mw_wstate *ws = MW_WS(c);
  mw_u32 j = ws->kid_next++ % MW_KIDS;
  mw_kid *k = &ws->kid[j];
  if (k->state != MW_KID_NONE) mw_kid_drop(c, k);
  ws->kid_used |= 1u << j;
  return k;
}
/* Forgets the entries of level lv (it finishes or leaves the warp). Lane 0. */
__device__ void mw_kids_forget(mw_ctx *c, mw_u32 lv) {
  mw_wstate *ws = MW_WS(c);
  for (mw_u32 m = ws->kid_used; m; m &= m - 1) {
    mw_u32 i = (mw_u32)__ffs((int)m) - 1;
    if (ws->kid[i].level == lv) mw_kid_drop(c, &ws->kid[i]);
  }
}
/* The entry of the child in slot s, or -1. Lane 0. */
__device__ int mw_kid_of_slot(mw_ctx *c, mw_u32 s) {
  mw_wstate *ws = MW_WS(c);
  for (mw_u32 m = ws->kid_used; m; m &= m - 1) {
    mw_u32 i = (mw_u32)__ffs((int)m) - 1;
    if (MW_FUT_SLOT(ws->kid[i].fut) == s) return (int)i;
  }
  return -1;
}


/* ---- cancellation (protocol.h, Cancellation) ------------------------------------------------ */
/* Whether the task of future fut was asked to cancel. Lane 0. */
__device__ bool mw_cancel_asked(mw_ctx *c, mw_u64 fut) {
  if (!mw_is_future(fut) || MW_FUT_SLOT(fut) >= c->nslots) return false;
  mw_u64 ctl = mw_ld64(&c->slots[MW_FUT_SLOT(fut)].ctl);
  mw_u32 w = (mw_u32)ctl;
  return (mw_u32)(ctl >> 32) == MW_FUT_GEN(fut) && w != MW_CTL_CLOSED && (w & MW_CTL_CANCEL);
}

/* Asks the task of future fut to stop (steps 1-3 of protocol.h, Cancellation). Lane 0.
 * Returns 1 when the request was delivered (the future was pending, or already asked), 0 when
 * it was complete or names no live future. *woke is the task's frame when this canceller took
 * over its wake-up (it was suspended): the caller asks its children and then makes it
 * runnable (mw_cancel_down); MW_NONE otherwise. */
__device__ int mw_cancel_req(mw_ctx *c, mw_u64 fut, mw_u32 *woke) {
  mw_u32 s = MW_FUT_SLOT(fut), g = MW_FUT_GEN(fut);
  *woke = MW_NONE;
  if (!mw_is_future(fut) || s >= c->nslots) return 0;
  mw_slot *sl = &c->slots[s];
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
  __threadfence(); /* CANCEL before reading the frame's join (SC: pairs with the suspend's fence) */
  mw_u64 fr = mw_ld64(&sl->fref);
  if ((mw_u32)fr == 0) return 1; /* no frame: the task sees CANCEL when it starts or ticks */
  mw_u32 f = (mw_u32)fr - 1;
  mw_frame_hdr *fh = mw_frame(c, f);
  for (;;) {
    mw_u64 j = mw_ld64(&fh->join);
    mw_u32 b = (mw_u32)j;
    if ((j >> 32) != (fr >> 32) || (b & MW_JOIN_WOKEN)) return 1; /* another task's frame now */
    if (mw_cas64(&fh->join, j, j | MW_JOIN_WOKEN) != j) continue;
    if (!(b & MW_JOIN_HOLD) && (b & MW_JOIN_COUNT)) { /* suspended: it is ours to wake, to stop */
      MW_FENCE();
      *woke = f;
    }
    return 1;
  }
}

/* The future of child slot s that a task owns (its reference keeps the slot's generation): the
 * slot's generation, or the next one while the child has not started. Lane 0. */
__device__ mw_u64 mw_owned_handle(mw_ctx *c, mw_u32 s) {
  mw_u64 ctl = mw_ld64(&c->slots[s].ctl);
  mw_u32 g = (mw_u32)(ctl >> 32);
  if ((mw_u32)ctl == MW_CTL_CLOSED) {
    MW_FENCE(); /* the status of a completed child is written before its CLOSED */
    if (mw_ld32(&c->slots[s].status) != MW_ST_PENDING) return 0; /* complete */
    g += 1;                                                    /* not started yet */
  }
  return MW_FUT_MAKE(s, g);
}

#ifndef MW_CANCEL_DOWN
#define MW_CANCEL_DOWN 32u /* suspended frames a canceller walks down through before waking them */
#endif
/* The canceller took over the wake-up of suspended frame f: before its task runs again (when a
 * warp is free for it, which can take long while the warps run other tasks), its children are
 * asked to cancel, and the children of those that were suspended in turn, down the tree; each
 * frame is made runnable once its children were asked (it stops when it runs: its join says
 * WOKEN). So a cancelled tree stops at once wherever its tasks wait. Past MW_CANCEL_DOWN frames
 * in hand, a frame is made runnable at once and asks its own children when it runs. Lane 0. */
__device__ void mw_cancel_down(mw_ctx *c, mw_u32 f) {
  mw_u32 todo[MW_CANCEL_DOWN], n = 0;
  todo[n++] = f;
  while (n) {
    mw_u32 g = todo[--n];
    /* the frame's children and their links as its task left them (its suspend's fence, our
     * take-over's) */
    for (mw_u32 ch = mw_ld32(&mw_frame(c, g)->children); ch; ch = mw_ld32(&c->slots[ch - 1].sibling)) {
      mw_u64 h = mw_owned_handle(c, ch - 1);
      mw_u32 w;
      if (!h || !mw_cancel_req(c, h, &w) || w == MW_NONE) continue;
      if (n < MW_CANCEL_DOWN) todo[n++] = w;
      else mw_make_runnable(c, w);
    }
    mw_make_runnable(c, g);
  }
}

/* Asks the task of future fut to stop, and, when it was suspended, its tree below
 * (mw_cancel_down). Lane 0. Returns as mw_cancel_req. */
__device__ int mw_cancel_fut(mw_ctx *c, mw_u64 fut) {
  mw_u32 w;
  int r = mw_cancel_req(c, fut, &w);
  if (w != MW_NONE) mw_cancel_down(c, w);
  return r;
}

/* Cancels child slot s that the running level owns. Lane 0. */
__device__ void mw_cancel_owned(mw_ctx *c, mw_u32 s) {
  mw_u64 h = mw_owned_handle(c, s);
  if (h) mw_cancel_fut(c, h);
}

/* Marks the spawn of future h, still in a READY record of this warp, cancelled: it completes
 * cancelled without running wherever it is taken. Returns false when no record of this warp
 * holds it any more (cancel it through its slot then). Lane 0. */
__device__ bool mw_cancel_queued(mw_ctx *c, mw_u64 h) {
  mw_u32 s;
  int i = mw_rec_find(c, h, &s);
  if (i < 0) return false;
  mw_rec *r = &MW_WS(c)->rec[i];
  if (atomicCAS(&r->state, s, (s & ~15u) | MW_REC_OWNED) != s) return false;
  r->flags |= MW_RF_CANCELLED;
  MW_FENCE_CTA();
  mw_st32(&r->state, s); /* READY again, as it was */
  return true;
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

/* ---- completion ----------------------------------------------------------------------------- */
/* One awaited future of frame waiter completed (protocol.h, join: Completion). Lane 0. */
__device__ void mw_wake(mw_ctx *c, mw_u32 waiter, mw_u64 fut, mw_u32 status) {
  mw_frame_hdr *wh = mw_frame(c, waiter);
  if (status != MW_ST_OK) mw_cas64(&wh->await_f[0], 0ull, fut); /* the first failed one is reported */
  MW_FENCE();
  mw_u32 b = (mw_u32)mw_add64(&wh->join, ~0ull) - 1u; /* minus one: COUNT > 0, no borrow */
  if (b == 0)
    mw_make_runnable(c, waiter);
  else if (!(b & MW_JOIN_COUNT) && (b & MW_JOIN_DONE))
    mw_frame_free(c, waiter); /* its task finished by cancellation: the last completion frees */
}

/* Writes the outcome fields of slot sl (the message only on failure). Lane 0. */
__device__ void mw_slot_result(mw_slot *sl, mw_u32 status, mw_u64 value, mw_u32 rtype, int code,
                               const char *msg, const char *prefix) {
  sl->value = value;
  sl->status = status;
  sl->rtype = rtype;
  sl->code = code;
  if (status != MW_ST_OK) mw_compose(sl->msg, prefix, msg);
}

/* ---- LL words of the host rings (protocol.h) ------------------------------------------------ */
/* One 16-byte part (two LL words) of host memory, read past the L1 (the host rewrites it). */
__device__ __forceinline__ uint4 mw_ll_load(const mw_u64 *p) {
  uint4 u;
#ifdef MW_SIM
  const volatile mw_u64 *v = (const volatile mw_u64 *)p;
  mw_u64 a = v[0], b = v[1];
  u = make_uint4((mw_u32)a, (mw_u32)(a >> 32), (mw_u32)b, (mw_u32)(b >> 32));
#else
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(u.x), "=r"(u.y), "=r"(u.z), "=r"(u.w)
               : "l"(p));
#endif
  return u;
}
/* Writes the LL words (d0, flag) and (d1, flag) at p, 16-byte aligned, in one store. */
__device__ __forceinline__ void mw_ll_store(mw_u64 *p, mw_u32 d0, mw_u32 d1, mw_u32 flag) {
#ifdef MW_SIM
  volatile mw_u64 *v = (volatile mw_u64 *)p;
  v[0] = MW_LL_WORD(d0, flag);
  v[1] = MW_LL_WORD(d1, flag);
#else
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(d0), "r"(flag),
               "r"(d1), "r"(flag)
               : "memory");
#endif
}

/* The completion record of ticket t, host future fut, for the host (protocol.h, completion
 * ring): the message first on failure, then the record's eight words in four stores. Lane 0. */
__device__ void mw_comp_write(mw_ctx *c, mw_u64 t, mw_u64 fut, mw_u32 status, mw_u64 value,
                              mw_u32 rtype, mw_u32 kind, int code, const char *msg) {
  MW_PROBE(MW_PR_COMP);
  mw_state *st = c->st;
  const mw_u64 i = t & (st->comp_cap - 1);
  if (status != MW_ST_OK) {
    volatile char *m = st->comp_msg + i * MW_MSG_BYTES;
    for (int k = 0; k < MW_MSG_BYTES; ++k) m[k] = msg[k];
    __threadfence_system(); /* the message before the record that says to read it */
  }
  mw_u64 *w = st->comp[i].w;
  const mw_u32 fl = MW_LL_FLAG(t);
  mw_ll_store(w + MW_CO_W_FUT, (mw_u32)fut, (mw_u32)(fut >> 32), fl);
  mw_ll_store(w + MW_CO_W_VALUE, (mw_u32)value, (mw_u32)(value >> 32), fl);
  mw_ll_store(w + MW_CO_W_STATUS, status | rtype << 8, kind, fl);
  mw_ll_store(w + MW_CO_W_CODE, (mw_u32)code, 0u, fl);
}

/* Publishes the result of slot s (generation gen) and wakes its waiters: the protocol for
 * futures another warp or the host may wait on. Lane 0. */
__device__ __noinline__ void mw_complete_slot(mw_ctx *c, mw_u32 s, mw_u32 gen, mw_u32 status,
                                              mw_u64 value, mw_u32 rtype, int code,
                                              const char *msg, const char *prefix) {
  MW_PROBE(MW_PR_SLOT);
  mw_slot *sl = &c->slots[s];
  /* a host future's completion ticket and kind, taken first: their latency passes under the
   * fence's, and nothing read after the fence waits on the L2 for them */
  const bool host = s < c->host_slots;
  mw_u64 t = 0;
  mw_u32 kind = 0;
  if (host) {
    kind = sl->kind;
    t = mw_add64(&c->st->comp_tail, 1);
  }
  mw_slot_result(sl, status, value, rtype, code, msg, prefix);
  mw_flush_counts(c); /* the counters of what this warp ran before whoever waits reads them */
  MW_FENCE();         /* the result before CLOSED (pairs with the awaiter's fence after it) */
  mw_u64 old = mw_xchg64(&sl->ctl, ((mw_u64)gen << 32) | MW_CTL_CLOSED);
  mw_u32 word = (mw_u32)old;
  mw_u64 fut = MW_FUT_MAKE(s, gen);
  if ((mw_u32)(old >> 32) == gen && word != MW_CTL_CLOSED && (word & MW_CTL_WAITER)) {
    MW_FENCE(); /* the nodes' contents (pairs with the registrations' fences) */
    for (mw_u32 n = word & MW_CTL_WAITER; n;) {
      mw_u64 node = mw_ld64(&c->nodes[n - 1]);
      mw_node_free(c, n - 1);
      n = (mw_u32)(node >> 32);
      mw_wake(c, (mw_u32)node, fut, status);
    }
  }
  if (host) mw_comp_write(c, t, fut, status, value, rtype, kind, code, sl->msg);
}

/* Registers frame f as a waiter of future h (protocol.h, Waiters). Returns 0 when registered,
 * 1 when h is complete already (*status its status), 2 when h is stale or invalid, 3 when no
 * waiter node is free. Lane 0. */
__device__ int mw_register(mw_ctx *c, mw_u32 f, mw_u64 h, mw_u32 *status) {
  mw_u32 s = MW_FUT_SLOT(h), g = MW_FUT_GEN(h);
  if (MW_FUT_IS_INLINE(h)) {
    *status = MW_ST_OK;
    return 1;
  }
  if (!mw_is_future(h) || s >= c->nslots) return 2;
  mw_slot *sl = &c->slots[s];
  mw_u32 n = MW_NONE;
  for (;;) {
    mw_u64 old = mw_ld64(&sl->ctl);
    mw_u32 og = (mw_u32)(old >> 32), w = (mw_u32)old;
    if (og == g && w == MW_CTL_CLOSED) {
      if (n != MW_NONE) mw_node_free(c, n);
      MW_FENCE();
      *status = mw_ld32(&sl->status);
      return 1;
    }
    bool pending = og == g, unstarted = og + 1u == g && w == MW_CTL_CLOSED;
    if (!pending && !unstarted) {
      if (n != MW_NONE) mw_node_free(c, n);
      return 2;
    }
    if (n == MW_NONE && (n = mw_node_alloc(c)) == MW_NONE) return 3;
    mw_u32 head = pending ? (w & MW_CTL_WAITER) : 0u;
    mw_st64(&c->nodes[n], MW_NODE(f, head));
    MW_FENCE(); /* the node and the waiter's frame before the CAS that publishes them */
    mw_u64 nv = ((mw_u64)g << 32) | (pending ? (w & MW_CTL_CANCEL) : 0u) | (n + 1u);
    if (mw_cas64(&sl->ctl, old, nv) == old) return 0;
  }
}

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
  c->trace_run.t1 = 0;
}

/* Its end: the event goes to the worker's buffer, or is counted as dropped. A run that
 * suspended took its end time before it registered (mw_suspend): after that another worker may
 * resume the task and record the next run's start. */
__device__ __noinline__ void mw_trace_end(mw_ctx *c, mw_u32 end, mw_u32 n) {
  mw_trace_ev *r = &c->trace_run;
  if (end != MW_TR_AWAIT || !r->t1) r->t1 = MW_GLOBALTIMER();
  r->end = (mw_u8)end;
  r->n = (mw_u8)n;
  mw_u64 k = c->trace_n++;
  if (k < c->trace_cap) c->trace_ev[k] = *r;
  c->trace_head->count = k + 1;
}

/* ---- the host inbox ------------------------------------------------------------------------- */
#ifndef MW_TAKE_MAX
#define MW_TAKE_MAX 32u /* spawns one take copies at most: one per lane (1u: one at a time, to compare) */
#endif
#define MW_TAKE_LOADS ((MW_TAKE_MAX + 1u) / 2u) /* 16-byte loads of one lane in a take */
#ifndef MW_TAKE_SERIAL_COUNT
#define MW_TAKE_SERIAL_COUNT 0 /* 1: a take counts its spawns one at a time, to compare */
#endif
#ifndef MW_TAKE_BATCHES
#define MW_TAKE_BATCHES 8u /* full batches an idle poller hands out before it runs a task itself */
#endif

/* The spawn just copied into frame f, which failed to be a task (no such kind), was cancelled
 * by the host before it got here, or is a bulk spawn of no instances: its future completes
 * now and the frame goes back. Lane 0. */
__device__ void mw_inbox_settle(mw_ctx *c, mw_u32 f, mw_u64 fut, mw_u32 kind, mw_u32 flags) {
  mw_u32 s = MW_FUT_SLOT(fut), gen = MW_FUT_GEN(fut);
  const mw_u8 *args = (const mw_u8 *)mw_frame(c, f) + MW_FRAME_HDR_BYTES;
  if (kind >= c->st->nkinds) {
    mw_frame_free(c, f); /* counts and frees before the completion, which flushes them */
    mw_count(c, kind, MW_CNT_FAILED);
    mw_complete_slot(c, s, gen, MW_ST_FAILED, 0, MW_RT_VOID, MW_FAIL_BAD_KIND,
                     "no such task kind in the executor", 0);
  } else if (flags & MW_IN_CANCELLED) {
    char buf[MW_MSG_BYTES];
    mw_cancel_msg(buf, kind);
    mw_drop_holds(c, mw_kind(kind)->futargs, args);
    mw_frame_free(c, f);
    mw_count(c, kind, MW_CNT_CANCELLED);
    mw_complete_slot(c, s, gen, MW_ST_CANCELLED, 0, mw_kind(kind)->rtype, MW_FAIL_CANCELLED, buf, 0);
  } else { /* a bulk spawn of no instances */
    mw_drop_holds(c, mw_kind(kind)->futargs, args);
    mw_frame_free(c, f);
    mw_count(c, kind, MW_CNT_COMPLETED);
    mw_complete_slot(c, s, gen, MW_ST_OK, 0, MW_RT_VOID, 0, 0, 0);
  }
}

/* Pushes frame f of each lane below n (MW_NONE: none) to the global run queue: the tickets in
 * one atomic, the cells written by the lanes together (mw_gq_push's steps). Collective. */
__device__ void mw_gq_push_lanes(mw_ctx *c, mw_u32 f) {
  mw_state *st = c->st;
  mw_u32 m = __ballot_sync(MW_FULL, f != MW_NONE);
  if (!m) return;
  mw_u64 t0 = mw_bcast64(c->lane == 0 ? mw_add64(&st->gq_tail, (mw_u64)__popc(m)) : 0ull);
  if (f == MW_NONE) return;
  mw_u64 t = t0 + (mw_u64)__popc(m & ((1u << c->lane) - 1u));
  mw_u64 i = t & (st->gq_cap - 1);
  while (mw_ld64(&st->gq_seq[i]) != t) __nanosleep(32); /* a slow consumer of t - cap */
  mw_st32(&st->gq[i], f);
  MW_FENCE();
  mw_st64(&st->gq_seq[i], t + 1);
}

/* Takes the spawns waiting in the host inbox, up to MW_TAKE_MAX in one claim, and makes each a
 * task in a fresh frame (protocol.h, inbox ring: a take); the cancel requests among them are
 * carried out (after the spawns before them are tasks). The first task is returned to run
 * here, the others go to the global run queue for the idle workers. A take reads two cells
 * (a part of 16 bytes per lane), or MW_TAKE_MAX while its last take found more than one (the
 * host streams; 16 parts per lane, all in flight together). While the host streams, a full
 * batch goes to the queue whole and the take goes on, up to batches full batches: the worker
 * hands spawns out rather than run one of each batch itself. Collective. Returns the frame, or
 * MW_NONE if the inbox is empty or no frame is free. */
__device__ __noinline__ mw_u32 mw_take_inbox(mw_ctx *c, mw_u32 batches) {
  mw_state *st = c->st;
  const mw_u32 cap = st->inbox_cap;
  const mw_u32 part = c->lane & 15u, half = c->lane >> 4; /* load k: cell 2k + half, this part */
  for (int round = 0; round < 16; ++round) {
    mw_u32 w = c->take_w < 2u ? 2u : c->take_w;
    w = w < cap ? w : cap;
    mw_u64 t = mw_bcast64(c->lane == 0 ? mw_ld64(&st->inbox_head) : 0ull);
    /* the cells t .. t+w-1, every load in flight before any is looked at */
    uint4 u[MW_TAKE_LOADS];
#pragma unroll
    for (mw_u32 k = 0; k < MW_TAKE_LOADS; ++k)
      if (2u * k + half < w)
        u[k] = mw_ll_load(&st->inbox[(t + 2u * k + half) & (cap - 1)].w[2u * part]);
    mw_u32 whole = 0; /* cell j is whole: bit j (the same in every lane) */
#pragma unroll
    for (mw_u32 k = 0; k < MW_TAKE_LOADS; ++k) {
      if (2u * k >= w) break;
      const mw_u32 fl = MW_LL_FLAG(t + 2u * k + half);
      const mw_u32 b = __ballot_sync(MW_FULL, 2u * k + half < w && u[k].y == fl && u[k].w == fl);
      whole |= ((b & 0xffffu) == 0xffffu ? 1u : 0u) << (2u * k);
      whole |= ((b >> 16) == 0xffffu ? 1u : 0u) << (2u * k + 1u);
    }
    mw_u32 n = whole == MW_FULL ? 32u : (mw_u32)__ffs((int)~whole) - 1u; /* whole in a row from t */
    n = n < w ? n : w;
    n = n < MW_TAKE_MAX ? n : MW_TAKE_MAX;
    c->take_w = n > 1 ? MW_TAKE_MAX : 2u;
    if (n == 0) return MW_NONE;
    MW_PROBE(MW_PR_TAKE); /* a take of n spawns, from here to its end */
    /* a frame for each, from the warp's cache (filled from the free ring in one take), lane j
     * getting the one the j-th mw_frame_alloc would give */
    const mw_u32 got = mw_bcast(c->lane == 0 ? mw_frames_cached(c, n) : 0u);
    if (got == 0) return MW_NONE; /* no free frame: the spawns wait */
    __syncwarp();
    mw_u32 f = c->lane < got ? MW_WS(c)->free_frames[MW_WS(c)->nfree_frames - 1u - c->lane] : MW_NONE;
    __syncwarp();
    if (c->lane == 0) {
      MW_WS(c)->nfree_frames -= got;
      MW_WS(c)->frames_taken += got;
    }
    mw_u32 claimed = 0;
    if (c->lane == 0) claimed = mw_cas64(&st->inbox_head, t, t + got) == t;
    if (!mw_bcast(claimed)) { /* another worker took them: the frames go back, in order */
      for (mw_u32 j = got; j-- > 0;) {
        mw_u32 g = __shfl_sync(MW_FULL, f, j);
        if (c->lane == 0) mw_frame_free(c, g);
      }
      __syncwarp();
      continue;
    }
    /* the cells are ours and already read: back to the host (after every lane's loads) */
    __syncwarp();
    if (c->lane == 0) {
      __threadfence_system();
      for (mw_u32 j = 0; j < got; ++j) mw_st64(&st->inbox_free[(t + j) & (cap - 1)], t + j + cap);
    }
    /* each part to its cell's frame (the arguments, parts 0..11), and the head words to the
     * cell's own lane (lane j: cell j): kind and flags in part 12, fut in 13, bulk_n in 14 */
    mw_u64 fut = 0;
    mw_u32 kind = 0, flags = 0, bn = 0;
    const mw_u32 hsrc = 16u * (c->lane & 1u);
#pragma unroll
    for (mw_u32 k = 0; k < MW_TAKE_LOADS; ++k) {
      if (2u * k >= got) break;
      const mw_u32 cj = 2u * k + half, fj = __shfl_sync(MW_FULL, f, cj & 31u);
      if (cj < got && part < MW_INBOX_ARG_BYTES / 8u && part * 8u + 8u <= c->frame_bytes - MW_FRAME_HDR_BYTES) {
        uint2 *dst = (uint2 *)((mw_u8 *)mw_frame(c, fj) + MW_FRAME_HDR_BYTES) + part;
        *dst = make_uint2(u[k].x, u[k].z);
      }
      const mw_u32 k0 = __shfl_sync(MW_FULL, u[k].x, hsrc + 12u), f0 = __shfl_sync(MW_FULL, u[k].z, hsrc + 12u);
      const mw_u32 u0 = __shfl_sync(MW_FULL, u[k].x, hsrc + 13u), u1 = __shfl_sync(MW_FULL, u[k].z, hsrc + 13u);
      const mw_u32 b0 = __shfl_sync(MW_FULL, u[k].x, hsrc + 14u);
      if (c->lane >> 1 == k) {
        kind = k0;
        flags = f0;
        fut = (mw_u64)u0 | (mw_u64)u1 << 32;
        bn = b0;
      }
    }
    /* the rest of each frame's payload: zeroes */
    const mw_u32 payload = (c->frame_bytes - MW_FRAME_HDR_BYTES) / 16u;
    for (mw_u32 j = 0; j < got; ++j) {
      const mw_u32 fj = __shfl_sync(MW_FULL, f, j);
      uint4 *dst = (uint4 *)((mw_u8 *)mw_frame(c, fj) + MW_FRAME_HDR_BYTES);
      for (mw_u32 i = MW_INBOX_ARG_BYTES / 16u + c->lane; i < payload; i += 32u) dst[i] = make_uint4(0, 0, 0, 0);
    }
    __syncwarp();
    bool odd = false, cancel = false;
    if (f != MW_NONE) {
      cancel = (flags & MW_IN_CANCEL) != 0;
      if (!cancel) {
        mw_frame_hdr *fh = mw_frame(c, f);
        mw_frame_hdr_fresh(fh, kind, fut, MW_FR_HOST | ((flags & MW_IN_BULK) ? MW_FR_BULK : 0), bn);
        mw_slot *sl = &c->slots[MW_FUT_SLOT(fut)];
        sl->kind = kind;
        sl->refs = 1;
        sl->fref = mw_frame_open(c, f);
        odd = kind >= st->nkinds || (flags & MW_IN_CANCELLED) || ((flags & MW_IN_BULK) && bn == 0);
        /* the futures among its arguments are held until it finishes (protocol.h, inbox ring) */
        if (kind < st->nkinds)
          mw_take_holds(c, mw_kind(kind)->futargs, (const mw_u8 *)fh + MW_FRAME_HDR_BYTES);
      }
    }
    /* in ticket order (lane 0: the warp's counters, cancellation): counted, the odd ones
     * completed now, the cancel requests carried out and their frames given back */
    mw_u32 om = __ballot_sync(MW_FULL, odd), cm = __ballot_sync(MW_FULL, cancel);
    /* the common batch: spawns of one kind, nothing to settle or cancel: counted at once */
    const mw_u32 k0 = __shfl_sync(MW_FULL, kind, 0);
    const bool one_kind = !(om | cm) && __all_sync(MW_FULL, f == MW_NONE || kind == k0) && !MW_TAKE_SERIAL_COUNT;
    if (one_kind && c->lane == 0) mw_count_n(c, k0, MW_CNT_SPAWNED, got);
    for (mw_u32 j = 0; j < got && !one_kind; ++j) {
      mw_u32 kj = __shfl_sync(MW_FULL, kind, j);
      mw_u32 fj = __shfl_sync(MW_FULL, f, j);
      mw_u64 uj = __shfl_sync(MW_FULL, fut, j);
      mw_u32 gj = __shfl_sync(MW_FULL, flags, j);
      if (c->lane != 0) continue;
      if (cm & (1u << j)) {
        mw_frame_free(c, fj);
        mw_cancel_fut(c, uj);
        continue;
      }
      mw_count(c, kj, MW_CNT_SPAWNED);
      if (om & (1u << j)) mw_inbox_settle(c, fj, uj, kj, gj);
    }
    __syncwarp();
    if (odd || cancel) f = MW_NONE;
    /* the first task left runs here, the others go to the idle workers */
    mw_u32 live = __ballot_sync(MW_FULL, f != MW_NONE);
    if (!live) continue;
    if (got == MW_TAKE_MAX && batches > 1) { /* the host streams: hand them all out, go on */
      mw_gq_push_lanes(c, f);
      __syncwarp();
      --batches;
      round = 0;
      continue;
    }
    mw_u32 first = (mw_u32)__ffs((int)live) - 1u;
    mw_u32 mine = __shfl_sync(MW_FULL, f, first);
    mw_gq_push_lanes(c, c->lane == first ? MW_NONE : f);
    __syncwarp();
    return mine;
  }
  return MW_NONE;
}

/* ---- records that waited: for other warps of the CTA, and for other CTAs ------------------- */
enum { MW_PICK_STEAL = 0, MW_PICK_ANY = 1, MW_PICK_WOKEN = 2 };

/* Whether a READY record of a warp whose progress is prog may be taken by another warp now
 * (protocol.h, spawn records: stealable), or, for MW_PICK_WOKEN, is a runnable frame that
 * waited MW_STEAL_AGE_NS. */
__device__ __forceinline__ bool mw_takeable(const mw_rec *r, mw_u32 prog, mw_u64 age, int mode) {
  bool spawn = (r->flags & (MW_RF_SPAWN | MW_RF_BULK)) != 0; /* a bulk task waits for its spawner's await as a spawn does */
  if (mode == MW_PICK_WOKEN) return !spawn && age >= MW_STEAL_AGE_NS;
  if (!spawn) return age >= MW_STEAL_AGE_NS;
  return (age >= MW_STEAL_AGE_NS && prog - r->calls >= 2u) || age >= MW_STRAND_NS;
}

/* Claims, as how (MW_REC_TAKEN or MW_REC_OWNED), the oldest record of this CTA that mode allows:
 * MW_PICK_STEAL a takeable record of another warp; MW_PICK_ANY a takeable record of any warp
 * (this one's included); MW_PICK_WOKEN a woken task that waited. The lanes look at the records
 * together (two each). Collective; returns the claimed record in every lane, or NULL. */
__device__ __noinline__ mw_rec *mw_cta_claim(mw_ctx *c, int mode, mw_u32 how) {
  mw_u64 now = mw_bcast64(c->lane == 0 ? MW_GLOBALTIMER() : 0ull);
  mw_u64 best_t = ~0ull;
  mw_u32 best_k = MW_NONE;
  for (mw_u32 k = c->lane; k < c->cn * MW_RECS; k += 32) {
    mw_u32 w = k / MW_RECS;
    if (mode == MW_PICK_STEAL && w == c->cw) continue;
    mw_rec *r = &MW_CTAS(c)[w].rec[k % MW_RECS];
    if (MW_REC_ST(mw_ld32(&r->state)) != MW_REC_READY) continue;
    mw_u64 t0 = *(volatile mw_u64 *)&r->t0;
    if (t0 < best_t && mw_takeable(r, *(volatile mw_u32 *)&MW_CTAS(c)[w].progress, now - t0, mode)) {
      best_t = t0;
      best_k = k;
    }
  }
  for (int off = 16; off > 0; off >>= 1) { /* the oldest over the lanes */
    mw_u64 t = __shfl_down_sync(MW_FULL, best_t, off);
    mw_u32 k = __shfl_down_sync(MW_FULL, best_k, off);
    if (t < best_t) {
      best_t = t;
      best_k = k;
    }
  }
  best_k = mw_bcast(best_k);
  if (best_k == MW_NONE) return 0;
  mw_rec *r = &MW_CTAS(c)[best_k / MW_RECS].rec[best_k % MW_RECS];
  mw_u32 ok = 0;
  if (c->lane == 0) {
    mw_u32 s = mw_ld32(&r->state);
    /* still the record the lanes chose (its t0), still READY */
    ok = MW_REC_ST(s) == MW_REC_READY && *(volatile mw_u64 *)&r->t0 == best_t &&
         atomicCAS(&r->state, s, (s & ~15u) | how) == s;
    if (ok) MW_FENCE_CTA(); /* the record's fields after its claim (pairs with the owner's release) */
  }
  __syncwarp(); /* every lane after lane 0's acquire */
  return mw_bcast(ok) ? r : 0;
}

/* Puts the oldest takeable record of this CTA in the global run queue, for idle workers of
 * other CTAs. Collective. */
__device__ void mw_publish_aged(mw_ctx *c) {
  mw_rec *r = mw_cta_claim(c, MW_PICK_ANY, MW_REC_TAKEN);
  if (!r || c->lane != 0) return;
  mw_gq_push(c->st, mw_rec_to_frame(c, r));
  MW_FENCE_CTA();
  mw_st32(&r->state, (r->state & ~15u) | MW_REC_FREE);
}

/* Whether a woken task in a record of this CTA has waited at least MW_STEAL_AGE_NS. Collective. */
__device__ bool mw_woken_waiting(mw_ctx *c) {
  mw_u64 now = mw_bcast64(c->lane == 0 ? MW_GLOBALTIMER() : 0ull);
  bool any = false;
  for (mw_u32 k = c->lane; k < c->cn * MW_RECS; k += 32) {
    mw_rec *r = &MW_CTAS(c)[k / MW_RECS].rec[k % MW_RECS];
    if (MW_REC_ST(mw_ld32(&r->state)) == MW_REC_READY &&
        mw_takeable(r, 0, now - *(volatile mw_u64 *)&r->t0, MW_PICK_WOKEN))
      any = true;
  }
  return __any_sync(MW_FULL, any) != 0;
}

/* Whether this worker is a poller that has not looked at the inbox for MW_POLL_NS. Lane 0. */
__device__ bool mw_poll_due(mw_ctx *c) {
  if (c->wid >= MW_POLLERS) return false;
  mw_u64 now = MW_GLOBALTIMER();
  if (now - MW_WS(c)->polled < MW_POLL_NS) return false;
  MW_WS(c)->polled = now;
  return true;
}

/* The periodic work of a busy warp (protocol.h: MW_TICK_NS): cancellation of the levels of its
 * chain, a record for idle workers elsewhere, the inbox for pollers, the host's switches.
 * Collective: the lanes look at the levels and records together. */
__device__ __noinline__ void mw_tick_work(mw_ctx *c) {
  MW_PROBE(MW_PR_TICK);
  mw_wstate *ws = MW_WS(c);
  mw_u32 stop = 0, tg = 0, hungry = 0, poll = 0;
  if (c->lane == 0) {
    /* the host's switches, in flight together: a stop makes the chain leave the warp at its
     * awaits (so the executor can stop while a long chain runs); a trace switch is taken up
     * between two runs */
    stop = mw_ld32(&c->st->stop);
    tg = mw_ld32(&c->st->trace_gen) != c->trace_gen;
    hungry = mw_ld32(&c->st->hungry);
    poll = mw_poll_due(c);
  }
  /* the levels asked to cancel, one lane each (their slots' words in flight together) */
  mw_u32 first = MW_NONE;
  for (mw_u32 base = 0; base <= c->d && first == MW_NONE; base += 32) {
    mw_u32 i = base + c->lane;
    bool asked = i <= c->d && !(ws->lv[i].flags & MW_LV_CANCELLED) && mw_cancel_asked(c, ws->lv[i].fut);
    mw_u32 m = __ballot_sync(MW_FULL, asked);
    if (m) first = base + (mw_u32)__ffs((int)m) - 1;
  }
  if (first != MW_NONE && c->lane == 0) /* the levels it runs inline stop with it, up to a root */
    for (mw_u32 j = first; j <= c->d && (j == first || !(ws->lv[j].flags & MW_LV_ROOT)); ++j)
      ws->lv[j].flags |= MW_LV_CANCELLED;
  __syncwarp();
  if (first != MW_NONE && (ws->lv[c->d].flags & MW_LV_CANCELLED)) c->cancelled = 1;
  c->yield = mw_bcast(stop) != 0;
  if (mw_bcast(tg)) c->trace_due = 1;
  hungry = mw_bcast(hungry);
#ifdef MW_ELIDE
  c->hungry_seen = hungry > c->hungry_max;
  /* a long elided call counts its calls as it goes, as an idle warp would */
  if (c->elide && c->lane == 0 && mw_counts_dirty(c, ws)) mw_flush_counts(c);
  __syncwarp();
#endif
  if (hungry) mw_publish_aged(c);
  if (mw_woken_waiting(c)) c->nest = 1;
  if (mw_bcast(poll)) {
    mw_u32 f = mw_take_inbox(c, 1);
    if (f != MW_NONE && c->lane == 0) mw_gq_push(c->st, f);
  }
}

/* Counts a spawn or await; every MW_TICK_CALLS-th looks at the clock, and does the periodic work when it
 * is due. Collective. */
__device__ __forceinline__ void mw_tick_due(mw_ctx *c);
__device__ __forceinline__ void mw_tick(mw_ctx *c) {
  ++c->calls; /* each lane counts the same calls */
  if (c->lane == 0) MW_WS(c)->progress = c->calls; /* for thieves: records behind it may go */
  if ((c->calls & (MW_TICK_CALLS - 1u)) != 0) return;
  mw_tick_due(c);
}
#ifdef MW_ELIDE
/* Every MW_TICK_CALLS-th spawn in an elided call (which counted it): as mw_tick. Collective. */
__device__ __noinline__ void mw_elide_tick(mw_ctx *c) {
  if (c->lane == 0) MW_WS(c)->progress = c->calls;
  mw_tick_due(c);
}
#endif
/* The clock, and the periodic work when it is due. Collective. */
__device__ __forceinline__ void mw_tick_due(mw_ctx *c) {
  mw_u32 due = 0;
  if (c->lane == 0) {
    mw_u64 now = MW_GLOBALTIMER();
    if (now - MW_WS(c)->tick >= MW_TICK_NS) {
      MW_WS(c)->tick = now;
      due = 1;
    }
  }
  __syncwarp();
  if (mw_bcast(due)) mw_tick_work(c);
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
    mw_wstate *ws = MW_WS(c);
    mw_level *L = MW_LV(c);
    mw_u32 s = MW_NONE, gen = 0;
    if (c->bulk) {
      h = MW_FUT_NOSLOT; /* bulk instances share a frame: they may not own children */
    } else if (c->cancelled) {
      h = MW_FUT_SKIPPED; /* a cancelled task spawns nothing more; it ends cancelled */
      cx = 1;
    } else if ((s = mw_slot_alloc(c, &gen)) == MW_NONE) {
      h = MW_FUT_NOSLOT;
    } else {
      h = MW_FUT_MAKE(s, gen);
      MW_PROBE(MW_PR_SLOT_INIT);
      mw_slot *sl = &c->slots[s];
      sl->kind = kind;
      sl->status = MW_ST_PENDING;
      sl->refs = 2; /* the task + its owner */
      sl->fref = 0;
      sl->sibling = sib = L->children;
      tgen = MW_GEN_OF(L->flags);
      tgen += tgen < MW_GEN_MAX;
      mw_count(c, kind, MW_CNT_SPAWNED);
      f = mw_frame_alloc(c); /* its frame, reserved now: capacity means frames */
      if (f == MW_NONE) {
        sl->refs = 1;
        mw_count(c, kind, MW_CNT_FAILED);
        mw_complete_slot(c, s, gen, MW_ST_FAILED, 0, ki->rtype, MW_FAIL_CAPACITY,
                         "no free task frame (capacity exhausted)", mw_kind_name(kind));
        sl->sibling = L->children;
      } else {
        if (ki->futargs) { /* its handles leave with it: nothing spawned so far is private */
          ws->epoch++;
          mw_take_holds(c, ki->futargs, (const mw_u8 *)args);
        }
        if (!bulk) r = mw_rec_get(c);
      }
      L->children = s + 1;
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
  if (ki->rtype == MW_RT_FUTURE && status == MW_ST_OK) ws->epoch++; /* a handle leaves in it */
  bool root = (L->flags & MW_LV_ROOT) != 0;
  bool priv = !root && !(L->flags & MW_LV_PUBLIC) && L->epoch == ws->epoch && s >= c->host_slots;
  /* counted, children and frame let go before the completion, which adds the counters to the
   * rows for whoever waits */
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
  } else {
    mw_complete_slot(c, s, gen, status, value, ki->rtype, code, msg, prefix);
    if (s >= c->host_slots) mw_slot_unref(c, s, gen, 1); /* the producer's reference */
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
__device__ __noinline__ void mw_root_from_rec(mw_ctx *c, mw_rec *r, mw_u32 lv, mw_u32 off) {
  mw_u32 spawn = 0, f = 0, kind = 0;
  if (c->lane == 0) {
    spawn = (r->flags & MW_RF_SPAWN) != 0;
    f = r->frame;
    kind = r->kind;
    if (spawn) {
      mw_level *L = &MW_WS(c)->lv[lv];
      L->fut = r->fut;
      L->bad = 0;
      L->kind = kind;
      L->resume = 0;
      L->frame = f;
      L->children = 0;
      L->flags = MW_LV_ROOT | r->gen << MW_GEN_SHIFT |
                 ((r->flags & MW_RF_CANCELLED) || mw_cancel_asked(c, r->fut) ? MW_LV_CANCELLED : 0u);
      L->epoch = 0;
      L->off = off;
      L->sibling = r->sibling;
      L->naw = L->cur = 0;
      L->bulk = 0;
      MW_WS(c)->depth = lv + 1;
    }
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

/* Level lv from frame f (a plain task from the global queue or the inbox, or a woken one). A
 * frame that resumes after a suspension stops if a canceller woke it or asked. Collective. */
__device__ __noinline__ void mw_root_from_frame(mw_ctx *c, mw_u32 f, mw_u32 lv, mw_u32 off) {
  MW_PROBE(MW_PR_ROOT);
  mw_frame_hdr *fh = mw_frame(c, f);
  mw_u32 kind = 0;
  if (c->lane == 0) {
    MW_FENCE(); /* the frame after the hand-over that brought it here */
    kind = fh->kind;
    mw_level *L = &MW_WS(c)->lv[lv];
    L->fut = fh->fut;
    L->bad = fh->await_f[0];
    L->kind = kind;
    L->resume = fh->resume;
    L->frame = f;
    L->children = fh->children;
    bool cx = (fh->flags & MW_FR_CANCEL) || mw_cancel_asked(c, fh->fut) ||
              (L->resume && ((mw_u32)mw_ld64(&fh->join) & MW_JOIN_WOKEN));
    L->flags = MW_LV_ROOT | MW_LV_PUBLIC | (cx ? MW_LV_CANCELLED : 0u) | MW_GEN_BITS(fh->flags);
    L->epoch = 0;
    L->off = off;
    L->sibling = 0;
    L->naw = L->cur = 0;
    L->bulk = 0;
    MW_WS(c)->depth = lv + 1;
  }
  __syncwarp(); /* every lane after lane 0's acquire of the frame */
  kind = mw_bcast(kind);
  const mw_u32 *src = (const mw_u32 *)((mw_u8 *)fh + MW_FRAME_HDR_BYTES);
  mw_u32 *dst = (mw_u32 *)(c->stk + off);
  for (mw_u32 i = 0; i * 4 < mw_kind(kind)->frame_bytes; ++i) dst[i] = src[i];
  __syncwarp();
}

/* Whether frame f is a bulk task. Collective. */
__device__ bool mw_is_bulk(mw_ctx *c, mw_u32 f) {
  mw_u32 b = 0;
  if (c->lane == 0) {
    MW_FENCE(); /* the frame after the hand-over that brought it here */
    b = (mw_frame(c, f)->flags & MW_FR_BULK) != 0;
  }
  __syncwarp(); /* every lane after lane 0's acquire of the frame */
  return mw_bcast(b) != 0;
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
      if (last) {
        mw_slot *sl = &c->slots[MW_FUT_SLOT(fut)];
        mw_u32 s = MW_FUT_SLOT(fut), g = MW_FUT_GEN(fut);
        mw_u32 fl = mw_ld32(&h->flags);
        char msg[MW_MSG_BYTES];
        if (fl & MW_FR_CANCEL) {
          mw_cancel_msg(msg, kind);
          mw_count(c, kind, MW_CNT_CANCELLED);
          mw_complete_slot(c, s, g, MW_ST_CANCELLED, 0, MW_RT_VOID, MW_FAIL_CANCELLED, msg, 0);
        } else if (fl & MW_FR_FAILED) {
          MW_FENCE();
          for (int q = 0; q < MW_MSG_BYTES; ++q) msg[q] = sl->msg[q];
          mw_count(c, kind, MW_CNT_FAILED);
          mw_complete_slot(c, s, g, MW_ST_FAILED, 0, MW_RT_VOID, sl->code, msg, 0);
        } else {
          mw_count(c, kind, MW_CNT_COMPLETED);
          mw_complete_slot(c, s, g, MW_ST_OK, 0, MW_RT_VOID, 0, 0, 0);
        }
        if (ki->futargs) mw_drop_holds(c, ki->futargs, (const mw_u8 *)src);
        if (s >= c->host_slots) mw_slot_unref(c, s, g, 1);
      }
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

/* Runs a task taken by the loop: a record, or a frame (plain or bulk). Collective. */
__device__ void mw_run_task(mw_ctx *c, mw_rec *rec, mw_u32 f) {
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
  } else if (mw_is_bulk(c, f)) return mw_run_bulk(c, f);
  else mw_root_from_frame(c, f, 0, 0);
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
  c.lane = threadIdx.x & 31u;
  c.wid = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
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
    const mw_stat_entry *en = st->stats + (mw_u64)c.wid * MW_STAT_ENTRIES;
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
      /* in flight together with the stop flag's load; one predictable branch while off */
      mw_u32 tg = mw_ld32(&st->trace_gen);
      if (tg != c.trace_gen) mw_trace_switch(&c, tg);
      if (idle && poller && (idle & 255) == 0) st->ctl->heartbeat = MW_GLOBALTIMER();
    }
    if (mw_bcast(stop)) {
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
    /* a poller looks at the inbox every MW_POLL_NS even while there is local work */
    if (mw_bcast(c.lane == 0 ? (mw_u32)mw_poll_due(&c) : 0u)) f = mw_take_inbox(&c, MW_TAKE_BATCHES);
    if (f == MW_NONE && (general || mw_own_ready(&c))) f = mw_next(&c, &rec);
    if (f == MW_NONE && !rec && general && (poller || (idle & 1023) == 1023)) {
      f = mw_take_inbox(&c, MW_TAKE_BATCHES);
      if (f != MW_NONE && poller) hot = MW_GLOBALTIMER(); /* the host is at work */
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
    mw_run_task(&c, rec, f);
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
                                     "slot_pop", "frame_take", "rec_evict"};
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

#endif /* MW_RUNTIME_CUH */
