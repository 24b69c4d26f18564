/* backend_sim.c - the sim backend: the generated program, a shared object of the host C++
 * compiler (image.c), loaded with dlopen and its executor run by host threads (one per warp; 32
 * fibers each, see sim_shim.h). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cache.h"
#include "internal.h"
#include "util.h"

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
  void (*user_places)(void *, const char *, char *, size_t);                 /* mw__backend_args */
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

#define fail(be, ...) mw__put_error((be)->err, (be)->errlen, __VA_ARGS__)

static int sim_open(const mw__backend_args *a, mw__backend **out, mw__backend_info *info) {
  sim_be *be = calloc(1, sizeof *be);
  if (!be) return MW_ENOMEM;
  be->err = a->err;
  be->errlen = a->errlen;
  be->find_task = a->find_task;
  be->user_places = a->user_places;
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

/* Writes the image to a temporary file and opens it: the next launch's executor. */
static int sim_load(mw__backend *b, const void *image, size_t size) {
  sim_be *be = (sim_be *)b;
  char dir[] = "/tmp/moonwarp-sim-XXXXXX";
  if (!mkdtemp(dir)) {
    fail(be, "cannot create a temporary directory for the sim build");
    return MW_EIO;
  }
  char so[256];
  snprintf(so, sizeof so, "%s/program.so", dir);
  sim_image img = {0};
  int rc = mw__write_file_atomic(so, image, size);
  if (rc) fail(be, "cannot write %s", so);
  else rc = load_image(be, so, &img);
  if (!rc) {
    if (be->next.so) dlclose(be->next.so);
    be->next = img;
  }
  unlink(so);
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

/* The executor's message msg in the user's terms (mw__backend_args.user_places) into out, which
 * may be msg itself. */
static void user_places(sim_be *be, const char *msg, char *out, size_t cap) {
  char in[512];
  snprintf(in, sizeof in, "%s", msg);
  if (be->user_places) be->user_places(be->ctx, in, out, cap);
  else mw__copy_cut(out, cap, in);
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
    user_places(be, err, st->workers[t->warp].abort_msg, MW_MSG_BYTES);
  if (rc) {
    user_places(be, err, err, sizeof err);
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
    .load = sim_load,
    .launch = sim_launch,
    .query = sim_query,
    .quiesce = sim_quiesce,
    .abandon = sim_abandon,
};
