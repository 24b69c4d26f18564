/* task_api.cuh - what task code sees of the executor: futures, the context, value(f)'s type, the
 * task API's declarations and the macros task bodies write (spawn, await, value, ...).
 *
 * Compiled before the executor's files (runtime.cuh, device_api.cuh, executor.cuh), which
 * define the functions declared here, and alone before each
 * program's task code when programs are compiled one by one and linked with the executor
 * (nvrtc/generate.c): so everything here is a type, a macro, an inline function or a
 * declaration, and nothing names the executor's shared memory. */
#ifndef MW_TASK_API_CUH
#define MW_TASK_API_CUH

#define MW_FULL 0xffffffffu
/* Elided calls are the default (MW_ELIDE below, level 3); -DMW_NO_ELIDE builds the executor
 * without them, to compare (MOONWARP_DEVICE_DEFINE=MW_NO_ELIDE, bench/NOTES.md). */
#if !defined(MW_ELIDE) && !defined(MW_NO_ELIDE)
#define MW_ELIDE 3u
#endif
/* A task body's function (nvrtc/generate.c): the compiler inlines it where it likes (the
 * dispatch, the bulk loops, the spawn-now calls); -DMW_BODY_NOINLINE, a variant, compiles each
 * body once and calls it (bench/NOTES.md: the one-unit compile ~13 % shorter offline). */
#ifdef MW_BODY_NOINLINE
#define MW_BODY_ATTR __noinline__
#else
#define MW_BODY_ATTR
#endif

#ifdef MW_SIM
#define MW_GLOBALTIMER() __mw_globaltimer()
#define MW_CONVERGE(site, line, key) __mw_sim_converge(MW_FULL, site, line, key)
#define MW_FENCE() __threadfence()
#define MW_FENCE_CTA() __threadfence_block()
#else
__device__ __forceinline__ mw_u64 mw_globaltimer_dev() {
  mw_u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
#define MW_GLOBALTIMER() mw_globaltimer_dev()
#define MW_CONVERGE(site, line, key) 0
/* release or acquire with the volatile/atomic access next to it (protocol.h, vocabulary); where
 * a store must be ordered before a later load of other threads' data, __threadfence() (SC) */
#define MW_FENCE() asm volatile("fence.acq_rel.gpu;" ::: "memory")
#define MW_FENCE_CTA() asm volatile("fence.acq_rel.cta;" ::: "memory")
#endif

/* The generator checks that the host's layout of each argument struct is the compiler's. */
#ifdef MW_SIM
#define MW_CHECK_OFFSET(type, member, off) \
  static_assert(__builtin_offsetof(type, member) == (off), "moonwarp: argument layout of " #type)
#else
#define MW_CHECK_OFFSET(type, member, off) static_assert(true, "")
#endif

/* ---- futures as task code sees them -------------------------------------------------------- */
struct future {
  mw_u64 h;
};

/* A future that could not get a slot: awaiting it fails with MW_FAIL_CAPACITY. */
#define MW_FUT_NOSLOT 0xfffffffffffffffeull
/* The future of a spawn that a cancelled task skipped: reads as cancelled. */
#define MW_FUT_SKIPPED 0xfffffffffffffffdull
/* The result bits an inline handle carries (protocol.h, handles). */
__device__ __forceinline__ mw_u64 mw_inline_bits(mw_u64 h) {
  const mw_u32 w = (mw_u32)(h >> 32);
#ifndef MW_VAL_SWITCH /* the three cases selected, not branched (bench/NOTES.md, v88; -DMW_VAL_SWITCH: as before) */
  const mw_u32 m = (mw_u32)h & 3u;
  const mw_u64 sign = (mw_u64)(long long)(int)w, high = (mw_u64)w << 32;
  return m == MW_INL_SIGN ? sign : m == MW_INL_HIGH ? high : (mw_u64)w;
#else
  switch ((mw_u32)h & 3u) {
  case MW_INL_SIGN: return (mw_u64)(long long)(int)w;
  case MW_INL_HIGH: return (mw_u64)w << 32;
  default: return w;
  }
#endif
}
/* level.bad values that are not futures */
#define MW_BAD_STALE 1ull
#define MW_BAD_NODES 3ull

/* How a run of a body ended (mw_ctx.status). CALL: an await claimed a child that runs inline
 * at the next level; SUSPEND: the level registered as a waiter and left the warp. */
enum { MW_RUN_DONE = 0, MW_RUN_SUSPEND = 1, MW_RUN_FAIL = 2, MW_RUN_CALL = 3 };

/* What the generated kind table says of each kind. */
struct mw_kind_info {
  mw_u32 rtype;       /* enum mw_rtype */
  mw_u32 frame_bytes; /* sizeof its frame struct (parameters and locals) */
  mw_u32 args_bytes;  /* bytes of its argument struct as spawns copy it (multiple of 8) */
  mw_u32 futargs;     /* bit i: the 8 argument bytes at 8 * i are a future */
  mw_u32 flags;       /* MW_KIND_* */
};
/* The body never awaits: it cannot suspend, so an await that claims it runs it as a plain call
 * (mw_run_leaf) rather than as a level of the trampoline. */
#define MW_KIND_LEAF 1u
/* A leaf that calls nothing of the task API that needs a level of its own (no spawn, release or
 * cancel): the await that claims it calls its body with no level set up (mw_run_pure). */
#define MW_KIND_PURE 2u
/* A block task (protocol.h, Block tasks): its body runs on every warp of a worker CTA at once;
 * never inline, never as a call. */
#define MW_KIND_BLOCK 4u
/* The CTA's block area, where a block task's __shared__ variables live: MW_BLOCK_SMEM bytes
 * (protocol.h). */

struct mw_ctx {
  /* settings, copied once at the start: never re-read from writable memory */
  mw_state *st;
  mw_slot *slots;
  mw_u8 *frames;
  mw_u64 *nodes;
  mw_u32 frame_bytes, nslots, host_slots, cache_cap;
  mw_inbox_cell *inbox; /* the host channel's rings (protocol.h) */
  mw_u64 *inbox_free;
  mw_comp_cell *comp;
  char *comp_msg;
  mw_u32 *closed;
  mw_u32 inbox_cap, comp_cap;
  mw_stat_entry *stats; /* this worker's MW_STAT_ENTRIES counter rows */
  /* the worker */
  mw_wstate *ws;  /* its warp's shared state */
  mw_wstate *cta; /* the states of its CTA's warps */
  mw_worker *gw;  /* its row in device memory */
  mw_u32 wid, lane, cw, cn; /* worker, lane, warp in the CTA, warps in the CTA */
  /* ws and cta are read through MW_WS / MW_CTAS: on the GPU those name the __shared__ array,
   * so the compiler emits shared-memory accesses, which it knows do not alias this context */
  mw_u8 *stk;     /* this lane's stack of inline frames */
  /* the running level */
  mw_u32 d;       /* the running level: MW_LV(c) */
  mw_u32 resume;  /* read by every lane before the body runs */
  mw_u32 index;   /* bulk instance index, 0 for plain tasks */
  mw_u32 bulk;    /* 1 while running a bulk instance */
  int status;     /* MW_RUN_* set by the body's exits */
  int fail_code;
  mw_u64 value;   /* result bits */
  const char *fail_msg;
  mw_u64 fail_fut;   /* failed child whose outcome is propagated, 0 if none */
  mw_u32 cancelled;  /* the running level stops at its next spawn or await: it ends cancelled */
  mw_u32 idle;       /* counted in mw_state.hungry */
  mw_u32 calls;      /* spawns and awaits (each lane counts them alike), for the tick */
  mw_u32 kind, off;  /* the running level's kind and frame offset, in every lane */
  mw_u32 lost;       /* sim: the lane stacks were lost with a warp restart */
  mw_u32 nest;       /* a woken task waits in the CTA: the next await runs it first */
  mw_u32 yield;      /* the host asks the executor to stop: awaits suspend rather than run inline */
  mw_u32 trace_due;  /* trace_gen changed: the trampoline takes it up before its next run */
  mw_u32 take_w;     /* inbox cells its next take looks at: 2, or MW_TAKE_MAX while the host
                      * streams spawns (its last take found more than one) */
  /* the frame the last take of the inbox kept to run here (protocol.h, inbox ring: Own frames),
   * as its registers had it: kind, future, frame flags (every lane), and 8 bytes of its
   * arguments in each lane: lane own_lane0 + i holds bytes 8i .. 8i+3 (lo) and 8i+4 .. 8i+7 (hi) */
  mw_u32 own_kind, own_flags, own_lane0;
  mw_u32 own_cancels; /* the take carried out a cancel request (MW_OWN_CANCEL_READ) */
  mw_u64 own_fut;
  mw_u32 own_lo, own_hi;
  mw_u64 ran;        /* the child that the latest spawn-now ran at once, for the await right
                      * after it (mw_spawn_now); 0 when none */
  char msgbuf[64];   /* a message composed at run time (fail_msg may point here) */
  /* tracing, lane 0 only: see protocol.h, task traces */
  mw_u32 trace_gen;
  mw_u32 trace_cap;
  mw_u64 trace_n;
  mw_trace_head *trace_head;
  mw_trace_ev *trace_ev; /* its events; NULL while it records nothing */
  mw_trace_ev trace_run;
#ifdef MW_ELIDE
  mw_u64 sp0;         /* the stack address in the outermost elided call's frame (mw_stack_here) */
  mw_u32 stack_lim;   /* bytes of stack from sp0 past which no call is elided (protocol.h) */
  mw_u32 elide;       /* elided calls nested on this warp now (mw_elide_ok) */
  mw_u32 hungry_seen; /* more than hungry_max workers idle, as the last periodic work saw (1 at the start) */
  mw_u32 hungry_max;  /* MW_ELIDE_HUNGRY_OF(the workers) */
  mw_u32 elide_gen;   /* MW_ELIDE_GEN_OF(the workers): a younger task elides none of its spawns */
#endif
  /* tasks of kind ran_kind that ran at their spawn (mw_count_ran), ran_n of them not yet in the
   * warp's counters (lane 0's: mw_flush_counts adds them first; the other lanes' are not read) */
  mw_u32 ran_kind, ran_n;
};

__device__ void mw_dispatch(mw_ctx *c, mw_u32 kind, mw_u8 *frame);
__device__ void mw_dispatch_leaf(mw_ctx *c, mw_u32 kind, mw_u8 *frame); /* MW_KIND_LEAF kinds only */
__device__ const mw_kind_info *mw_kind(mw_u32 kind);
__device__ const char *mw_kind_name(mw_u32 kind);
#ifdef MW_SIM
__device__ const char *mw_kind_file(mw_u32 kind); /* the file name of its lines (#line) */
#endif

/* The kind table, which the image's link part (nvrtc/generate.c) defines: in an image compiled
 * in one unit (MW_KIND_TABLE_BY_VALUE) the entries themselves, which the compiler reads from
 * constant memory; in one linked from parts a table of pointers to the programs' entries
 * (frame sizes come from the compiler of each program). */
#ifdef MW_KIND_TABLE_BY_VALUE
__device__ const mw_kind_info *mw_kind(mw_u32 kind);
#else
extern __device__ const mw_kind_info *const mw_kind_tab[];
extern __device__ const mw_u32 mw_kind_count;
__device__ __forceinline__ const mw_kind_info *mw_kind(mw_u32 kind) {
  return mw_kind_tab[kind < mw_kind_count ? kind : 0u];
}
#endif

/* ---- the task API (the executor's files define these) ------------------------------------ */
__device__ void mw_fail(mw_ctx *c, int code, const char *msg);
__device__ __noinline__ future mw_spawn_raw(mw_ctx *c, mw_u32 kind, const void *args, mw_u32 bulk_n, bool bulk,
                                            int line);
__device__ __noinline__ future mw_spawn_block(mw_ctx *c, mw_u32 kind, const void *args, mw_u32 n, bool bulk,
                                              int line);
__device__ __noinline__ bool mw_await(mw_ctx *c, const future *fs, mw_u32 n, int line);
__device__ __noinline__ bool mw_await_more(mw_ctx *c);
__device__ __noinline__ bool mw_after_await(mw_ctx *c, bool tolerant);
__device__ __noinline__ void mw_release(mw_ctx *c, future f);
__device__ __noinline__ bool mw_failed_of(mw_ctx *c, future f);
__device__ __noinline__ bool mw_cancelled_of(mw_ctx *c, future f);
__device__ __noinline__ int mw_fail_code_of(mw_ctx *c, future f);
__device__ __noinline__ const char *mw_fail_message_of(mw_ctx *c, future f);
__device__ __noinline__ bool mw_cancel_of(mw_ctx *c, future f, int line);
__device__ void mw_store_bits(mw_ctx *c, mw_u64 bits);

/* ---- reading futures ------------------------------------------------------------------------ */
/* A future's result bits, typed on read by the producer's result type: what value(f) returns.
 * It converts to every arithmetic type (and to bool), and meets every arithmetic type, or
 * another mw_val, on either side of + - * / % & | ^ << >>, of the comparisons and of the
 * compound assignments (x += value(f)): integer results stay 64-bit integers (unsigned when
 * a side is an unsigned 64-bit integer), a float or double side makes the result a double;
 * % and the bit operators take the integer value. Comparisons are exact between signed and
 * unsigned integers (-1 < value(f) holds for an unsigned result). */
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
#ifndef MW_VAL_SWITCH /* the integer cases selected, not a jump table (bench/NOTES.md, v88) */
    if (is_float()) return (long long)as_double();
    const long long i32 = (long long)(int)(mw_u32)bits, u32 = (long long)(mw_u32)bits;
    return rtype == MW_RT_I32 ? i32 : rtype == MW_RT_U32 ? u32 : (long long)bits;
#else
    switch (rtype) {
      case MW_RT_F64: case MW_RT_F32: return (long long)as_double();
      case MW_RT_I32: return (long long)(int)(mw_u32)bits;
      case MW_RT_U32: return (long long)(mw_u32)bits;
      default: return (long long)bits;
    }
#endif
  }
  __device__ bool is_float() const { return rtype == MW_RT_F32 || rtype == MW_RT_F64; }
  __device__ bool is_u64() const {
    return rtype == MW_RT_U64 || rtype == MW_RT_PTR || rtype == MW_RT_FUTURE;
  }
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

/* The arithmetic types an mw_val meets (no <type_traits> under NVRTC). An unscoped enum takes
 * the int overloads below. */
template <class T> struct mw_num { enum { ok = 0, integral = 0 }; };
#define MW_NUM(T, I) template <> struct mw_num<T> { enum { ok = 1, integral = I }; };
MW_NUM(bool, 1) MW_NUM(char, 1) MW_NUM(signed char, 1) MW_NUM(unsigned char, 1)
MW_NUM(short, 1) MW_NUM(unsigned short, 1) MW_NUM(int, 1) MW_NUM(unsigned, 1)
MW_NUM(long, 1) MW_NUM(unsigned long, 1) MW_NUM(long long, 1) MW_NUM(unsigned long long, 1)
MW_NUM(float, 0) MW_NUM(double, 0)
#undef MW_NUM
template <bool B, class R> struct mw_if {};
template <class R> struct mw_if<true, R> { typedef R type; };

__device__ inline mw_val mw_mkval(mw_u64 bits, mw_u32 rtype) {
  mw_val v;
  v.bits = bits;
  v.rtype = rtype;
  return v;
}
__device__ inline mw_val mw_fval(double d) {
  union { mw_u64 u; double d; } x;
  x.d = d;
  return mw_mkval(x.u, MW_RT_F64);
}
/* an arithmetic value as an mw_val: floating as double, unsigned 64-bit as such, the rest as
 * a 64-bit signed integer */
template <class T> __device__ inline mw_val mw_val_from(T x) {
  if (!mw_num<T>::integral) return mw_fval((double)x);
  if (sizeof(T) == 8 && (T)0 < (T)-1) return mw_mkval((mw_u64)x, MW_RT_U64);
  return mw_mkval((mw_u64)(long long)x, MW_RT_I64);
}
/* a <=> b as -1, 0, 1: exact between signed and unsigned integers, by double with a float */
__device__ inline int mw_val_cmp(const mw_val &a, const mw_val &b) {
  if (a.is_float() || b.is_float()) {
    double x = a.as_double(), y = b.as_double();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  long long x = a.as_i64(), y = b.as_i64();
  bool ux = a.is_u64() && x < 0, uy = b.is_u64() && y < 0; /* beyond the signed range */
  if (ux != uy) return ux ? 1 : -1;
  return x < y ? -1 : x > y ? 1 : 0;
}

/* op of a value and an integer of any type, on either side: the integer made a value first */
#define MW_VAL_MIXED_INT(op)                                                                    \
  template <class T>                                                                            \
  __device__ inline typename mw_if<mw_num<T>::integral, mw_val>::type operator op(              \
      const mw_val &a, T b) {                                                                   \
    return a op mw_val_from(b);                                                                 \
  }                                                                                             \
  template <class T>                                                                            \
  __device__ inline typename mw_if<mw_num<T>::integral, mw_val>::type operator op(              \
      T a, const mw_val &b) {                                                                   \
    return mw_val_from(a) op b;                                                                 \
  }                                                                                             \
  __device__ inline mw_val operator op(const mw_val &a, int b) { return a op mw_val_from(b); }  \
  __device__ inline mw_val operator op(int a, const mw_val &b) { return mw_val_from(a) op b; }
/* + - * /: a floating side (float or double) makes a double, else 64-bit integers */
#define MW_VAL_ARITH(op)                                                                        \
  __device__ inline mw_val operator op(const mw_val &a, const mw_val &b) {                      \
    if (a.is_float() || b.is_float()) return mw_fval(a.as_double() op b.as_double());           \
    if (a.is_u64() || b.is_u64())                                                               \
      return mw_mkval((mw_u64)a.as_i64() op (mw_u64)b.as_i64(), MW_RT_U64);                     \
    return mw_mkval((mw_u64)(a.as_i64() op b.as_i64()), MW_RT_I64);                             \
  }                                                                                             \
  MW_VAL_MIXED_INT(op)                                                                          \
  __device__ inline double operator op(const mw_val &a, double b) { return a.as_double() op b; } \
  __device__ inline double operator op(double a, const mw_val &b) { return a op b.as_double(); } \
  __device__ inline double operator op(const mw_val &a, float b) {                              \
    return a.as_double() op (double)b;                                                          \
  }                                                                                             \
  __device__ inline double operator op(float a, const mw_val &b) {                              \
    return (double)a op b.as_double();                                                          \
  }
MW_VAL_ARITH(+)
MW_VAL_ARITH(-)
MW_VAL_ARITH(*)
MW_VAL_ARITH(/)
#undef MW_VAL_ARITH
/* % & | ^ << >>: on the integer values, with integers only (as in C) */
#define MW_VAL_INT(op, usign)                                                                   \
  __device__ inline mw_val operator op(const mw_val &a, const mw_val &b) {                      \
    if (usign) return mw_mkval((mw_u64)a.as_i64() op (mw_u64)b.as_i64(), MW_RT_U64);            \
    return mw_mkval((mw_u64)(a.as_i64() op b.as_i64()), MW_RT_I64);                             \
  }                                                                                             \
  MW_VAL_MIXED_INT(op)
MW_VAL_INT(%, a.is_u64() || b.is_u64())
MW_VAL_INT(&, a.is_u64() || b.is_u64())
MW_VAL_INT(|, a.is_u64() || b.is_u64())
MW_VAL_INT(^, a.is_u64() || b.is_u64())
MW_VAL_INT(<<, a.is_u64())
MW_VAL_INT(>>, a.is_u64())
#undef MW_VAL_INT
#undef MW_VAL_MIXED_INT
#define MW_VAL_CMP(op)                                                                          \
  __device__ inline bool operator op(const mw_val &a, const mw_val &b) {                        \
    return mw_val_cmp(a, b) op 0;                                                               \
  }                                                                                             \
  template <class T>                                                                            \
  __device__ inline typename mw_if<mw_num<T>::ok, bool>::type operator op(const mw_val &a, T b) { \
    return mw_val_cmp(a, mw_val_from(b)) op 0;                                                  \
  }                                                                                             \
  template <class T>                                                                            \
  __device__ inline typename mw_if<mw_num<T>::ok, bool>::type operator op(T a, const mw_val &b) { \
    return mw_val_cmp(mw_val_from(a), b) op 0;                                                  \
  }                                                                                             \
  __device__ inline bool operator op(const mw_val &a, int b) {                                  \
    return mw_val_cmp(a, mw_val_from(b)) op 0;                                                  \
  }                                                                                             \
  __device__ inline bool operator op(int a, const mw_val &b) {                                  \
    return mw_val_cmp(mw_val_from(a), b) op 0;                                                  \
  }
MW_VAL_CMP(<)
MW_VAL_CMP(>)
MW_VAL_CMP(<=)
MW_VAL_CMP(>=)
MW_VAL_CMP(==)
MW_VAL_CMP(!=)
#undef MW_VAL_CMP
__device__ inline mw_val operator+(const mw_val &a) { return a; }
__device__ inline mw_val operator-(const mw_val &a) {
  if (a.is_float()) return mw_fval(-a.as_double());
  return mw_mkval(0ull - (mw_u64)a.as_i64(), a.is_u64() ? MW_RT_U64 : MW_RT_I64);
}
__device__ inline mw_val operator~(const mw_val &a) {
  return mw_mkval(~(mw_u64)a.as_i64(), a.is_u64() ? MW_RT_U64 : MW_RT_I64);
}
__device__ inline bool operator!(const mw_val &a) { return !(bool)a; }
/* x op= value(f) for an arithmetic x: x = (type of x)(x op value(f)) */
#define MW_VAL_ASSIGN(op, which)                                                                \
  template <class T>                                                                            \
  __device__ inline typename mw_if<mw_num<T>::which, T &>::type operator op##=(T &a,             \
                                                                               const mw_val &b) { \
    a = (T)(a op b);                                                                            \
    return a;                                                                                   \
  }
MW_VAL_ASSIGN(+, ok)
MW_VAL_ASSIGN(-, ok)
MW_VAL_ASSIGN(*, ok)
MW_VAL_ASSIGN(/, ok)
MW_VAL_ASSIGN(%, integral)
MW_VAL_ASSIGN(&, integral)
MW_VAL_ASSIGN(|, integral)
MW_VAL_ASSIGN(^, integral)
MW_VAL_ASSIGN(<<, integral)
MW_VAL_ASSIGN(>>, integral)
#undef MW_VAL_ASSIGN
__device__ __noinline__ mw_val mw_value_of(mw_ctx *c, future f, int line);

/* The body's return value as result bits. */
template <class T> __device__ __forceinline__ mw_u64 mw_result_bits(T r) { return (mw_u64)(long long)r; }
__device__ __forceinline__ mw_u64 mw_result_bits(bool r) { return r ? 1u : 0u; }
__device__ __forceinline__ mw_u64 mw_result_bits(float r) {
  union { float f; mw_u32 u; } x;
  x.f = r;
  return x.u;
}
__device__ __forceinline__ mw_u64 mw_result_bits(double r) {
  union { double d; mw_u64 u; } x;
  x.d = r;
  return x.u;
}
__device__ __forceinline__ mw_u64 mw_result_bits(future r) { return r.h; }
__device__ __forceinline__ mw_u64 mw_result_bits(mw_val r) { return r.bits; }
/* ... stored as the running task's result (mw_store_bits). */
template <class T> __device__ inline void mw_store_result(mw_ctx *c, T r) { mw_store_bits(c, mw_result_bits(r)); }

/* ---- spawn-now as a call of the body (the generated mw_spawn_now__T of a pure task) --------
 * The generated spawn-now of a pure task of the same program with no future parameters calls
 * its body right there, as a plain C++ call that the compiler may inline, when mw_direct_ok
 * says the executor's spawn-now would run it at once anyway; the result becomes an inline
 * handle here, and only a failure or a wide result goes to the executor (mw_now_end). */
__device__ __noinline__ future mw_spawn_now(mw_ctx *c, mw_u32 kind, const void *args, int line);
__device__ __noinline__ future mw_now_end(mw_ctx *c, mw_u32 kind, mw_u64 bits);
__device__ __noinline__ void mw_count_miss(mw_ctx *c, mw_u32 e, mw_u32 kind);
/* Counts n tasks of kind as spawned (which 0), completed (1), failed (2) or cancelled (3) in the
 * warp's counters ws. Lane 0. */
__device__ __forceinline__ void mw_count_in(mw_ctx *c, mw_wstate *ws, mw_u32 kind, mw_u32 which, mw_u32 n) {
  const mw_u32 k = kind < MW_MAX_KINDS ? kind : 0u, e = k & (MW_KIND_CACHE - 1u);
  if (ws->cnt_kind[e] != k) mw_count_miss(c, e, k);
  ws->cnt[e][which] += n;
  ws->dirty |= 1u << e;
}
/* Counts a task of kind as spawned and completed at once (a child run at its spawn): in the
 * context while the kind is the last one counted so (a chain or an elided subtree counts one
 * kind again and again), else through mw_count_ran_switch, which adds the runs kept so far to
 * the warp's counters (lane 0; any lane may count, only lane 0's count is read). */
__device__ __noinline__ void mw_count_ran_switch(mw_ctx *c, mw_u32 kind);
__device__ __forceinline__ void mw_count_ran(mw_ctx *c, mw_u32 kind) {
  if (c->ran_kind == kind) ++c->ran_n;
  else mw_count_ran_switch(c, kind);
}
/* The key of a spawn for the sim's convergence check: its kind and argument bytes. */
__device__ __forceinline__ mw_u64 mw_spawn_key(mw_u32 kind, const void *args, mw_u32 args_bytes) {
  mw_u64 key = kind;
#ifdef MW_SIM
  for (mw_u32 i = 0; i < args_bytes; ++i) key = (key ^ ((const mw_u8 *)args)[i]) * 1099511628211ull;
#else
  (void)args;
  (void)args_bytes;
#endif
  return key;
}
/* The inline handle of a result of type rtype with bits v (protocol.h, handles), or 0 when
 * 32 bits cannot carry v. */
__device__ __forceinline__ mw_u64 mw_inline_handle(mw_u64 v, mw_u32 rtype) {
  mw_u32 lo = (mw_u32)v, hi = (mw_u32)(v >> 32), mode;
  if (hi == 0u) mode = MW_INL_ZERO;
  else if (hi == 0xffffffffu && (lo >> 31)) mode = MW_INL_SIGN;
  else if (lo == 0u) mode = MW_INL_HIGH, lo = hi;
  else return 0;
  return (mw_u64)lo << 32 | MW_FUT_INLINE_TAG | rtype << 8 | mode;
}
/* A spawner runs the instances of a bulk task it awaits at once itself (protocol.h, Running a
 * bulk task's instances alone): at most MW_JOIN_ALONE of a kind never timed (0: never, to
 * compare), as many as fit in MW_ALONE_CYCLES of a kind timed, never more than MW_ALONE_MAX. */
#ifndef MW_JOIN_ALONE
#define MW_JOIN_ALONE 4u
#endif
#ifndef MW_ALONE_CYCLES /* a shared stage costs its driver ~35 us whatever its batch (bench/NOTES.md) */
#define MW_ALONE_CYCLES 120000u
#endif
#ifndef MW_ALONE_MAX
#define MW_ALONE_MAX 64u
#endif
#ifndef MW_SIM_LINK /* lane code: the sim's link part has no shim */
/* Kind's instance time, the hint (protocol.h, mw_state.inst_cycles): plain loads and stores. */
__device__ __forceinline__ volatile mw_u32 *mw_hint(const mw_state *st, mw_u32 kind) {
  return (volatile mw_u32 *)&st->inst_cycles[kind & (MW_MAX_KINDS - 1u)];
}
/* Whether a spawner runs the n instances of its bulk task of kind itself (above). */
__device__ __forceinline__ bool mw_alone(const mw_ctx *c, mw_u32 kind, mw_u64 n) {
  if (MW_JOIN_ALONE == 0u) return false;
  if (n <= 1u) return true;
  if (n > MW_ALONE_MAX) return false;
  const mw_u32 t = *mw_hint(c->st, kind);
  return t ? (mw_u64)t * n <= MW_ALONE_CYCLES : n <= MW_JOIN_ALONE;
}
/* The time per instance of count instances of kind that began at clock t0 into the hint
 * (protocol.h, above) if it differs by more than a quarter from *seen (what the caller read
 * there; updated). Lane 0. */
__device__ __forceinline__ void mw_inst_time(const mw_ctx *c, mw_u32 kind, mw_u32 count, long long t0, mw_u32 *seen) {
  const long long dt = clock64() - t0;
  if (!count || dt <= 0) return;
  mw_u64 per = (mw_u64)dt / count;
  per = per ? (per > 0xffffffffull ? 0xffffffffull : per) : 1u;
  const mw_u64 old = *seen;
  if (per * 4u < old * 3u || per * 4u > old * 5u) {
    *mw_hint(c->st, kind) = (mw_u32)per;
    *seen = (mw_u32)per;
  }
}
/* The warp's state (mw_wstate) as the task API's inline functions reach it: in one unit on the
 * GPU the executor's __shared__ array itself, defined here rather than in runtime.cuh (which
 * comes after), so that a direct call's test and progress are shared loads and stores at an
 * address from the thread's index (bench/NOTES.md, v88). A program compiled alone (parts)
 * cannot name the executor's shared memory, and sim keeps the states in host memory: the
 * context's pointer there (a load from local memory, then generic loads and stores through it),
 * and with -DMW_DIRECT_WS_PTR, a variant, everywhere. */
#if !defined(MW_DIRECT_WS_PTR) && defined(MW_KIND_TABLE_BY_VALUE) && !defined(MW_SIM)
__shared__ mw_wstate mw_cta_shared[MW_CTA_WARPS];
#define MW_CTA_SHARED_DEFINED 1
#define MW_TASK_WS(c) (&mw_cta_shared[threadIdx.x >> 5])
#else
#define MW_TASK_WS(c) ((c)->ws)
#endif
/* Whether this is lane 0 of its warp: on the GPU from the thread's index (a register; the
 * executor's CTAs are one-dimensional, c->lane = threadIdx.x & 31), not from the context's lane,
 * a load from local memory that each of the direct call's branches on it waited for: the hop
 * 0.639 -> 0.598 us (five turns each on an H100, fib the same; bench/NOTES.md, v84).
 * MW_HOP_LANE_CTX, a variant: the context's lane, as before. */
#if defined(MW_HOP_LANE_CTX) || defined(MW_SIM)
#define MW_LANE_IS0(c) ((c)->lane == 0u)
#else
#define MW_LANE_IS0(c) ((threadIdx.x & 31u) == 0u)
#endif
/* A direct call writes the warp's progress (mw_wstate.progress, read by thieves of its CTA) at
 * every MW_DIRECT_PROGRESS_EVERY-th call (a power of two; 1: every call). A record's calls are
 * set where progress is written too (mw_tick), so progress is never behind a record's; writing it
 * less often only lets thieves see the owner move on later. A variant (bench/NOTES.md, v84). */
#ifndef MW_DIRECT_PROGRESS_EVERY
#define MW_DIRECT_PROGRESS_EVERY 1u
#endif
/* Whether a spawn-now of kind with argument struct args (and extra: a bulk task's count) may
 * call the body here: what mw_spawn_now asks (no bulk instance, cancellation, stop, woken task to
 * nest, trace, room for a level), no look at the clock due, and a free slot in the warp's cache
 * for a child that fails or returns a wide result. Counts the spawn for the tick when it may (else mw_spawn_now does).
 * On sim, lanes at different spawns, or with different arguments, go to mw_spawn_now, which
 * fails the task saying so. Collective. */
__device__ __forceinline__ bool mw_direct_ok(mw_ctx *c, mw_u32 kind, const void *args, mw_u32 args_bytes,
                                             mw_u64 extra, int line) {
#if defined(MW_NO_DIRECT_CALL) || defined(MW_NO_SPAWN_NOW)
  (void)c, (void)kind, (void)args, (void)args_bytes, (void)extra, (void)line;
  return false;
#else
#ifdef MW_SIM
  if (MW_CONVERGE(mw_kind_file(c->kind), line, mw_spawn_key(kind, args, args_bytes) ^ extra)) return false;
#else
  (void)args, (void)args_bytes, (void)line;
#endif
  /* every field read at once (no chain of branches); lane 0's view decides: a trace is lane 0's */
  const mw_u32 n = c->calls + 1u;
  const mw_wstate *ws = MW_TASK_WS(c);
  const mw_u32 busy = c->bulk | c->cancelled | c->nest | c->yield | c->trace_due | (mw_u32)c->status |
                      (mw_u32)((n & (MW_TICK_CALLS - 1u)) == 0u) | (mw_u32)(c->d + 1u >= MW_LEVELS) |
                      (mw_u32)(c->trace_ev != 0) | (mw_u32)(ws->nfree_slots == 0u) |
                      (mw_u32)(extra != 0u && !mw_alone(c, kind, extra));
  if (__shfl_sync(MW_FULL, busy, 0)) return false;
  c->calls = n;
  if (MW_LANE_IS0(c) && (n & (MW_DIRECT_PROGRESS_EVERY - 1u)) == 0u) MW_TASK_WS(c)->progress = n;
  return true;
#endif
}
/* A direct call's child counted as ran (mw_count_ran), its result in an inline handle: the
 * fields that the branches test loaded before the first (each was a load from local memory that
 * its branch waited for: bench/NOTES.md, v84, v88). -DMW_HOP_LAZY, a variant: loaded at their
 * branches, as before. */
#ifndef MW_HOP_LAZY
#ifdef MW_SIM
#define MW_DIRECT_EAGER_LOADS(c) const mw_u32 rk = (c)->ran_kind, rn = (c)->ran_n
#else /* the empty asm keeps the loads here: the compiler would sink them to their branch */
#define MW_DIRECT_EAGER_LOADS(c)                                                                    \
  const mw_u32 rk = (c)->ran_kind, rn = (c)->ran_n;                                                 \
  asm volatile("" : : "r"(rk), "r"(rn))
#endif
__device__ __forceinline__ void mw_direct_count(mw_ctx *c, mw_u32 kind, mw_u32 rk, mw_u32 rn) {
  if (rk == kind) c->ran_n = rn + 1u; /* mw_count_ran with the loads above */
  else mw_count_ran_switch(c, kind);
}
#define MW_DIRECT_COUNT(c, kind) mw_direct_count(c, kind, rk, rn)
#else
#define MW_DIRECT_EAGER_LOADS(c) ((void)0)
#ifdef MW_HOP_LANE_CTX
#define MW_DIRECT_COUNT(c, kind) ((c)->lane == 0 ? mw_count_ran(c, kind) : (void)0)
#else /* every lane counts alike; lane 0's count is read (as mw_fast_done) */
#define MW_DIRECT_COUNT(c, kind) mw_count_ran(c, kind)
#endif
#endif
/* Whether a direct call's child that ended with status and returned bits of type rtype gets an
 * inline handle (0 if not). */
__device__ __forceinline__ mw_u64 mw_direct_handle(const mw_ctx *c, mw_u32 rtype, mw_u64 bits) {
#ifndef MW_NO_INLINE_RESULT
  if (c->status == MW_RUN_DONE && !MW_CONVERGE("return", 0, bits)) return mw_inline_handle(bits, rtype);
#else
  (void)c, (void)rtype, (void)bits;
#endif
  return 0;
}
/* The future of a child whose body ran here (mw_direct_ok) and returned bits of type rtype: an
 * inline handle when it ended OK with a result that fits; else the executor's slot. Collective. */
__device__ __forceinline__ future mw_direct_done(mw_ctx *c, mw_u32 kind, mw_u32 rtype, mw_u64 bits) {
  future f;
  MW_DIRECT_EAGER_LOADS(c);
  f.h = mw_direct_handle(c, rtype, bits);
  if (!f.h) return mw_now_end(c, kind, bits);
  MW_DIRECT_COUNT(c, kind);
  return f;
}
/* The same into *f, saying which: 1 an inline handle, 2 the executor's slot (the fused pair of
 * generate.c awaits only that). Collective. */
__device__ __forceinline__ int mw_direct_end(mw_ctx *c, mw_u32 kind, mw_u32 rtype, mw_u64 bits, future *f) {
  MW_DIRECT_EAGER_LOADS(c);
  f->h = mw_direct_handle(c, rtype, bits);
  if (!f->h) {
    *f = mw_now_end(c, kind, bits);
    return 2;
  }
  MW_DIRECT_COUNT(c, kind);
  return 1;
}
#ifdef MW_ELIDE
/* Elided calls (the default; MW_NO_ELIDE builds without them; bench/NOTES.md, "Next for fib").
 * A spawn of a self-contained task (nvrtc/generate.c: it spawns only self-contained tasks, and
 * takes, returns and names no future of elsewhere) calls the body at once, as a plain C call in
 * the spawner's level, when no warp is hungry: then every spawn inside that call is elided too,
 * so none of its awaits can find a future pending, and the call returns with its result in the
 * handle as a direct call's does. No record, slot, level or trampoline; no parallelism below it
 * either (no heartbeat, no promotion yet). The calls nest on the thread's stack: inside an
 * elided call, a spawn made with stack_bytes of it already used (protocol.h, MW_STACK_BYTES: the
 * cuda backend sizes the stack for it) fails with a capacity error instead. */
/* This thread's stack address here (a nested call's is further from its caller's, on either
 * side). GPU: one local byte whose address is taken. sim: the frame's address,
 * which is the thread's real stack even where ASan keeps locals in fake frames on the heap
 * (detect_stack_use_after_return). */
__device__ __forceinline__ mw_u64 mw_stack_here() {
#ifdef MW_SIM
  return (mw_u64)(size_t)__builtin_frame_address(0);
#else
  unsigned char here; /* only its address is used */
  asm volatile("" : : "l"(&here));
  return (mw_u64)(size_t)&here;
#endif
}
/* The bytes of stack the elided calls nested now take: the distance from c->sp0, whichever way
 * the stack grows. */
__device__ __forceinline__ mw_u64 mw_stack_used(const mw_ctx *c) {
  const mw_u64 here = mw_stack_here();
  return here < c->sp0 ? c->sp0 - here : here - c->sp0;
}
/* MW_ELIDE=N (N >= 1; a bare -DMW_ELIDE is 1): a real task elides its spawns only at level
 * N - 1 or deeper of its warp's inline chain, so the N - 1 levels above an elided subtree are
 * real tasks whose unclaimed siblings other warps can take: a stolen task is cut into its
 * N-th generation's subtrees, the rest of it being there to steal. */
/* A spawn is elided only while at most MW_ELIDE_HUNGRY_OF(n) of the n workers are idle, as the
 * warp's last periodic work saw them: n / 16 by default (33 of 528; none of sim's 4), so that the
 * start and the tail of a tree, when a few warps wait for work that the real levels above each
 * elided subtree still offer them, elide too (bench/NOTES.md, v49: fib 128 -> 150 M tasks/s on
 * 528 workers with 32). -DMW_ELIDE_HUNGRY=K sets K whatever the workers (0: elide only while
 * none is idle). */
#ifdef MW_ELIDE_HUNGRY
#define MW_ELIDE_HUNGRY_OF(n) ((mw_u32)(MW_ELIDE_HUNGRY))
#else
#define MW_ELIDE_HUNGRY_OF(n) ((mw_u32)(n) >> 4)
#endif
/* A task of a generation under MW_ELIDE_GEN_OF(n) (protocol.h, MW_GEN_SHIFT: the host's spawns
 * are 0, their children 1, ...) elides none of its spawns, hungry workers or not: the first
 * generations of a tree stay real tasks, so that the elided subtrees below them are many and
 * small, about 2^MW_ELIDE_GEN_SLACK of them a worker in a binary tree, not a few whose length
 * bounds the whole run (elided subtrees cannot be split once they run). log2(n) rounded up,
 * plus MW_ELIDE_GEN_SLACK (3 by default); -DMW_ELIDE_GEN=K sets K whatever the workers (0: the
 * generation does not matter). */
#ifndef MW_ELIDE_GEN_SLACK
#define MW_ELIDE_GEN_SLACK 3u
#endif
__device__ __forceinline__ mw_u32 mw_ceil_log2(mw_u32 n) {
  mw_u32 k = 0;
  while (k < 31u && (1u << k) < n) ++k;
  return k;
}
#ifdef MW_ELIDE_GEN
#define MW_ELIDE_GEN_OF(n) ((mw_u32)(MW_ELIDE_GEN))
#define MW_ELIDE_GEN_FOR(n, roots) ((mw_u32)(MW_ELIDE_GEN))
#else
#define MW_ELIDE_GEN_OF(n) (mw_ceil_log2(n) + (mw_u32)(MW_ELIDE_GEN_SLACK))
/* The cut when `roots` trees from the host are in flight together: about 2^slack subtrees a
 * worker over all of them, so the workers over the roots in place of the workers (a single
 * root: MW_ELIDE_GEN_OF; 256 roots on 528 workers: 2 + 3 = 5). The periodic work counts the
 * roots (mw_tick_work); -DMW_ELIDE_ROOTS=0 keeps the cut of one root whatever their number. */
#define MW_ELIDE_GEN_FOR(n, roots) \
  (mw_ceil_log2(((n) + (roots) - 1u) / (roots)) + (mw_u32)(MW_ELIDE_GEN_SLACK))
#endif
#ifndef MW_ELIDE_ROOTS
#define MW_ELIDE_ROOTS 1
#endif
__device__ __noinline__ void mw_elide_tick(mw_ctx *c);
/* Whether a spawn inside an elided call may be called here too (else it is refused: the stack is
 * used up, or the task is to stop). Counted as a spawn: every MW_TICK_CALLS-th one does the
 * periodic work, which sees a cancellation, a stop, the hunger. Lane 0's view, alike in every
 * lane. */
__device__ __forceinline__ bool mw_elide_more(mw_ctx *c) {
  if ((++c->calls & (MW_TICK_CALLS - 1u)) == 0u) mw_elide_tick(c);
  return mw_stack_used(c) < (mw_u64)c->stack_lim && !c->cancelled;
}
/* 0: spawn as usual; 1: call the body here; 2: inside an elided call whose stack cannot take
 * another (or whose task is to stop): the spawn fails (mw_elide_refuse). Collective: every lane
 * decides alike (the lanes' stacks are alike; lane 0's view elsewhere). */
__device__ __forceinline__ int mw_elide_ok(mw_ctx *c, mw_u32 kind, const void *args, mw_u32 args_bytes, int line) {
#ifdef MW_SIM
  if (!c->elide && MW_CONVERGE(mw_kind_file(c->kind), line, mw_spawn_key(kind, args, args_bytes))) return 0;
#else
  (void)kind, (void)args, (void)args_bytes, (void)line;
#endif
  if (c->elide) return mw_elide_more(c) ? 1 : 2;
  const mw_wstate *ws = MW_TASK_WS(c);
  /* as mw_direct_ok: every MW_TICK_CALLS-th spawn goes the executor's way, which ticks */
  const mw_u32 busy = c->hungry_seen | c->bulk | c->cancelled | c->nest | c->yield | c->trace_due |
                      (mw_u32)c->status | (mw_u32)(c->d + 1u >= MW_LEVELS) | (mw_u32)(c->trace_ev != 0) |
                      (mw_u32)(ws->nfree_slots == 0u) | (mw_u32)(((c->calls + 1u) & (MW_TICK_CALLS - 1u)) == 0u) |
                      (mw_u32)(c->d + 1u < (mw_u32)(MW_ELIDE)) |
                      (mw_u32)(MW_GEN_OF(ws->lv[c->d].flags) < c->elide_gen);
  return __shfl_sync(MW_FULL, busy, 0) ? 0 : 1;
}
/* The future of a spawn that an elided call does not make: skipped when the task is to stop (as
 * mw_spawn_raw skips it: it stops at its next await), else failed for want of capacity. */
__device__ __forceinline__ future mw_elide_refuse(mw_ctx *c, mw_u32 kind) {
  future f;
  f.h = MW_FUT_SKIPPED;
  if (c->cancelled) return f;
  c->status = MW_RUN_FAIL;
  c->fail_code = MW_FAIL_CAPACITY;
  c->fail_msg = "spawns nested too deep for the executor's stack (the runtime option stack_bytes)";
  c->fail_fut = 0;
  return mw_now_end(c, kind, 0u);
}
/* The end of an elided call: as a direct call's (mw_direct_done), or, when its task was asked to
 * stop meanwhile (the body returned at an await), counted cancelled and skipped for its
 * spawner, which stops at its own next await. */
__device__ __noinline__ void mw_count_cancelled_call(mw_ctx *c, mw_u32 kind);
__device__ __forceinline__ future mw_elide_done(mw_ctx *c, mw_u32 kind, mw_u32 rtype, mw_u64 bits) {
  if (!c->cancelled) {
    const future f = mw_direct_done(c, kind, rtype, bits);
    /* A failed (or wide) result is a slot, and mw_now_end notes it as a spawn-now's, for an
     * await on the next line: c->ran, and the failure in the level's bad. An elided spawn is
     * awaited later, after other spawns and whole elided subtrees that reuse both, so its await
     * takes the general way, which reads the slot. */
    c->ran = 0;
    return f;
  }
  mw_count_cancelled_call(c, kind);
  future f;
  f.h = MW_FUT_SKIPPED;
  return f;
}
/* The end of an elided call made by a fast body (MW_SPAWN_FAST): the common case here, a
 * result that its handle carries counted in the context; a failure, a wide result or a
 * cancellation through mw_elide_done, out of line. */
__device__ __noinline__ future mw_elide_done_slow(mw_ctx *c, mw_u32 kind, mw_u32 rtype, mw_u64 bits);
__device__ __forceinline__ future mw_fast_done(mw_ctx *c, mw_u32 kind, mw_u32 rtype, mw_u64 bits) {
  future f;
  f.h = 0;
#ifndef MW_NO_INLINE_RESULT
  if (!c->cancelled && c->status == MW_RUN_DONE && !MW_CONVERGE("return", 0, bits)) f.h = mw_inline_handle(bits, rtype);
#endif
  if (!f.h) return mw_elide_done_slow(c, kind, rtype, bits);
  mw_count_ran(c, kind);
  return f;
}
/* Around an elided call: the body starts at its beginning (the spawner's resume point is kept). */
__device__ __forceinline__ mw_u32 mw_elide_enter(mw_ctx *c) {
  const mw_u32 r = c->resume;
  if (c->elide == 0u) c->sp0 = mw_stack_here(); /* in the outermost elided call's spawner (protocol.h) */
  c->resume = 0;
  c->elide++;
  return r;
}
__device__ __forceinline__ void mw_elide_leave(mw_ctx *c, mw_u32 r) {
  c->elide--;
  c->resume = r;
}
#endif

/* ---- a spawn as the body writes it (spawn, _MWsn) ------------------------------------------
 * An elided call is the child's body called from the spawner's body itself, in the text of the
 * spawn: NVVM inlines nothing into a function on a cycle of calls, so a recursive task elides
 * one level as one function calling itself (one frame, one CALL) only when no function stands
 * between the body and its recursive call (bench/NOTES.md, "one frame a level"). So a spawn
 * function (mw_spawn__T, mw_spawn_now__T: nvrtc/generate.c) returns an mw_spawned: the future,
 * or, when mw_elide_ok lets the spawn run here (_mw_elide), the child's frame with its arguments
 * in; the spawn's expression (MW_SPAWN_EXPR) then calls its fast body (below) between
 * mw_elided_begin and mw_elided_end. The body keeps one mw_spawned per task it spawns (_mw_sp_T, declared before
 * its switch): a spawn's expression is over before the next spawn of that task begins (one is
 * evaluated whole before the call it is an argument of; two as operands of one operator,
 * unsequenced, would share it). A task that is never elided (not self-contained, or a build
 * without MW_ELIDE) carries no frame, and its _mw_elide is a constant false.
 *
 * The fast body (MW_ELIDE): a self-contained task has a second body, T::_mw_fast, made by the
 * generator from the same text (nvrtc/generate.c, put_task_fast), that only elided calls run.
 * Inside an elided call every spawn is elided or refused (mw_elide_ok), so no await can find a
 * future pending and the body can never suspend: the fast body has no resume points and keeps
 * nothing in a frame (its parameters and locals are its own variables, its frame a value it may
 * keep in registers), its spawns call the fast bodies themselves (MW_SPAWN_FAST: the arguments,
 * mw_elide_more, the call, mw_fast_done) and its awaits only look at failures (MW_AWAIT_FAST),
 * and the context's elide and resume are left as the outermost elided call set them. The
 * generator switches the words of the task language to these meanings around the fast bodies
 * by redefining the selectors MW_SPAWN_SEL, MW_SPAWN_NOW_SEL and MW_AWAIT_SEL (NVRTC has no
 * push_macro). */
struct mw_no_frame { /* the frame of a task that is never elided: its call is never made */
  __device__ __forceinline__ int _mw_call(mw_ctx *, mw_u32) { return 0; }
};
template <class F, bool Self> struct mw_spawned {
  future _mw_f;
  static constexpr bool _mw_elide = false;
  mw_u32 _mw_r;
  mw_no_frame _mw_fr;
  mw_spawned() = default;
  __device__ __forceinline__ mw_spawned(future f) : _mw_f(f) {}
};
template <class F> struct mw_spawned<F, true> {
  future _mw_f;
  bool _mw_elide;
  mw_u32 _mw_r; /* the spawner's resume point while the child's body runs */
  F _mw_fr;
  mw_spawned() = default;
  __device__ __forceinline__ mw_spawned(future f) : _mw_f(f), _mw_elide(false) {}
};
/* The result of an elided body as bits: "(body, mw_bits_tag())" is the body's result through
 * mw_result_bits, or 0 for a void body (the built-in comma, then the conversion). */
struct mw_bits_tag {
  __device__ __forceinline__ operator mw_u64() const { return 0u; }
};
template <class T> __device__ __forceinline__ mw_u64 operator,(T r, mw_bits_tag) { return mw_result_bits(r); }
template <class F, bool S> __device__ __forceinline__ void mw_elided_begin(mw_ctx *c, mw_spawned<F, S> *s) {
#ifdef MW_ELIDE
  s->_mw_r = mw_elide_enter(c);
#else
  (void)c, (void)s;
#endif
}
template <class F, bool S>
__device__ __forceinline__ future mw_elided_end(mw_ctx *c, mw_u32 kbase, mw_spawned<F, S> *s, mw_u64 bits) {
#ifdef MW_ELIDE
  mw_elide_leave(c, s->_mw_r);
  return mw_elide_done(c, kbase + F::_mw_local, F::_mw_rtype, bits);
#else
  (void)c, (void)kbase, (void)bits;
  return s->_mw_f;
#endif
}
#define MW_SPAWN_EXPR(task, call)                                                                      \
  (_mw_sp_##task = (call), _mw_sp_##task._mw_elide                                                     \
                               ? mw_elided_end(_c, _mw_kbase, &_mw_sp_##task,                          \
                                               (mw_elided_begin(_c, &_mw_sp_##task),                   \
                                                _mw_sp_##task._mw_fr._mw_call(_c, _mw_kbase), mw_bits_tag())) \
                               : _mw_sp_##task._mw_f)
/* A spawn in a fast body: its arguments first, as a spawn function takes them (mw_spawn_fast__T,
 * into the body's _mw_fa_T), then the elided call, or the refusal's future. */
#define MW_SPAWN_FAST(task, ...)                                                                      \
  (_mw_fa_##task = mw_spawn_fast__##task(_c, _mw_kbase, __LINE__, ##__VA_ARGS__),                     \
   mw_elide_more(_c) ? mw_fast_done(_c, _mw_kbase + mw_frame_##task::_mw_local, mw_frame_##task::_mw_rtype, \
                                     (mw_frame_##task::_mw_fast(_c, _mw_kbase, _mw_fa_##task), mw_bits_tag())) \
                     : mw_elide_refuse(_c, _mw_kbase + mw_frame_##task::_mw_local))
/* An await in a fast body: its futures are complete (see above); one that does not carry its
 * result in its handle (a failure, a wide result, a skipped spawn) takes the general way,
 * which cannot suspend here. */
__device__ __noinline__ bool mw_await_elided(mw_ctx *c, const future *fs, mw_u32 n, int line, bool tolerant);
#define MW_AWAIT_FAST(k, tolerant, ...)                                                           \
  do {                                                                                            \
    const future _mw_fs[] = {__VA_ARGS__};                                                        \
    if (!mw_all_inline(_mw_fs, (mw_u32)(sizeof(_mw_fs) / sizeof(future))) &&                      \
        mw_await_elided(_c, _mw_fs, (mw_u32)(sizeof(_mw_fs) / sizeof(future)), (k), (tolerant)))  \
      return _mw_ret_t();                                                                         \
  } while (0)
/* The instances of a bulk task that its spawner runs here, one after the other (the generated
 * mw_spawn_now_bulk__T, as many as mw_alone allows): every instance runs, as on the workers,
 * and the first failure is the task's. */
struct mw_direct_bulk {
  mw_u32 failed;
  int code;
  const char *msg;
};
__device__ __forceinline__ void mw_direct_instance(mw_ctx *c, mw_u32 i) {
  c->bulk = 1;
  c->index = i;
}
__device__ __forceinline__ void mw_direct_instance_end(mw_ctx *c, mw_direct_bulk *r) {
  if (c->status == MW_RUN_DONE) return;
  if (!r->failed) {
    r->failed = 1;
    r->code = c->fail_code;
    r->msg = c->fail_msg;
  }
  c->status = MW_RUN_DONE;
}
__device__ __forceinline__ future mw_direct_bulk_done(mw_ctx *c, mw_u32 kind, const mw_direct_bulk *r, mw_u32 n,
                                                     long long t0) {
  c->bulk = 0;
  c->index = 0;
  if (n > 1u && c->lane == 0) { /* the kind's instances timed (one alone is alone whatever they take) */
    mw_u32 seen = *mw_hint(c->st, kind);
    mw_inst_time(c, kind, n, t0, &seen);
  }
  if (r->failed) {
    c->status = MW_RUN_FAIL;
    c->fail_code = r->code;
    c->fail_msg = r->msg;
    c->fail_fut = 0;
  }
  return mw_direct_done(c, kind, MW_RT_VOID, 0u);
}
#endif

/* value(f) and release(f) of a child that carries its result in its handle (protocol.h,
 * handles) read or drop it here, without a call. */
__device__ __forceinline__ mw_val mw_value(mw_ctx *c, future f, int line) {
  if (MW_FUT_IS_INLINE(f.h)) {
    mw_val v;
    v.bits = mw_inline_bits(f.h);
    v.rtype = MW_FUT_INLINE_RTYPE(f.h);
    return v;
  }
  return mw_value_of(c, f, line);
}
__device__ __noinline__ void mw_release(mw_ctx *c, future f);
__device__ __forceinline__ void mw_release_of(mw_ctx *c, future f) {
  if (!MW_FUT_IS_INLINE(f.h)) mw_release(c, f);
}

/* ---- what task bodies write --------------------------------------------------------------- */
/* _mw_kbase: the kind of the program's first task (a body's parameter): a program's tasks have
 * consecutive kinds, so its compiled code does not depend on them */
/* The words spawn, _MWsn and await in a body go through the selectors MW_SPAWN_SEL,
 * MW_SPAWN_NOW_SEL and MW_AWAIT_SEL, object-like macros that name the macro doing the work: the
 * generator points them at MW_SPAWN_FAST and MW_AWAIT_FAST around the fast bodies (above). */
#define MW_SPAWN_REAL(task, ...) MW_SPAWN_EXPR(task, mw_spawn__##task(_c, _mw_kbase, __LINE__, ##__VA_ARGS__))
#define MW_SPAWN_NOW_REAL(task, ...) MW_SPAWN_EXPR(task, mw_spawn_now__##task(_c, _mw_kbase, __LINE__, ##__VA_ARGS__))
#define MW_SPAWN_SEL MW_SPAWN_REAL
#define MW_SPAWN_NOW_SEL MW_SPAWN_NOW_REAL
#define MW_AWAIT_SEL MW_AWAIT_
#define spawn(task, ...) MW_SPAWN_SEL(task, ##__VA_ARGS__)
/* In a block task: the CTA's block area (its __shared__ variables, which the generator places
 * there), and the barrier of every warp of the CTA (the line: sim names it when the warps
 * disagree). Collective. */
__device__ mw_u8 *mw_block_smem(mw_ctx *c);
__device__ void mw_block_barrier(mw_ctx *c, int line);
#define barrier() mw_block_barrier(_c, __LINE__)
#define spawn_bulk(task, n, ...) mw_spawn_bulk__##task(_c, _mw_kbase, __LINE__, (n), ##__VA_ARGS__)
/* a spawn that the next statement awaits, as the compiler writes it (mw_spawn_now) */
#define _MWsn(task, ...) MW_SPAWN_NOW_SEL(task, ##__VA_ARGS__)
#define _MWsn_bulk(task, n, ...) mw_spawn_now_bulk__##task(_c, _mw_kbase, __LINE__, (n), ##__VA_ARGS__)
#define value(f) mw_value(_c, (f), __LINE__)
#define failed(f) mw_failed_of(_c, (f))
#define cancelled(f) mw_cancelled_of(_c, (f))
#define fail_code(f) mw_fail_code_of(_c, (f))
#define fail_message(f) mw_fail_message_of(_c, (f))
#define cancel(f) mw_cancel_of(_c, (f), __LINE__)
#define release(f) mw_release_of(_c, (f))
#define fail(code, msg) return (mw_fail(_c, (code), (msg)), _mw_ret_t())
/* Whether an await of fs[0..n) is complete at once: futures that all carry their results in
 * their handles (children that ran at their spawns), outside a bulk instance (which cannot
 * await). n is a constant of the await's line: the loop unrolls into n tests of registers. */
__device__ __forceinline__ bool mw_all_inline(const future *fs, mw_u32 n) {
  for (mw_u32 i = 0; i < n; ++i)
    if (!MW_FUT_IS_INLINE(fs[i].h)) return false;
  return true;
}
__device__ __forceinline__ bool mw_await_done(const mw_ctx *c, const future *fs, mw_u32 n) {
  return !c->bulk && mw_all_inline(fs, n);
}
/* A body's variable written back into its frame member before an await that may suspend the
 * task (generate.c, put_task_body: the suspension copies the frame, mw_suspend); a const one (a
 * future parameter) cannot change: nothing. Entered again at the await's resume point, the body
 * has them as they were kept, so mw_await_more needs no keep. */
template <class T> __device__ __forceinline__ void mw_keep(T &member, const T &v) { member = v; }
template <class T> __device__ __forceinline__ void mw_keep(const T &, const T &) {}
/* An await is a resume point k of the body's state machine. The first time through, the
 * futures are noted and looked at; the body returns when a child must run inline first or the
 * task suspends, and comes back in at case k, where the await goes on with what is left (the
 * argument expressions are not evaluated again). An await of one future that carries its result
 * in its handle (a child that ran at its spawn) is complete at once: no call. */
#define MW_AWAIT_(k, tolerant, ...)                                                          \
  do {                                                                                       \
    bool _mw_done;                                                                           \
    {                                                                                        \
      const future _mw_fs[] = {__VA_ARGS__};                                                 \
      _mw_done = mw_await_done(_c, _mw_fs, (mw_u32)(sizeof(_mw_fs) / sizeof(future)));     \
      if (!_mw_done && (_MW_KEEP(), mw_await(_c, _mw_fs, (mw_u32)(sizeof(_mw_fs) / sizeof(future)), (k)))) \
        return _mw_ret_t();                                                                  \
    }                                                                                        \
    if (0) {                                                                                 \
    case (k):                                                                                \
      _mw_done = false;                                                                      \
      if (mw_await_more(_c)) return _mw_ret_t();                                             \
    }                                                                                        \
    if (!_mw_done && mw_after_await(_c, (tolerant))) return _mw_ret_t();                     \
  } while (0)
/* The resume point is the user's line number (NVRTC has no __COUNTER__): one await per line.
 * try_await(f, ...) waits like await but leaves a failed or cancelled future to the task. */
#define await(...) MW_AWAIT_SEL(__LINE__, false, __VA_ARGS__)
#define await_all(...) MW_AWAIT_SEL(__LINE__, false, __VA_ARGS__)
#define try_await(...) MW_AWAIT_SEL(__LINE__, true, __VA_ARGS__)

#endif /* MW_TASK_API_CUH */
