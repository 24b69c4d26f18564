/* trace.c - task traces: per-worker event buffers switched on and off while the executor runs,
 * read back and written as a Chrome trace event JSON file (Perfetto, chrome://tracing). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "util.h"

#define DEFAULT_EVENTS 4096u
#define ACK_DEADLINE_S 1.0 /* how long a start or stop waits for workers still inside a run */

/* A buffer that a busy worker may still write into: freed once every running worker has acted
 * on a trace_gen at least gen, or once the executor has stopped. */
typedef struct orphan {
  uint64_t buf;
  uint32_t gen, workers;
} orphan;

struct mw__trace {
  uint32_t gen; /* the last trace_gen written to the device; odd while on */
  uint64_t ack_dev; /* trace_ack: max_workers u32, kept from the first start to close */
  uint64_t buf_dev; /* the buffer of the recording that is on */
  uint32_t cap, workers;
  orphan *orphans;
  int norphans;
};

/* ---- device state ------------------------------------------------------------------------- */

static int write_gen(mw_runtime *rt, uint32_t gen) {
  int rc = rt->ops->h2d(rt->be, rt->state_dev + offsetof(mw_state, trace_gen), &gen, 4);
  if (!rc) {
    rt->trace->gen = gen;
    rt->state.trace_gen = gen;
  }
  return rc;
}

/* Workers of the running executor that may hold a buffer of `workers` workers. */
static uint32_t running_workers(const mw_runtime *rt, uint32_t workers) {
  if (!rt->running) return 0;
  return rt->nworkers < workers ? rt->nworkers : workers;
}

/* Reads the acks of workers 0..n-1 into acks; returns how many are behind gen (gen - ack > 0,
 * as gens only grow), or a negative MW_E*. */
static int64_t acks_behind(mw_runtime *rt, uint32_t n, uint32_t gen, uint32_t *acks) {
  if (n == 0) return 0;
  int rc = rt->ops->d2h(rt->be, acks, rt->trace->ack_dev, (size_t)n * 4);
  if (rc) return rc;
  int64_t behind = 0;
  for (uint32_t w = 0; w < n; ++w) behind += (int32_t)(gen - acks[w]) > 0;
  return behind;
}

/* Waits up to ACK_DEADLINE_S until workers 0..n-1 have acted on gen, while the executor runs.
 * Returns how many have not (acks holds theirs), or a negative MW_E*. */
static int64_t wait_acks(mw_runtime *rt, uint32_t n, uint32_t gen, uint32_t *acks) {
  double end = mw__now() + ACK_DEADLINE_S;
  int64_t behind;
  while ((behind = acks_behind(rt, n, gen, acks)) > 0 && mw__now() < end &&
         rt->ops->query(rt->be) > 0)
    mw__sleep_ns(20000);
  return behind;
}

/* Frees the orphaned buffers no worker can touch any more. */
static void reap_orphans(mw_runtime *rt) {
  struct mw__trace *tr = rt->trace;
  if (!tr->norphans || rt->faulted) return;
  uint32_t *acks = malloc((size_t)rt->max_workers * 4);
  if (!acks) return;
  int kept = 0;
  for (int i = 0; i < tr->norphans; ++i) {
    orphan *o = &tr->orphans[i];
    if (o->gen != UINT32_MAX && acks_behind(rt, running_workers(rt, o->workers), o->gen, acks) == 0)
      rt->ops->free(rt->be, o->buf);
    else
      tr->orphans[kept++] = *o;
  }
  tr->norphans = kept;
  free(acks);
}

/* Keeps the recording's buffer until the workers have acted on gen (UINT32_MAX: until close). */
static void keep_buffer(mw_runtime *rt, uint32_t gen) {
  struct mw__trace *tr = rt->trace;
  orphan *grown = realloc(tr->orphans, sizeof *grown * (size_t)(tr->norphans + 1));
  if (!grown) return; /* it stays allocated until the device state goes */
  tr->orphans = grown;
  grown[tr->norphans++] = (orphan){tr->buf_dev, gen, tr->workers};
}

/* At close, after the executor has stopped (free_device) or been abandoned (not). The backend
 * knows whether its device memory can still be freed (a faulted cuda context cannot). */
void mw__trace_free(mw_runtime *rt, int free_device) {
  struct mw__trace *tr = rt->trace;
  if (!tr) return;
  if (free_device) {
    if (tr->gen & 1u) rt->ops->free(rt->be, tr->buf_dev);
    for (int i = 0; i < tr->norphans; ++i) rt->ops->free(rt->be, tr->orphans[i].buf);
    if (tr->ack_dev) rt->ops->free(rt->be, tr->ack_dev);
  }
  free(tr->orphans);
  free(tr);
  rt->trace = NULL;
}

MW_API int mw_trace_start(mw_runtime *rt, uint32_t events_per_worker) {
  MW_NOT_NULL(rt, "mw_trace_start");
  if (rt->faulted) {
    mw__rt_error(rt, "the runtime has faulted and must be closed (%s)", mw_strerror(rt->faulted));
    return MW_EFAULT;
  }
  if (events_per_worker > MW_TRACE_MAX_EVENTS_PER_WORKER) {
    mw__rt_error(rt, "events per worker must be at most %u, got %u", MW_TRACE_MAX_EVENTS_PER_WORKER,
                 events_per_worker);
    return MW_EINVAL;
  }
  if (!rt->trace && !(rt->trace = calloc(1, sizeof *rt->trace))) return MW_ENOMEM;
  struct mw__trace *tr = rt->trace;
  if (tr->gen & 1u) {
    mw__rt_error(rt, "tracing is already on (trace_stop ends it)");
    return MW_EINVAL;
  }
  reap_orphans(rt);
  const mw__backend_ops *o = rt->ops;
  int rc;
  if (!tr->ack_dev) {
    uint32_t *zero = calloc(rt->max_workers, 4);
    if (!zero) return MW_ENOMEM;
    rc = o->alloc(rt->be, (size_t)rt->max_workers * 4, &tr->ack_dev);
    if (!rc) rc = o->h2d(rt->be, tr->ack_dev, zero, (size_t)rt->max_workers * 4);
    free(zero);
    if (rc) {
      if (tr->ack_dev) o->free(rt->be, tr->ack_dev);
      tr->ack_dev = 0;
      return rc;
    }
  }
  uint32_t cap = events_per_worker ? events_per_worker : DEFAULT_EVENTS;
  uint32_t workers = rt->nworkers;
  size_t heads = (size_t)workers * sizeof(mw_trace_head);
  size_t bytes = heads + (size_t)workers * cap * sizeof(mw_trace_ev);
  uint64_t buf = 0;
  if ((rc = o->alloc(rt->be, bytes, &buf))) {
    mw__rt_error(rt, "cannot allocate the trace buffers (%zu MiB for %u workers x %u events)",
                 bytes >> 20, workers, cap);
    return rc;
  }
  void *zero = calloc(1, heads);
  rc = zero ? o->h2d(rt->be, buf, zero, heads) : MW_ENOMEM;
  free(zero);
  /* the fields the workers read once they see the new gen: written before it */
  mw_state s = rt->state;
  s.trace_cap = cap;
  s.trace_workers = workers;
  s.trace_buf = (mw_u8 *)(uintptr_t)buf;
  s.trace_ack = (mw_u32 *)(uintptr_t)tr->ack_dev;
  size_t from = offsetof(mw_state, trace_cap), to = offsetof(mw_state, trace_ack) + sizeof s.trace_ack;
  if (!rc) rc = o->h2d(rt->be, rt->state_dev + from, (const char *)&s + from, to - from);
  if (!rc) mw__relaunch_after_alloc(rt);
  if (!rc) rc = write_gen(rt, tr->gen + 1);
  if (rc) {
    o->free(rt->be, buf);
    return rc;
  }
  tr->buf_dev = buf;
  tr->cap = cap;
  tr->workers = workers;
  /* every worker takes up the start before its next task (a worker inside a long run does so
   * once it returns): then every task spawned from here on is recorded whole */
  uint32_t n = running_workers(rt, workers);
  uint32_t *acks = malloc((size_t)(n ? n : 1) * 4);
  if (acks) wait_acks(rt, n, tr->gen, acks); /* best effort: tracing is on either way */
  free(acks);
  return 0;
}

/* ---- reading the buffers back ---------------------------------------------------------------- */

typedef struct worker_events {
  uint64_t count; /* runs recorded or dropped */
  uint32_t n;     /* events read */
  mw_trace_ev *ev;
} worker_events;

/* Reads worker w's head, then its events up to the count it read. */
static int read_worker(mw_runtime *rt, uint32_t w, worker_events *we) {
  struct mw__trace *tr = rt->trace;
  mw_trace_head head;
  int rc = rt->ops->d2h(rt->be, &head, tr->buf_dev + (uint64_t)w * sizeof head, sizeof head);
  if (rc) return rc;
  we->count = head.count;
  we->n = head.count < tr->cap ? (uint32_t)head.count : tr->cap;
  if (!we->n) return 0;
  mw_trace_ev *ev = realloc(we->ev, (size_t)we->n * sizeof *ev);
  if (!ev) return MW_ENOMEM;
  we->ev = ev;
  uint64_t at = tr->buf_dev + (uint64_t)tr->workers * sizeof(mw_trace_head) +
                ((uint64_t)w * tr->cap) * sizeof(mw_trace_ev);
  return rt->ops->d2h(rt->be, ev, at, (size_t)we->n * sizeof *ev);
}

/* ---- the JSON file ------------------------------------------------------------------------- */

static void put_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; ++s) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
    else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
    else fputc(ch, f);
  }
  fputc('"', f);
}

/* ns as microseconds with three decimals, exactly */
static void put_us(FILE *f, uint64_t ns) {
  fprintf(f, "%llu.%03llu", (unsigned long long)(ns / 1000), (unsigned long long)(ns % 1000));
}

typedef struct run_ref {
  uint64_t fut, t0;
  uint32_t w, i;
} run_ref;

static int by_task_then_time(const void *a, const void *b) {
  const run_ref *x = a, *y = b;
  if (x->fut != y->fut) return x->fut < y->fut ? -1 : 1;
  return x->t0 < y->t0 ? -1 : x->t0 > y->t0;
}

static const char *const end_names[] = {"done", "await", "failed", "cancelled"};

static int write_json(mw_runtime *rt, FILE *f, worker_events *we, uint32_t workers,
                      const mw_trace_stats *st) {
  char *const *names = rt->kind_names; /* the names rt:stats() gives too */
  uint64_t origin = UINT64_MAX, total = 0;
  for (uint32_t w = 0; w < workers; ++w)
    for (uint32_t i = 0; i < we[w].n; ++i) {
      if (we[w].ev[i].t0 < origin) origin = we[w].ev[i].t0;
      total++;
    }
  if (origin == UINT64_MAX) origin = 0;
  fprintf(f, "{\"traceEvents\":[\n");
  fprintf(f, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{\"name\":");
  char pname[64];
  snprintf(pname, sizeof pname, "moonwarp %s", rt->ops->name);
  put_string(f, pname);
  fprintf(f, "}}");
  if (st->dropped)
    fprintf(f, ",\n{\"name\":\"process_labels\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":"
               "{\"labels\":\"%llu runs dropped: trace buffers full\"}}",
            (unsigned long long)st->dropped);
  for (uint32_t w = 0; w < workers; ++w)
    fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%u,\"args\":{\"name\":"
               "\"worker %u\"}},\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":%u,"
               "\"args\":{\"sort_index\":%u}}",
            w, w, w, w);
  run_ref *refs = malloc((total ? total : 1) * sizeof *refs);
  size_t nrefs = 0;
  for (uint32_t w = 0; w < workers; ++w)
    for (uint32_t i = 0; i < we[w].n; ++i) {
      const mw_trace_ev *e = &we[w].ev[i];
      uint64_t t0 = e->t0 - origin, dur = e->t1 > e->t0 ? e->t1 - e->t0 : 0;
      char unknown[32];
      const char *name = e->kind < MW_MAX_KINDS ? names[e->kind] : NULL;
      if (!name) snprintf(unknown, sizeof unknown, "kind#%u", (unsigned)e->kind);
      fprintf(f, ",\n{\"name\":");
      put_string(f, name ? name : unknown);
      fprintf(f, ",\"cat\":\"task\",\"ph\":\"X\",\"ts\":");
      put_us(f, t0);
      fprintf(f, ",\"dur\":");
      put_us(f, dur);
      fprintf(f, ",\"pid\":1,\"tid\":%u,\"args\":{\"task\":\"%u.%u\"", w, MW_FUT_SLOT(e->fut),
              MW_FUT_GEN(e->fut));
      if (e->n)
        fprintf(f, ",\"bulk\":true,\"first\":%u,\"count\":%u", e->arg, (unsigned)e->n);
      else if (e->arg)
        fprintf(f, ",\"run\":\"resume\",\"resume_line\":%d",
                mw__kind_line(rt, e->kind, (int)e->arg));
      else
        fprintf(f, ",\"run\":\"start\"");
      fprintf(f, ",\"end\":\"%s\"}}", e->end < 4 ? end_names[e->end] : "?");
      if (refs && !e->n) refs[nrefs++] = (run_ref){e->fut, e->t0, w, i};
    }
  /* flow arrows from each run of a task that ended at an await to its next run: v1 flow events
   * with the category and start time of the slices they bind to (what Perfetto, chrome://tracing
   * and DevTools all read) */
  if (refs) {
    qsort(refs, nrefs, sizeof *refs, by_task_then_time);
    uint64_t id = 0;
    for (size_t k = 1; k < nrefs; ++k) {
      if (refs[k].fut != refs[k - 1].fut) continue;
      const mw_trace_ev *a = &we[refs[k - 1].w].ev[refs[k - 1].i];
      if (a->end != MW_TR_AWAIT) continue;
      ++id;
      fprintf(f, ",\n{\"name\":\"wake\",\"cat\":\"task\",\"ph\":\"s\",\"id\":%llu,\"pid\":1,"
                 "\"tid\":%u,\"ts\":",
              (unsigned long long)id, refs[k - 1].w);
      put_us(f, refs[k - 1].t0 - origin);
      fprintf(f, "},\n{\"name\":\"wake\",\"cat\":\"task\",\"ph\":\"f\",\"bp\":\"e\",\"id\":%llu,"
                 "\"pid\":1,\"tid\":%u,\"ts\":",
              (unsigned long long)id, refs[k].w);
      put_us(f, refs[k].t0 - origin);
      fprintf(f, "}");
    }
  }
  free(refs);
  fprintf(f, "\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"backend\":");
  put_string(f, rt->ops->name);
  fprintf(f, ",\"version\":");
  put_string(f, mw_version());
  fprintf(f, ",\"workers\":%u,\"events_per_worker\":%u,\"events\":%llu,\"dropped\":%llu,"
             "\"busy_workers\":%u,\"clock\":\"%s\",\"time_origin_ns\":%llu}}\n",
          workers, rt->trace->cap, (unsigned long long)st->events,
          (unsigned long long)st->dropped, st->busy,
          rt->ops->clock,
          (unsigned long long)origin);
  return 0;
}

/* ---- stop ------------------------------------------------------------------------------------ */

MW_API int mw_trace_stop(mw_runtime *rt, const char *path, mw_trace_stats *stats) {
  mw_trace_stats st = {0};
  if (stats) *stats = st;
  MW_NOT_NULL(rt, "mw_trace_stop");
  struct mw__trace *tr = rt->trace;
  if (!tr || !(tr->gen & 1u)) {
    mw__rt_error(rt, "tracing is not on (trace_start begins it)");
    return MW_EINVAL;
  }
  if (rt->faulted) { /* the device cannot be read: the buffer is freed with the runtime */
    tr->gen++;
    keep_buffer(rt, UINT32_MAX);
    mw__rt_error(rt, "the runtime has faulted: the trace is lost (%s)", mw_strerror(rt->faulted));
    return MW_EFAULT;
  }
  /* the file first: when it cannot be written, tracing goes on and nothing is lost */
  FILE *f = NULL;
  if (path && !(f = fopen(path, "w"))) {
    mw__rt_error(rt, "cannot write the trace to %s: %s", path, strerror(errno));
    return MW_EIO;
  }
  int rc = write_gen(rt, tr->gen + 1);
  if (rc) {
    if (f) {
      fclose(f);
      remove(path);
    }
    return rc;
  }
  uint32_t workers = tr->workers, gen = tr->gen;
  uint32_t n = running_workers(rt, workers);
  uint32_t *acks = malloc((size_t)(n ? n : 1) * 4);
  worker_events *we = calloc(workers, sizeof *we);
  int64_t behind = n; /* workers that may still write into the buffer */
  if (!acks || !we) {
    rc = MW_ENOMEM;
    goto done;
  }
  /* wait until every running worker has acted on the stop (protocol.h, task traces) */
  if ((behind = wait_acks(rt, n, gen, acks)) < 0) {
    rc = (int)behind;
    behind = n;
    goto done;
  }
  for (uint32_t w = 0; w < workers && !rc; ++w) rc = read_worker(rt, w, &we[w]);
  if (!rc && behind > 0) {
    /* workers still inside a run: their events are read up to the count read before them;
     * those that have acted on the stop meanwhile are read again, final now */
    int64_t still = acks_behind(rt, n, gen, acks);
    if (still < 0) {
      rc = (int)still;
      goto done;
    }
    for (uint32_t w = 0; w < n && !rc; ++w)
      if ((int32_t)(gen - acks[w]) <= 0) rc = read_worker(rt, w, &we[w]);
    behind = still;
  }
  if (rc) goto done;
  if (behind > 0 && rt->ops->query(rt->be) == 0) behind = 0; /* exited cleanly: nobody writes */
  st.workers = workers;
  st.busy = (uint32_t)behind;
  for (uint32_t w = 0; w < workers; ++w) {
    st.events += we[w].n;
    st.dropped += we[w].count - we[w].n;
  }
  if (f) {
    rc = write_json(rt, f, we, workers, &st);
    if (!rc && ferror(f)) {
      mw__rt_error(rt, "writing the trace to %s failed", path);
      rc = MW_EIO;
    }
  }
done:
  if (f && fclose(f) && !rc) {
    mw__rt_error(rt, "writing the trace to %s: %s", path, strerror(errno));
    rc = MW_EIO;
  }
  if (f && rc) remove(path); /* no half-written trace */
  if (we)
    for (uint32_t w = 0; w < workers; ++w) free(we[w].ev);
  free(we);
  free(acks);
  if (behind > 0)
    keep_buffer(rt, gen); /* a busy worker may still write its last event */
  else
    rt->ops->free(rt->be, tr->buf_dev);
  tr->buf_dev = 0;
  if (stats) *stats = st;
  return rc;
}
