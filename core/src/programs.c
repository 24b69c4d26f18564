/* programs.c - a runtime's programs: compiling and loading them into the executor's image (one
 * unit, parts, and the one-unit build behind a parts load), dropping them, and compiling without
 * a runtime. */
#include <dlfcn.h>
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
#include "cache.h"
#include "image.h"
#include "jit.h"

static void tier_start(mw_runtime *rt);

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


/* Whether a program let go of (stale) still has work: a task of its kinds not finished (the
 * counters are exact while the executor is stopped), or any host future pending (a host spawn
 * the device has not taken may be of its kinds). */
static int stale_busy(mw_runtime *rt, mw_program *const *stale, int nstale) {
  if (rt->in_flight) return 1;
  for (int i = 0; i < nstale; ++i) {
    const mw__parsed *p = &stale[i]->parsed;
    if (!p->ntasks) continue;
    uint64_t(*n)[4] = malloc(sizeof *n * (size_t)p->ntasks);
    int busy = !n || mw__kinds_stats_raw(rt, p->tasks[0].kind, (uint32_t)p->ntasks, n) != 0;
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
  if (!rc && rt->running) stopped = !(rc = mw__stop_executor(rt, rt->relaunch_timeout));
  if (!rc && nstale && stale_busy(rt, stale, nstale)) {
    if (stopped && mw__restart_executor(rt)) rc = MW_EFAULT;
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
    if ((rc = mw__start_executor(rt))) {
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
    if (mw__restart_executor(rt) == 0) snprintf(rt->err, sizeof rt->err, "%s", why);
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
    mw__program_free(p);
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
  mw__tier_abandon(rt); /* built for the programs before this one */
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
    if (mw__kinds_stats_raw(rt, base + i, 1, &rt->kind_base[base + i]) != 0)
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
  mw__program_free(p);
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
void mw__tier_abandon(mw_runtime *rt) {
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
  mw__tier_abandon(rt);
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
void mw__tier_try(mw_runtime *rt) {
  mw__tier_job *j = rt->tier;
  if (!j || !__atomic_load_n(&j->done, __ATOMIC_ACQUIRE) || mw__now() < rt->tier_retry) return;
  if (j->rc || j->gen != rt->tier_gen || !rt->running) {
    mw__tier_abandon(rt);
    return;
  }
  char keep[sizeof rt->err];
  snprintf(keep, sizeof keep, "%s", rt->err); /* what the script may still read */
  if (mw__stop_executor(rt, rt->relaunch_timeout)) {
    rt->tier_retry = mw__now() + 1.0;
    snprintf(rt->err, sizeof rt->err, "%s", keep);
    return;
  }
  if (rt->ops->load(rt->be, j->img.data, j->img.size) == 0) rt->tier_swapped++;
  mw__tier_abandon(rt);
  mw__restart_executor(rt);
  snprintf(rt->err, sizeof rt->err, "%s", keep);
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
  if (mw__build_of_env(&build) || mw__grid_env_ok()) return MW_EINVAL;
  if (mw__frame_bytes_ok(desc ? desc->frame_bytes : 0)) return MW_EINVAL;
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
