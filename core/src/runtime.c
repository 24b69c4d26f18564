/* runtime.c - the host side of a runtime: lifecycle, device state, programs, spawning through the
 * inbox ring, completions, host futures, buffers and statistics. Backend-neutral. */
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
#define DEFAULT_FRAME_BYTES 256u
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
static void user_message_line(const mw_runtime *rt, uint32_t kind, char *msg, size_t cap) {
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
static size_t stats_bytes(const mw_runtime *rt) {
  return MW_MAX_KINDS * sizeof(mw_stat_row) +
         (size_t)rt->max_workers * MW_STAT_ENTRIES * sizeof(mw_stat_entry);
}
/* The same array goes on with the per-kind instance times (protocol.h, mw_state.inst_cycles). */
static size_t stats_and_hints_bytes(const mw_runtime *rt) {
  return stats_bytes(rt) + MW_MAX_KINDS * sizeof(uint32_t);
}
static uint64_t hints_dev(const mw_runtime *rt) { return rt->stats_dev + stats_bytes(rt); }

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
  st->inst_cycles = (mw_u32 *)(uintptr_t)hints_dev(rt);
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
static int frame_bytes_ok(uint32_t frame_bytes) {
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
  return frame_bytes_ok(d->frame_bytes);
}

/* The variables of the grids launched from the device (protocol.h, Block tasks, "As a grid"):
 * $MOONWARP_GRIDS (grids_wanted) and $MOONWARP_GRID_PRIME (backend_cuda.c) 0 or 1,
 * $MOONWARP_GRID_MIN (backend_cuda.c) a whole number,
 * $MOONWARP_CUDADEVRT (nvrtc/jit.c, mw__cudadevrt) a readable file; MW_EINVAL, saying so, for
 * anything else, as mw_runtime_create and mw_compile_cubin both check. */
static int grid_env_ok(void) {
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
    char *end = NULL;
    long long v = strtoll(grid_min, &end, 10);
    if (grid_min[0] < '0' || grid_min[0] > '9' || *end || v > 0xffffffffll) {
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
static int build_of_env(const char **out) {
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
  if (build_of_env(&build)) return MW_EINVAL;
  if (!build) build = d.build;
  /* $MOONWARP_ONE_UNIT_LINKED (cuda, build_image): 1 links the one-unit image from relocatable code */
  const char *linked = getenv("MOONWARP_ONE_UNIT_LINKED");
  if (linked && *linked && strcmp(linked, "0") && strcmp(linked, "1")) {
    mw__set_error("MOONWARP_ONE_UNIT_LINKED must be 0 or 1, got \"%.40s\"", linked);
    return MW_EINVAL;
  }
  if (grid_env_ok()) return MW_EINVAL;
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

static void hslot_settle(mw_runtime *rt, uint32_t s);
static void hslot_free(mw_runtime *rt, uint32_t s);

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
      hslot_free(rt, i);
    } else if (h->live && !h->held && h->state != MW_ST_PENDING) {
      h->holders = 0;
      h->given = 0;
      hslot_settle(rt, i);
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

static void tier_abandon(mw_runtime *rt);
static void tier_start(mw_runtime *rt);

/* Asks the executor to stop and waits up to deadline seconds. 0 when it stopped. */
static int stop_executor(mw_runtime *rt, double deadline) {
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

static int start_executor(mw_runtime *rt) {
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
static int restart_executor(mw_runtime *rt) {
  int rc = start_executor(rt);
  if (rc && !rt->faulted) mark_fault(rt, rc, "the executor could not be relaunched");
  return rc;
}

static void program_free(mw_program *p) {
  mw__image_free(&p->obj);
  mw__parsed_free(&p->parsed);
  mw__free_strings(p->include_dirs, p->ninclude_dirs);
  free(p);
}

MW_API int mw_runtime_close(mw_runtime *rt, double deadline_s) {
  MW_NOT_NULL(rt, "mw_runtime_close");
  tier_abandon(rt);
  mw__watch_stop(rt); /* before the ring it reads goes */
  if (deadline_s <= 0) deadline_s = 10.0;
  int rc = stop_executor(rt, deadline_s);
  if (rc == MW_ETIMEDOUT) {
    set_stop(rt, 1); /* nothing may run once the task returns */
    rt->ops->abandon(rt->be);
    rt->abandoned = 1; /* its memory stays with the task that still runs */
  }
  fail_pending(rt, MW_ECANCELED, "the runtime was closed before the task completed");
  while (rt->buffers) mw_buffer_free(rt->buffers);
  mw__trace_free(rt, rc != MW_ETIMEDOUT);
  for (int i = 0; i < rt->nprogs; ++i) program_free(rt->progs[i]);
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

/* ---- programs ----------------------------------------------------------------------------- */

MW_API int mw_generate_source(const char *source, const char *filename, const char *backend,
                              char **out_source, char **out_error) {
  MW_NOT_NULL(out_source, "mw_generate_source");
  *out_source = NULL;
  if (out_error) *out_error = NULL;
  MW_NOT_NULL(source, "mw_generate_source");
  char err[1024];
  mw__parsed p;
  int rc = mw__parse(source, filename, 1, &p, err, sizeof err);
  if (rc) {
    if (out_error) *out_error = mw__strdup(err);
    mw__set_error_str(err);
    return rc;
  }
  for (int i = 0; i < p.ntasks; ++i) p.tasks[i].kind = (uint32_t)i;
  mw__parsed *list[1] = {&p};
  mw__gen_opts go = {backend && !strcmp(backend, "sim"), DEFAULT_FRAME_BYTES, 0, 0};
  *out_source = mw__generate(list, 1, &go);
  mw__parsed_free(&p);
  return *out_source ? 0 : MW_ENOMEM;
}

/* The options of a compile of progs[0..n) as a whole: every program's include directories, in
 * load order, each once (*dirs, malloc'd, holds them); debug when any program asked for it; the
 * digest of the headers gen reaches through them. */
static int build_options(mw_program *const *progs, int n, const char *gen, mw__build_opts *bo,
                         const char ***dirs) {
  memset(bo, 0, sizeof *bo);
  int total = 0;
  for (int i = 0; i < n; ++i) total += progs[i]->ninclude_dirs;
  const char **v = total ? malloc(sizeof *v * (size_t)total) : NULL;
  if (total && !v) return MW_ENOMEM;
  int k = 0;
  for (int i = 0; i < n; ++i) {
    bo->debug |= progs[i]->debug;
    for (int j = 0; j < progs[i]->ninclude_dirs; ++j) {
      const char *d = progs[i]->include_dirs[j];
      int seen = 0;
      for (int q = 0; q < k && !seen; ++q) seen = !strcmp(v[q], d);
      if (!seen) v[k++] = d;
    }
  }
  bo->include_dirs = v;
  bo->ninclude_dirs = k;
  *dirs = v;
  return mw__include_digest(gen, v, k, bo->deps);
}

/* Compiles the part of an image described by part and progs (mw__generate_part) with the
 * options of progs[0..nopt) into *out, through the cache; err says why it failed. Reads only
 * settings of rt that do not change, so it may run beside the runtime's thread (exec_part). */
static int compile_part_to(const mw_runtime *rt, mw__gen_part part, mw_program *const *opt, int nopt,
                           mw__parsed *const *progs, int nprogs, int debug, mw__image *out,
                           char *err, size_t errlen) {
  mw__gen_opts go = {rt->ops->host_code, rt->frame_bytes, 1, 0};
  char *gen = mw__generate_part(part, progs, nprogs, &go);
  mw__build_opts bo;
  const char **dirs = NULL;
  int rc = gen ? build_options(opt, nopt, gen, &bo, &dirs) : MW_ENOMEM;
  if (rc == MW_ENOMEM) snprintf(err, errlen, "out of memory");
  bo.debug = debug;
  bo.fast = rt->tiered; /* the first tier loads soon; the one-unit image it gives way to is optimised */
  mw__image_req req = {.source = gen, .bo = &bo, .host_code = rt->ops->host_code, .arch = rt->arch,
                       .object = 1, .progs = progs, .nprogs = nprogs};
  if (!rc) rc = mw__image_compile(&req, out, err, errlen, NULL);
  free(dirs);
  free(gen);
  return rc;
}

/* The same, with rt->err saying why it failed. */
static int compile_part(mw_runtime *rt, mw__gen_part part, mw_program *const *opt, int nopt,
                        mw__parsed *const *progs, int nprogs, int debug, mw__image *out) {
  return compile_part_to(rt, part, opt, nopt, progs, nprogs, debug, out, rt->err, sizeof rt->err);
}

/* The executor's part compiled on a thread of its own while the runtime's thread compiles a
 * program's part (compile_program): the first load of a runtime built from parts waits for the
 * longer of the two, not for both (the parts are independent; NVRTC, the C++ compiler and the
 * cache may be used from several threads). */
typedef struct exec_part {
  const mw_runtime *rt;
  int debug, rc;
  mw__image obj;
  char err[256];
} exec_part;

static void *exec_part_main(void *arg) {
  exec_part *x = arg;
  x->rc = compile_part_to(x->rt, MW_GEN_EXECUTOR, NULL, 0, NULL, 0, x->debug, &x->obj, x->err,
                          sizeof x->err);
  return NULL;
}

/* p's tag (mw__parsed.tag): "q" and a digest of its generated part, so that its compiled part
 * is the same wherever and whenever it loads; a program that another loaded program has the
 * same part as gets a number after it. */
static int tag_program(mw_runtime *rt, mw_program *p) {
  snprintf(p->parsed.tag, sizeof p->parsed.tag, "x");
  mw__parsed *list[1] = {&p->parsed};
  mw__gen_opts go = {rt->ops->host_code, rt->frame_bytes, 1, 0};
  char *gen = mw__generate_part(MW_GEN_PROGRAM, list, 1, &go);
  if (!gen) return MW_ENOMEM;
  const void *parts[] = {gen};
  char key[65];
  mw__cache_key(parts, NULL, 1, key);
  free(gen);
  for (int n = 1;; ++n) {
    if (n == 1) snprintf(p->parsed.tag, sizeof p->parsed.tag, "q%.15s", key);
    else snprintf(p->parsed.tag, sizeof p->parsed.tag, "q%.15sz%d", key, n % 100000);
    int taken = 0;
    for (int i = 0; i < rt->nprogs && !taken; ++i) taken = !strcmp(rt->progs[i]->parsed.tag, p->parsed.tag);
    if (!taken) return 0;
  }
}

/* Compiles program p alone (its part of the executor image) into p->obj. rt->err says why it
 * failed: the compiler's messages name the user's files and lines. */
static int compile_program(mw_runtime *rt, mw_program *p) {
  if (rt->one_unit) return 0;
  int rc = tag_program(rt, p);
  if (rc) {
    mw__rt_error(rt, "out of memory");
    return rc;
  }
  mw__parsed *list[1] = {&p->parsed};
  /* the executor's part, when the next image needs one it has not got, beside the program's
   * (what build_image would otherwise compile after it); on failure build_image compiles it
   * again and reports why */
  int debug = p->debug;
  for (int i = 0; i < rt->nprogs; ++i) debug |= rt->progs[i]->debug;
  exec_part x = {.rt = rt, .debug = debug};
  pthread_t t;
  int beside = (!rt->exec_obj.data || rt->exec_debug != debug) &&
               pthread_create(&t, NULL, exec_part_main, &x) == 0;
  rc = compile_part(rt, MW_GEN_PROGRAM, &p, 1, list, 1, p->debug, &p->obj);
  if (beside) {
    pthread_join(t, NULL);
    if (x.rc == 0) {
      mw__image_free(&rt->exec_obj);
      rt->exec_obj = x.obj;
      rt->exec_debug = debug;
    } else {
      mw__image_free(&x.obj);
    }
  }
  return rc;
}

/* Whether a cuda image compiled in one unit may launch block tasks as grids from the device
 * (protocol.h, Block tasks, "As a grid"): where the device runtime library is found, unless
 * $MOONWARP_GRIDS is 0 (the executor's CTAs run every instance, to compare). */
static int grids_wanted(int host_code) {
  const char *env = getenv("MOONWARP_GRIDS");
  return !host_code && !(env && !strcmp(env, "0")) && mw__cudadevrt() != NULL;
}

/* The one-unit image of req: compiled whole, or, with req->object (MOONWARP_ONE_UNIT_LINKED=1 on
 * cuda, a variant to measure: bench/NOTES.md, "split compilation"), compiled as relocatable code
 * on every core and linked alone. fresh: a cached relocatable object is compiled again (the
 * image linked from it was refused). */
static int compile_one_unit(mw_runtime *rt, const mw__image_req *req, mw__image *img, int fresh) {
  if (!req->object) return mw__image_compile(req, img, rt->err, sizeof rt->err, NULL);
  mw__image obj;
  int rc = mw__image_compile(req, &obj, rt->err, sizeof rt->err, NULL);
  if (!rc && fresh && obj.cached) {
    mw__image_evict(&obj);
    mw__image_free(&obj);
    rc = mw__image_compile(req, &obj, rt->err, sizeof rt->err, NULL);
  }
  if (rc) return rc;
  const mw__image *one[1] = {&obj};
  rc = mw__image_link(one, 1, 0, rt->arch, req->library, img, rt->err, sizeof rt->err);
  mw__image_free(&obj);
  return rc;
}

/* The image of progs[0..nprogs) with the executor: compiled in one unit (rt->one_unit), or
 * linked from the executor's part (compiled once), each program's own (compile_program) and
 * the link part of these programs. */
static int build_image(mw_runtime *rt, mw_program *const *progs, mw__parsed *const *list,
                       int nprogs, mw__image *img, mw__image_req *req_out, char **gen_out,
                       const char ***dirs_out, mw__build_opts *bo) {
  int debug = 0;
  for (int i = 0; i < nprogs; ++i) debug |= progs[i]->debug;
  if (rt->one_unit) {
    mw__gen_opts go = {rt->ops->host_code, rt->frame_bytes, 1, grids_wanted(rt->ops->host_code)};
    const int grids = mw__grids_of(list, nprogs, &go);
    char *gen = mw__generate(list, nprogs, &go);
    int rc = gen ? build_options((mw_program **)progs, nprogs, gen, bo, dirs_out) : MW_ENOMEM;
    if (rc == MW_ENOMEM) mw__rt_error(rt, "out of memory");
    const char *linked = getenv("MOONWARP_ONE_UNIT_LINKED");
    mw__image_req req = {.source = gen, .bo = bo, .host_code = rt->ops->host_code, .arch = rt->arch,
                         .progs = list, .nprogs = nprogs,
                         .object = grids || (!rt->ops->host_code && linked && !strcmp(linked, "1")),
                         .library = grids ? mw__cudadevrt() : NULL};
    *req_out = req;
    *gen_out = gen;
    return rc ? rc : compile_one_unit(rt, req_out, img, 0);
  }
  int rc = 0;
  if (!rt->exec_obj.data || rt->exec_debug != debug) {
    mw__image_free(&rt->exec_obj);
    rc = compile_part(rt, MW_GEN_EXECUTOR, NULL, 0, NULL, 0, debug, &rt->exec_obj);
    rt->exec_debug = debug;
  }
  mw__image link = {0};
  if (!rc) rc = compile_part(rt, MW_GEN_LINK, NULL, 0, list, nprogs, debug, &link);
  const mw__image **parts = malloc(sizeof *parts * (size_t)(nprogs + 2));
  if (!rc && !parts) {
    mw__rt_error(rt, "out of memory");
    rc = MW_ENOMEM;
  }
  if (!rc) {
    parts[0] = &rt->exec_obj;
    for (int i = 0; i < nprogs; ++i) parts[1 + i] = &progs[i]->obj;
    parts[nprogs + 1] = &link;
    rc = mw__image_link(parts, nprogs + 2, rt->ops->host_code, rt->arch, NULL, img, rt->err, sizeof rt->err);
  }
  free(parts);
  mw__image_free(&link);
  return rc;
}

/* Loads the image into the backend; a cached image the backend refuses (left by another version
 * or a changed system) is removed from the cache and built afresh, once (in one unit: compiled
 * again; linked: linked again from parts compiled again). */
static int load_image(mw_runtime *rt, mw_program *const *progs, int nprogs,
                      const mw__image_req *req, mw__image *img) {
  int rc = rt->ops->load(rt->be, img->data, img->size);
  if (!rc || !img->cached) return rc;
  mw__image_evict(img);
  mw__image_free(img);
  rt->err[0] = 0;
  if (rt->one_unit) {
    rc = compile_one_unit(rt, req, img, 1);
  } else {
    mw__image_evict(&rt->exec_obj);
    mw__image_free(&rt->exec_obj);
    for (int i = 0; i < nprogs; ++i) {
      mw__image_evict(&progs[i]->obj);
      mw__image_free(&progs[i]->obj);
    }
    rc = 0;
    for (int i = 0; i < nprogs && !rc; ++i) {
      mw__parsed *one[1] = {&progs[i]->parsed};
      rc = compile_part(rt, MW_GEN_PROGRAM, &progs[i], 1, one, 1, progs[i]->debug, &progs[i]->obj);
    }
    mw__parsed **list = malloc(sizeof *list * (size_t)nprogs);
    if (!rc && !list) {
      mw__rt_error(rt, "out of memory");
      rc = MW_ENOMEM;
    }
    for (int i = 0; list && i < nprogs; ++i) list[i] = &progs[i]->parsed;
    mw__image_req unused;
    mw__build_opts bo;
    char *gen = NULL;
    const char **dirs = NULL;
    /* the parts were compiled again; the link part and the link are not in the cache now */
    if (!rc) rc = build_image(rt, progs, list, nprogs, img, &unused, &gen, &dirs, &bo);
    free(gen);
    free(dirs);
    free(list);
  }
  return rc ? rc : rt->ops->load(rt->be, img->data, img->size);
}

static int kinds_stats_raw(mw_runtime *rt, uint32_t first, uint32_t n, uint64_t (*out)[4]);

/* Whether a program let go of (stale) still has work: a task of its kinds not finished (the
 * counters are exact while the executor is stopped), or any host future pending (a host spawn
 * the device has not taken may be of its kinds). */
static int stale_busy(mw_runtime *rt, mw_program *const *stale, int nstale) {
  if (rt->in_flight) return 1;
  for (int i = 0; i < nstale; ++i) {
    const mw__parsed *p = &stale[i]->parsed;
    if (!p->ntasks) continue;
    uint64_t(*n)[4] = malloc(sizeof *n * (size_t)p->ntasks);
    int busy = !n || kinds_stats_raw(rt, p->tasks[0].kind, (uint32_t)p->ntasks, n) != 0;
    for (int k = 0; !busy && k < p->ntasks; ++k) busy = n[k][0] != n[k][1] + n[k][2] + n[k][3];
    free(n);
    if (busy) return 1;
  }
  return 0;
}

/* What replace_executor returns when a stale program still had work: the executor that ran
 * before carries on, nothing changed; the caller builds again with every program. */
#define STALE_BUSY 1

/* Builds the image of progs[0..nprogs) and makes it the executor, with nkinds task kinds: the
 * build runs beside the running executor; then the executor stops, the image is loaded and
 * launched, and queued and suspended tasks carry on. When the new one cannot start, the one
 * that ran before carries on (or the runtime faults, restart_executor). rt->err says why.
 * stale[0..nstale) are programs let go of that progs leave out: if one of them still has work
 * once the executor has stopped, it is relaunched as it was and STALE_BUSY returned. */
static int replace_executor(mw_runtime *rt, mw_program *const *progs, int nprogs, uint32_t nkinds,
                            mw_program *const *stale, int nstale) {
  mw__parsed **list = malloc(sizeof *list * (size_t)(nprogs ? nprogs : 1));
  if (!list) {
    mw__rt_error(rt, "out of memory");
    return MW_ENOMEM;
  }
  for (int i = 0; i < nprogs; ++i) list[i] = &progs[i]->parsed;
  mw__image img = {0};
  mw__image_req req = {0};
  mw__build_opts bo;
  char *gen = NULL;
  const char **dirs = NULL;
  int rc = build_image(rt, progs, list, nprogs, &img, &req, &gen, &dirs, &bo);
  int stopped = 0;
  if (!rc && rt->running) stopped = !(rc = stop_executor(rt, rt->relaunch_timeout));
  if (!rc && nstale && stale_busy(rt, stale, nstale)) {
    if (stopped && restart_executor(rt)) rc = MW_EFAULT;
    else rc = STALE_BUSY;
    stopped = 0;
  }
  if (!rc) rc = load_image(rt, progs, nprogs, &req, &img);
  mw__image_free(&img);
  free(dirs);
  free(gen);
  uint32_t old_kinds = rt->state.nkinds;
  if (!rc) {
    /* the executor is stopped: its threads read none of this now */
    int old_n = rt->run_nprogs;
    mw__parsed **old = malloc(sizeof *old * (size_t)(old_n ? old_n : 1));
    if (old) memcpy(old, rt->run_progs, sizeof *old * (size_t)old_n);
    rt->state.nkinds = nkinds;
    memcpy(rt->run_progs, list, sizeof *list * (size_t)nprogs);
    rt->run_nprogs = nprogs;
    if ((rc = start_executor(rt))) {
      rt->state.nkinds = old_kinds;
      if (old) memcpy(rt->run_progs, old, sizeof *old * (size_t)old_n);
      rt->run_nprogs = old ? old_n : 0;
    }
    free(old);
  }
  if (rc && stopped && !rt->faulted) {
    char why[sizeof rt->err];
    snprintf(why, sizeof why, "%s", rt->err);
    /* the image that ran before carries on with the tasks in flight */
    if (restart_executor(rt) == 0) snprintf(rt->err, sizeof rt->err, "%s", why);
  }
  free(list);
  return rc;
}

/* The names of p's kinds (mw_runtime_kind_name): a name that a kind loaded before has already
 * is told apart by its kind. A name that finds no memory stays NULL (plain name then). */
static void name_kinds(mw_runtime *rt, const mw_program *p) {
  for (int i = 0; i < p->parsed.ntasks; ++i) {
    const mw__task *t = &p->parsed.tasks[i];
    int dup = 0;
    for (uint32_t k = 0; k < MW_MAX_KINDS && !dup; ++k) /* held by a program loaded before */
      dup = k != t->kind && rt->kind_names[k] && !strcmp(rt->kind_names[k], t->name);
    char buf[160];
    snprintf(buf, sizeof buf, dup ? "%s#%u" : "%s", t->name, t->kind);
    rt->kind_names[t->kind] = mw__strdup(buf);
    rt->kind_ret[t->kind] = (uint8_t)t->ret;
  }
}

/* The first of n consecutive kinds that no loaded program holds (kinds of programs dropped
 * are taken again), or MW_NONE when MW_MAX_KINDS leaves no room. */
static uint32_t free_kinds(const mw_runtime *rt, uint32_t n) {
  for (uint32_t base = 0; base + n <= MW_MAX_KINDS; ++base) {
    uint32_t clash = MW_NONE;
    for (int i = 0; i < rt->nprogs && clash == MW_NONE; ++i) {
      const mw__parsed *q = &rt->progs[i]->parsed;
      if (!q->ntasks) continue;
      uint32_t lo = q->tasks[0].kind, hi = lo + (uint32_t)q->ntasks;
      if (lo < base + n && base < hi) clash = hi;
    }
    if (clash == MW_NONE) return base;
    base = clash - 1; /* on past the program in the way */
  }
  return MW_NONE;
}

/* Removes the programs in drop[0..n) (let go of, idle, left out of the running image) from rt:
 * their kinds are free for the programs loaded next. */
static void drop_programs(mw_runtime *rt, mw_program *const *drop, int n) {
  for (int d = 0; d < n; ++d) {
    mw_program *p = drop[d];
    for (int k = 0; k < p->parsed.ntasks; ++k) {
      uint32_t kind = p->parsed.tasks[k].kind;
      free(rt->kind_names[kind]);
      rt->kind_names[kind] = NULL;
      rt->kind_ret[kind] = MW_T_VOID;
    }
    int j = 0;
    for (int i = 0; i < rt->nprogs; ++i)
      if (rt->progs[i] != p) rt->progs[j++] = rt->progs[i];
    rt->nprogs = j;
    program_free(p);
  }
  for (int i = 0; i < rt->nprogs; ++i) rt->progs[i]->index = i;
}

MW_API int mw_program_release(mw_program *p) {
  MW_NOT_NULL(p, "mw_program_release");
  p->released = 1;
  return 0;
}

MW_API int mw_program_compile(mw_runtime *rt, const char *source, const mw_compile_desc *desc,
                              mw_program **out) {
  MW_NOT_NULL(out, "mw_program_compile");
  *out = NULL;
  MW_NOT_NULL(rt, "mw_program_compile");
  MW_NOT_NULL(source, "mw_program_compile");
  if (rt->faulted) {
    mw__rt_error(rt, "the runtime has faulted: %s", mw_strerror(rt->faulted));
    return MW_EFAULT;
  }
  if (desc && desc->frame_bytes && desc->frame_bytes != rt->frame_bytes) {
    mw__rt_error(rt, "option 'frame_bytes' (%u) is not the runtime's (%u): a program compiles with its runtime's frames",
                 desc->frame_bytes, rt->frame_bytes);
    return MW_EINVAL;
  }
  mw_program *p = calloc(1, sizeof *p);
  if (!p) return MW_ENOMEM;
  p->rt = rt;
  mw__parsed defs;
  memset(&defs, 0, sizeof defs);
  int rc = mw__take_compile_options(desc, &defs, &p->include_dirs, &p->ninclude_dirs, rt->err,
                                    sizeof rt->err);
  if (!rc)
    rc = mw__parse(source, desc && desc->filename ? desc->filename : "<string>",
                   desc ? desc->first_line : 1, &p->parsed, rt->err, sizeof rt->err);
  if (!rc) rc = mw__check_block_tasks(&p->parsed, rt->nworkers, MW_CTA_WARPS, rt->err, sizeof rt->err);
  if (rc) {
    if (rc == MW_ENOMEM) snprintf(rt->err, sizeof rt->err, "out of memory");
    goto fail_reported;
  }
  /* p->parsed takes the defines over */
  p->parsed.ndefines = defs.ndefines;
  p->parsed.def_names = defs.def_names;
  p->parsed.def_values = defs.def_values;
  memset(&defs, 0, sizeof defs);
  p->debug = p->parsed.debug = desc && desc->debug;
  uint32_t n = (uint32_t)p->parsed.ntasks, base = free_kinds(rt, n);
  if (base == MW_NONE) {
    mw__rt_error(rt, "a runtime holds at most %u task kinds (programs let go of give theirs back "
                     "once nothing runs them)", MW_MAX_KINDS);
    rc = MW_ECAPACITY;
    goto fail;
  }
  for (uint32_t i = 0; i < n; ++i) p->parsed.tasks[i].kind = base + i;
  uint32_t nkinds = base + n > rt->nkinds ? base + n : rt->nkinds;
  mw_program **progs = realloc(rt->progs, sizeof *progs * (size_t)(rt->nprogs + 1));
  mw_program **keep = malloc(sizeof *keep * (size_t)(rt->nprogs + 1));
  mw_program **stale = malloc(sizeof *stale * (size_t)(rt->nprogs + 1));
  if (progs) rt->progs = progs;
  if (!progs || !keep || !stale) {
    free(keep);
    free(stale);
    rc = MW_ENOMEM;
    goto fail;
  }
  p->index = rt->nprogs;
  progs[rt->nprogs] = p;
  /* the image leaves out the programs let go of; if one still has work, all are kept */
  int nkeep = 0, nstale = 0;
  for (int i = 0; i <= rt->nprogs; ++i) {
    if (progs[i]->released) stale[nstale++] = progs[i];
    else keep[nkeep++] = progs[i];
  }
  tier_abandon(rt); /* built for the programs before this one */
  if (!(rc = compile_program(rt, p))) {
    rc = replace_executor(rt, keep, nkeep, nkinds, stale, nstale);
    if (rc == STALE_BUSY) {
      nstale = 0;
      rc = replace_executor(rt, progs, rt->nprogs + 1, nkinds, NULL, 0);
    }
  }
  free(keep);
  if (rc) {
    free(stale);
    goto fail_reported;
  }
  rt->nprogs++;
  rt->nkinds = nkinds;
  for (uint32_t i = 0; i < n; ++i) /* its figures start from the counters its kinds have now */
    if (kinds_stats_raw(rt, base + i, 1, &rt->kind_base[base + i]) != 0)
      memset(rt->kind_base[base + i], 0, sizeof rt->kind_base[base + i]);
  drop_programs(rt, stale, nstale); /* first: a name they held is free again */
  free(stale);
  name_kinds(rt, p);
  if (rt->tiered) tier_start(rt);
  *out = p;
  return 0;
fail_reported: /* rt->err says why */
  mw__set_error_str(rt->err);
fail:
  mw__parsed_free(&defs); /* the defines p->parsed has not taken over */
  program_free(p);
  return rc;
}

MW_API int mw_program_task_count(const mw_program *p) {
  MW_NOT_NULL(p, "mw_program_task_count");
  return p->parsed.ntasks;
}

MW_API int mw_program_task(const mw_program *p, int i, mw_task_info *out) {
  MW_NOT_NULL(p, "mw_program_task");
  MW_NOT_NULL(out, "mw_program_task");
  if (i < 0 || i >= p->parsed.ntasks) return MW_ENOTASK;
  const mw__task *t = &p->parsed.tasks[i];
  out->name = t->name;
  out->kind = t->kind;
  out->ret = t->ret;
  out->nparams = t->nparams;
  out->param_types = t->param_types;
  out->param_names = t->param_names;
  out->signature = t->signature;
  out->file = p->parsed.file;
  out->line = t->line;
  return 0;
}

MW_API int mw_program_find(const mw_program *p, const char *name) {
  MW_NOT_NULL(p, "mw_program_find");
  MW_NOT_NULL(name, "mw_program_find");
  for (int i = 0; i < p->parsed.ntasks; ++i)
    if (!strcmp(p->parsed.tasks[i].name, name)) return i;
  return MW_ENOTASK;
}

/* ---- completions and host futures ----------------------------------------------------------- */

/* Whether the device has closed host slot s since the host read its record (protocol.h,
 * completion ring, Closing); a faulted device never will, and nothing of it runs again. */
static int hslot_closed(mw_runtime *rt, uint32_t s) {
  mw__hslot *h = &rt->hs[s];
  if (!h->closing) return 1;
  if (!rt->faulted &&
      atomic_load_explicit((_Atomic uint32_t *)&rt->closed[s], memory_order_acquire) != h->gen)
    return 0;
  h->closing = 0;
  rt->nclosing_live--;
  return 1;
}

/* Host slot s, let go of, to the free list; by way of the closing ring while it is closing (a
 * spawn must not get it before the device closed it). Its closed word is not read here: the
 * device closes a slot microseconds after its record, which the host has only just read, so
 * the ring's reader (take_closed) is the one to look. */
static void hslot_free(mw_runtime *rt, uint32_t s) {
  rt->hs[s].live = 0;
  if (rt->hs[s].closing && !rt->faulted) {
    rt->closing[(rt->closing_head + rt->nclosing++) % rt->host_slots] = s;
  } else {
    hslot_closed(rt, s); /* closed, or a faulted device's: counted so */
    rt->hfree[rt->nhfree++] = s;
  }
}

/* The slots of the closing ring that the device has closed, oldest first, to the free list. */
static void take_closed(mw_runtime *rt) {
  while (rt->nclosing && hslot_closed(rt, rt->closing[rt->closing_head])) {
    rt->hfree[rt->nhfree++] = rt->closing[rt->closing_head];
    rt->closing_head = (rt->closing_head + 1) % rt->host_slots;
    rt->nclosing--;
  }
}

/* Returns host slot s to the free list once nothing holds it: it is complete, the script let go
 * of it, no host spawn it was given to is pending, and, if it was ever given to a task, the
 * device says its tasks hold it no more (hrefs, read by sweep_deferred; protocol.h, inbox). */
static void hslot_settle(mw_runtime *rt, uint32_t s) {
  mw__hslot *h = &rt->hs[s];
  if (!h->live || h->held || h->state == MW_ST_PENDING || h->holders || h->deferred) return;
  if (h->given) {
    h->deferred = 1;
    rt->ndeferred++;
    return;
  }
  hslot_free(rt, s);
}

/* Frees the deferred host slots whose device holders have all let go: one read of hrefs. */
static void sweep_deferred(mw_runtime *rt) {
  if (!rt->ndeferred || rt->faulted) return;
  uint32_t *refs = malloc((size_t)rt->host_slots * sizeof *refs);
  if (!refs) return;
  rt->last_sweep = mw__now();
  if (rt->ops->d2h(rt->be, refs, rt->hrefs_dev, (size_t)rt->host_slots * sizeof *refs) == 0)
    for (uint32_t s = 0; s < rt->host_slots; ++s) {
      mw__hslot *h = &rt->hs[s];
      if (!h->deferred || refs[s]) continue;
      h->deferred = 0;
      h->given = 0;
      rt->ndeferred--;
      hslot_free(rt, s);
    }
  free(refs);
}

/* The host futures spawn h was given let go of it: it has completed. */
static void release_holds(mw_runtime *rt, mw__hslot *h) {
  for (uint32_t i = 0; i < h->nholds; ++i) {
    mw__hslot *g = &rt->hs[h->holds[i]];
    if (g->holders) g->holders--;
    hslot_settle(rt, h->holds[i]);
  }
  free(h->holds);
  h->holds = NULL;
  h->nholds = 0;
}

/* ---- the completion ring's records (protocol.h, LL words; completion ring) ----------------- */
/* Reads the completion of ticket t into *r if it has arrived whole; returns whether it has. */
int mw__comp_read(const mw_runtime *rt, uint64_t t, mw__comp_rec *r) {
  const mw_comp_cell *c = &rt->comp[t & (rt->comp_cap - 1)];
  uint32_t d[MW_COMP_WORDS], flag = MW_LL_FLAG(t);
  for (unsigned k = 0; k < MW_COMP_WORDS; ++k) {
    uint64_t w = atomic_load_explicit((_Atomic uint64_t *)&c->w[k], memory_order_acquire);
    if ((uint32_t)(w >> 32) != flag) return 0;
    d[k] = (uint32_t)w;
  }
  r->fut = d[MW_CO_W_FUT] | (uint64_t)d[MW_CO_W_FUT + 1] << 32;
  r->value = d[MW_CO_W_VALUE] | (uint64_t)d[MW_CO_W_VALUE + 1] << 32;
  r->status = d[MW_CO_W_STATUS] & 255u;
  r->rtype = (d[MW_CO_W_STATUS] >> 8) & 255u;
  r->kind = d[MW_CO_W_KIND];
  r->code = (int32_t)d[MW_CO_W_CODE];
  return 1;
}

static void set_result(mw_runtime *rt, mw__hslot *h, const mw__comp_rec *c, const char *cmsg) {
  mw_result *r = &h->res;
  memset(r, 0, sizeof *r);
  r->status = c->status == MW_ST_OK ? MW_OK : c->status == MW_ST_CANCELLED ? MW_ECANCELED
                                                                           : MW_EFAILED;
  r->code = c->code;
  mw_type ty = c->kind < MW_MAX_KINDS && !h->bulk ? (mw_type)rt->kind_ret[c->kind] : MW_T_VOID;
  r->type = ty;
  r->value.u = c->value;
  switch (c->rtype) { /* normalise to the public union: .i, .u or .d */
    case MW_RT_I32: r->value.i = (int32_t)(uint32_t)c->value; break;
    case MW_RT_U32: r->value.u = (uint32_t)c->value; break;
    case MW_RT_F32: {
      union { uint32_t u; float f; } x = {(uint32_t)c->value};
      r->value.d = x.f;
      break;
    }
    default: break;
  }
  if (r->status != MW_OK) {
    char msg[MW_MSG_BYTES + 1];
    memcpy(msg, cmsg, MW_MSG_BYTES);
    msg[MW_MSG_BYTES] = 0;
    /* the device keeps MW_MSG_BYTES - 1 characters of a message (protocol.h): one that fills
     * them was cut there (or is exactly that long), and says so */
    size_t n = strlen(msg);
    int cut = n == MW_MSG_BYTES - 1 && strcmp(msg + n - 3, "...") != 0;
    snprintf(r->message, sizeof r->message, "%s%s", msg, cut ? "..." : "");
    if (!cut) user_message_line(rt, c->kind, r->message, sizeof r->message);
  }
}

static int check_alive(mw_runtime *rt);

/* Processes the completions that have arrived; returns how many. */
static int poll_ring(mw_runtime *rt) {
  int n = 0;
  if (!rt->comp) return 0;
  for (;;) {
    mw__comp_rec rec, *c = &rec;
    if (!mw__comp_read(rt, rt->comp_head, c)) break;
    uint32_t s = MW_FUT_SLOT(c->fut), gen = MW_FUT_GEN(c->fut);
    if (s < rt->host_slots && rt->hs[s].gen == gen && rt->hs[s].state == MW_ST_PENDING) {
      mw__hslot *h = &rt->hs[s];
      set_result(rt, h, c, rt->comp_msg + (size_t)(rt->comp_head & (rt->comp_cap - 1)) * MW_MSG_BYTES);
      h->state = c->status ? (uint8_t)c->status : MW_ST_OK;
      h->closing = 1; /* until the device's closed word says so (protocol.h, Closing) */
      rt->nclosing_live++;
      rt->in_flight--;
      rt->host_completed++;
      release_holds(rt, h);
      hslot_settle(rt, s);
    }
    rt->comp_head++;
    ++n;
  }
  if (rt->watch) {
    /* where it stands first, then the drain: a watcher that finds the fd drained reads a head
     * past what was processed here (watch.c) */
    if (n) atomic_store(&rt->comp_head_pub, rt->comp_head);
    mw__watch_drain(rt);
  }
  return n;
}

/* The public poll also asks after the executor's health (at most every 200 us): an event loop
 * that only polls learns of a fault here (it fails every pending future). */
MW_API int mw_runtime_poll(mw_runtime *rt) {
  if (!rt) return 0;
  int n = poll_ring(rt);
  check_alive(rt);
  return n;
}

/* ---- the one-unit build behind a parts load (build = "tiered") ------------------------------
 * A load links the new program's part as "parts" does, so it costs what that program costs;
 * then a thread compiles every loaded program with the executor in one unit (the image whose
 * executor runs faster on cuda: README, compiles), and once it is ready the next look at the
 * executor's health swaps it in: the executor stops, the image is loaded and launched, and the
 * tasks in flight carry on, as across a load (the two images have the same kinds and frames).
 * The thread owns its job; the runtime only reads `done`, and a job it no longer wants (a newer
 * load, the close) is marked abandoned and freed by whichever side sees it last. */
typedef struct mw__tier_job {
  pthread_mutex_t mu;
  int done, abandoned, rc;
  uint64_t gen;
  char *source;
  char **dirs;
  int ndirs;
  mw__build_opts bo;
  mw__image_req req;
  mw__image img;
  char err[512];
} mw__tier_job;

static void tier_job_free(mw__tier_job *j) {
  mw__image_free(&j->img);
  free(j->source);
  mw__free_strings(j->dirs, j->ndirs);
  pthread_mutex_destroy(&j->mu);
  free(j);
}

static void *tier_thread(void *arg) {
  mw__tier_job *j = arg;
  int rc = mw__image_compile(&j->req, &j->img, j->err, sizeof j->err, NULL);
  pthread_mutex_lock(&j->mu);
  j->rc = rc;
  __atomic_store_n(&j->done, 1, __ATOMIC_RELEASE);
  int abandoned = j->abandoned;
  pthread_mutex_unlock(&j->mu);
  if (abandoned) tier_job_free(j);
  return NULL;
}

/* Lets go of the build in progress, if any. */
static void tier_abandon(mw_runtime *rt) {
  mw__tier_job *j = rt->tier;
  if (!j) return;
  rt->tier = NULL;
  pthread_mutex_lock(&j->mu);
  int done = j->done;
  j->abandoned = 1;
  pthread_mutex_unlock(&j->mu);
  if (done) tier_job_free(j);
}

/* Keeps this library loaded for good: a build thread may still run when the script's state
 * closes and unloads its modules (the thread is not waited for; it frees its own job). */
static void pin_library(void) {
  Dl_info info;
  if (dladdr((void *)tier_thread, &info) && info.dli_fname) dlopen(info.dli_fname, RTLD_LAZY | RTLD_NODELETE);
}

/* Starts the one-unit build of the programs the executor runs now (after a load). A build that
 * cannot start only leaves the parts image running. */
static void tier_start(mw_runtime *rt) {
  static pthread_once_t pinned = PTHREAD_ONCE_INIT;
  pthread_once(&pinned, pin_library);
  tier_abandon(rt);
  rt->tier_gen++;
  mw__tier_job *j = calloc(1, sizeof *j);
  if (!j) return;
  pthread_mutex_init(&j->mu, NULL);
  j->gen = rt->tier_gen;
  mw__gen_opts go = {rt->ops->host_code, rt->frame_bytes, 1, 0};
  j->source = mw__generate(rt->run_progs, rt->run_nprogs, &go);
  const char **dirs = NULL;
  int rc = j->source ? build_options(rt->progs, rt->nprogs, j->source, &j->bo, &dirs) : MW_ENOMEM;
  if (!rc && j->bo.ninclude_dirs) { /* the thread's own copies: programs may go meanwhile */
    j->dirs = calloc((size_t)j->bo.ninclude_dirs, sizeof *j->dirs);
    for (int i = 0; j->dirs && i < j->bo.ninclude_dirs; ++i)
      if ((j->dirs[j->ndirs] = mw__strdup(dirs[i]))) j->ndirs++;
    if (!j->dirs || j->ndirs != j->bo.ninclude_dirs) rc = MW_ENOMEM;
  }
  free(dirs);
  j->bo.include_dirs = (const char *const *)j->dirs;
  mw__image_req req = {.source = j->source, .bo = &j->bo, .host_code = rt->ops->host_code,
                       .arch = rt->arch};
  j->req = req;
  pthread_t t;
  pthread_attr_t attr;
  if (rc || pthread_attr_init(&attr)) {
    tier_job_free(j);
    return;
  }
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&t, &attr, tier_thread, j)) tier_job_free(j);
  else rt->tier = j;
  pthread_attr_destroy(&attr);
}

/* Swaps the one-unit image in once it is ready (called with the executor's health looks). A
 * stop that times out (a task that runs on) is tried again a second later; an image that does
 * not load or start leaves the parts image running. */
static void tier_try(mw_runtime *rt) {
  mw__tier_job *j = rt->tier;
  if (!j || !__atomic_load_n(&j->done, __ATOMIC_ACQUIRE) || mw__now() < rt->tier_retry) return;
  if (j->rc || j->gen != rt->tier_gen || !rt->running) {
    tier_abandon(rt);
    return;
  }
  char keep[sizeof rt->err];
  snprintf(keep, sizeof keep, "%s", rt->err); /* what the script may still read */
  if (stop_executor(rt, rt->relaunch_timeout)) {
    rt->tier_retry = mw__now() + 1.0;
    snprintf(rt->err, sizeof rt->err, "%s", keep);
    return;
  }
  if (rt->ops->load(rt->be, j->img.data, j->img.size) == 0) rt->tier_swapped++;
  tier_abandon(rt);
  restart_executor(rt);
  snprintf(rt->err, sizeof rt->err, "%s", keep);
}

/* Checks the executor's health; marks the runtime faulted when the backend reports a fault. */
static int check_alive(mw_runtime *rt) {
  if (rt->faulted) return rt->faulted;
  if (!rt->running) return 0;
  if (rt->tier) tier_try(rt);
  /* a stream query costs microseconds: ask at most every 200 us */
  double now = mw__now();
  if (now - rt->last_check < 200e-6) return 0;
  rt->last_check = now;
  int q = query(rt);
  return q < 0 ? q : 0;
}

static int usable(mw_runtime *rt) {
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

/* ---- waiting (moonwarp.h, Waiting) --------------------------------------------------------
 * A blocking call looks for what it waits for, and between two looks calls wait_step: spins
 * first on cuda (a round trip takes tens of microseconds), yields a few times on sim (the
 * executor's threads need the CPU), then naps for a sixteenth of the time waited so far, from
 * WAIT_NAP_* up to WAIT_NAP_MAX_S: a long wait wakes its thread about a thousand times a second.
 * A wait for capacity (a free inbox cell or host future) naps from the start: the device frees
 * capacity at its own pace with thousands of spawns queued ahead, so a spin would only burn the
 * host's CPU once per spawn, and a nap lets several cells free up for the spawns that follow. */
/* 500 us: a device pipeline of a few stages or a fan-out answers in 100-400 us; a nap there
 * oversleeps by the kernel's timer slack (50 us by default) and cost the H200's 3-stage
 * pipeline 60 us at batch 2 with a 100 us spin (bench/NOTES.md). Long waits spin once. The naps
 * (mw__nap_ns) are a sixteenth of the time waited so far, with a 1 us timer slack: a wait that
 * ends after the spin is seen at most ~6 % late, where it was 12.5 % and 50 us (a 520 us bulk
 * task measured 620 us on the H200). */
#define WAIT_SPIN_CUDA_S 500e-6
#define WAIT_YIELDS_SIM 20u
#define WAIT_NAP_CUDA_S 20e-6
#define WAIT_NAP_SIM_S 50e-6
#define WAIT_NAP_MAX_S 1e-3
/* how long the host waits for the device to close the host futures it saw complete */
#define CLOSE_WAIT_S 10.0

typedef struct wait_state {
  double timeout, start, end;
  unsigned rounds;
  int spin; /* spin (cuda) or yield (sim) before the naps */
} wait_state;

/* A wait of up to timeout_s seconds (< 0: forever); its clock starts at the first step, so a
 * call that finds what it wants at once never reads the clock. */
static void wait_begin(wait_state *w, double timeout_s, int spin) {
  w->timeout = timeout_s;
  w->start = w->end = 0;
  w->rounds = 0;
  w->spin = spin;
}

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static int interrupted(mw_runtime *rt) {
  if (!rt->interrupt || !*rt->interrupt) return 0;
  mw__rt_error(rt, "interrupted");
  return 1;
}

/* After a look that found nothing: MW_EINTR when the interrupt flag is set, MW_ETIMEDOUT when
 * the time is up (the caller says what timed out), else 0 after a spin, a yield or a nap. A
 * signal to this thread cuts a nap short. */
static int wait_step(mw_runtime *rt, wait_state *w) {
  double now = mw__now();
  if (w->rounds++ == 0) {
    w->start = now;
    w->end = w->timeout < 0 ? 1e300 : now + w->timeout;
  }
  if (interrupted(rt)) return MW_EINTR;
  if (now >= w->end) return MW_ETIMEDOUT;
  double waited = now - w->start;
  int host_cpus = rt->ops->shares_cpus; /* sim: the executor needs these CPUs */
  if (w->spin && !host_cpus && waited < WAIT_SPIN_CUDA_S) {
    for (int i = 0; i < 8; ++i) cpu_relax();
    return 0;
  }
  if (w->spin && host_cpus && w->rounds <= WAIT_YIELDS_SIM) {
    sched_yield();
    return 0;
  }
  double nap = waited / MW_NAP_FRACTION, least = host_cpus ? WAIT_NAP_SIM_S : WAIT_NAP_CUDA_S;
  if (nap < least) nap = least;
  if (nap > WAIT_NAP_MAX_S) nap = WAIT_NAP_MAX_S;
  if (nap > w->end - now) nap = w->end - now;
  mw__nap_ns((long)(nap * 1e9));
  return interrupted(rt) ? MW_EINTR : 0;
}

MW_API int mw_runtime_set_interrupt(mw_runtime *rt, const volatile int *flag) {
  MW_NOT_NULL(rt, "mw_runtime_set_interrupt");
  rt->interrupt = flag;
  return 0;
}

/* Takes a free host slot, waiting as the timeout allows for one to be freed. */
static int wait_slot_long(mw_runtime *rt, double timeout_s, uint32_t *slot);
static int wait_slot(mw_runtime *rt, double timeout_s, uint32_t *slot) {
  if (rt->nhfree) {
    *slot = rt->hfree[--rt->nhfree];
    return 0;
  }
  /* counted and timed only when it waits (mw_stats.waits_future) */
  double t0 = mw__now();
  rt->waits_future++;
  int rc = wait_slot_long(rt, timeout_s, slot);
  rt->waits_future_s += mw__now() - t0;
  return rc;
}

static int wait_slot_long(mw_runtime *rt, double timeout_s, uint32_t *slot) {
  wait_state w;
  wait_begin(&w, timeout_s, 0);
  for (;;) {
    if (!rt->nhfree && rt->nclosing) take_closed(rt);
    if (rt->nhfree) {
      *slot = rt->hfree[--rt->nhfree];
      return 0;
    }
    poll_ring(rt);
    if (rt->nclosing) take_closed(rt);
    if (rt->nhfree) continue;
    if (rt->ndeferred && mw__now() - rt->last_sweep > 1e-3) sweep_deferred(rt);
    if (rt->nhfree) continue;
    int rc = check_alive(rt);
    if (rc) return rc;
    /* a closing slot is closed by the device within microseconds of its record: spin for it
     * (a nap of 20 us each time the free list runs dry halved a stream of host spawns) */
    w.spin = rt->nclosing != 0;
    if ((rc = wait_step(rt, &w))) {
      if (rc == MW_ETIMEDOUT) {
        mw__rt_error(rt, "all %u host futures are in use (raise host_futures, or release futures)",
                     rt->host_slots);
        rc = MW_ECAPACITY;
      }
      return rc;
    }
  }
}

static int check_nargs(mw_runtime *rt, const mw__task *t, int nargs) {
  if (nargs == t->nparams) return 0;
  mw__rt_error(rt, "task %s takes %d argument%s, got %d", t->name, t->nparams,
               t->nparams == 1 ? "" : "s", nargs);
  return MW_EINVAL;
}

/* Lays out the task's parameters (nparams values, checked) as its frame expects them. */
static void marshal(const mw__task *t, const mw_value *args, uint8_t *out) {
  memset(out, 0, MW_INBOX_ARG_BYTES);
  for (int i = 0; i < t->nparams; ++i) {
    const mw__param *p = &t->params[i];
    uint8_t *d = out + p->offset;
    mw_value v = args[i];
    switch (p->type) {
      case MW_T_BOOL: *d = v.i != 0; break;
      case MW_T_I8: case MW_T_U8: *d = (uint8_t)v.i; break;
      case MW_T_I16: case MW_T_U16: { uint16_t x = (uint16_t)v.i; memcpy(d, &x, 2); break; }
      case MW_T_I32: case MW_T_U32: { uint32_t x = (uint32_t)v.i; memcpy(d, &x, 4); break; }
      case MW_T_F32: { float x = (float)v.d; memcpy(d, &x, 4); break; }
      case MW_T_F64: memcpy(d, &v.d, 8); break;
      default: memcpy(d, &v.u, 8); break; /* 64-bit integers, pointers, futures */
    }
  }
}

/* Whether inbox cell tk % cap is free for ticket tk (protocol.h, inbox ring). */
static int cell_free(const mw_runtime *rt, uint64_t tk) {
  return atomic_load_explicit((_Atomic uint64_t *)&rt->inbox_free[tk & (rt->inbox_cap - 1)],
                              memory_order_acquire) == tk;
}

/* Publishes the record d of ticket tk in its cell: every word with the ticket's flag. */
static void inbox_write(mw_runtime *rt, uint64_t tk, const uint32_t d[MW_INBOX_WORDS]) {
  mw_inbox_cell *cell = &rt->inbox[tk & (rt->inbox_cap - 1)];
  const uint32_t flag = MW_LL_FLAG(tk);
  for (unsigned k = 0; k < MW_INBOX_WORDS; ++k)
    atomic_store_explicit((_Atomic uint64_t *)&cell->w[k], MW_LL_WORD(d[k], flag),
                          memory_order_relaxed);
}

/* Waits up to timeout_s for the inbox cell of the next ticket to be free (spawns and cancel
 * requests). Returns 0, or an error code. */
static int inbox_wait_long(mw_runtime *rt, double timeout_s);
static int inbox_wait(mw_runtime *rt, double timeout_s) {
  if (cell_free(rt, rt->inbox_tail)) return 0;
  /* counted and timed only when it waits (mw_stats.waits_inbox) */
  double t0 = mw__now();
  rt->waits_inbox++;
  int rc = inbox_wait_long(rt, timeout_s);
  rt->waits_inbox_s += mw__now() - t0;
  return rc;
}

static int inbox_wait_long(mw_runtime *rt, double timeout_s) {
  uint64_t tk = rt->inbox_tail;
  /* full: wait until half of it is free (the device takes spawns in order), so that the
   * spawns that follow find their cells without a wait each */
  uint64_t far = tk + rt->inbox_cap / 2 - 1;
  wait_state w;
  wait_begin(&w, timeout_s, 0);
  int rc;
  while (!cell_free(rt, tk) || !cell_free(rt, far)) {
    poll_ring(rt);
    if ((rc = check_alive(rt))) return rc;
    if ((rc = wait_step(rt, &w))) {
      if (rc == MW_ETIMEDOUT) {
        mw__rt_error(rt, "the inbox is full: the device is not taking new tasks (capacity "
                         "exhausted?)");
        rc = MW_ECAPACITY;
      }
      return rc;
    }
  }
  return 0;
}

/* A spawn given host futures as arguments holds them: each stays (its slot not reused) until
 * the spawn has completed and the device's tasks hold it no more (protocol.h, inbox ring). */
static void note_holds(mw_runtime *rt, const mw__task *t, const mw_value *args, mw__hslot *h) {
  for (int i = 0; i < t->nparams; ++i) {
    if (t->params[i].type != MW_T_FUTURE) continue;
    mw_future g = args[i].f;
    uint32_t gs = MW_FUT_SLOT(g);
    if (!g || gs >= rt->host_slots || rt->hs[gs].gen != MW_FUT_GEN(g) || !rt->hs[gs].live) continue;
    uint32_t *more = realloc(h->holds, sizeof *more * (h->nholds + 1));
    if (!more) continue; /* then only the device's count keeps it: still sound once it runs */
    h->holds = more;
    h->holds[h->nholds++] = gs;
    rt->hs[gs].holders++;
    rt->hs[gs].given = 1;
  }
}


/* Checks what every spawn of one call shares: the program, the task, the argument count and
 * the runtime's state. Returns the task, or NULL with *rc set. */
static const mw__task *spawn_check(mw_runtime *rt, const mw_program *p, int task, int nargs,
                                   int *rc) {
  if (p->rt != rt) {
    mw__rt_error(rt, "the program belongs to another runtime");
    *rc = MW_EINVAL;
    return NULL;
  }
  if (task < 0 || task >= p->parsed.ntasks) {
    mw__rt_error(rt, "no task #%d in the program", task);
    *rc = MW_ENOTASK;
    return NULL;
  }
  const mw__task *t = &p->parsed.tasks[task];
  if ((*rc = usable(rt)) || (*rc = check_nargs(rt, t, nargs))) return NULL;
  return t;
}

/* One checked spawn: a host slot, the inbox cell of the next ticket, the record in it. held 0
 * lets go of the future at once (fire-and-forget). No clock read, system call or allocation
 * while both are free (a future among the arguments takes one allocation). */
static int spawn_one(mw_runtime *rt, const mw__task *t, uint32_t flags, uint32_t n,
                     const mw_value *args, double timeout_s, int held, mw_future *out) {
  int rc;
  uint32_t s;
  if ((rc = wait_slot(rt, timeout_s, &s))) return rc;
  mw__hslot *h = &rt->hs[s];
  /* the inbox cell for our ticket must be free */
  uint64_t tk = rt->inbox_tail;
  if ((rc = inbox_wait(rt, timeout_s))) {
    rt->hfree[rt->nhfree++] = s;
    return rc;
  }
  h->gen++;
  if (h->gen == 0) h->gen = 1;
  h->state = MW_ST_PENDING;
  h->held = (uint8_t)held;
  h->live = 1;
  h->bulk = (flags & MW_IN_BULK) != 0;
  h->kind = t->kind;
  h->cancel_sent = 0;
  h->ticket = tk;
  /* h->res is written whole when the future completes; nothing reads it before */
  note_holds(rt, t, args, h);
  mw_future f = MW_FUT_MAKE(s, h->gen);
  uint32_t d[MW_INBOX_WORDS] = {0};
  marshal(t, args, (uint8_t *)d);
  d[MW_IN_W_KIND] = t->kind;
  /* a block task's frame says so; one spawned alone is one instance (protocol.h, Block tasks) */
  d[MW_IN_W_FLAGS] = flags | (t->block ? MW_IN_BLOCK : 0u);
  d[MW_IN_W_FUT] = (uint32_t)f;
  d[MW_IN_W_FUT + 1] = (uint32_t)(f >> 32);
  d[MW_IN_W_BULK_N] = t->block && !(flags & MW_IN_BULK) ? 1u : n;
  inbox_write(rt, tk, d);
  rt->inbox_tail = tk + 1;
  rt->host_spawned++;
  rt->in_flight++;
  if (rt->watch) mw__watch_spawned(rt);
  if (out) *out = f;
  return 0;
}

static int spawn_common(mw_runtime *rt, const mw_program *p, int task, uint32_t flags, uint32_t n,
                        const mw_value *args, int nargs, double timeout_s, mw_future *out) {
  MW_NOT_NULL(out, "mw_spawn");
  *out = 0;
  MW_NOT_NULL(rt, "mw_spawn");
  MW_NOT_NULL(p, "mw_spawn");
  if (nargs && !args) return mw__null_arg("mw_spawn", "args");
  if ((flags & MW_IN_BULK) && n == 0) {
    mw__rt_error(rt, "mw_spawn_bulk: n must be at least 1 (instances to run)");
    return MW_EINVAL;
  }
  int rc;
  const mw__task *t = spawn_check(rt, p, task, nargs, &rc);
  return t ? spawn_one(rt, t, flags, n, args, timeout_s, 1, out) : rc;
}

MW_API int mw_spawn(mw_runtime *rt, const mw_program *p, int task, const mw_value *args,
                    int nargs, double timeout_s, mw_future *out) {
  return spawn_common(rt, p, task, 0, 0, args, nargs, timeout_s, out);
}

MW_API int mw_spawn_bulk(mw_runtime *rt, const mw_program *p, int task, uint32_t n,
                         const mw_value *args, int nargs, double timeout_s, mw_future *out) {
  return spawn_common(rt, p, task, MW_IN_BULK, n, args, nargs, timeout_s, out);
}

MW_API int mw_spawn_n(mw_runtime *rt, const mw_program *p, int task, uint32_t n,
                      const mw_value *args, int nargs, double timeout_s, mw_future *out,
                      uint32_t *spawned) {
  if (spawned) *spawned = 0;
  MW_NOT_NULL(rt, "mw_spawn_n");
  MW_NOT_NULL(p, "mw_spawn_n");
  if (nargs && !args) return mw__null_arg("mw_spawn_n", "args");
  int rc;
  const mw__task *t = spawn_check(rt, p, task, nargs, &rc);
  if (!t) return rc;
  uint32_t i;
  for (i = 0; i < n; ++i) {
    const mw_value *a = nargs ? args + (size_t)i * (size_t)nargs : NULL;
    if ((rc = spawn_one(rt, t, 0, 0, a, timeout_s, out != NULL, out ? &out[i] : NULL))) break;
  }
  if (spawned) *spawned = i;
  return rc;
}

static mw__hslot *lookup(mw_runtime *rt, mw_future f) {
  uint32_t s = MW_FUT_SLOT(f);
  if (!f || s >= rt->host_slots || rt->hs[s].gen != MW_FUT_GEN(f) || !rt->hs[s].held) {
    mw__rt_error(rt, "stale or foreign future");
    return NULL;
  }
  return &rt->hs[s];
}

MW_API int mw_future_poll(mw_runtime *rt, mw_future f, mw_result *out) {
  MW_NOT_NULL(rt, "mw_future_poll");
  mw__hslot *h = lookup(rt, f);
  if (!h) return MW_ESTALE;
  if (h->state == MW_ST_PENDING) {
    poll_ring(rt);
    if (h->state == MW_ST_PENDING) {
      check_alive(rt);
      if (h->state == MW_ST_PENDING) return MW_EAGAIN;
    }
  }
  if (out) *out = h->res;
  return 0;
}

MW_API int mw_future_await(mw_runtime *rt, mw_future f, double timeout_s, mw_result *out) {
  MW_NOT_NULL(rt, "mw_future_await");
  wait_state w;
  wait_begin(&w, timeout_s, 1);
  for (;;) {
    int rc = mw_future_poll(rt, f, out);
    if (rc != MW_EAGAIN) return rc;
    if ((rc = wait_step(rt, &w))) {
      if (rc == MW_ETIMEDOUT) mw__rt_error(rt, "timed out after %.3f s", timeout_s);
      return rc;
    }
  }
}

MW_API int mw_future_await_any(mw_runtime *rt, const mw_future *fs, int n, double timeout_s,
                               int *index, mw_result *out) {
  MW_NOT_NULL(index, "mw_future_await_any");
  MW_NOT_NULL(rt, "mw_future_await_any");
  MW_NOT_NULL(fs, "mw_future_await_any");
  if (n < 1) {
    mw__rt_error(rt, "mw_future_await_any: n must be at least 1 (futures to wait for)");
    return MW_EINVAL;
  }
  for (int i = 0; i < n; ++i)
    if (!lookup(rt, fs[i])) {
      *index = i;
      return MW_ESTALE;
    }
  wait_state w;
  wait_begin(&w, timeout_s, 1);
  for (;;) {
    poll_ring(rt);
    check_alive(rt); /* a fault fails every pending future: the loop below ends */
    for (int i = 0; i < n; ++i) {
      const mw__hslot *h = &rt->hs[MW_FUT_SLOT(fs[i])];
      if (h->state == MW_ST_PENDING) continue;
      *index = i;
      if (out) *out = h->res;
      return 0;
    }
    int rc = wait_step(rt, &w);
    if (rc) {
      if (rc == MW_ETIMEDOUT) mw__rt_error(rt, "timed out after %.3f s", timeout_s);
      return rc;
    }
  }
}

MW_API int mw_future_cancel(mw_runtime *rt, mw_future f, double timeout_s) {
  MW_NOT_NULL(rt, "mw_future_cancel");
  mw__hslot *h = lookup(rt, f);
  if (!h) return MW_ESTALE;
  if (h->state == MW_ST_PENDING) mw_runtime_poll(rt);
  if (h->state != MW_ST_PENDING) return 0; /* complete: a no-op */
  if (h->cancel_sent) return 1;
  int rc = usable(rt);
  if (rc) return rc;
  /* a spawn the device has not taken yet is marked in its own cell: the device then completes
   * it as cancelled without running it (protocol.h, inbox ring) */
  int marked = 0;
  mw_inbox_cell *spawn = &rt->inbox[h->ticket & (rt->inbox_cap - 1)];
  if (!cell_free(rt, h->ticket + rt->inbox_cap)) {
    _Atomic uint64_t *fw = (_Atomic uint64_t *)&spawn->w[MW_IN_W_FLAGS];
    uint64_t old = atomic_load_explicit(fw, memory_order_relaxed);
    if ((uint32_t)(old >> 32) == MW_LL_FLAG(h->ticket)) {
      atomic_store_explicit(fw, old | MW_IN_CANCELLED, memory_order_relaxed);
      marked = 1;
    }
  }
  /* and the request itself, for a task the device has taken (or takes meanwhile) */
  if ((rc = inbox_wait(rt, timeout_s))) return rc; /* the mark alone may still stop a task not yet taken */
  if (h->state != MW_ST_PENDING) return marked; /* it completed while we waited for a cell */
  uint32_t d[MW_INBOX_WORDS] = {0};
  d[MW_IN_W_FLAGS] = MW_IN_CANCEL;
  d[MW_IN_W_FUT] = (uint32_t)f;
  d[MW_IN_W_FUT + 1] = (uint32_t)(f >> 32);
  inbox_write(rt, rt->inbox_tail, d);
  rt->inbox_tail++;
  h->cancel_sent = 1;
  return 1;
}

MW_API int mw_future_release(mw_runtime *rt, mw_future f) {
  MW_NOT_NULL(rt, "mw_future_release");
  mw__hslot *h = lookup(rt, f);
  if (!h) return MW_ESTALE;
  h->held = 0;
  hslot_settle(rt, MW_FUT_SLOT(f));
  return 0;
}

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
      stop_executor(rt, rt->relaunch_timeout) == 0)
    restart_executor(rt);
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

/* ---- statistics ---------------------------------------------------------------------------- */

/* Waits until the device has closed every host slot whose record the host has read
 * (protocol.h, completion ring, Closing), so the rows read after count the work of every task
 * the host saw complete. It follows each record within microseconds; the bound is for a device
 * that stopped answering. */
static int wait_closed(mw_runtime *rt) {
  wait_state w;
  wait_begin(&w, CLOSE_WAIT_S, 1); /* closed microseconds after its record: spin first */
  for (;;) {
    for (uint32_t s = 0; s < rt->host_slots && rt->nclosing_live; ++s) hslot_closed(rt, s);
    if (!rt->nclosing_live) return 0;
    int rc = check_alive(rt);
    if (rc) return rc;
    if ((rc = wait_step(rt, &w))) {
      if (rc == MW_ETIMEDOUT)
        mw__rt_error(rt, "the executor did not close %u completed host futures within %.0f s",
                     rt->nclosing_live, CLOSE_WAIT_S);
      return rc;
    }
  }
}

/* The kind counters as the device last wrote them (protocol.h, per-worker rows): *spill the
 * MW_MAX_KINDS spill rows, *en the max_workers * MW_STAT_ENTRIES entries; free(*spill) after. */
static int read_rows(mw_runtime *rt, mw_stat_row **spill, mw_stat_entry **en) {
  int rc = wait_closed(rt);
  if (rc) return rc;
  size_t n = stats_bytes(rt);
  *spill = malloc(n);
  if (!*spill) return MW_ENOMEM;
  *en = (mw_stat_entry *)(void *)((char *)*spill + MW_MAX_KINDS * sizeof(mw_stat_row));
  rc = rt->faulted ? MW_EFAULT : rt->ops->d2h(rt->be, *spill, rt->stats_dev, n);
  if (rc) free(*spill);
  return rc;
}

static void add_row(uint64_t out[4], const mw_stat_row *r) {
  out[0] += r->spawned;
  out[1] += r->completed;
  out[2] += r->failed;
  out[3] += r->cancelled;
}

MW_API int mw_runtime_stats(mw_runtime *rt, mw_stats *out) {
  MW_NOT_NULL(out, "mw_runtime_stats");
  memset(out, 0, sizeof *out);
  MW_NOT_NULL(rt, "mw_runtime_stats");
  mw_runtime_poll(rt);
  check_alive(rt);
  out->host_spawned = rt->host_spawned;
  out->host_completed = rt->host_completed;
  out->in_flight = rt->in_flight;
  out->workers = rt->nworkers;
  out->kinds = rt->nkinds;
  out->uptime_s = mw__now() - rt->t_start;
  out->heartbeat = rt->ctl ? rt->ctl->heartbeat : 0;
  double now = mw__now();
  if (out->heartbeat != rt->last_heartbeat) {
    rt->last_heartbeat = out->heartbeat;
    rt->heartbeat_seen = now;
  }
  out->heartbeat_age_s = now - (rt->heartbeat_seen ? rt->heartbeat_seen : rt->t_start);
  out->launches = rt->launches;
  out->tier_swaps = rt->tier_swapped;
  out->waits_future = rt->waits_future;
  out->waits_inbox = rt->waits_inbox;
  out->waits_future_s = rt->waits_future_s;
  out->waits_inbox_s = rt->waits_inbox_s;
  out->frames = rt->nframes;
  out->host_futures = rt->host_slots;
  out->host_futures_held = rt->host_slots - rt->nhfree - rt->nclosing;
  mw_stat_row *spill;
  mw_stat_entry *en;
  int rc = read_rows(rt, &spill, &en);
  if (rc) return rc;
  uint64_t sum[4] = {0, 0, 0, 0};
  for (uint32_t k = 0; k < MW_MAX_KINDS; ++k) add_row(sum, &spill[k]);
  for (size_t i = 0; i < (size_t)rt->max_workers * MW_STAT_ENTRIES; ++i) add_row(sum, &en[i].n);
  out->spawned = sum[0];
  out->completed = sum[1];
  out->failed = sum[2];
  out->cancelled = sum[3];
  free(spill);
  mw_worker *ws = malloc((size_t)rt->max_workers * sizeof *ws);
  if (!ws) return MW_ENOMEM;
  rc = rt->ops->d2h(rt->be, ws, rt->workers_dev, (size_t)rt->max_workers * sizeof *ws);
  uint64_t taken = 0, freed = 0;
  if (!rc)
    for (uint32_t i = 0; i < rt->max_workers; ++i) {
      out->steals += ws[i].steals;
      taken += ws[i].frames_taken;
      freed += ws[i].frames_freed;
      /* as each worker last wrote its counters (protocol.h, per-worker rows) */
      out->queued_local += ws[i].queued;
    }
  free(ws);
  out->frames_in_use = taken > freed ? (uint32_t)(taken - freed) : 0;
  mw_state st;
  if (!rc && !(rc = rt->ops->d2h(rt->be, &st, rt->state_dev, sizeof st))) {
    out->queued_inbox = rt->inbox_tail > st.inbox_head ? rt->inbox_tail - st.inbox_head : 0;
    out->queued_global = st.gq_tail > st.gq_head ? st.gq_tail - st.gq_head : 0;
    out->grids = st.grids;
  }
  return rc;
}

MW_API int mw_runtime_kind_name(const mw_runtime *rt, uint32_t kind, const char **out) {
  MW_NOT_NULL(out, "mw_runtime_kind_name");
  *out = NULL;
  MW_NOT_NULL(rt, "mw_runtime_kind_name");
  if (kind >= rt->nkinds) return MW_ENOTASK;
  *out = rt->kind_names[kind];
  if (*out) return 0;
  for (int i = 0; i < rt->nprogs; ++i) /* held by a program: its name found no memory */
    for (int k = 0; k < rt->progs[i]->parsed.ntasks; ++k)
      if (rt->progs[i]->parsed.tasks[k].kind == kind) return MW_ENOMEM;
  return MW_ENOTASK; /* its program was dropped (mw_program_release) */
}

MW_API int mw_runtime_kind_stats(mw_runtime *rt, uint32_t kind, uint64_t out[4]) {
  MW_NOT_NULL(out, "mw_runtime_kind_stats");
  memset(out, 0, 4 * sizeof *out);
  MW_NOT_NULL(rt, "mw_runtime_kind_stats");
  if (kind >= rt->nkinds) return MW_ENOTASK;
  return mw_runtime_kinds_stats(rt, kind, 1, (uint64_t(*)[4])out);
}

MW_API int mw_runtime_kinds_stats(mw_runtime *rt, uint32_t first, uint32_t n, uint64_t (*out)[4]) {
  MW_NOT_NULL(out, "mw_runtime_kinds_stats");
  MW_NOT_NULL(rt, "mw_runtime_kinds_stats");
  if (first >= rt->nkinds || n > rt->nkinds - first) return MW_ENOTASK;
  int rc = kinds_stats_raw(rt, first, n, out);
  /* a kind used again counts from where its last program left it */
  for (uint32_t i = 0; !rc && i < n; ++i)
    for (int j = 0; j < 4; ++j) out[i][j] -= rt->kind_base[first + i][j];
  return rc;
}

MW_API int mw_runtime_kinds_instance_cycles(mw_runtime *rt, uint32_t first, uint32_t n, uint32_t *out) {
  MW_NOT_NULL(out, "mw_runtime_kinds_instance_cycles");
  MW_NOT_NULL(rt, "mw_runtime_kinds_instance_cycles");
  if (first >= rt->nkinds || n > rt->nkinds - first) return MW_ENOTASK;
  if (rt->faulted) return MW_EFAULT;
  return rt->ops->d2h(rt->be, out, hints_dev(rt) + first * sizeof(uint32_t), (size_t)n * sizeof(uint32_t));
}

/* The counters of kinds [first, first + n) as the rows hold them, since the runtime started. */
static int kinds_stats_raw(mw_runtime *rt, uint32_t first, uint32_t n, uint64_t (*out)[4]) {
  memset(out, 0, (size_t)n * sizeof *out);
  mw_stat_row *spill;
  mw_stat_entry *en;
  int rc = read_rows(rt, &spill, &en);
  if (rc) return rc;
  for (uint32_t i = 0; i < n; ++i) add_row(out[i], &spill[first + i]);
  /* each entry counts one kind: the one it holds now */
  for (size_t i = 0; i < (size_t)rt->max_workers * MW_STAT_ENTRIES; ++i)
    if (en[i].kind - first < n) add_row(out[en[i].kind - first], &en[i].n);
  free(spill);
  return 0;
}

/* ---- compiling without a runtime --------------------------------------------------------- */

MW_API int mw_compile_cubin(const char *source, const char *filename, const char *arch,
                            void **out_cubin, size_t *out_size, char **out_log) {
  mw_compile_desc d;
  memset(&d, 0, sizeof d);
  d.filename = filename;
  d.arch = arch;
  return mw_compile_cubin_desc(source, &d, out_cubin, out_size, out_log);
}

MW_API int mw_compile_cubin_desc(const char *source, const mw_compile_desc *desc,
                                 void **out_cubin, size_t *out_size, char **out_log) {
  MW_NOT_NULL(out_cubin, "mw_compile_cubin");
  MW_NOT_NULL(out_size, "mw_compile_cubin");
  *out_cubin = NULL;
  *out_size = 0;
  if (out_log) *out_log = NULL;
  MW_NOT_NULL(source, "mw_compile_cubin");
  /* $MOONWARP_BUILD=one_unit: the image as a cuda runtime builds it by default (below) */
  const char *build = NULL;
  if (build_of_env(&build) || grid_env_ok()) return MW_EINVAL;
  if (frame_bytes_ok(desc ? desc->frame_bytes : 0)) return MW_EINVAL;
  const char *arch = desc ? desc->arch : NULL;
  int sm = 90;
  if (arch && (sscanf(arch, "sm_%d", &sm) != 1 || sm < 70)) {
    mw__set_error("arch '%s' is not of the form sm_XY (sm_70 or newer)", arch);
    return MW_EINVAL;
  }
  char err[1024];
  mw_program prog;
  memset(&prog, 0, sizeof prog);
  mw__parsed *p = &prog.parsed;
  int rc = mw__take_compile_options(desc, p, &prog.include_dirs, &prog.ninclude_dirs, err,
                                    sizeof err);
  if (rc) {
    mw__set_error_str(rc == MW_ENOMEM ? "out of memory" : err);
    return rc;
  }
  prog.debug = desc && desc->debug;
  mw__parsed defs = *p;
  if ((rc = mw__nvrtc_load(err, sizeof err)) == 0 &&
      ((rc = mw__parse(source, desc && desc->filename ? desc->filename : NULL,
                       desc ? desc->first_line : 1, p, err, sizeof err)) != 0) &&
      out_log)
    *out_log = mw__strdup(err);
  if (rc) {
    mw__parsed_free(&defs);
    mw__free_strings(prog.include_dirs, prog.ninclude_dirs);
    mw__set_error_str(err);
    return rc;
  }
  p->ndefines = defs.ndefines;
  p->def_names = defs.def_names;
  p->def_values = defs.def_values;
  for (int i = 0; i < p->ntasks; ++i) p->tasks[i].kind = (uint32_t)i;
  p->debug = prog.debug;
  /* as a runtime builds its image: the executor's part, the program's and the link part,
   * compiled one by one and linked (nothing cached); with $MOONWARP_BUILD=one_unit, as a cuda
   * runtime does by default: the whole image compiled in one unit */
  mw__parsed *list[1] = {p};
  mw_program *progs[1] = {&prog};
  mw__gen_opts go = {0, desc && desc->frame_bytes ? desc->frame_bytes : DEFAULT_FRAME_BYTES, 0, 0};
  mw__image parts[3];
  memset(parts, 0, sizeof parts);
  static const mw__gen_part which[3] = {MW_GEN_EXECUTOR, MW_GEN_PROGRAM, MW_GEN_LINK};
  char *log = NULL;
  err[0] = 0;
  mw__image img = {0};
  if (build && !strcmp(build, "one_unit")) {
    go.grids = grids_wanted(0);
    const int grids = mw__grids_of(list, 1, &go);
    char *gen = mw__generate(list, 1, &go);
    mw__build_opts bo;
    const char **dirs = NULL;
    rc = gen ? build_options(progs, 1, gen, &bo, &dirs) : MW_ENOMEM;
    bo.debug = prog.debug;
    mw__image_req req = {.source = gen, .bo = &bo, .arch = sm, .offline = 1, .object = grids};
    mw__image obj = {0};
    if (!rc) rc = mw__image_compile(&req, grids ? &obj : &img, err, sizeof err, &log);
    const mw__image *one[1] = {&obj};
    if (!rc && grids) rc = mw__image_link(one, 1, 0, sm, mw__cudadevrt(), &img, err, sizeof err);
    mw__image_free(&obj);
    free(dirs);
    free(gen);
  } else {
    for (int k = 0; k < 3 && !rc; ++k) {
      char *gen = mw__generate_part(which[k], list, 1, &go);
      mw__build_opts bo;
      const char **dirs = NULL;
      rc = gen ? build_options(progs, which[k] == MW_GEN_PROGRAM, gen, &bo, &dirs) : MW_ENOMEM;
      bo.debug = prog.debug;
      mw__image_req req = {.source = gen, .bo = &bo, .arch = sm, .offline = 1, .object = 1};
      if (!rc) rc = mw__image_compile(&req, &parts[k], err, sizeof err, which[k] == MW_GEN_PROGRAM ? &log : NULL);
      free(dirs);
      free(gen);
    }
    const mw__image *pp[3] = {&parts[0], &parts[1], &parts[2]};
    if (!rc) rc = mw__image_link(pp, 3, 0, sm, NULL, &img, err, sizeof err);
    for (int k = 0; k < 3; ++k) mw__image_free(&parts[k]);
  }
  mw__parsed_free(p);
  mw__free_strings(prog.include_dirs, prog.ninclude_dirs);
  *out_cubin = img.data;
  *out_size = img.size;
  if (rc) mw__set_error_str(log ? log : err[0] ? err : rc == MW_ENOMEM ? "out of memory" : "NVRTC failed");
  if (rc && !log && err[0]) log = mw__strdup(err);
  if (out_log) *out_log = log;
  else free(log);
  return rc;
}
