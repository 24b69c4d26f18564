/* parse.c - finds task declarations in a program's source (typed signatures, bodies, locals) and
 * checks the task-language rules of their bodies. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "program.h"
#include "protocol_host.h"
#include "util.h"

/* Where the last line_at() stopped counting, so that the next one goes on from there. */
typedef struct line_memo {
  size_t pos;
  int line;
} line_memo;

typedef struct scan {
  const char *s;
  size_t n;
  const char *file;
  char *err;
  size_t errlen;
  int first_line;
  line_memo *memo;
} scan;

/* The line of byte pos. A parse asks for positions mostly in increasing order (each task, then
 * each body), so the count goes on from the last answer and a whole parse reads the source
 * about once; a position before it counts again from the top. */
static int line_at(const scan *sc, size_t pos) {
  line_memo *m = sc->memo;
  if (pos > sc->n) pos = sc->n;
  if (pos < m->pos) {
    m->pos = 0;
    m->line = sc->first_line;
  }
  for (size_t i = m->pos; i < pos; ++i)
    if (sc->s[i] == '\n') ++m->line;
  m->pos = pos;
  return m->line;
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
      char msg[256]; /* as much as fail_at keeps */
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
  /* 'task block <return type> <name>(...)': a block task (protocol.h, Block tasks) */
  if (!strncmp(t->ret_txt, "block", 5) && isspace((unsigned char)t->ret_txt[5])) {
    char *rest = trim_dup(t->ret_txt + 6, strlen(t->ret_txt + 6));
    if (!rest) return MW_ENOMEM;
    free(t->ret_txt);
    t->ret_txt = rest;
    t->block = 1;
    if (strcmp(t->ret_txt, "void")) {
      char msg[200];
      snprintf(msg, sizeof msg, "task %.60s: a block task returns nothing: declare it 'task block void %.60s(...)'",
               t->name, t->name);
      return fail_at(sc, at, "%s", msg);
    }
  }
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

/* ---- the task-language rules ---------------------------------------------------------------
 * A task body becomes a resumable state machine (generate.c): every await is a resume point,
 * a 'case' of a switch around the whole body, numbered by the await's line. What that cannot
 * carry is refused here, at the user's line, before the C++ compiler sees the body: an await
 * inside a switch (its resume point would belong to the user's switch), two awaits on one
 * line, an await inside an expression or a condition, an ordinary variable whose scope spans
 * an await (its value is gone when the body comes back in), a spawn of a name that is no task
 * of the program or with the wrong number of arguments, and the task-body calls in helper
 * code. The body is read as tokens and statements; where it cannot be read the structural
 * rules are left to the compiler. */

enum { TK_ID, TK_NUM, TK_STR, TK_PUNCT };

typedef struct tok {
  size_t s, e; /* [s, e) in the source */
  int kind, line;
  int match; /* for ( [ { and ) ] }: the index of the other one; else -1 */
} tok;

typedef struct toks {
  tok *v;
  int n, cap;
  int unbalanced;
} toks;

static int tk_is(const scan *sc, const tok *t, const char *w) {
  size_t n = strlen(w);
  return t->e - t->s == n && !strncmp(sc->s + t->s, w, n);
}

/* Tokens of sc->s[from, to), lines counted from the line of from; preprocessor lines, comments
 * and blanks are left out. Returns 0 or MW_ENOMEM. */
static int tokenize(const scan *sc, size_t from, size_t to, toks *out) {
  static const char *const puncts[] = {"<<=", ">>=", "...", "::", "->", "++", "--", "<<", ">>",
                                       "<=",  ">=",  "==",  "!=", "&&", "||", "+=", "-=", "*=",
                                       "/=",  "%=",  "&=",  "|=", "^=", ".*", "->*"};
  const char *s = sc->s;
  int line = line_at(sc, from);
  int *stack = NULL, depth = 0, scap = 0;
  size_t i = from;
  memset(out, 0, sizeof *out);
  while (i < to) {
    char c = s[i];
    if (c == '\n') {
      ++line;
      ++i;
      continue;
    }
    if (isspace((unsigned char)c)) {
      ++i;
      continue;
    }
    size_t j = skip_lexeme(sc, i);
    int kind = -1;
    if (j != i && c == '/') { /* a comment */
      for (size_t k = i; k < j && k < to; ++k) line += s[k] == '\n';
      i = j;
      continue;
    }
    if (c == '#' && at_line_start(sc, i)) {
      size_t e = skip_pp(sc, i);
      for (size_t k = i; k < e && k < to; ++k) line += s[k] == '\n';
      i = e;
      continue;
    }
    if (j != i) {
      kind = TK_STR;
    } else if (is_id((unsigned char)c)) {
      kind = isdigit((unsigned char)c) ? TK_NUM : TK_ID;
      j = i;
      while (j < to && (is_id((unsigned char)s[j]) || (kind == TK_NUM && s[j] == '.') ||
                        (kind == TK_NUM && (s[j] == '+' || s[j] == '-') && strchr("eEpP", s[j - 1]))))
        ++j;
    } else if (c == '.' && i + 1 < to && isdigit((unsigned char)s[i + 1])) {
      kind = TK_NUM;
      j = i + 1;
      while (j < to && (is_id((unsigned char)s[j]) || s[j] == '.')) ++j;
    } else {
      kind = TK_PUNCT;
      j = i + 1;
      for (size_t p = 0; p < sizeof puncts / sizeof puncts[0]; ++p) {
        size_t n = strlen(puncts[p]);
        if (i + n <= to && !strncmp(s + i, puncts[p], n) && i + n > j) j = i + n;
      }
    }
    if (j > to) j = to;
    if (out->n == out->cap) {
      int cap = out->cap ? out->cap * 2 : 256;
      tok *nv = realloc(out->v, (size_t)cap * sizeof *nv);
      if (!nv) goto oom;
      out->v = nv;
      out->cap = cap;
    }
    tok *t = &out->v[out->n];
    t->s = i;
    t->e = j;
    t->kind = kind;
    t->line = line;
    t->match = -1;
    if (kind == TK_STR)
      for (size_t k = i; k < j; ++k) line += s[k] == '\n';
    if (kind == TK_PUNCT && j == i + 1 && strchr("([{", c)) {
      if (depth == scap) {
        scap = scap ? scap * 2 : 64;
        int *ns = realloc(stack, (size_t)scap * sizeof *ns);
        if (!ns) goto oom;
        stack = ns;
      }
      stack[depth++] = out->n;
    } else if (kind == TK_PUNCT && j == i + 1 && strchr(")]}", c)) {
      char open = c == ')' ? '(' : c == ']' ? '[' : '{';
      if (depth == 0 || s[out->v[stack[depth - 1]].s] != open) {
        out->unbalanced = 1;
      } else {
        --depth;
        t->match = stack[depth];
        out->v[stack[depth]].match = out->n;
      }
    }
    out->n++;
    i = j;
  }
  if (depth) out->unbalanced = 1;
  free(stack);
  return 0;
oom:
  free(stack);
  free(out->v);
  memset(out, 0, sizeof *out);
  return MW_ENOMEM;
}

static int fail_line(scan *sc, int line, const char *msg) {
  snprintf(sc->err, sc->errlen, "%s:%d: %s", sc->file, line, msg);
  return MW_ECOMPILE;
}

static const char *const awaits[] = {"await", "await_all", "try_await"};
static const char *const body_calls[] = {"spawn",     "spawn_bulk", "await",        "await_all",
                                         "try_await", "value",      "failed",       "cancelled",
                                         "fail_code", "fail_message", "cancel",     "release",
                                         "fail"};

static int word_in(const scan *sc, const tok *t, const char *const *list, size_t n) {
  if (t->kind != TK_ID) return 0;
  for (size_t k = 0; k < n; ++k)
    if (tk_is(sc, t, list[k])) return 1;
  return 0;
}
#define WORD_IN(sc, t, list) word_in(sc, t, list, sizeof list / sizeof list[0])

/* a call of one of list: the word, then '(' (not a member or a qualified name) */
static int is_call(const scan *sc, const toks *T, int i, const char *const *list, size_t n) {
  if (i + 1 >= T->n || !word_in(sc, &T->v[i], list, n) || !tk_is(sc, &T->v[i + 1], "("))
    return 0;
  if (i > 0 && (tk_is(sc, &T->v[i - 1], ".") || tk_is(sc, &T->v[i - 1], "->") ||
                tk_is(sc, &T->v[i - 1], "::")))
    return 0;
  return 1;
}

typedef struct decl {
  int at;        /* first token of the declaration */
  int name;      /* the declared name */
  int scope_end; /* the token that ends its scope */
} decl;

typedef struct site {
  int at;     /* the await's first token */
  int sw;     /* the 'switch' token of the innermost switch around it, or -1 */
} site;

typedef struct walk {
  scan *sc;
  const toks *T;
  int bad; /* the body could not be read as statements */
  int depth;
  int sw;  /* innermost switch, or -1 */
  int loops; /* loops around the statement being read */
  int stray; /* a 'break', 'case' or 'default' outside any loop or switch (the body's own
              * switch would take it), or -1 */
  decl *decls;
  int ndecls, capdecls;
  site *sites;
  int nsites, capsites;
  int oom;
} walk;

static const char *const not_types[] = {
    "return", "if",       "else",     "for",     "while",     "do",       "switch",   "case",
    "default", "break",   "continue", "goto",    "sizeof",    "alignof",  "new",      "delete",
    "throw",  "typedef",  "using",    "namespace", "template", "typename", "this",    "true",
    "false",  "nullptr",  "operator", "static_assert", "asm", "__asm__",  "decltype", "try",
    "catch",  "co_return", "co_await", "co_yield"};
static const char *const builtin_types[] = {"void",  "bool",   "char",     "short",    "int",
                                            "long",  "float",  "double",   "signed",   "unsigned",
                                            "auto",  "wchar_t", "char16_t", "char32_t", "__int128"};
static const char *const qualifiers[] = {"const", "volatile", "constexpr", "register",
                                         "__restrict__", "restrict", "inline", "__volatile__"};
static const char *const persistent[] = {"static", "extern", "__shared__", "__constant__",
                                         "thread_local", "__device__", "__managed__"};

/* Whether tokens [i, end) begin a variable declaration; *name is its first declarator, *lasting
 * whether the variable outlives the body (static, __shared__ ...). A guess from the tokens: a
 * type (built-in words, or a name, qualified or not) then a declarator (a name, after * or &)
 * followed by = ; , [ ( { or :. */
static int is_decl(const scan *sc, const toks *T, int i, int end, int *name, int *lasting) {
  const tok *v = T->v;
  *lasting = 0;
  int j = i;
  for (;;) {
    if (j >= end) return 0;
    if (WORD_IN(sc, &v[j], qualifiers)) {
      ++j;
    } else if (WORD_IN(sc, &v[j], persistent)) {
      *lasting = 1;
      ++j;
    } else {
      break;
    }
  }
  if (j >= end || v[j].kind != TK_ID) return 0;
  if (tk_is(sc, &v[j], "struct") || tk_is(sc, &v[j], "class") || tk_is(sc, &v[j], "union") ||
      tk_is(sc, &v[j], "enum")) {
    ++j;
    if (j < end && v[j].kind == TK_ID) ++j;
    if (j < end && tk_is(sc, &v[j], "{") && v[j].match > j && v[j].match < end) j = v[j].match + 1;
  } else if (WORD_IN(sc, &v[j], builtin_types)) {
    while (j < end && (WORD_IN(sc, &v[j], builtin_types) || WORD_IN(sc, &v[j], qualifiers))) ++j;
  } else if (WORD_IN(sc, &v[j], not_types) || WORD_IN(sc, &v[j], body_calls)) {
    return 0;
  } else {
    if (tk_is(sc, &v[j], "::")) ++j;
    if (j >= end || v[j].kind != TK_ID) return 0;
    ++j;
    while (j + 1 < end && tk_is(sc, &v[j], "::") && v[j + 1].kind == TK_ID) j += 2;
  }
  while (j < end && (tk_is(sc, &v[j], "*") || tk_is(sc, &v[j], "&") || tk_is(sc, &v[j], "&&") ||
                     WORD_IN(sc, &v[j], qualifiers)))
    ++j;
  if (j >= end || v[j].kind != TK_ID || WORD_IN(sc, &v[j], not_types)) return 0;
  *name = j;
  if (j + 1 >= end) return tk_is(sc, &v[end], ";") || tk_is(sc, &v[end], ")");
  const tok *f = &v[j + 1];
  return tk_is(sc, f, "=") || tk_is(sc, f, ";") || tk_is(sc, f, ",") || tk_is(sc, f, "[") ||
         tk_is(sc, f, "(") || tk_is(sc, f, "{") || tk_is(sc, f, ":");
}

static void add_decl(walk *w, int at, int name, int scope_end) {
  if (w->ndecls == w->capdecls) {
    int cap = w->capdecls ? w->capdecls * 2 : 16;
    decl *nd = realloc(w->decls, (size_t)cap * sizeof *nd);
    if (!nd) {
      w->oom = 1;
      return;
    }
    w->decls = nd;
    w->capdecls = cap;
  }
  w->decls[w->ndecls++] = (decl){at, name, scope_end};
}

/* the end (exclusive) of the bracketed group opening at i, or -1 */
static int after_group(walk *w, int i) {
  if (i >= w->T->n || w->T->v[i].match < i) {
    w->bad = 1;
    return -1;
  }
  return w->T->v[i].match + 1;
}

/* index of the first ';' at this level from i (groups skipped), before end; -1 if none */
static int to_semi(walk *w, int i, int end) {
  while (i < end) {
    const tok *t = &w->T->v[i];
    if (t->kind == TK_PUNCT && (tk_is(w->sc, t, "(") || tk_is(w->sc, t, "[") ||
                                tk_is(w->sc, t, "{"))) {
      i = after_group(w, i);
      if (i < 0) return -1;
      continue;
    }
    if (tk_is(w->sc, t, ";")) return i;
    if (tk_is(w->sc, t, "}")) break;
    ++i;
  }
  w->bad = 1;
  return -1;
}

static int statement(walk *w, int i, int end, int scope_end);

/* a declaration in a control header (if, while, switch, for) at i, its scope the statement */
static void header_decl(walk *w, int lp, int stmt_end) {
  int name, lasting;
  int rp = w->T->v[lp].match;
  int e = rp;
  if (tk_is(w->sc, &w->T->v[lp - 1], "for")) { /* the init part */
    for (int k = lp + 1; k < rp; ++k) {
      if (tk_is(w->sc, &w->T->v[k], "(") || tk_is(w->sc, &w->T->v[k], "[") ||
          tk_is(w->sc, &w->T->v[k], "{")) {
        if (w->T->v[k].match > k) k = w->T->v[k].match;
        continue;
      }
      if (tk_is(w->sc, &w->T->v[k], ";")) {
        e = k;
        break;
      }
    }
  }
  if (is_decl(w->sc, w->T, lp + 1, e, &name, &lasting) && !lasting)
    add_decl(w, lp + 1, name, stmt_end);
}

/* the statements of the block whose '{' is at i; returns the index after its '}' */
static int block(walk *w, int i) {
  int close = w->T->v[i].match;
  if (close <= i) {
    w->bad = 1;
    return -1;
  }
  int k = i + 1;
  while (k < close && !w->bad) k = statement(w, k, close, close);
  return close + 1;
}

/* Reads the statement at i (before end); declarations it makes in the enclosing block live
 * until scope_end (-1: a statement with no block of its own, a scope of its own). Returns the
 * index after it, or -1 (w->bad set) where the tokens are not understood. */
static int statement(walk *w, int i, int end, int scope_end) {
  const scan *sc = w->sc;
  const tok *v = w->T->v;
  if (w->bad || i >= end) {
    w->bad = 1;
    return -1;
  }
  if (++w->depth > 2000) {
    w->bad = 1;
    return -1;
  }
  int r = -1;
  const tok *t = &v[i];
  if (tk_is(sc, t, "{")) {
    r = block(w, i);
  } else if (tk_is(sc, t, ";")) {
    r = i + 1;
  } else if (tk_is(sc, t, "if") || tk_is(sc, t, "while") || tk_is(sc, t, "switch") ||
             tk_is(sc, t, "for")) {
    int sw = w->sw;
    int lp = i + 1;
    if (lp < end && tk_is(sc, &v[lp], "constexpr") && tk_is(sc, t, "if")) ++lp;
    if (lp >= end || !tk_is(sc, &v[lp], "(")) {
      w->bad = 1;
    } else {
      int body = after_group(w, lp);
      int loop = tk_is(sc, t, "while") || tk_is(sc, t, "for");
      if (tk_is(sc, t, "switch")) w->sw = i;
      w->loops += loop;
      r = body < 0 ? -1 : statement(w, body, end, -1);
      w->loops -= loop;
      w->sw = sw;
      if (r > 0 && tk_is(sc, t, "if") && r < end && tk_is(sc, &v[r], "else"))
        r = statement(w, r + 1, end, -1);
      if (r > 0) header_decl(w, lp, r);
    }
  } else if (tk_is(sc, t, "do")) {
    w->loops++;
    r = statement(w, i + 1, end, -1);
    w->loops--;
    if (r > 0 && r + 1 < end && tk_is(sc, &v[r], "while") && tk_is(sc, &v[r + 1], "(")) {
      r = after_group(w, r + 1);
      if (r > 0 && r < end && tk_is(sc, &v[r], ";")) ++r;
      else w->bad = 1;
    } else {
      w->bad = 1;
    }
  } else if (tk_is(sc, t, "case") || (tk_is(sc, t, "default") && i + 1 < end &&
                                      tk_is(sc, &v[i + 1], ":"))) {
    if (w->sw < 0 && w->stray < 0) w->stray = i;
    int k = i + 1;
    while (k < end && !tk_is(sc, &v[k], ":")) {
      if (tk_is(sc, &v[k], ";") || tk_is(sc, &v[k], "{") || tk_is(sc, &v[k], "}")) break;
      ++k;
    }
    if (k < end && tk_is(sc, &v[k], ":")) r = k + 1;
    else w->bad = 1;
  } else if (t->kind == TK_ID && i + 1 < end && tk_is(sc, &v[i + 1], ":") &&
             !WORD_IN(sc, t, not_types)) {
    r = i + 2; /* a label */
  } else if (is_call(sc, w->T, i, awaits, sizeof awaits / sizeof awaits[0])) {
    int after = after_group(w, i + 1);
    if (after > 0 && after < end && tk_is(sc, &v[after], ";")) {
      if (w->nsites == w->capsites) {
        int cap = w->capsites ? w->capsites * 2 : 16;
        site *ns = realloc(w->sites, (size_t)cap * sizeof *ns);
        if (!ns) {
          w->oom = 1;
          w->bad = 1;
          --w->depth;
          return -1;
        }
        w->sites = ns;
        w->capsites = cap;
      }
      w->sites[w->nsites++] = (site){i, w->sw};
      r = after + 1;
    } else if (after > 0) { /* part of an expression: found by the caller as no statement */
      r = to_semi(w, after, end);
      if (r >= 0) ++r;
    }
  } else if (tk_is(sc, t, "else") || tk_is(sc, t, "}") || tk_is(sc, t, ")") ||
             tk_is(sc, t, "]")) {
    w->bad = 1;
  } else {
    if (tk_is(sc, t, "break") && w->loops == 0 && w->sw < 0 && w->stray < 0) w->stray = i;
    int semi = to_semi(w, i, end);
    if (semi >= 0) {
      int name, lasting;
      if (scope_end >= 0 && is_decl(sc, w->T, i, semi, &name, &lasting) && !lasting)
        add_decl(w, i, name, scope_end);
      r = semi + 1;
    }
  }
  --w->depth;
  if (r < 0) w->bad = 1;
  return r;
}

/* "name" of token t, for messages */
static void tok_text(const scan *sc, const tok *t, char *buf, size_t n) {
  size_t len = t->e - t->s;
  if (len >= n) len = n - 1;
  memcpy(buf, sc->s + t->s, len);
  buf[len] = 0;
}

static const mw__task *task_named(const mw__parsed *p, const scan *sc, const tok *t) {
  for (int k = 0; k < p->ntasks; ++k) {
    size_t n = strlen(p->tasks[k].name);
    if (t->e - t->s == n && !strncmp(sc->s + t->s, p->tasks[k].name, n)) return &p->tasks[k];
  }
  return NULL;
}

/* spawn(task, args...) and spawn_bulk(task, n, args...): a task of this program, its arity */
static int check_spawn(scan *sc, const mw__parsed *p, const int *suspends, const mw__task *in,
                       const toks *T, int i) {
  static const char *const spawns[] = {"spawn", "spawn_bulk"};
  char msg[600], name[64], callee[64];
  if (!is_call(sc, T, i, spawns, 2) || T->v[i + 1].match < 0) return 0;
  int bulk = tk_is(sc, &T->v[i], "spawn_bulk");
  int rp = T->v[i + 1].match, nargs = 0, first_end = rp;
  for (int k = i + 2; k < rp; ++k) {
    if (T->v[k].match > k) {
      k = T->v[k].match;
      continue;
    }
    if (tk_is(sc, &T->v[k], ",")) {
      if (!nargs) first_end = k;
      ++nargs;
    }
  }
  if (rp > i + 2) ++nargs;
  tok_text(sc, &T->v[i], name, sizeof name);
  if (first_end != i + 3 || T->v[i + 2].kind != TK_ID) {
    snprintf(msg, sizeof msg, "task %s: %s(...) takes the name of a task first: %s(task, %sarguments)",
             in->name, name, name, bulk ? "n, " : "");
    return fail_line(sc, T->v[i].line, msg);
  }
  const mw__task *callee_t = task_named(p, sc, &T->v[i + 2]);
  tok_text(sc, &T->v[i + 2], callee, sizeof callee);
  if (!callee_t) {
    mw__sb names = {0};
    for (int k = 0; k < p->ntasks; ++k)
      mw__sb_printf(&names, "%s%s", k ? ", " : "", p->tasks[k].name);
    char *list = mw__sb_take(&names);
    snprintf(msg, sizeof msg, "task %s: %s of '%s', which is not a task of this program (its tasks: %s)",
             in->name, name, callee, list ? list : "?");
    free(list);
    return fail_line(sc, T->v[i].line, msg);
  }
  int at = suspends[callee_t - p->tasks];
  if (bulk && at) {
    snprintf(msg, sizeof msg, "task %s: spawn_bulk of task %s, which spawns or awaits (line %d): "
                              "bulk instances may not spawn or await (spawn it with spawn "
                              "instead)",
             in->name, callee, at);
    return fail_line(sc, T->v[i].line, msg);
  }
  int given = nargs - 1 - bulk;
  if (given != callee_t->nparams) {
    if (bulk && nargs < 2)
      snprintf(msg, sizeof msg, "task %s: spawn_bulk(%s, ...) needs the number of instances "
                                "after the task: spawn_bulk(%s, n%s)",
               in->name, callee, callee, callee_t->nparams ? ", arguments..." : "");
    else
      snprintf(msg, sizeof msg, "task %s: %s(%s, ...) passes %d argument%s, task %s takes %d: %s",
               in->name, name, callee, given, given == 1 ? "" : "s", callee, callee_t->nparams,
               callee_t->signature);
    return fail_line(sc, T->v[i].line, msg);
  }
  return 0;
}

int mw__next_declarator(const char *decl, const char **at, mw__declarator *out) {
  const char *seg = *at;
  if (!seg) return 0;
  const char *end = seg;
  int depth = 0, parens = 0;
  while (*end && !(*end == ',' && depth == 0)) {
    if (*end == '(' || *end == '[' || *end == '{') ++depth;
    if (*end == ')' || *end == ']' || *end == '}') --depth;
    ++end;
  }
  const char *stop = seg;
  while (stop < end && *stop != '=' && *stop != '[') parens |= *stop++ == '(';
  const char *ne = stop;
  while (ne > seg && isspace((unsigned char)ne[-1])) --ne;
  const char *nb = ne;
  while (nb > seg && is_id((unsigned char)nb[-1])) --nb;
  out->name = nb;
  out->len = (size_t)(ne - nb);
  out->array = stop < end && *stop == '[';
  out->stars = 0;
  for (const char *q = seg; q < nb; ++q) out->stars += *q == '*';
  out->plain = !out->array && !parens && out->len > 0 && !isdigit((unsigned char)nb[0]);
  out->type_end = seg == decl ? nb : NULL;
  *at = *end ? end + 1 : NULL;
  return 1;
}

/* The type, as written, of parameter or 'local' name of task t, in buf; NULL if it is neither,
 * or an array. */
static const char *type_of_name(const mw__task *t, const char *name, char *buf, size_t n) {
  for (int k = 0; k < t->nparams; ++k)
    if (!strcmp(t->params[k].name, name)) {
      snprintf(buf, n, "%s", t->params[k].type_txt);
      return buf;
    }
  for (int k = 0; k < t->nlocals; ++k) {
    const char *d = t->locals[k].decl, *at = d;
    char type[128] = "";
    mw__declarator dc;
    while (mw__next_declarator(d, &at, &dc)) { /* the declarators, "future a, b" */
      if (dc.type_end) { /* the type: what precedes the first name, without its stars */
        size_t tl = 0;
        for (const char *q = d; q < dc.type_end && tl + 1 < sizeof type; ++q)
          if (*q != '*') type[tl++] = *q;
        type[tl] = 0;
      }
      if (dc.len == strlen(name) && !strncmp(dc.name, name, dc.len)) {
        if (dc.array) return NULL;
        char *tt = trim_dup(type, strlen(type));
        snprintf(buf, n, "%s%s", tt ? tt : type, dc.stars ? " *" : "");
        free(tt);
        return buf;
      }
    }
  }
  return NULL;
}

/* await(a, ...) of a parameter or local that is no future (an integer would be taken for a
 * future's handle) */
static int check_await_args(scan *sc, const mw__task *t, const toks *T, int i) {
  char msg[500], name[64], what[64], type[160];
  int rp = T->v[i + 1].match;
  if (rp < 0) return 0;
  tok_text(sc, &T->v[i], what, sizeof what);
  for (int k = i + 2; k < rp;) {
    int e = k;
    while (e < rp && !tk_is(sc, &T->v[e], ",")) e = T->v[e].match > e ? T->v[e].match + 1 : e + 1;
    if (e == k + 1 && (T->v[k].kind == TK_ID || T->v[k].kind == TK_NUM)) {
      tok_text(sc, &T->v[k], name, sizeof name);
      const char *ty = T->v[k].kind == TK_NUM ? "a number" : type_of_name(t, name, type, sizeof type);
      uint32_t size;
      if (ty && (T->v[k].kind == TK_NUM || strchr(ty, '*') ||
                 mw__type_from_text(ty, &size) != MW_T_FUTURE)) {
        if (T->v[k].kind == TK_NUM)
          snprintf(msg, sizeof msg, "task %s: %s of the number %s, which is not a future (%s "
                                    "takes futures: what spawn returns, future parameters and "
                                    "locals)",
                   t->name, what, name, what);
        else
          snprintf(msg, sizeof msg, "task %s: %s of '%s', which is declared '%s', not a future "
                                    "(%s takes futures: what spawn returns, future parameters "
                                    "and locals)",
                   t->name, what, name, ty, what);
        return fail_line(sc, T->v[k].line, msg);
      }
    }
    k = e + 1;
  }
  return 0;
}

/* Whether tokens i.. are a spawn that the next statement awaits: 'f = spawn(t, ...); await(f);'
 * or 'f = spawn_bulk(t, n, ...); await(f);' (or try_await), f a plain name, the assignment a
 * statement of its own (after ';', '{' or '}': not the body of an if or a loop without braces).
 * Nobody but the task can hold f before that await, so the child may run at once, as a call
 * (work-first). */
static int spawn_awaited_next(const scan *sc, const toks *T, int i) {
  static const char *const spawns[] = {"spawn", "spawn_bulk"}, *const waits[] = {"await", "try_await"};
  if (i < 2 || !is_call(sc, T, i, spawns, 2) || T->v[i + 1].match < 0) return 0;
  const tok *f = &T->v[i - 2];
  if (f->kind != TK_ID || !tk_is(sc, &T->v[i - 1], "=")) return 0;
  if (i >= 3 && !tk_is(sc, &T->v[i - 3], ";") && !tk_is(sc, &T->v[i - 3], "{") &&
      !tk_is(sc, &T->v[i - 3], "}"))
    return 0;
  int k = T->v[i + 1].match + 1; /* after the spawn's ')' */
  if (k + 5 >= T->n || !tk_is(sc, &T->v[k], ";") || !is_call(sc, T, k + 1, waits, 2)) return 0;
  const tok *g = &T->v[k + 3];
  return g->kind == TK_ID && g->e - g->s == f->e - f->s && !strncmp(sc->s + g->s, sc->s + f->s, f->e - f->s) &&
         tk_is(sc, &T->v[k + 4], ")") && tk_is(sc, &T->v[k + 5], ";");
}

/* The rules for the body of task t (its text in sc->s, the locals blanked); notes its spawns
 * that the next statement awaits (mw__task.now). */
static int check_body(scan *sc, const mw__parsed *p, const int *suspends, mw__task *t) {
  toks T;
  char msg[600], name[64];
  int rc = tokenize(sc, t->body_start, t->body_end + 1, &T);
  if (rc) return rc;
  /* a block task (protocol.h, Block tasks) runs on every warp of a CTA at once: in this first
   * version it spawns, awaits and keeps nothing (no 'local'), and fails by returning early */
  if (t->block && t->nlocals) {
    snprintf(msg, sizeof msg, "task %s: a block task has no 'local' variables (its body never "
                              "suspends: declare them as ordinary variables)", t->name);
    rc = fail_line(sc, t->locals[0].line, msg);
  }
  for (int i = 0; i < T.n && !rc && t->block; ++i) {
    if (!WORD_IN(sc, &T.v[i], body_calls) || i + 1 >= T.n || !tk_is(sc, &T.v[i + 1], "(")) continue;
    tok_text(sc, &T.v[i], name, sizeof name);
    snprintf(msg, sizeof msg, "task %s: a block task cannot call %s(): it runs on every warp of a "
                              "worker CTA at once and spawns, awaits and fails nothing (yet)", t->name, name);
    rc = fail_line(sc, T.v[i].line, msg);
  }
  for (int i = 0; i < T.n && !rc; ++i) rc = check_spawn(sc, p, suspends, t, &T, i);
  for (int i = 0; i < T.n && !rc; ++i) {
    const mw__task *callee = spawn_awaited_next(sc, &T, i) ? task_named(p, sc, &T.v[i + 2]) : NULL;
    if (!callee) continue;
    mw__now_site *q = realloc(t->now, (size_t)(t->nnow + 1) * sizeof *q);
    if (!q) {
      rc = MW_ENOMEM;
      break;
    }
    t->now = q;
    const int k = T.v[i + 1].match + 1; /* the first ';' (spawn_awaited_next) */
    q[t->nnow++] = (mw__now_site){T.v[i].s, T.v[i - 2].s, T.v[i + 3].s, T.v[k - 1].s, T.v[k].e, T.v[k + 5].e,
                                  (int)(callee - p->tasks)};
  }
  /* two awaits on one line: their resume points would be one */
  int last_line = -1;
  for (int i = 0; i < T.n && !rc; ++i) {
    if (!is_call(sc, &T, i, awaits, sizeof awaits / sizeof awaits[0])) continue;
    if ((rc = check_await_args(sc, t, &T, i))) break;
    if (T.v[i].line == last_line) {
      tok_text(sc, &T.v[i], name, sizeof name);
      snprintf(msg, sizeof msg, "task %s: two awaits on line %d: a task resumes at the line of "
                                "its await, so each await needs a line of its own",
               t->name, T.v[i].line);
      rc = fail_line(sc, T.v[i].line, msg);
    }
    last_line = T.v[i].line;
  }
  walk w = {sc, &T, 0, 0, -1, 0, -1, NULL, 0, 0, NULL, 0, 0, 0};
  if (!rc && !T.unbalanced && T.n >= 2) block(&w, 0);
  if (w.oom) rc = MW_ENOMEM;
  if (!rc && !w.bad && !T.unbalanced && w.stray >= 0) {
    tok_text(sc, &T.v[w.stray], name, sizeof name);
    snprintf(msg, sizeof msg, "task %s: '%s' outside any %s", t->name, name,
             tk_is(sc, &T.v[w.stray], "break") ? "loop or switch" : "switch");
    rc = fail_line(sc, T.v[w.stray].line, msg);
  }
  if (!rc && !w.bad && !T.unbalanced) {
    /* an await that is no statement of its own */
    int s = 0;
    for (int i = 0; i < T.n && !rc; ++i) {
      if (!is_call(sc, &T, i, awaits, sizeof awaits / sizeof awaits[0])) continue;
      while (s < w.nsites && w.sites[s].at < i) ++s;
      if (s < w.nsites && w.sites[s].at == i) continue;
      tok_text(sc, &T.v[i], name, sizeof name);
      snprintf(msg, sizeof msg, "task %s: %s(...) is a statement of its own ('%s(f);'), not part "
                                "of an expression or a condition: read the result with value(f) "
                                "after it",
               t->name, name, name);
      rc = fail_line(sc, T.v[i].line, msg);
    }
    for (int k = 0; k < w.nsites && !rc; ++k) {
      const site *a = &w.sites[k];
      if (a->sw >= 0) {
        tok_text(sc, &T.v[a->at], name, sizeof name);
        snprintf(msg, sizeof msg, "task %s: an %s inside a switch (the switch on line %d) is not "
                                  "allowed: the await must not be inside a switch statement; "
                                  "write the switch as if / else if",
                 t->name, name, T.v[a->sw].line);
        rc = fail_line(sc, T.v[a->at].line, msg);
        break;
      }
      for (int d = 0; d < w.ndecls && !rc; ++d) {
        const decl *dc = &w.decls[d];
        if (dc->at < a->at && a->at < dc->scope_end) {
          char var[64];
          tok_text(sc, &T.v[dc->name], var, sizeof var);
          snprintf(msg, sizeof msg, "task %s: '%s' is declared before the await on line %d and "
                                    "would not keep its value across it: only 'local' variables "
                                    "(declared at the top of the task body) live across an "
                                    "await; make it a 'local', or declare it in a block that "
                                    "ends before the await",
                   t->name, var, T.v[a->at].line);
          rc = fail_line(sc, T.v[dc->at].line, msg);
        }
      }
    }
  }
  free(w.decls);
  free(w.sites);
  free(T.v);
  return rc;
}

/* The line of the first spawn or await in the body of t, or 0. */
static int suspend_line(const scan *sc, const mw__task *t, int *line) {
  static const char *const calls[] = {"spawn", "spawn_bulk", "await", "await_all", "try_await"};
  toks T;
  *line = 0;
  int rc = tokenize(sc, t->body_start, t->body_end + 1, &T);
  for (int i = 0; !rc && i < T.n && !*line; ++i)
    if (is_call(sc, &T, i, calls, sizeof calls / sizeof calls[0])) *line = T.v[i].line;
  free(T.v);
  return rc;
}

/* Helper code (outside every task) has no task to spawn, await or read futures for. */
static int check_helpers(scan *sc, const mw__parsed *p) {
  toks T;
  char msg[400], name[64];
  int rc = tokenize(sc, 0, sc->n, &T);
  if (rc) return rc;
  int k = 0;
  for (int i = 0; i < T.n && !rc; ++i) {
    while (k < p->ntasks && p->tasks[k].decl_end < T.v[i].s) ++k;
    if (k < p->ntasks && T.v[i].s >= p->tasks[k].decl_start) continue;
    if (!is_call(sc, &T, i, body_calls, sizeof body_calls / sizeof body_calls[0])) continue;
    if (i > 0 && T.v[i - 1].kind == TK_ID && !WORD_IN(sc, &T.v[i - 1], not_types))
      continue; /* a declaration of a function of that name */
    tok_text(sc, &T.v[i], name, sizeof name);
    snprintf(msg, sizeof msg, "%s(...) can only be used in a task body, not in helper code "
                              "(pass what it needs to the helper instead)", name);
    rc = fail_line(sc, T.v[i].line, msg);
  }
  free(T.v);
  return rc;
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
  free(t->now);
}

void mw__parsed_free(mw__parsed *p) {
  if (!p) return;
  for (int i = 0; i < p->ntasks; ++i) task_free(&p->tasks[i]);
  free(p->tasks);
  free(p->file);
  free(p->src);
  for (int i = 0; i < p->ndefines; ++i) {
    free(p->def_names[i]);
    free(p->def_values[i]);
  }
  free(p->def_names);
  free(p->def_values);
  memset(p, 0, sizeof *p);
}

/* The task names seen so far: an open-addressing table of task indices + 1, keyed by name, so
 * that a program of many tasks checks for a name declared twice in time linear in its tasks. */
typedef struct name_set {
  int *slot;
  size_t cap, n;
} name_set;

static size_t name_hash(const char *s) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (; *s; ++s) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return (size_t)h;
}

/* Adds tasks[i]: returns -1, or the index of an earlier task of the same name (not added), or
 * -2 when out of memory. */
static int name_set_add(name_set *ns, const mw__task *tasks, int i) {
  if ((ns->n + 1) * 2 > ns->cap) { /* at most half full */
    size_t cap = ns->cap ? ns->cap * 2 : 64;
    int *slot = calloc(cap, sizeof *slot);
    if (!slot) return -2;
    for (size_t j = 0; j < ns->cap; ++j) {
      if (!ns->slot[j]) continue;
      size_t h = name_hash(tasks[ns->slot[j] - 1].name) & (cap - 1);
      while (slot[h]) h = (h + 1) & (cap - 1);
      slot[h] = ns->slot[j];
    }
    free(ns->slot);
    ns->slot = slot;
    ns->cap = cap;
  }
  size_t m = ns->cap - 1;
  for (size_t h = name_hash(tasks[i].name) & m;; h = (h + 1) & m) {
    if (!ns->slot[h]) {
      ns->slot[h] = i + 1;
      ns->n++;
      return -1;
    }
    if (!strcmp(tasks[ns->slot[h] - 1].name, tasks[i].name)) return ns->slot[h] - 1;
  }
}

int mw__parse(const char *src, const char *file, int first_line, mw__parsed *out, char *err,
              size_t errlen) {
  memset(out, 0, sizeof *out);
  if (first_line < 1) first_line = 1;
  name_set names = {0};
  line_memo memo = {0, first_line};
  scan sc = {src, strlen(src), file ? file : "<string>", err, errlen, first_line, &memo};
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
        if (!rc) {
          int k = name_set_add(&names, out->tasks, out->ntasks - 1);
          if (k == -2) rc = MW_ENOMEM;
          else if (k >= 0) rc = fail_at(&sc, i, "task '%s' is declared twice", out->tasks[k].name);
        }
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
  if (!rc) { /* the rules, on the source as it is compiled ('local' declarations blanked) */
    scan bodies = sc;
    line_memo bmemo = {0, first_line}; /* another text: counted apart */
    bodies.s = out->src;
    bodies.memo = &bmemo;
    int *suspends = calloc((size_t)out->ntasks, sizeof *suspends);
    if (!suspends) rc = MW_ENOMEM;
    for (int k = 0; k < out->ntasks && !rc; ++k)
      rc = suspend_line(&bodies, &out->tasks[k], &suspends[k]);
    for (int k = 0; k < out->ntasks && !rc; ++k)
      rc = check_body(&bodies, out, suspends, &out->tasks[k]);
    free(suspends);
    if (!rc) rc = check_helpers(&bodies, out);
  }
  free(names.slot);
  if (rc) mw__parsed_free(out);
  return rc;
}

int mw__check_block_tasks(const mw__parsed *p, unsigned workers, unsigned cta_warps, char *err, size_t errlen) {
  for (int k = 0; k < p->ntasks; ++k)
    if (p->tasks[k].block && workers < cta_warps) {
      snprintf(err, errlen,
               "%s:%d: task %s: a block task runs on a worker CTA of %u warps, and this runtime has %u "
               "worker%s",
               p->file, p->tasks[k].line, p->tasks[k].name, cta_warps, workers, workers == 1 ? "" : "s");
      return MW_ECOMPILE;
    }
  return 0;
}
