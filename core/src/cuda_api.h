/* cuda_api.h - the CUDA driver API, resolved from libcuda with dlopen at first use. */
#ifndef MW_CUDA_API_H
#define MW_CUDA_API_H

#include <stddef.h>

/* Only the types and constants moonwarp uses, declared here so that the library builds and
 * loads without the CUDA toolkit. The struct tags are the driver's own, so these handle types
 * are the same types as cuda.h's should both ever meet in one file. Values are those of
 * cuda.h (CUDA 12 and 13 agree on all of them). */
typedef int mw_CUresult;
typedef int mw_CUdevice;
typedef struct CUctx_st *mw_CUcontext;
typedef struct CUmod_st *mw_CUmodule;
typedef struct CUfunc_st *mw_CUfunction;
typedef struct CUstream_st *mw_CUstream;
typedef unsigned long long mw_CUdeviceptr;

/* The driver's result codes moonwarp meets, once: the enum below and the names the library
 * gives when the driver cannot name a code itself (cuda_api.c). */
#define MW_CUDA_RESULTS(X) \
  X(CUDA_SUCCESS, 0) \
  X(CUDA_ERROR_INVALID_VALUE, 1) \
  X(CUDA_ERROR_OUT_OF_MEMORY, 2) \
  X(CUDA_ERROR_NOT_INITIALIZED, 3) \
  X(CUDA_ERROR_DEINITIALIZED, 4) \
  X(CUDA_ERROR_STUB_LIBRARY, 34) \
  X(CUDA_ERROR_NO_DEVICE, 100) \
  X(CUDA_ERROR_INVALID_DEVICE, 101) \
  X(CUDA_ERROR_INVALID_IMAGE, 200) \
  X(CUDA_ERROR_INVALID_CONTEXT, 201) \
  X(CUDA_ERROR_NO_BINARY_FOR_GPU, 209) \
  X(CUDA_ERROR_INVALID_PTX, 218) \
  X(CUDA_ERROR_UNSUPPORTED_PTX_VERSION, 222) \
  X(CUDA_ERROR_INVALID_HANDLE, 400) \
  X(CUDA_ERROR_NOT_FOUND, 500) \
  X(CUDA_ERROR_NOT_READY, 600) \
  X(CUDA_ERROR_ILLEGAL_ADDRESS, 700) \
  X(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, 701) \
  X(CUDA_ERROR_LAUNCH_TIMEOUT, 702) \
  X(CUDA_ERROR_ASSERT, 710) \
  X(CUDA_ERROR_HARDWARE_STACK_ERROR, 714) \
  X(CUDA_ERROR_ILLEGAL_INSTRUCTION, 715) \
  X(CUDA_ERROR_MISALIGNED_ADDRESS, 716) \
  X(CUDA_ERROR_INVALID_ADDRESS_SPACE, 717) \
  X(CUDA_ERROR_INVALID_PC, 718) \
  X(CUDA_ERROR_LAUNCH_FAILED, 719) \
  X(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, 720) \
  X(CUDA_ERROR_TENSOR_MEMORY_LEAK, 721) \
  X(CUDA_ERROR_NOT_SUPPORTED, 801) \
  X(CUDA_ERROR_UNKNOWN, 999)

enum {
#define MW_CUDA_ENUM(name, value) MW_##name = value,
  MW_CUDA_RESULTS(MW_CUDA_ENUM)
#undef MW_CUDA_ENUM
};

enum {
  MW_CU_CTX_SCHED_AUTO = 0x00,
  MW_CU_CTX_SCHED_SPIN = 0x01,
  MW_CU_CTX_SCHED_YIELD = 0x02,
  MW_CU_CTX_SCHED_BLOCKING_SYNC = 0x04,
  MW_CU_CTX_MAP_HOST = 0x08,

  MW_CU_STREAM_DEFAULT = 0x0,
  MW_CU_STREAM_NON_BLOCKING = 0x1,

  MW_CU_MEMHOSTALLOC_PORTABLE = 0x01,
  MW_CU_MEMHOSTALLOC_DEVICEMAP = 0x02,
  MW_CU_MEMHOSTALLOC_WRITECOMBINED = 0x04
};

/* CUdevice_attribute */
enum {
  MW_CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
  MW_CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8,
  MW_CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10,
  MW_CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13,
  MW_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  MW_CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT = 17,
  MW_CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY = 19,
  MW_CU_DEVICE_ATTRIBUTE_COMPUTE_MODE = 20,
  MW_CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS = 31,
  MW_CU_DEVICE_ATTRIBUTE_PCI_BUS_ID = 33,
  MW_CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID = 34,
  MW_CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR = 39,
  MW_CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING = 41,
  MW_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  MW_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  MW_CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81,
  MW_CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED = 115
};

/* CUfunction_attribute */
enum {
  MW_CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,
  MW_CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
  MW_CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES = 2,
  MW_CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3,
  MW_CU_FUNC_ATTRIBUTE_NUM_REGS = 4,
  MW_CU_FUNC_ATTRIBUTE_PTX_VERSION = 5,
  MW_CU_FUNC_ATTRIBUTE_BINARY_VERSION = 6,
  MW_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
  MW_CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT = 9
};

/* The driver entry points. Each member is named after the API function without its version
 * suffix and points at the versioned symbol cuda.h maps that name to (cuMemAlloc is
 * cuMemAlloc_v2, ...), so the signatures are those of the current API. The legacy
 * default-stream variants are used (not _ptsz/_ptds): moonwarp names its streams. cuCtxCreate
 * has the pre-CUDA-13 signature (ctx, flags, dev) whatever the driver.
 *
 * Filled once by mw__cuda_load(); read-only afterwards, so any thread may call through it
 * once mw__cuda_load() has returned 0. */
typedef struct mw__cuda_api {
  mw_CUresult (*cuInit)(unsigned int flags);
  mw_CUresult (*cuDriverGetVersion)(int *version);
  mw_CUresult (*cuDeviceGetCount)(int *count);
  mw_CUresult (*cuDeviceGet)(mw_CUdevice *dev, int ordinal);
  mw_CUresult (*cuDeviceGetAttribute)(int *value, int attrib, mw_CUdevice dev);
  mw_CUresult (*cuCtxCreate)(mw_CUcontext *ctx, unsigned int flags, mw_CUdevice dev);
  mw_CUresult (*cuCtxDestroy)(mw_CUcontext ctx);
  mw_CUresult (*cuCtxSetCurrent)(mw_CUcontext ctx);
  mw_CUresult (*cuCtxSetLimit)(int limit, size_t value); /* CUlimit: 0 is CU_LIMIT_STACK_SIZE */
  mw_CUresult (*cuModuleLoadData)(mw_CUmodule *mod, const void *image);
  mw_CUresult (*cuModuleUnload)(mw_CUmodule mod);
  mw_CUresult (*cuModuleGetFunction)(mw_CUfunction *fn, mw_CUmodule mod, const char *name);
  mw_CUresult (*cuModuleGetGlobal)(mw_CUdeviceptr *dptr, size_t *bytes, mw_CUmodule mod, const char *name);
  mw_CUresult (*cuFuncGetAttribute)(int *value, int attrib, mw_CUfunction fn);
  mw_CUresult (*cuFuncSetAttribute)(mw_CUfunction fn, int attrib, int value);
  mw_CUresult (*cuLaunchKernel)(mw_CUfunction fn, unsigned int gx, unsigned int gy,
                                unsigned int gz, unsigned int bx, unsigned int by,
                                unsigned int bz, unsigned int shared_bytes, mw_CUstream stream,
                                void **params, void **extra);
  mw_CUresult (*cuStreamCreate)(mw_CUstream *stream, unsigned int flags);
  mw_CUresult (*cuStreamQuery)(mw_CUstream stream);
  mw_CUresult (*cuStreamSynchronize)(mw_CUstream stream);
  mw_CUresult (*cuMemAlloc)(mw_CUdeviceptr *dptr, size_t bytes);
  mw_CUresult (*cuMemFree)(mw_CUdeviceptr dptr);
  mw_CUresult (*cuMemHostAlloc)(void **p, size_t bytes, unsigned int flags);
  mw_CUresult (*cuMemGetAddressRange)(mw_CUdeviceptr *base, size_t *size, mw_CUdeviceptr p);
  mw_CUresult (*cuMemHostRegister)(void *p, size_t bytes, unsigned int flags);
  mw_CUresult (*cuMemHostUnregister)(void *p);
  mw_CUresult (*cuMemFreeHost)(void *p);
  mw_CUresult (*cuMemHostGetDevicePointer)(mw_CUdeviceptr *dptr, void *p, unsigned int flags);
  mw_CUresult (*cuMemcpyHtoDAsync)(mw_CUdeviceptr dst, const void *src, size_t bytes,
                                   mw_CUstream stream);
  mw_CUresult (*cuMemcpyDtoHAsync)(void *dst, mw_CUdeviceptr src, size_t bytes,
                                   mw_CUstream stream);
  mw_CUresult (*cuOccupancyMaxActiveBlocksPerMultiprocessor)(int *blocks, mw_CUfunction fn,
                                                             int block_size,
                                                             size_t dynamic_shared_bytes);
  mw_CUresult (*cuGetErrorName)(mw_CUresult r, const char **name);
  mw_CUresult (*cuGetErrorString)(mw_CUresult r, const char **desc);

  int driver_version; /* from cuDriverGetVersion: 1000 * major + 10 * minor */
  char path[256];     /* the library that was opened */
} mw__cuda_api;

extern mw__cuda_api mw__cu;

/* Opens libcuda, resolves every entry point and calls cuInit(0), once per process (later calls
 * return the first outcome). Tries $MOONWARP_LIBCUDA alone when it is set, else
 * "libcuda.so.1" then "libcuda.so". Returns 0, or MW_ENODEV with a message in err saying what
 * is missing (no driver, a stub library, a driver too old, no device). Thread-safe. */
int mw__cuda_load(char *err, size_t errlen);

/* "CUDA_ERROR_NAME: description" for r. The string lives in a per-thread buffer valid until the
 * next call on the same thread. Works before or without a loaded driver (then the name only). */
const char *mw__cuda_errstr(mw_CUresult r);

/* Nonzero for the errors that leave the context unusable (illegal address, launch failure,
 * device-side assert, ...): recovery needs a new context. */
int mw__cuda_is_sticky(mw_CUresult r);

/* For a failed call: writes "what: CUDA_ERROR_NAME: description" into err and returns the
 * MW_E* code it maps to (MW_ENOMEM, MW_EFAULT for sticky errors, MW_ENODEV, else MW_ECUDA).
 * Returns 0 and leaves err alone when r is MW_CUDA_SUCCESS. */
int mw__cuda_error(mw_CUresult r, const char *what, char *err, size_t errlen);

#endif /* MW_CUDA_API_H */
