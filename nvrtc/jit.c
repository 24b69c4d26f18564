/* jit.c - loads NVRTC with dlopen; compiles generated CUDA C to a cubin, or PTX for newer GPUs. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr */
#endif
#include "jit.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moonwarp.h"
#include "util.h"

/* The NVRTC C API, declared here so the build needs no toolkit headers (nvrtc.h, CUDA 11.2+). */
typedef int nvrtc_result;
typedef struct _nvrtcProgram *nvrtc_program;

enum {
  NVRTC_OK = 0,
  NVRTC_OUT_OF_MEMORY = 1,
  NVRTC_INVALID_INPUT = 3,
  NVRTC_INVALID_OPTION = 5,
  NVRTC_COMPILATION = 6
};

struct nvrtc_api {
  const char *(*GetErrorString)(nvrtc_result r);
  nvrtc_result (*Version)(int *major, int *minor);
  nvrtc_result (*GetNumSupportedArchs)(int *n);
  nvrtc_result (*GetSupportedArchs)(int *archs);
  nvrtc_result (*CreateProgram)(nvrtc_program *prog, const char *src, const char *name,
                                int nheaders, const char *const *headers,
                                const char *const *include_names);
  nvrtc_result (*DestroyProgram)(nvrtc_program *prog);
  nvrtc_result (*CompileProgram)(nvrtc_program prog, int nopts, const char *const *opts);
  nvrtc_result (*GetProgramLogSize)(nvrtc_program prog, size_t *size);
  nvrtc_result (*GetProgramLog)(nvrtc_program prog, char *log);
  nvrtc_result (*GetPTXSize)(nvrtc_program prog, size_t *size);
  nvrtc_result (*GetPTX)(nvrtc_program prog, char *ptx);
  nvrtc_result (*GetCUBINSize)(nvrtc_program prog, size_t *size);
  nvrtc_result (*GetCUBIN)(nvrtc_program prog, char *cubin);
};

static struct nvrtc_api nv;

static const mw__dl_sym symbols[] = {
#define SYM(member) {"nvrtc" #member, offsetof(struct nvrtc_api, member)}
    SYM(GetErrorString), SYM(Version),           SYM(GetNumSupportedArchs),
    SYM(GetSupportedArchs), SYM(CreateProgram),  SYM(DestroyProgram),
    SYM(CompileProgram),  SYM(GetProgramLogSize), SYM(GetProgramLog),
    SYM(GetPTXSize),      SYM(GetPTX),            SYM(GetCUBINSize),
    SYM(GetCUBIN),
#undef SYM
};

#define MAX_ARCHS 64

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int load_rc;
static char load_msg[1024];
static int nv_major, nv_minor;
static int archs[MAX_ARCHS]; /* ascending, as NVRTC lists them */
static int narchs;

static void set_msg(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(load_msg, sizeof load_msg, fmt, ap);
  va_end(ap);
}

/* Opens the first of names[0..n) that loads: $<env> alone when it is set, else through the
 * loader's search path, then lib64/ under $CUDA_HOME, $CUDA_PATH and /usr/local/cuda. NULL with
 * what was tried in msg (what: the library's name for people, hint: how to get it). */
static void *open_library_of(const char *const *names, size_t n, const char *env_name,
                             const char *what, const char *hint, char *msg, size_t msglen) {
  enum { MAXN = 4 };
  const char *roots[3];
  char paths[MAXN][1024], first_err[400], why[400], dirs[400] = "", list[200] = "";
  const char *under[MAXN];
  size_t i, j, nroots = 0;
  void *lib;
  const char *env = getenv(env_name);

  if (n > MAXN) n = MAXN;
  if (env && *env) {
    lib = mw__dl_open_first(&env, 1, NULL, why, sizeof why);
    if (!lib) snprintf(msg, msglen, "%s (from %s) could not be opened (dlopen: %s)", env, env_name, why);
    return lib;
  }

  if ((lib = mw__dl_open_first(names, n, NULL, first_err, sizeof first_err))) return lib;

  if ((env = getenv("CUDA_HOME")) && *env) roots[nroots++] = env;
  if ((env = getenv("CUDA_PATH")) && *env) roots[nroots++] = env;
  roots[nroots++] = "/usr/local/cuda";
  for (j = 0; j < nroots; j++) {
    for (i = 0; i < n; i++) {
      snprintf(paths[i], sizeof paths[i], "%s/lib64/%s", roots[j], names[i]);
      under[i] = paths[i];
    }
    if ((lib = mw__dl_open_first(under, n, NULL, why, sizeof why))) return lib;
  }

  for (j = 0; j < nroots; j++)
    snprintf(dirs + strlen(dirs), sizeof dirs - strlen(dirs), "%s%s/lib64", j ? ", " : "",
             roots[j]);
  for (i = 0; i < n; i++)
    snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? (i + 1 == n ? " or " : ", ") : "",
             names[i]);
  snprintf(msg, msglen, "%s not found: no %s on the library path nor in %s (dlopen: %s); %s or set %s "
           "to its path", what, list, dirs, first_err, hint, env_name);
  return NULL;
}

static void *open_library(void) {
  static const char *const names[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"};
  return open_library_of(names, sizeof names / sizeof names[0], "MOONWARP_NVRTC", "NVRTC",
                         "install the CUDA toolkit's NVRTC", load_msg, sizeof load_msg);
}

static void load(void) {
  void *lib = open_library();
  const char *missing;
  int n = 0;
  nvrtc_result r;

  if (!lib) {
    load_rc = MW_ENODEV;
    return;
  }
  if ((missing = mw__dl_resolve(lib, symbols, sizeof symbols / sizeof symbols[0], &nv))) {
    set_msg("the NVRTC library found has no %s: NVRTC 11.2 or newer is needed", missing);
    goto fail;
  }
  if ((r = nv.Version(&nv_major, &nv_minor)) != NVRTC_OK) {
    set_msg("nvrtcVersion failed: %s", nv.GetErrorString(r));
    goto fail;
  }
  if ((r = nv.GetNumSupportedArchs(&n)) != NVRTC_OK || n <= 0 || n > MAX_ARCHS ||
      (r = nv.GetSupportedArchs(archs)) != NVRTC_OK) {
    set_msg("NVRTC %d.%d did not list its supported architectures (%s)", nv_major, nv_minor,
            r != NVRTC_OK ? nv.GetErrorString(r) : "bad count");
    goto fail;
  }
  narchs = n;
  load_msg[0] = '\0';
  return;

fail:
  memset(&nv, 0, sizeof nv);
  load_rc = MW_ENODEV;
  /* The library stays open: nothing calls into it again, and closing it is not worth the
   * risk of a library that registered atexit handlers. */
}

int mw__nvrtc_load(char *err, size_t errlen) {
  pthread_once(&load_once, load);
  if (load_rc && err && errlen) snprintf(err, errlen, "%s", load_msg);
  return load_rc;
}

int mw__nvrtc_version(int *major, int *minor) {
  int rc = mw__nvrtc_load(NULL, 0);
  if (rc) return rc;
  if (major) *major = nv_major;
  if (minor) *minor = nv_minor;
  return 0;
}

/* The target for sm, or a message in msg and a negative code. */
static int pick_target(int sm, int *target, int *is_cubin, char *msg, size_t msglen) {
  int i, best = 0;

  if (sm <= 0) {
    snprintf(msg, msglen, "invalid target architecture sm_%d", sm);
    return MW_EINVAL;
  }
  for (i = 0; i < narchs; i++) {
    if (archs[i] == sm) {
      *target = sm;
      *is_cubin = 1;
      return 0;
    }
    if (archs[i] < sm && archs[i] > best) best = archs[i];
  }
  if (!best) {
    snprintf(msg, msglen, "NVRTC %d.%d cannot compile for sm_%d: its oldest architecture is "
             "sm_%d",
             nv_major, nv_minor, sm, narchs ? archs[0] : 0);
    return MW_ENODEV;
  }
  *target = best;
  *is_cubin = 0;
  return 0;
}

int mw__nvrtc_target(int sm, int *target, int *is_cubin) {
  char msg[160];
  int rc = mw__nvrtc_load(NULL, 0);
  if (rc) return rc;
  return pick_target(sm, target, is_cubin, msg, sizeof msg);
}

/* A malloc'd copy of the formatted message, or NULL when out of memory. */
static char *format(const char *fmt, ...) {
  va_list ap;
  int n;
  char *s;

  va_start(ap, fmt);
  n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0 || !(s = malloc((size_t)n + 1))) return NULL;
  va_start(ap, fmt);
  vsnprintf(s, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return s;
}

/* The program's log, malloc'd, or NULL when it is empty or only whitespace. */
static char *program_log(nvrtc_program prog) {
  size_t n = 0, i;
  char *s;

  if (nv.GetProgramLogSize(prog, &n) != NVRTC_OK || n <= 1) return NULL;
  if (!(s = malloc(n))) return NULL;
  if (nv.GetProgramLog(prog, s) != NVRTC_OK) {
    free(s);
    return NULL;
  }
  s[n - 1] = '\0';
  for (i = 0; s[i]; i++)
    if (s[i] != ' ' && s[i] != '\n' && s[i] != '\r' && s[i] != '\t') return s;
  free(s);
  return NULL;
}

static int code_of(nvrtc_result r) {
  switch (r) {
  case NVRTC_OUT_OF_MEMORY:
    return MW_ENOMEM;
  case NVRTC_INVALID_INPUT:
  case NVRTC_INVALID_OPTION:
    return MW_EINVAL;
  default:
    return MW_ECOMPILE;
  }
}

/* The message of a failed nvrtcCompileProgram (r), from its log (taken over): the log alone
 * for a compile error (it names the user's file and line), else what failed, with the options
 * when one was rejected. */
static char *compile_failure(nvrtc_result r, const char *const *opts, int nopts, char *log) {
  if (r == NVRTC_COMPILATION && log) return log;
  char *m;
  if (r == NVRTC_INVALID_OPTION) {
    size_t len = 1;
    for (int i = 0; i < nopts; i++) len += strlen(opts[i]) + 1;
    char *list = malloc(len);
    if (list) {
      list[0] = '\0';
      for (int i = 0; i < nopts; i++) {
        if (i) strcat(list, " ");
        strcat(list, opts[i]);
      }
    }
    m = format("NVRTC %d.%d rejected an option (%s): %s\n%s", nv_major, nv_minor,
               nv.GetErrorString(r), list ? list : "?", log ? log : "");
    free(list);
  } else {
    m = format("nvrtcCompileProgram failed: %s\n%s", nv.GetErrorString(r), log ? log : "");
  }
  free(log);
  return m;
}

/* The compiled program's image (a cubin, or PTX): *out (malloc'd) and *n; on failure *text
 * (replaced) says why. */
static int fetch_image(nvrtc_program prog, int cubin, void **out, size_t *n, char **text) {
  nvrtc_result r = cubin ? nv.GetCUBINSize(prog, n) : nv.GetPTXSize(prog, n);
  if (r != NVRTC_OK || *n == 0) {
    free(*text);
    *text = format("nvrtcGet%sSize failed: %s", cubin ? "CUBIN" : "PTX",
                   r != NVRTC_OK ? nv.GetErrorString(r) : "empty output");
    return r == NVRTC_OUT_OF_MEMORY ? MW_ENOMEM : MW_ECOMPILE;
  }
  if (!(*out = malloc(*n))) return MW_ENOMEM;
  r = cubin ? nv.GetCUBIN(prog, *out) : nv.GetPTX(prog, *out);
  if (r != NVRTC_OK) {
    free(*out);
    *out = NULL;
    free(*text);
    *text = format("nvrtcGet%s failed: %s", cubin ? "CUBIN" : "PTX", nv.GetErrorString(r));
    return code_of(r);
  }
  return 0;
}

/* The options of a compile in *all (malloc'd) and *nall: the target (written in arch_opt, which
 * *all points to), line information unless the caller asks for full debug information, C++17,
 * then the caller's. */
static int compile_options(char *arch_opt, size_t arch_len, int target, int cubin,
                           const char *const *opts, int nopts, const char ***all, int *nall) {
  enum { FIXED_OPTS = 3 };
  int i, debug = 0, n = 0;

  snprintf(arch_opt, arch_len, "--gpu-architecture=%s_%d", cubin ? "sm" : "compute", target);
  if (!(*all = malloc(sizeof **all * (size_t)(FIXED_OPTS + nopts)))) return MW_ENOMEM;
  /* full debug information (-G) has the lines already: ptxas would warn of both */
  for (i = 0; i < nopts; i++) debug |= !strcmp(opts[i], "-G") || !strcmp(opts[i], "--device-debug");
  (*all)[n++] = arch_opt;
  if (!debug) (*all)[n++] = "-lineinfo";
  (*all)[n++] = "--std=c++17";
  for (i = 0; i < nopts; i++) (*all)[n++] = opts[i];
  *nall = n;
  return 0;
}

/* Creates the NVRTC program of src in *prog (NULL on failure, with its message in *log). */
static int create_program(nvrtc_program *prog, const char *src, const char *name, char **log) {
  nvrtc_result r = nv.CreateProgram(prog, src, name ? name : "<string>", 0, NULL, NULL);
  if (r != NVRTC_OK) {
    *prog = NULL;
    int rc = code_of(r);
    *log = format("nvrtcCreateProgram failed: %s", nv.GetErrorString(r));
    return rc;
  }
  return 0;
}

/* Compiles prog with the options all; *text gets its log, or on failure the message of it. */
static int compile_program(nvrtc_program prog, const char *const *all, int nall, char **text) {
  nvrtc_result r = nv.CompileProgram(prog, nall, all);
  *text = program_log(prog);
  if (r != NVRTC_OK) {
    int rc = code_of(r);
    *text = compile_failure(r, all, nall, *text);
    return rc;
  }
  return 0;
}

/* Hands text to *log (frees it when log is NULL); an out-of-memory or compile failure that left no
 * text gets a message of its own. */
static void hand_log(int rc, char *text, char **log) {
  if (rc == MW_ENOMEM && !text) text = format("out of memory while compiling");
  if (rc == MW_ECOMPILE && !text) text = format("compilation failed and NVRTC wrote no log");
  if (log)
    *log = text;
  else
    free(text);
}

int mw__nvrtc_compile(const char *src, const char *name, int sm, const char *const *opts,
                      int nopts, void **image, size_t *size, int *is_cubin, char **log) {
  char msg[1024], arch_opt[64];
  const char **all = NULL;
  char *text = NULL;
  void *out = NULL;
  size_t n = 0;
  nvrtc_program prog = NULL;
  int rc, target = 0, cubin = 0, nall = 0;

  if (image) *image = NULL;
  if (size) *size = 0;
  if (log) *log = NULL;
  if (!src || !image || !size || !is_cubin || nopts < 0 || (nopts > 0 && !opts)) {
    if (log) *log = format("mw__nvrtc_compile: invalid argument");
    return MW_EINVAL;
  }
  if ((rc = mw__nvrtc_load(msg, sizeof msg)) != 0 ||
      (rc = pick_target(sm, &target, &cubin, msg, sizeof msg)) != 0) {
    if (log) *log = format("%s", msg);
    return rc;
  }

  if ((rc = compile_options(arch_opt, sizeof arch_opt, target, cubin, opts, nopts, &all,
                            &nall)) == 0 &&
      (rc = create_program(&prog, src, name, &text)) == 0 &&
      (rc = compile_program(prog, all, nall, &text)) == 0 &&
      (rc = fetch_image(prog, cubin, &out, &n, &text)) == 0) {
    *image = out;
    *size = n;
    *is_cubin = cubin;
  }

  if (prog) nv.DestroyProgram(&prog);
  free(all);
  hand_log(rc, text, log);
  return rc;
}

/* ---- nvJitLink: the parts of an image linked into one cubin ------------------------------- */

typedef int nvjl_result;
typedef struct nvJitLink *nvjl_handle;
enum { NVJL_INPUT_CUBIN = 1, NVJL_INPUT_PTX = 2, NVJL_INPUT_LIBRARY = 6 };

struct nvjl_api {
  nvjl_result (*Create)(nvjl_handle *h, unsigned n, const char **opts);
  nvjl_result (*Destroy)(nvjl_handle *h);
  nvjl_result (*AddData)(nvjl_handle h, int type, const void *data, size_t size, const char *name);
  nvjl_result (*AddFile)(nvjl_handle h, int type, const char *path);
  nvjl_result (*Complete)(nvjl_handle h);
  nvjl_result (*GetLinkedCubinSize)(nvjl_handle h, size_t *size);
  nvjl_result (*GetLinkedCubin)(nvjl_handle h, void *cubin);
  nvjl_result (*GetErrorLogSize)(nvjl_handle h, size_t *size);
  nvjl_result (*GetErrorLog)(nvjl_handle h, char *log);
};

static struct nvjl_api jl;
static const mw__dl_sym jl_symbols[] = {
#define SYM(member) {"nvJitLink" #member, offsetof(struct nvjl_api, member)}
    SYM(Create), SYM(Destroy), SYM(AddData), SYM(AddFile), SYM(Complete), SYM(GetLinkedCubinSize),
    SYM(GetLinkedCubin), SYM(GetErrorLogSize), SYM(GetErrorLog),
#undef SYM
};
static pthread_once_t jl_once = PTHREAD_ONCE_INIT;
static int jl_rc;
static char jl_msg[1024];

static void jl_load(void) {
  static const char *const names[] = {"libnvJitLink.so", "libnvJitLink.so.13", "libnvJitLink.so.12"};
  void *lib = open_library_of(names, sizeof names / sizeof names[0], "MOONWARP_NVJITLINK",
                              "nvJitLink", "install the CUDA toolkit's nvJitLink", jl_msg,
                              sizeof jl_msg);
  const char *missing;
  if (!lib) {
    jl_rc = MW_ENODEV;
    return;
  }
  if ((missing = mw__dl_resolve(lib, jl_symbols, sizeof jl_symbols / sizeof jl_symbols[0], &jl))) {
    snprintf(jl_msg, sizeof jl_msg, "the nvJitLink library found has no %s: CUDA 12 or newer is needed",
             missing);
    memset(&jl, 0, sizeof jl);
    jl_rc = MW_ENODEV;
  }
}

/* nvJitLink's error log of h (malloc'd), or a message of its own. */
static char *jl_error(nvjl_handle h, const char *what, nvjl_result r) {
  size_t n = 0;
  char *log = NULL;
  if (h && jl.GetErrorLogSize(h, &n) == 0 && n > 1 && (log = malloc(n)) && jl.GetErrorLog(h, log) != 0) {
    free(log);
    log = NULL;
  }
  char *m = format("nvJitLink: %s failed (error %d)%s%s", what, r, log ? ":\n" : "", log ? log : "");
  free(log);
  return m;
}

int mw__nvjitlink(int sm, const void *const *parts, const size_t *sizes, const int *is_cubin,
                  int n, const char *library, void **image, size_t *size, char **log) {
  char arch[32], msg[1024];
  int target = 0, cubin = 0;
  *image = NULL;
  *size = 0;
  if (log) *log = NULL;
  pthread_once(&jl_once, jl_load);
  int rc = jl_rc;
  if (rc) {
    if (log) *log = format("%s", jl_msg);
    return rc;
  }
  if ((rc = mw__nvrtc_load(msg, sizeof msg)) || (rc = pick_target(sm, &target, &cubin, msg, sizeof msg))) {
    if (log) *log = format("%s", msg);
    return rc;
  }
  snprintf(arch, sizeof arch, "-arch=sm_%d", sm); /* PTX parts are compiled for the device */
  const char *opts[] = {arch};
  nvjl_handle h = NULL;
  char *text = NULL;
  nvjl_result r = jl.Create(&h, 1, opts);
  if (r) text = jl_error(NULL, "nvJitLinkCreate", r);
  for (int i = 0; i < n && !r; ++i)
    if ((r = jl.AddData(h, is_cubin[i] ? NVJL_INPUT_CUBIN : NVJL_INPUT_PTX, parts[i], sizes[i], "part")))
      text = jl_error(h, "nvJitLinkAddData", r);
  if (!r && library && (r = jl.AddFile(h, NVJL_INPUT_LIBRARY, library))) text = jl_error(h, "nvJitLinkAddFile", r);
  if (!r && (r = jl.Complete(h))) text = jl_error(h, "the link", r);
  if (!r && ((r = jl.GetLinkedCubinSize(h, size)) || !*size)) text = jl_error(h, "nvJitLinkGetLinkedCubinSize", r);
  if (!r && !(*image = malloc(*size))) rc = MW_ENOMEM;
  if (!r && !rc && (r = jl.GetLinkedCubin(h, *image))) text = jl_error(h, "nvJitLinkGetLinkedCubin", r);
  if (r || rc) {
    free(*image);
    *image = NULL;
    *size = 0;
    if (!rc) rc = MW_ECOMPILE;
  }
  if (h) jl.Destroy(&h);
  if (log) *log = text;
  else free(text);
  return rc;
}

/* ---- the device runtime library ---------------------------------------------------------- */

static pthread_once_t devrt_once = PTHREAD_ONCE_INIT;
static char devrt_path[1024];

static int readable(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f) fclose(f);
  return f != NULL;
}

static void devrt_find(void) {
  const char *env = getenv("MOONWARP_CUDADEVRT");
  if (env && *env) {
    if (readable(env)) snprintf(devrt_path, sizeof devrt_path, "%s", env);
    return;
  }
  char dir[1024] = "";
  pthread_once(&jl_once, jl_load);
  Dl_info info;
  if (!jl_rc && jl.Create && dladdr((void *)jl.Create, &info) && info.dli_fname) {
    snprintf(dir, sizeof dir, "%s", info.dli_fname);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    else dir[0] = 0;
  }
  const char *home = getenv("CUDA_HOME");
  char cand[3][1024];
  snprintf(cand[0], sizeof cand[0], "%s/libcudadevrt.a", dir[0] ? dir : ".");
  snprintf(cand[1], sizeof cand[1], "%s/lib64/libcudadevrt.a", home && *home ? home : "/usr/local/cuda");
  snprintf(cand[2], sizeof cand[2], "/usr/local/cuda/lib64/libcudadevrt.a");
  for (int i = dir[0] ? 0 : 1; i < 3; ++i)
    if (readable(cand[i])) {
      snprintf(devrt_path, sizeof devrt_path, "%s", cand[i]);
      return;
    }
}

const char *mw__cudadevrt(void) {
  pthread_once(&devrt_once, devrt_find);
  return devrt_path[0] ? devrt_path : NULL;
}
