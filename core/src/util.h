/* util.h - small internal helpers shared by the core and the compiler front: string builder,
 * error message storage, clocks, files, libraries opened at run time. */
#ifndef MW_UTIL_H
#define MW_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

typedef struct mw__sb {
  char *s;
  size_t n, cap;
  int oom;
} mw__sb;

void mw__sb_put(mw__sb *b, const char *s, size_t n);
void mw__sb_puts(mw__sb *b, const char *s);
void mw__sb_printf(mw__sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
char *mw__sb_take(mw__sb *b); /* the NUL-terminated string (caller frees), or NULL on OOM */
void mw__sb_free(mw__sb *b);

/* this thread's detailed message of the last failure (mw_last_error) */
void mw__set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void mw__set_error_str(const char *msg);
/* The C API's answer to a NULL handle or out-pointer (moonwarp.h, NULL): says which argument of
 * which function in mw_last_error() and returns MW_EINVAL. */
int mw__null_arg(const char *fn, const char *arg);
#define MW_NOT_NULL(p, fn) \
  do {                     \
    if (!(p)) return mw__null_arg(fn, #p); \
  } while (0)
char *mw__strdup(const char *s);
/* Copies src into dst (cap bytes, at least 4, NUL included); where src does not fit, what is
 * kept ends with "..." so that the cut shows. */
void mw__copy_cut(char *dst, size_t cap, const char *src);
char *mw__strndup(const char *s, size_t n);

double mw__now(void); /* monotonic seconds */
void mw__sleep_ns(long ns);
/* The naps of a wait (moonwarp.h, Waiting): a nap is 1/MW_NAP_FRACTION of the time waited so far;
 * mw__nap_ns sleeps with a 1 us timer slack (the kernel's default of 50 us would make every
 * nap that much late), the thread's own slack put back after (Linux). */
#define MW_NAP_FRACTION 16
void mw__nap_ns(long ns);
/* The whole file at path in *out (malloc'd, NUL-terminated; *n bytes without the NUL when n is
 * not NULL): 0, or -1 with errno saying why. */
int mw__read_file(const char *path, char **out, size_t *n);

/* Libraries opened at run time (NVRTC, the driver): a table of function pointers filled from
 * a list of symbols, each stored at its offset in the table. */
typedef struct mw__dl_sym {
  const char *symbol;
  size_t offset;
} mw__dl_sym;
/* Opens the first of names[0..n) that dlopen opens (RTLD_NOW | RTLD_LOCAL), its index in *which
 * (may be NULL); NULL when none does, with the first failure's dlerror() in why (cap bytes). */
void *mw__dl_open_first(const char *const *names, size_t n, size_t *which, char *why, size_t cap);
/* Resolves syms[0..n) from lib into table: NULL when all were found, else the first symbol lib
 * lacks (the table is then partly filled). */
const char *mw__dl_resolve(void *lib, const mw__dl_sym *syms, size_t n, void *table);

#endif
