/* jit.h - NVRTC, opened with dlopen at first use: compiles generated CUDA C to a cubin (or PTX). */
#ifndef MW_JIT_H
#define MW_JIT_H

#include <stddef.h>

/* Opens libnvrtc and resolves its entry points, once per process (later calls return the first
 * outcome). $MOONWARP_NVRTC, when set, is the only library tried; otherwise "libnvrtc.so",
 * "libnvrtc.so.13", "libnvrtc.so.12" through the loader's search path, then lib64/ under
 * $CUDA_HOME, $CUDA_PATH and /usr/local/cuda. Returns 0, or MW_ENODEV with a message in err
 * naming what was tried. Thread-safe. */
int mw__nvrtc_load(char *err, size_t errlen);

/* The loaded NVRTC's version. 0, or MW_ENODEV when NVRTC cannot be loaded. */
int mw__nvrtc_version(int *major, int *minor);

/* What a compile for a device of compute capability sm (major * 10 + minor, e.g. 90) produces:
 * a cubin for sm itself when this NVRTC supports it (*is_cubin = 1), else PTX for the newest
 * supported architecture below sm (*is_cubin = 0), which the driver JIT-compiles for the
 * device. *target is that architecture. Returns 0, MW_ENODEV when NVRTC cannot be loaded or
 * supports nothing at or below sm, MW_EINVAL for sm <= 0. */
int mw__nvrtc_target(int sm, int *target, int *is_cubin);

/* Compiles src (named name in messages; NULL means "<string>") for sm, with -lineinfo (left out
 * when the caller's options ask for -G) and --std=c++17 followed by the caller's nopts options. On success returns 0, *image holds the
 * cubin or the NUL-terminated PTX (*size counts the NUL), *is_cubin says which, and *log holds
 * the compiler's warnings or NULL. On failure *image is NULL and *log holds the detailed
 * message: for MW_ECOMPILE the full NVRTC log, whose lines name the file and line of #line
 * directives ("user.cu(3): error: ..."). Other failures: MW_ENODEV (no NVRTC, or no usable
 * architecture), MW_EINVAL (bad argument or option), MW_ENOMEM. *image and *log are malloc'd
 * and the caller frees them; log may be NULL when the caller does not want it. Thread-safe. */
int mw__nvrtc_compile(const char *src, const char *name, int sm, const char *const *opts,
                      int nopts, void **image, size_t *size, int *is_cubin, char **log);

/* Links the parts of an image (relocatable cubins of compiles with -rdc=true, or PTX where
 * is_cubin[i] is 0) into one cubin for sm with nvJitLink, opened with dlopen at first use
 * ($MOONWARP_NVJITLINK, else libnvJitLink.so, .so.13, .so.12 as NVRTC is looked for). 0 with
 * *image (malloc'd) and *size, or MW_ECOMPILE / MW_ENODEV / MW_ENOMEM with the message in *log
 * (malloc'd; log may be NULL). Thread-safe. */
int mw__nvjitlink(int sm, const void *const *parts, const size_t *sizes, const int *is_cubin,
                  int n, const char *library, void **image, size_t *size, char **log);
/* library: a static library linked in too (the device runtime's, for launches from the device),
 * or NULL. */

/* The CUDA device runtime library (libcudadevrt.a) that images launching grids from the device
 * are linked with: $MOONWARP_CUDADEVRT, else beside the nvJitLink library found, else in
 * $CUDA_HOME/lib64 or /usr/local/cuda/lib64; NULL when there is none (such images are not
 * built then). Thread-safe. */
const char *mw__cudadevrt(void);

#endif /* MW_JIT_H */
