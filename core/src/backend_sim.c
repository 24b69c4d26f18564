/* backend_sim.c - the sim backend: the generated program built by the host C++ compiler into a
 * shared object, its executor run by host threads (one per warp; 32 fibers each, see sim_shim.h). */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cache.h"
#include "internal.h"
#include "util.h"

#ifndef MW_SIM_CXX
#define MW_SIM_CXX "c++"
#endif
#define SIM_FLAGS "-std=c++17 -fPIC -shared -pthread -w -fno-strict-aliasing"
/* optimised, or for a debugger (mw_compile_desc.debug); both with debug information */
#define SIM_OPT_FLAGS "-O2 -g"
#define SIM_DEBUG_FLAGS "-O0 -g"
/* Boost.Context as the build found it (CMake): its library, and -I its headers when they are
 * not in a system folder */
#ifndef MW_SIM_LIB
#define MW_SIM_LIB "-lboost_context"
#endif
#ifndef MW_SIM_INCLUDE
#define MW_SIM_INCLUDE ""
#endif
/* A compile that takes longer than this is stopped (a hung compiler must not hang the runtime). */
#define SIM_COMPILE_TIMEOUT_S 600.0
#define SIM_DEFAULT_WORKERS 4u
#define SIM_MAX_WORKERS 64u
#define SIM_DEFAULT_CAPACITY (1u << 16) /* task frames by default */

typedef int (*run_warp_fn)(void (*)(void *), void *, unsigned, unsigned, char *, unsigned);

typedef struct sim_image {
  void *so;
  void (*kernel)(void *);
  run_warp_fn run_warp;
  void (*set_abort_flag)(const volatile int *); /* the thread's task code stops once it is set */
} sim_image;

typedef struct sim_thread {
  pthread_t tid;
  struct sim_be *be;
  unsigned warp;
} sim_thread;

typedef struct sim_be {
  char *err; /* mw__backend_args.err */
  size_t errlen;
  int (*find_task)(void *, uint32_t, const char **, const char **, int *); /* mw__backend_args */
  void *ctx;
  uint64_t state_dev; /* of the last launch */
  int abandoned;      /* its threads may still run: close leaves everything to them */
  sim_image cur, next;
  void **old_so;
  int nold;
  sim_thread *threads;
  unsigned nthreads;
  atomic_int live;
  atomic_int fault;
  pthread_mutex_t lock;
  char fault_msg[512];
} sim_be;

static const char *sim_cxx(void) {
  const char *c = getenv("MOONWARP_CXX");
  return c && *c ? c : MW_SIM_CXX;
}

#define fail(be, ...) mw__put_error((be)->err, (be)->errlen, __VA_ARGS__)

static int sim_open(const mw__backend_args *a, mw__backend **out, mw__backend_info *info) {
  sim_be *be = calloc(1, sizeof *be);
  if (!be) return MW_ENOMEM;
  be->err = a->err;
  be->errlen = a->errlen;
  be->find_task = a->find_task;
  be->ctx = a->ctx;
  pthread_mutex_init(&be->lock, NULL);
  *out = (mw__backend *)be;
  /* a request above SIM_MAX_WORKERS is refused by mw_runtime_create */
  info->max_workers = a->workers ? (a->workers < SIM_MAX_WORKERS ? a->workers : SIM_MAX_WORKERS)
                                 : SIM_DEFAULT_WORKERS;
  if (a->workers > SIM_MAX_WORKERS) info->max_workers = SIM_MAX_WORKERS;
  info->workers = info->max_workers;
  return 0;
}

static void join_threads(sim_be *be) {
  for (unsigned i = 0; i < be->nthreads; ++i) pthread_join(be->threads[i].tid, NULL);
  free(be->threads);
  be->threads = NULL;
  be->nthreads = 0;
}

static void sim_close(mw__backend *b) {
  sim_be *be = (sim_be *)b;
  if (!be || be->abandoned) return;
  if (be->nthreads) join_threads(be);
  {
    if (be->cur.so) dlclose(be->cur.so);
    if (be->next.so) dlclose(be->next.so);
    for (int i = 0; i < be->nold; ++i) dlclose(be->old_so[i]);
  }
  free(be->old_so);
  free(be);
}

/* Device memory on sim is host memory laid out so that an access past an allocation's end
 * faults at once: the block ends at a page that nothing may touch (PROT_NONE), so task code that
 * overruns a buffer stops the warp with SIGSEGV (sim_shim.h, Faults) instead of corrupting the
 * process's heap. Blocks start 256-byte aligned, as cuMemAlloc's do, so an overrun of less than
 * the gap left by that alignment (at most 255 bytes) is not caught. The mapping's base and size
 * sit in the 16 bytes before the block. */
typedef struct sim_block {
  void *base;
  size_t size;
} sim_block;

static int sim_alloc(mw__backend *be, size_t n, uint64_t *dev) {
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  size_t need = (n ? n : 1) + 256 + sizeof(sim_block);
  size_t size = (need + pg - 1) / pg * pg + pg; /* and the guard page */
  char *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) {
    fail((sim_be *)be, "out of host memory allocating %zu bytes", n);
    return MW_ENOMEM;
  }
  char *guard = base + size - pg;
  mprotect(guard, pg, PROT_NONE);
  uintptr_t p = ((uintptr_t)guard - (n ? n : 1)) & ~(uintptr_t)255;
  sim_block b = {base, size};
  memcpy((char *)p - sizeof b, &b, sizeof b);
  *dev = (uint64_t)p; /* fresh anonymous pages: zeroed */
  return 0;
}
static void sim_free(mw__backend *be, uint64_t dev) {
  (void)be;
  if (!dev) return;
  sim_block b;
  memcpy(&b, (const char *)(uintptr_t)dev - sizeof b, sizeof b);
  munmap(b.base, b.size);
}
static int sim_alloc_pinned(mw__backend *b, size_t n, void **host, uint64_t *dev) {
  int rc = sim_alloc(b, n, dev);
  *host = rc ? NULL : (void *)(uintptr_t)*dev;
  return rc;
}
static void sim_free_pinned(mw__backend *b, void *host) { sim_free(b, (uint64_t)(uintptr_t)host); }
static int sim_h2d(mw__backend *b, uint64_t dst, const void *src, size_t n) {
  (void)b;
  memcpy((void *)(uintptr_t)dst, src, n);
  return 0;
}
static int sim_d2h(mw__backend *b, void *dst, uint64_t src, size_t n) {
  (void)b;
  memcpy(dst, (const void *)(uintptr_t)src, n);
  return 0;
}

/* Splits s at blanks into argv (at most max - 1 words, NULL-terminated) in buf. Returns the count. */
static int split_words(const char *s, char *buf, size_t cap, char **argv, int max) {
  int n = 0;
  snprintf(buf, cap, "%s", s);
  for (char *save = NULL, *w = strtok_r(buf, " \t", &save); w && n < max - 1; w = strtok_r(NULL, " \t", &save))
    argv[n++] = w;
  argv[n] = NULL;
  return n;
}

/* Runs the compiler (posix_spawn: safe while the executor's threads run; no shell), its output
 * to log_path, for at most SIM_COMPILE_TIMEOUT_S. Returns its exit status, -1 if it could not
 * start, -2 if it ran out of time (it is killed). */
static int run_compiler(const char *cpp, const char *so, const char *log_path,
                        const mw__build_opts *bo) {
  char cxxbuf[1024], flagbuf[512], optbuf[64], incbuf[1024];
  int ndirs = bo ? bo->ninclude_dirs : 0;
  char **argv = malloc(sizeof *argv * (size_t)(96 + 2 * ndirs));
  if (!argv) return -1;
  int n = split_words(sim_cxx(), cxxbuf, sizeof cxxbuf, argv, 16);
  if (n == 0) {
    free(argv);
    return -1;
  }
  n += split_words(SIM_FLAGS, flagbuf, sizeof flagbuf, argv + n, 48);
  n += split_words(bo && bo->debug ? SIM_DEBUG_FLAGS : SIM_OPT_FLAGS, optbuf, sizeof optbuf,
                   argv + n, 8);
  for (int i = 0; i < ndirs; ++i) { /* the user's folders, before Boost's */
    argv[n++] = (char *)"-I";
    argv[n++] = (char *)bo->include_dirs[i];
  }
  n += split_words(MW_SIM_INCLUDE, incbuf, sizeof incbuf, argv + n, 8);
  argv[n++] = (char *)"-o";
  argv[n++] = (char *)so;
  argv[n++] = (char *)cpp;
  argv[n++] = (char *)MW_SIM_LIB;
  argv[n] = NULL;
  posix_spawn_file_actions_t fa;
  if (posix_spawn_file_actions_init(&fa)) return -1;
  posix_spawn_file_actions_addopen(&fa, 2, log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, 2, 1);
  pid_t pid;
  extern char **environ;
  int err = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (err) {
    FILE *f = fopen(log_path, "w");
    if (f) {
      fprintf(f, "cannot start the C++ compiler %s: %s\n", argv[0], strerror(err));
      fclose(f);
    }
    free(argv);
    return -1;
  }
  free(argv);
  double end = mw__now() + SIM_COMPILE_TIMEOUT_S;
  int st = 0;
  for (;;) {
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) return -1;
    if (mw__now() > end) {
      kill(pid, SIGKILL);
      while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
      }
      return -2;
    }
    mw__sleep_ns(2000000);
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int load_image(sim_be *be, const char *so_path, sim_image *img) {
  void *so = dlopen(so_path, RTLD_NOW | RTLD_LOCAL);
  if (!so) {
    fail(be, "loading the sim program: %s", dlerror());
    return MW_ECOMPILE;
  }
  img->so = so;
  img->kernel = (void (*)(void *))dlsym(so, "mw_sim_kernel");
  img->run_warp = (run_warp_fn)dlsym(so, "mw_sim_run_warp");
  img->set_abort_flag = (void (*)(const volatile int *))dlsym(so, "mw_sim_set_abort_flag");
  unsigned *proto = dlsym(so, "mw_sim_protocol");
  if (!img->kernel || !img->run_warp || !img->set_abort_flag || !proto ||
      *proto != MW_PROTOCOL_VERSION) {
    fail(be, "the sim program lacks its entry points");
    dlclose(so);
    img->so = NULL;
    return MW_ECOMPILE;
  }
  return 0;
}

static int sim_build(mw__backend *b, const char *source, const mw__build_opts *bo) {
  sim_be *be = (sim_be *)b;
  const char *cxx = sim_cxx();
  /* the key: the source, the compiler, its flags, the include folders and the headers reached */
  char dirs[65] = "";
  if (bo && bo->ninclude_dirs)
    mw__cache_key((const void *const *)bo->include_dirs, NULL, bo->ninclude_dirs, dirs);
  const void *parts[] = {"sim-2", source, cxx, SIM_FLAGS,
                         bo && bo->debug ? SIM_DEBUG_FLAGS : SIM_OPT_FLAGS, dirs,
                         bo ? bo->deps : ""};
  char key[65];
  mw__cache_key(parts, NULL, 7, key);
  char dir[] = "/tmp/moonwarp-sim-XXXXXX";
  if (!mkdtemp(dir)) {
    fail(be, "cannot create a temporary directory for the sim build");
    return MW_EIO;
  }
  char cpp[256], so[256], logp[256];
  snprintf(cpp, sizeof cpp, "%s/program.cpp", dir);
  snprintf(so, sizeof so, "%s/program.so", dir);
  snprintf(logp, sizeof logp, "%s/log.txt", dir);
  int rc = 0;
  void *data = NULL;
  size_t size = 0;
  sim_image img = {0};
  int loaded = 0;
  if (mw__cache_get(key, "so", &data, &size) == 0) {
    /* a cached program that does not load (made by another version, a changed system) is
     * removed and made afresh */
    loaded = mw__write_file_atomic(so, data, size) == 0 && load_image(be, so, &img) == 0;
    free(data);
    data = NULL;
    if (!loaded) {
      mw__cache_remove(key, "so");
      be->err[0] = 0;
    }
  }
  if (!loaded) {
    if (mw__write_file_atomic(cpp, source, strlen(source))) {
      rc = MW_EIO;
      fail(be, "cannot write %s", cpp);
    } else {
      int st = run_compiler(cpp, so, logp, bo);
      if (st == -2) {
        fail(be, "the C++ compiler (%s) took longer than %.0f s and was stopped", cxx,
             SIM_COMPILE_TIMEOUT_S);
        rc = MW_ETIMEDOUT;
      } else if (st != 0) {
        char *log = NULL;
        mw__read_file(logp, &log, NULL);
        char *user = log && *log ? mw__user_log(log, cpp) : NULL;
        if (user) {
          free(log);
          log = user;
        }
        fail(be, "%s%s", log && *log ? log : "the C++ compiler failed: ", log && *log ? "" : cxx);
        free(log);
        rc = st == -1 ? MW_ENODEV : MW_ECOMPILE;
      } else if (mw__read_file(so, (char **)&data, &size) == 0) {
        mw__cache_put(key, "so", data, size);
        free(data);
      }
    }
  }
  if (!rc && !loaded) rc = load_image(be, so, &img);
  if (!rc) {
    if (be->next.so) dlclose(be->next.so);
    be->next = img;
  }
  unlink(cpp);
  unlink(so);
  unlink(logp);
  rmdir(dir);
  return rc;
}

/* ", running task NAME (FILE:LINE)": the bulk task the warp was running when it faulted, else
 * the innermost level of its chain (the CTA's shared state), with the place of the task's
 * declaration; "" if none. */
static void running_task(sim_be *be, mw_state *st, unsigned warp, char *out, size_t cap) {
  out[0] = 0;
  if (!st->sim_cta) return;
  const mw_wstate *ws = &st->sim_cta[warp];
  uint32_t depth = ws->depth, kind;
  if (st->workers[warp].running) /* a bulk task's instances */
    kind = st->workers[warp].running - 1;
  else if (depth > 0 && depth <= MW_LEVELS)
    kind = ws->lv[depth - 1].kind;
  else
    return;
  const char *name, *file;
  int line;
  if (be->find_task && be->find_task(be->ctx, kind, &name, &file, &line))
    snprintf(out, cap, ", running task %s (%s:%d)", name, file, line);
}

static void *warp_main(void *arg) {
  sim_thread *t = arg;
  sim_be *be = t->be;
  char err[512] = "";
  mw_state *st = (mw_state *)(uintptr_t)be->state_dev;
  int rc;
  /* once a warp faulted, the task code of the others stops at its next sleep (sim_shim.h) */
  be->cur.set_abort_flag((const volatile int *)&be->fault);
  /* -2: the lanes diverged (or a fault elsewhere stopped the task); the warp starts over and
   * fails the task it was running */
  while ((rc = be->cur.run_warp(be->cur.kernel, st, t->warp, be->nthreads, err, sizeof err)) == -2)
    mw__copy_cut(st->workers[t->warp].abort_msg, MW_MSG_BYTES, err);
  if (rc) {
    char task[256];
    running_task(be, st, t->warp, task, sizeof task);
    pthread_mutex_lock(&be->lock);
    if (!atomic_load(&be->fault)) {
      snprintf(be->fault_msg, sizeof be->fault_msg, "%s%s", err[0] ? err : "sim warp failed", task);
      atomic_store(&be->fault, 1);
    }
    pthread_mutex_unlock(&be->lock);
    /* the other warps cannot finish tasks that waited on this one: stop them all, this warp
     * counting as arrived at the stop barrier (protocol.h, Stopping) */
    atomic_fetch_add_explicit((_Atomic uint32_t *)&st->stop_arrived, 1u, memory_order_relaxed);
    atomic_store_explicit((_Atomic uint32_t *)&st->stop, 1u, memory_order_release);
  }
  atomic_fetch_sub(&be->live, 1);
  return NULL;
}

static int sim_launch(mw__backend *b, uint64_t state_dev, uint32_t *nworkers) {
  sim_be *be = (sim_be *)b;
  if (be->nthreads) join_threads(be);
  /* a launch that fails, on demand: how the specs reach the runtime's recovery paths */
  const char *refuse = getenv("MOONWARP_SIM_REFUSE_LAUNCH");
  if (refuse && !strcmp(refuse, "1")) {
    fail(be, "the sim launch was refused (MOONWARP_SIM_REFUSE_LAUNCH=1)");
    return MW_ENODEV;
  }
  if (be->next.so) {
    if (be->cur.so) {
      void **o = realloc(be->old_so, sizeof *o * (size_t)(be->nold + 1));
      if (!o) return MW_ENOMEM;
      be->old_so = o;
      be->old_so[be->nold++] = be->cur.so;
    }
    be->cur = be->next;
    memset(&be->next, 0, sizeof be->next);
  }
  if (!be->cur.so) return MW_EINVAL;
  be->threads = calloc(*nworkers, sizeof *be->threads);
  if (!be->threads) return MW_ENOMEM;
  be->state_dev = state_dev;
  atomic_store(&be->live, (int)*nworkers);
  be->nthreads = *nworkers;
  for (unsigned i = 0; i < *nworkers; ++i) {
    be->threads[i].be = be;
    be->threads[i].warp = i;
    if (pthread_create(&be->threads[i].tid, NULL, warp_main, &be->threads[i])) {
      /* stop those already started */
      atomic_store_explicit((_Atomic uint32_t *)&((mw_state *)(uintptr_t)state_dev)->stop, 1u,
                            memory_order_release);
      atomic_fetch_sub(&be->live, (int)(*nworkers - i));
      be->nthreads = i;
      join_threads(be);
      fail(be, "cannot start sim worker threads");
      return MW_ENOMEM;
    }
  }
  return 0;
}

static int sim_query(mw__backend *b) {
  sim_be *be = (sim_be *)b;
  if (atomic_load(&be->fault)) {
    fail(be, "%s", be->fault_msg);
    return MW_EFAULT;
  }
  if (atomic_load(&be->live) > 0) return 1;
  if (be->nthreads) join_threads(be);
  return 0;
}

static int sim_quiesce(mw__backend *b, double deadline) {
  sim_be *be = (sim_be *)b;
  double end = mw__now() + deadline;
  while (atomic_load(&be->live) > 0) {
    if (mw__now() > end) return MW_ETIMEDOUT;
    mw__sleep_ns(100000);
  }
  if (be->nthreads) join_threads(be);
  return 0;
}

static void sim_abandon(mw__backend *b) {
  sim_be *be = (sim_be *)b;
  /* threads that never return keep using the runtime's memory: leave it all to them */
  for (unsigned i = 0; i < be->nthreads; ++i) pthread_detach(be->threads[i].tid);
  be->threads = NULL;
  be->nthreads = 0;
  be->abandoned = 1;
}

const mw__backend_ops mw__backend_sim = {
    .name = "sim",
    .host_code = 1,
    .source_ext = "cpp",
    .cta_in_memory = 1,
    .shares_cpus = 1,
    .default_capacity = SIM_DEFAULT_CAPACITY,
    .claim_device = 0,
    .clock = "CLOCK_MONOTONIC",
    .probe = NULL, /* never asked: auto falls back to sim */
    .open = sim_open,
    .close = sim_close,
    .alloc_pinned = sim_alloc_pinned,
    .free_pinned = sim_free_pinned,
    .alloc = sim_alloc,
    .free = sim_free,
    .h2d = sim_h2d,
    .d2h = sim_d2h,
    .build = sim_build,
    .launch = sim_launch,
    .query = sim_query,
    .quiesce = sim_quiesce,
    .abandon = sim_abandon,
};

/* ---- shared by the backends: dumping the generated source for users to read -------------- */
void mw__dump_source(const char *source, const char *ext) {
  const char *dir = mw__cache_dump_dir();
  if (!dir) return;
  const void *parts[] = {source};
  char key[65], path[4096];
  mw__cache_key(parts, NULL, 1, key);
  snprintf(path, sizeof path, "%s/moonwarp-%.16s.%s", dir, key, ext);
  mw__write_file_atomic(path, source, strlen(source));
}
