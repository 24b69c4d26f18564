/* generate.c - turns parsed programs into one device translation unit: state-machine task bodies,
 * typed spawn functions, the dispatch switch and the executor entry, with #line directives (the
 * user's file and lines, or canonical places that do not depend on where the source sits); and
 * puts compiler and executor messages in the user's terms, places mapped to files and lines. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "program.h"
#include "util.h"

extern const char mw__src_protocol_h[];
extern const char mw__src_runtime_cuh[];
extern const char mw__src_device_api_cuh[];
extern const char mw__src_executor_cuh[];
extern const char mw__src_task_api_cuh[];
extern const char mw__src_sim_shim_h[];

static const char *rtype_name(mw_type t) {
  switch (t) {
    case MW_T_VOID: return "MW_RT_VOID";
    case MW_T_BOOL: return "MW_RT_BOOL";
    case MW_T_I8: case MW_T_I16: case MW_T_I32: return "MW_RT_I32";
    case MW_T_U8: case MW_T_U16: case MW_T_U32: return "MW_RT_U32";
    case MW_T_I64: return "MW_RT_I64";
    case MW_T_U64: return "MW_RT_U64";
    case MW_T_F32: return "MW_RT_F32";
    case MW_T_F64: return "MW_RT_F64";
    case MW_T_PTR: return "MW_RT_PTR";
    case MW_T_FUTURE: return "MW_RT_FUTURE";
    default: return "MW_RT_VOID";
  }
}

/* Bytes of each lane's stack of inline frames: room for many small frames, at least eight of the
 * largest (a warp's local memory, reserved by the driver for every thread the GPU can hold). */
unsigned mw__lane_stack_bytes(unsigned frame_bytes) {
  unsigned n = 8u * (frame_bytes - 64u);
  if (n < 2048u) n = 2048u;
  if (n > 16384u) n = 16384u;
  return (n + 15u) & ~15u;
}

/* a C string literal of s */
static void put_quoted(mw__sb *b, const char *s) {
  mw__sb_puts(b, "\"");
  for (; *s; ++s) {
    if (*s == '"' || *s == '\\') mw__sb_put(b, "\\", 1);
    mw__sb_put(b, s, 1);
  }
  mw__sb_puts(b, "\"");
}

/* Where the lines of a program point: with canonical places (mw__gen_opts.canon), the program's
 * place name (MW_PLACE_PREFIX, its index, '>') and its lines counted from the source's first
 * line, so that the source compiles the same wherever it sits (the compile cache's key);
 * mw__user_places maps them back. Otherwise the user's file and lines themselves. */
typedef struct place {
  const mw__parsed *p;
  char tag[24]; /* the program's tag (mw__prog_tag): its namespace is mw_<tag> */
  int canon;
  const unsigned char *self; /* per task: self-contained (self_contained below); NULL: none */
} place;

void mw__prog_tag(const mw__parsed *p, int i, char out[24]) {
  if (p->tag[0]) snprintf(out, 24, "%s", p->tag);
  else snprintf(out, 24, "p%d", i);
}

static place place_of(const mw__parsed *p, int i, int canon) {
  place at;
  at.p = p;
  at.canon = canon && !p->debug;
  at.self = NULL;
  mw__prog_tag(p, i, at.tag);
  return at;
}

/* the file name of the program's lines, a C string literal */
static void put_file(mw__sb *b, const place *at) {
  if (at->canon) mw__sb_printf(b, "\"" MW_PLACE_PREFIX "%s>\"", at->tag);
  else put_quoted(b, at->p->file);
}

static void put_line(mw__sb *b, const place *at, int line) {
  mw__sb_printf(b, "\n#line %d ", at->canon ? line - at->p->first_line + 1 : line);
  put_file(b, at);
  mw__sb_puts(b, "\n");
}

/* Brace depth of helper code after [s, e), from depth; *state carries a block comment (1) or a
 * string or character literal (its quote) from one line to the next. Preprocessor lines
 * (the first non-blank a '#') do not count. */
static int brace_depth(const char *s, const char *e, int depth, int *state) {
  const char *q = s;
  while (q < e && (*q == ' ' || *q == '\t')) ++q;
  if (!*state && q < e && *q == '#') return depth;
  for (; s < e; ++s) {
    if (*state == 1) {
      if (s[0] == '*' && s + 1 < e && s[1] == '/') *state = 0, ++s;
    } else if (*state) {
      if (*s == '\\') ++s;
      else if (*s == *state) *state = 0;
    } else if (s[0] == '/' && s + 1 < e && s[1] == '/') {
      break;
    } else if (s[0] == '/' && s + 1 < e && s[1] == '*') {
      *state = 1, ++s;
    } else if (*s == '"' || *s == '\'') {
      *state = *s;
    } else if (*s == '{') {
      ++depth;
    } else if (*s == '}' && depth > 0) {
      --depth;
    }
  }
  if (*state == '"' || *state == '\'') *state = 0; /* a literal ends with its line */
  return depth;
}

/* Helper code: the source with task declarations blanked (newlines kept). Pass 0 puts it
 * inside the program's namespace, where an #include at the top level (outside any braces)
 * closes the namespace around it, so the header is read at file scope in its place (under the
 * #if it is in, after the macros defined before it); pass 1 puts, before the namespace, the
 * #includes inside braces (an extern "C" block), which cannot be read where they are. */
static void put_helpers(mw__sb *b, const place *at, int pass) {
  const mw__parsed *p = at->p;
  size_t n = strlen(p->src);
  char *h = mw__strndup(p->src, n);
  if (!h) {
    b->oom = 1;
    return;
  }
  for (int i = 0; i < p->ntasks; ++i)
    for (size_t k = p->tasks[i].decl_start; k <= p->tasks[i].decl_end && k < n; ++k)
      if (h[k] != '\n') h[k] = ' ';
  put_line(b, at, p->first_line);
  char *line = h;
  int depth = 0, state = 0, ln = p->first_line;
  while (line && *line) {
    char *nl = strchr(line, '\n');
    size_t len = nl ? (size_t)(nl - line) + 1 : strlen(line);
    const char *q = line;
    while (*q == ' ' || *q == '\t') ++q;
    int is_inc = !state && *q == '#';
    if (is_inc) {
      ++q;
      while (*q == ' ' || *q == '\t') ++q;
      is_inc = !strncmp(q, "include", 7);
    }
    if (pass == 1) {
      if (is_inc && depth > 0) mw__sb_put(b, line, len);
      else mw__sb_puts(b, nl ? "\n" : "");
    } else if (is_inc && depth == 0) {
      mw__sb_printf(b, "} /* namespace mw_%s */\n", at->tag);
      put_line(b, at, ln);
      mw__sb_put(b, line, len);
      mw__sb_printf(b, "%snamespace mw_%s {", nl ? "" : "\n", at->tag);
      put_line(b, at, ln + 1);
    } else if (is_inc) {
      mw__sb_puts(b, nl ? "\n" : ""); /* hoisted by pass 1 */
    } else {
      mw__sb_put(b, line, len);
    }
    depth = brace_depth(line, line + len, depth, &state);
    ++ln;
    line = nl ? nl + 1 : NULL;
  }
  free(h);
}

/* The program's defines (mw_compile_desc): each refused where a macro of its name exists
 * already (the runtime's headers, a program loaded before), then defined; the lines point at
 * the program's first line. */
static void put_defines(mw__sb *b, const place *at) {
  const mw__parsed *p = at->p;
  for (int i = 0; i < p->ndefines; ++i) {
    mw__sb_printf(b, "\n#ifdef %s", p->def_names[i]);
    put_line(b, at, p->first_line);
    mw__sb_printf(b,
                  "#error option 'defines': '%s' is a macro already where this program starts "
                  "(of the runtime's headers or a program loaded before)\n#endif",
                  p->def_names[i]);
    put_line(b, at, p->first_line);
    mw__sb_printf(b, "#define %s %s\n", p->def_names[i], p->def_values[i]);
  }
}

/* Ends the program's defines: later code (the runtime's, other programs') never sees them. */
static void put_undefs(mw__sb *b, const mw__parsed *p) {
  for (int i = 0; i < p->ndefines; ++i) mw__sb_printf(b, "#undef %s\n", p->def_names[i]);
}

/* Whether spawn-now site k of task t (mw__task.now) is a spawn_bulk. */
static int now_bulk(const mw__parsed *p, const mw__task *t, int k) {
  return !strncmp(p->src + t->now[k].word, "spawn_bulk", 10);
}

/* Whether some task of program p spawns t where the next statement awaits it (mw__task.now),
 * with spawn_bulk (bulk) or spawn: then t gets a spawn-now function of that form beside its
 * spawn functions. */
static int t_spawned_now(const mw__parsed *p, const mw__task *t, int bulk) {
  for (int i = 0; i < p->ntasks; ++i)
    for (int k = 0; k < p->tasks[i].nnow; ++k)
      if (p->tasks[i].now[k].task == (int)(t - p->tasks) && now_bulk(p, &p->tasks[i], k) == bulk) return 1;
  return 0;
}

static const char *kind_flags(const mw__parsed *p, const mw__task *t);

/* Whether the spawn-now function of task t may call its body itself (task_api.cuh,
 * mw_direct_ok): t is pure, takes no future and returns none. */
static int t_direct(const mw__parsed *p, const mw__task *t) {
  if (t->ret == MW_T_FUTURE || strcmp(kind_flags(p, t), "MW_KIND_LEAF | MW_KIND_PURE")) return 0;
  for (int k = 0; k < t->nparams; ++k)
    if (t->params[k].type == MW_T_FUTURE) return 0;
  return 1;
}

static int body_names(const mw__parsed *p, const mw__task *t, const char *const *words, size_t n);

/* The identifiers of t's body, outside comments and literals, one per call: *i is where to look
 * from (the body's start at first); the next one's offset and length into *at and *len. 0 at
 * the body's end. */
static int next_ident(const mw__parsed *p, const mw__task *t, size_t *i, size_t *at, size_t *len) {
  const char *s = p->src;
  for (; *i <= t->body_end; ++*i) {
    char ch = s[*i];
    if (ch == '/' && s[*i + 1] == '/') {
      while (*i <= t->body_end && s[*i] != '\n') ++*i;
      continue;
    }
    if (ch == '/' && s[*i + 1] == '*') {
      for (*i += 2; *i < t->body_end && !(s[*i] == '*' && s[*i + 1] == '/'); ++*i) {
      }
      ++*i;
      continue;
    }
    if (ch == '"' || ch == '\'') {
      for (++*i; *i < t->body_end && s[*i] != ch; ++*i)
        if (s[*i] == '\\') ++*i;
      continue;
    }
    if (!(ch == '_' || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z'))) continue;
    size_t j = *i;
    while (j <= t->body_end && (s[j] == '_' || (s[j] >= 'a' && s[j] <= 'z') || (s[j] >= 'A' && s[j] <= 'Z') ||
                                (s[j] >= '0' && s[j] <= '9')))
      ++j;
    *at = *i;
    *len = j - *i;
    *i = j;
    return 1;
  }
  return 0;
}

/* The name that 'spawn' at offset at of t's body names ('spawn (name,'): its length, its offset
 * in *name; 0 if none. */
static size_t spawn_name(const mw__parsed *p, const mw__task *t, size_t at, size_t *name) {
  const char *s = p->src;
  size_t i = at + 5;
  while (i < t->body_end && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) ++i;
  if (s[i] != '(') return 0;
  ++i;
  while (i < t->body_end && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) ++i;
  size_t j = i;
  while (j < t->body_end && (s[j] == '_' || (s[j] >= 'a' && s[j] <= 'z') || (s[j] >= 'A' && s[j] <= 'Z') ||
                             (s[j] >= '0' && s[j] <= '9')))
    ++j;
  *name = i;
  return j - i;
}

/* The task of p that 'spawn' at offset at of t's body names, or -1. */
static int spawn_target(const mw__parsed *p, const mw__task *t, size_t at) {
  size_t name, len = spawn_name(p, t, at, &name);
  for (int k = 0; k < p->ntasks && len; ++k)
    if (strlen(p->tasks[k].name) == len && !memcmp(p->src + name, p->tasks[k].name, len)) return k;
  return -1;
}

/* Self-contained tasks (MW_ELIDE, task_api.cuh: an elided call): a body that can finish as a
 * plain call once every task it spawns is called in turn, so that none of its awaits can find a
 * future still pending. t takes and returns no future, names no 'future' of its own (its futures
 * are 'local's, which the parsed source has blanked out), no spawn_bulk and no cancel, names
 * each of its locals (an array's name, not a function pointer's declarator), and every
 * task it spawns is a task of this program that is self-contained too (a fixed point). malloc'd,
 * one byte per task; NULL when out of memory (then none is). */
static unsigned char *self_contained(const mw__parsed *p) {
  static const char *const words[] = {"future", "spawn_bulk", "cancel"};
  unsigned char *ok = calloc((size_t)p->ntasks + 1, 1);
  if (!ok) return NULL;
  for (int k = 0; k < p->ntasks; ++k) {
    const mw__task *t = &p->tasks[k];
    ok[k] = !t->block && t->ret != MW_T_FUTURE && !body_names(p, t, words, sizeof words / sizeof *words);
    for (int q = 0; q < t->nparams && ok[k]; ++q) ok[k] = t->params[q].type != MW_T_FUTURE;
    for (int q = 0; q < t->nlocals && ok[k]; ++q) { /* the fast body names each local (put_task_fast) */
      const char *d = t->locals[q].decl;
      mw__declarator dc;
      while (ok[k] && mw__next_declarator(t->locals[q].decl, &d, &dc)) ok[k] = dc.len > 0;
    }
  }
  for (int changed = 1; changed;) {
    changed = 0;
    for (int k = 0; k < p->ntasks; ++k) {
      const mw__task *t = &p->tasks[k];
      size_t i = t->body_start, at, len;
      while (ok[k] && next_ident(p, t, &i, &at, &len)) {
        if (len != 5 || memcmp(p->src + at, "spawn", 5)) continue;
        int target = spawn_target(p, t, at);
        if (target < 0 || !ok[target]) {
          ok[k] = 0;
          changed = 1;
        }
      }
    }
  }
  return ok;
}

/* The argument struct _mw_a of task t from the spawn function's parameters _mw_p0... */
static void put_args_local(mw__sb *b, const mw__task *t) {
  mw__sb_printf(b, "  mw_args_%s _mw_a = mw_args_%s();\n", t->name, t->name);
  for (int k = 0; k < t->nparams; ++k) mw__sb_printf(b, "  _mw_a.%s = _mw_p%d;\n", t->params[k].name, k);
}

/* Task t's body called on a frame made from _mw_a, its result returned through fn
 * (mw_direct_done; mw_direct_end with extra ", _mw_out"), each line after indent. */
static void put_direct_body(mw__sb *b, const mw__task *t, unsigned local, const char *indent, const char *fn,
                            const char *extra) {
  mw__sb_printf(b, "%smw_frame_%s _mw_f = mw_frame_%s();\n%sstatic_cast<mw_args_%s &>(_mw_f) = _mw_a;\n", indent,
                t->name, t->name, indent, t->name);
  if (t->ret == MW_T_VOID)
    mw__sb_printf(b, "%s_mw_f._mw_body(_mw_c, _mw_kb);\n%sreturn %s(_mw_c, _mw_kb + %uu, MW_RT_VOID, 0u%s);\n", indent,
                  indent, fn, local, extra);
  else
    mw__sb_printf(b, "%sreturn %s(_mw_c, _mw_kb + %uu, %s, mw_result_bits(_mw_f._mw_body(_mw_c, _mw_kb))%s);\n", indent,
                  fn, local, rtype_name(t->ret), extra);
}

/* The fused pair's call (put_fused_pair) of direct task t (local: its index in the program):
 * its body here when mw_direct_ok allows (1 or 2, as mw_direct_end), else its arguments into
 * *_mw_da for the spawn-now and 0. */
static void put_direct_try(mw__sb *b, const mw__task *t, unsigned local) {
  mw__sb_printf(b, "#ifndef MW_NO_DIRECT_FUSE\n__device__ __forceinline__ int mw_dtry__%s(mw_ctx *_mw_c, mw_u32 _mw_kb, int _mw_line, "
                   "future *_mw_out, mw_args_%s *_mw_da", t->name, t->name);
  for (int k = 0; k < t->nparams; ++k) mw__sb_printf(b, ", %s _mw_p%d", t->params[k].type_txt, k);
  mw__sb_puts(b, ") {\n");
  put_args_local(b, t);
  mw__sb_printf(b,
                "  if (!mw_direct_ok(_mw_c, _mw_kb + %uu, &_mw_a, (mw_u32)sizeof(_mw_a), 0ull, _mw_line)) {\n"
                "    *_mw_da = _mw_a;\n    return 0;\n  }\n",
                local);
  put_direct_body(b, t, local, "  ", "mw_direct_end", ", _mw_out");
  mw__sb_puts(b, "}\n#endif\n");
}

/* In the spawn function of a self-contained task t, compiled with MW_ELIDE only: when
 * mw_elide_ok says so (task_api.cuh), the child's frame with its arguments in, for the spawn's
 * expression to call its body (MW_SPAWN_EXPR); a refusal's future when the stack is used up. */
static void put_elided_call(mw__sb *b, const mw__task *t, unsigned local) {
  mw__sb_printf(b, "#ifdef MW_ELIDE\n  {\n    mw_args_%s _mw_ea = mw_args_%s();\n", t->name, t->name);
  for (int k = 0; k < t->nparams; ++k) mw__sb_printf(b, "    _mw_ea.%s = _mw_p%d;\n", t->params[k].name, k);
  mw__sb_printf(b,
                "    if (const int _mw_e = mw_elide_ok(_mw_c, _mw_kb + %uu, &_mw_ea, (mw_u32)sizeof(_mw_ea), _mw_line)) {\n"
                "      if (_mw_e == 2) return mw_elide_refuse(_mw_c, _mw_kb + %uu);\n"
                "      mw_spawned<mw_frame_%s, true> _mw_s;\n"
                "      _mw_s._mw_elide = true;\n"
                "      _mw_s._mw_fr = mw_frame_%s();\n"
                "      static_cast<mw_args_%s &>(_mw_s._mw_fr) = _mw_ea;\n"
                "      return _mw_s;\n"
                "    }\n  }\n#endif\n",
                local, local, t->name, t->name, t->name);
}

static void put_task_decls(mw__sb *b, const place *at, const mw__task *t) {
  unsigned local = (unsigned)(t - at->p->tasks); /* its kind is the program's first + local */
  mw__sb_printf(b, "\n/* task %s (kind %u of the program) */\nstruct mw_args_%s {", t->name, local, t->name);
  put_line(b, at, t->line);
  /* a future parameter is read-only: the task holds it until it finishes (protocol.h) */
  for (int k = 0; k < t->nparams; ++k)
    mw__sb_printf(b, "  %s%s;\n", t->params[k].type == MW_T_FUTURE ? "const " : "",
                  t->params[k].decl);
  mw__sb_puts(b, "};\n");
  for (int k = 0; k < t->nparams; ++k)
    mw__sb_printf(b,
                  "MW_CHECK_OFFSET(mw_args_%s, %s, %u);\n", t->name, t->params[k].name,
                  t->params[k].offset);
  mw__sb_printf(b,
                "static_assert(sizeof(mw_args_%s) == %u || %u == 0, \"moonwarp: argument size of "
                "%s\");\n",
                t->name, t->args_size, t->args_size, t->name);
  /* _mw_local, _mw_rtype: the task's index in its program and its result's type, for an
   * elided call's end; _mw_self: whether a spawn of it may run in place (its spawn functions
   * return its frame then: task_api.cuh, mw_spawned) */
  mw__sb_printf(b, "struct mw_frame_%s : mw_args_%s {\n  typedef %s _mw_ret_t;\n"
                   "  static constexpr mw_u32 _mw_local = %uu, _mw_rtype = %s;\n"
                   "#ifdef MW_ELIDE\n  static constexpr bool _mw_self = %s;\n#else\n"
                   "  static constexpr bool _mw_self = false;\n#endif\n",
                t->name, t->name, t->ret_txt, local, rtype_name(t->ret),
                at->self && at->self[local] ? "true" : "false");
  for (int k = 0; k < t->nlocals; ++k) {
    put_line(b, at, t->locals[k].line);
    mw__sb_printf(b, "  %s;\n", t->locals[k].decl);
  }
  mw__sb_puts(b, "  __device__ MW_BODY_ATTR _mw_ret_t _mw_body(mw_ctx *_c, mw_u32 _mw_kbase);\n");
  if (at->self && at->self[local]) /* its fast body, and its call on this frame's arguments (task_api.cuh) */
    mw__sb_printf(b,
                  "#ifdef MW_ELIDE\n  __device__ static _mw_ret_t _mw_fast(mw_ctx *_c, mw_u32 _mw_kbase, mw_args_%s _mw_a);\n"
                  "  __device__ __forceinline__ _mw_ret_t _mw_call(mw_ctx *_c, mw_u32 _mw_kbase) "
                  "{ return _mw_fast(_c, _mw_kbase, *this); }\n#endif\n",
                  t->name);
  mw__sb_puts(b, "};\n");
  put_line(b, at, t->line); /* a frame too small is the task's line, in its file */
  mw__sb_printf(b,
                "static_assert(sizeof(mw_frame_%s) <= MW_FRAME_PAYLOAD, \"task %s: its parameters "
                "and locals do not fit in a frame; raise frame_bytes\");\n",
                t->name, t->name);
  /* typed spawn functions: the argument struct in zeroed words, then the runtime (names of
   * their own are reserved ones: the program's defines are in force here) */
  static const char *const form_names[] = {"", "_bulk", "_now", "_now_bulk"};
  for (int form = 0; form < 4; ++form) { /* spawn, spawn_bulk, and their spawn-now (awaited next) */
    int bulk = form == 1 || form == 3;
    if (form >= 2 && !t_spawned_now(at->p, t, form == 3)) continue;
    /* spawn and spawn-now return an mw_spawned (the spawn's expression: MW_SPAWN_EXPR) */
    if (bulk)
      mw__sb_puts(b, "__device__ __forceinline__ future");
    else
      mw__sb_printf(b, "__device__ __forceinline__ mw_spawned<mw_frame_%s, mw_frame_%s::_mw_self>", t->name, t->name);
    mw__sb_printf(b, " mw_spawn%s__%s(mw_ctx *_mw_c, mw_u32 _mw_kb, int _mw_line%s",
                  form_names[form], t->name, bulk ? ", unsigned long long _mw_n" : "");
    for (int k = 0; k < t->nparams; ++k) mw__sb_printf(b, ", %s _mw_p%d", t->params[k].type_txt, k);
    mw__sb_puts(b, ") {\n");
    if (form >= 2 && t_direct(at->p, t)) {
      /* the body called here: its arguments (registers, unless the sim's check reads them) into
       * a frame that is a local, zeroed; a bulk task's instances one after the other, as many as
       * mw_alone allows (task_api.cuh) */
      put_args_local(b, t);
      if (form == 2) {
        mw__sb_printf(b, "  if (mw_direct_ok(_mw_c, _mw_kb + %uu, &_mw_a, (mw_u32)sizeof(_mw_a), 0ull, _mw_line)) {\n", local);
        put_direct_body(b, t, local, "    ", "mw_direct_done", "");
        mw__sb_puts(b, "  }\n");
      } else {
        mw__sb_printf(b,
                      "  if (_mw_n - 1ull < MW_ALONE_MAX && mw_direct_ok(_mw_c, _mw_kb + %uu, &_mw_a, (mw_u32)sizeof(_mw_a), _mw_n, _mw_line)) {\n"
                      "    mw_direct_bulk _mw_r = mw_direct_bulk();\n"
                      "    const long long _mw_t0 = clock64();\n"
                      "    for (mw_u32 _mw_i = 0; _mw_i < (mw_u32)_mw_n; ++_mw_i) {\n"
                      "      mw_frame_%s _mw_f = mw_frame_%s();\n"
                      "      static_cast<mw_args_%s &>(_mw_f) = _mw_a;\n"
                      "      mw_direct_instance(_mw_c, _mw_i);\n"
                      "      _mw_f._mw_body(_mw_c, _mw_kb);\n"
                      "      mw_direct_instance_end(_mw_c, &_mw_r);\n"
                      "    }\n"
                      "    return mw_direct_bulk_done(_mw_c, _mw_kb + %uu, &_mw_r, (mw_u32)_mw_n, _mw_t0);\n  }\n",
                      local, t->name, t->name, t->name, local);
      }
    }
    if ((form == 0 || form == 2) && at->self && at->self[local]) put_elided_call(b, t, local);
    mw__sb_printf(b, "  mw_u64 _mw_w[(sizeof(mw_args_%s) + 7) / 8 + 1] = {0};\n", t->name);
    for (int k = 0; k < t->nparams; ++k) {
      if (t->params[k].type == MW_T_FUTURE)
        mw__sb_printf(b, "  _mw_w[%u] = _mw_handle(_mw_p%d);\n", t->params[k].offset / 8, k);
      else
        mw__sb_printf(b, "  ((mw_args_%s *)_mw_w)->%s = _mw_p%d;\n", t->name, t->params[k].name, k);
    }
    if (t->block) /* a block task never runs at its spawn or inline: its frame goes to the queue */
      mw__sb_printf(b, "  return mw_spawn_block(_mw_c, _mw_kb + %uu, _mw_w, %s, %s, _mw_line);\n}\n", local,
                    bulk ? "(mw_u32)_mw_n" : "0u", bulk ? "true" : "false");
    else if (form == 2)
      mw__sb_printf(b, "  return mw_spawn_now(_mw_c, _mw_kb + %uu, _mw_w, _mw_line);\n}\n", local);
    else if (form == 3)
      mw__sb_printf(b, "  return mw_spawn_raw(_mw_c, _mw_kb + %uu, _mw_w, (mw_u32)_mw_n, true, _mw_line);\n}\n", local);
    else
      mw__sb_printf(b, "  return mw_spawn_raw(_mw_c, _mw_kb + %uu, _mw_w, %s, %s, _mw_line);\n}\n", local,
                    bulk ? "(mw_u32)_mw_n" : "0u", bulk ? "true" : "false");
  }
  if (t_spawned_now(at->p, t, 0) && t_direct(at->p, t) && !t->block) put_direct_try(b, t, local);
  if (at->self && at->self[local]) { /* a fast body's spawn takes its arguments here (MW_SPAWN_FAST) */
    mw__sb_printf(b, "#ifdef MW_ELIDE\n__device__ __forceinline__ mw_args_%s mw_spawn_fast__%s(mw_ctx *, mw_u32, int",
                  t->name, t->name);
    for (int k = 0; k < t->nparams; ++k) mw__sb_printf(b, ", %s _mw_p%d", t->params[k].type_txt, k);
    mw__sb_printf(b, ") {\n  mw_args_%s _mw_a = mw_args_%s();\n", t->name, t->name);
    for (int k = 0; k < t->nparams; ++k) mw__sb_printf(b, "  _mw_a.%s = _mw_p%d;\n", t->params[k].name, k);
    mw__sb_puts(b, "  return _mw_a;\n}\n#endif\n");
  }
}

/* Whether task t's body names one of words[0..n) as a word outside comments and literals. */
static int body_names(const mw__parsed *p, const mw__task *t, const char *const *words, size_t n) {
  size_t i = t->body_start, at, len;
  while (next_ident(p, t, &i, &at, &len))
    for (size_t w = 0; w < n; ++w)
      if (strlen(words[w]) == len && !memcmp(p->src + at, words[w], len)) return 1;
  return 0;
}

/* Whether task t's body never awaits: such a task never suspends, so an await that claims it
 * may run it as a plain call (device_api.cuh, leaf children). A word in a place this scan
 * misreads only costs that shortcut. A block task is none: it never runs as a call (its body is
 * in mw_dispatch alone). */
static int task_is_leaf(const mw__parsed *p, const mw__task *t) {
  static const char *const words[] = {"await", "await_all", "try_await"};
  return !t->block && !body_names(p, t, words, sizeof words / sizeof *words);
}

/* The kind flags of task t (task_api.cuh, mw_kind_info): a leaf that also calls nothing of the
 * task API that needs a level of its own (spawns, releases, cancels) is pure: the await that
 * claims it calls its body with no level set up. */
static const char *kind_flags(const mw__parsed *p, const mw__task *t) {
  static const char *const words[] = {"spawn", "spawn_bulk", "release", "cancel"};
  if (t->block) return "MW_KIND_BLOCK";
  if (!task_is_leaf(p, t)) return "0u";
  return body_names(p, t, words, sizeof words / sizeof *words) ? "MW_KIND_LEAF" : "MW_KIND_LEAF | MW_KIND_PURE";
}

/* The case of one task of a program in its dispatch function (local: its index there). */
static void put_dispatch_case(mw__sb *b, const place *at, const mw__task *t, unsigned local) {
  if (t->ret == MW_T_VOID)
    mw__sb_printf(b, "  case %uu: ((mw_%s::mw_frame_%s *)fr)->_mw_body(c, base); break;\n", local,
                  at->tag, t->name);
  else
    mw__sb_printf(b,
                  "  case %uu: { auto r = ((mw_%s::mw_frame_%s *)fr)->_mw_body(c, base); "
                  "mw_store_result(c, r); break; }\n",
                  local, at->tag, t->name);
}

/* Whether name (len bytes) is one the body's prologue declares itself, or a reserved one. */
static int name_taken(const char *name, size_t len) {
  return (len == 4 && !strncmp(name, "lane", 4)) || (len == 5 && !strncmp(name, "index", 5)) ||
         (len >= 3 && !strncmp(name, "_mw", 3)) || (len == 2 && !strncmp(name, "_c", 2));
}

/* Calls put(b, name, len) for each parameter and plain 'local' of t that the body keeps in a
 * variable of its own (put_task_body). */
static void for_kept_names(mw__sb *b, const mw__task *t, void (*put)(mw__sb *, const char *, size_t)) {
  for (int k = 0; k < t->nparams; ++k)
    if (!name_taken(t->params[k].name, strlen(t->params[k].name))) put(b, t->params[k].name, strlen(t->params[k].name));
  for (int k = 0; k < t->nlocals; ++k) {
    const char *at = t->locals[k].decl;
    mw__declarator dc;
    while (mw__next_declarator(t->locals[k].decl, &at, &dc))
      if (dc.plain && !name_taken(dc.name, dc.len)) put(b, dc.name, dc.len);
  }
}
static void put_copy_in(mw__sb *b, const char *n, size_t len) {
  mw__sb_printf(b, "  [[maybe_unused]] decltype(this->%.*s) %.*s = this->%.*s;\n", (int)len, n, (int)len, n,
                (int)len, n);
}
static void put_copy_out(mw__sb *b, const char *n, size_t len) {
  mw__sb_printf(b, " mw_keep(this->%.*s, %.*s),", (int)len, n, (int)len, n);
}

/* The mw_spawned of each task that t's body spawns (spawn or spawn-now: task_api.cuh,
 * MW_SPAWN_EXPR), once a task, before the body's switch (the parser has checked that every
 * spawn names a task of the program); in a fast body (fast), its arguments' value
 * (MW_SPAWN_FAST). */
static void put_spawn_temps(mw__sb *b, const mw__parsed *p, const mw__task *t, int fast) {
  size_t i = t->body_start, at, len;
  while (next_ident(p, t, &i, &at, &len)) {
    size_t name, nlen;
    if (len != 5 || memcmp(p->src + at, "spawn", 5) || !(nlen = spawn_name(p, t, at, &name))) continue;
    const char *n = p->src + name;
    int named_before = 0; /* by an earlier spawn of the body */
    size_t j = t->body_start, at2, len2;
    while (!named_before && next_ident(p, t, &j, &at2, &len2) && at2 < at) {
      size_t name2;
      named_before = len2 == 5 && !memcmp(p->src + at2, "spawn", 5) && spawn_name(p, t, at2, &name2) == nlen &&
                     !memcmp(p->src + name2, n, nlen);
    }
    if (named_before) continue;
    if (fast)
      mw__sb_printf(b, "  [[maybe_unused]] mw_args_%.*s _mw_fa_%.*s;\n", (int)nlen, n, (int)nlen, n);
    else
      mw__sb_printf(b, "  [[maybe_unused]] mw_spawned<mw_frame_%.*s, mw_frame_%.*s::_mw_self> _mw_sp_%.*s;\n",
                    (int)nlen, n, (int)nlen, n, (int)nlen, n);
  }
}

/* A task body: its state machine (a switch over its resume points) in a member function of its
 * frame. The parameters and plain locals live in variables of the body, copied from the frame
 * at each entry and back into it (_MW_KEEP, task_api.cuh) only before an await that may
 * suspend the task: between those they are registers, not the frame's memory, which any store
 * through the context could alias. MW_LOCALS_IN_FRAME: the body works on the frame's
 * members themselves, as before (a variant to compare). */
static void put_body_text(mw__sb *b, const place *at, const mw__task *t, int fuse);
static void put_fused_temps(mw__sb *b, const mw__parsed *p, const mw__task *t);
static void put_block_body(mw__sb *b, const place *at, const mw__task *t);
static void put_task_body(mw__sb *b, const place *at, const mw__task *t) {
  const mw__parsed *p = at->p;
  if (t->block) {
    put_block_body(b, at, t);
    return;
  }
  mw__sb_puts(b, "#ifdef MW_LOCALS_IN_FRAME\n#define _MW_KEEP() ((void)0)\n#else\n#define _MW_KEEP() (");
  for_kept_names(b, t, put_copy_out);
  mw__sb_puts(b, " (void)0)\n#endif\n");
  mw__sb_printf(b,
                "__device__ mw_frame_%s::_mw_ret_t mw_frame_%s::_mw_body(mw_ctx *_c, mw_u32 _mw_kbase) {\n"
                "  const unsigned lane = _c->lane;\n  const unsigned index = _c->index;\n"
                "  (void)lane;\n  (void)index;\n  (void)_mw_kbase;\n#ifndef MW_LOCALS_IN_FRAME\n",
                t->name, t->name);
  for_kept_names(b, t, put_copy_in);
  mw__sb_puts(b, "#endif\n");
  put_spawn_temps(b, p, t, 0);
  put_fused_temps(b, p, t);
  /* a leaf never awaits: it has no resume point but the start */
  mw__sb_printf(b, "  switch (%s) {\n  case 0:;", task_is_leaf(p, t) ? "0u" : "_mw_resume(_c)");
  put_body_text(b, at, t, 1);
  mw__sb_puts(b, "\n  default:;\n  }\n  return _mw_ret_t();\n}\n#undef _MW_KEEP\n");
}

/* ---- block tasks (protocol.h, Block tasks) ---------------------------------------------------
 * A block task's __shared__ declarations become members of a struct of its own, mw_shared_T,
 * which lives in the CTA's block area (mw_block_smem); its size is checked against MW_BLOCK_SMEM
 * at the first declaration's line, and each declaration in the body becomes references to the
 * members, on the same lines. */

/* The next '__shared__' declaration of block task t's body from *i: [*kw, *semi] from the word
 * to its ';' (at depth 0 of (), [] and {}); 0 when there is none. */
static int next_shared(const mw__parsed *p, const mw__task *t, size_t *i, size_t *kw, size_t *semi) {
  size_t at, len;
  while (next_ident(p, t, i, &at, &len)) {
    if (len != 10 || strncmp(p->src + at, "__shared__", 10)) continue;
    int depth = 0;
    size_t k = at + 10;
    for (; k < t->body_end; ++k) {
      const char ch = p->src[k];
      if (ch == '(' || ch == '[' || ch == '{') ++depth;
      else if (ch == ')' || ch == ']' || ch == '}') --depth;
      else if (ch == ';' && depth == 0) break;
    }
    if (k >= t->body_end) return 0; /* no ';': the C++ compiler says so */
    *kw = at;
    *semi = k;
    *i = k + 1;
    return 1;
  }
  return 0;
}

/* The line of offset off in t's body. */
static int body_line_of(const mw__parsed *p, const mw__task *t, size_t off) {
  int line = t->body_line;
  for (size_t k = t->body_start; k < off; ++k) line += p->src[k] == '\n';
  return line;
}

/* mw_shared_T: the members, and the size check at the first declaration's line. */
static void put_block_shared(mw__sb *b, const place *at, const mw__task *t) {
  const mw__parsed *p = at->p;
  size_t i = t->body_start, kw, semi;
  int first = 0;
  mw__sb_printf(b, "struct mw_shared_%s {\n  char _mw_none;\n", t->name);
  while (next_shared(p, t, &i, &kw, &semi)) {
    if (!first) first = body_line_of(p, t, kw);
    mw__sb_puts(b, "  ");
    for (size_t k = kw + 10; k < semi; ++k) mw__sb_printf(b, "%c", p->src[k] == '\n' ? ' ' : p->src[k]);
    mw__sb_puts(b, ";\n");
  }
  mw__sb_puts(b, "};");
  if (first) put_line(b, at, first);
  else mw__sb_puts(b, "\n");
  mw__sb_printf(b, "static_assert(sizeof(mw_shared_%s) <= MW_BLOCK_SMEM, \"task %s: its __shared__ variables take more "
                   "than the MW_BLOCK_SMEM bytes a worker CTA keeps for a block task\");\n",
                t->name, t->name);
}

/* Block task t's body as written, each __shared__ declaration made references to its members of
 * mw_shared_T (_mw_sh), on the declaration's lines. */
static void put_block_text(mw__sb *b, const place *at, const mw__task *t) {
  const mw__parsed *p = at->p;
  put_line(b, at, t->body_line);
  size_t col = t->body_start;
  while (col > 0 && p->src[col - 1] != '\n') --col;
  for (size_t k = col; k < t->body_start; ++k) mw__sb_puts(b, " ");
  size_t from = t->body_start, i = t->body_start, kw, semi;
  while (next_shared(p, t, &i, &kw, &semi)) {
    mw__sb_put(b, p->src + from, kw - from);
    /* the declaration (type, then declarators) as a local declaration's text */
    char *decl = mw__strndup(p->src + kw + 10, semi - kw - 10);
    const char *d = decl;
    mw__declarator dc;
    int lines = 0;
    for (size_t k = kw; k < semi; ++k) lines += p->src[k] == '\n';
    while (decl && mw__next_declarator(decl, &d, &dc))
      if (dc.len) mw__sb_printf(b, "auto &%.*s = _mw_sh.%.*s; ", (int)dc.len, dc.name, (int)dc.len, dc.name);
    free(decl);
    for (int k = 0; k < lines; ++k) mw__sb_puts(b, "\n");
    from = semi + 1;
  }
  mw__sb_put(b, p->src + from, t->body_end + 1 - from);
}

/* A block task's body: run by every warp of a worker CTA at once (protocol.h, Block tasks), with
 * warp, thread and nthreads besides lane and index; it never suspends and keeps nothing. */
static void put_block_body(mw__sb *b, const place *at, const mw__task *t) {
  put_block_shared(b, at, t);
  mw__sb_printf(b,
                "__device__ mw_frame_%s::_mw_ret_t mw_frame_%s::_mw_body(mw_ctx *_c, mw_u32 _mw_kbase) {\n"
                "  const unsigned lane = _c->lane;\n  const unsigned index = _c->index;\n"
                "  const unsigned warp = _c->cw;\n  const unsigned thread = warp * 32u + lane;\n"
                "  constexpr int nthreads = MW_CTA_WARPS * 32; /* int: a loop stepping by it has a known trip count */\n"
                "  (void)lane;\n  (void)index;\n  (void)warp;\n  (void)thread;\n  (void)nthreads;\n  (void)_mw_kbase;\n"
                "  [[maybe_unused]] mw_shared_%s &_mw_sh = *reinterpret_cast<mw_shared_%s *>(mw_block_smem(_c));\n",
                t->name, t->name, t->name, t->name);
  for_kept_names(b, t, put_copy_in);
  /* a pointer parameter is a device buffer: in global memory (or null, which isspacep.global
   * holds for too). Said to the compiler, which then loads through it with global loads that
   * need not wait for the body's stores to __shared__ memory (a generic pointer might point
   * there: the executor's unit lets generic pointers to shared memory escape, so it cannot
   * tell by itself); a tile's loads are issued together, as in a kernel (bench/NOTES.md) */
  mw__sb_puts(b, "#ifndef MW_SIM\n");
  for (int k = 0; k < t->nparams; ++k)
    if (t->params[k].type == MW_T_PTR) mw__sb_printf(b, "  __builtin_assume(__isGlobal(%s));\n", t->params[k].name);
  mw__sb_puts(b, "#endif\n");
  put_block_text(b, at, t);
  mw__sb_puts(b, "\n  return _mw_ret_t();\n}\n");
}

/* Whether c can be part of an identifier. */
static int id_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* The line of offset pos of task t's body. */
static int body_line_at(const mw__parsed *p, const mw__task *t, size_t pos) {
  int line = t->body_line;
  for (size_t i = t->body_start; i < pos; ++i) line += p->src[i] == '\n';
  return line;
}

/* Blanks up to the column of offset pos of the source, on a fresh line. */
static void put_column(mw__sb *b, const mw__parsed *p, size_t pos) {
  size_t col = pos;
  while (col > 0 && p->src[col - 1] != '\n') --col;
  for (size_t k = col; k < pos; ++k) mw__sb_puts(b, " ");
}

/* Just past the 'spawn' (or 'spawn_bulk') word of spawn-now site k. */
static size_t now_word_end(const mw__parsed *p, const mw__task *t, int k) {
  return t->now[k].word + (now_bulk(p, t, k) ? 10 : 5);
}

/* [from, to) of the source, with the 'spawn' of spawn-now site k (inside it) written _MWsn
 * (spawn_bulk: _MWsn_bulk), a word of the same length (task_api.cuh), so that lines and
 * columns stay the user's. */
static void put_spawn_now_text(mw__sb *b, const mw__parsed *p, const mw__task *t, int k, size_t from, size_t to) {
  mw__sb_put(b, p->src + from, t->now[k].word - from);
  mw__sb_puts(b, now_bulk(p, t, k) ? "_MWsn_bulk" : "_MWsn");
  mw__sb_put(b, p->src + now_word_end(p, t, k), to - now_word_end(p, t, k));
}

/* The task that spawn-now site k of t spawns when the pair 'f = spawn(c, args); await(f);' is
 * written fused (task_api.cuh: mw_direct_end): c's body may run at the spawn
 * (t_direct), the spawn is no spawn_bulk, and no preprocessor line is inside the pair (the
 * fused form's own #ifdef would cut the user's #if ... #endif); else NULL. */
static const mw__task *now_fused(const mw__parsed *p, const mw__task *t, int k) {
  const mw__task *c = &p->tasks[t->now[k].task];
  if (now_bulk(p, t, k) || c->block || !t_direct(p, c)) return NULL;
  int line_start = 0;
  for (size_t i = t->now[k].stmt; i < t->now[k].end; ++i) {
    const char ch = p->src[i];
    if (ch == '\n') line_start = 1;
    else if (ch == '#' && line_start) return NULL;
    else if (ch != ' ' && ch != '\t') line_start = 0;
  }
  return c;
}

/* The fused pair of spawn-now site k (now_fused: callee c):
 *   if ((_mw_dr = mw_dtry__c(.., &(f), &_mw_da_c, args)) != 1) { if (_mw_dr == 0) f = _MWsn(c,
 *   _mw_da_c.p...); await(f); }
 * where mw_dtry__c runs c's body at once when it may (1: f complete in its handle; 2: f must be
 * awaited, a failure or a wide result; 0: not run, its arguments kept in _mw_da_c for the
 * spawn-now), so a child that ran here skips the await and the spawn's expression altogether:
 * the hop 21 % faster (bench/NOTES.md, v88). With -DMW_NO_DIRECT_FUSE, a variant, the pair as
 * written. Each form on the user's lines and columns (#line). */
static void put_fused_pair(mw__sb *b, const place *at, const mw__task *t, int k, const mw__task *c) {
  const mw__parsed *p = at->p;
  const mw__now_site *q = &t->now[k];
  size_t flen = 0;
  while (id_char(p->src[q->stmt + flen])) ++flen;
  const int line = body_line_at(p, t, q->stmt);
  mw__sb_puts(b, "\n#ifndef MW_NO_DIRECT_FUSE");
  /* the call's own words on the spawn's line, the arguments at their line and column */
  put_line(b, at, body_line_at(p, t, q->word));
  mw__sb_printf(b, "if ((_mw_dr = mw_dtry__%s(_c, _mw_kbase, __LINE__, &(%.*s), &_mw_da_%s", c->name, (int)flen,
                p->src + q->stmt, c->name);
  put_line(b, at, body_line_at(p, t, q->args));
  put_column(b, p, q->args);
  if (p->src[q->args] == ',') mw__sb_put(b, p->src + q->args, q->close - q->args);
  mw__sb_printf(b, ")) != 1) { if (_mw_dr == 0) %.*s = _MWsn(%s", (int)flen, p->src + q->stmt, c->name);
  for (int i = 0; i < c->nparams; ++i) mw__sb_printf(b, ", _mw_da_%s.%s", c->name, c->params[i].name);
  mw__sb_puts(b, ");");
  /* the lines between the spawn's ')' and its ';', so that the await stays on its own line:
   * its resume point is the line */
  for (size_t i = q->close; i < q->semi; ++i)
    if (p->src[i] == '\n') mw__sb_puts(b, "\n");
  mw__sb_put(b, p->src + q->semi, q->end - q->semi); /* what is between, and the await */
  mw__sb_puts(b, " }\n#else");
  put_line(b, at, line);
  put_column(b, p, q->stmt);
  put_spawn_now_text(b, p, t, k, q->stmt, q->end);
  mw__sb_puts(b, "\n#endif");
  put_line(b, at, body_line_at(p, t, q->end));
  put_column(b, p, q->end);
}

/* The body's text as written, at the user's lines and columns: a spawn that the next statement
 * awaits calls the spawn-now form (put_spawn_now_text), or with fuse set is the fused pair where
 * the callee allows it (put_fused_pair). */
static void put_body_text(mw__sb *b, const place *at, const mw__task *t, int fuse) {
  const mw__parsed *p = at->p;
  put_line(b, at, t->body_line);
  /* pad to the brace's column so that column numbers match too */
  put_column(b, p, t->body_start);
  size_t from = t->body_start;
  for (int k = 0; k < t->nnow; ++k) {
    const mw__task *c = fuse ? now_fused(p, t, k) : NULL;
    if (c) {
      mw__sb_put(b, p->src + from, t->now[k].stmt - from);
      put_fused_pair(b, at, t, k, c);
      from = t->now[k].end;
    } else {
      put_spawn_now_text(b, p, t, k, from, now_word_end(p, t, k));
      from = now_word_end(p, t, k);
    }
  }
  mw__sb_put(b, p->src + from, t->body_end + 1 - from);
}

/* The variables of task t's fused pairs (put_fused_pair): what mw_dtry__c said, and the
 * arguments of each task c it spawns so. */
static void put_fused_temps(mw__sb *b, const mw__parsed *p, const mw__task *t) {
  int any = 0;
  for (int k = 0; k < t->nnow; ++k) {
    const mw__task *c = now_fused(p, t, k);
    if (!c) continue;
    int before = 0;
    for (int j = 0; j < k && !before; ++j) before = now_fused(p, t, j) == c;
    if (before) continue;
    if (!any) mw__sb_puts(b, "#ifndef MW_NO_DIRECT_FUSE\n  [[maybe_unused]] int _mw_dr;\n");
    any = 1;
    mw__sb_printf(b, "  [[maybe_unused]] mw_args_%s _mw_da_%s;\n", c->name, c->name);
  }
  if (any) mw__sb_puts(b, "#endif\n");
}

/* The fast body of a self-contained task t (task_api.cuh, "the fast body"): the same text with
 * the words of the task language switched to MW_SPAWN_FAST and MW_AWAIT_FAST (put_program), no
 * resume points, and a frame made as an elided spawn makes it (value-initialized, the
 * arguments in) whose parameters and plain locals the body copies into variables of its own,
 * as a real body does (for_kept_names), an array local a reference into it. */
static void put_copy_fast(mw__sb *b, const char *n, size_t len) {
  mw__sb_printf(b, "  [[maybe_unused]] decltype(_mw_fr.%.*s) %.*s = _mw_fr.%.*s;\n", (int)len, n, (int)len, n,
                (int)len, n);
}
static void put_task_fast(mw__sb *b, const place *at, const mw__task *t) {
  mw__sb_printf(b,
                "__device__ mw_frame_%s::_mw_ret_t mw_frame_%s::_mw_fast(mw_ctx *_c, mw_u32 _mw_kbase, mw_args_%s _mw_a) {\n"
                "  const unsigned lane = _c->lane;\n  const unsigned index = _c->index;\n"
                "  (void)lane;\n  (void)index;\n  (void)_mw_kbase;\n"
                "  [[maybe_unused]] mw_frame_%s _mw_fr = mw_frame_%s();\n  static_cast<mw_args_%s &>(_mw_fr) = _mw_a;\n",
                t->name, t->name, t->name, t->name, t->name, t->name);
  for_kept_names(b, t, put_copy_fast);
  for (int k = 0; k < t->nlocals; ++k) {
    const char *d = t->locals[k].decl;
    mw__declarator dc;
    while (mw__next_declarator(t->locals[k].decl, &d, &dc))
      if (!dc.plain && !name_taken(dc.name, dc.len))
        mw__sb_printf(b, "  [[maybe_unused]] decltype(_mw_fr.%.*s) &%.*s = _mw_fr.%.*s;\n", (int)dc.len, dc.name,
                      (int)dc.len, dc.name, (int)dc.len, dc.name);
  }
  put_spawn_temps(b, at->p, t, 1);
  put_body_text(b, at, t, 0);
  mw__sb_puts(b, "\n  return _mw_ret_t();\n}\n");
}

/* The integer types protocol.h expects from its includer, as the device has them (builtin types:
 * NVRTC has no <stdint.h>); sim_shim.h declares the same for the sim. */
#define DEVICE_INTS                                                                               \
  "typedef unsigned char mw_u8;\ntypedef unsigned short mw_u16;\n"                                \
  "typedef unsigned int mw_u32;\ntypedef int mw_i32;\n"                                           \
  "typedef unsigned long long mw_u64;\ntypedef long long mw_i64;\n"

/* The kind table's entry of task t (task_api.cuh, mw_kind_info). */
static void put_kind_info(mw__sb *b, const place *at, const mw__task *t) {
  unsigned futargs = 0;
  for (int q = 0; q < t->nparams; ++q)
    if (t->params[q].type == MW_T_FUTURE) futargs |= 1u << (t->params[q].offset / 8);
  mw__sb_printf(b, "  {%s, (mw_u32)sizeof(mw_%s::mw_frame_%s), %uu, 0x%xu, %s}, /* %u %s */\n",
                rtype_name(t->ret), at->tag, t->name, (t->args_size + 7u) / 8u * 8u, futargs,
                kind_flags(at->p, t), t->kind, t->name);
}

/* The beginning of every translation unit: the integer types (sim: the shim), the frame sizes,
 * protocol.h and the task API. part: 0 the executor, 1 a program, 2 the link part, 3 all in
 * one unit. */
static void put_prelude(mw__sb *b, const mw__gen_opts *opts, const char *what, int part) {
  mw__sb_printf(b, "/* generated by moonwarp: %s */\n", what);
  if (opts->sim && part == 2) {
    /* the link part names no lane code: the shim's qualifiers and integer types are enough, and
     * it compiles in a fraction of the time */
    mw__sb_puts(b, "#define MW_SIM 1\n#define MW_SIM_PART 1\n#define MW_SIM_LINK 1\n"
                   "typedef unsigned char mw_u8;\ntypedef unsigned short mw_u16;\n"
                   "typedef unsigned int mw_u32;\ntypedef unsigned long long mw_u64;\n"
                   "typedef int mw_i32;\ntypedef long long mw_i64;\n"
                   "#pragma GCC visibility push(hidden)\n"
                   "#define __device__\n#define __global__\n#define __forceinline__ inline\n"
                   "#define __noinline__ __attribute__((noinline))\n");
  } else if (opts->sim) {
    mw__sb_puts(b, "#define MW_SIM 1\n");
    /* a program or the link part: the executor's part defines the shim's entry points */
    if (part == 1) mw__sb_puts(b, "#define MW_SIM_PART 1\n");
    mw__sb_puts(b, mw__src_sim_shim_h); /* with the integer types, as NVRTC gets DEVICE_INTS */
    mw__sb_puts(b, "\n#include <cstdint>\n#include <cstddef>\n#include <cstring>\n");
  } else {
    mw__sb_puts(b,
                DEVICE_INTS
                "typedef signed char int8_t;\ntypedef unsigned char uint8_t;\n"
                "typedef short int16_t;\ntypedef unsigned short uint16_t;\n"
                "typedef int int32_t;\ntypedef unsigned int uint32_t;\n"
                "typedef long int64_t;\ntypedef unsigned long uint64_t;\n");
  }
  if (part == 3) mw__sb_puts(b, "#define MW_KIND_TABLE_BY_VALUE 1\n"); /* one unit */
  if (part == 3 && opts->grids) mw__sb_puts(b, "#define MW_GRIDS 1\n");
  mw__sb_printf(b, "#define MW_FRAME_PAYLOAD %u\n", opts->frame_bytes - 64u);
  mw__sb_printf(b, "#define MW_LSTACK_BYTES %u\n", mw__lane_stack_bytes(opts->frame_bytes));
  mw__sb_puts(b, mw__src_protocol_h);
  mw__sb_puts(b, "\n");
  mw__sb_puts(b, mw__src_task_api_cuh);
  /* what the generated code of a program reads through functions, not members: a program's
   * defines may be any name that is not reserved (_...), e.g. h or resume */
  mw__sb_puts(b, "\n__device__ __forceinline__ mw_u32 _mw_resume(const mw_ctx *_mw_c) "
                 "{ return _mw_c->resume; }\n"
                 "__device__ __forceinline__ mw_u64 _mw_handle(future _mw_f) { return _mw_f.h; }\n");
}

/* One program in its namespace mw_<tag>: its defines, helper code, task frames and bodies, and
 * what the image's link part names: the kinds' table entries (mw_<tag>_kinds) and the
 * dispatch functions (mw_<tag>_dispatch, and mw_<tag>_dispatch_leaf for the kinds that never
 * await), which take the task's index in the program and the program's first kind. */
static void put_program(mw__sb *b, const place *at, int one_unit) {
  const mw__parsed *p = at->p;
  put_defines(b, at);
  put_helpers(b, at, 1);
  mw__sb_printf(b, "\n#line 1 \"<moonwarp>\"\nnamespace mw_%s {\n", at->tag);
  put_helpers(b, at, 0);
  mw__sb_puts(b, "\n#line 1 \"<moonwarp>\"\n");
  place with = *at;
  unsigned char *self = self_contained(p);
  with.self = self;
  for (int k = 0; k < p->ntasks; ++k) put_task_decls(b, &with, &p->tasks[k]);
  for (int k = 0; k < p->ntasks; ++k) put_task_body(b, at, &p->tasks[k]);
  int nfast = 0;
  for (int k = 0; self && k < p->ntasks; ++k) nfast += self[k];
  if (nfast) { /* the fast bodies, with the words of the task language switched (task_api.cuh) */
    mw__sb_puts(b, "#ifdef MW_ELIDE\n#undef MW_SPAWN_SEL\n#undef MW_SPAWN_NOW_SEL\n#undef MW_AWAIT_SEL\n"
                   "#define MW_SPAWN_SEL MW_SPAWN_FAST\n#define MW_SPAWN_NOW_SEL MW_SPAWN_FAST\n"
                   "#define MW_AWAIT_SEL MW_AWAIT_FAST\n");
    for (int k = 0; k < p->ntasks; ++k)
      if (self[k]) put_task_fast(b, at, &p->tasks[k]);
    mw__sb_puts(b, "#undef MW_SPAWN_SEL\n#undef MW_SPAWN_NOW_SEL\n#undef MW_AWAIT_SEL\n"
                   "#define MW_SPAWN_SEL MW_SPAWN_REAL\n#define MW_SPAWN_NOW_SEL MW_SPAWN_NOW_REAL\n"
                   "#define MW_AWAIT_SEL MW_AWAIT_\n#endif\n");
  }
  free(self);
  mw__sb_printf(b, "\n#line 1 \"<moonwarp>\"\n} /* namespace mw_%s */\n", at->tag);
  put_undefs(b, p); /* what follows is the runtime's: the program's defines do not reach it */
  if (one_unit) return; /* the link part reads the frames and calls the bodies itself */
  mw__sb_printf(b, "extern __device__ const mw_kind_info mw_%s_kinds[] = {\n", at->tag);
  for (int k = 0; k < p->ntasks; ++k) put_kind_info(b, at, &p->tasks[k]);
  if (!p->ntasks) mw__sb_puts(b, "  {MW_RT_VOID, 0u, 0u, 0u, 0u},\n");
  mw__sb_puts(b, "};\n");
  for (int leaf = 0; leaf < 2; ++leaf) {
    mw__sb_printf(b,
                  "__device__ void mw_%s_dispatch%s(mw_ctx *c, mw_u32 local, mw_u32 base, mw_u8 *fr) {\n"
                  "  switch (local) {\n",
                  at->tag, leaf ? "_leaf" : "");
    for (int k = 0; k < p->ntasks; ++k)
      if (!leaf || task_is_leaf(p, &p->tasks[k])) put_dispatch_case(b, at, &p->tasks[k], (unsigned)k);
    mw__sb_puts(b, "  default: mw_fail(c, MW_FAIL_BAD_KIND, \"no such task kind in the executor\");\n"
                   "  }\n}\n");
  }
}

/* Where each kind below nk is: prog and task index (prog -1: no program holds it). malloc'd. */
typedef struct kind_at {
  int prog, task;
} kind_at;

static kind_at *kinds_at(mw__parsed *const *progs, int nprogs, uint32_t nk) {
  kind_at *at = malloc(sizeof *at * (nk ? nk : 1u));
  if (!at) return NULL;
  for (uint32_t k = 0; k < (nk ? nk : 1u); ++k) at[k].prog = -1;
  for (int i = 0; i < nprogs; ++i)
    for (int k = 0; k < progs[i]->ntasks; ++k)
      if (progs[i]->tasks[k].kind < nk && at[progs[i]->tasks[k].kind].prog < 0) {
        at[progs[i]->tasks[k].kind].prog = i;
        at[progs[i]->tasks[k].kind].task = k;
      }
  return at;
}

/* The link part's kind table of an image linked from parts: pointers to the programs' entries
 * (kinds no program holds, replaced or not yet reused, point at an empty entry). */
static void put_kind_pointers(mw__sb *b, mw__parsed *const *progs, const kind_at *owner,
                              const mw__gen_opts *opts, uint32_t nk) {
  mw__sb_puts(b, "static __device__ const mw_kind_info mw_no_kind = {MW_RT_VOID, 0u, 0u, 0u, 0u};\n");
  mw__sb_printf(b, "extern __device__ const mw_u32 mw_kind_count = %uu;\n", nk ? nk : 1u);
  mw__sb_puts(b, "extern __device__ const mw_kind_info *const mw_kind_tab[] = {\n");
  for (uint32_t kind = 0; kind < (nk ? nk : 1u); ++kind) {
    const kind_at *o = &owner[kind];
    if (o->prog < 0) {
      mw__sb_printf(b, "  &mw_no_kind, /* %u */\n", kind);
      continue;
    }
    place at = place_of(progs[o->prog], o->prog, opts->canon);
    mw__sb_printf(b, "  &mw_%s_kinds[%d], /* %u %s */\n", at.tag, o->task, kind,
                  progs[o->prog]->tasks[o->task].name);
  }
  mw__sb_puts(b, "};\n");
}

/* The image's link part: the kind table, the kinds' names (and files, sim) and mw_dispatch /
 * mw_dispatch_leaf, which call the programs' dispatch functions; kinds come from each task's
 * kind field (a program's tasks have consecutive kinds). Where the programs are not in the
 * same translation unit, it declares what it names of them. */
static void put_link(mw__sb *b, mw__parsed *const *progs, int nprogs, const mw__gen_opts *opts,
                     int declare) {
  int one_unit = !declare; /* the programs are in this unit: their frames and bodies are seen */
  uint32_t nk = 0;
  for (int i = 0; i < nprogs; ++i)
    for (int k = 0; k < progs[i]->ntasks; ++k)
      if (progs[i]->tasks[k].kind + 1 > nk) nk = progs[i]->tasks[k].kind + 1;
  if (declare)
    for (int i = 0; i < nprogs; ++i) {
      place at = place_of(progs[i], i, opts->canon);
      mw__sb_printf(b,
                    "extern __device__ const mw_kind_info mw_%s_kinds[];\n"
                    "__device__ void mw_%s_dispatch(mw_ctx *, mw_u32, mw_u32, mw_u8 *);\n"
                    "__device__ void mw_%s_dispatch_leaf(mw_ctx *, mw_u32, mw_u32, mw_u8 *);\n",
                    at.tag, at.tag, at.tag);
    }
  /* the dynamic shared memory each worker CTA needs (protocol.h, Block tasks), which the cuda
   * backend reads at load: none without a block task; in one unit, where every block task's
   * mw_shared_T is seen, the largest of them rounded up to 128 bytes (the less each CTA keeps,
   * the more CTAs an SM holds); else the whole MW_BLOCK_SMEM */
  int blocks = 0;
  for (int i = 0; i < nprogs; ++i)
    for (int k = 0; k < progs[i]->ntasks; ++k) blocks |= progs[i]->tasks[k].block;
  if (!opts->sim && blocks && one_unit) {
    mw__sb_puts(b, "static constexpr __device__ mw_u32 mw_block_area_need() {\n  mw_u32 m = 0;\n");
    for (int i = 0; i < nprogs; ++i) {
      const place at = place_of(progs[i], i, opts->canon);
      for (int k = 0; k < progs[i]->ntasks; ++k)
        if (progs[i]->tasks[k].block)
          mw__sb_printf(b, "  if (sizeof(mw_%s::mw_shared_%s) > m) m = sizeof(mw_%s::mw_shared_%s);\n", at.tag,
                        progs[i]->tasks[k].name, at.tag, progs[i]->tasks[k].name);
    }
    mw__sb_puts(b, "  return (m + 127u) / 128u * 128u;\n}\n");
  }
  if (!opts->sim) {
    mw__sb_puts(b, "extern \"C\" __device__ const mw_u32 mw_block_area_bytes = ");
    if (!blocks) mw__sb_puts(b, "0u;\n");
    else mw__sb_puts(b, one_unit ? "mw_block_area_need();\n" : "MW_BLOCK_SMEM;\n");
    /* whether the image launches block tasks as grids (put_grids): a word in every image, so
     * that the load reads it rather than asks for a symbol that may be absent */
    mw__sb_printf(b, "extern \"C\" __device__ const mw_u32 mw_grid_image = %uu;\n", one_unit && opts->grids ? 1u : 0u);
  }
  kind_at *owner = kinds_at(progs, nprogs, nk);
  if (!owner) {
    b->oom = 1;
    return;
  }
  if (one_unit) { /* the entries themselves, in constant memory (64 KiB in all: device memory
                  * past 2048 kinds); kinds no program holds are empty */
    mw__sb_printf(b, "%s const mw_kind_info mw_kinds[] = {\n", nk > 2048 ? "__device__" : "__constant__");
    for (uint32_t kind = 0; kind < (nk ? nk : 1u); ++kind) {
      const kind_at *o = &owner[kind];
      if (o->prog < 0) {
        mw__sb_printf(b, "  {MW_RT_VOID, 0u, 0u, 0u, 0u}, /* %u */\n", kind);
        continue;
      }
      place at = place_of(progs[o->prog], o->prog, opts->canon);
      put_kind_info(b, &at, &progs[o->prog]->tasks[o->task]);
    }
    mw__sb_printf(b, "};\n__device__ const mw_kind_info *mw_kind(mw_u32 kind) {\n"
                     "  return &mw_kinds[kind < %uu ? kind : 0u];\n}\n", nk ? nk : 1u);
  } else
    put_kind_pointers(b, progs, owner, opts, nk);
  free(owner);
  mw__sb_puts(b, "__device__ const char *mw_kind_name(mw_u32 kind) {\n  switch (kind) {\n");
  for (int i = 0; i < nprogs; ++i)
    for (int k = 0; k < progs[i]->ntasks; ++k)
      mw__sb_printf(b, "  case %uu: return \"%s\";\n", progs[i]->tasks[k].kind,
                    progs[i]->tasks[k].name);
  mw__sb_puts(b, "  default: return \"?\";\n  }\n}\n");
  if (opts->sim) { /* the file of a kind's lines: the sim's convergence check names places */
    mw__sb_puts(b, "__device__ const char *mw_kind_file(mw_u32 kind) {\n  switch (kind) {\n");
    for (int i = 0; i < nprogs; ++i) {
      place at = place_of(progs[i], i, opts->canon);
      for (int k = 0; k < progs[i]->ntasks; ++k) {
        mw__sb_printf(b, "  case %uu: return ", progs[i]->tasks[k].kind);
        put_file(b, &at);
        mw__sb_puts(b, ";\n");
      }
    }
    mw__sb_puts(b, "  default: return \"?\";\n  }\n}\n");
  }
  /* one step of a task body, on its frame in the lane stacks; and the kinds that never await,
   * run as plain calls by the await that claims them (two functions: the call graph stays
   * acyclic) */
  for (int leaf = 0; leaf < 2; ++leaf) {
    mw__sb_printf(b, "__device__ void mw_dispatch%s(mw_ctx *c, mw_u32 kind, mw_u8 *fr) {\n  switch (kind) {\n",
                  leaf ? "_leaf" : "");
    for (int i = 0; i < nprogs; ++i) {
      place at = place_of(progs[i], i, opts->canon);
      for (int k = 0; k < progs[i]->ntasks; ++k) {
        const mw__task *t = &progs[i]->tasks[k];
        if (leaf && !task_is_leaf(progs[i], t)) continue;
        if (one_unit) { /* the body itself, as a program's dispatch calls it */
          if (t->ret == MW_T_VOID)
            mw__sb_printf(b, "  case %uu: ((mw_%s::mw_frame_%s *)fr)->_mw_body(c, %uu); break;\n",
                          t->kind, at.tag, t->name, progs[i]->tasks[0].kind);
          else
            mw__sb_printf(b,
                          "  case %uu: { auto r = ((mw_%s::mw_frame_%s *)fr)->_mw_body(c, %uu); "
                          "mw_store_result(c, r); break; }\n",
                          t->kind, at.tag, t->name, progs[i]->tasks[0].kind);
          continue;
        }
        mw__sb_printf(b, "  case %uu: mw_%s_dispatch%s(c, %du, %uu, fr); break;\n", t->kind, at.tag,
                      leaf ? "_leaf" : "", k, progs[i]->tasks[0].kind);
      }
    }
    mw__sb_printf(b,
                  "  default: mw_fail(c, MW_FAIL_BAD_KIND, \"no such %stask kind in the executor\");\n"
                  "  }\n}\n",
                  leaf ? "leaf " : "");
  }
}

/* The executor's entry points: the kernel, and on sim the host's. */
static void put_entry(mw__sb *b, const mw__gen_opts *opts) {
  mw__sb_puts(b, "extern \"C\" __global__ void __launch_bounds__(128, MW_MIN_CTAS) mw_executor_kernel(mw_state "
                 "*st) { mw_executor(st); }\n");
  if (opts->sim)
    mw__sb_puts(b,
                "extern \"C\" __attribute__((visibility(\"default\"))) void mw_sim_kernel(void "
                "*st) { mw_executor((mw_state *)st); }\n"
                "extern \"C\" __attribute__((visibility(\"default\"))) unsigned mw_sim_protocol "
                "= MW_PROTOCOL_VERSION;\n");
}

/* The executor's source: its three files in their order (runtime.cuh says what each holds). */
static void put_executor(mw__sb *b) {
  mw__sb_puts(b, mw__src_runtime_cuh);
  mw__sb_puts(b, mw__src_device_api_cuh);
  mw__sb_puts(b, mw__src_executor_cuh);
}

int mw__grids_of(mw__parsed *const *progs, int nprogs, const mw__gen_opts *opts) {
  if (!opts->grids || opts->sim) return 0;
  for (int i = 0; i < nprogs; ++i)
    for (int k = 0; k < progs[i]->ntasks; ++k)
      if (progs[i]->tasks[k].block) return 1;
  return 0;
}

/* A kernel for each block task (its instances as a grid: protocol.h, Block tasks, "As a
 * grid") and mw_grid_launch, which launches one from the device. */
static void put_grids(mw__sb *b, mw__parsed *const *progs, int nprogs, const mw__gen_opts *opts) {
  for (int i = 0; i < nprogs; ++i) {
    const place at = place_of(progs[i], i, opts->canon);
    for (int k = 0; k < progs[i]->ntasks; ++k)
      if (progs[i]->tasks[k].block)
        mw__sb_printf(b,
                      "extern \"C\" __global__ void __launch_bounds__(MW_CTA_WARPS * 32, 4) mw_grid_%u(mw_state *st, "
                      "mw_u32 f, mw_u32 first) {\n  mw_grid_run<mw_%s::mw_frame_%s>(st, f, first, %uu);\n}\n",
                      progs[i]->tasks[k].kind, at.tag, progs[i]->tasks[k].name, progs[i]->tasks[0].kind);
  }
  mw__sb_puts(b, "__device__ bool mw_grid_launch(mw_state *st, mw_u32 kind, mw_u32 f, mw_u32 first, mw_u32 count) {\n"
                 "  switch (kind) {\n");
  for (int i = 0; i < nprogs; ++i)
    for (int k = 0; k < progs[i]->ntasks; ++k)
      if (progs[i]->tasks[k].block)
        mw__sb_printf(b,
                      "  case %uu: mw_grid_%u<<<count, MW_CTA_WARPS * 32, mw_block_area_need(), "
                      "cudaStreamFireAndForget>>>(st, f, first); break;\n",
                      progs[i]->tasks[k].kind, progs[i]->tasks[k].kind);
  mw__sb_puts(b, "  default: return false;\n  }\n  return cudaGetLastError() == cudaSuccess;\n}\n"
                 /* launched once from the host as the image is loaded, before the executor: a
                  * launch from the device (backend_cuda.c, cuda_load) */
                 "__global__ void mw_grid_prime_child() {}\n"
                 "extern \"C\" __global__ void mw_grid_prime() {\n"
                 "  mw_grid_prime_child<<<1, 32, 0, cudaStreamFireAndForget>>>();\n}\n");
}

char *mw__generate(mw__parsed *const *progs, int nprogs, const mw__gen_opts *opts) {
  mw__sb b = {0};
  mw__gen_opts o = *opts;
  o.grids = mw__grids_of(progs, nprogs, opts);
  put_prelude(&b, &o, "the device runtime and the task programs", 3);
  put_executor(&b);
  for (int i = 0; i < nprogs; ++i) {
    place at = place_of(progs[i], i, opts->canon);
    put_program(&b, &at, 1);
  }
  put_link(&b, progs, nprogs, &o, 0);
  if (o.grids) put_grids(&b, progs, nprogs, &o);
  put_entry(&b, &o);
  return mw__sb_take(&b);
}

char *mw__generate_part(mw__gen_part part, mw__parsed *const *progs, int nprogs,
                        const mw__gen_opts *opts) {
  mw__sb b = {0};
  if (part == MW_GEN_EXECUTOR) {
    put_prelude(&b, opts, "the device runtime", 0);
    put_executor(&b);
    put_entry(&b, opts);
  } else if (part == MW_GEN_PROGRAM) {
    put_prelude(&b, opts, "a task program", 1);
    place at = place_of(progs[0], 0, opts->canon);
    put_program(&b, &at, 0);
  } else {
    put_prelude(&b, opts, "the kind table and dispatch of an executor image", 2);
    put_link(&b, progs, nprogs, opts, 1);
  }
  return mw__sb_take(&b);
}

/* ---- the compiler's log in the user's terms --------------------------------------------- */

static int starts(const char *s, const char *w) { return !strncmp(s, w, strlen(w)); }

/* the first w in [s, e), or NULL */
static const char *find(const char *s, const char *e, const char *w) {
  size_t n = strlen(w);
  for (; s + n <= e; ++s)
    if (!strncmp(s, w, n)) return s;
  return NULL;
}

/* a closing quote of gcc's (’ in UTF-8, or ') at s: its length, else 0 */
static size_t quote_at(const char *s) {
  if (starts(s, "\xe2\x80\x99") || starts(s, "\xe2\x80\x98")) return 3;
  return *s == '\'' || *s == '"' ? 1 : 0;
}

/* Skips n comma-separated items of a parameter list at s (top level); returns the position of
 * the ',' or ')' after the last, or NULL. */
static const char *skip_items(const char *s, int n) {
  int depth = 0;
  for (; *s; ++s) {
    if (*s == '(' || *s == '<' || *s == '[') ++depth;
    else if ((*s == ')' || *s == '>' || *s == ']') && depth > 0) --depth;
    else if ((*s == ',' || *s == ')') && depth == 0 && --n == 0) return s;
  }
  return NULL;
}

/* The task's name in a generated spawn function's name at s (mw_spawn__f, mw_spawn_bulk__f,
 * mw_spawn_now__f, mw_spawn_fast__f, and mw_dtry__f of the fused pair), *bulk set for
 * spawn_bulk, *skip the count of its parameters before the task's (the context, the kind's
 * base, the line, ...); NULL if s names none. */
static const char *spawn_fn_task(const char *s, int *bulk, int *skip) {
  static const char *const prefixes[] = {"mw_spawn__", "mw_spawn_bulk__", "mw_spawn_now__", "mw_spawn_fast__",
                                         "mw_dtry__"};
  static const int skips[] = {3, 4, 3, 3, 5};
  for (int k = 0; k < 5; ++k)
    if (starts(s, prefixes[k])) {
      *bulk = k == 1;
      *skip = skips[k];
      return s + strlen(prefixes[k]);
    }
  return NULL;
}

/* One line of the log with the generated names put in the user's terms. */
static void put_user_line(mw__sb *b, const char *s, const char *end) {
  while (s < end) {
    if ((starts(s, "mw_p") || starts(s, "mw_q")) && ((s[4] >= '0' && s[4] <= '9') || (s[4] >= 'a' && s[4] <= 'f'))) { /* mw_p0:: */
      const char *p = s + 4;
      while (p < end && ((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) ++p;
      if (starts(p, "::")) {
        s = p + 2;
        continue;
      }
    }
    if (starts(s, "((")) { /* ((mw_p0::mw_frame_f*)this)-> */
      const char *p = find(s, end, "*)this)->"), *f = find(s, end, "mw_frame_");
      if (p && f && f < p && p - s < 100) {
        s = p + 9;
        continue;
      }
    }
    if (starts(s, "mw_frame_") || starts(s, "mw_args_")) { /* mw_frame_f:: mw_args_f:: */
      const char *p = s + (s[3] == 'f' ? 9 : 8);
      while (p < end && id_char(*p)) ++p;
      if (starts(p, "::<anonymous>.")) {
        s = p + 14;
        continue;
      }
      if (starts(p, "::")) {
        s = p + 2;
        continue;
      }
    }
    if (starts(s, "_mw_ret_t")) { /* ‘_mw_ret_t’ {aka ‘int’} -> ‘int’ */
      const char *p = s + 9;
      size_t q = quote_at(p);
      if (q && starts(p + q, " {aka ")) {
        const char *t = p + q + 6;
        size_t q2 = quote_at(t);
        const char *te = t + q2;
        while (te < end && !quote_at(te)) ++te;
        size_t q3 = te < end ? quote_at(te) : 0;
        if (q2 && q3 && te[q3] == '}') {
          mw__sb_put(b, t + q2, (size_t)(te - t - q2));
          s = te;                 /* the closing quote stays */
          mw__sb_put(b, s, q3);
          s += q3 + 1;
          continue;
        }
      }
      mw__sb_puts(b, "the task's result type");
      s += 9;
      continue;
    }
    if (starts(s, "mw_spawned<")) { /* a spawn function's return type: mw_spawned<mw_frame_f, true> */
      const char *p = s + 11;
      int depth = 1;
      while (p < end && depth > 0) depth += *p == '<' ? 1 : *p == '>' ? -1 : 0, ++p;
      if (!depth) {
        mw__sb_puts(b, "future");
        s = p;
        continue;
      }
    }
    if (starts(s, "_MWsn") && !id_char(s[5])) { /* a spawn awaited next, as generated */
      mw__sb_puts(b, "spawn");
      s += 5;
      continue;
    }
    int bulk, skip;
    const char *name = spawn_fn_task(s, &bulk, &skip);
    if (name) { /* mw_spawn__f(mw_ctx*, int, ...) */
      const char *p = name;
      while (p < end && id_char(*p)) ++p;
      mw__sb_printf(b, "%s(%.*s", bulk ? "spawn_bulk" : "spawn", (int)(p - name), name);
      if (bulk) mw__sb_puts(b, ", n");
      if (starts(p, "(mw_ctx*")) {
        const char *q = skip_items(p + 1, skip);
        if (q && q < end) {
          s = q;
          continue;
        }
      }
      mw__sb_puts(b, ", ...)");
      s = p;
      continue;
    }
    if (starts(s, "struct mw_val")) s += 7;
    if (starts(s, "mw_val") && !id_char(s[6])) {
      mw__sb_puts(b, "value(f)");
      s += 6;
      continue;
    }
    mw__sb_put(b, s, 1);
    ++s;
  }
}

/* Whether the n bytes at l start with a digit count and " error(s) detected." */
static int is_tally(const char *l, size_t n) {
  size_t i = 0;
  while (i < n && l[i] >= '0' && l[i] <= '9') ++i;
  return i > 0 && ((n - i == 16 && !memcmp(l + i, " error detected.", 16)) ||
                   (n - i == 17 && !memcmp(l + i, " errors detected.", 17)));
}

/* The user's log (n bytes at log) with each message once: a task's fast body (put_task_fast) is
 * its text compiled a second time, so every message about the text comes twice. A message is
 * a line that is no excerpt (indented or blank) and no note on the one before (": note:",
 * "note: it is parameter"); one seen before is left out with its excerpt and notes. NVRTC's
 * tally of errors is counted again. malloc'd; NULL when out of memory. */
static char *once_each(const char *log, size_t n) {
  /* the messages seen: an open-addressed set of their lines in log (start + 1; 0 free) */
  size_t lines = 1, cap = 2;
  for (size_t i = 0; i < n; ++i) lines += log[i] == '\n';
  while (cap < 2 * lines) cap *= 2;
  size_t *seen = calloc(cap, sizeof *seen);
  if (!seen) return NULL;
  mw__sb o = {0};
  int dup = 0, errors = 0;
  for (size_t i = 0; i < n;) {
    const char *l = log + i, *e = memchr(l, '\n', n - i);
    size_t len = e ? (size_t)(e - l) : n - i, full = e ? len + 1 : len, at = i;
    i += full;
    int attached = !len || l[0] == ' ' || l[0] == '\t'; /* a blank line ends the message before */
    attached |= find(l, l + len, ": note:") != NULL;
    attached |= len >= 21 && !memcmp(l, "note: it is parameter", 21);
    if (attached) {
      if (!dup) mw__sb_put(&o, l, full);
      continue;
    }
    if (is_tally(l, len)) {
      mw__sb_printf(&o, "%d error%s detected.%s", errors, errors == 1 ? "" : "s", e ? "\n" : "");
      continue;
    }
    uint64_t h = 14695981039346656037ull;
    for (size_t k = 0; k < len; ++k) h = (h ^ (unsigned char)l[k]) * 1099511628211ull;
    size_t slot = (size_t)h & (cap - 1);
    dup = 0;
    for (; seen[slot] && !dup; slot = (slot + 1) & (cap - 1)) {
      const char *m = log + seen[slot] - 1, *me = memchr(m, '\n', (size_t)(log + n - m));
      size_t mlen = me ? (size_t)(me - m) : (size_t)(log + n - m);
      dup = mlen == len && !memcmp(m, l, len);
    }
    if (dup) continue;
    seen[slot] = at + 1;
    errors += find(l, l + len, ": error") || find(l, l + len, "): error");
    mw__sb_put(&o, l, full);
  }
  free(seen);
  return mw__sb_take(&o);
}

char *mw__user_log(const char *log, const char *gen_path) {
  mw__sb b = {0};
  size_t glen = gen_path ? strlen(gen_path) : 0;
  int excerpt = 0, val = 0, ambiguous = 0, user_error = 0;
  /* errors at the user's lines: then what the compiler says inside the generated code (the
   * steps of a failed template deduction) is left out too */
  for (const char *s = log; *s;) {
    const char *e = strchr(s, '\n');
    if (!e) e = s + strlen(s);
    if (!(glen && starts(s, gen_path)) && !starts(s, "<moonwarp>") && find(s, e, "error")) {
      const char *c = find(s, e, ": error");
      if (!c) c = find(s, e, "): error");
      if (c && c > s) user_error = 1;
    }
    s = *e ? e + 1 : e;
  }
  for (const char *s = log; *s;) {
    const char *e = strchr(s, '\n');
    if (!e) e = s + strlen(s);
    const char *next = *e ? e + 1 : e;
    const char *loc = NULL; /* past the generated file's name, where the line begins with it */
    if (glen && starts(s, gen_path)) loc = s + glen;
    else if (starts(s, "<moonwarp>")) loc = s + 10;
    int gen_loc = loc && (*loc == ':' || *loc == '(');
    int has_val = find(s, e, "mw_val") != NULL;
    if (find(s, e, "ambiguous") || find(s, e, "more than one") || find(s, e, "no matching"))
      ambiguous |= has_val;
    val |= has_val;
    if (gen_loc && (user_error || !find(s, e, "error"))) { /* a note inside the generated code, and its excerpt */
      excerpt = 1;
      s = next;
      continue;
    }
    if (excerpt && (*s == ' ' || *s == '\t')) {
      s = next;
      continue;
    }
    excerpt = 0;
    const char *arg = find(s, e, "initializing argument ");
    const char *callee = arg ? find(arg, e, "mw_spawn") : NULL;
    while (callee && starts(callee, "mw_spawned")) callee = find(callee + 10, e, "mw_spawn"); /* the return type */
    if (arg && !callee) callee = find(arg, e, "mw_dtry__");
    int bulk = 0, skip = 0;
    const char *name = callee ? spawn_fn_task(callee, &bulk, &skip) : NULL;
    if (name) { /* a spawn's argument: name the task's parameter */
      int n = atoi(arg + 22) - skip;
      const char *p = name;
      while (p < e && id_char(*p)) ++p;
      if (n >= 1) mw__sb_printf(&b, "note: it is parameter %d of task '%.*s'\n", n, (int)(p - name), name);
      s = next;
      continue;
    }
    if (find(s, e, "mw_val::operator")) {
      s = next; /* one of value(f)'s conversions, in a list of candidates */
      continue;
    }
    const char *tally = glen ? find(s, e, " detected in the compilation of \"") : NULL;
    if (tally && find(tally, e, gen_path)) { /* "3 errors detected in the compilation of "moonwarp.cu"." */
      mw__sb_printf(&b, "%.*s detected.\n", (int)(tally - s), s);
      s = next;
      continue;
    }
    if (find(s, e, " of moonwarp.cu)") && find(s, e, "(declared at line")) {
      s = next; /* a candidate declared in the generated code */
      continue;
    }
    const char *mf = find(s, e, "In member function ");
    if (!mf) mf = find(s, e, "In static member function ");
    const char *body = mf ? find(mf, e, "::_mw_body(mw_ctx*, mw_u32)") : NULL;
    if (mf && !body) body = find(mf, e, "::_mw_fast(mw_ctx*, mw_u32, ");
    if (body) { /* In member function ‘... mw_frame_f::_mw_body(mw_ctx*, mw_u32)’: (or _mw_fast) */
      const char *name = body;
      while (name > mf && id_char(name[-1])) --name;
      if (starts(name, "mw_frame_")) {
        name += 9;
        put_user_line(&b, s, mf);
        mw__sb_printf(&b, "In task '%.*s':\n", (int)(body - name), name);
        s = next;
        continue;
      }
    }
    if (gen_loc) {
      mw__sb_puts(&b, "<moonwarp>");
      s = loc;
    }
    put_user_line(&b, s, e);
    if (*e) mw__sb_puts(&b, "\n");
    s = next;
  }
  if (ambiguous && val)
    mw__sb_puts(&b, "note: value(f) converts to every arithmetic type; where more than one would "
                    "do (a switch, an overloaded function such as max or sqrt) say which with a "
                    "cast, as in (long)value(f)\n");
  char *once = b.oom ? NULL : once_each(b.s ? b.s : "", b.n);
  if (!once) return mw__sb_take(&b);
  mw__sb_free(&b);
  return once;
}

/* ---- canonical places in the user's terms ------------------------------------------------ */

int mw__user_line(const mw__parsed *p, int line) {
  return line > 0 ? line + p->first_line - 1 : line;
}

/* The tag of a place name at s ("<mw-p3>", "<mw-q1f0a>") in tag, its length in *len; 0 if none. */
static int place_at(const char *s, size_t *len, char tag[24]) {
  size_t n = strlen(MW_PLACE_PREFIX), k = n;
  if (strncmp(s, MW_PLACE_PREFIX, n)) return 0;
  while (k - n < 23 && ((s[k] >= '0' && s[k] <= '9') || (s[k] >= 'a' && s[k] <= 'z'))) ++k;
  if (k == n || s[k] != '>') return 0;
  memcpy(tag, s + n, k - n);
  tag[k - n] = 0;
  *len = k + 1;
  return 1;
}

char *mw__user_places(const char *text, mw__parsed *const *progs, int nprogs) {
  mw__sb b = {0};
  while (*text) {
    size_t len = 0;
    char tag[24], t[24];
    const mw__parsed *p = NULL;
    if (place_at(text, &len, tag))
      for (int i = 0; i < nprogs && !p; ++i) {
        mw__prog_tag(progs[i], i, t);
        if (!strcmp(t, tag)) p = progs[i];
      }
    if (!p) {
      mw__sb_put(&b, text++, 1);
      continue;
    }
    mw__sb_puts(&b, p->file);
    text += len;
    char open = *text, *end = NULL;
    long line = 0;
    if ((open == ':' || open == '(') && text[1] >= '0' && text[1] <= '9') line = strtol(text + 1, &end, 10);
    if (end && (open == ':' || *end == ')') && line > 0 && line < 100000000) {
      mw__sb_printf(&b, "%c%d", open, mw__user_line(p, (int)line));
      text = end;
    }
  }
  return mw__sb_take(&b);
}
