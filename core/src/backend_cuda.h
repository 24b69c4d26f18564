/* backend_cuda.h - the parts of the cuda backend (backend_cuda.c) that its device process and
 * proxy (device_proc.c) share beyond the ops table. */
#ifndef MW_BACKEND_CUDA_H
#define MW_BACKEND_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

#define MW__CUDA_DEFAULT_CAPACITY (1u << 20) /* task frames of a cuda runtime by default */
/* What the two cuda ops tables (the device process's proxy and the backend in this process)
 * say alike of the backend: their first fields. */
#define MW__CUDA_TRAITS                                                                   \
  .name = "cuda", .host_code = 0, .cta_in_memory = 0, .shares_cpus = 0,                   \
  .default_capacity = MW__CUDA_DEFAULT_CAPACITY, .claim_device = 1, .clock = "%globaltimer"

/* Whether a cuda device answers: 0, else MW_E* with why in err. Initialises the driver in this
 * process (the probe of mw__backend_cuda_local, and of the device process's `probe`). */
int mw__cuda_probe(char *err, size_t n);

/* The device process's requests beyond the ops, on a backend of mw__backend_cuda_local: */
/* pins host memory the library shares (a memfd mapping) for the device: its address in *dev */
int mw__cuda_register_host(mw__backend *be, void *host, size_t n, uint64_t *dev);
void mw__cuda_unregister_host(mw__backend *be, void *host);

#endif
