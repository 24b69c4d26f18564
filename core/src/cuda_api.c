/* cuda_api.c - opens libcuda with dlopen and resolves the driver entry points moonwarp uses. */
#include "cuda_api.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moonwarp.h"
#include "util.h"

mw__cuda_api mw__cu;

/* The symbol each member resolves to: the versioned name cuda.h (CUDA 12 and 13) maps the
 * plain API name to, so the signature matches the one declared in cuda_api.h. */
static const mw__dl_sym symbols[] = {
#define SYM(member, symbol) {symbol, offsetof(mw__cuda_api, member)}
    SYM(cuInit, "cuInit"),
    SYM(cuDriverGetVersion, "cuDriverGetVersion"),
    SYM(cuDeviceGetCount, "cuDeviceGetCount"),
    SYM(cuDeviceGet, "cuDeviceGet"),
    SYM(cuDeviceGetAttribute, "cuDeviceGetAttribute"),
    SYM(cuCtxDestroy, "cuCtxDestroy_v2"),
    SYM(cuCtxSetCurrent, "cuCtxSetCurrent"),
    SYM(cuCtxSetLimit, "cuCtxSetLimit"),
    SYM(cuModuleLoadData, "cuModuleLoadData"),
    SYM(cuModuleUnload, "cuModuleUnload"),
    SYM(cuModuleGetFunction, "cuModuleGetFunction"),
    SYM(cuModuleGetGlobal, "cuModuleGetGlobal_v2"),
    SYM(cuFuncGetAttribute, "cuFuncGetAttribute"),
    SYM(cuFuncSetAttribute, "cuFuncSetAttribute"),
    SYM(cuLaunchKernel, "cuLaunchKernel"),
    SYM(cuStreamCreate, "cuStreamCreate"),
    SYM(cuStreamQuery, "cuStreamQuery"),
    SYM(cuStreamSynchronize, "cuStreamSynchronize"),
    SYM(cuMemAlloc, "cuMemAlloc_v2"),
    SYM(cuMemFree, "cuMemFree_v2"),
    SYM(cuMemGetAddressRange, "cuMemGetAddressRange_v2"),
    SYM(cuMemHostAlloc, "cuMemHostAlloc"),
    SYM(cuMemFreeHost, "cuMemFreeHost"),
    SYM(cuMemHostRegister, "cuMemHostRegister_v2"),
    SYM(cuMemHostUnregister, "cuMemHostUnregister"),
    SYM(cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2"),
    SYM(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"),
    SYM(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"),
    SYM(cuOccupancyMaxActiveBlocksPerMultiprocessor,
        "cuOccupancyMaxActiveBlocksPerMultiprocessor"),
    SYM(cuGetErrorName, "cuGetErrorName"),
    SYM(cuGetErrorString, "cuGetErrorString"),
#undef SYM
};

/* CUDA 13 gave cuCtxCreate a parameter block (cuCtxCreate_v4). Drivers still export
 * cuCtxCreate_v2 with the old signature; should one ever stop, call v4 with no parameter
 * block, which means the same thing. */
static mw_CUresult (*ctx_create_v4)(mw_CUcontext *ctx, void *params, unsigned int flags,
                                    mw_CUdevice dev);

static mw_CUresult ctx_create_via_v4(mw_CUcontext *ctx, unsigned int flags, mw_CUdevice dev) {
  return ctx_create_v4(ctx, NULL, flags, dev);
}

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int load_rc;
static char load_msg[512];

static void set_msg(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(load_msg, sizeof load_msg, fmt, ap);
  va_end(ap);
}

static int open_library(void **out) {
  static const char *const names[] = {"libcuda.so.1", "libcuda.so"};
  const char *env = getenv("MOONWARP_LIBCUDA");
  char why[300];
  size_t which = 0;
  void *lib;

  if (env && *env) {
    if (!(lib = mw__dl_open_first(&env, 1, NULL, why, sizeof why))) {
      set_msg("%s (from MOONWARP_LIBCUDA) could not be opened (dlopen: %s)", env, why);
      return MW_ENODEV;
    }
    snprintf(mw__cu.path, sizeof mw__cu.path, "%s", env);
  } else {
    if (!(lib = mw__dl_open_first(names, 2, &which, why, sizeof why))) {
      set_msg("libcuda.so.1 not found: no NVIDIA driver on this machine (dlopen: %s)", why);
      return MW_ENODEV;
    }
    snprintf(mw__cu.path, sizeof mw__cu.path, "%s", names[which]);
  }
  *out = lib;
  return 0;
}

static int resolve_all(void *lib) {
  const char *missing = mw__dl_resolve(lib, symbols, sizeof symbols / sizeof symbols[0], &mw__cu);
  if (missing) {
    set_msg("%s has no %s: the NVIDIA driver is too old for moonwarp (a CUDA 12 or newer "
            "driver is needed)",
            mw__cu.path, missing);
    return MW_ENODEV;
  }
  static const mw__dl_sym v2[] = {{"cuCtxCreate_v2", offsetof(mw__cuda_api, cuCtxCreate)}};
  static const mw__dl_sym v4[] = {{"cuCtxCreate_v4", 0}};
  if (mw__dl_resolve(lib, v2, 1, &mw__cu)) {
    if (mw__dl_resolve(lib, v4, 1, &ctx_create_v4)) {
      set_msg("%s has neither cuCtxCreate_v2 nor cuCtxCreate_v4", mw__cu.path);
      return MW_ENODEV;
    }
    mw__cu.cuCtxCreate = ctx_create_via_v4;
  }
  return 0;
}

static void load(void) {
  void *lib = NULL;
  mw_CUresult r;
  char path[sizeof mw__cu.path];

  load_rc = open_library(&lib);
  if (load_rc) goto fail;
  load_rc = resolve_all(lib);
  if (load_rc) goto fail;

  r = mw__cu.cuInit(0);
  if (r != MW_CUDA_SUCCESS) {
    load_rc = MW_ENODEV;
    if (r == MW_CUDA_ERROR_NO_DEVICE)
      set_msg("no CUDA device: cuInit returned CUDA_ERROR_NO_DEVICE");
    else if (r == MW_CUDA_ERROR_STUB_LIBRARY)
      set_msg("%s is the CUDA toolkit's stub library, not an NVIDIA driver: cuInit returned "
              "CUDA_ERROR_STUB_LIBRARY",
              mw__cu.path);
    else
      set_msg("cuInit failed: %s", mw__cuda_errstr(r));
    goto fail;
  }
  r = mw__cu.cuDriverGetVersion(&mw__cu.driver_version);
  if (r != MW_CUDA_SUCCESS) {
    load_rc = MW_ENODEV;
    set_msg("cuDriverGetVersion failed: %s", mw__cuda_errstr(r));
    goto fail;
  }
  load_msg[0] = '\0';
  return;

fail:
  /* Leave no half-filled table behind: mw__cuda_errstr checks cuGetErrorName. The library is
   * kept open (dlclose of a driver that ran cuInit is not safe). */
  memcpy(path, mw__cu.path, sizeof path);
  memset(&mw__cu, 0, sizeof mw__cu);
  memcpy(mw__cu.path, path, sizeof path);
}

int mw__cuda_load(char *err, size_t errlen) {
  pthread_once(&load_once, load);
  if (load_rc && err && errlen) snprintf(err, errlen, "%s", load_msg);
  return load_rc;
}

/* Names for the codes moonwarp is likely to meet, used when the driver cannot name them
 * itself (not loaded, or cuGetErrorName failed). */
static const char *builtin_name(mw_CUresult r) {
  switch (r) {
#define MW_CUDA_NAME(name, value) \
  case MW_##name:                \
    return #name;
    MW_CUDA_RESULTS(MW_CUDA_NAME)
#undef MW_CUDA_NAME
  default:
    return NULL;
  }
}

const char *mw__cuda_errstr(mw_CUresult r) {
  static _Thread_local char buf[256];
  const char *name = NULL, *desc = NULL;

  if (mw__cu.cuGetErrorName && mw__cu.cuGetErrorName(r, &name) != MW_CUDA_SUCCESS) name = NULL;
  if (mw__cu.cuGetErrorString && mw__cu.cuGetErrorString(r, &desc) != MW_CUDA_SUCCESS)
    desc = NULL;
  if (!name) name = builtin_name(r);

  if (name && desc)
    snprintf(buf, sizeof buf, "%s: %s", name, desc);
  else if (name)
    snprintf(buf, sizeof buf, "%s", name);
  else
    snprintf(buf, sizeof buf, "CUDA error %d", r);
  return buf;
}

int mw__cuda_is_sticky(mw_CUresult r) {
  switch (r) {
  case MW_CUDA_ERROR_ILLEGAL_ADDRESS:
  case MW_CUDA_ERROR_LAUNCH_TIMEOUT:
  case MW_CUDA_ERROR_ASSERT:
  case MW_CUDA_ERROR_HARDWARE_STACK_ERROR:
  case MW_CUDA_ERROR_ILLEGAL_INSTRUCTION:
  case MW_CUDA_ERROR_MISALIGNED_ADDRESS:
  case MW_CUDA_ERROR_INVALID_ADDRESS_SPACE:
  case MW_CUDA_ERROR_INVALID_PC:
  case MW_CUDA_ERROR_LAUNCH_FAILED:
  case MW_CUDA_ERROR_TENSOR_MEMORY_LEAK:
    return 1;
  default:
    return 0;
  }
}

int mw__cuda_error(mw_CUresult r, const char *what, char *err, size_t errlen) {
  if (r == MW_CUDA_SUCCESS) return 0;
  if (err && errlen) snprintf(err, errlen, "%s: %s", what ? what : "CUDA", mw__cuda_errstr(r));
  if (r == MW_CUDA_ERROR_OUT_OF_MEMORY) return MW_ENOMEM;
  if (mw__cuda_is_sticky(r)) return MW_EFAULT;
  if (r == MW_CUDA_ERROR_NO_DEVICE || r == MW_CUDA_ERROR_INVALID_DEVICE) return MW_ENODEV;
  return MW_ECUDA;
}
