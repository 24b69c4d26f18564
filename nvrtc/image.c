/* image.c - executor images: the generated program compiled by NVRTC (a cubin) or by the host
 * C++ compiler (a shared object), looked up in and stored into the compile cache. */
#include "image.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cache.h"
#include "jit.h"
#include "moonwarp.h"
#include "util.h"

/* The compiler's log (malloc'd, taken) in the user's terms: a failed compile's put as the task
 * code writes it (mw__user_log, gen_path the file the compiler was given); any with the
 * canonical places of req's programs put as the user's files and lines. */
static char *user_terms(const mw__image_req *req, char *log, const char *gen_path, int failed) {
  char *out;
  if (failed && log && *log && (out = mw__user_log(log, gen_path))) {
    free(log);
    log = out;
  }
  if (req->nprogs && log && (out = mw__user_places(log, req->progs, req->nprogs))) {
    free(log);
    log = out;
  }
  return log;
}

/* ---- the host C++ compiler (the sim backend's images) ---------------------------------------- */

#ifndef MW_SIM_CXX
#define MW_SIM_CXX "c++"
#endif
#define HOST_FLAGS "-std=c++17 -fPIC -shared -pthread -w -fno-strict-aliasing"
/* optimised, or for a debugger (mw_compile_desc.debug); both with debug information. -O1: a
 * program compiles in 1.36 s against 1.80 at -O2 (the specs' cold run is mostly such compiles)
 * and fib on sim runs about 6 % slower */
#define HOST_OPT_FLAGS "-O1 -g"
#define HOST_DEBUG_FLAGS "-O0 -g"
/* Boost.Context as the build found it (CMake): its library, and -I its headers when they are
 * not in a system folder */
#ifndef MW_SIM_LIB
#define MW_SIM_LIB "-lboost_context"
#endif
#ifndef MW_SIM_INCLUDE
#define MW_SIM_INCLUDE ""
#endif
/* A compile that takes longer than this is stopped (a hung compiler must not hang the runtime). */
#define HOST_COMPILE_TIMEOUT_S 600.0

/* MOONWARP_DEVICE_DEFINE=NAME or NAME=VALUE, or several joined by commas (at most
 * DEVICE_DEFINES): one more -D each for the executor's compiles (both backends), to measure or
 * debug a variant beside the default, or variants together (bench/NOTES.md). "-DA -DB=1" into
 * out (empty when unset); MW_EINVAL with the message in err for a bad value. */
#define DEVICE_DEFINE_BYTES 256
#define DEVICE_DEFINES 8
static int device_define(char *out, size_t cap, char *err, size_t errlen) {
  const char *define = getenv("MOONWARP_DEVICE_DEFINE");
  out[0] = 0;
  if (!define || !*define) return 0;
  const size_t max = cap - 1 - 2u * DEVICE_DEFINES; /* each define gains "-D" and loses its comma to a blank */
  int count = 1, bad = strlen(define) > max || strpbrk(define, " \t\n") != NULL;
  for (const char *c = define; *c && !bad; ++c)
    if (*c == ',') bad = ++count > DEVICE_DEFINES || c == define || c[1] == ',' || !c[1];
  if (bad) {
    snprintf(err, errlen, "MOONWARP_DEVICE_DEFINE must be NAME or NAME=VALUE, or at most %d of them "
                          "joined by commas, of at most %zu characters in all, without blanks (got \"%.40s\")",
             DEVICE_DEFINES, max, define);
    return MW_EINVAL;
  }
  char *o = out;
  for (const char *c = define; *c;) {
    const size_t len = strcspn(c, ",");
    o += sprintf(o, "%s-D%.*s", o == out ? "" : " ", (int)len, c);
    c += len + (c[len] == ',');
  }
  return 0;
}

static const char *host_cxx(void) {
  const char *c = getenv("MOONWARP_CXX");
  return c && *c ? c : MW_SIM_CXX;
}

/* Splits s at blanks into argv (at most max - 1 words, NULL-terminated) in buf. Returns the count. */
static int split_words(const char *s, char *buf, size_t cap, char **argv, int max) {
  int n = 0;
  snprintf(buf, cap, "%s", s);
  for (char *save = NULL, *w = strtok_r(buf, " \t", &save); w && n < max - 1; w = strtok_r(NULL, " \t", &save))
    argv[n++] = w;
  argv[n] = NULL;
  return n;
}

/* Runs argv (posix_spawn: safe while the executor's threads run; no shell), its output to
 * log_path, for at most HOST_COMPILE_TIMEOUT_S. Returns its exit status, -1 if it could not
 * start, -2 if it ran out of time (it is killed). */
static int run_argv(char **argv, const char *log_path) {
  posix_spawn_file_actions_t fa;
  if (posix_spawn_file_actions_init(&fa)) return -1;
  posix_spawn_file_actions_addopen(&fa, 2, log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, 2, 1);
  pid_t pid;
  extern char **environ;
  int err = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (err) {
    FILE *f = fopen(log_path, "w");
    if (f) {
      fprintf(f, "cannot start the C++ compiler %s: %s\n", argv[0], strerror(err));
      fclose(f);
    }
    return -1;
  }
  double end = mw__now() + HOST_COMPILE_TIMEOUT_S;
  int st = 0;
  for (;;) {
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) return -1;
    if (mw__now() > end) {
      kill(pid, SIGKILL);
      while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
      }
      return -2;
    }
    mw__sleep_ns(2000000);
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Runs the compiler on cpp: a shared object so, or with object set an object file so (-c) to
 * link with others (host_link). Returns as run_argv. */
static int run_compiler(const char *cpp, const char *so, const char *log_path,
                        const mw__build_opts *bo, int object, const char *define) {
  char cxxbuf[1024], flagbuf[512], optbuf[64], incbuf[1024];
  int ndirs = bo ? bo->ninclude_dirs : 0;
  char **argv = malloc(sizeof *argv * (size_t)(96 + 2 * ndirs));
  if (!argv) return -1;
  int n = split_words(host_cxx(), cxxbuf, sizeof cxxbuf, argv, 16);
  if (n == 0) {
    free(argv);
    return -1;
  }
  n += split_words(HOST_FLAGS, flagbuf, sizeof flagbuf, argv + n, 48);
  n += split_words(bo && bo->debug ? HOST_DEBUG_FLAGS : HOST_OPT_FLAGS, optbuf, sizeof optbuf,
                   argv + n, 8);
  for (int i = 0; i < ndirs; ++i) { /* the user's folders, before Boost's */
    argv[n++] = (char *)"-I";
    argv[n++] = (char *)bo->include_dirs[i];
  }
  n += split_words(MW_SIM_INCLUDE, incbuf, sizeof incbuf, argv + n, 8);
  char defbuf[DEVICE_DEFINE_BYTES];
  n += split_words(define, defbuf, sizeof defbuf, argv + n, DEVICE_DEFINES + 1);
  if (object) argv[n++] = (char *)"-c";
  argv[n++] = (char *)"-o";
  argv[n++] = (char *)so;
  argv[n++] = (char *)cpp;
  if (!object) argv[n++] = (char *)MW_SIM_LIB;
  argv[n] = NULL;
  int st = run_argv(argv, log_path);
  free(argv);
  return st;
}

/* The host compiler's cache key: the source, the compiler, its flags and the headers reached
 * (mw__build_opts.deps: their names as included and their contents; not the folders they were
 * found in, so that a project moved elsewhere keeps its builds). */
static void host_key(const mw__image_req *req, const char *define, char key[65]) {
  const mw__build_opts *bo = req->bo;
  const void *parts[] = {req->object ? "sim-object-2" : "sim-3", req->source, host_cxx(), HOST_FLAGS,
                         bo && bo->debug ? HOST_DEBUG_FLAGS : HOST_OPT_FLAGS,
                         bo ? bo->deps : "", define};
  mw__cache_key(parts, NULL, 7, key);
}

/* Compiles req->source with the host compiler in a temporary folder: the shared object's bytes
 * in *data, *size. */
static int host_compile(const mw__image_req *req, const char *define, void **data, size_t *size,
                        char *err, size_t errlen, char **log_out) {
  char dir[] = "/tmp/moonwarp-sim-XXXXXX";
  if (!mkdtemp(dir)) {
    snprintf(err, errlen, "cannot create a temporary directory for the sim build");
    return MW_EIO;
  }
  char cpp[256], so[256], logp[256];
  snprintf(cpp, sizeof cpp, "%s/program.cpp", dir);
  snprintf(so, sizeof so, "%s/program.so", dir);
  snprintf(logp, sizeof logp, "%s/log.txt", dir);
  int rc = 0;
  if (mw__write_file_atomic(cpp, req->source, strlen(req->source))) {
    rc = MW_EIO;
    snprintf(err, errlen, "cannot write %s", cpp);
  } else {
    int st = run_compiler(cpp, so, logp, req->bo, req->object, define);
    char *log = NULL;
    mw__read_file(logp, &log, NULL);
    log = user_terms(req, log, cpp, st != 0 && st != -2);
    if (st == -2) {
      snprintf(err, errlen, "the C++ compiler (%s) took longer than %.0f s and was stopped",
               host_cxx(), HOST_COMPILE_TIMEOUT_S);
      rc = MW_ETIMEDOUT;
    } else if (st != 0) {
      snprintf(err, errlen, "%s%s", log && *log ? log : "the C++ compiler failed: ",
               log && *log ? "" : host_cxx());
      rc = st == -1 ? MW_ENODEV : MW_ECOMPILE;
    } else if (mw__read_file(so, (char **)data, size)) {
      snprintf(err, errlen, "cannot read %s", so);
      rc = MW_EIO;
    }
    if (log_out && log && *log) *log_out = log;
    else free(log);
  }
  unlink(cpp);
  unlink(so);
  unlink(logp);
  rmdir(dir);
  return rc;
}

/* ---- NVRTC (the cuda backend's images) ------------------------------------------------------- */

/* The NVRTC options of a compile with bo (and the environment's MOONWARP_PROBES and
 * MOONWARP_DEVICE_DEFINE when env): *opts (malloc'd, *nopts of them, strings in the same
 * block; free(*opts) frees all). MW_EINVAL with the message in err for a bad
 * MOONWARP_DEVICE_DEFINE, MW_ENOMEM. */
static int nvrtc_options(const mw__build_opts *bo, int env, int rdc, const char ***opts, int *nopts,
                         char *err, size_t errlen) {
  /* MOONWARP_PROBES=1: the executor times its own steps (runtime.cuh, probes).
   * MOONWARP_DEVICE_DEFINE=NAME: one more -DNAME, for measuring a variant of the executor beside
   * the default in one run (bench/NOTES.md). */
  const char *probes = env ? getenv("MOONWARP_PROBES") : NULL;
  char extra[DEVICE_DEFINE_BYTES] = "";
  *opts = NULL;
  *nopts = 0;
  if (env && device_define(extra, sizeof extra, err, errlen)) return MW_EINVAL;
  int ndirs = bo ? bo->ninclude_dirs : 0, n = 0;
  size_t bytes = (7 + DEVICE_DEFINES) * sizeof(char *) + sizeof extra;
  for (int i = 0; i < ndirs; ++i) bytes += sizeof(char *) + strlen(bo->include_dirs[i]) + 3;
  const char **v = malloc(bytes);
  if (!v) return MW_ENOMEM;
  char *text = (char *)(v + 7 + DEVICE_DEFINES + ndirs);
  int nmaj = 0, nmin = 0;
  const int nvrtc_12_8 = mw__nvrtc_version(&nmaj, &nmin) == 0 && (nmaj > 12 || (nmaj == 12 && nmin >= 8));
  v[n++] = "-DMW_CUDA=1";
  if (rdc) v[n++] = "-rdc=true"; /* a part of an image, linked with the others (mw__image_link) */
  /* relocatable code: ptxas compiles each function alone, so a part's functions are compiled on
   * every core (one thread without it; a whole-program compile gains nothing from it, measured:
   * bench/NOTES.md, "split compilation") */
  if (rdc && nvrtc_12_8) v[n++] = "-split-compile=0";
  if (probes && !strcmp(probes, "1")) v[n++] = "-DMW_PROBES=1";
  if (*extra) { /* "-DA -DB": one option each */
    for (char *w = strcpy(text, extra); *w;) {
      v[n++] = w;
      w += strcspn(w, " ");
      if (*w) *w++ = 0;
    }
    text += strlen(extra) + 1;
  }
  if (bo && bo->debug) v[n++] = "-G"; /* in place of -lineinfo (jit.h) */
  /* fewer of ptxas's costly optimisations: about 4x faster for the executor (bench/NOTES.md),
   * where NVRTC knows the option (12.8 and later); MOONWARP_FAST_COMPILE=1 asks it everywhere */
  const char *fast_env = env ? getenv("MOONWARP_FAST_COMPILE") : NULL;
  if (((bo && bo->fast) || (fast_env && !strcmp(fast_env, "1"))) && !(bo && bo->debug) && nvrtc_12_8)
    v[n++] = "--Ofast-compile=min";
  for (int i = 0; i < ndirs; ++i) {
    v[n++] = text;
    text += sprintf(text, "-I%s", bo->include_dirs[i]) + 1;
  }
  *opts = v;
  *nopts = n;
  return 0;
}

/* NVRTC's cache key: the source, the target, the compiler, the headers reached (as host_key)
 * and every option but the include folders. */
static int nvrtc_key(const mw__image_req *req, const char *const *opts, int nopts, char key[65]) {
  int nmaj = 0, nmin = 0;
  mw__nvrtc_version(&nmaj, &nmin);
  char arch[32], ver[32];
  snprintf(arch, sizeof arch, "sm_%d", req->arch);
  snprintf(ver, sizeof ver, "%d.%d", nmaj, nmin);
  const void **parts = malloc(sizeof *parts * (size_t)(5 + nopts));
  if (!parts) return MW_ENOMEM;
  int n = 0;
  parts[n++] = "cuda-3";
  parts[n++] = req->source;
  parts[n++] = arch;
  parts[n++] = ver;
  parts[n++] = req->bo ? req->bo->deps : "";
  for (int i = 0; i < nopts; ++i)
    if (strncmp(opts[i], "-I", 2)) parts[n++] = opts[i];
  mw__cache_key(parts, NULL, n, key);
  free(parts);
  return 0;
}

/* Compiles req->source with NVRTC under opts: the cubin (or PTX) in *data, *size. */
static int nvrtc_compile(const mw__image_req *req, const char *const *opts, int nopts,
                         void **data, size_t *size, char *err, size_t errlen, char **log_out) {
  int is_cubin = 0;
  char *log = NULL;
  int rc = mw__nvrtc_compile(req->source, "moonwarp.cu", req->arch, opts, nopts, data, size,
                             &is_cubin, &log);
  log = user_terms(req, log, "moonwarp.cu", rc != 0);
  if (rc) {
    snprintf(err, errlen, "%s", log ? log : rc == MW_ENOMEM ? "out of memory" : "NVRTC failed");
  }
  if (log_out) *log_out = log;
  else free(log);
  return rc;
}

/* ---- the seam --------------------------------------------------------------------------------- */

int mw__image_compiler_ready(int host_code, char *err, size_t errlen) {
  if (host_code) return 0; /* the host compiler is looked for when it runs */
  char why[1024];
  int rc = mw__nvrtc_load(why, sizeof why);
  if (rc) snprintf(err, errlen, "NVRTC: %s", why);
  return rc;
}

/* Writes the generated source to $MOONWARP_DUMP_DIR (if set) for users to read. */
static void dump_source(const char *source, const char *ext) {
  const char *dir = mw__cache_dump_dir();
  if (!dir) return;
  const void *parts[] = {source};
  char key[65], path[4096];
  mw__cache_key(parts, NULL, 1, key);
  snprintf(path, sizeof path, "%s/moonwarp-%.16s.%s", dir, key, ext);
  mw__write_file_atomic(path, source, strlen(source));
}

int mw__image_compile(const mw__image_req *req, mw__image *out, char *err, size_t errlen,
                      char **log) {
  memset(out, 0, sizeof *out);
  if (log) *log = NULL;
  out->ext = req->object ? (req->host_code ? "o" : "rcubin") : req->host_code ? "so" : "cubin";
  if (!req->offline) dump_source(req->source, req->host_code ? "cpp" : "cu");
  const char **opts = NULL;
  int nopts = 0, rc = 0;
  char define[DEVICE_DEFINE_BYTES] = "";
  if (!req->host_code && (rc = nvrtc_options(req->bo, !req->offline, req->object, &opts, &nopts, err, errlen)))
    return rc;
  if (req->host_code && !req->offline && (rc = device_define(define, sizeof define, err, errlen)))
    return rc;
  if (!req->offline) {
    if (req->host_code) host_key(req, define, out->key);
    else if ((rc = nvrtc_key(req, opts, nopts, out->key))) snprintf(err, errlen, "out of memory");
    if (!rc && mw__cache_get(out->key, out->ext, &out->data, &out->size) == 0) {
      out->cached = 1;
      free(opts);
      return 0;
    }
  }
  if (!rc)
    rc = req->host_code ? host_compile(req, define, &out->data, &out->size, err, errlen, log)
                        : nvrtc_compile(req, opts, nopts, &out->data, &out->size, err, errlen, log);
  free(opts);
  if (!rc && !req->offline) mw__cache_put(out->key, out->ext, out->data, out->size);
  if (rc) mw__image_free(out);
  return rc;
}

/* ---- linking the parts of an image ------------------------------------------------------ */

/* Writes a linked image to $MOONWARP_DUMP_DIR (if set), named by its key. */
static void dump_image(const mw__image *img) {
  const char *dir = mw__cache_dump_dir();
  if (!dir) return;
  char path[4096];
  snprintf(path, sizeof path, "%s/moonwarp-%.16s.%s", dir, img->key, img->ext);
  mw__write_file_atomic(path, img->data, img->size);
}

/* Links objects with the host compiler into a shared object, in a temporary folder. */
static int host_link(const mw__image *const *parts, int n, void **data, size_t *size, char *err,
                     size_t errlen) {
  char dir[] = "/tmp/moonwarp-link-XXXXXX";
  if (!mkdtemp(dir)) {
    snprintf(err, errlen, "cannot create a temporary directory for the sim link");
    return MW_EIO;
  }
  char so[256], logp[256], cxxbuf[1024];
  snprintf(so, sizeof so, "%s/image.so", dir);
  snprintf(logp, sizeof logp, "%s/log.txt", dir);
  char **argv = malloc(sizeof *argv * (size_t)(n + 32));
  char *names = malloc((size_t)n * 256);
  int rc = argv && names ? 0 : MW_ENOMEM, k = 0;
  if (!rc) k = split_words(host_cxx(), cxxbuf, sizeof cxxbuf, argv, 16);
  if (!rc && !k) {
    snprintf(err, errlen, "the C++ compiler is not named (MOONWARP_CXX)");
    rc = MW_ENODEV;
  }
  if (!rc) {
    static const char *const flags[] = {"-shared", "-fPIC", "-pthread", "-o"};
    for (size_t f = 0; f < sizeof flags / sizeof *flags; ++f) argv[k++] = (char *)flags[f];
    argv[k++] = so;
    for (int i = 0; i < n && !rc; ++i) {
      char *name = names + (size_t)i * 256;
      snprintf(name, 256, "%s/part%d.o", dir, i);
      if (mw__write_file_atomic(name, parts[i]->data, parts[i]->size)) {
        snprintf(err, errlen, "cannot write %s", name);
        rc = MW_EIO;
      }
      argv[k++] = name;
    }
    argv[k++] = (char *)MW_SIM_LIB;
    argv[k] = NULL;
  }
  if (!rc) {
    int st = run_argv(argv, logp);
    if (st != 0) {
      char *log = NULL;
      mw__read_file(logp, &log, NULL);
      snprintf(err, errlen, "linking the sim image failed%s%s", log && *log ? ":\n" : "", log ? log : "");
      free(log);
      rc = st == -2 ? MW_ETIMEDOUT : st == -1 ? MW_ENODEV : MW_ECOMPILE;
    } else if (mw__read_file(so, (char **)data, size)) {
      snprintf(err, errlen, "cannot read %s", so);
      rc = MW_EIO;
    }
  }
  for (int i = 0; names && i < n; ++i) unlink(names + (size_t)i * 256);
  free(names);
  free(argv);
  unlink(so);
  unlink(logp);
  rmdir(dir);
  return rc;
}

/* Links relocatable cubins (or PTX) with nvJitLink. */
static int cuda_link(const mw__image *const *parts, int n, int arch, const char *library, void **data,
                     size_t *size, char *err, size_t errlen) {
  const void **bytes = malloc(sizeof *bytes * (size_t)n);
  size_t *sizes = malloc(sizeof *sizes * (size_t)n);
  int *cubin = malloc(sizeof *cubin * (size_t)n);
  int rc = bytes && sizes && cubin ? 0 : MW_ENOMEM;
  for (int i = 0; !rc && i < n; ++i) {
    bytes[i] = parts[i]->data;
    sizes[i] = parts[i]->size;
    cubin[i] = parts[i]->size >= 4 && !memcmp(parts[i]->data, "\177ELF", 4);
  }
  char *log = NULL;
  if (!rc) rc = mw__nvjitlink(arch, bytes, sizes, cubin, n, library, data, size, &log);
  if (rc) snprintf(err, errlen, "%s", log ? log : rc == MW_ENOMEM ? "out of memory" : "the link failed");
  free(log);
  free(bytes);
  free(sizes);
  free(cubin);
  return rc;
}

int mw__image_link(const mw__image *const *parts, int n, int host_code, int arch, const char *library,
                   mw__image *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  out->ext = host_code ? "so" : "cubin";
  int keyed = 1;
  for (int i = 0; i < n; ++i) keyed &= parts[i]->key[0] != 0;
  if (keyed) {
    const void **kp = malloc(sizeof *kp * (size_t)(n + 3));
    if (!kp) return MW_ENOMEM;
    char a[32];
    snprintf(a, sizeof a, "%d", arch);
    kp[0] = host_code ? "sim-link-1" : "cuda-link-1";
    kp[1] = host_code ? host_cxx() : a;
    kp[2] = host_code ? MW_SIM_LIB : library ? library : "";
    for (int i = 0; i < n; ++i) kp[3 + i] = parts[i]->key;
    mw__cache_key(kp, NULL, n + 3, out->key);
    free(kp);
    if (mw__cache_get(out->key, out->ext, &out->data, &out->size) == 0) {
      out->cached = 1;
      return 0;
    }
  }
  int rc = host_code ? host_link(parts, n, &out->data, &out->size, err, errlen)
                     : cuda_link(parts, n, arch, library, &out->data, &out->size, err, errlen);
  if (!rc && keyed) mw__cache_put(out->key, out->ext, out->data, out->size);
  if (!rc && keyed) dump_image(out); /* for cuobjdump or objdump, beside the sources */
  if (rc) mw__image_free(out);
  return rc;
}

void mw__image_evict(const mw__image *img) {
  if (img->cached) mw__cache_remove(img->key, img->ext);
}

void mw__image_free(mw__image *img) {
  free(img->data);
  img->data = NULL;
  img->size = 0;
}
