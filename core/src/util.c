/* util.c - string builder, per-thread error message, clocks, whole-file reads, run-time libraries. */
#include "moonwarp.h"
#include "util.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

void mw__sb_put(mw__sb *b, const char *s, size_t n) {
  if (b->oom) return;
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + n + 1) cap *= 2;
    char *p = realloc(b->s, cap);
    if (!p) {
      b->oom = 1;
      return;
    }
    b->s = p;
    b->cap = cap;
  }
  memcpy(b->s + b->n, s, n);
  b->n += n;
  b->s[b->n] = 0;
}

void mw__sb_puts(mw__sb *b, const char *s) { mw__sb_put(b, s, strlen(s)); }

void mw__sb_printf(mw__sb *b, const char *fmt, ...) {
  char tmp[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n < sizeof tmp) {
    mw__sb_put(b, tmp, (size_t)n);
    return;
  }
  char *big = malloc((size_t)n + 1);
  if (!big) {
    b->oom = 1;
    return;
  }
  va_start(ap, fmt);
  vsnprintf(big, (size_t)n + 1, fmt, ap);
  va_end(ap);
  mw__sb_put(b, big, (size_t)n);
  free(big);
}

char *mw__sb_take(mw__sb *b) {
  if (b->oom) {
    mw__sb_free(b);
    return NULL;
  }
  if (!b->s) mw__sb_put(b, "", 0);
  char *s = b->s;
  b->s = NULL;
  b->n = b->cap = 0;
  return s;
}

void mw__sb_free(mw__sb *b) {
  free(b->s);
  b->s = NULL;
  b->n = b->cap = 0;
  b->oom = 0;
}

static __thread char last_error[4096];

void mw__set_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
}

int mw__null_arg(const char *fn, const char *arg) {
  mw__set_error("%s: %s must not be NULL", fn, arg);
  return MW_EINVAL;
}

void mw__set_error_str(const char *msg) {
  snprintf(last_error, sizeof last_error, "%s", msg ? msg : "");
}

const char *mw__get_error(void) { return last_error; }

void mw__copy_cut(char *dst, size_t cap, const char *src) {
  size_t n = strlen(src);
  if (n < cap) {
    memcpy(dst, src, n + 1);
    return;
  }
  memcpy(dst, src, cap - 4);
  memcpy(dst + cap - 4, "...", 4);
}

char *mw__strdup(const char *s) { return s ? mw__strndup(s, strlen(s)) : NULL; }

char *mw__strndup(const char *s, size_t n) {
  char *p = malloc(n + 1);
  if (!p) return NULL;
  memcpy(p, s, n);
  p[n] = 0;
  return p;
}

double mw__now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void mw__sleep_ns(long ns) {
  struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
  nanosleep(&ts, NULL);
}

void mw__nap_ns(long ns) {
#ifdef PR_SET_TIMERSLACK
  const int slack_ns = 1000;
  int old = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
  int set = old > slack_ns && prctl(PR_SET_TIMERSLACK, (unsigned long)slack_ns, 0, 0, 0) == 0;
  mw__sleep_ns(ns);
  if (set) prctl(PR_SET_TIMERSLACK, (unsigned long)old, 0, 0, 0);
#else
  mw__sleep_ns(ns);
#endif
}

int mw__read_file(const char *path, char **out, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  mw__sb b = {0};
  char tmp[65536];
  size_t k;
  while ((k = fread(tmp, 1, sizeof tmp, f)) > 0) mw__sb_put(&b, tmp, k);
  int bad = ferror(f), e = errno;
  fclose(f);
  if (bad) {
    mw__sb_free(&b);
    errno = e;
    return -1;
  }
  if (n) *n = b.n;
  *out = mw__sb_take(&b);
  if (!*out) errno = ENOMEM;
  return *out ? 0 : -1;
}

void *mw__dl_open_first(const char *const *names, size_t n, size_t *which, char *why, size_t cap) {
  if (cap) why[0] = 0;
  for (size_t i = 0; i < n; ++i) {
    void *lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (lib) {
      if (which) *which = i;
      return lib;
    }
    const char *e = dlerror();
    if (cap && !why[0]) snprintf(why, cap, "%s", e ? e : "unknown error");
  }
  return NULL;
}

const char *mw__dl_resolve(void *lib, const mw__dl_sym *syms, size_t n, void *table) {
  for (size_t i = 0; i < n; ++i) {
    dlerror();
    void *p = dlsym(lib, syms[i].symbol);
    if (!p) return syms[i].symbol;
    /* POSIX guarantees that a data pointer from dlsym converts to a function pointer. */
    memcpy((char *)table + syms[i].offset, &p, sizeof p);
  }
  return NULL;
}
