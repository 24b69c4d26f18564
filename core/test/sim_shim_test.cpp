// sim_shim_test.cpp - checks the sim backend's CUDA shim (core/device/sim_shim.h) on its own.
//
// Not part of the CMake build:
//   g++ -std=c++17 -O1 -g -Wall -Wextra -pthread core/test/sim_shim_test.cpp -lboost_context -o /tmp/t && /tmp/t
// With sanitizers (the shim announces its fiber switches to ASan, so the default fcontext fibers
// work; no ASAN_OPTIONS needed):
//   g++ -std=c++17 -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -pthread
//       core/test/sim_shim_test.cpp -lboost_context -o /tmp/t-asan && /tmp/t-asan
// Exit status 0 when every check passed.
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <sys/wait.h>

#include "../device/sim_shim.h"

static std::atomic<int> g_failures{0};
static std::atomic<int> g_checks{0};

#define CHECK(c)                                                                              \
  do {                                                                                        \
    g_checks++;                                                                               \
    if (!(c)) {                                                                               \
      g_failures++;                                                                           \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c);                   \
    }                                                                                         \
  } while (0)

#define CHECK_EQ(a, b)                                                                        \
  do {                                                                                        \
    g_checks++;                                                                               \
    auto va_ = (a);                                                                           \
    auto vb_ = (b);                                                                           \
    if (!(va_ == vb_)) {                                                                      \
      g_failures++;                                                                           \
      fprintf(stderr, "%s:%d: check failed: %s == %s (%llu vs %llu)\n", __FILE__, __LINE__, #a, #b, \
              (unsigned long long)va_, (unsigned long long)vb_);                              \
    }                                                                                         \
  } while (0)

static const unsigned FULL = 0xffffffffu;

// Runs kernel on one warp of this thread and expects success.
static void run_ok(void (*k)(void *), void *arg, unsigned warp = 0, unsigned nwarps = 1) {
  char err[256];
  int rc = mw_sim_run_warp(k, arg, warp, nwarps, err, sizeof err);
  if (rc != 0) fprintf(stderr, "run failed: %s\n", err);
  CHECK_EQ(rc, 0);
}

// ---- shuffles ----------------------------------------------------------------------------------
static void k_shfl(void *) {
  unsigned lane = threadIdx.x;
  CHECK(blockDim.x == 32 && threadIdx.y == 0 && blockIdx.x == 0 && gridDim.x == 1);
  // tree reduction with shfl_down: lane 0 ends with the sum
  int v = (int)lane + 1;
  for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(FULL, v, off);
  if (lane == 0) CHECK_EQ(v, 528);
  // butterfly: every lane ends with the sum
  unsigned long long big = (1ull << 40) + lane;
  for (int m = 1; m < 32; m <<= 1) big += __shfl_xor_sync(FULL, big, m);
  CHECK_EQ(big, 32ull * (1ull << 40) + 496ull);
  // broadcast, doubles and floats
  double d = __shfl_sync(FULL, 0.5 * lane, 5);
  CHECK(d == 2.5);
  float f = __shfl_sync(FULL, (float)lane, 31);
  CHECK(f == 31.0f);
  // inclusive scan with shfl_up
  unsigned s = lane + 1;
  for (unsigned off = 1; off < 32; off <<= 1) {
    unsigned t = __shfl_up_sync(FULL, s, off);
    if (lane >= off) s += t;
  }
  CHECK_EQ(s, (lane + 1) * (lane + 2) / 2);
  // widths: segments of 8 read their own segment's lane 0; out-of-range source wraps
  CHECK_EQ(__shfl_sync(FULL, (int)lane, 0, 8), (int)(lane & ~7u));
  CHECK_EQ(__shfl_sync(FULL, (int)lane, 33, 16), (int)((lane & ~15u) | 1u));
  // shfl_down past the segment end keeps the own value
  CHECK_EQ(__shfl_down_sync(FULL, (int)lane, 4, 8), (int)((lane & 7u) + 4 < 8 ? lane + 4 : lane));
  CHECK_EQ(__shfl_up_sync(FULL, (int)lane, 3, 16), (int)((lane & 15u) >= 3 ? lane - 3 : lane));
  // xor within width 16: a later segment keeps the own value, an earlier one can be read
  CHECK_EQ(__shfl_xor_sync(FULL, (int)lane, 16, 16), (int)(lane < 16 ? lane : lane ^ 16u));
  CHECK_EQ(__shfl_xor_sync(FULL, (int)lane, 1, 16), (int)(lane ^ 1u));
  // small types
  unsigned char c = __shfl_sync(FULL, (unsigned char)(200 + lane % 8), 3);
  CHECK_EQ(c, 203);
}

// ---- votes, matches, reductions ---------------------------------------------------------------
static void k_vote(void *) {
  unsigned lane = threadIdx.x;
  CHECK_EQ(__ballot_sync(FULL, lane & 1), 0xaaaaaaaau);
  CHECK_EQ(__ballot_sync(FULL, 1), FULL);
  CHECK_EQ(__any_sync(FULL, lane == 31), 1);
  CHECK_EQ(__any_sync(FULL, 0), 0);
  CHECK_EQ(__all_sync(FULL, lane < 32), 1);
  CHECK_EQ(__all_sync(FULL, lane < 31), 0);
  CHECK_EQ(__syncthreads_count(lane < 10), 10);
  CHECK_EQ(__syncthreads_or(lane == 3), 1);
  CHECK_EQ(__syncthreads_and(lane != 3), 0);
  // match_any: groups of equal values
  unsigned expect = 0;
  for (unsigned j = 0; j < 32; j++)
    if (j % 3 == lane % 3) expect |= 1u << j;
  CHECK_EQ(__match_any_sync(FULL, lane % 3), expect);
  CHECK_EQ(__match_any_sync(FULL, (double)(lane / 16)), lane < 16 ? 0x0000ffffu : 0xffff0000u);
  int pred = -1;
  CHECK_EQ(__match_all_sync(FULL, 42ull, &pred), FULL);
  CHECK_EQ(pred, 1);
  CHECK_EQ(__match_all_sync(FULL, lane == 9 ? 1 : 0, &pred), 0u);
  CHECK_EQ(pred, 0);
  // reductions
  CHECK_EQ(__reduce_add_sync(FULL, lane), 496u);
  CHECK_EQ(__reduce_add_sync(FULL, -(int)lane), -496);
  CHECK_EQ(__reduce_min_sync(FULL, 100u - lane), 69u);
  CHECK_EQ(__reduce_max_sync(FULL, 100u - lane), 100u);
  CHECK_EQ(__reduce_min_sync(FULL, (int)lane - 5), -5);
  CHECK_EQ(__reduce_max_sync(FULL, (int)lane - 40), -9);
  CHECK_EQ(__reduce_or_sync(FULL, 1u << lane), FULL);
  CHECK_EQ(__reduce_and_sync(FULL, lane == 7 ? 0u : 1u), 0u);
  CHECK_EQ(__reduce_xor_sync(FULL, 1u), 0u);
  __syncwarp();
  __syncthreads();
}

// ---- many consecutive shuffles: the exchange must not be overwritten by a fast lane ----------
static void k_buffering(void *) {
  unsigned lane = threadIdx.x;
  for (unsigned it = 0; it < 2000; it++) {
    unsigned v = lane * 100000u + it;
    unsigned src = (lane + it) % 32;
    unsigned r = __shfl_sync(FULL, v, (int)src);
    if (r != src * 100000u + it) CHECK_EQ(r, src * 100000u + it);
    unsigned x = __shfl_xor_sync(FULL, v + 7, (int)(it % 32));
    if (x != (lane ^ (it % 32)) * 100000u + it + 7) CHECK_EQ(x, (lane ^ (it % 32)) * 100000u + it + 7);
    unsigned b = __ballot_sync(FULL, (lane + it) & 1);
    if (b != ((it & 1) ? 0x55555555u : 0xaaaaaaaau)) CHECK_EQ(b, (it & 1) ? 0x55555555u : 0xaaaaaaaau);
  }
}

// ---- lanes that return early are not waited for -----------------------------------------------
static void k_exit(void *) {
  unsigned lane = threadIdx.x;
  if (lane >= 16) return;
  CHECK_EQ(__ballot_sync(FULL, 1), 0x0000ffffu);
  CHECK_EQ(__shfl_sync(FULL, (int)lane * 3, 15), 45);
  __syncthreads();
}

// lane i takes part in i collectives, then returns
static void k_staggered(void *) {
  unsigned lane = threadIdx.x;
  for (unsigned it = 0; it < lane; it++) {
    unsigned b = __ballot_sync(FULL, 1);
    CHECK_EQ(b, FULL << (it + 1));
    int v = __shfl_sync(FULL, (int)lane, 31);
    CHECK_EQ(v, 31);
  }
}

// ---- partial masks ----------------------------------------------------------------------------
static void k_partial(void *) {
  unsigned lane = threadIdx.x;
  if (lane < 8) {
    int r = __shfl_sync(0xffu, (int)lane * 2, 7 - (int)lane);
    CHECK_EQ(r, (7 - (int)lane) * 2);
    CHECK_EQ(__ballot_sync(0xffu, lane & 1), 0xaau);
    for (int i = 0; i < 5; i++) __syncwarp(0xffu);
  } else {
    int r = __shfl_sync(0xffffff00u, (int)lane, 8);
    CHECK_EQ(r, 8);
    if (lane < 16) {
      CHECK_EQ(__reduce_add_sync(0xff00u, 1u), 8u);
    }
  }
  CHECK_EQ(__ballot_sync(FULL, 1), FULL); // everyone meets again
  // __activemask: the lanes that reach the same call
  unsigned m = 0;
  if (lane < 10)
    m = __activemask();
  else if (lane >= 20)
    m = __activemask();
  else
    m = __ballot_sync(0x000ffc00u, 1);
  CHECK_EQ(m, lane < 10 ? 0x3ffu : lane >= 20 ? 0xfff00000u : 0x000ffc00u);
  __syncwarp();
  CHECK_EQ(__activemask(), FULL);
}

// ---- atomics from several host threads ---------------------------------------------------------
struct AtomicArgs {
  int i;
  unsigned u;
  unsigned long long ull;
  float f;
  double d;
  int sub;
  int mx, mn;
  long long llmx;
  unsigned long long ullmn;
  unsigned inc, dec;
  unsigned cas_count;
  unsigned bits_or, bits_and, bits_xor;
  unsigned short cas16;
  unsigned warps_seen;
  unsigned exch;
};

static const int kAtomicIters = 1000;

static void k_atomics(void *p) {
  AtomicArgs *a = (AtomicArgs *)p;
  unsigned lane = threadIdx.x, warp = blockIdx.x;
  CHECK_EQ(gridDim.x, 4u);
  int gid = (int)(warp * 32 + lane);
  for (int it = 0; it < kAtomicIters; it++) {
    atomicAdd(&a->i, 1);
    atomicAdd(&a->u, 2u);
    atomicAdd(&a->ull, 1ull << 33);
    atomicAdd(&a->f, 1.0f);
    atomicAdd_system(&a->d, 0.5);
    atomicSub(&a->sub, 1);
    atomicInc(&a->inc, 999u); // wraps to 0 after 999
    atomicDec(&a->dec, 1000000u);
    unsigned old = a->cas_count, seen;
    while ((seen = atomicCAS(&a->cas_count, old, old + 1)) != old) old = seen;
    unsigned short o16 = a->cas16, s16;
    while ((s16 = atomicCAS_block(&a->cas16, o16, (unsigned short)(o16 + 1))) != o16) o16 = s16;
    if ((it & 63) == 0) __syncwarp(); // lanes interleave with collectives too
  }
  atomicMax(&a->mx, gid * 7 - 300);
  atomicMin(&a->mn, gid * 7 - 300);
  atomicMax(&a->llmx, (long long)gid << 35);
  atomicMin(&a->ullmn, 1000000ull + (unsigned long long)gid);
  atomicOr(&a->bits_or, 1u << lane);
  atomicAnd(&a->bits_and, ~(1u << (gid % 32)));
  atomicXor(&a->bits_xor, 1u << lane);
  atomicOr(&a->warps_seen, 1u << warp);
  atomicExch(&a->exch, 77u);
}

static void test_atomics() {
  AtomicArgs a;
  memset(&a, 0, sizeof a);
  a.dec = 0;
  a.mn = INT_MAX;
  a.mx = INT_MIN;
  a.ullmn = ~0ull;
  a.llmx = -1;
  a.bits_and = FULL;
  std::vector<std::thread> ts;
  std::atomic<int> bad{0};
  for (unsigned t = 0; t < 4; t++)
    ts.emplace_back([&a, &bad, t] {
      char err[256];
      if (mw_sim_run_warp(k_atomics, &a, t, 4, err, sizeof err) != 0) {
        fprintf(stderr, "atomic warp %u: %s\n", t, err);
        bad++;
      }
    });
  for (auto &t : ts) t.join();
  const unsigned n = 4 * 32 * kAtomicIters;
  CHECK_EQ(bad.load(), 0);
  CHECK_EQ(a.i, (int)n);
  CHECK_EQ(a.u, 2 * n);
  CHECK_EQ(a.ull, (unsigned long long)n << 33);
  CHECK(a.f == (float)n);
  CHECK(a.d == 0.5 * n);
  CHECK_EQ(a.sub, -(int)n);
  CHECK_EQ(a.inc, n % 1000u);
  // dec from 0 with limit 1e6: first goes to 1e6, then counts down
  CHECK_EQ(a.dec, 1000000u - (n - 1));
  CHECK_EQ(a.cas_count, n);
  CHECK_EQ(a.cas16, (unsigned short)(n & 0xffff));
  CHECK_EQ(a.mx, 127 * 7 - 300);
  CHECK_EQ(a.mn, -300);
  CHECK_EQ(a.llmx, 127ll << 35);
  CHECK_EQ(a.ullmn, 1000000ull);
  CHECK_EQ(a.bits_or, FULL);
  CHECK_EQ(a.bits_and, 0u);
  CHECK_EQ(a.bits_xor, 0u); // every bit flipped by 4 warps
  CHECK_EQ(a.warps_seen, 0xfu);
  CHECK_EQ(a.exch, 77u);
}

// ---- convergence checks and forced divergence --------------------------------------------------
static void k_converge(void *) {
  unsigned lane = threadIdx.x;
  CHECK_EQ(__mw_sim_converge(FULL, "task.lua", 10, 5), 0);
  CHECK_EQ(__mw_sim_diverged(), 0);
  CHECK_EQ(__mw_sim_converge(FULL, "task.lua", 11, lane == 3 ? 6 : 5), 1);
  // same text at different addresses is the same site
  std::string site = "task.lua";
  CHECK_EQ(__mw_sim_converge(FULL, site.c_str(), 12, 1), 0);
  CHECK_EQ(__mw_sim_converge(FULL, "task.lua", lane < 16 ? 13 : 14, 1), 1);
  if (lane < 4) CHECK_EQ(__mw_sim_converge(0xfu, "task.lua", 15, lane), 1);
  CHECK_EQ(__mw_sim_diverged(), 0);
}

static int g_line_a, g_line_b;
static std::string g_msgs[32];
static int g_div[32], g_div_again[32];

static void k_diverge(void *) {
  unsigned lane = threadIdx.x;
  int r = 0;
  if (lane == 0) {
    g_line_a = __LINE__; __syncwarp();
  } else {
    g_line_b = __LINE__; r = __shfl_sync(FULL, (int)lane, 0);
  }
  (void)r;
  g_div[lane] = __mw_sim_diverged();
  g_div_again[lane] = __mw_sim_diverged();
  g_msgs[lane] = __mw_sim_divergence_msg();
  // the warp goes on normally afterwards
  CHECK_EQ(__ballot_sync(FULL, 1), FULL);
  CHECK_EQ(__mw_sim_diverged(), 0);
}

// a second divergence before the first is read keeps the first message; after it is read, a
// new one replaces it
static int g_l[6];
static std::string g_first[32], g_third[32];
static void k_diverge_twice(void *) {
  unsigned lane = threadIdx.x;
  if (lane == 0) {
    g_l[0] = __LINE__; __ballot_sync(FULL, 1);
  } else {
    g_l[1] = __LINE__; __reduce_add_sync(FULL, 1u);
  }
  if (lane == 5) {
    g_l[2] = __LINE__; __shfl_sync(FULL, 1, 0);
  } else {
    g_l[3] = __LINE__; __syncwarp();
  }
  g_div[lane] = __mw_sim_diverged();
  g_div_again[lane] = __mw_sim_diverged();
  g_first[lane] = __mw_sim_divergence_msg();
  __syncwarp(); // every lane has read it
  if (lane == 9) {
    g_l[4] = __LINE__; __syncwarp();
  } else {
    g_l[5] = __LINE__; __any_sync(FULL, 1);
  }
  CHECK_EQ(__mw_sim_diverged(), 1);
  g_third[lane] = __mw_sim_divergence_msg();
}

// lanes 0..15 wait for everyone while 16..31 wait only for each other at another barrier
static void k_diverge_exit(void *) {
  unsigned lane = threadIdx.x;
  if (lane < 16)
    __syncwarp(FULL);
  else
    __reduce_add_sync(FULL, 1u);
  g_div[lane] = __mw_sim_diverged();
}

static void test_divergence() {
  run_ok(k_converge, nullptr);
  run_ok(k_diverge, nullptr);
  int all = 1;
  for (int i = 0; i < 32; i++) all &= g_div[i] == 1 && g_div_again[i] == 0;
  CHECK(all);
  char want[256];
  snprintf(want, sizeof want, "lanes of warp 0 diverged: lane 0 at %s:%d, lane 1 at %s:%d", __FILE__, g_line_a,
           __FILE__, g_line_b);
  CHECK(g_msgs[0] == want);
  CHECK(g_msgs[31] == want);
  if (g_msgs[0] != want) fprintf(stderr, "  got  %s\n  want %s\n", g_msgs[0].c_str(), want);
  run_ok(k_diverge_twice, nullptr);
  all = 1;
  for (int i = 0; i < 32; i++) all &= g_div[i] == 1 && g_div_again[i] == 0;
  CHECK(all);
  snprintf(want, sizeof want, "lanes of warp 0 diverged: lane 0 at %s:%d, lane 1 at %s:%d", __FILE__, g_l[0],
           __FILE__, g_l[1]);
  CHECK(g_first[0] == want && g_first[31] == want);
  if (g_first[0] != want) fprintf(stderr, "  got  %s\n  want %s\n", g_first[0].c_str(), want);
  snprintf(want, sizeof want, "lanes of warp 0 diverged: lane 0 at %s:%d, lane 9 at %s:%d", __FILE__, g_l[5],
           __FILE__, g_l[4]);
  CHECK(g_third[0] == want && g_third[9] == want);
  if (g_third[0] != want) fprintf(stderr, "  got  %s\n  want %s\n", g_third[0].c_str(), want);
  memset(g_div, 0, sizeof g_div);
  run_ok(k_diverge_exit, nullptr);
  all = 1;
  for (int i = 0; i < 32; i++) all &= g_div[i] == 1;
  CHECK(all);
}

// ---- faults ------------------------------------------------------------------------------------
static int *volatile g_bad_ptr = (int *)0x10;
static volatile int g_zero = 0;

static void k_null_write(void *) {
  unsigned lane = threadIdx.x;
  int v = __shfl_sync(FULL, (int)lane, 0);
  (void)v;
  if (lane == 7) *g_bad_ptr = 1;
  __syncwarp();
}
static const int kAssertLine = __LINE__ + 2;
static void k_assert(void *) {
  if (threadIdx.x == 12) assert(threadIdx.x != 12 && "lane 12 asserts");
  __syncwarp();
}
static void k_abort(void *) {
  if (threadIdx.x == 12) abort();
  __syncwarp();
}
static void k_trap(void *) {
  __syncwarp();
  if (threadIdx.x == 3) __trap();
}
static void k_fpe(void *) {
  if (threadIdx.x == 30) g_zero = 10 / g_zero;
}
static volatile int g_depth_limit = INT_MAX;
static int deep(int n) {
  volatile char pad[512];
  pad[0] = (char)n;
  if (n >= g_depth_limit) return 0;
  return deep(n + 1) + pad[0];
}
static void k_overflow(void *) {
  if (threadIdx.x == 0) g_zero = deep(0);
}
static void k_throw(void *) {
  if (threadIdx.x == 2) throw std::runtime_error("boom");
  __syncwarp();
}

static int g_sum;
static void k_after_fault(void *) {
  unsigned s = __reduce_add_sync(FULL, threadIdx.x);
  if (threadIdx.x == 0) g_sum = (int)s + (int)blockIdx.x;
}

static void expect_fault(void (*k)(void *), unsigned warp, const char *a, const char *b) {
  char err[256];
  int rc = mw_sim_run_warp(k, nullptr, warp, 8, err, sizeof err);
  CHECK_EQ(rc, -1);
  bool ok = strstr(err, a) && strstr(err, b);
  CHECK(ok);
  if (!ok) fprintf(stderr, "  fault message: %s\n", err);
  // the thread is still fine: run another warp on it
  g_sum = -1;
  run_ok(k_after_fault, nullptr, 1, 8);
  CHECK_EQ(g_sum, 497);
}

static void test_faults() {
  expect_fault(k_null_write, 3, "fault: SIGSEGV (address 0x10)", "in warp 3 lane 7");
  expect_fault(k_null_write, 3, "SIGSEGV", "lane 7"); // again, handler re-armed
  char assert_at[64]; // a failed assert names the assertion and its place
  snprintf(assert_at, sizeof assert_at, "sim_shim_test.cpp:%d in warp 2 lane 12", kAssertLine);
  expect_fault(k_assert, 2, "fault: assertion `threadIdx.x != 12 && \"lane 12 asserts\"' failed at ",
               assert_at);
  expect_fault(k_abort, 2, "fault: SIGABRT (abort or failed assert)", "in warp 2 lane 12");
  expect_fault(k_trap, 4, "__trap()", "in warp 4 lane 3");
  expect_fault(k_fpe, 5, "SIGFPE (integer divide by zero", "lane 30");
  expect_fault(k_overflow, 6, "lane stack overflow", "in warp 6 lane 0");
  expect_fault(k_throw, 7, "uncaught C++ exception (boom)", "in warp 7 lane 2");
  // a fault on another thread, too
  std::thread t([] {
    expect_fault(k_null_write, 1, "SIGSEGV", "lane 7");
  });
  t.join();
  // ... and on a thread that blocks every signal, as worker threads often do
  std::thread blocked([] {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
    expect_fault(k_null_write, 1, "SIGSEGV", "lane 7");
    expect_fault(k_assert, 1, "assertion", "lane 12");
    expect_fault(k_abort, 1, "SIGABRT", "lane 12");
    sigset_t now;
    pthread_sigmask(SIG_BLOCK, nullptr, &now);
    CHECK(sigismember(&now, SIGSEGV) == 1); // the thread's mask is given back
  });
  blocked.join();
}

// Outside a warp the previous handler gets the signal (checked in a child process).
static void chained_handler(int, siginfo_t *, void *) { _exit(42); }

static void test_chaining() {
  pid_t pid = fork();
  if (pid == 0) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = chained_handler;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &sa, nullptr);
    char err[256];
    mw_sim_run_warp(k_after_fault, nullptr, 0, 1, err, sizeof err); // installs the shim's handlers
    *g_bad_ptr = 1;                                                  // not in a warp
    _exit(0);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 42);
  pid = fork();
  if (pid == 0) {
    signal(SIGABRT, SIG_DFL);
    char err[256];
    mw_sim_run_warp(k_after_fault, nullptr, 0, 1, err, sizeof err);
    abort(); // default action after the shim's handler passes it on
  }
  waitpid(pid, &st, 0);
  CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
}

// ---- intrinsics --------------------------------------------------------------------------------
static void test_intrinsics() {
  CHECK_EQ(__popc(0xf0f0u), 8);
  CHECK_EQ(__popcll(~0ull), 64);
  CHECK_EQ(__clz(1), 31);
  CHECK_EQ(__clz(0), 32);
  CHECK_EQ(__clzll(1), 63);
  CHECK_EQ(__ffs(0x10), 5);
  CHECK_EQ(__ffs(0), 0);
  CHECK_EQ(__ffsll(1ll << 40), 41);
  CHECK_EQ(__brev(1u), 0x80000000u);
  CHECK_EQ(__brev(0x12345678u), 0x1e6a2c48u);
  CHECK_EQ(__float_as_uint(1.0f), 0x3f800000u);
  CHECK(__uint_as_float(0x40000000u) == 2.0f);
  CHECK(__int_as_float(__float_as_int(-3.5f)) == -3.5f);
  CHECK(__longlong_as_double(__double_as_longlong(1.25)) == 1.25);
  CHECK_EQ(__umulhi(0x80000000u, 4u), 2u);
  CHECK_EQ(__byte_perm(0x33221100u, 0x77665544u, 0x5140u), 0x55114400u);
  CHECK_EQ(__funnelshift_l(0x80000000u, 1u, 1), 3u);
  CHECK(__saturatef(2.0f) == 1.0f && __saturatef(-1.0f) == 0.0f && __saturatef(NAN) == 0.0f);
  CHECK(fabsf(rsqrtf(4.0f) - 0.5f) < 1e-6f);
  CHECK(__fdividef(1.0f, 4.0f) == 0.25f);
  CHECK(__ldg(&FULL) == FULL);
  // CUDA-style min/max for mixed types
  CHECK_EQ(min(3, 5u), 3u);
  CHECK_EQ(max(-1, 2), 2);
  CHECK_EQ(min(-1, 2ll), -1ll);
  CHECK(max(1.5f, 2) == 2.0f);
  CHECK(std::min(3, 4) == 3); // <algorithm>'s are still there
  float sf = sqrt(4.0f);      // the float overload in the global namespace
  CHECK(sf == 2.0f);
  int2 i2 = make_int2(1, 2);
  float4 f4 = make_float4(1, 2, 3, 4);
  CHECK(i2.y == 2 && f4.w == 4.0f && alignof(float4) == 16 && sizeof(double2) == 16);
  long long t0 = clock64();
  unsigned long long g0 = __mw_globaltimer();
  __nanosleep(100);
  __nanosleep(100000);
  CHECK(clock64() > t0);
  CHECK(__mw_globaltimer() - g0 >= 100000);
  CHECK_EQ(mw_sim_warp_size(), 32);
  clock_t c0 = clock(); // the device clock, a cycle count
  CHECK(clock() != c0 || clock() != c0);
  __threadfence();
  __threadfence_block();
  __threadfence_system();
}

// shared memory is per warp (host thread)
static void k_shared(void *p) {
  __shared__ int tile[32];
  tile[threadIdx.x] = (int)(threadIdx.x + blockIdx.x);
  __syncthreads();
  int s = 0;
  for (int i = 0; i < 32; i++) s += tile[i];
  if (threadIdx.x == 0) ((int *)p)[blockIdx.x] = s;
}

static void test_shared() {
  int out[2] = {0, 0};
  std::thread a([&] { run_ok(k_shared, out, 0, 2); });
  std::thread b([&] { run_ok(k_shared, out, 1, 2); });
  a.join();
  b.join();
  CHECK_EQ(out[0], 496);
  CHECK_EQ(out[1], 496 + 32);
}

// ---- timing ------------------------------------------------------------------------------------
static const int kTimed = 1000000;
static void k_timed(void *p) {
  int v = (int)threadIdx.x;
  for (int i = 0; i < kTimed; i++) v = __shfl_sync(FULL, v, (int)((threadIdx.x + 1) & 31));
  if (threadIdx.x == 0) *(int *)p = v;
}

int main() {
  run_ok(k_shfl, nullptr);
  run_ok(k_vote, nullptr);
  run_ok(k_buffering, nullptr);
  run_ok(k_exit, nullptr);
  run_ok(k_staggered, nullptr);
  run_ok(k_partial, nullptr);
  test_atomics();
  test_divergence();
  test_faults();
  test_chaining();
  test_intrinsics();
  test_shared();

  int out = -1;
  auto t0 = std::chrono::steady_clock::now();
  run_ok(k_timed, &out);
  double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  CHECK_EQ(out, (int)(kTimed % 32)); // after n rotations lane 0 holds lane n % 32's value
  printf("full-warp __shfl_sync: %.1f ns per collective (%.2f ns per lane)\n", ns / kTimed, ns / kTimed / 32);

  printf("%d checks, %d failed\n", g_checks.load(), g_failures.load());
  return g_failures.load() ? 1 : 0;
}
