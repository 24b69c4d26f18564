/* backend_cuda.c - the cuda backend in the process that holds the context: one context per
 * runtime, executor modules loaded from cubins (image.c), the persistent kernel on a non-blocking
 * stream, buffers from cuMemAlloc. device_proc.c runs it in a device process. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cuda.h"
#include "cuda_api.h"
#include "internal.h"
#include "util.h"

#define BLOCK_THREADS (32 * MW_CTA_WARPS) /* a worker CTA: the executor names its warps by threadIdx */
#define WARPS_PER_BLOCK (BLOCK_THREADS / 32)
#define MAX_BLOCKS_PER_SM 4 /* the most workers the option `workers` may ask for */
/* Default: one block of four workers per SM. Measured on an H200 (2026-12-04): 1056 workers
 * (two blocks, as many as the kernel's 255 registers let run) run fib(30) at 77-79 M tasks/s
 * against 55 at 528, the hop alike (bench/results/2026-12-04-h200-v25/ctas.txt); but the suite at
 * 1056 (-v30/) had saxpy at 635 GB/s against 1,056, host spawns from Lua 1.15 M/s against 1.72,
 * and the pipelines 10-20 % slower: idle warps crowd the queues. `workers` asks for more. */
#define DEFAULT_BLOCKS_PER_SM 1

typedef struct cuda_be {
  char *err; /* mw__backend_args.err */
  size_t errlen;
  uint32_t workers;     /* mw__backend_args.workers: 0 for the default */
  uint32_t max_workers; /* mw__backend_info.max_workers */
  mw_CUcontext ctx;
  mw_CUdevice dev;
  mw_CUstream exec; /* the executor's stream: busy for the executor's whole life */
  mw_CUstream aux;  /* allocations and copies, never queued behind the executor */
  mw_CUmodule mod;
  mw_CUfunction fn;
  int blocks;  /* of the loaded executor per SM, as its occupancy allows (at most MAX_BLOCKS_PER_SM) */
  int fit;     /* the same, as many as the occupancy allows */
  int grids;   /* the loaded image launches block tasks as grids (its mw_grid_image) */
  unsigned dyn_smem; /* the loaded executor's dynamic shared memory per CTA (block tasks' area) */
  int fresh;   /* loaded since the last launch: the launch fits the workers to it */
  uint32_t stack_bytes; /* mw__backend_args.stack_bytes */
  size_t stack_set;     /* the stack size a launch set last (0: none yet) */
  int sm, nsm;
  int faulted;
  int running; /* launched, and not yet seen to exit */
  /* buffers freed while the executor ran: cuMemFree would wait for it, so they wait here for
   * the next stop, and an allocation that fits takes one of them first */
  struct retired { mw_CUdeviceptr p; size_t size; } *retired;
  int nretired, capretired;
} cuda_be;

#define CU(call, what)                                                          \
  do {                                                                          \
    mw_CUresult r_ = (call);                                                    \
    if (r_ != MW_CUDA_SUCCESS) return mw__cuda_error(r_, what, be->err, be->errlen); \
  } while (0)

int mw__cuda_probe(char *err, size_t n) {
  int rc = mw__cuda_load(err, n);
  if (rc) return rc;
  int count = 0;
  if (mw__cu.cuDeviceGetCount(&count) != MW_CUDA_SUCCESS || count < 1) {
    snprintf(err, n, "no CUDA device is visible to the driver");
    return MW_ENODEV;
  }
  return 0;
}

#define fail(be, ...) mw__put_error((be)->err, (be)->errlen, __VA_ARGS__)

static int cur(cuda_be *be) {
  CU(mw__cu.cuCtxSetCurrent(be->ctx), "cuCtxSetCurrent");
  return 0;
}

static int cuda_open(const mw__backend_args *a, mw__backend **out, mw__backend_info *info) {
  char why[1024];
  int rc = mw__cuda_probe(why, sizeof why);
  if (rc) {
    mw__put_error(a->err, a->errlen, "the cuda backend is not available: %s", why);
    return rc;
  }
  cuda_be *be = calloc(1, sizeof *be);
  if (!be) return MW_ENOMEM;
  be->err = a->err;
  be->errlen = a->errlen;
  be->workers = a->workers;
  be->stack_bytes = a->stack_bytes;
  *out = (mw__backend *)be;
  int count = 0;
  mw__cu.cuDeviceGetCount(&count);
  if (a->device < 0 || a->device >= count) {
    fail(be, "device %d does not exist (%d device%s)", a->device, count, count == 1 ? "" : "s");
    return MW_EINVAL;
  }
  CU(mw__cu.cuDeviceGet(&be->dev, a->device), "cuDeviceGet");
  int major = 0, minor = 0;
  CU(mw__cu.cuDeviceGetAttribute(&major, MW_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, be->dev),
     "cuDeviceGetAttribute");
  CU(mw__cu.cuDeviceGetAttribute(&minor, MW_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, be->dev),
     "cuDeviceGetAttribute");
  CU(mw__cu.cuDeviceGetAttribute(&be->nsm, MW_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, be->dev),
     "cuDeviceGetAttribute");
  be->sm = major * 10 + minor;
  if (be->sm < 70) {
    fail(be, "device %d is sm_%d; moonwarp needs sm_70 or newer", a->device, be->sm);
    return MW_ENODEV;
  }
  CU(mw__cu.cuCtxCreate(&be->ctx, MW_CU_CTX_SCHED_SPIN | MW_CU_CTX_MAP_HOST, be->dev),
     "cuCtxCreate");
  CU(mw__cu.cuStreamCreate(&be->exec, MW_CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  CU(mw__cu.cuStreamCreate(&be->aux, MW_CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  be->max_workers = (uint32_t)be->nsm * MAX_BLOCKS_PER_SM * WARPS_PER_BLOCK;
  info->max_workers = be->max_workers;
  info->workers = be->max_workers;
  info->arch = be->sm;
  return 0;
}

static void cuda_close(mw__backend *b) {
  cuda_be *be = (cuda_be *)b;
  if (!be) return;
  free(be->retired); /* their memory goes with the context */
  if (be->ctx) {
    mw__cu.cuCtxSetCurrent(be->ctx);
    mw__cu.cuCtxDestroy(be->ctx); /* frees modules, streams and memory of the context */
  }
  free(be);
}

static int cuda_alloc_pinned(mw__backend *b, size_t n, void **host, uint64_t *dev) {
  cuda_be *be = (cuda_be *)b;
  if (cur(be)) return MW_ECUDA;
  CU(mw__cu.cuMemHostAlloc(host, n, MW_CU_MEMHOSTALLOC_PORTABLE | MW_CU_MEMHOSTALLOC_DEVICEMAP),
     "cuMemHostAlloc");
  mw_CUdeviceptr d = 0;
  CU(mw__cu.cuMemHostGetDevicePointer(&d, *host, 0), "cuMemHostGetDevicePointer");
  *dev = d;
  return 0;
}

/* Pinned memory is freed only after the executor stopped (cuMemFreeHost waits for it). */
static void cuda_free_pinned(mw__backend *b, void *host) {
  cuda_be *be = (cuda_be *)b;
  if (be->faulted) return; /* the context goes with everything in it */
  mw__cu.cuCtxSetCurrent(be->ctx);
  mw__cu.cuMemFreeHost(host);
}

/* Plain cuMemAlloc, which returns while the executor runs (the stream-ordered allocator would
 * do too, but memory it hands out after the executor's launch is, by its rules, not ordered
 * before the executor's accesses, and compute-sanitizer reports every one of them). */
static void release_retired(cuda_be *be) {
  for (int i = 0; i < be->nretired; ++i) mw__cu.cuMemFree(be->retired[i].p);
  be->nretired = 0;
}

static int cuda_alloc(mw__backend *b, size_t n, uint64_t *dev) {
  cuda_be *be = (cuda_be *)b;
  if (cur(be)) return MW_ECUDA;
  int best = -1;
  for (int i = 0; i < be->nretired; ++i) /* the smallest that fits, wasting at most half */
    if (be->retired[i].size >= n && be->retired[i].size / 2 <= n &&
        (best < 0 || be->retired[i].size < be->retired[best].size))
      best = i;
  if (best >= 0) {
    *dev = be->retired[best].p;
    be->retired[best] = be->retired[--be->nretired];
    return 0;
  }
  mw_CUdeviceptr d = 0;
  mw_CUresult r = mw__cu.cuMemAlloc(&d, n ? n : 1);
  if (r != MW_CUDA_SUCCESS && be->nretired && !be->running) {
    release_retired(be);
    r = mw__cu.cuMemAlloc(&d, n ? n : 1);
  }
  if (r != MW_CUDA_SUCCESS) {
    int rc = mw__cuda_error(r, "cuMemAlloc", be->err, be->errlen);
    if (be->nretired) {
      size_t held = 0;
      for (int i = 0; i < be->nretired; ++i) held += be->retired[i].size;
      size_t len = strlen(be->err);
      snprintf(be->err + len, be->errlen - len,
               " (%.1f MB of closed buffers return to the device when the executor next stops)",
               held / 1048576.0);
    }
    return rc;
  }
  *dev = d;
  return 0;
}

static void cuda_free(mw__backend *b, uint64_t dev) {
  cuda_be *be = (cuda_be *)b;
  if (be->faulted) return;
  mw__cu.cuCtxSetCurrent(be->ctx);
  if (!be->running) {
    mw__cu.cuMemFree(dev);
    return;
  }
  mw_CUdeviceptr base = 0;
  size_t size = 0;
  if (mw__cu.cuMemGetAddressRange(&base, &size, dev) != MW_CUDA_SUCCESS) return;
  if (be->nretired == be->capretired) {
    int cap = be->capretired ? 2 * be->capretired : 16;
    struct retired *r = realloc(be->retired, sizeof *r * (size_t)cap);
    if (!r) return; /* kept until the context goes */
    be->retired = r;
    be->capretired = cap;
  }
  be->retired[be->nretired].p = dev;
  be->retired[be->nretired].size = size;
  be->nretired++;
}

static int cuda_h2d(mw__backend *b, uint64_t dst, const void *src, size_t n) {
  cuda_be *be = (cuda_be *)b;
  if (cur(be)) return MW_ECUDA;
  CU(mw__cu.cuMemcpyHtoDAsync(dst, src, n, be->aux), "cuMemcpyHtoDAsync");
  CU(mw__cu.cuStreamSynchronize(be->aux), "cuStreamSynchronize");
  return 0;
}

static int cuda_d2h(mw__backend *b, void *dst, uint64_t src, size_t n) {
  cuda_be *be = (cuda_be *)b;
  if (cur(be)) return MW_ECUDA;
  CU(mw__cu.cuMemcpyDtoHAsync(dst, src, n, be->aux), "cuMemcpyDtoHAsync");
  CU(mw__cu.cuStreamSynchronize(be->aux), "cuStreamSynchronize");
  return 0;
}

int mw__cuda_register_host(mw__backend *b, void *host, size_t n, uint64_t *dev) {
  cuda_be *be = (cuda_be *)b;
  if (cur(be)) return MW_ECUDA;
  CU(mw__cu.cuMemHostRegister(host, n, MW_CU_MEMHOSTALLOC_PORTABLE | MW_CU_MEMHOSTALLOC_DEVICEMAP),
     "cuMemHostRegister");
  mw_CUdeviceptr d = 0;
  CU(mw__cu.cuMemHostGetDevicePointer(&d, host, 0), "cuMemHostGetDevicePointer");
  *dev = d;
  return 0;
}

void mw__cuda_unregister_host(mw__backend *b, void *host) {
  cuda_be *be = (cuda_be *)b;
  if (be->faulted) return;
  mw__cu.cuCtxSetCurrent(be->ctx);
  mw__cu.cuMemHostUnregister(host);
}

/* A 32-bit word the image's link part defines (generate.c, put_link: every image has each):
 * 0 where the symbol is absent or of another size. */
static mw_CUresult image_word(cuda_be *be, mw_CUmodule mod, const char *name, unsigned *v) {
  mw_CUdeviceptr at = 0;
  size_t bytes = 0;
  uint32_t w = 0;
  *v = 0;
  if (mw__cu.cuModuleGetGlobal(&at, &bytes, mod, name) != MW_CUDA_SUCCESS || bytes != 4) return MW_CUDA_SUCCESS;
  mw_CUresult r = mw__cu.cuMemcpyDtoHAsync(&w, at, 4, be->aux);
  if (r == MW_CUDA_SUCCESS) r = mw__cu.cuStreamSynchronize(be->aux);
  *v = w;
  return r;
}

/* Loads the executor module (nothing runs now): on failure the module loaded before stays. */
static int cuda_load(mw__backend *b, const void *image, size_t size) {
  cuda_be *be = (cuda_be *)b;
  (void)size; /* a cubin says its own size; PTX ends with its NUL */
  if (cur(be)) return MW_ECUDA;
  mw_CUmodule mod = NULL;
  CU(mw__cu.cuModuleLoadData(&mod, image), "cuModuleLoadData");
  mw_CUfunction fn = NULL;
  mw_CUresult r = mw__cu.cuModuleGetFunction(&fn, mod, "mw_executor_kernel");
  /* the dynamic shared memory of each CTA: the block area when the image has a block task (its
   * link part says how much: protocol.h, Block tasks). The kernel's default limit is 48 KiB less
   * its static shared memory (the warps' states): raised to the area whenever there is one */
  unsigned dyn = 0;
  if (r == MW_CUDA_SUCCESS) r = image_word(be, mod, "mw_block_area_bytes", &dyn);
  if (r == MW_CUDA_SUCCESS && dyn)
    r = mw__cu.cuFuncSetAttribute(fn, MW_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)dyn);
  unsigned grids = 0; /* protocol.h, Block tasks, "As a grid" */
  if (r == MW_CUDA_SUCCESS) r = image_word(be, mod, "mw_grid_image", &grids);
  /* an image that launches grids from the device makes one such launch before the executor
   * runs ($MOONWARP_GRID_PRIME=0: not; bench/NOTES.md, v67) */
  const char *prime = getenv("MOONWARP_GRID_PRIME");
  if (r == MW_CUDA_SUCCESS && grids && !(prime && !strcmp(prime, "0"))) {
    mw_CUfunction pf = NULL;
    r = mw__cu.cuModuleGetFunction(&pf, mod, "mw_grid_prime");
    if (r == MW_CUDA_SUCCESS) r = mw__cu.cuLaunchKernel(pf, 1, 1, 1, 1, 1, 1, 0, be->aux, NULL, NULL);
    if (r == MW_CUDA_SUCCESS) r = mw__cu.cuStreamSynchronize(be->aux);
  }
  int blocks = 0;
  if (r == MW_CUDA_SUCCESS)
    r = mw__cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, fn, BLOCK_THREADS, dyn);
  if (r != MW_CUDA_SUCCESS) {
    mw__cu.cuModuleUnload(mod);
    return mw__cuda_error(r, "loading the executor", be->err, be->errlen);
  }
  if (blocks < 1) {
    mw__cu.cuModuleUnload(mod);
    fail(be, "the executor cannot be resident on this device (too many registers?)");
    return MW_ECUDA;
  }
  /* $MOONWARP_CARVEOUT: the percent of the SM's unified L1/shared memory to give to shared
   * memory (the rest is the L1 that caches the lane stacks); unset, the driver's choice */
  const char *carve = getenv("MOONWARP_CARVEOUT");
  if (carve && *carve) {
    r = mw__cu.cuFuncSetAttribute(fn, MW_CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, atoi(carve));
    if (r != MW_CUDA_SUCCESS) {
      mw__cu.cuModuleUnload(mod);
      return mw__cuda_error(r, "setting the executor's shared memory carveout", be->err, be->errlen);
    }
  }
  if (be->mod) mw__cu.cuModuleUnload(be->mod);
  be->mod = mod;
  be->fn = fn;
  be->dyn_smem = dyn;
  be->blocks = blocks > MAX_BLOCKS_PER_SM ? MAX_BLOCKS_PER_SM : blocks;
  be->fit = blocks;
  be->grids = grids;
  be->fresh = 1;
  return 0;
}

/* Sets how many workers of a freshly loaded executor fit in *nworkers and in the mw_state at
 * state_dev: every worker must be resident at once, so never more than the occupancy allows. */
static int fit_workers(cuda_be *be, uint64_t state_dev, uint32_t *nworkers) {
  uint32_t fit = (uint32_t)(be->blocks * be->nsm * WARPS_PER_BLOCK);
  uint32_t want = be->workers ? be->workers
                              : (uint32_t)be->nsm * DEFAULT_BLOCKS_PER_SM * WARPS_PER_BLOCK;
  if (want > fit) want = fit;
  if (want > be->max_workers) want = be->max_workers;
  if (want != *nworkers) {
    *nworkers = want;
    int rc = cuda_h2d((mw__backend *)be, state_dev + offsetof(mw_state, nworkers), &want, 4);
    if (rc) return rc;
  }
  /* block tasks as grids (protocol.h, Block tasks, "As a grid"): one of at least twice as many
   * unclaimed instances as complete CTAs, when the workers leave room on each SM for one more
   * CTA of the executor's size (a grid's block takes no more: it may run beside them); else
   * never, for a grid that found no room would wait behind a kernel that never ends.
   * $MOONWARP_GRID_MIN sets the count (0: never) */
  const uint32_t ctas = want / WARPS_PER_BLOCK, per_sm = (ctas + (uint32_t)be->nsm - 1) / (uint32_t)be->nsm;
  const char *env = getenv("MOONWARP_GRID_MIN"); /* checked by mw_runtime_create */
  uint32_t grid_min = 0;
  if (be->grids && per_sm < (uint32_t)be->fit)
    grid_min = env && *env ? (uint32_t)strtoul(env, NULL, 10) : ctas > 0 ? 2 * ctas : 1;
  int rc = cuda_h2d((mw__backend *)be, state_dev + offsetof(mw_state, grid_min), &grid_min, 4);
  if (rc) return rc;
  be->fresh = 0;
  return 0;
}

static int cuda_launch(mw__backend *b, uint64_t state_dev, uint32_t *nworkers) {
  cuda_be *be = (cuda_be *)b;
  int rc = cur(be);
  if (rc) return rc;
  if (!be->fn) return MW_EINVAL;
  if (be->fresh && (rc = fit_workers(be, state_dev, nworkers))) return rc;
  release_retired(be); /* nothing runs now */
  /* task bodies call one another in place (elided calls, task_api.cuh), a depth ptxas cannot
   * size: each thread's stack is the kernel's own local memory and the executor's budget
   * (protocol.h, MW_STACK_BYTES); set again only when it changes */
  int local = 0;
  CU(mw__cu.cuFuncGetAttribute(&local, MW_CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, be->fn), "cuFuncGetAttribute");
  size_t stack = (size_t)local + be->stack_bytes + MW_STACK_SLACK;
  if (stack != be->stack_set) {
    CU(mw__cu.cuCtxSetLimit(0, stack), "cuCtxSetLimit");
    be->stack_set = stack;
  }
  unsigned grid = (*nworkers + WARPS_PER_BLOCK - 1) / WARPS_PER_BLOCK;
  uint64_t st = state_dev;
  void *params[] = {&st};
  CU(mw__cu.cuLaunchKernel(be->fn, grid, 1, 1, BLOCK_THREADS, 1, 1, be->dyn_smem, be->exec, params, NULL),
     "cuLaunchKernel");
  be->running = 1;
  return 0;
}

static int cuda_query(mw__backend *b) {
  cuda_be *be = (cuda_be *)b;
  if (be->faulted) return MW_EFAULT;
  mw__cu.cuCtxSetCurrent(be->ctx);
  mw_CUresult r = mw__cu.cuStreamQuery(be->exec);
  if (r == MW_CUDA_ERROR_NOT_READY) return 1;
  be->running = 0;
  if (r == MW_CUDA_SUCCESS) return 0;
  be->faulted = 1;
  mw__cuda_error(r, "the executor", be->err, be->errlen);
  return MW_EFAULT;
}

static int cuda_quiesce(mw__backend *b, double deadline) {
  double end = mw__now() + deadline;
  for (;;) {
    int q = cuda_query(b);
    if (q <= 0) return 0;
    if (mw__now() > end) return MW_ETIMEDOUT;
    mw__sleep_ns(20000);
  }
}

/* A kernel that never returns cannot be preempted: destroying the context is the only way
 * out, and it takes the whole state with it. */
static void cuda_abandon(mw__backend *b) {
  cuda_be *be = (cuda_be *)b;
  be->faulted = 1;
}

const mw__backend_ops mw__backend_cuda_local = {
    MW__CUDA_TRAITS,
    .probe = mw__cuda_probe, /* the driver in this process */
    .open = cuda_open,
    .close = cuda_close,
    .alloc_pinned = cuda_alloc_pinned,
    .free_pinned = cuda_free_pinned,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .h2d = cuda_h2d,
    .d2h = cuda_d2h,
    .load = cuda_load,
    .launch = cuda_launch,
    .query = cuda_query,
    .quiesce = cuda_quiesce,
    .abandon = cuda_abandon,
};
