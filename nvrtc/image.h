/* image.h - compiling a generated program into an executor image (an NVRTC cubin, or a shared
 * object of the host C++ compiler) through the compile cache: the one place images are made. */
#ifndef MW_IMAGE_H
#define MW_IMAGE_H

#include <stddef.h>

#include "program.h"

/* What an image is compiled from. */
typedef struct mw__image_req {
  const char *source;       /* the generated translation unit (mw__generate) */
  const mw__build_opts *bo; /* include directories, debug, the headers' digest; NULL: none */
  int host_code;            /* 1: the host C++ compiler, a shared object; 0: NVRTC, a cubin */
  int arch;                 /* NVRTC: the device's compute capability (90 for sm_90) */
  /* 1: no cache, no dump, none of the environment's executor options (mw_compile_cubin) */
  int offline;
  /* 1: a part of an image (mw__generate_part), compiled to link with the others
   * (mw__image_link): an object file (host), a relocatable cubin (NVRTC -rdc=true) */
  int object;
  /* with object, a one-unit image (compile_one_unit): the static library its link adds (the
   * device runtime's, mw__cudadevrt, for an image that launches grids); NULL: none */
  const char *library;
  /* the programs the source was generated from with canonical places (mw__gen_opts.canon):
   * the compiler's messages name their files and lines (mw__user_places); 0: none */
  mw__parsed *const *progs;
  int nprogs;
} mw__image_req;

/* An image and where it came from. */
typedef struct mw__image {
  void *data;      /* malloc'd */
  size_t size;
  int cached;      /* read from the cache: a backend that refuses it calls mw__image_evict */
  char key[65];    /* its cache entry ("" when offline) */
  const char *ext; /* the entry's suffix: "so" or "cubin" */
} mw__image;

/* Whether the compiler of host_code can run here: 0, else MW_ENODEV with "NVRTC: why" in err. */
int mw__image_compiler_ready(int host_code, char *err, size_t errlen);

/* Compiles req into *out, or finds it in the cache ($MOONWARP_NO_CACHE, cache.h), and writes
 * the source to $MOONWARP_DUMP_DIR first (unless offline). The key holds the source, the
 * compiler, its options, the target and the headers reached. 0, or MW_ECOMPILE with the
 * compiler's log in the user's terms in err, MW_ETIMEDOUT (the host compiler ran out of time),
 * MW_ENODEV (no compiler), MW_EIO, MW_EINVAL (a bad MOONWARP_DEVICE_DEFINE), MW_ENOMEM. log,
 * when not NULL, receives the compiler's whole output (malloc'd, NULL if none): its warnings
 * on success, the log in the user's terms on failure. Thread-safe. */
int mw__image_compile(const mw__image_req *req, mw__image *out, char *err, size_t errlen,
                      char **log);

/* Links parts (compiled with object set, all for host_code and arch) into an image, with the
 * static library at path library too (NVRTC only; NULL: none), or finds the image in the cache:
 * its key is the parts' keys and the library's path (an image of parts not in the cache is not
 * kept). 0, or MW_ECOMPILE (the linker's message in err), MW_ENODEV (no linker), MW_EIO,
 * MW_ETIMEDOUT, MW_ENOMEM. Thread-safe. */
int mw__image_link(const mw__image *const *parts, int n, int host_code, int arch, const char *library,
                   mw__image *out, char *err, size_t errlen);

/* Removes the cache entry an image came from (one that passed its checksum but that its
 * backend could not load: left by another version or a changed system), so that the next
 * compile makes it afresh. */
void mw__image_evict(const mw__image *img);

/* Frees the image's bytes (img may be zeroed). */
void mw__image_free(mw__image *img);

#endif /* MW_IMAGE_H */
