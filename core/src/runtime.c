/* runtime.c - the host side of a runtime: its creation and close, the device state, the executor's
 * start, stop and health, and the failure messages in the user's lines. Backend-neutral; its
 * programs (programs.c), host channel (host_futures.c), buffers (buffers.c) and statistics
 * (stats.c) have files of their own. */
#include <errno.h>
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "image.h"
#include "internal.h"
#include "jit.h"
#include "util.h"

#define DEFAULT_HOST_FUTURES (1u << 16)
#define INBOX_CAP 4096u
#define MAX_CAPACITY (1u << 26)

void mw__rt_error(mw_runtime *rt, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(rt->err, sizeof rt->err, fmt, ap);
  va_end(ap);
  mw__set_error_str(rt->err);
}

void mw__put_error(char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
  mw__set_error_str(err);
}

static uint32_t pow2_at_least(uint64_t n) {
  uint64_t p = 1;
  while (p < n) p <<= 1;
  return (uint32_t)p;
}

/* The cuda backend runs in a device process (device_proc.c) unless MOONWARP_CUDA_INPROCESS=1
 * asks for the driver in this process (for cuda-gdb; a device fault then ends CUDA for the
 * whole process). */
static const mw__backend_ops *cuda_ops(void) {
  const char *e = getenv("MOONWARP_CUDA_INPROCESS");
  return e && !strcmp(e, "1") ? &mw__backend_cuda_local : &mw__backend_cuda;
}

static const mw__backend_ops *pick_backend(const char *name, char *why, size_t whylen) {
  if (!name || !*name) name = getenv("MOONWARP_BACKEND");
  if (!name || !*name || !strcmp(name, "auto")) {
    /* auto: cuda where a device answers, else sim */
    const mw__backend_ops *cu = cuda_ops();
    return cu->probe(why, whylen) == 0 ? cu : &mw__backend_sim;
  }
  if (!strcmp(name, "cuda")) return cuda_ops();
  if (!strcmp(name, "sim")) return &mw__backend_sim;
  snprintf(why, whylen, "unknown backend '%s' (expected auto, cuda or sim)", name);
  return NULL;
}

/* mw__backend_args.user_places: msg with the canonical places of the running image's programs
 * put as their files and lines (mw__user_places), into out. */
static void user_places(void *ctx, const char *msg, char *out, size_t cap) {
  mw_runtime *rt = ctx;
  char *m = mw__user_places(msg, rt->run_progs, rt->run_nprogs);
  mw__copy_cut(out, cap, m ? m : msg);
  free(m);
}

/* The program that holds a task named name, of the given length: the one of kind when it has
 * such a task, else the first loaded that does; NULL if none. */
static const mw__parsed *program_of_task(const mw_runtime *rt, const char *name, size_t len,
                                         uint32_t kind) {
  const mw__parsed *first = NULL;
  for (int i = 0; i < rt->nprogs; ++i) {
    const mw__parsed *p = &rt->progs[i]->parsed;
    int named = 0, has_kind = 0;
    for (int k = 0; k < p->ntasks; ++k) {
      named |= strlen(p->tasks[k].name) == len && !strncmp(p->tasks[k].name, name, len);
      has_kind |= p->tasks[k].kind == kind;
    }
    if (named && has_kind) return p;
    if (named && !first) first = p;
  }
  return first;
}

/* The line of p's file that line of the running image's code of p is: its lines are counted in
 * canonical places unless it was built for a debugger (mw__parsed.debug). */
static int image_line(const mw_runtime *rt, const mw__parsed *p, int line) {
  (void)rt;
  return p->debug ? line : mw__user_line(p, line);
}

/* A task's failure message with the executor's line (MW_DIVERGED_AT: "t: spawn ... at line 3")
 * put as the line of the user's file; kind is the task whose result it is (the failing task t,
 * or one that awaited it). */
static void block_message_lines(const mw_runtime *rt, uint32_t kind, char *msg, size_t cap);
void mw__user_message_line(const mw_runtime *rt, uint32_t kind, char *msg, size_t cap) {
  if (strstr(msg, MW_BLK_DIVERGED)) {
    block_message_lines(rt, kind, msg, cap);
    return;
  }
  const char *at = strstr(msg, MW_DIVERGED_AT), *colon = strstr(msg, ": ");
  if (!at || !colon || colon > at) return;
  const mw__parsed *p = program_of_task(rt, msg, (size_t)(colon - msg), kind);
  char *end;
  long line = strtol(at + strlen(MW_DIVERGED_AT), &end, 10);
  if (!p || *end || line <= 0 || line > 100000000) return;
  size_t pos = (size_t)(at - msg) + strlen(MW_DIVERGED_AT);
  snprintf(msg + pos, cap - pos, "%d", image_line(rt, p, (int)line));
}

/* A block task's failure at barriers that the warps reached apart ("t" MW_BLK_DIVERGED "line 3
 * (warp 0), line 5 (warps 1 2 3)", protocol.h): each "line N" after the marker put as the line of
 * the user's file. */
static void block_message_lines(const mw_runtime *rt, uint32_t kind, char *msg, size_t cap) {
  const char *at = strstr(msg, MW_BLK_DIVERGED);
  const mw__parsed *p = program_of_task(rt, msg, (size_t)(at - msg), kind);
  if (!p) return;
  char out[512];
  size_t from = (size_t)(at - msg) + strlen(MW_BLK_DIVERGED), n = 0;
  memcpy(out, msg, from);
  n = from;
  for (const char *s = msg + from; *s && n < sizeof out - 16;) {
    char *end;
    long line;
    if (!strncmp(s, "line ", 5) && s[5] >= '0' && s[5] <= '9' && (line = strtol(s + 5, &end, 10)) > 0 &&
        line < 100000000) {
      n += (size_t)snprintf(out + n, sizeof out - n, "line %d", image_line(rt, p, (int)line));
      s = end;
    } else {
      out[n++] = *s++;
    }
  }
  out[n] = 0;
  mw__copy_cut(msg, cap, out);
}

/* The program of the running image that holds the task of kind (the task in *task when task is
 * not NULL), or NULL. Safe on executor threads. */
static const mw__parsed *kind_program(const mw_runtime *rt, uint32_t kind, const mw__task **task) {
  for (int i = 0; i < rt->run_nprogs; ++i)
    for (int k = 0; k < rt->run_progs[i]->ntasks; ++k)
      if (rt->run_progs[i]->tasks[k].kind == kind) {
        if (task) *task = &rt->run_progs[i]->tasks[k];
        return rt->run_progs[i];
      }
  return NULL;
}

int mw__kind_line(const mw_runtime *rt, uint32_t kind, int line) {
  const mw__parsed *p = kind_program(rt, kind, NULL);
  return p ? image_line(rt, p, line) : line;
}

/* mw__backend_args.find_task: the task of kind among the loaded programs. */
static int find_task(void *ctx, uint32_t kind, const char **name, const char **file, int *line) {
  const mw__task *tk;
  const mw__parsed *p = kind_program(ctx, kind, &tk);
  if (!p) return 0;
  *name = tk->name;
  *file = p->file;
  *line = tk->line;
  return 1;
}

/* ---- one executor per device ------------------------------------------------------------
 * Two persistent kernels in two contexts of one process do not share the GPU: the second one
 * waits for the first to end, which it never does (seen on the H200 as a hang). So a process
 * holds at most one open cuda runtime per device, and asking for a second one is an error. */
#define MAX_DEVICES 64
static pthread_mutex_t owners_lock = PTHREAD_MUTEX_INITIALIZER;
static mw_runtime *cuda_owner[MAX_DEVICES];

static int claim_device(mw_runtime *rt, int device) {
  if (device < 0 || device >= MAX_DEVICES) return 0; /* the backend reports bad ordinals */
  pthread_mutex_lock(&owners_lock);
  int busy = cuda_owner[device] != NULL;
  if (!busy) cuda_owner[device] = rt;
  pthread_mutex_unlock(&owners_lock);
  if (busy) {
    mw__set_error("device %d already runs the executor of another open runtime in this "
                  "process: close that runtime first (one executor per device)", device);
    return MW_ECAPACITY;
  }
  return 0;
}

static void release_device(mw_runtime *rt) {
  pthread_mutex_lock(&owners_lock);
  for (int i = 0; i < MAX_DEVICES; ++i)
    if (cuda_owner[i] == rt) cuda_owner[i] = NULL;
  pthread_mutex_unlock(&owners_lock);
}

/* ---- device state ------------------------------------------------------------------------- */

_Static_assert(sizeof(mw_frame_hdr) == MW_FRAME_HDR_BYTES, "frame header size (protocol.h)");
_Static_assert(sizeof(mw_slot) == 144, "future slot size (protocol.h)");
_Static_assert(offsetof(mw_state, stop_arrived) == offsetof(mw_state, stop) + 4 &&
                   offsetof(mw_state, hungry) == offsetof(mw_state, stop) + 8,
               "stop_arrived and hungry follow stop: one copy resets them (protocol.h, Stopping)");

/* Pinned rings and control block: the host and the device both reach them. */
static int alloc_rings(mw_runtime *rt) {
  const mw__backend_ops *o = rt->ops;
  int rc;
  if ((rc = o->alloc_pinned(rt->be, sizeof(mw_control), (void **)&rt->ctl, &rt->ctl_dev))) return rc;
  memset((void *)rt->ctl, 0, sizeof(mw_control));
  rt->inbox_cap = INBOX_CAP;
  if ((rc = o->alloc_pinned(rt->be, sizeof(mw_inbox_cell) * rt->inbox_cap, (void **)&rt->inbox,
                            &rt->inbox_dev)) ||
      (rc = o->alloc_pinned(rt->be, sizeof(uint64_t) * rt->inbox_cap, (void **)&rt->inbox_free,
                            &rt->inbox_free_dev)))
    return rc;
  memset(rt->inbox, 0, sizeof(mw_inbox_cell) * rt->inbox_cap);
  for (uint32_t i = 0; i < rt->inbox_cap; ++i) rt->inbox_free[i] = i;
  rt->comp_cap = pow2_at_least(rt->host_slots);
  if ((rc = o->alloc_pinned(rt->be, sizeof(mw_comp_cell) * rt->comp_cap, (void **)&rt->comp,
                            &rt->comp_dev)) ||
      (rc = o->alloc_pinned(rt->be, (size_t)MW_MSG_BYTES * rt->comp_cap, (void **)&rt->comp_msg,
                            &rt->comp_msg_dev)))
    return rc;
  memset(rt->comp, 0, sizeof(mw_comp_cell) * rt->comp_cap);
  memset(rt->comp_msg, 0, (size_t)MW_MSG_BYTES * rt->comp_cap);
  if ((rc = o->alloc_pinned(rt->be, sizeof(uint32_t) * rt->host_slots, (void **)&rt->closed,
                            &rt->closed_dev)))
    return rc;
  memset(rt->closed, 0, sizeof(uint32_t) * rt->host_slots);
  return 0;
}

/* The kind counters (protocol.h, per-worker rows): MW_MAX_KINDS spill rows, then each worker's
 * MW_STAT_ENTRIES entries, in one array. */
size_t mw__stats_bytes(const mw_runtime *rt) {
  return MW_MAX_KINDS * sizeof(mw_stat_row) +
         (size_t)rt->max_workers * MW_STAT_ENTRIES * sizeof(mw_stat_entry);
}
/* The same array goes on with the per-kind instance times (protocol.h, mw_state.inst_cycles). */
static size_t stats_and_hints_bytes(const mw_runtime *rt) {
  return mw__stats_bytes(rt) + MW_MAX_KINDS * sizeof(uint32_t);
}
uint64_t mw__hints_dev(const mw_runtime *rt) { return rt->stats_dev + mw__stats_bytes(rt); }

/* Device arrays; on sim also the CTAs' shared state (on the GPU it is on chip). */
static int alloc_arrays(mw_runtime *rt, uint32_t gq_cap) {
  const mw__backend_ops *o = rt->ops;
  size_t nf = rt->nframes, ns = rt->nslots, mw = rt->max_workers;
  uint32_t nctas = (uint32_t)((mw + MW_CTA_WARPS - 1) / MW_CTA_WARPS);
  int cta_mem = o->cta_in_memory;
  struct {
    uint64_t *dev;
    size_t bytes;
  } arrays[] = {
      {&rt->frames_dev, nf * rt->frame_bytes},
      {&rt->slots_dev, ns * sizeof(mw_slot)},
      {&rt->workers_dev, mw * sizeof(mw_worker)},
      {&rt->stats_dev, stats_and_hints_bytes(rt)},
      {&rt->frame_ring_dev, (size_t)pow2_at_least(nf) * sizeof(uint64_t)},
      {&rt->slot_next_dev, ns * sizeof(uint32_t)},
      {&rt->gq_dev, (size_t)gq_cap * sizeof(uint32_t)},
      {&rt->gq_seq_dev, (size_t)gq_cap * sizeof(uint64_t)},
      {&rt->nodes_dev, (size_t)rt->nnodes * sizeof(uint64_t)},
      {&rt->hrefs_dev, (size_t)rt->host_slots * sizeof(uint32_t)},
      {&rt->sim_cta_dev, cta_mem ? (size_t)nctas * MW_CTA_WARPS * sizeof(mw_wstate) : 0},
      {&rt->sim_block_dev, cta_mem ? (size_t)nctas * MW_BLOCK_SMEM : 0},
      {&rt->sim_blk_dev, cta_mem ? (size_t)nctas * sizeof(mw_blk_slot) : 0},
      {&rt->state_dev, sizeof(mw_state)},
  };
  int rc;
  for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; ++i)
    if (arrays[i].bytes && (rc = o->alloc(rt->be, arrays[i].bytes, arrays[i].dev))) return rc;
  return 0;
}

/* Fills buf, zeroed, with the elements [first, first + n) of an array of count elements. */
typedef void fill_fn(void *buf, size_t first, size_t n, size_t count);

/* future slots: generation 0, closed, so a handle of generation 1 reads as "not started" */
static void fill_closed(void *buf, size_t first, size_t n, size_t count) {
  (void)first;
  (void)count;
  mw_slot *s = buf;
  for (size_t i = 0; i < n; ++i) s[i].ctl = MW_CTL_CLOSED;
}

/* a free list of every element: each links to the next by its index + 1, the last holds 0 */
static void fill_links(void *buf, size_t first, size_t n, size_t count) {
  uint32_t *l = buf;
  for (size_t i = 0; i < n; ++i) l[i] = first + i + 1 < count ? (uint32_t)(first + i + 2) : 0;
}

/* the free frame ring holding every frame, cell i given by ticket i (protocol.h) */
static void fill_frame_ring(void *buf, size_t first, size_t n, size_t count) {
  (void)count;
  uint64_t *q = buf;
  for (size_t i = 0; i < n; ++i) q[i] = MW_FRING(first + i, first + i);
}

/* the same list in the high words of 64-bit elements */
static void fill_high_links(void *buf, size_t first, size_t n, size_t count) {
  uint64_t *q = buf;
  for (size_t i = 0; i < n; ++i) q[i] = first + i + 1 < count ? (uint64_t)(first + i + 2) << 32 : 0;
}

/* element i holds i */
static void fill_index(void *buf, size_t first, size_t n, size_t count) {
  (void)count;
  uint64_t *q = buf;
  for (size_t i = 0; i < n; ++i) q[i] = first + i;
}

/* Sets the count elements of size bytes of the device array at dev: built on the host a chunk
 * at a time, zeroed, then given to fill where it is not NULL. */
static int fill_array(mw_runtime *rt, uint64_t dev, size_t count, size_t size, fill_fn *fill) {
  const size_t chunk = (size_t)1 << 16;
  if (!count) return 0;
  void *tmp = malloc((count < chunk ? count : chunk) * size);
  if (!tmp) return MW_ENOMEM;
  int rc = 0;
  for (size_t b = 0; b < count && !rc; b += chunk) {
    size_t n = count - b < chunk ? count - b : chunk;
    memset(tmp, 0, n * size);
    if (fill) fill(tmp, b, n, count);
    rc = rt->ops->h2d(rt->be, dev + b * size, tmp, n * size);
  }
  free(tmp);
  return rc;
}

/* Initial contents of the device arrays, built on the host in chunks. */
static int fill_arrays(mw_runtime *rt, uint32_t gq_cap) {
  size_t mw = rt->max_workers;
  struct {
    uint64_t dev;
    size_t count, size;
    fill_fn *fill;
  } fills[] = {
      {rt->slots_dev, rt->nslots, sizeof(mw_slot), fill_closed},
      /* free lists: frames 0..nf-1 in the ring (zeroed whole first); device slots
       * host_slots..ns-1 (slot_head skips the host's) */
      {rt->frame_ring_dev, pow2_at_least(rt->nframes), sizeof(uint64_t), NULL},
      {rt->frame_ring_dev, rt->nframes, sizeof(uint64_t), fill_frame_ring},
      {rt->slot_next_dev, rt->nslots, sizeof(uint32_t), fill_links},
      {rt->gq_seq_dev, gq_cap, sizeof(uint64_t), fill_index},
      /* waiter nodes: all free, linked through their high words (protocol.h, waiter nodes) */
      {rt->nodes_dev, rt->nnodes, sizeof(uint64_t), fill_high_links},
      {rt->hrefs_dev, rt->host_slots, sizeof(uint32_t), NULL},
      {rt->workers_dev, mw, sizeof(mw_worker), NULL},
      {rt->stats_dev, stats_and_hints_bytes(rt) / sizeof(uint64_t), sizeof(uint64_t), NULL},
  };
  int rc;
  for (size_t i = 0; i < sizeof fills / sizeof fills[0]; ++i)
    if ((rc = fill_array(rt, fills[i].dev, fills[i].count, fills[i].size, fills[i].fill)))
      return rc;
  return 0;
}

/* The mw_state fields: sizes, where each array is and the heads of the free lists. */
static int init_state(mw_runtime *rt, uint32_t gq_cap) {
  mw_state *st = &rt->state;
  memset(st, 0, sizeof *st);
  st->nframes = rt->nframes;
  st->frame_bytes = rt->frame_bytes;
  st->stack_bytes = rt->stack_bytes;
  st->nslots = rt->nslots;
  st->host_slots = rt->host_slots;
  st->nworkers = rt->nworkers;
  st->inbox_cap = rt->inbox_cap;
  st->comp_cap = rt->comp_cap;
  st->gq_cap = gq_cap;
  uint64_t cache = rt->nframes / (rt->max_workers * 4u);
  st->cache_cap = cache > MW_CACHE_CAP ? MW_CACHE_CAP : (uint32_t)cache;
  st->ctl = (mw_control *)(uintptr_t)rt->ctl_dev;
  st->inbox = (mw_inbox_cell *)(uintptr_t)rt->inbox_dev;
  st->inbox_free = (mw_u64 *)(uintptr_t)rt->inbox_free_dev;
  st->comp = (mw_comp_cell *)(uintptr_t)rt->comp_dev;
  st->comp_msg = (char *)(uintptr_t)rt->comp_msg_dev;
  st->closed = (mw_u32 *)(uintptr_t)rt->closed_dev;
  st->frames = (mw_u8 *)(uintptr_t)rt->frames_dev;
  st->slots = (mw_slot *)(uintptr_t)rt->slots_dev;
  st->workers = (mw_worker *)(uintptr_t)rt->workers_dev;
  st->spill = (mw_stat_row *)(uintptr_t)rt->stats_dev;
  st->stats = (mw_stat_entry *)(uintptr_t)(rt->stats_dev + MW_MAX_KINDS * sizeof(mw_stat_row));
  st->inst_cycles = (mw_u32 *)(uintptr_t)mw__hints_dev(rt);
  st->frame_ring = (mw_u64 *)(uintptr_t)rt->frame_ring_dev;
  st->slot_next = (mw_u32 *)(uintptr_t)rt->slot_next_dev;
  st->gq = (mw_u32 *)(uintptr_t)rt->gq_dev;
  st->gq_seq = (mw_u64 *)(uintptr_t)rt->gq_seq_dev;
  st->nodes = (mw_u64 *)(uintptr_t)rt->nodes_dev;
  st->hrefs = (mw_u32 *)(uintptr_t)rt->hrefs_dev;
  st->sim_cta = (mw_wstate *)(uintptr_t)rt->sim_cta_dev;
  st->sim_block = (mw_u8 *)(uintptr_t)rt->sim_block_dev;
  st->sim_blk = (mw_blk_slot *)(uintptr_t)rt->sim_blk_dev;
  st->nnodes = rt->nnodes;
  st->node_head = rt->nnodes ? 1 : 0;
  st->frame_rmask = pow2_at_least(rt->nframes) - 1u;
  st->frame_rhead = 0;
  st->frame_rtail = rt->nframes;
  st->slot_head = rt->nslots > rt->host_slots ? rt->host_slots + 1 : 0;
  return rt->ops->h2d(rt->be, rt->state_dev, st, sizeof *st);
}

/* The executor's state: its rings, its device arrays and their contents, and mw_state. */
static int alloc_state(mw_runtime *rt) {
  /* frames, and the invitations of bulk tasks: up to MW_BULK_FANOUT (2) per worker, twice over */
  uint32_t gq_cap = pow2_at_least((uint64_t)rt->nframes + 4ull * rt->max_workers + 16);
  int rc = alloc_rings(rt);
  if (!rc) rc = alloc_arrays(rt, gq_cap);
  if (!rc) rc = fill_arrays(rt, gq_cap);
  if (!rc) rc = init_state(rt, gq_cap);
  return rc;
}

static void free_state(mw_runtime *rt) {
  const mw__backend_ops *o = rt->ops;
  uint64_t *devs[] = {&rt->frames_dev, &rt->slots_dev, &rt->workers_dev, &rt->stats_dev,
                      &rt->frame_ring_dev, &rt->slot_next_dev, &rt->gq_dev, &rt->gq_seq_dev,
                      &rt->nodes_dev, &rt->hrefs_dev, &rt->sim_cta_dev, &rt->sim_block_dev,
                      &rt->sim_blk_dev, &rt->state_dev};
  for (size_t i = 0; i < sizeof devs / sizeof devs[0]; ++i)
    if (*devs[i]) o->free(rt->be, *devs[i]), *devs[i] = 0;
  if (rt->ctl) o->free_pinned(rt->be, (void *)rt->ctl), rt->ctl = NULL;
  if (rt->inbox) o->free_pinned(rt->be, rt->inbox), rt->inbox = NULL;
  if (rt->inbox_free) o->free_pinned(rt->be, rt->inbox_free), rt->inbox_free = NULL;
  if (rt->comp) o->free_pinned(rt->be, rt->comp), rt->comp = NULL;
  if (rt->comp_msg) o->free_pinned(rt->be, rt->comp_msg), rt->comp_msg = NULL;
  if (rt->closed) o->free_pinned(rt->be, rt->closed), rt->closed = NULL;
}

/* ---- lifecycle --------------------------------------------------------------------------- */

/* A frame size (mw_runtime_desc.frame_bytes, mw_compile_desc.frame_bytes): 0 (the default) or
 * a multiple of 16 in 128..65536; MW_EINVAL, saying so, otherwise. */
int mw__frame_bytes_ok(uint32_t frame_bytes) {
  if (frame_bytes && (frame_bytes < 128 || frame_bytes > 65536 || frame_bytes % 16)) {
    mw__set_error("option 'frame_bytes' must be a multiple of 16 in 128..65536, got %u", frame_bytes);
    return MW_EINVAL;
  }
  return 0;
}

/* The options of d that do not depend on the backend: 0, or MW_EINVAL saying which is out of
 * its limits. */
static int check_desc(const mw_runtime_desc *d) {
  if (d->capacity > MAX_CAPACITY || d->host_futures > MAX_CAPACITY) {
    mw__set_error("option '%s' must be at most %u, got %u",
                  d->capacity > MAX_CAPACITY ? "capacity" : "host_futures", MAX_CAPACITY,
                  d->capacity > MAX_CAPACITY ? d->capacity : d->host_futures);
    return MW_EINVAL;
  }
  if (d->build && strcmp(d->build, "parts") && strcmp(d->build, "one_unit") &&
      strcmp(d->build, "tiered")) {
    mw__set_error("option 'build' must be \"parts\", \"one_unit\" or \"tiered\", got \"%.40s\"",
                  d->build);
    return MW_EINVAL;
  }
  if (!(d->relaunch_timeout >= 0 && d->relaunch_timeout <= 1e9)) {
    mw__set_error("option 'relaunch_timeout' must be a number of seconds >= 0");
    return MW_EINVAL;
  }
  if (d->stack_bytes && (d->stack_bytes < 4096 || d->stack_bytes > 524288)) {
    mw__set_error("option 'stack_bytes' must be in 4096..524288, got %u", d->stack_bytes);
    return MW_EINVAL;
  }
  return mw__frame_bytes_ok(d->frame_bytes);
}

/* Whether v is a whole number (digits only) of at most max. */
static int whole_number(const char *v, unsigned long long max) {
  char *end = NULL;
  unsigned long long n = strtoull(v, &end, 10);
  return v[0] >= '0' && v[0] <= '9' && !*end && n <= max;
}

/* The variables of the grids launched from the device (protocol.h, Block tasks, "As a grid"):
 * $MOONWARP_GRIDS (grids_wanted) and $MOONWARP_GRID_PRIME (backend_cuda.c) 0 or 1,
 * $MOONWARP_GRID_MIN (backend_cuda.c) a whole number,
 * $MOONWARP_CUDADEVRT (nvrtc/jit.c, mw__cudadevrt) a readable file; MW_EINVAL, saying so, for
 * anything else, as mw_runtime_create and mw_compile_cubin both check. */
int mw__grid_env_ok(void) {
  /* $MOONWARP_GRIDS (cuda, grids_wanted): 0 launches no block task as a grid, 1 as it may */
  const char *grids = getenv("MOONWARP_GRIDS");
  if (grids && *grids && strcmp(grids, "0") && strcmp(grids, "1")) {
    mw__set_error("MOONWARP_GRIDS must be 0 or 1, got \"%.40s\"", grids);
    return MW_EINVAL;
  }
  /* $MOONWARP_GRID_PRIME (cuda, backend_cuda.c, cuda_load): 0 makes no launch from the device
   * as an image with grids loads (to show the fault it prevents), 1 makes it */
  const char *prime = getenv("MOONWARP_GRID_PRIME");
  if (prime && *prime && strcmp(prime, "0") && strcmp(prime, "1")) {
    mw__set_error("MOONWARP_GRID_PRIME must be 0 or 1, got \"%.40s\"", prime);
    return MW_EINVAL;
  }
  /* $MOONWARP_GRID_MIN (cuda, backend_cuda.c): the unclaimed instances from which a block task
   * runs as a grid, a whole number (0: never) */
  const char *grid_min = getenv("MOONWARP_GRID_MIN");
  if (grid_min && *grid_min) {
    if (!whole_number(grid_min, 0xffffffffull)) {
      mw__set_error("MOONWARP_GRID_MIN must be a whole number of instances (0: never a grid), got \"%.40s\"",
                    grid_min);
      return MW_EINVAL;
    }
  }
  /* $MOONWARP_CUDADEVRT (nvrtc/jit.c, mw__cudadevrt): the device runtime library, a file */
  const char *devrt = getenv("MOONWARP_CUDADEVRT");
  if (devrt && *devrt) {
    FILE *f = fopen(devrt, "rb");
    if (!f) {
      mw__set_error("MOONWARP_CUDADEVRT names no readable file (the CUDA device runtime library, "
                    "libcudadevrt.a): \"%.200s\"", devrt);
      return MW_EINVAL;
    }
    fclose(f);
  }
  return 0;
}

/* $MOONWARP_BUILD in *out: NULL when unset or empty, else "parts", "one_unit" or "tiered";
 * MW_EINVAL, saying so, for anything else. */
int mw__build_of_env(const char **out) {
  const char *build = getenv("MOONWARP_BUILD");
  *out = NULL;
  if (!build || !*build) return 0;
  if (strcmp(build, "parts") && strcmp(build, "one_unit") && strcmp(build, "tiered")) {
    mw__set_error("MOONWARP_BUILD must be \"parts\", \"one_unit\" or \"tiered\", got \"%.40s\"",
                  build);
    return MW_EINVAL;
  }
  *out = build;
  return 0;
}

MW_API int mw_runtime_create(const mw_runtime_desc *desc, mw_runtime **out) {
  MW_NOT_NULL(out, "mw_runtime_create");
  mw_runtime_desc d = {0};
  if (desc) d = *desc;
  *out = NULL;
  char why[1024] = "";
  const mw__backend_ops *ops = pick_backend(d.backend, why, sizeof why);
  if (!ops) {
    mw__set_error_str(why);
    return MW_EINVAL;
  }
  int rc = check_desc(&d);
  if (rc) return rc;
  /* $MOONWARP_BUILD overrides mw_runtime_desc.build (to compare the two in one run) */
  const char *build = NULL;
  if (mw__build_of_env(&build)) return MW_EINVAL;
  if (!build) build = d.build;
  /* $MOONWARP_ONE_UNIT_LINKED (cuda, build_image): 1 links the one-unit image from relocatable code */
  const char *linked = getenv("MOONWARP_ONE_UNIT_LINKED");
  if (linked && *linked && strcmp(linked, "0") && strcmp(linked, "1")) {
    mw__set_error("MOONWARP_ONE_UNIT_LINKED must be 0 or 1, got \"%.40s\"", linked);
    return MW_EINVAL;
  }
  if (mw__grid_env_ok()) return MW_EINVAL;
  /* $MOONWARP_SIM_CHAOS (sim, sim_shim.h): a pause at about one in N atomics and fences */
  const char *chaos = getenv("MOONWARP_SIM_CHAOS");
  if (chaos && *chaos && !whole_number(chaos, 1000000000ull)) {
    mw__set_error("MOONWARP_SIM_CHAOS must be a whole number N (a pause at about one in N atomics "
                  "and fences; 0: none) up to 1000000000, got \"%.40s\"", chaos);
    return MW_EINVAL;
  }
  /* $MOONWARP_CARVEOUT (cuda, backend_cuda.c): a percent, or -1 for the driver's choice */
  const char *carve = getenv("MOONWARP_CARVEOUT");
  if (carve && *carve) {
    char *end = NULL;
    long pct = strtol(carve, &end, 10);
    if (*end || pct < -1 || pct > 100) {
      mw__set_error("MOONWARP_CARVEOUT must be a percent from 0 to 100 (or -1: the driver's choice), got \"%.40s\"",
                    carve);
      return MW_EINVAL;
    }
  }
  mw_runtime *rt = calloc(1, sizeof *rt);
  if (!rt) return MW_ENOMEM;
  rt->ops = ops;
  rt->desc = d;
  rc = ops->claim_device ? claim_device(rt, d.device) : 0;
  if (rc) {
    free(rt);
    return rc;
  }
  char why_not[1024];
  if ((rc = mw__image_compiler_ready(ops->host_code, why_not, sizeof why_not))) {
    mw__set_error("the %s backend needs %s", ops->name, why_not);
    release_device(rt);
    free(rt);
    return rc;
  }
  mw__backend_args args = {.device = d.device, .workers = d.workers,
                           .stack_bytes = d.stack_bytes ? d.stack_bytes : MW_STACK_BYTES, .err = rt->err,
                           .errlen = sizeof rt->err, .find_task = find_task,
                           .user_places = user_places, .ctx = rt};
  mw__backend_info info = {0};
  rc = ops->open(&args, &rt->be, &info);
  if (rc) {
    mw__set_error_str(rt->err);
    ops->close(rt->be);
    release_device(rt);
    free(rt);
    return rc;
  }
  rt->max_workers = info.max_workers;
  rt->nworkers = info.workers;
  rt->arch = info.arch;
  rt->nframes = d.capacity ? d.capacity : ops->default_capacity;
  rt->host_slots = d.host_futures ? d.host_futures : DEFAULT_HOST_FUTURES;
  if (rt->host_slots > rt->nframes && !d.host_futures) rt->host_slots = rt->nframes;
  /* what the device or capacity cannot honour is refused, not clamped */
  if (rt->host_slots > rt->nframes || d.workers > rt->max_workers || rt->nframes > MW_SLOTS_MAX / 2) {
    if (rt->nframes > MW_SLOTS_MAX / 2)
      mw__set_error("option 'capacity' must be at most %u, got %u", MW_SLOTS_MAX / 2, rt->nframes);
    else if (d.workers > rt->max_workers)
      mw__set_error("option 'workers' must be at most %u on this %s device, got %u",
                    rt->max_workers, ops->name, d.workers);
    else
      mw__set_error("option 'host_futures' must be at most the capacity (%u), got %u", rt->nframes,
                    rt->host_slots);
    ops->close(rt->be);
    release_device(rt);
    free(rt);
    return MW_EINVAL;
  }
  rt->nslots = rt->nframes + rt->host_slots;
  /* waiter nodes: a suspended task holds one per future it waits for (await_all: several) */
  rt->nnodes = (rt->nframes < (1u << 28) ? 2 * rt->nframes : rt->nframes) + 64;
  rt->frame_bytes = d.frame_bytes ? d.frame_bytes : DEFAULT_FRAME_BYTES;
  rt->relaunch_timeout = d.relaunch_timeout > 0 ? d.relaunch_timeout : 10.0;
  rt->stack_bytes = d.stack_bytes ? d.stack_bytes : MW_STACK_BYTES;
  rt->one_unit = build ? !strcmp(build, "one_unit") : !ops->host_code;
  rt->tiered = build && !strcmp(build, "tiered");
  if (d.workers && d.workers < rt->max_workers) rt->nworkers = d.workers;
  if (rt->nworkers == 0 || rt->nworkers > rt->max_workers) rt->nworkers = rt->max_workers;
  rt->hs = calloc(rt->host_slots, sizeof *rt->hs);
  rt->hfree = malloc(rt->host_slots * sizeof *rt->hfree);
  rt->closing = malloc(rt->host_slots * sizeof *rt->closing);
  if (!rt->hs || !rt->hfree || !rt->closing) {
    rc = MW_ENOMEM;
    goto fail;
  }
  for (uint32_t i = 0; i < rt->host_slots; ++i) rt->hfree[i] = rt->host_slots - 1 - i;
  rt->nhfree = rt->host_slots;
  if ((rc = alloc_state(rt))) {
    if (!rt->err[0]) mw__rt_error(rt, "allocating the executor state: %s", mw_strerror(rc));
    goto fail;
  }
  rt->t_start = mw__now();
  *out = rt;
  return 0;
fail:
  mw__set_error_str(rt->err);
  free_state(rt);
  ops->close(rt->be);
  release_device(rt);
  free(rt->hs);
  free(rt->hfree);
  free(rt->closing);
  free(rt);
  return rc;
}

MW_API const char *mw_runtime_backend(const mw_runtime *rt) {
  if (!rt) mw__null_arg("mw_runtime_backend", "rt");
  return rt ? rt->ops->name : "";
}
MW_API const char *mw_runtime_last_error(const mw_runtime *rt) {
  return rt ? rt->err : mw_last_error();
}
MW_API int mw_runtime_faulted(const mw_runtime *rt) {
  return rt ? rt->faulted : mw__null_arg("mw_runtime_faulted", "rt");
}


/* Fails every host future still pending with code/message. */
static void fail_pending(mw_runtime *rt, int status, const char *msg) {
  for (uint32_t i = 0; i < rt->host_slots; ++i) {
    mw__hslot *h = &rt->hs[i];
    if (!h->live || h->state != MW_ST_PENDING) continue;
    h->state = MW_ST_FAILED;
    memset(&h->res, 0, sizeof h->res);
    h->res.status = status;
    mw__copy_cut(h->res.message, sizeof h->res.message, msg);
    rt->in_flight--;
    /* the device will not run again: nothing it holds matters any more */
    free(h->holds);
    h->holds = NULL;
    h->nholds = 0;
    h->holders = 0;
    h->given = 0;
  }
  for (uint32_t i = 0; i < rt->host_slots; ++i) {
    mw__hslot *h = &rt->hs[i];
    if (h->deferred) {
      h->deferred = 0;
      h->given = 0;
      rt->ndeferred--;
      mw__hslot_free(rt, i);
    } else if (h->live && !h->held && h->state != MW_ST_PENDING) {
      h->holders = 0;
      h->given = 0;
      mw__hslot_settle(rt, i);
    }
  }
}

/* Marks the runtime unusable (code < 0) and fails every pending host future with what (a
 * short cause) and the detail in rt->err. */
static void mark_fault(mw_runtime *rt, int code, const char *what) {
  if (rt->faulted) return;
  rt->faulted = code;
  rt->running = 0;
  if (rt->watch) mw__watch_break(rt->watch); /* an event loop polls and finds every await failed */
  char msg[sizeof rt->err + 64];
  snprintf(msg, sizeof msg, "%s: %s", what, rt->err);
  fail_pending(rt, MW_EFAULT, msg);
}

/* Asks the backend whether the executor runs (1), has exited (0) or faulted (< 0, and the
 * runtime is marked faulted). */
static int query(mw_runtime *rt) {
  int q = rt->ops->query(rt->be);
  if (q < 0) mark_fault(rt, q, "device fault");
  return q;
}

/* Writes the device stop flag (see protocol.h, Stopping). */
static void set_stop(mw_runtime *rt, uint32_t v) {
  if (!rt->faulted) rt->ops->h2d(rt->be, rt->state_dev + offsetof(mw_state, stop), &v, 4);
}

/* Asks the executor to stop and waits up to deadline seconds. 0 when it stopped. */
int mw__stop_executor(mw_runtime *rt, double deadline) {
  if (!rt->running && !rt->faulted) return 0;
  set_stop(rt, 1);
  int rc = rt->ops->quiesce(rt->be, deadline);
  if (rc == MW_ETIMEDOUT) {
    /* a task still runs: let the workers that remain carry on with the old image */
    set_stop(rt, 0);
    mw__rt_error(rt, "the executor did not stop within %.1f s: a task is still running", deadline);
    return rc;
  }
  rt->running = 0;
  int q = query(rt);
  return q < 0 ? q : 0;
}

int mw__start_executor(mw_runtime *rt) {
  rt->ctl->exited = 0;
  /* stop, stop_arrived and hungry, adjacent: a fresh stop barrier (protocol.h, Stopping) */
  const uint32_t zero[3] = {0, 0, 0};
  int rz = rt->ops->h2d(rt->be, rt->state_dev + offsetof(mw_state, stop), zero, sizeof zero);
  if (rz) return rz;
  rt->state.nworkers = rt->nworkers;
  /* only the host-owned fields: the counters in mw_state belong to the device */
  int rc = rt->ops->h2d(rt->be, rt->state_dev + offsetof(mw_state, nworkers), &rt->state.nworkers, 4);
  if (!rc)
    rc = rt->ops->h2d(rt->be, rt->state_dev + offsetof(mw_state, nkinds), &rt->state.nkinds, 4);
  if (!rc) {
    uint32_t n = rt->nworkers;
    rc = rt->ops->launch(rt->be, rt->state_dev, &n);
    rt->nworkers = n; /* cuda: what the new image's occupancy allows */
    rt->state.nworkers = n;
  }
  if (!rc) {
    rt->running = 1;
    rt->launches++;
  }
  return rc;
}

/* Relaunches a stopped executor. When even that fails, nothing would ever run the queued and
 * suspended tasks: the runtime is marked faulted so that every await ends with the reason. */
int mw__restart_executor(mw_runtime *rt) {
  int rc = mw__start_executor(rt);
  if (rc && !rt->faulted) mark_fault(rt, rc, "the executor could not be relaunched");
  return rc;
}

void mw__program_free(mw_program *p) {
  mw__image_free(&p->obj);
  mw__parsed_free(&p->parsed);
  mw__free_strings(p->include_dirs, p->ninclude_dirs);
  free(p);
}

MW_API int mw_runtime_close(mw_runtime *rt, double deadline_s) {
  MW_NOT_NULL(rt, "mw_runtime_close");
  mw__tier_abandon(rt);
  mw__watch_stop(rt); /* before the ring it reads goes */
  if (deadline_s <= 0) deadline_s = 10.0;
  int rc = mw__stop_executor(rt, deadline_s);
  if (rc == MW_ETIMEDOUT) {
    set_stop(rt, 1); /* nothing may run once the task returns */
    rt->ops->abandon(rt->be);
    rt->abandoned = 1; /* its memory stays with the task that still runs */
  }
  fail_pending(rt, MW_ECANCELED, "the runtime was closed before the task completed");
  while (rt->buffers) mw_buffer_free(rt->buffers);
  mw__trace_free(rt, rc != MW_ETIMEDOUT);
  for (int i = 0; i < rt->nprogs; ++i) mw__program_free(rt->progs[i]);
  free(rt->progs);
  mw__image_free(&rt->exec_obj);
  for (uint32_t k = 0; k < MW_MAX_KINDS; ++k) free(rt->kind_names[k]);
  if (rc != MW_ETIMEDOUT) free_state(rt);
  rt->ops->close(rt->be);
  release_device(rt);
  for (uint32_t i = 0; i < rt->host_slots; ++i) free(rt->hs[i].holds);
  free(rt->hs);
  free(rt->hfree);
  free(rt->closing);
  free(rt);
  return rc == MW_ETIMEDOUT ? rc : 0;
}

/* ---- the executor's health ------------------------------------------------------------- */

/* Checks the executor's health; marks the runtime faulted when the backend reports a fault. */
int mw__check_alive(mw_runtime *rt) {
  if (rt->faulted) return rt->faulted;
  if (!rt->running) return 0;
  if (rt->tier) mw__tier_try(rt);
  /* a stream query costs microseconds: ask at most every 200 us */
  double now = mw__now();
  if (now - rt->last_check < 200e-6) return 0;
  rt->last_check = now;
  int q = query(rt);
  return q < 0 ? q : 0;
}

int mw__usable(mw_runtime *rt) {
  if (rt->faulted) {
    mw__rt_error(rt, "the runtime has faulted and must be closed (%s)", mw_strerror(rt->faulted));
    return MW_EFAULT;
  }
  if (!rt->running) {
    mw__rt_error(rt, "no program is loaded: compile one first");
    return MW_EINVAL;
  }
  return 0;
}
