/* parse.c - finds task declarations in a program's source: typed signatures, bodies, locals. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "program.h"
#include "protocol_host.h"
#include "util.h"

typedef struct scan {
  const char *s;
  size_t n;
  const char *file;
  char *err;
  size_t errlen;
  int first_line;
} scan;

static int line_at(const scan *sc, size_t pos) {
  int line = sc->first_line;
  for (size_t i = 0; i < pos && i < sc->n; ++i)
    if (sc->s[i] == '\n') ++line;
  return line;
}

static int fail_at(scan *sc, size_t pos, const char *fmt, const char *arg) {
  char msg[256];
  snprintf(msg, sizeof msg, fmt, arg ? arg : "");
  snprintf(sc->err, sc->errlen, "%s:%d: %s", sc->file, line_at(sc, pos), msg);
  return MW_ECOMPILE;
}

static int is_id(int c) { return isalnum(c) || c == '_'; }

/* Skips a comment, string or character literal starting at i; returns the position after it,
 * or i when none starts there. */
static size_t skip_lexeme(const scan *sc, size_t i) {
  const char *s = sc->s;
  size_t n = sc->n;
  if (i + 1 < n && s[i] == '/' && s[i + 1] == '/') {
    while (i < n && s[i] != '\n') ++i;
    return i;
  }
  if (i + 1 < n && s[i] == '/' && s[i + 1] == '*') {
    i += 2;
    while (i + 1 < n && !(s[i] == '*' && s[i + 1] == '/')) ++i;
    return i + 1 < n ? i + 2 : n;
  }
  if (s[i] == '"' || s[i] == '\'') {
    char q = s[i++];
    while (i < n && s[i] != q) {
      if (s[i] == '\\') ++i;
      if (s[i] == '\n') break;
      ++i;
    }
    return i < n ? i + 1 : n;
  }
  return i;
}

/* A preprocessor line starts at i (first non-blank of its line is '#'): skip to its end. */
static size_t skip_pp(const scan *sc, size_t i) {
  while (i < sc->n && sc->s[i] != '\n') {
    if (sc->s[i] == '\\' && i + 1 < sc->n && sc->s[i + 1] == '\n') ++i;
    ++i;
  }
  return i;
}

static int at_line_start(const scan *sc, size_t i) {
  while (i > 0 && (sc->s[i - 1] == ' ' || sc->s[i - 1] == '\t')) --i;
  return i == 0 || sc->s[i - 1] == '\n';
}

/* Next significant position from i: skips blanks, comments and preprocessor lines. */
static size_t skip_ws(const scan *sc, size_t i) {
  for (;;) {
    while (i < sc->n && isspace((unsigned char)sc->s[i])) ++i;
    if (i >= sc->n) return i;
    size_t j = skip_lexeme(sc, i);
    if (j != i && (sc->s[i] == '/')) {
      i = j;
      continue;
    }
    if (sc->s[i] == '#' && at_line_start(sc, i)) {
      i = skip_pp(sc, i);
      continue;
    }
    return i;
  }
}

/* Position of the bracket matching the opener at i, or (size_t)-1. */
static size_t match(const scan *sc, size_t i) {
  char open = sc->s[i], close = open == '(' ? ')' : open == '{' ? '}' : ']';
  int depth = 0;
  while (i < sc->n) {
    size_t j = skip_lexeme(sc, i);
    if (j != i) {
      i = j;
      continue;
    }
    if (sc->s[i] == open) ++depth;
    else if (sc->s[i] == close && --depth == 0) return i;
    ++i;
  }
  return (size_t)-1;
}

static char *trim_dup(const char *s, size_t n) {
  while (n && isspace((unsigned char)*s)) ++s, --n;
  while (n && isspace((unsigned char)s[n - 1])) --n;
  /* collapse inner runs of blanks */
  char *out = malloc(n + 1);
  if (!out) return NULL;
  size_t k = 0;
  for (size_t i = 0; i < n; ++i) {
    char c = s[i];
    if (isspace((unsigned char)c)) {
      if (k && out[k - 1] != ' ') out[k++] = ' ';
      continue;
    }
    out[k++] = c;
  }
  out[k] = 0;
  return out;
}

static const struct {
  const char *name;
  mw_type type;
  uint32_t size;
} scalar_types[] = {
    {"bool", MW_T_BOOL, 1},          {"char", MW_T_I8, 1},
    {"signed char", MW_T_I8, 1},     {"unsigned char", MW_T_U8, 1},
    {"int8_t", MW_T_I8, 1},          {"uint8_t", MW_T_U8, 1},
    {"short", MW_T_I16, 2},          {"short int", MW_T_I16, 2},
    {"unsigned short", MW_T_U16, 2}, {"int16_t", MW_T_I16, 2},
    {"uint16_t", MW_T_U16, 2},       {"int", MW_T_I32, 4},
    {"signed", MW_T_I32, 4},         {"signed int", MW_T_I32, 4},
    {"unsigned", MW_T_U32, 4},       {"unsigned int", MW_T_U32, 4},
    {"int32_t", MW_T_I32, 4},        {"uint32_t", MW_T_U32, 4},
    {"long", MW_T_I64, 8},           {"long int", MW_T_I64, 8},
    {"long long", MW_T_I64, 8},      {"long long int", MW_T_I64, 8},
    {"unsigned long", MW_T_U64, 8},  {"unsigned long long", MW_T_U64, 8},
    {"int64_t", MW_T_I64, 8},        {"uint64_t", MW_T_U64, 8},
    {"size_t", MW_T_U64, 8},         {"float", MW_T_F32, 4},
    {"double", MW_T_F64, 8},         {"future", MW_T_FUTURE, 8},
    {"void", MW_T_VOID, 0},
};

mw_type mw__type_from_text(const char *txt, uint32_t *size) {
  /* drop qualifiers that do not change how the host marshals the value */
  char buf[128];
  size_t k = 0;
  const char *p = txt;
  int stars = 0;
  while (*p && k + 1 < sizeof buf) {
    if (isspace((unsigned char)*p)) {
      ++p;
      continue;
    }
    if (*p == '*') {
      ++stars;
      ++p;
      continue;
    }
    const char *w = p;
    while (is_id((unsigned char)*p)) ++p;
    size_t len = (size_t)(p - w);
    if (len == 0) return MW_T__COUNT; /* '&', '[', '<' ...: not marshallable */
    if ((len == 5 && !strncmp(w, "const", 5)) || (len == 8 && !strncmp(w, "volatile", 8)) ||
        (len == 11 && !strncmp(w, "__restrict__", 11)) || (len == 8 && !strncmp(w, "restrict", 8)))
      continue;
    if (k && k + 1 < sizeof buf) buf[k++] = ' ';
    if (k + len >= sizeof buf) return MW_T__COUNT;
    memcpy(buf + k, w, len);
    k += len;
  }
  buf[k] = 0;
  if (stars) {
    if (size) *size = 8;
    return k ? MW_T_PTR : MW_T__COUNT;
  }
  for (size_t i = 0; i < sizeof scalar_types / sizeof scalar_types[0]; ++i)
    if (!strcmp(buf, scalar_types[i].name)) {
      if (size) *size = scalar_types[i].size;
      return scalar_types[i].type;
    }
  return MW_T__COUNT;
}

/* Splits "type name" at its last identifier. */
static int split_decl(const char *d, char **type_txt, char **name) {
  size_t n = strlen(d);
  while (n && isspace((unsigned char)d[n - 1])) --n;
  size_t e = n;
  while (n && is_id((unsigned char)d[n - 1])) --n;
  if (n == e || isdigit((unsigned char)d[n])) return -1;
  *name = mw__strndup(d + n, e - n);
  *type_txt = trim_dup(d, n);
  return (*name && *type_txt && **type_txt) ? 0 : -1;
}

static int parse_params(scan *sc, mw__task *t, size_t lp, size_t rp) {
  char *all = trim_dup(sc->s + lp + 1, rp - lp - 1);
  if (!all) return MW_ENOMEM;
  int rc = 0;
  if (!*all || !strcmp(all, "void")) goto done;
  /* split at top-level commas */
  int cap = 4;
  t->params = calloc((size_t)cap, sizeof *t->params);
  char *p = all;
  while (p && !rc) {
    int depth = 0;
    char *q = p;
    while (*q && !(*q == ',' && depth == 0)) {
      if (*q == '(' || *q == '[' || *q == '<') ++depth;
      if (*q == ')' || *q == ']' || *q == '>') --depth;
      ++q;
    }
    char *next = *q ? q + 1 : NULL;
    *q = 0;
    if (t->nparams == cap) {
      cap *= 2;
      mw__param *np = realloc(t->params, (size_t)cap * sizeof *np);
      if (!np) {
        rc = MW_ENOMEM;
        break;
      }
      t->params = np;
    }
    mw__param *pm = &t->params[t->nparams];
    memset(pm, 0, sizeof *pm);
    pm->decl = trim_dup(p, strlen(p));
    if (!pm->decl || split_decl(pm->decl, &pm->type_txt, &pm->name)) {
      rc = fail_at(sc, lp, "task %s: cannot read parameter", t->name);
      free(pm->decl);
      free(pm->type_txt);
      free(pm->name);
      break;
    }
    t->nparams++;
    pm->type = mw__type_from_text(pm->type_txt, &pm->size);
    if (pm->type == MW_T__COUNT || pm->type == MW_T_VOID) {
      char msg[300];
      snprintf(msg, sizeof msg,
               "task %s: parameter '%s' has type '%s', which cannot be passed (use bool, an "
               "integer, float, double, a pointer or future)",
               t->name, pm->name, pm->type_txt);
      rc = fail_at(sc, lp, "%s", msg);
    }
    p = next;
  }
done:
  free(all);
  return rc;
}

/* Cuts 'local <decl>;' statements at the body's top level out of the (writable) source. */
static int take_locals(scan *sc, char *w, mw__task *t) {
  size_t i = t->body_start + 1;
  int depth = 0, cap = 0;
  while (i < t->body_end) {
    size_t j = skip_lexeme(sc, i);
    if (j != i) {
      i = j;
      continue;
    }
    char c = sc->s[i];
    if (c == '{' || c == '(' || c == '[') ++depth;
    if (c == '}' || c == ')' || c == ']') --depth;
    if (is_id((unsigned char)c) && !is_id((unsigned char)sc->s[i - 1])) {
      size_t e = i;
      while (e < t->body_end && is_id((unsigned char)sc->s[e])) ++e;
      if (e - i == 5 && !strncmp(sc->s + i, "local", 5) && isspace((unsigned char)sc->s[e])) {
        if (depth != 0)
          return fail_at(sc, i, "task %s: 'local' declarations belong at the top level of the "
                                "task body", t->name);
        size_t semi = e;
        while (semi < t->body_end && sc->s[semi] != ';') {
          size_t k = skip_lexeme(sc, semi);
          semi = k != semi ? k : semi + 1;
        }
        if (semi >= t->body_end) return fail_at(sc, i, "task %s: 'local' without ';'", t->name);
        if (t->nlocals == cap) {
          cap = cap ? cap * 2 : 4;
          mw__local *nl = realloc(t->locals, (size_t)cap * sizeof *nl);
          if (!nl) return MW_ENOMEM;
          t->locals = nl;
        }
        mw__local *lc = &t->locals[t->nlocals++];
        lc->decl = mw__strndup(sc->s + e, semi - e);
        lc->line = line_at(sc, i);
        if (!lc->decl) return MW_ENOMEM;
        for (size_t k = i; k <= semi; ++k)
          if (w[k] != '\n') w[k] = ' ';
        i = semi + 1;
        continue;
      }
      i = e;
      continue;
    }
    ++i;
  }
  return 0;
}

static int parse_task(scan *sc, char *w, size_t at, mw__task *t, size_t *end) {
  memset(t, 0, sizeof *t);
  t->decl_start = at;
  t->line = line_at(sc, at);
  size_t i = at + 4, lp = (size_t)-1;
  for (size_t k = i; k < sc->n; ++k) {
    size_t j = skip_lexeme(sc, k);
    if (j != k) {
      k = j - 1;
      continue;
    }
    if (sc->s[k] == '(') {
      lp = k;
      break;
    }
    if (sc->s[k] == ';' || sc->s[k] == '{' || sc->s[k] == '}') break;
  }
  if (lp == (size_t)-1) return fail_at(sc, at, "expected a task signature after 'task'%s", "");
  char *head = trim_dup(sc->s + i, lp - i);
  if (!head) return MW_ENOMEM;
  int rc = split_decl(head, &t->ret_txt, &t->name);
  free(head);
  if (rc) return fail_at(sc, at, "expected 'task <return type> <name>(<parameters>)'%s", "");
  uint32_t rsz = 0;
  t->ret = mw__type_from_text(t->ret_txt, &rsz);
  if (t->ret == MW_T__COUNT || t->ret == MW_T_PTR)
    return fail_at(sc, at, "task return type '%s' is not supported (void, bool, an integer, "
                           "float, double or future)", t->ret_txt);
  size_t rp = match(sc, lp);
  if (rp == (size_t)-1) return fail_at(sc, lp, "task %s: unbalanced '('", t->name);
  if ((rc = parse_params(sc, t, lp, rp))) return rc;
  size_t lb = skip_ws(sc, rp + 1);
  if (lb >= sc->n || sc->s[lb] != '{')
    return fail_at(sc, lb < sc->n ? lb : rp, "task %s: expected '{' after the signature", t->name);
  size_t rb = match(sc, lb);
  if (rb == (size_t)-1) return fail_at(sc, lb, "task %s: unbalanced '{'", t->name);
  t->body_start = lb;
  t->body_end = rb;
  t->body_line = line_at(sc, lb);
  t->decl_end = rb;
  *end = rb + 1;
  if ((rc = take_locals(sc, w, t))) return rc;

  /* host layout of the argument struct: natural alignment, declaration order */
  uint32_t off = 0, align = 1;
  t->param_types = calloc((size_t)t->nparams + 1, sizeof *t->param_types);
  t->param_names = calloc((size_t)t->nparams + 1, sizeof *t->param_names);
  if (!t->param_types || !t->param_names) return MW_ENOMEM;
  for (int k = 0; k < t->nparams; ++k) {
    mw__param *pm = &t->params[k];
    uint32_t a = pm->size ? pm->size : 1;
    off = (off + a - 1) / a * a;
    pm->offset = off;
    off += pm->size;
    if (a > align) align = a;
    t->param_types[k] = pm->type;
    t->param_names[k] = pm->name;
  }
  t->args_size = (off + align - 1) / align * align;
  if (t->args_size > MW_INBOX_ARG_BYTES)
    return fail_at(sc, at, "task %s: its parameters take more than 96 bytes", t->name);
  mw__sb sig = {0};
  mw__sb_printf(&sig, "%s %s(", t->ret_txt, t->name);
  for (int k = 0; k < t->nparams; ++k) mw__sb_printf(&sig, "%s%s", k ? ", " : "", t->params[k].decl);
  mw__sb_puts(&sig, ")");
  t->signature = mw__sb_take(&sig);
  return t->signature ? 0 : MW_ENOMEM;
}

static void task_free(mw__task *t) {
  free(t->name);
  free(t->ret_txt);
  for (int k = 0; k < t->nparams; ++k) {
    free(t->params[k].name);
    free(t->params[k].decl);
    free(t->params[k].type_txt);
  }
  free(t->params);
  free(t->param_types);
  free(t->param_names);
  free(t->signature);
  for (int k = 0; k < t->nlocals; ++k) free(t->locals[k].decl);
  free(t->locals);
}

void mw__parsed_free(mw__parsed *p) {
  if (!p) return;
  for (int i = 0; i < p->ntasks; ++i) task_free(&p->tasks[i]);
  free(p->tasks);
  free(p->file);
  free(p->src);
  memset(p, 0, sizeof *p);
}

int mw__parse(const char *src, const char *file, int first_line, mw__parsed *out, char *err,
              size_t errlen) {
  memset(out, 0, sizeof *out);
  if (first_line < 1) first_line = 1;
  scan sc = {src, strlen(src), file ? file : "<string>", err, errlen, first_line};
  out->first_line = first_line;
  out->file = mw__strdup(sc.file);
  out->src = mw__strdup(src);
  if (!out->file || !out->src) {
    mw__parsed_free(out);
    return MW_ENOMEM;
  }
  int cap = 0, depth = 0, rc = 0;
  size_t i = 0;
  while (i < sc.n && !rc) {
    size_t j = skip_lexeme(&sc, i);
    if (j != i) {
      i = j;
      continue;
    }
    char c = src[i];
    if (c == '#' && at_line_start(&sc, i)) {
      i = skip_pp(&sc, i);
      continue;
    }
    if (c == '{') ++depth;
    if (c == '}') --depth;
    if (is_id((unsigned char)c) && (i == 0 || !is_id((unsigned char)src[i - 1]))) {
      size_t e = i;
      while (e < sc.n && is_id((unsigned char)src[e])) ++e;
      if (depth == 0 && e - i == 4 && !strncmp(src + i, "task", 4) &&
          (e < sc.n && isspace((unsigned char)src[e]))) {
        if (out->ntasks == cap) {
          cap = cap ? cap * 2 : 8;
          mw__task *nt = realloc(out->tasks, (size_t)cap * sizeof *nt);
          if (!nt) {
            rc = MW_ENOMEM;
            break;
          }
          out->tasks = nt;
        }
        size_t end = e;
        rc = parse_task(&sc, out->src, i, &out->tasks[out->ntasks], &end);
        out->ntasks++;
        for (int k = 0; !rc && k < out->ntasks - 1; ++k)
          if (!strcmp(out->tasks[k].name, out->tasks[out->ntasks - 1].name))
            rc = fail_at(&sc, i, "task '%s' is declared twice", out->tasks[k].name);
        i = end;
        continue;
      }
      i = e;
      continue;
    }
    ++i;
  }
  if (!rc && out->ntasks == 0)
    rc = fail_at(&sc, 0, "no task declared (write 'task <type> <name>(<parameters>) { ... }')%s", "");
  if (rc) mw__parsed_free(out);
  return rc;
}
