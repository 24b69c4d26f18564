/* buffers.c - a runtime's device buffers: allocate, write, read, free. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "util.h"

/* ---- buffers ------------------------------------------------------------------------------- */

MW_API int mw_buffer_alloc(mw_runtime *rt, size_t bytes, mw_buffer **out) {
  MW_NOT_NULL(out, "mw_buffer_alloc");
  *out = NULL;
  MW_NOT_NULL(rt, "mw_buffer_alloc");
  if (bytes == 0) {
    mw__rt_error(rt, "mw_buffer_alloc: a buffer of 0 bytes");
    return MW_EINVAL;
  }
  if (rt->faulted) return MW_EFAULT;
  mw_buffer *b = calloc(1, sizeof *b);
  if (!b) return MW_ENOMEM;
  int rc = rt->ops->alloc(rt->be, bytes, &b->dev);
  if (rc) {
    free(b);
    return rc;
  }
  b->rt = rt;
  b->size = bytes;
  b->next = rt->buffers;
  if (rt->buffers) rt->buffers->prev = b;
  rt->buffers = b;
  *out = b;
  mw__relaunch_after_alloc(rt);
  return 0;
}

/* compute-sanitizer memcheck takes the table of allocations when a kernel is launched, so it
 * reports every access of a persistent kernel to memory allocated after its launch as out of
 * bounds. MOONWARP_RELAUNCH_AFTER_ALLOC=1 relaunches the executor (tasks carry on) after each
 * such allocation so that it knows it; a relaunch refused by a running task leaves the
 * executor as it is, one that cannot start again faults the runtime. */
void mw__relaunch_after_alloc(mw_runtime *rt) {
  const char *e = getenv("MOONWARP_RELAUNCH_AFTER_ALLOC");
  if (e && !strcmp(e, "1") && rt->running && !rt->faulted &&
      mw__stop_executor(rt, rt->relaunch_timeout) == 0)
    mw__restart_executor(rt);
}

static int buffer_range(mw_buffer *b, size_t off, size_t n) {
  if (off > b->size || n > b->size - off) {
    mw__rt_error(b->rt, "buffer range [%zu, %zu) is outside its %zu bytes", off, off + n, b->size);
    return MW_ERANGE;
  }
  if (b->rt->faulted) return MW_EFAULT;
  return 0;
}

MW_API int mw_buffer_write(mw_buffer *b, size_t offset, const void *src, size_t bytes) {
  MW_NOT_NULL(b, "mw_buffer_write");
  if (bytes && !src) return mw__null_arg("mw_buffer_write", "src");
  int rc = buffer_range(b, offset, bytes);
  return rc ? rc : bytes ? b->rt->ops->h2d(b->rt->be, b->dev + offset, src, bytes) : 0;
}

MW_API int mw_buffer_read(mw_buffer *b, size_t offset, void *dst, size_t bytes) {
  MW_NOT_NULL(b, "mw_buffer_read");
  if (bytes && !dst) return mw__null_arg("mw_buffer_read", "dst");
  int rc = buffer_range(b, offset, bytes);
  return rc ? rc : bytes ? b->rt->ops->d2h(b->rt->be, dst, b->dev + offset, bytes) : 0;
}

MW_API uint64_t mw_buffer_address(const mw_buffer *b) { return b ? b->dev : 0; }
MW_API size_t mw_buffer_size(const mw_buffer *b) { return b ? b->size : 0; }

MW_API void mw_buffer_free(mw_buffer *b) {
  if (!b) return;
  mw_runtime *rt = b->rt;
  if (!rt->faulted && !rt->abandoned) rt->ops->free(rt->be, b->dev);
  if (b->prev) b->prev->next = b->next;
  else rt->buffers = b->next;
  if (b->next) b->next->prev = b->prev;
  free(b);
}
