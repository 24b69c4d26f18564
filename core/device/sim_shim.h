/* sim_shim.h - CUDA built-ins for the sim backend: device code run by host threads, a warp as 32 fibers. */
/*
 * The sim translation unit is this file, then protocol.h, the executor's files (runtime.cuh,
 * device_api.cuh, executor.cuh) and the user's code, built
 * as a shared object (g++ -std=c++17 -fPIC -shared -pthread ... -lboost_context) that the library
 * dlopens. It exports:
 *   int  mw_sim_run_warp(void (*kernel)(void *), void *arg, unsigned warp, unsigned nwarps,
 *                        char *err, unsigned errlen);   run one warp on the calling thread
 *   int  mw_sim_warp_size(void);                        32, a sanity symbol for the loader
 *   void mw_sim_set_abort_flag(const volatile int *f);  the calling thread's warps stop their
 *                                                       task code once *f is set (a fault)
 *
 * Execution model. A block is one warp: blockDim.x == 32, threadIdx.x is the lane, blockIdx.x the
 * warp and gridDim.x the number of warps. Each host thread runs one warp at a time; its 32 lanes
 * are fibers (boost::context::fiber, 256 KiB stacks with a guard page) that the thread runs one
 * after the other. A lane runs until it reaches a warp collective (__syncwarp, __shfl*_sync, votes,
 * matches, reductions, __syncthreads, __activemask, __mw_sim_converge) or returns; only then does
 * another lane of the warp run. So lanes of one warp must never spin on each other outside a
 * collective, and __shared__ data is per host thread (thread_local).
 *
 * Collectives. A lane calling a collective with mask M joins the pending barrier of its warp that
 * has the same mask and the same family (sync, shuffle, vote, match, reduce, converge); the barrier
 * completes when every live lane named in M has joined. Lanes that returned from the kernel are
 * not live and are not waited for. The lane that completes a barrier computes every member's
 * result at once, so a fast lane that runs on to the next collective cannot disturb a slow one.
 * If every live lane waits and no barrier can complete (lanes at different collectives), every
 * waiting lane is released; __mw_sim_diverged() then says so (in each lane, until it is read) and
 * __mw_sim_divergence_msg() names two of the lanes and their call sites (of the first divergence
 * not yet read by every lane). __activemask() is a sync point here: it waits until no lane can run
 * and returns the lanes waiting at the same __activemask call (an approximation of convergence).
 *
 * Faults. A SIGSEGV, SIGBUS, SIGFPE, SIGILL or SIGABRT raised while the lanes of a warp run
 * (abort(), __trap(), a stack overflow, an uncaught C++ exception), or a failed assert, abandons
 * the warp: mw_sim_run_warp returns -1 with a message (an assert's names the assertion and its
 * file and line) and the process goes on. The lanes' stacks are reused;
 * objects that lived on them are not destroyed, and a fault inside a libc call holding a lock (in
 * malloc, say) can leave that lock held.
 *
 * Sanitizers. With -fsanitize=address the fiber switches are announced to ASan
 * (__sanitizer_start/finish_switch_fiber), so the default fcontext fibers work and ASan reports
 * bugs in lane code as usual (detect_stack_use_after_return=1 works too). -fsanitize=undefined
 * needs nothing. A fault in a lane is still caught and reported by mw_sim_run_warp.
 *
 * Not provided: dynamic shared memory (extern __shared__), textures, cooperative groups, the
 * non-_sync warp functions, inline PTX.
 */
#ifndef MW_SIM_SHIM_H
#define MW_SIM_SHIM_H

#ifndef MW_SIM
#define MW_SIM 1
#endif

#include <assert.h>
#include <dlfcn.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <new>
#include <type_traits>
#include <utility>

#include <boost/context/fiber.hpp>
#include <boost/context/protected_fixedsize_stack.hpp>

#if defined(__SANITIZE_ADDRESS__)
#define MW_SIM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MW_SIM_ASAN 1
#endif
#endif
#ifdef MW_SIM_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

/* The integer types protocol.h expects from its includer (the builtin types, as on the device). */
typedef unsigned char mw_u8;
typedef unsigned short mw_u16;
typedef unsigned int mw_u32;
typedef unsigned long long mw_u64;
typedef int mw_i32;
typedef long long mw_i64;

#define MW_SIM_API extern "C" __attribute__((visibility("default")))

/* Everything below but the exported entry points is hidden, so two sim objects loaded into one
 * process never bind to each other's copies. */
#pragma GCC visibility push(hidden)

/* ---- qualifiers ---------------------------------------------------------------------------- */
#define __device__
#define __global__
#define __host__
#define __constant__
#define __managed__
#define __grid_constant__
#define __shared__ thread_local /* the host thread is the block */
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
/* __restrict__ is a g++ keyword already. */

static constexpr int warpSize = 32;

/* ---- vector types ---------------------------------------------------------------------------- */
struct alignas(8) int2 { int x, y; };
struct int3 { int x, y, z; };
struct alignas(16) int4 { int x, y, z, w; };
struct alignas(8) uint2 { unsigned x, y; };
struct uint3 { unsigned x, y, z; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(8) float2 { float x, y; };
struct float3 { float x, y, z; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(16) double2 { double x, y; };
struct alignas(16) longlong2 { long long x, y; };
struct alignas(16) ulonglong2 { unsigned long long x, y; };
struct alignas(4) uchar4 { unsigned char x, y, z, w; };
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return uint3{x, y, z}; }
};
inline int2 make_int2(int x, int y) { return int2{x, y}; }
inline int3 make_int3(int x, int y, int z) { return int3{x, y, z}; }
inline int4 make_int4(int x, int y, int z, int w) { return int4{x, y, z, w}; }
inline uint2 make_uint2(unsigned x, unsigned y) { return uint2{x, y}; }
inline uint3 make_uint3(unsigned x, unsigned y, unsigned z) { return uint3{x, y, z}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }
inline float2 make_float2(float x, float y) { return float2{x, y}; }
inline float3 make_float3(float x, float y, float z) { return float3{x, y, z}; }
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
inline double2 make_double2(double x, double y) { return double2{x, y}; }
inline longlong2 make_longlong2(long long x, long long y) { return longlong2{x, y}; }
inline ulonglong2 make_ulonglong2(unsigned long long x, unsigned long long y) { return ulonglong2{x, y}; }
inline uchar4 make_uchar4(unsigned char x, unsigned char y, unsigned char z, unsigned char w) {
  return uchar4{x, y, z, w};
}

/* ---- the warp machine ------------------------------------------------------------------------ */
namespace mw_sim {

namespace bctx = boost::context;

enum : unsigned { LANES = 32u, HOST = 32u /* "from" value meaning the host side */ };
static constexpr size_t kLaneStack = 256u * 1024u;
static constexpr size_t kAltStack = 128u * 1024u;

/* Operations; each belongs to a family (kFamily), and only lanes of one family meet. */
enum Op : unsigned char {
  OP_SYNC, OP_SYNC_COUNT, OP_SYNC_AND, OP_SYNC_OR,
  OP_SHFL_IDX, OP_SHFL_UP, OP_SHFL_DOWN, OP_SHFL_XOR,
  OP_BALLOT, OP_ANY, OP_ALL,
  OP_MATCH_ANY, OP_MATCH_ALL,
  OP_RED_ADD, OP_RED_MIN_U, OP_RED_MAX_U, OP_RED_MIN_I, OP_RED_MAX_I, OP_RED_AND, OP_RED_OR,
  OP_RED_XOR,
  OP_CONVERGE, OP_ACTIVE
};
enum Family : unsigned char { F_SYNC, F_SHFL, F_VOTE, F_MATCH, F_REDUX, F_CONVERGE, F_ACTIVE };
static constexpr unsigned char kFamily[] = {
  F_SYNC, F_SYNC, F_SYNC, F_SYNC, F_SHFL, F_SHFL, F_SHFL, F_SHFL, F_VOTE, F_VOTE, F_VOTE,
  F_MATCH, F_MATCH, F_REDUX, F_REDUX, F_REDUX, F_REDUX, F_REDUX, F_REDUX, F_REDUX, F_REDUX,
  F_CONVERGE, F_ACTIVE};
static_assert(sizeof kFamily == OP_ACTIVE + 1, "one family per op");

struct Lane {
  bctx::fiber fib;            /* the lane's continuation while it is not running */
  unsigned long long val;     /* operand of the pending collective */
  unsigned long long res;     /* its result, written by the lane that completes the barrier */
  unsigned long long key;     /* __mw_sim_converge key */
  const char *file;           /* call site of the pending collective */
  int line;
  unsigned mask;
  int arg, width;             /* shuffle source / delta / lane mask, and width */
  unsigned char op, bar;      /* Op; index of the barrier the lane waits in */
  bool diverged;              /* a collective of this lane was forced open (sticky until read) */
  char *stk_lo;               /* the lane's stack while allocated: lowest address (guard page) */
  size_t stk_size;
#ifdef MW_SIM_ASAN
  void *fake; /* ASan's fake stack of this lane while it is switched out */
#endif
};

struct Bar {
  unsigned mask;    /* mask the members passed */
  unsigned arrived; /* lanes waiting in it */
  unsigned char family;
};

/* Lives on the alternate signal stack of a thread running a warp (at its lowest address), so the
 * fault handler of any sim object in the process finds the thread's run without TLS. */
struct Hub {
  unsigned long long magic;
  volatile int armed; /* 1 while lanes run: a fault jumps to *env */
  volatile int sig, code;
  void *volatile addr;
  sigjmp_buf *env;
};
static constexpr unsigned long long kHubMagic = 0x6d7773696d687562ull ^ 1u; /* "mwsimhub", v1 */

struct Warp {
  Lane lanes[LANES];
  bctx::fiber host;       /* mw_sim_run_warp's continuation while lanes run */
  unsigned cur;           /* running lane */
  unsigned from;          /* who switched to the lane being resumed (a lane or HOST) */
  unsigned live;          /* lanes that have not returned */
  unsigned blocked;       /* live lanes waiting in a barrier */
  unsigned used;          /* barrier entries in use */
  Bar bars[LANES];
  unsigned id, nwarps;
  void (*kernel)(void *);
  void *arg;
  int trap;               /* __trap() was called */
  int restart;            /* divergence ends the warp (mw_sim_run_warp returns -2) */
  char fault[160];        /* message of a fault that was not a signal */
  char msg[256];          /* the divergence message (see resolve_stuck) */
  sigjmp_buf env;         /* mw_sim_run_warp's landing point after a fault */
#ifdef MW_SIM_ASAN
  void *host_fake;
  const void *host_lo;
  size_t host_size;
#endif
};

inline thread_local Warp *tls_warp; /* the warp this thread runs, or null */

[[noreturn]] __attribute__((noinline, cold)) inline void outside_warp(const char *what, const char *file,
                                                                       int line) {
  fprintf(stderr, "moonwarp sim: %s called outside a warp (%s:%d)\n", what, file ? file : "?", line);
  abort();
}

/* ---- lane stacks: guard-paged, cached per thread ---- */
struct StackCache {
  bctx::stack_context s[LANES];
  unsigned n = 0;
  ~StackCache() {
    while (n) bctx::protected_fixedsize_stack(kLaneStack).deallocate(s[--n]);
  }
};
inline thread_local StackCache tls_stacks;

inline void stack_release(bctx::stack_context &sc) noexcept {
#ifdef MW_SIM_ASAN
  /* frames abandoned by a fault stay poisoned otherwise */
  __asan_unpoison_memory_region(static_cast<char *>(sc.sp) - sc.size, sc.size);
#endif
  StackCache &c = tls_stacks;
  if (c.n < LANES)
    c.s[c.n++] = sc;
  else
    bctx::protected_fixedsize_stack(kLaneStack).deallocate(sc);
}

/* The stack allocator of one lane's fiber; it records the stack in the lane for fault cleanup.
 * Each lane's stack top is moved down by a different number of cache lines, so the hot frames of
 * the 32 lanes do not all fall into the same L1 sets. */
struct LaneStack {
  Warp *w;
  unsigned lane;
  size_t stagger() const { return (lane * 9u * 64u) % 4096u; }
  bctx::stack_context allocate() {
    StackCache &c = tls_stacks;
    bctx::stack_context sc = c.n ? c.s[--c.n] : bctx::protected_fixedsize_stack(kLaneStack).allocate();
    w->lanes[lane].stk_lo = static_cast<char *>(sc.sp) - sc.size;
    w->lanes[lane].stk_size = sc.size;
    sc.sp = static_cast<char *>(sc.sp) - stagger();
    sc.size -= stagger();
    return sc;
  }
  void deallocate(bctx::stack_context &sc) noexcept {
    w->lanes[lane].stk_lo = nullptr;
    bctx::stack_context whole = sc;
    whole.sp = static_cast<char *>(sc.sp) + stagger();
    whole.size = sc.size + stagger();
    stack_release(whole);
  }
};

/* ---- switching ---- */
inline void asan_start(Warp *w, void **save, unsigned to) {
#ifdef MW_SIM_ASAN
  if (to == HOST)
    __sanitizer_start_switch_fiber(save, w->host_lo, w->host_size);
  else
    __sanitizer_start_switch_fiber(save, w->lanes[to].stk_lo, w->lanes[to].stk_size);
#else
  (void)w, (void)save, (void)to;
#endif
}

/* Keep the continuation of the side that just switched to us (a suspended lane or the host). */
inline void park(Warp *w, bctx::fiber &&f) {
  if (w->from == HOST)
    w->host = std::move(f);
  else
    w->lanes[w->from].fib = std::move(f);
}

/* Suspend lane `me` and run lane `next`; returns when some lane or the host resumes `me`. */
inline void switch_to(Warp *w, unsigned me, unsigned next) {
  w->from = me;
  w->cur = next;
#ifdef MW_SIM_ASAN
  asan_start(w, &w->lanes[me].fake, next);
#endif
  bctx::fiber f = std::move(w->lanes[next].fib).resume();
#ifdef MW_SIM_ASAN
  __sanitizer_finish_switch_fiber(w->lanes[me].fake, nullptr, nullptr);
#endif
  park(w, std::move(f));
}

/* The next runnable lane after `me`, round robin; `run` is not empty. */
inline unsigned pick(unsigned run, unsigned me) {
  unsigned hi = run & ~((2u << me) - 1u); /* lanes above me (none when me == 31) */
  return (unsigned)__builtin_ctz(hi ? hi : run);
}

/* ---- barriers ---- */
inline bool same_site(const Lane &a, const Lane &b) {
  return a.line == b.line &&
         (a.file == b.file || (a.file && b.file && strcmp(a.file, b.file) == 0));
}

/* Source lane of a shuffle, as PTX shfl.sync computes it from the width (c operand). */
inline unsigned shfl_src(unsigned op, unsigned lane, unsigned b, int width) {
  unsigned seg = (unsigned)(32 - width) & 31u;
  unsigned cval = op == OP_SHFL_UP ? 0u : 31u;
  unsigned maxl = (lane & seg) | (cval & ~seg);
  b &= 31u;
  int j;
  bool ok;
  switch (op) {
  case OP_SHFL_UP: j = (int)lane - (int)b; ok = j >= (int)maxl; break;
  case OP_SHFL_DOWN: j = (int)(lane + b); ok = j <= (int)maxl; break;
  case OP_SHFL_XOR: j = (int)(lane ^ b); ok = j <= (int)maxl; break;
  default: j = (int)((lane & seg) | (b & ~seg)); ok = j <= (int)maxl; break;
  }
  return ok ? (unsigned)j : lane;
}

/* Reduction of the operands of `parts` for a reduce op. */
inline unsigned long long reduce(const Warp *w, unsigned parts, unsigned op) {
  unsigned long long acc = 0;
  bool first = true;
  for (unsigned m = parts; m; m &= m - 1) {
    unsigned v = (unsigned)w->lanes[__builtin_ctz(m)].val;
    if (first) {
      acc = v, first = false;
      continue;
    }
    unsigned a = (unsigned)acc;
    switch (op) {
    case OP_RED_ADD: a += v; break;
    case OP_RED_MIN_U: a = v < a ? v : a; break;
    case OP_RED_MAX_U: a = v > a ? v : a; break;
    case OP_RED_MIN_I: a = (int)v < (int)a ? v : a; break;
    case OP_RED_MAX_I: a = (int)v > (int)a ? v : a; break;
    case OP_RED_AND: a &= v; break;
    case OP_RED_OR: a |= v; break;
    default: a ^= v; break;
    }
    acc = a;
  }
  return acc;
}

/* Release the lanes of barrier `e` and compute each one's result. forced: the barrier is opened
 * without all its lanes (divergence); results are computed from the lanes that are there. */
inline void complete(Warp *w, unsigned e, bool forced) {
  unsigned parts = w->bars[e].arrived;
  w->used &= ~(1u << e);
  w->blocked &= ~parts;
  unsigned ballot = 0;
  bool have_ballot = false;
  int cache_op = -1;
  unsigned long long cache = 0;
  for (unsigned m = parts; m; m &= m - 1) {
    unsigned i = (unsigned)__builtin_ctz(m);
    Lane &L = w->lanes[i];
    if (forced) L.diverged = true;
    switch (L.op) {
    case OP_SHFL_IDX: case OP_SHFL_UP: case OP_SHFL_DOWN: case OP_SHFL_XOR: {
      unsigned j = shfl_src(L.op, i, (unsigned)L.arg, L.width);
      L.res = (parts >> j) & 1u ? w->lanes[j].val : L.val;
      break;
    }
    case OP_BALLOT: case OP_ANY: case OP_ALL:
    case OP_SYNC_COUNT: case OP_SYNC_AND: case OP_SYNC_OR:
      if (!have_ballot) {
        for (unsigned k = parts; k; k &= k - 1)
          if (w->lanes[__builtin_ctz(k)].val) ballot |= k & -k;
        have_ballot = true;
      }
      switch (L.op) {
      case OP_BALLOT: L.res = ballot; break;
      case OP_ANY: case OP_SYNC_OR: L.res = ballot != 0; break;
      case OP_ALL: case OP_SYNC_AND: L.res = ballot == parts; break;
      default: L.res = (unsigned)__builtin_popcount(ballot); break;
      }
      break;
    case OP_MATCH_ANY: {
      unsigned r = 0;
      for (unsigned k = parts; k; k &= k - 1)
        if (w->lanes[__builtin_ctz(k)].val == L.val) r |= k & -k;
      L.res = r;
      break;
    }
    case OP_MATCH_ALL: {
      bool all = true;
      for (unsigned k = parts; k; k &= k - 1) all = all && w->lanes[__builtin_ctz(k)].val == L.val;
      L.res = all ? (1ull << 32) | parts : 0; /* bit 32: the predicate */
      break;
    }
    case OP_CONVERGE:
      if (cache_op != OP_CONVERGE) {
        cache = forced;
        for (unsigned k = parts; k; k &= k - 1) {
          const Lane &o = w->lanes[__builtin_ctz(k)];
          if (o.key != L.key || !same_site(o, L)) cache = 1;
        }
        cache_op = OP_CONVERGE;
      }
      L.res = cache;
      break;
    case OP_SYNC: case OP_ACTIVE: L.res = 0; break;
    default: /* reductions */
      if (cache_op != L.op) cache = reduce(w, parts, L.op), cache_op = L.op;
      L.res = cache;
      break;
    }
  }
}

/* Lane `lane` has returned: complete the barriers that were only waiting for it. */
inline void settle_after_exit(Warp *w) {
  for (unsigned u = w->used; u; u &= u - 1) {
    unsigned e = (unsigned)__builtin_ctz(u);
    const Bar &B = w->bars[e];
    if (B.family != F_ACTIVE && (B.mask & w->live & ~B.arrived) == 0) complete(w, e, false);
  }
}

/* No lane can run. Release the lanes waiting in __activemask, grouped by call site; if there are
 * none the warp has diverged: record who waits where and open every barrier. */
__attribute__((noinline)) inline void resolve_stuck(Warp *w) {
  for (unsigned u = w->used; u; u &= u - 1) {
    unsigned e = (unsigned)__builtin_ctz(u);
    if (w->bars[e].family != F_ACTIVE) continue;
    unsigned left = w->bars[e].arrived;
    w->used &= ~(1u << e);
    w->blocked &= ~left;
    while (left) {
      const Lane &a = w->lanes[__builtin_ctz(left)];
      unsigned group = 0;
      for (unsigned k = left; k; k &= k - 1)
        if (same_site(w->lanes[__builtin_ctz(k)], a)) group |= k & -k;
      for (unsigned k = group; k; k &= k - 1) w->lanes[__builtin_ctz(k)].res = group;
      left &= ~group;
    }
    return;
  }
  /* Describe it, unless an earlier divergence is still unread by some lane (it is the cause).
   * lane A: the lowest waiting lane; lane B: a lane A waits for that waits elsewhere. */
  bool unread = false;
  for (unsigned i = 0; i < LANES; i++) unread = unread || w->lanes[i].diverged;
  unsigned a = (unsigned)__builtin_ctz(w->blocked);
  const Lane &A = w->lanes[a];
  unsigned mine = w->bars[A.bar].arrived;
  unsigned others = A.mask & w->live & ~mine;
  if (!others) others = w->blocked & ~mine;
  const char *fa = A.file ? A.file : "?";
  if (!unread && others) {
    unsigned b = (unsigned)__builtin_ctz(others);
    const Lane &B = w->lanes[b];
    snprintf(w->msg, sizeof w->msg, "lanes of warp %u diverged: lane %u at %s:%d, lane %u at %s:%d", w->id, a, fa,
             A.line, b, B.file ? B.file : "?", B.line);
  } else if (!unread) {
    snprintf(w->msg, sizeof w->msg, "lanes of warp %u diverged: lane %u at %s:%d", w->id, a, fa, A.line);
  }
  if (w->restart) siglongjmp(w->env, 3); /* every lane waits at a collective: leave them */
  for (unsigned u = w->used; u; u &= u - 1) complete(w, (unsigned)__builtin_ctz(u), true);
}

/* Lane `me` joins the barrier of (mask, family) and returns once it has been released. */
inline void arrive(Warp *w, unsigned me, unsigned mask, unsigned family) {
  unsigned bit = 1u << me, e = LANES;
  for (unsigned u = w->used; u; u &= u - 1) {
    unsigned i = (unsigned)__builtin_ctz(u);
    if (w->bars[i].mask == mask && w->bars[i].family == family) {
      e = i;
      break;
    }
  }
  if (e == LANES) { /* a new barrier; at most 31 others are pending */
    e = (unsigned)__builtin_ctz(~w->used);
    w->used |= 1u << e;
    w->bars[e].mask = mask;
    w->bars[e].arrived = 0;
    w->bars[e].family = (unsigned char)family;
  }
  Bar &B = w->bars[e];
  B.arrived |= bit;
  if (family != F_ACTIVE && (mask & w->live & ~B.arrived) == 0) {
    complete(w, e, false); /* the last one in: go on running */
    return;
  }
  w->lanes[me].bar = (unsigned char)e;
  w->blocked |= bit;
  unsigned run = w->live & ~w->blocked;
  if (!run) {
    resolve_stuck(w);
    if (!(w->blocked & bit)) return;
    run = w->live & ~w->blocked;
  }
  switch_to(w, me, pick(run, me));
}

/* Common entry of every collective: deposit this lane's operand, wait, return its result. */
inline unsigned long long collective(unsigned char op, unsigned mask, unsigned long long val, int arg,
                                     int width, const char *file, int line, unsigned long long key = 0) {
  Warp *w = tls_warp;
  if (__builtin_expect(!w, 0)) outside_warp("a warp collective", file, line);
  unsigned me = w->cur;
  Lane &L = w->lanes[me];
  L.op = op;
  L.mask = mask;
  L.val = val;
  L.arg = arg;
  L.width = width;
  L.file = file;
  L.line = line;
  L.key = key;
  arrive(w, me, op == OP_ACTIVE ? 0u : mask, kFamily[op]);
  return L.res;
}

template <class T> inline unsigned long long to_bits(const T &v) {
  static_assert(std::is_trivially_copyable<T>::value && sizeof(T) <= 8,
                "warp collectives exchange trivially copyable values of at most 8 bytes");
  unsigned long long b = 0;
  memcpy(&b, &v, sizeof(T));
  return b;
}
template <class T> inline T from_bits(unsigned long long b) {
  T v;
  memcpy(&v, &b, sizeof(T));
  return v;
}

/* ---- lanes ---- */
[[noreturn]] inline void fault_exit(Warp *w) { siglongjmp(w->env, 2); }

inline bctx::fiber lane_exit(Warp *w, unsigned lane);

inline bctx::fiber lane_main(Warp *w, unsigned lane, bctx::fiber &&caller) {
#ifdef MW_SIM_ASAN
  const void *lo = nullptr;
  size_t size = 0;
  __sanitizer_finish_switch_fiber(nullptr, &lo, &size);
  if (w->from == HOST) w->host_lo = lo, w->host_size = size;
#endif
  park(w, std::move(caller));
  bool thrown = false;
  try {
    w->kernel(w->arg);
  } catch (const bctx::detail::forced_unwind &) {
    throw;
  } catch (const std::exception &e) {
    snprintf(w->fault, sizeof w->fault, "uncaught C++ exception (%s)", e.what());
    thrown = true;
  } catch (...) {
    snprintf(w->fault, sizeof w->fault, "uncaught C++ exception");
    thrown = true;
  }
  if (thrown) fault_exit(w); /* after the handler has ended, so the exception is freed */
  return lane_exit(w, lane);
}

/* Lane `lane` has returned: pass control to the next runnable lane, or to the host. */
inline bctx::fiber lane_exit(Warp *w, unsigned lane) {
  w->live &= ~(1u << lane);
  w->lanes[lane].diverged = false;
  if (w->used) settle_after_exit(w);
  unsigned run = w->live & ~w->blocked;
  if (!run && w->live) {
    resolve_stuck(w);
    run = w->live & ~w->blocked;
  }
  unsigned next = run ? pick(run, lane) : HOST;
  w->from = lane;
  w->cur = next;
  asan_start(w, nullptr, next);
  return next == HOST ? std::move(w->host) : std::move(w->lanes[next].fib);
}

struct LaneEntry {
  Warp *w;
  unsigned lane;
  bctx::fiber operator()(bctx::fiber &&caller) { return lane_main(w, lane, std::move(caller)); }
};

/* ---- faults ---- */
static const int kFaultSigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
inline struct sigaction g_prev[sizeof kFaultSigs / sizeof kFaultSigs[0]];

extern "C" void mw_sim_fault_handler_impl(int sig, siginfo_t *si, void *uc);

/* A signal this object's handler does not take: give it to the handler that was there before. */
inline void chain(int sig, siginfo_t *si, void *uc) {
  for (unsigned i = 0; i < sizeof kFaultSigs / sizeof kFaultSigs[0]; i++) {
    if (kFaultSigs[i] != sig) continue;
    const struct sigaction &p = g_prev[i];
    if ((p.sa_flags & SA_SIGINFO) && p.sa_sigaction) {
      p.sa_sigaction(sig, si, uc);
      return;
    }
    if (p.sa_handler != SIG_DFL && p.sa_handler != SIG_IGN) {
      p.sa_handler(sig);
      return;
    }
    break;
  }
  /* default action: restore it; a fault re-executes and dies, a sent signal is sent again */
  signal(sig, SIG_DFL);
  if (!si || si->si_code <= 0) raise(sig);
}

#ifndef MW_SIM_PART /* the executor's part of an image defines what is not inline (below too) */
/* Not inline: exported below under a fixed name (an alias of this definition). */
extern "C" __attribute__((no_sanitize_address)) void mw_sim_fault_handler_impl(int sig, siginfo_t *si, void *uc) {
  stack_t ss;
  if (sigaltstack(nullptr, &ss) == 0 && !(ss.ss_flags & SS_DISABLE) && ss.ss_sp && ss.ss_size >= sizeof(Hub)) {
    Hub *h = static_cast<Hub *>(ss.ss_sp);
    if (h->magic == kHubMagic && h->armed) {
      h->armed = 0;
      h->sig = sig;
      h->code = si ? si->si_code : 0;
      h->addr = si ? si->si_addr : nullptr;
      siglongjmp(*h->env, 1);
    }
  }
  chain(sig, si, uc);
}
#endif

/* Whether a handler is the fault handler of some sim object (this one or another loaded one). */
inline bool is_sim_handler(void (*fn)(int, siginfo_t *, void *)) {
  if (fn == &mw_sim_fault_handler_impl) return true;
  Dl_info di;
  return fn && dladdr(reinterpret_cast<void *>(fn), &di) && di.dli_sname && di.dli_saddr == (void *)fn &&
         strcmp(di.dli_sname, "mw_sim_fault_handler_v1") == 0;
}

/* Once per object: install the handler for the fault signals unless a sim handler is there
 * already (it serves every sim object's warps). An object that installs its handler keeps itself
 * loaded, so the handler stays valid after dlclose. */
inline bool install_handlers_now() {
  bool installed = false;
  for (unsigned i = 0; i < sizeof kFaultSigs / sizeof kFaultSigs[0]; i++) {
    struct sigaction cur;
    if (sigaction(kFaultSigs[i], nullptr, &cur) != 0) continue;
    if ((cur.sa_flags & SA_SIGINFO) && is_sim_handler(cur.sa_sigaction)) continue;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = &mw_sim_fault_handler_impl;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    if (sigaction(kFaultSigs[i], &sa, &g_prev[i]) == 0) installed = true;
  }
  Dl_info di;
  if (installed && dladdr(reinterpret_cast<void *>(&mw_sim_fault_handler_impl), &di) && di.dli_fname &&
      di.dli_fname[0])
    (void)dlopen(di.dli_fname, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
  return installed;
}
inline void install_handlers() {
  static const bool done = (install_handlers_now(), true);
  (void)done;
}

/* The thread's alternate signal stack with the Hub at its bottom; installed only while a warp
 * runs, the thread's own alternate stack (if any) is put back afterwards. */
struct AltStack {
  void *mem = nullptr;
  ~AltStack() {
    if (mem) {
#ifdef MW_SIM_ASAN
      __asan_unpoison_memory_region(mem, kAltStack);
#endif
      munmap(mem, kAltStack);
    }
  }
};
inline thread_local AltStack tls_alt;

inline Hub *alt_hub() {
  if (!tls_alt.mem) {
    void *p = mmap(nullptr, kAltStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    tls_alt.mem = p;
  }
  Hub *h = static_cast<Hub *>(tls_alt.mem);
  h->magic = kHubMagic;
  h->armed = 0;
  return h;
}

inline const char *sig_name(int sig) {
  switch (sig) {
  case SIGSEGV: return "SIGSEGV";
  case SIGBUS: return "SIGBUS";
  case SIGFPE: return "SIGFPE";
  case SIGILL: return "SIGILL";
  case SIGABRT: return "SIGABRT";
  default: return "signal";
  }
}

inline void fault_message(const Warp *w, const Hub *h, int kind, char *err, unsigned errlen) {
  char where[48];
  if (w->cur < LANES)
    snprintf(where, sizeof where, "in warp %u lane %u", w->id, w->cur);
  else
    snprintf(where, sizeof where, "in warp %u", w->id);
  if (!err || !errlen) return;
  if (kind == 2) {
    snprintf(err, errlen, "fault: %s %s", w->fault, where);
    return;
  }
  if (w->trap && h->sig == SIGILL) {
    snprintf(err, errlen, "fault: __trap() %s", where);
    return;
  }
  unsigned long long addr = (unsigned long long)(uintptr_t)h->addr;
  const char *what = "";
  char detail[96];
  detail[0] = 0;
  switch (h->sig) {
  case SIGSEGV:
  case SIGBUS:
    what = "address";
    for (unsigned i = 0; i < LANES; i++) {
      const char *lo = w->lanes[i].stk_lo;
      if (lo && addr >= (uintptr_t)lo && addr < (uintptr_t)lo + (uintptr_t)sysconf(_SC_PAGESIZE))
        what = "lane stack overflow at";
    }
    snprintf(detail, sizeof detail, " (%s 0x%llx)", what, addr);
    break;
  case SIGFPE:
    what = h->code == FPE_INTDIV ? "integer divide by zero" : h->code == FPE_INTOVF ? "integer overflow"
                                                                                     : "arithmetic fault";
    snprintf(detail, sizeof detail, " (%s at 0x%llx)", what, addr);
    break;
  case SIGILL:
    snprintf(detail, sizeof detail, " (illegal instruction at 0x%llx)", addr);
    break;
  case SIGABRT:
    snprintf(detail, sizeof detail, " (abort or failed assert)");
    break;
  }
  snprintf(err, errlen, "fault: %s%s %s", sig_name(h->sig), detail, where);
}

/* After a fault: forget the lanes' continuations without running them and reuse their stacks. */
inline void abandon(Warp *w) {
  new (&w->host) bctx::fiber();
  for (unsigned i = 0; i < LANES; i++) {
    Lane &L = w->lanes[i];
    new (&L.fib) bctx::fiber(); /* ends the old object's lifetime without its destructor */
    if (L.stk_lo) {
      bctx::stack_context sc;
      sc.size = L.stk_size;
      sc.sp = L.stk_lo + L.stk_size;
      L.stk_lo = nullptr;
      stack_release(sc);
    }
  }
}

/* Runs the lanes; returns 0, or the sigsetjmp value of a fault (1 signal, 2 exception). */
__attribute__((noinline)) inline int run_lanes(Warp *w, Hub *h) {
  int jumped = sigsetjmp(w->env, 1);
  if (jumped) {
    h->armed = 0;
#ifdef MW_SIM_ASAN
    /* we are on the host stack again, whatever ASan last saw */
    __sanitizer_start_switch_fiber(nullptr, w->host_lo, w->host_size);
    __sanitizer_finish_switch_fiber(w->host_fake, nullptr, nullptr);
#endif
    return jumped;
  }
  h->env = &w->env;
  h->armed = 1;
  w->from = HOST;
  w->cur = 0;
#ifdef MW_SIM_ASAN
  asan_start(w, &w->host_fake, 0);
#endif
  bctx::fiber done = std::move(w->lanes[0].fib).resume(); /* back when every lane has returned */
#ifdef MW_SIM_ASAN
  __sanitizer_finish_switch_fiber(w->host_fake, nullptr, nullptr);
#endif
  h->armed = 0;
  return 0;
}

inline int fail(char *err, unsigned errlen, const char *msg) {
  if (err && errlen) snprintf(err, errlen, "%s", msg);
  return -1;
}

} /* namespace mw_sim */

/* ---- block and grid ------------------------------------------------------------------------ */
namespace mw_sim {
inline Warp *cur_warp(const char *what) {
  Warp *w = tls_warp;
  if (__builtin_expect(!w, 0)) outside_warp(what, nullptr, 0);
  return w;
}
inline uint3 thread_idx() { return uint3{cur_warp("threadIdx")->cur, 0, 0}; }
inline uint3 block_idx() { return uint3{cur_warp("blockIdx")->id, 0, 0}; }
inline dim3 grid_dim() { return dim3(cur_warp("gridDim")->nwarps, 1, 1); }
} /* namespace mw_sim */
#define threadIdx (::mw_sim::thread_idx())
#define blockIdx (::mw_sim::block_idx())
#define blockDim (::dim3(32, 1, 1))
#define gridDim (::mw_sim::grid_dim())

/* ---- warp collectives (CUDA signatures, plus the call site for divergence messages) ---------- */
#define MW_SIM_SITE const char *file = __builtin_FILE(), int line = __builtin_LINE()

inline void __syncwarp(unsigned mask = 0xffffffffu, MW_SIM_SITE) {
  mw_sim::collective(mw_sim::OP_SYNC, mask, 0, 0, 32, file, line);
}
/* One warp per block: __syncthreads is a __syncwarp of every live lane. */
inline void __syncthreads(MW_SIM_SITE) { mw_sim::collective(mw_sim::OP_SYNC, 0xffffffffu, 0, 0, 32, file, line); }
inline int __syncthreads_count(int pred, MW_SIM_SITE) {
  return (int)mw_sim::collective(mw_sim::OP_SYNC_COUNT, 0xffffffffu, pred != 0, 0, 32, file, line);
}
inline int __syncthreads_and(int pred, MW_SIM_SITE) {
  return (int)mw_sim::collective(mw_sim::OP_SYNC_AND, 0xffffffffu, pred != 0, 0, 32, file, line);
}
inline int __syncthreads_or(int pred, MW_SIM_SITE) {
  return (int)mw_sim::collective(mw_sim::OP_SYNC_OR, 0xffffffffu, pred != 0, 0, 32, file, line);
}

template <class T> inline T __shfl_sync(unsigned mask, T var, int srcLane, int width = warpSize, MW_SIM_SITE) {
  return mw_sim::from_bits<T>(
      mw_sim::collective(mw_sim::OP_SHFL_IDX, mask, mw_sim::to_bits(var), srcLane, width, file, line));
}
template <class T> inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize, MW_SIM_SITE) {
  return mw_sim::from_bits<T>(
      mw_sim::collective(mw_sim::OP_SHFL_UP, mask, mw_sim::to_bits(var), (int)delta, width, file, line));
}
template <class T>
inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize, MW_SIM_SITE) {
  return mw_sim::from_bits<T>(
      mw_sim::collective(mw_sim::OP_SHFL_DOWN, mask, mw_sim::to_bits(var), (int)delta, width, file, line));
}
template <class T> inline T __shfl_xor_sync(unsigned mask, T var, int laneMask, int width = warpSize, MW_SIM_SITE) {
  return mw_sim::from_bits<T>(
      mw_sim::collective(mw_sim::OP_SHFL_XOR, mask, mw_sim::to_bits(var), laneMask, width, file, line));
}

inline unsigned __ballot_sync(unsigned mask, int pred, MW_SIM_SITE) {
  return (unsigned)mw_sim::collective(mw_sim::OP_BALLOT, mask, pred != 0, 0, 32, file, line);
}
inline int __any_sync(unsigned mask, int pred, MW_SIM_SITE) {
  return (int)mw_sim::collective(mw_sim::OP_ANY, mask, pred != 0, 0, 32, file, line);
}
inline int __all_sync(unsigned mask, int pred, MW_SIM_SITE) {
  return (int)mw_sim::collective(mw_sim::OP_ALL, mask, pred != 0, 0, 32, file, line);
}
/* The lanes that reach this same __activemask call (it waits until no lane can run). */
inline unsigned __activemask(MW_SIM_SITE) {
  return (unsigned)mw_sim::collective(mw_sim::OP_ACTIVE, 0, 0, 0, 32, file, line);
}

template <class T> inline unsigned __match_any_sync(unsigned mask, T value, MW_SIM_SITE) {
  return (unsigned)mw_sim::collective(mw_sim::OP_MATCH_ANY, mask, mw_sim::to_bits(value), 0, 32, file, line);
}
template <class T> inline unsigned __match_all_sync(unsigned mask, T value, int *pred, MW_SIM_SITE) {
  unsigned long long r = mw_sim::collective(mw_sim::OP_MATCH_ALL, mask, mw_sim::to_bits(value), 0, 32, file, line);
  *pred = (int)(r >> 32);
  return (unsigned)r;
}

#define MW_SIM_REDUCE(name, OPU, OPI)                                                            \
  inline unsigned name(unsigned mask, unsigned value, MW_SIM_SITE) {                                \
    return (unsigned)mw_sim::collective(mw_sim::OPU, mask, value, 0, 32, file, line);               \
  }                                                                                                 \
  inline int name(unsigned mask, int value, MW_SIM_SITE) {                                          \
    return (int)(unsigned)mw_sim::collective(mw_sim::OPI, mask, (unsigned)value, 0, 32, file, line); \
  }
MW_SIM_REDUCE(__reduce_add_sync, OP_RED_ADD, OP_RED_ADD)
MW_SIM_REDUCE(__reduce_min_sync, OP_RED_MIN_U, OP_RED_MIN_I)
MW_SIM_REDUCE(__reduce_max_sync, OP_RED_MAX_U, OP_RED_MAX_I)
#undef MW_SIM_REDUCE
inline unsigned __reduce_and_sync(unsigned mask, unsigned value, MW_SIM_SITE) {
  return (unsigned)mw_sim::collective(mw_sim::OP_RED_AND, mask, value, 0, 32, file, line);
}
inline unsigned __reduce_or_sync(unsigned mask, unsigned value, MW_SIM_SITE) {
  return (unsigned)mw_sim::collective(mw_sim::OP_RED_OR, mask, value, 0, 32, file, line);
}
inline unsigned __reduce_xor_sync(unsigned mask, unsigned value, MW_SIM_SITE) {
  return (unsigned)mw_sim::collective(mw_sim::OP_RED_XOR, mask, value, 0, 32, file, line);
}

/* Sim-only convergence check: a barrier over mask; 0 when every lane there passed the same
 * (site, line, key), 1 in every lane otherwise (and when the barrier was forced open). */
inline int __mw_sim_converge(unsigned mask, const char *site, int line, unsigned long long key) {
  return (int)mw_sim::collective(mw_sim::OP_CONVERGE, mask, 0, 0, 32, site, line, key);
}
/* 1 if a collective of this lane was forced open by divergence since the last call, then 0. */
inline int __mw_sim_diverged(void) {
  mw_sim::Warp *w = mw_sim::tls_warp;
  if (!w) return 0;
  mw_sim::Lane &L = w->lanes[w->cur];
  int d = L.diverged;
  L.diverged = false;
  return d;
}
/* "lanes of warp W diverged: lane A at site:line, lane B at site:line" for the first divergence
 * not yet read (through __mw_sim_diverged) by every lane; "" if the warp never diverged. */
inline const char *__mw_sim_divergence_msg(void) {
  mw_sim::Warp *w = mw_sim::tls_warp;
  return w ? w->msg : "";
}
/* From now on, lanes of this warp that diverge across call sites end the warp: mw_sim_run_warp
 * returns -2 with the divergence message, at a moment when every lane waits at a collective. */
inline void __mw_sim_restart_on_divergence(void) {
  if (mw_sim::tls_warp) mw_sim::tls_warp->restart = 1;
}
/* Ends the running warp as a fault whose message is msg: the runtime's answer to lanes that
 * diverged across call sites, after which their state can no longer be trusted. */
[[noreturn]] inline void __mw_sim_fail_warp(const char *msg) {
  mw_sim::Warp *w = mw_sim::tls_warp;
  if (!w) abort();
  snprintf(w->fault, sizeof w->fault, "%s", msg);
  mw_sim::fault_exit(w);
}
#ifndef MW_SIM_PART
/* A failed assert in lane code ends the warp as a fault that names the assertion and its place
 * (the runtime puts the place in the user's terms) rather than printing it here: hidden, so it
 * stands in for libc's within this object only. Outside a warp, libc's words and abort(). */
extern "C" __attribute__((visibility("hidden"), noreturn)) void __assert_fail(
    const char *expr, const char *file, unsigned int line, const char *fn) noexcept {
  mw_sim::Warp *w = mw_sim::tls_warp;
  if (!w) {
    fprintf(stderr, "%s:%u: %s: Assertion `%s' failed.\n", file, line, fn, expr);
    abort();
  }
  snprintf(w->fault, sizeof w->fault, "assertion `%s' failed at %s:%u", expr, file, line);
  mw_sim::fault_exit(w);
}
#endif
#undef MW_SIM_SITE

/* ---- chaos: $MOONWARP_SIM_CHAOS=N pauses a warp at about one in N of its atomics and fences,
 * for 0.1-2 ms, as a host that deschedules a warp's thread mid-protocol would (0 or unset:
 * never). A stress for the protocols: no warp may wait on a peer that stopped between two steps
 * for good, and no runnable task may be left behind one. ----------------------------------- */
namespace mw_sim {
inline unsigned chaos_every() {
  static const unsigned n = [] {
    const char *e = getenv("MOONWARP_SIM_CHAOS");
    return e ? (unsigned)strtoul(e, nullptr, 10) : 0u;
  }();
  return n;
}
inline void chaos() {
  const unsigned n = chaos_every();
  if (__builtin_expect(n == 0u, 1)) return;
  static thread_local unsigned long long s;
  if (!s) s = (unsigned long long)(uintptr_t)&s ^ (unsigned long long)time(nullptr) ^ 0x9e3779b97f4a7c15ull;
  s ^= s << 13, s ^= s >> 7, s ^= s << 17;
  if (s % n) return;
  struct timespec ts = {0, (long)(100000u + (s >> 24) % 1900000u)};
  nanosleep(&ts, nullptr);
}
} /* namespace mw_sim */

/* ---- atomics: real ones across host threads, sequentially consistent ------------------------ */
#define MW_SIM_SC __ATOMIC_SEQ_CST
#define MW_SIM_FETCH(name, builtin, T)                                                  \
  inline T name(T *p, T v) {                                                            \
    mw_sim::chaos();                                                                    \
    return builtin(p, v, MW_SIM_SC);                                                    \
  }
MW_SIM_FETCH(atomicAdd, __atomic_fetch_add, int)
MW_SIM_FETCH(atomicAdd, __atomic_fetch_add, unsigned)
MW_SIM_FETCH(atomicAdd, __atomic_fetch_add, unsigned long long)
MW_SIM_FETCH(atomicSub, __atomic_fetch_sub, int)
MW_SIM_FETCH(atomicSub, __atomic_fetch_sub, unsigned)
MW_SIM_FETCH(atomicExch, __atomic_exchange_n, int)
MW_SIM_FETCH(atomicExch, __atomic_exchange_n, unsigned)
MW_SIM_FETCH(atomicExch, __atomic_exchange_n, unsigned long long)
MW_SIM_FETCH(atomicAnd, __atomic_fetch_and, int)
MW_SIM_FETCH(atomicAnd, __atomic_fetch_and, unsigned)
MW_SIM_FETCH(atomicAnd, __atomic_fetch_and, unsigned long long)
MW_SIM_FETCH(atomicOr, __atomic_fetch_or, int)
MW_SIM_FETCH(atomicOr, __atomic_fetch_or, unsigned)
MW_SIM_FETCH(atomicOr, __atomic_fetch_or, unsigned long long)
MW_SIM_FETCH(atomicXor, __atomic_fetch_xor, int)
MW_SIM_FETCH(atomicXor, __atomic_fetch_xor, unsigned)
MW_SIM_FETCH(atomicXor, __atomic_fetch_xor, unsigned long long)
#undef MW_SIM_FETCH

namespace mw_sim {
/* old = *p; *p = f(old), atomically; returns old. Works on any 4- or 8-byte type. */
template <class T, class F> inline T atomic_update(T *p, F f) {
  T old;
  __atomic_load(p, &old, MW_SIM_SC);
  T nv = f(old);
  while (!__atomic_compare_exchange(p, &old, &nv, false, MW_SIM_SC, MW_SIM_SC)) nv = f(old);
  return old;
}
} /* namespace mw_sim */

inline float atomicAdd(float *p, float v) { return mw_sim::atomic_update(p, [v](float o) { return o + v; }); }
inline double atomicAdd(double *p, double v) { return mw_sim::atomic_update(p, [v](double o) { return o + v; }); }
inline float atomicExch(float *p, float v) {
  float old;
  __atomic_exchange(p, &v, &old, MW_SIM_SC);
  return old;
}

#define MW_SIM_CAS(T)                                                                    \
  inline T atomicCAS(T *p, T compare, T val) {                                           \
    mw_sim::chaos();                                                                     \
    __atomic_compare_exchange_n(p, &compare, val, false, MW_SIM_SC, MW_SIM_SC);          \
    return compare; /* the old value, whether or not it was swapped */                   \
  }
MW_SIM_CAS(int)
MW_SIM_CAS(unsigned)
MW_SIM_CAS(unsigned long long)
MW_SIM_CAS(unsigned short)
#undef MW_SIM_CAS

#define MW_SIM_MINMAX(T)                                                                         \
  inline T atomicMin(T *p, T v) { return mw_sim::atomic_update(p, [v](T o) { return v < o ? v : o; }); } \
  inline T atomicMax(T *p, T v) { return mw_sim::atomic_update(p, [v](T o) { return v > o ? v : o; }); }
MW_SIM_MINMAX(int)
MW_SIM_MINMAX(unsigned)
MW_SIM_MINMAX(long long)
MW_SIM_MINMAX(unsigned long long)
#undef MW_SIM_MINMAX

/* ((old >= val) ? 0 : old + 1) and (((old == 0) || (old > val)) ? val : old - 1), as CUDA. */
inline unsigned atomicInc(unsigned *p, unsigned val) {
  return mw_sim::atomic_update(p, [val](unsigned o) { return o >= val ? 0u : o + 1u; });
}
inline unsigned atomicDec(unsigned *p, unsigned val) {
  return mw_sim::atomic_update(p, [val](unsigned o) { return (o == 0 || o > val) ? val : o - 1u; });
}

/* Scoped variants: every scope is the whole process here. */
#define MW_SIM_SCOPED2(name, T)                                       \
  inline T name##_system(T *p, T v) { return name(p, v); }            \
  inline T name##_block(T *p, T v) { return name(p, v); }
#define MW_SIM_SCOPED_CAS(T)                                                          \
  inline T atomicCAS_system(T *p, T c, T v) { return atomicCAS(p, c, v); }            \
  inline T atomicCAS_block(T *p, T c, T v) { return atomicCAS(p, c, v); }
MW_SIM_SCOPED2(atomicAdd, int)
MW_SIM_SCOPED2(atomicAdd, unsigned)
MW_SIM_SCOPED2(atomicAdd, unsigned long long)
MW_SIM_SCOPED2(atomicAdd, float)
MW_SIM_SCOPED2(atomicAdd, double)
MW_SIM_SCOPED2(atomicExch, int)
MW_SIM_SCOPED2(atomicExch, unsigned)
MW_SIM_SCOPED2(atomicExch, unsigned long long)
MW_SIM_SCOPED2(atomicExch, float)
MW_SIM_SCOPED_CAS(int)
MW_SIM_SCOPED_CAS(unsigned)
MW_SIM_SCOPED_CAS(unsigned long long)
MW_SIM_SCOPED_CAS(unsigned short)
#undef MW_SIM_SCOPED2
#undef MW_SIM_SCOPED_CAS
#undef MW_SIM_SC

/* ---- fences, time, traps ------------------------------------------------------------------- */
inline void __threadfence(void) {
  mw_sim::chaos();
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}
inline void __threadfence_block(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_system(void) {
  mw_sim::chaos();
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

/* ---- task code stopped after a fault -------------------------------------------------------
 * On the GPU a fault ends the whole executor at once. Here the other warps' threads would run
 * their tasks to their end (a task that polls a flag for seconds keeps the runtime's close
 * waiting), so once the runtime's fault flag is set (mw_sim_set_abort_flag, per thread), task
 * code that sleeps is stopped there: the warp ends as after a divergence (mw_sim_run_warp returns
 * -2) and starts over, once per thread; its executor then finds the stop the fault asked for.
 * Only task code is stopped (the executor marks it with __mw_sim_task), never the executor's own
 * loop or its stop barrier. */
namespace mw_sim {
inline thread_local const volatile int *tls_abort_flag; /* nonzero once the runtime faulted */
inline thread_local int tls_in_task;                   /* the warp runs a task body */
inline thread_local int tls_stopped;                   /* this thread's warp was stopped once */
inline void stop_task_if_faulted() {
  Warp *w = tls_warp;
  if (!w || !tls_in_task || tls_stopped || !tls_abort_flag || !*tls_abort_flag) return;
  tls_stopped = 1;
  tls_in_task = 0;
  snprintf(w->msg, sizeof w->msg, "stopped: another warp faulted");
  siglongjmp(w->env, 3);
}
} /* namespace mw_sim */
/* Whether the runtime's fault flag is set (mw_sim_set_abort_flag): executor code that waits for
 * other warps leaves rather than wait for warps that stopped. */
inline int __mw_sim_faulted(void) { return mw_sim::tls_abort_flag && *mw_sim::tls_abort_flag; }
/* Marks whether the warp runs task code from now on; returns what it was. */
inline int __mw_sim_task(int in) {
  int was = mw_sim::tls_in_task;
  mw_sim::tls_in_task = in;
  return was;
}

/* Sleeps the whole warp (its host thread); no lane switch happens here. */
inline void __nanosleep(unsigned ns) {
  mw_sim::stop_task_if_faulted();
  if (ns < 2000) {
    sched_yield();
    return;
  }
  struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
  nanosleep(&ts, nullptr);
}

/* nanoseconds of CLOCK_MONOTONIC (the device's %globaltimer) */
inline unsigned long long __mw_globaltimer(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}
/* a cycle counter: the TSC on x86-64, else nanoseconds */
inline long long clock64(void) {
#if defined(__x86_64__) || defined(__i386__)
  return (long long)__builtin_ia32_rdtsc();
#else
  return (long long)__mw_globaltimer();
#endif
}
/* The device clock(), not the C library's process time; a macro so <time.h>'s stays intact. */
#define clock() ((clock_t)(unsigned)clock64())

[[noreturn]] inline void __trap(void) {
  if (mw_sim::tls_warp) mw_sim::tls_warp->trap = 1;
  raise(SIGILL);
  abort();
}

/* ---- integer and float intrinsics ---------------------------------------------------------- */
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x) {
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
  x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
  return __builtin_bswap32(x);
}
inline unsigned long long __brevll(unsigned long long x) {
  return ((unsigned long long)__brev((unsigned)x) << 32) | __brev((unsigned)(x >> 32));
}
inline int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
inline long long __mul64hi(long long a, long long b) { return (long long)(((__int128)a * b) >> 64); }
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  unsigned long long v = ((unsigned long long)y << 32) | x;
  unsigned r = 0;
  for (int i = 0; i < 4; i++) r |= (unsigned)((v >> (((s >> (4 * i)) & 7u) * 8)) & 0xffu) << (8 * i);
  return r;
}
inline unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned s) {
  return (unsigned)(((((unsigned long long)hi << 32) | lo) << (s & 31)) >> 32);
}
inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned s) {
  return (unsigned)((((unsigned long long)hi << 32) | lo) >> (s & 31));
}
inline unsigned __funnelshift_lc(unsigned lo, unsigned hi, unsigned s) {
  return s >= 32 ? lo : __funnelshift_l(lo, hi, s);
}
inline unsigned __funnelshift_rc(unsigned lo, unsigned hi, unsigned s) {
  return s >= 32 ? hi : __funnelshift_r(lo, hi, s);
}

inline int __float_as_int(float x) { return mw_sim::from_bits<int>(mw_sim::to_bits(x)); }
inline unsigned __float_as_uint(float x) { return mw_sim::from_bits<unsigned>(mw_sim::to_bits(x)); }
inline float __int_as_float(int x) { return mw_sim::from_bits<float>(mw_sim::to_bits(x)); }
inline float __uint_as_float(unsigned x) { return mw_sim::from_bits<float>(mw_sim::to_bits(x)); }
inline long long __double_as_longlong(double x) { return mw_sim::from_bits<long long>(mw_sim::to_bits(x)); }
inline double __longlong_as_double(long long x) { return mw_sim::from_bits<double>(mw_sim::to_bits(x)); }
inline int __double2hiint(double x) { return (int)(__double_as_longlong(x) >> 32); }
inline int __double2loint(double x) { return (int)__double_as_longlong(x); }
inline double __hiloint2double(int hi, int lo) {
  return __longlong_as_double((long long)(((unsigned long long)(unsigned)hi << 32) | (unsigned)lo));
}

inline int __float2int_rn(float x) { return (int)nearbyintf(x); }
inline int __float2int_rz(float x) { return (int)x; }
inline int __float2int_rd(float x) { return (int)floorf(x); }
inline int __float2int_ru(float x) { return (int)ceilf(x); }
inline unsigned __float2uint_rn(float x) { return (unsigned)nearbyintf(x); }
inline float __int2float_rn(int x) { return (float)x; }
inline float __uint2float_rn(unsigned x) { return (float)x; }
inline int __double2int_rn(double x) { return (int)nearbyint(x); }
inline double __int2double_rn(int x) { return (double)x; }

/* Loads through the read-only / cache-hinted paths are plain loads here. */
template <class T> inline T __ldg(const T *p) { return *p; }
template <class T> inline T __ldcg(const T *p) { return *p; }
template <class T> inline T __ldca(const T *p) { return *p; }
template <class T> inline T __ldcs(const T *p) { return *p; }
template <class T> inline T __ldcv(const T *p) { return *(const volatile T *)p; }
template <class T> inline void __stcg(T *p, T v) { *p = v; }
template <class T> inline void __stcs(T *p, T v) { *p = v; }
template <class T> inline void __stwb(T *p, T v) { *p = v; }

/* Fast-math float intrinsics: the precise functions (at least as accurate). sqrtf, expf, fabsf
 * and the float overloads of sqrt, exp, fabs ... come from <math.h>, in the global namespace. */
inline float __fdividef(float a, float b) { return a / b; }
inline float __expf(float x) { return expf(x); }
inline float __exp10f(float x) { return exp10f(x); }
inline float __logf(float x) { return logf(x); }
inline float __log2f(float x) { return log2f(x); }
inline float __log10f(float x) { return log10f(x); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __tanf(float x) { return tanf(x); }
inline void __sincosf(float x, float *s, float *c) { *s = sinf(x), *c = cosf(x); }
inline float __powf(float x, float y) { return powf(x, y); }
inline float __saturatef(float x) { return x > 0.0f ? (x < 1.0f ? x : 1.0f) : 0.0f; /* NaN -> 0 */ }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float __frsqrt_rn(float x) { return 1.0f / sqrtf(x); }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }

/* CUDA's global min/max for any mix of arithmetic types: the usual arithmetic conversions (so
 * min(int, unsigned) is unsigned), fmin/fmax for floating types. std::min/max are untouched. */
template <class A, class B,
          class = typename std::enable_if<std::is_arithmetic<A>::value && std::is_arithmetic<B>::value>::type>
inline typename std::common_type<A, B>::type min(A a, B b) {
  typedef typename std::common_type<A, B>::type C;
  if (std::is_floating_point<C>::value) return std::fmin((C)a, (C)b);
  return (C)b < (C)a ? (C)b : (C)a;
}
template <class A, class B,
          class = typename std::enable_if<std::is_arithmetic<A>::value && std::is_arithmetic<B>::value>::type>
inline typename std::common_type<A, B>::type max(A a, B b) {
  typedef typename std::common_type<A, B>::type C;
  if (std::is_floating_point<C>::value) return std::fmax((C)a, (C)b);
  return (C)a < (C)b ? (C)b : (C)a;
}
inline unsigned umin(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned umax(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long llmin(long long a, long long b) { return a < b ? a : b; }
inline long long llmax(long long a, long long b) { return a > b ? a : b; }
inline unsigned long long ullmin(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline unsigned long long ullmax(unsigned long long a, unsigned long long b) { return a > b ? a : b; }

#pragma GCC visibility pop

#ifndef MW_SIM_PART
/* ---- entry points --------------------------------------------------------------------------- */

/* The fault handler under a fixed exported name, by which other sim objects recognise it. */
extern "C" __attribute__((visibility("default"), alias("mw_sim_fault_handler_impl"))) void
mw_sim_fault_handler_v1(int sig, siginfo_t *si, void *uc);

MW_SIM_API int mw_sim_warp_size(void) { return 32; }

/* The calling thread's warps stop their task code once *flag is nonzero (see above). */
MW_SIM_API void mw_sim_set_abort_flag(const volatile int *flag) { mw_sim::tls_abort_flag = flag; }

/* Runs kernel(arg) on the 32 lanes of warp `warp` (of `nwarps`) on the calling thread and returns
 * when all lanes have returned: 0, or -1 with a message in err after a fault (the lanes are then
 * abandoned). Not reentrant from a lane. */
MW_SIM_API int mw_sim_run_warp(void (*kernel)(void *), void *arg, unsigned warp, unsigned nwarps, char *err,
                               unsigned errlen) {
  using namespace mw_sim;
  if (err && errlen) err[0] = '\0';
  if (tls_warp) return fail(err, errlen, "mw_sim_run_warp: called from a lane");
  tls_in_task = 0; /* a warp starts in the executor, whatever the last run left */
  install_handlers();
  Hub *hub = alt_hub();
  if (!hub) return fail(err, errlen, "mw_sim_run_warp: cannot allocate the signal stack");
  Warp *w = new (std::nothrow) Warp();
  if (!w) return fail(err, errlen, "mw_sim_run_warp: out of memory");
  w->id = warp;
  w->nwarps = nwarps;
  w->kernel = kernel;
  w->arg = arg;
  w->live = 0xffffffffu;
  w->cur = HOST;
  int rc = 0;
  try {
    for (unsigned i = 0; i < LANES; i++)
      w->lanes[i].fib = bctx::fiber(std::allocator_arg, LaneStack{w, i}, LaneEntry{w, i});
  } catch (const std::exception &) {
    rc = fail(err, errlen, "mw_sim_run_warp: cannot allocate lane stacks");
  }
  if (rc == 0) {
    stack_t ss, old;
    ss.ss_sp = hub;
    ss.ss_size = kAltStack;
    ss.ss_flags = 0;
    bool alt = sigaltstack(&ss, &old) == 0;
    sigset_t faults, mask; /* a thread that blocks the fault signals would die of them */
    sigemptyset(&faults);
    for (int sig : kFaultSigs) sigaddset(&faults, sig);
    pthread_sigmask(SIG_UNBLOCK, &faults, &mask);
    tls_warp = w;
    int jumped = run_lanes(w, hub);
    tls_warp = nullptr;
    pthread_sigmask(SIG_SETMASK, &mask, nullptr);
    if (alt) {
      old.ss_flags &= SS_DISABLE;
      sigaltstack(&old, nullptr);
    }
    if (jumped == 3) { /* lanes diverged and the caller asked for the warp back */
      if (err && errlen) snprintf(err, errlen, "%s", w->msg);
      abandon(w);
      rc = -2;
    } else if (jumped) {
      fault_message(w, hub, jumped, err, errlen);
      abandon(w);
      rc = -1;
    }
  }
  delete w; /* unstarted fibers (allocation failure) are unwound here */
  return rc;
}

#endif /* MW_SIM_PART */

#endif /* MW_SIM_SHIM_H */
