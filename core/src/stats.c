/* stats.c - a runtime's statistics: the host's counters and the device's rows per worker and kind. */
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

/* ---- statistics ---------------------------------------------------------------------------- */


/* The kind counters as the device last wrote them (protocol.h, per-worker rows): *spill the
 * MW_MAX_KINDS spill rows, *en the max_workers * MW_STAT_ENTRIES entries; free(*spill) after. */
static int read_rows(mw_runtime *rt, mw_stat_row **spill, mw_stat_entry **en) {
  int rc = mw__wait_closed(rt);
  if (rc) return rc;
  size_t n = mw__stats_bytes(rt);
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
  mw__check_alive(rt);
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
  int rc = mw__kinds_stats_raw(rt, first, n, out);
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
  return rt->ops->d2h(rt->be, out, mw__hints_dev(rt) + first * sizeof(uint32_t), (size_t)n * sizeof(uint32_t));
}

/* The counters of kinds [first, first + n) as the rows hold them, since the runtime started. */
int mw__kinds_stats_raw(mw_runtime *rt, uint32_t first, uint32_t n, uint64_t (*out)[4]) {
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
