/* runtime.cuh - the device executor's state and shared structures: free lists, queues, the bulk board, spawn records, cancellation, completion, the host rings, traces.
 *
 * The first of the executor's three files, then device_api.cuh (the API that task code calls:
 * spawn, await, levels) and executor.cuh (the trampoline, bulk instances, the scheduler loop,
 * the kernel), always compiled together in that order.
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
/* 1: while the host streams, a poller looks at the inbox before the run queues, each time round
 * its loop (a variant, to measure whether the pollers' search of the queues between their takes
 * bounds a stream of host spawns: bench/NOTES.md, v72-v73); 0: the queues first */
#ifndef MW_POLLER_INBOX_FIRST
#define MW_POLLER_INBOX_FIRST 0
#endif


/* The warp's shared state, the CTA's states and the running level. On the GPU the worker CTA's
 * states are a __shared__ array (warp w of the CTA is threads 32w..32w+31: the launch's block is
 * MW_CTA_WARPS warps); an address derived from it is a shared-memory address to the compiler:
 * its loads are shared loads (no generic-to-shared resolution), and its stores cannot alias the
 * context in local memory, so the context's fields are not read again after each of them. On sim
 * the states are host memory that the host allocates (mw_state.sim_cta). */
#if !defined(MW_SIM) && !defined(MW_CTA_SHARED_DEFINED) /* (one unit: task_api.cuh, MW_TASK_WS) */
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
/* The CTA's block slot (protocol.h, Block tasks): beside the warps' states in shared memory; on
 * sim the host's (mw_state.sim_blk). */
#ifdef MW_SIM
#define MW_BLK(c) ((c)->st->sim_blk + (c)->wid / MW_CTA_WARPS)
#else
__shared__ mw_blk_slot mw_cta_blk;
#define MW_BLK(c) (&mw_cta_blk)
#endif

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
#define MW_NPROBES 56
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
#define MW_PROBE_OF(cx, id) mw_probe_scope MW_PROBE_CAT(mw_probe_, __LINE__)((cx).lane, (cx).cw, (id))
#else
#define MW_PROBE(id) (void)0
#define MW_PROBE_OF(cx, id) (void)0
#endif
enum { MW_PR_RUN, MW_PR_FINISH, MW_PR_SPAWN, MW_PR_AWAIT, MW_PR_MORE, MW_PR_AFTER, MW_PR_VALUE,
       MW_PR_RELEASE, MW_PR_LOOP, MW_PR_CALL, MW_PR_RECGET, MW_PR_TICK, MW_PR_SPAWN0, MW_PR_COMPLETE,
       MW_PR_OUTCOME, MW_PR_EMPTY, MW_PR_JOIN, MW_PR_BULK, MW_PR_SUSPEND, MW_PR_ROOT, MW_PR_SLOT,
       MW_PR_INSTANCE, MW_PR_FENCE_READY, MW_PR_FENCE_CALL, MW_PR_SLOT_INIT, MW_PR_PRIVATE,
       MW_PR_BCAST, MW_PR_BCAST_DIV, MW_PR_LEAF_CLAIM, MW_PR_PURE_BODY, MW_PR_BULK_CLAIM, MW_PR_BULK_DONE, MW_PR_JOIN_GO, MW_PR_JOIN_ALONE,
       MW_PR_LINGER, MW_PR_NO_SEAT, MW_PR_TAKE, MW_PR_COMP, MW_PR_AWAIT_CLOSED,
       MW_PR_SLOT_POP, MW_PR_FRAME_TAKE, MW_PR_REC_EVICT, MW_PR_CS_FLUSH, MW_PR_CS_FENCE, MW_PR_CS_XCHG,
       MW_PR_TAKE_FREE, MW_PR_FIN_LET_GO, MW_PR_LOOK, MW_PR_NEXT, MW_PR_TAKE_FRAMES,
       MW_PR_TAKE_CAS, MW_PR_TAKE_PUSH, MW_PR_TAKE_LOAD, MW_PR_TAKE_PEEK, MW_PR_GQ_TURN, MW_PR_GQ_POP, MW_PR_COUNT };
#if defined(MW_PROBES) && !defined(MW_SIM)
static_assert(MW_PR_COUNT <= MW_NPROBES, "a row of the probes' table for each probe");
#endif

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
  mw_stat_entry *en = c->stats + d;
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
/* The frames a warp's cache holds past its share (a fill for a take that did not happen) back
 * to the free ring. Lane 0. */
__device__ void mw_frames_trim(mw_ctx *c) {
  mw_wstate *ws = MW_WS(c);
  if (ws->nfree_frames <= c->cache_cap) return;
  mw_u32 extra = ws->nfree_frames - c->cache_cap;
  ws->nfree_frames = c->cache_cap;
  mw_fring_give(c->st, &ws->free_frames[ws->nfree_frames], extra);
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
/* The cells an idle warp's pop may claim with one CAS: as many as there are warps of its CTA
 * waiting for the turn, itself included, up to MW_GQ_POP_RUN. The first runs here; each other
 * frame is handed to one waiting warp (its gq_hand, protocol.h), which runs it as if it had
 * popped it; a frame no waiter took goes back to the queue, so that none waits in a busy warp's
 * records (a pop of runs that left them there stranded long tasks while other CTAs idled:
 * block_spec's holds, bench/NOTES.md v76). Every #gpu spec that ran (205) passed with it,
 * bench/holds.lua started every long task at 132, 528 and 1,056 workers, and it took the C
 * stream of host spawns 2.4 -> 3.7-4.0 M/s and fib(30) 347 -> 370 M tasks/s on an H100 (v81).
 * On sim, bench/holds.lua failed 2 of 35 runs inside a busted spec file on a loaded machine
 * (0 of 25 with one cell a pop, 0 of 44 outside busted): not found (bench/NOTES.md).
 * 1: one cell a pop, as before. */
#ifndef MW_GQ_POP_RUN
#define MW_GQ_POP_RUN 4u
#endif
#if MW_GQ_POP_RUN > 1
__device__ mw_u32 mw_gq_pop_run(mw_ctx *c, mw_u32 most, mw_u32 *f);
#endif
__device__ mw_u32 mw_gq_pop_cta(mw_ctx *c) {
  if (MW_GQ_EVERY_WARP) return mw_gq_pop(c->st);
  mw_u32 *turn = &MW_CTAS(c)[0].gq_turn;
#if MW_GQ_POP_RUN > 1
  /* waiting: gq_hand 1 (only this warp writes it while 0; the holder only turns 1 into f + 2) */
  volatile mw_u32 *hand = &MW_WS(c)->gq_hand;
  *hand = 1u;
#endif
  {
    MW_PROBE(MW_PR_GQ_TURN); /* the wait for the CTA's turn */
#if MW_GQ_POP_RUN > 1
    for (;;) {
      const mw_u32 h = *hand;
      if (h >= 2u) { /* handed a frame: the holder read it from the queue after its fence */
        *hand = 0u;
        MW_FENCE(); /* the frame's contents as the holder's acquire saw them */
        return h - 2u;
      }
      if (!*(volatile mw_u32 *)turn) {
        if (atomicCAS((mw_u32 *)hand, 1u, 0u) != 1u) continue; /* handed one meanwhile */
        if (atomicCAS(turn, 0u, 1u) == 0u) break;
        *hand = 1u; /* waiting again */
      }
#ifdef MW_GQ_LEAVE_EMPTY /* a variant: no wait while the queue looks empty */
      if (mw_ld64(&c->st->gq_head) >= mw_ld64(&c->st->gq_tail) && atomicCAS((mw_u32 *)hand, 1u, 0u) == 1u)
        return MW_NONE;
#endif
      __nanosleep(64);
    }
#else
    while (*(volatile mw_u32 *)turn || atomicCAS(turn, 0u, 1u) != 0u) {
#ifdef MW_GQ_LEAVE_EMPTY /* a variant: no wait while the queue looks empty */
      if (mw_ld64(&c->st->gq_head) >= mw_ld64(&c->st->gq_tail)) return MW_NONE;
#endif
      __nanosleep(64);
    }
#endif
  }
  mw_u32 f;
  {
    MW_PROBE(MW_PR_GQ_POP); /* the pop itself, found a frame or not */
#if MW_GQ_POP_RUN > 1
    /* the run: this warp and each warp of the CTA waiting now */
    mw_u32 most = 1u;
    for (mw_u32 w = 0; w < MW_CTA_WARPS; ++w)
      most += w != c->cw && *(volatile mw_u32 *)&MW_CTAS(c)[w].gq_hand == 1u;
    most = most < MW_GQ_POP_RUN ? most : MW_GQ_POP_RUN;
    mw_u32 got[MW_GQ_POP_RUN];
    const mw_u32 n = mw_gq_pop_run(c, most, got);
    f = n ? got[0] : MW_NONE;
    for (mw_u32 k = 1, w = 0; k < n; ++k) { /* each to a warp still waiting, else back */
      for (; w < MW_CTA_WARPS; ++w)
        if (w != c->cw && atomicCAS(&MW_CTAS(c)[w].gq_hand, 1u, got[k] + 2u) == 1u) break;
      if (w < MW_CTA_WARPS) ++w;
      else mw_gq_push(c->st, got[k]);
    }
#else
    f = mw_gq_pop(c->st);
#endif
  }
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

#if MW_GQ_POP_RUN > 1
/* mw_gq_pop that claims the run of up to most (<= MW_GQ_POP_RUN) filled cells from the head
 * with one CAS, their frames into f[0..]; returns how many (0: the queue looked empty). Lane 0. */
__device__ mw_u32 mw_gq_pop_run(mw_ctx *c, mw_u32 most, mw_u32 *f) {
  mw_state *st = c->st;
  const mw_u64 mask = st->gq_cap - 1;
  for (;;) {
    const mw_u64 t = mw_ld64(&st->gq_head);
    mw_u64 s[MW_GQ_POP_RUN];
#pragma unroll
    for (mw_u32 k = 0; k < MW_GQ_POP_RUN; ++k) s[k] = k < most ? mw_ld64(&st->gq_seq[(t + k) & mask]) : 0u;
    if (s[0] != t + 1) {
      if (s[0] < t + 1) return 0; /* empty (or the producer of t is still writing) */
      continue;                   /* head moved on */
    }
    mw_u32 n = 1;
#pragma unroll
    for (mw_u32 k = 1; k < MW_GQ_POP_RUN; ++k)
      if (n == k && k < most && s[k] == t + k + 1) n = k + 1;
    if (mw_cas64(&st->gq_head, t, t + n) != t) continue;
    MW_FENCE();
#pragma unroll
    for (mw_u32 k = 0; k < MW_GQ_POP_RUN; ++k)
      if (k < n) f[k] = mw_ld32(&st->gq[(t + k) & mask]);
    MW_FENCE();
#pragma unroll
    for (mw_u32 k = 0; k < MW_GQ_POP_RUN; ++k)
      if (k < n) mw_st64(&st->gq_seq[(t + k) & mask], t + k + st->gq_cap);
    return n;
  }
}
#endif

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
  const mw_u64 i = t & (c->comp_cap - 1);
  if (status != MW_ST_OK) {
    volatile char *m = c->comp_msg + i * MW_MSG_BYTES;
    for (int k = 0; k < MW_MSG_BYTES; ++k) m[k] = msg[k];
    __threadfence_system(); /* the message before the record that says to read it */
  }
  mw_u64 *w = c->comp[i].w;
  const mw_u32 fl = MW_LL_FLAG(t);
  mw_ll_store(w + MW_CO_W_FUT, (mw_u32)fut, (mw_u32)(fut >> 32), fl);
  mw_ll_store(w + MW_CO_W_VALUE, (mw_u32)value, (mw_u32)(value >> 32), fl);
  mw_ll_store(w + MW_CO_W_STATUS, status | rtype << 8, kind, fl);
  mw_ll_store(w + MW_CO_W_CODE, (mw_u32)code, 0u, fl);
}

/* The host's record of host slot s (generation gen): its result into the slot, then the
 * completion record from ticket t (an atomicAdd on comp_tail that the caller issued early, so
 * its latency passes under other work). The slot's own completion, mw_close_slot, follows on
 * this warp and closes it for the host too (protocol.h, completion ring: Closing). Lane 0. */
__device__ __forceinline__ void mw_host_record(mw_ctx *c, mw_u64 t, mw_u32 s, mw_u32 gen, mw_u32 status,
                                               mw_u64 value, mw_u32 rtype, int code, const char *msg,
                                               const char *prefix) {
  mw_slot *sl = &c->slots[s];
  const mw_u32 kind = sl->kind;
  mw_slot_result(sl, status, value, rtype, code, msg, prefix);
  mw_comp_write(c, t, MW_FUT_MAKE(s, gen), status, value, rtype, kind, code, sl->msg);
}

/* Completes slot s (generation gen), whose result is written already: the counters to the rows,
 * CLOSED published, its waiters woken; a host slot's closed word last (protocol.h, completion ring).
 * The protocol for futures another warp or the host may wait on. Lane 0.
 * MW_CLOSE_INLINE, a variant: inlined where it is called (the stall sampler found most of the
 * close's samples at its first instruction, waiting on the call: bench/NOTES.md, v82). */
#ifdef MW_CLOSE_INLINE
#define MW_CLOSE_SLOT_LINKAGE __forceinline__
#else
#define MW_CLOSE_SLOT_LINKAGE __noinline__
#endif
__device__ MW_CLOSE_SLOT_LINKAGE void mw_close_slot(mw_ctx *c, mw_u32 s, mw_u32 gen, mw_u32 status) {
  MW_PROBE(MW_PR_SLOT);
  mw_slot *sl = &c->slots[s];
#ifdef MW_CLOSE_DELAY_NS
  /* a host slot closed this long after its record: the host's side of Closing under test */
  if (s < c->host_slots)
    for (mw_u64 t0 = MW_GLOBALTIMER(); MW_GLOBALTIMER() - t0 < (mw_u64)(MW_CLOSE_DELAY_NS);) __nanosleep(1000);
#endif
  {
    MW_PROBE(MW_PR_CS_FLUSH);
    mw_flush_counts(c); /* the counters of what this warp ran before whoever waits reads them */
  }
  {
    MW_PROBE(MW_PR_CS_FENCE);
    MW_FENCE(); /* the result before CLOSED (pairs with the awaiter's fence after it) */
  }
  mw_u64 old;
  {
    MW_PROBE(MW_PR_CS_XCHG);
    old = mw_xchg64(&sl->ctl, ((mw_u64)gen << 32) | MW_CTL_CLOSED);
  }
  mw_u32 word = (mw_u32)old;
  if ((mw_u32)(old >> 32) == gen && word != MW_CTL_CLOSED && (word & MW_CTL_WAITER)) {
    mw_u64 fut = MW_FUT_MAKE(s, gen);
    MW_FENCE(); /* the nodes' contents (pairs with the registrations' fences) */
    for (mw_u32 n = word & MW_CTL_WAITER; n;) {
      mw_u64 node = mw_ld64(&c->nodes[n - 1]);
      mw_node_free(c, n - 1);
      n = (mw_u32)(node >> 32);
      mw_wake(c, (mw_u32)node, fut, status);
    }
  }
  if (s < c->host_slots) {
    /* closed for the host: the value stored is computed from the exchange's result (its
     * generation is gen, or the one before when nothing had registered since the spawn: 0 for
     * a slot's first, and the host skips 0 when it wraps), so the store cannot issue before
     * the exchange has been performed */
    const mw_u32 og = (mw_u32)(old >> 32);
    mw_st32(&c->closed[s], og == gen || og + 1u == gen || (gen == 1u && og == 0xffffffffu) ? gen : og);
  }
}

/* Publishes the result of slot s (generation gen) and wakes its waiters; a host slot's record
 * goes to the host first. Lane 0. */
__device__ __noinline__ void mw_complete_slot(mw_ctx *c, mw_u32 s, mw_u32 gen, mw_u32 status,
                                              mw_u64 value, mw_u32 rtype, int code,
                                              const char *msg, const char *prefix) {
  if (s < c->host_slots)
    mw_host_record(c, mw_add64(&c->st->comp_tail, 1), s, gen, status, value, rtype, code, msg, prefix);
  else
    mw_slot_result(&c->slots[s], status, value, rtype, code, msg, prefix);
  mw_close_slot(c, s, gen, status);
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
/* 1: a take that looks at two cells (the host is not streaming) runs a copy of the take built for
 * two (one 16-byte load a lane, no unrolled tail: a third of the instructions, fewer registers);
 * 0: one take built for MW_TAKE_MAX serves both (to compare) */
#ifndef MW_TAKE_SPLIT
#define MW_TAKE_SPLIT 1
#endif
#ifndef MW_TAKE_SERIAL_COUNT
#define MW_TAKE_SERIAL_COUNT 0 /* 1: a take counts its spawns one at a time, to compare */
#endif
/* 0: a task this warp's take kept reads its slot's cancel word as it starts only when that take
 * carried out a cancel request (a request that a later take carries out before the task starts
 * is seen at its first spawn, await or tick, as for a running task): one trip to L2 less on a
 * host round trip's path (bench/NOTES.md, v71-v72: -0.3 us). 1: always, to compare. */
#ifndef MW_OWN_CANCEL_READ
#define MW_OWN_CANCEL_READ 0
#endif
/* 1: while the host streams, a take claims a full batch of cells once the last of them is seen
 * whole, and reads them after: four pollers reading 8 KB of lines the host is writing took
 * ~16 us a round, and 81 % of the rounds lost the claim (bench/NOTES.md, v74-v75: the C stream
 * 1.15 -> 2.38 M/s on an H100, the round trip, hop and fib the same; every #gpu spec passed with
 * it, v76-v78). 0: the claim follows the read of every cell. */
#ifndef MW_TAKE_PEEK
#define MW_TAKE_PEEK 1
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

/* Cells 2k and 2k+1 of a take as bits 2k and 2k+1: whole where all 16 lanes of their half of
 * ballot b (each lane's part carried its flags) said so. */
__device__ __forceinline__ mw_u32 mw_ll_whole_pair(mw_u32 b, mw_u32 k) {
  return ((b & 0xffffu) == 0xffffu ? 1u : 0u) << (2u * k) | ((b >> 16) == 0xffffu ? 1u : 0u) << (2u * k + 1u);
}

/* Takes the spawns waiting in the host inbox, up to W in one claim, and makes each a
 * task in a fresh frame (protocol.h, inbox ring: a take); the cancel requests among them are
 * carried out (after the spawns before them are tasks). The first task is returned to run
 * here, the others go to the global run queue for the idle workers. A take reads two cells
 * (a part of 16 bytes per lane), or MW_TAKE_MAX while its last take found more than one (the
 * host streams; 16 parts per lane, all in flight together). While the host streams, a full
 * batch goes to the queue whole and the take goes on, up to batches full batches: the worker
 * hands spawns out rather than run one of each batch itself. Collective. Returns the frame, or
 * MW_NONE if the inbox is empty or no frame is free. W: the cells it may look at (MW_TAKE_MAX,
 * or two: mw_take_inbox picks). */
template <mw_u32 W> __device__ __noinline__ mw_u32 mw_take_inbox_w(mw_ctx *c, mw_u32 batches) {
  enum { L = (W + 1u) / 2u }; /* 16-byte loads of one lane in a take */
  mw_state *st = c->st;
  const mw_u32 cap = c->inbox_cap;
  const mw_u32 part = c->lane & 15u, half = c->lane >> 4; /* load k: cell 2k + half, this part */
  for (int round = 0; round < 16; ++round) {
    mw_u32 w = c->take_w < 2u ? 2u : c->take_w;
    w = w < W ? w : W;
    w = w < cap ? w : cap;
    mw_u64 t;
    uint4 u[L];
    mw_u32 whole = 0; /* cell j is whole: bit j (the same in every lane) */
#if MW_TAKE_PEEK
    /* while the host streams: the last cell of a full take looked at alone (one 8-byte read), and
     * the W cells claimed before they are read, so that a claim lost to another poller costs
     * that read and no more (protocol.h, inbox ring: a streaming take) */
    bool early = false;
    if (W == MW_TAKE_MAX && W > 2u && w == W) {
      mw_u32 won = 0;
      if (c->lane == 0) {
        MW_PROBE(MW_PR_TAKE_PEEK);
        t = mw_ld64(&st->inbox_head);
        const volatile mw_u64 *last = &c->inbox[(t + W - 1u) & (cap - 1)].w[MW_INBOX_WORDS - 1u];
        if ((mw_u32)(*last >> 32) == MW_LL_FLAG(t + W - 1u) && mw_frames_cached(c, W) == W)
          won = mw_cas64(&st->inbox_head, t, t + W) == t ? 1u : 2u;
      }
      won = mw_bcast(won);
      if (won == 2u) { /* another poller's: the frames stay in the cache, past its share given back */
        if (c->lane == 0) mw_frames_trim(c);
        __syncwarp();
        continue;
      }
      early = won == 1u;
      if (early) t = mw_bcast64(c->lane == 0 ? t : 0ull);
    }
    if (!early)
#endif
    {
      MW_PROBE(MW_PR_TAKE_LOAD); /* the head, then the cells t .. t+w-1 */
      t = mw_bcast64(c->lane == 0 ? mw_ld64(&st->inbox_head) : 0ull);
      /* every load in flight before any is looked at */
#pragma unroll
      for (mw_u32 k = 0; k < L; ++k)
        if (2u * k + half < w)
          u[k] = mw_ll_load(&c->inbox[(t + 2u * k + half) & (cap - 1)].w[2u * part]);
#pragma unroll
      for (mw_u32 k = 0; k < L; ++k) {
        if (2u * k >= w) break;
        const mw_u32 fl = MW_LL_FLAG(t + 2u * k + half);
        const mw_u32 b = __ballot_sync(MW_FULL, 2u * k + half < w && u[k].y == fl && u[k].w == fl);
        whole |= mw_ll_whole_pair(b, k);
      }
    }
#if MW_TAKE_PEEK
    if (early) { /* the W cells are ours: read whole (the host wrote them in ticket order, and the
                  * last was seen whole; a part seen stale is read again) */
      MW_PROBE(MW_PR_TAKE_LOAD);
      const mw_u32 all = W >= 32u ? MW_FULL : (1u << W) - 1u;
      for (mw_u32 tries = 0; whole != all; ++tries) {
        if (tries) __nanosleep(64);
#pragma unroll
        for (mw_u32 k = 0; k < L; ++k)
          if (!(whole >> (2u * k + half) & 1u))
            u[k] = mw_ll_load(&c->inbox[(t + 2u * k + half) & (cap - 1)].w[2u * part]);
#pragma unroll
        for (mw_u32 k = 0; k < L; ++k) {
          const mw_u32 fl = MW_LL_FLAG(t + 2u * k + half);
          const mw_u32 b = __ballot_sync(MW_FULL, u[k].y == fl && u[k].w == fl);
          whole |= mw_ll_whole_pair(b, k);
        }
      }
    }
#endif
    mw_u32 n = whole == MW_FULL ? 32u : (mw_u32)__ffs((int)~whole) - 1u; /* whole in a row from t */
    n = n < w ? n : w;
    n = n < W ? n : W;
    c->take_w = n > 1 ? MW_TAKE_MAX : 2u;
    if (n == 0) return MW_NONE;
    MW_PROBE(MW_PR_TAKE); /* a take of n spawns, from here to its end */
    /* a frame for each, from the warp's cache (filled from the free ring in one take), lane j
     * getting the one the j-th mw_frame_alloc would give */
    mw_u32 got;
    {
      MW_PROBE(MW_PR_TAKE_FRAMES);
      got = mw_bcast(c->lane == 0 ? mw_frames_cached(c, n) : 0u);
    }
    if (got == 0) return MW_NONE; /* no free frame: the spawns wait */
    __syncwarp();
    mw_u32 f = c->lane < got ? MW_WS(c)->free_frames[MW_WS(c)->nfree_frames - 1u - c->lane] : MW_NONE;
    __syncwarp();
    if (c->lane == 0) {
      MW_WS(c)->nfree_frames -= got;
      MW_WS(c)->frames_taken += got;
    }
    /* the head words of cell j to lane j: kind and flags in part 12, fut in 13, bulk_n in 14 */
    mw_u64 fut = 0;
    mw_u32 kind = 0, flags = 0, bn = 0;
    const mw_u32 hsrc = 16u * (c->lane & 1u);
#pragma unroll
    for (mw_u32 k = 0; k < L; ++k) {
      if (2u * k >= got) break;
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
    mw_u32 claimed = 0;
#if MW_TAKE_PEEK
    if (early) claimed = 1;
    else
#endif
    {
      MW_PROBE(MW_PR_TAKE_CAS);
      if (c->lane == 0) claimed = mw_cas64(&st->inbox_head, t, t + got) == t;
    }
    if (!mw_bcast(claimed)) { /* another worker took them: the frames go back, in order */
      for (mw_u32 j = got; j-- > 0;) {
        mw_u32 g = __shfl_sync(MW_FULL, f, j);
        if (c->lane == 0) mw_frame_free(c, g);
      }
      __syncwarp();
      continue;
    }
    /* the cells are ours and already read: back to the host (protocol.h, inbox ring: no fence,
     * for every lane's loads of them have returned the values that decided these stores) */
    __syncwarp();
    if (c->lane == 0) {
      MW_PROBE(MW_PR_TAKE_FREE);
#ifdef MW_TAKE_SYS_FENCE
      __threadfence_system(); /* the variant that fences first, to compare (bench/NOTES.md, v67) */
#endif
      for (mw_u32 j = 0; j < got; ++j) mw_st64(&c->inbox_free[(t + j) & (cap - 1)], t + j + cap);
#ifdef MW_TAKE_FREE_FENCE
      /* the variant that pushes a stream's frees out to the host at once, to measure whether
       * their visibility bounds the stream (bench/NOTES.md, v72) */
      if (W == MW_TAKE_MAX) __threadfence_system();
#endif
    }
    /* each part to its cell's frame: the arguments, parts 0..11 */
#pragma unroll
    for (mw_u32 k = 0; k < L; ++k) {
      if (2u * k >= got) break;
      const mw_u32 cj = 2u * k + half, fj = __shfl_sync(MW_FULL, f, cj & 31u);
      if (cj < got && part < MW_INBOX_ARG_BYTES / 8u && part * 8u + 8u <= c->frame_bytes - MW_FRAME_HDR_BYTES) {
        uint2 *dst = (uint2 *)((mw_u8 *)mw_frame(c, fj) + MW_FRAME_HDR_BYTES) + part;
        *dst = make_uint2(u[k].x, u[k].z);
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
        mw_frame_hdr_fresh(fh, kind, fut, MW_FR_HOST | ((flags & MW_IN_BULK) ? MW_FR_BULK : 0) |
                                              ((flags & MW_IN_BLOCK) ? MW_FR_BLOCK : 0), bn);
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
    if (W == MW_TAKE_MAX && got == W && batches > 1) { /* the host streams: hand them all out, go on */
      {
        MW_PROBE(MW_PR_TAKE_PUSH);
        mw_gq_push_lanes(c, f);
      }
      __syncwarp();
      --batches;
      round = 0;
      continue;
    }
    mw_u32 first = (mw_u32)__ffs((int)live) - 1u;
    mw_u32 mine = __shfl_sync(MW_FULL, f, first);
    /* what the kept frame holds, from the registers (mw_root_own reads no frame back) */
    c->own_kind = __shfl_sync(MW_FULL, kind, first);
    c->own_fut = __shfl_sync(MW_FULL, fut, first);
    c->own_flags = MW_FR_HOST | ((__shfl_sync(MW_FULL, flags, first) & MW_IN_BULK) ? MW_FR_BULK : 0u) |
                   ((__shfl_sync(MW_FULL, flags, first) & MW_IN_BLOCK) ? MW_FR_BLOCK : 0u);
    c->own_lane0 = 16u * (first & 1u);
    c->own_cancels = cm != 0u;
#pragma unroll
    for (mw_u32 k = 0; k < L; ++k)
      if (k == first >> 1) {
        c->own_lo = u[k].x;
        c->own_hi = u[k].z;
      }
    mw_gq_push_lanes(c, c->lane == first ? MW_NONE : f);
    __syncwarp();
    return mine;
  }
  return MW_NONE;
}

/* The take for the cells the warp looks at now: two while the host is not streaming. */
__device__ __forceinline__ mw_u32 mw_take_inbox(mw_ctx *c, mw_u32 batches) {
  if (MW_TAKE_SPLIT && c->take_w <= 2u) return mw_take_inbox_w<(MW_TAKE_MAX < 2u ? MW_TAKE_MAX : 2u)>(c, batches);
  return mw_take_inbox_w<MW_TAKE_MAX>(c, batches);
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
#if defined(MW_ELIDE) && MW_ELIDE_ROOTS
  mw_u64 taken = 0, answered = 0;
#endif
  if (c->lane == 0) {
    /* the host's switches, in flight together: a stop makes the chain leave the warp at its
     * awaits (so the executor can stop while a long chain runs); a trace switch is taken up
     * between two runs */
    stop = mw_ld32(&c->st->stop);
    tg = mw_ld32(&c->st->trace_gen) != c->trace_gen;
    hungry = mw_ld32(&c->st->hungry);
#if defined(MW_ELIDE) && MW_ELIDE_ROOTS
    /* the host's spawns in flight: taken from the inbox and not yet completed to the host (a
     * cancel message counts as one taken, so the count errs high until the next takes) */
    taken = mw_ld64(&c->st->inbox_head);
    answered = mw_ld64(&c->st->comp_tail);
#endif
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
#if MW_ELIDE_ROOTS
  {
    const mw_u64 live = taken > answered ? taken - answered : 1ull;
    const mw_u32 roots = live < (mw_u64)c->st->nworkers ? (mw_u32)live : c->st->nworkers;
    c->elide_gen = mw_bcast(MW_ELIDE_GEN_FOR(c->st->nworkers, roots));
  }
#endif
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

#endif /* MW_RUNTIME_CUH */
