/* options.c - a program's compile options: defines and include directories checked and taken
 * over, and the digest of the headers a compile reaches through them (part of the cache key). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "program.h"
#include "util.h"

/* Words the task language gives a meaning (program.h, README): a macro of that name would
 * change what moonwarp's parser has read. */
static const char *const task_words[] = {
    "task",   "local",     "future",    "spawn",     "spawn_bulk",   "await",  "await_all",
    "try_await", "value",  "failed",    "cancelled", "fail_message", "fail_code", "cancel",
    "release", "fail",     "lane",      "index",     NULL};

static int is_ident(const char *s, size_t n) {
  if (n == 0 || (s[0] >= '0' && s[0] <= '9')) return 0;
  for (size_t i = 0; i < n; ++i) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
      return 0;
  }
  return 1;
}

/* Why NAME=VALUE cannot be a define ("" when it can), into why. */
static void check_define(const char *name, size_t n, const char *value, char *why, size_t cap) {
  why[0] = 0;
  if (!is_ident(name, n)) {
    snprintf(why, cap, "option 'defines': '%.*s' is not an identifier", (int)(n > 60 ? 60 : n), name);
    return;
  }
  if (name[0] == '_' || !strncmp(name, "MW_", 3) || !strncmp(name, "mw_", 3)) {
    snprintf(why, cap,
             "option 'defines': '%.*s' is reserved for moonwarp and the compilers (names starting "
             "with _, MW_ or mw_)", (int)n, name);
    return;
  }
  for (int i = 0; task_words[i]; ++i)
    if (strlen(task_words[i]) == n && !strncmp(name, task_words[i], n)) {
      snprintf(why, cap, "option 'defines': '%.*s' is a word of the task language", (int)n, name);
      return;
    }
  if (strpbrk(value, "\n\r")) {
    snprintf(why, cap, "option 'defines': the value of '%.*s' must be one line", (int)n, name);
    return;
  }
  size_t vn = strlen(value);
  if (vn && value[vn - 1] == '\\') {
    snprintf(why, cap, "option 'defines': the value of '%.*s' ends with a backslash", (int)n, name);
    return;
  }
  /* a comment left open would run on into the code after the define */
  const char *open = strstr(value, "/*");
  if (open && !strstr(open + 2, "*/"))
    snprintf(why, cap, "option 'defines': the value of '%.*s' opens a comment it does not close",
             (int)n, name);
}

void mw__free_strings(char **v, int n) {
  if (!v) return;
  for (int i = 0; i < n; ++i) free(v[i]);
  free(v);
}

static int fail(char *err, size_t errlen, const char *why) {
  snprintf(err, errlen, "%s", why);
  return MW_EINVAL;
}

int mw__take_compile_options(const mw_compile_desc *desc, mw__parsed *p, char ***dirs,
                             int *ndirs, char *err, size_t errlen) {
  char why[256];
  *dirs = NULL;
  *ndirs = 0;
  if (!desc) return 0;
  int nd = desc->ndefines, ni = desc->ninclude_dirs;
  if (nd < 0 || (nd > 0 && !desc->defines))
    return fail(err, errlen, nd < 0 ? "option 'ndefines' is negative"
                                    : "option 'defines' is NULL with ndefines > 0");
  if (ni < 0 || (ni > 0 && !desc->include_dirs))
    return fail(err, errlen, ni < 0 ? "option 'ninclude_dirs' is negative"
                                    : "option 'include_dirs' is NULL with ninclude_dirs > 0");
  for (int i = 0; i < nd; ++i) {
    const char *d = desc->defines[i];
    if (!d) {
      snprintf(why, sizeof why, "option 'defines': entry %d is NULL", i);
      return fail(err, errlen, why);
    }
    const char *eq = strchr(d, '=');
    size_t n = eq ? (size_t)(eq - d) : strlen(d);
    check_define(d, n, eq ? eq + 1 : "", why, sizeof why);
    if (why[0]) return fail(err, errlen, why);
    for (int k = 0; k < i; ++k) {
      const char *o = desc->defines[k], *oeq = strchr(o, '=');
      size_t on = oeq ? (size_t)(oeq - o) : strlen(o);
      if (on == n && !strncmp(o, d, n)) {
        snprintf(why, sizeof why, "option 'defines': '%.*s' is defined twice", (int)n, d);
        return fail(err, errlen, why);
      }
    }
  }
  char **names = nd ? calloc((size_t)nd, sizeof *names) : NULL;
  char **values = nd ? calloc((size_t)nd, sizeof *values) : NULL;
  char **abs = ni ? calloc((size_t)ni, sizeof *abs) : NULL;
  int rc = 0;
  if ((nd && (!names || !values)) || (ni && !abs)) rc = MW_ENOMEM;
  for (int i = 0; i < nd && !rc; ++i) {
    const char *d = desc->defines[i], *eq = strchr(d, '=');
    names[i] = eq ? mw__strndup(d, (size_t)(eq - d)) : mw__strdup(d);
    values[i] = mw__strdup(eq ? eq + 1 : "1");
    if (!names[i] || !values[i]) rc = MW_ENOMEM;
  }
  for (int i = 0; i < ni && !rc; ++i) {
    const char *d = desc->include_dirs[i];
    struct stat st;
    if (!d || !*d) {
      snprintf(why, sizeof why, "option 'include_dirs': entry %d is %s", i, d ? "empty" : "NULL");
      rc = fail(err, errlen, why);
    } else if (stat(d, &st) != 0) {
      snprintf(why, sizeof why, "option 'include_dirs': no directory '%.120s' (%s)", d,
               strerror(errno));
      rc = fail(err, errlen, why);
    } else if (!S_ISDIR(st.st_mode)) {
      snprintf(why, sizeof why, "option 'include_dirs': '%.120s' is not a directory", d);
      rc = fail(err, errlen, why);
    } else if (!(abs[i] = realpath(d, NULL))) {
      rc = errno == ENOMEM ? MW_ENOMEM : MW_EINVAL;
      if (rc == MW_EINVAL) {
        snprintf(why, sizeof why, "option 'include_dirs': '%.120s' cannot be resolved (%s)", d,
                 strerror(errno));
        fail(err, errlen, why);
      }
    }
  }
  if (rc) {
    mw__free_strings(names, nd);
    mw__free_strings(values, nd);
    mw__free_strings(abs, ni);
    return rc;
  }
  p->ndefines = nd;
  p->def_names = names;
  p->def_values = values;
  *dirs = abs;
  *ndirs = ni;
  return 0;
}

/* ---- the headers a compile reaches --------------------------------------------------------- */

#define MAX_HEADERS 4096
#define MAX_DEPTH 64

typedef struct walk {
  crypto_generichash_state st;
  const char *const *dirs;
  int ndirs;
  char **seen; /* real paths of the headers hashed so far */
  int nseen, cap;
  int oom;
} walk;

static void hash_part(walk *w, const void *data, size_t n) {
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = (unsigned char)((uint64_t)n >> (8 * i));
  crypto_generichash_update(&w->st, len, sizeof len);
  if (n) crypto_generichash_update(&w->st, data, n);
}

static int regular_file(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static void walk_text(walk *w, const char *text, const char *self_dir, int depth);

/* Follows one #include of name (quoted: looked for beside the including header first). */
static void follow(walk *w, const char *name, size_t n, int quoted, const char *self_dir,
                   int depth) {
  char path[PATH_MAX];
  int found = 0;
  if (n == 0 || n >= PATH_MAX / 2) return;
  if (name[0] == '/') {
    found = snprintf(path, sizeof path, "%.*s", (int)n, name) < (int)sizeof path && regular_file(path);
  } else {
    if (quoted && self_dir)
      found = snprintf(path, sizeof path, "%s/%.*s", self_dir, (int)n, name) < (int)sizeof path &&
              regular_file(path);
    for (int i = 0; !found && i < w->ndirs; ++i)
      found = snprintf(path, sizeof path, "%s/%.*s", w->dirs[i], (int)n, name) < (int)sizeof path &&
              regular_file(path);
  }
  if (!found || w->nseen >= MAX_HEADERS) return;
  char *real = realpath(path, NULL);
  if (!real) return;
  for (int i = 0; i < w->nseen; ++i)
    if (!strcmp(w->seen[i], real)) {
      free(real);
      return;
    }
  if (w->nseen == w->cap) {
    int cap = w->cap ? w->cap * 2 : 16;
    char **grown = realloc(w->seen, (size_t)cap * sizeof *grown);
    if (!grown) {
      free(real);
      w->oom = 1;
      return;
    }
    w->seen = grown;
    w->cap = cap;
  }
  w->seen[w->nseen++] = real;
  char *text = NULL;
  size_t len = 0;
  if (mw__read_file(path, &text, &len) != 0) return; /* the compiler will say so */
  /* the name as the #include writes it, not where it was found: the same headers in a folder
   * moved elsewhere (or named by another path) give the same digest */
  hash_part(w, name, n);
  hash_part(w, text, len);
  /* the folder of the path as found, where the compiler looks for its quoted includes */
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (slash) *slash = 0;
  walk_text(w, text, slash ? dir : NULL, depth + 1);
  free(text);
}

static void walk_text(walk *w, const char *text, const char *self_dir, int depth) {
  if (depth > MAX_DEPTH) return;
  for (const char *s = text; s && *s && !w->oom;) {
    const char *e = strchr(s, '\n');
    const char *q = s;
    while (*q == ' ' || *q == '\t') ++q;
    if (*q == '#') {
      ++q;
      while (*q == ' ' || *q == '\t') ++q;
      if (!strncmp(q, "include", 7)) {
        q += 7;
        if (!strncmp(q, "_next", 5)) q += 5;
        while (*q == ' ' || *q == '\t') ++q;
        char close = *q == '"' ? '"' : *q == '<' ? '>' : 0;
        if (close) {
          const char *name = q + 1, *end = name;
          while (*end && *end != close && *end != '\n') ++end;
          if (*end == close) follow(w, name, (size_t)(end - name), close == '"', self_dir, depth);
        }
      }
    }
    s = e ? e + 1 : NULL;
  }
}

int mw__include_digest(const char *src, const char *const *dirs, int ndirs, char out[65]) {
  out[0] = 0;
  if (ndirs <= 0) return 0;
  if (sodium_init() < 0) return MW_EIO;
  walk w;
  memset(&w, 0, sizeof w);
  w.dirs = dirs;
  w.ndirs = ndirs;
  crypto_generichash_init(&w.st, NULL, 0, 32);
  walk_text(&w, src, NULL, 0);
  int rc = w.oom ? MW_ENOMEM : 0;
  if (!rc && w.nseen) {
    unsigned char digest[32];
    crypto_generichash_final(&w.st, digest, sizeof digest);
    sodium_bin2hex(out, 65, digest, sizeof digest);
  }
  mw__free_strings(w.seen, w.nseen);
  return rc;
}
