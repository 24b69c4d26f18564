/* generate.c - turns parsed programs into one device translation unit: state-machine task bodies,
 * typed spawn functions, the dispatch switch and the executor entry, with #line directives so
 * compiler messages name the user's file and line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "program.h"
#include "util.h"

extern const char mw__src_protocol_h[];
extern const char mw__src_runtime_cuh[];
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

static void put_line(mw__sb *b, int line, const char *file) {
  mw__sb_printf(b, "\n#line %d ", line);
  put_quoted(b, file);
  mw__sb_puts(b, "\n");
}

/* helper code: the source with task declarations blanked (newlines kept), #includes hoisted */
static void put_helpers(mw__sb *b, const mw__parsed *p, int includes) {
  size_t n = strlen(p->src);
  char *h = mw__strndup(p->src, n);
  if (!h) {
    b->oom = 1;
    return;
  }
  for (int i = 0; i < p->ntasks; ++i)
    for (size_t k = p->tasks[i].decl_start; k <= p->tasks[i].decl_end && k < n; ++k)
      if (h[k] != '\n') h[k] = ' ';
  /* split by lines: #include lines go before the namespace, the rest inside */
  put_line(b, p->first_line, p->file);
  char *line = h;
  while (line && *line) {
    char *nl = strchr(line, '\n');
    size_t len = nl ? (size_t)(nl - line) + 1 : strlen(line);
    const char *q = line;
    while (*q == ' ' || *q == '\t') ++q;
    int is_inc = !strncmp(q, "#include", 8);
    if (is_inc == includes) mw__sb_put(b, line, len);
    else mw__sb_puts(b, nl ? "\n" : "");
    line = nl ? nl + 1 : NULL;
  }
  free(h);
}

static void put_task_decls(mw__sb *b, const mw__parsed *p, const mw__task *t) {
  mw__sb_printf(b, "\n/* task %s (kind %u) */\nstruct mw_args_%s {", t->name, t->kind, t->name);
  put_line(b, t->line, p->file);
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
  mw__sb_printf(b, "struct mw_frame_%s : mw_args_%s {\n  typedef %s _mw_ret_t;\n", t->name,
                t->name, t->ret_txt);
  for (int k = 0; k < t->nlocals; ++k) {
    put_line(b, t->locals[k].line, p->file);
    mw__sb_printf(b, "  %s;\n", t->locals[k].decl);
  }
  mw__sb_puts(b, "  __device__ _mw_ret_t body(mw_ctx *_c);\n};\n");
  mw__sb_printf(b,
                "static_assert(sizeof(mw_frame_%s) <= MW_FRAME_PAYLOAD, \"task %s: its parameters "
                "and locals do not fit in a frame; raise frame_bytes\");\n",
                t->name, t->name);
  /* typed spawn functions: the argument struct in zeroed words, then the runtime */
  for (int bulk = 0; bulk < 2; ++bulk) {
    mw__sb_printf(b, "__device__ __forceinline__ future mw_spawn%s__%s(mw_ctx *c, int line%s",
                  bulk ? "_bulk" : "", t->name, bulk ? ", unsigned long long n" : "");
    for (int k = 0; k < t->nparams; ++k) mw__sb_printf(b, ", %s p%d", t->params[k].type_txt, k);
    mw__sb_printf(b, ") {\n  mw_u64 w[(sizeof(mw_args_%s) + 7) / 8 + 1] = {0};\n", t->name);
    for (int k = 0; k < t->nparams; ++k) {
      if (t->params[k].type == MW_T_FUTURE)
        mw__sb_printf(b, "  w[%u] = p%d.h;\n", t->params[k].offset / 8, k);
      else
        mw__sb_printf(b, "  ((mw_args_%s *)w)->%s = p%d;\n", t->name, t->params[k].name, k);
    }
    mw__sb_printf(b, "  return mw_spawn_raw(c, %uu, w, %s, %s, line);\n}\n", t->kind,
                  bulk ? "(mw_u32)n" : "0u", bulk ? "true" : "false");
  }
}

/* Whether task t's body never awaits (no await, await_all or try_await as a word outside
 * comments and literals): such a task never suspends, so an await that claims it may run it
 * as a plain call (runtime.cuh, leaf children). A word in a place this scan misreads only
 * costs that shortcut. */
static int task_is_leaf(const mw__parsed *p, const mw__task *t) {
  static const char *const words[] = {"await", "await_all", "try_await"};
  const char *s = p->src;
  for (size_t i = t->body_start; i <= t->body_end; ++i) {
    char ch = s[i];
    if (ch == '/' && s[i + 1] == '/') { /* to the end of the line */
      while (i <= t->body_end && s[i] != '\n') ++i;
      continue;
    }
    if (ch == '/' && s[i + 1] == '*') {
      for (i += 2; i < t->body_end && !(s[i] == '*' && s[i + 1] == '/'); ++i) {
      }
      ++i;
      continue;
    }
    if (ch == '"' || ch == '\'') {
      for (++i; i < t->body_end && s[i] != ch; ++i)
        if (s[i] == '\\') ++i;
      continue;
    }
    if (!(ch == '_' || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z'))) continue;
    size_t j = i;
    while (j <= t->body_end && (s[j] == '_' || (s[j] >= 'a' && s[j] <= 'z') || (s[j] >= 'A' && s[j] <= 'Z') ||
                                (s[j] >= '0' && s[j] <= '9')))
      ++j;
    for (size_t w = 0; w < sizeof words / sizeof *words; ++w)
      if (strlen(words[w]) == j - i && !memcmp(s + i, words[w], j - i)) return 0;
    i = j - 1;
  }
  return 1;
}

/* The case of one kind in a dispatch switch. */
static void put_dispatch_case(mw__sb *b, int prog, const mw__task *t) {
  if (t->ret == MW_T_VOID)
    mw__sb_printf(b, "  case %uu: ((mw_p%d::mw_frame_%s *)fr)->body(c); break;\n", t->kind, prog, t->name);
  else
    mw__sb_printf(b,
                  "  case %uu: { auto r = ((mw_p%d::mw_frame_%s *)fr)->body(c); "
                  "mw_store_result(c, r); break; }\n",
                  t->kind, prog, t->name);
}

static void put_task_body(mw__sb *b, const mw__parsed *p, const mw__task *t) {
  mw__sb_printf(b,
                "__device__ mw_frame_%s::_mw_ret_t mw_frame_%s::body(mw_ctx *_c) {\n"
                "  const unsigned lane = _c->lane;\n  const unsigned index = _c->index;\n"
                "  (void)lane;\n  (void)index;\n  switch (_c->resume) {\n  case 0:;",
                t->name, t->name);
  put_line(b, t->body_line, p->file);
  /* pad to the brace's column so that column numbers match too */
  size_t col = t->body_start;
  while (col > 0 && p->src[col - 1] != '\n') --col;
  for (size_t k = col; k < t->body_start; ++k) mw__sb_puts(b, " ");
  mw__sb_put(b, p->src + t->body_start, t->body_end - t->body_start + 1);
  mw__sb_puts(b, "\n  default:;\n  }\n  return _mw_ret_t();\n}\n");
}

char *mw__generate(mw__parsed *const *progs, int nprogs, const mw__gen_opts *opts) {
  mw__sb b = {0};
  mw__sb_puts(&b, "/* generated by moonwarp: the device runtime and the task programs */\n");
  if (opts->sim) {
    mw__sb_puts(&b, "#define MW_SIM 1\n");
    mw__sb_puts(&b, mw__src_sim_shim_h);
    mw__sb_puts(&b, "\n#include <cstdint>\n#include <cstddef>\n#include <cstring>\n"
                    "typedef unsigned char mw_u8;\ntypedef unsigned short mw_u16;\n"
                    "typedef unsigned int mw_u32;\ntypedef int mw_i32;\n"
                    "typedef unsigned long long mw_u64;\ntypedef long long mw_i64;\n");
  } else {
    mw__sb_puts(&b,
                "typedef unsigned char mw_u8;\ntypedef unsigned short mw_u16;\n"
                "typedef unsigned int mw_u32;\ntypedef int mw_i32;\n"
                "typedef unsigned long long mw_u64;\ntypedef long long mw_i64;\n"
                "typedef signed char int8_t;\ntypedef unsigned char uint8_t;\n"
                "typedef short int16_t;\ntypedef unsigned short uint16_t;\n"
                "typedef int int32_t;\ntypedef unsigned int uint32_t;\n"
                "typedef long int64_t;\ntypedef unsigned long uint64_t;\n");
  }
  mw__sb_printf(&b, "#define MW_FRAME_PAYLOAD %u\n", opts->frame_bytes - 64u);
  mw__sb_printf(&b, "#define MW_LSTACK_BYTES %u\n", mw__lane_stack_bytes(opts->frame_bytes));
  mw__sb_puts(&b, mw__src_protocol_h);
  mw__sb_puts(&b, "\n");
  mw__sb_puts(&b, mw__src_runtime_cuh);
  for (int i = 0; i < nprogs; ++i) {
    const mw__parsed *p = progs[i];
    put_helpers(&b, p, 1);
    mw__sb_printf(&b, "\n#line 1 \"<moonwarp>\"\nnamespace mw_p%d {\n", i);
    put_helpers(&b, p, 0);
    mw__sb_puts(&b, "\n#line 1 \"<moonwarp>\"\n");
    for (int k = 0; k < p->ntasks; ++k) put_task_decls(&b, p, &p->tasks[k]);
    for (int k = 0; k < p->ntasks; ++k) put_task_body(&b, p, &p->tasks[k]);
    mw__sb_printf(&b, "\n#line 1 \"<moonwarp>\"\n} /* namespace mw_p%d */\n", i);
  }
  /* the kind table, names and dispatch */
  int nk = 0;
  mw__sb_puts(&b, "__constant__ const mw_kind_info mw_kinds[] = {\n");
  for (int i = 0; i < nprogs; ++i)
    for (int k = 0; k < progs[i]->ntasks; ++k, ++nk) {
      const mw__task *t = &progs[i]->tasks[k];
      unsigned futargs = 0;
      for (int q = 0; q < t->nparams; ++q)
        if (t->params[q].type == MW_T_FUTURE) futargs |= 1u << (t->params[q].offset / 8);
      mw__sb_printf(&b, "  {%s, (mw_u32)sizeof(mw_p%d::mw_frame_%s), %uu, 0x%xu, %s}, /* %u %s */\n",
                    rtype_name(t->ret), i, t->name, (t->args_size + 7u) / 8u * 8u, futargs,
                    task_is_leaf(progs[i], t) ? "MW_KIND_LEAF" : "0u", t->kind, t->name);
    }
  if (!nk) mw__sb_puts(&b, "  {MW_RT_VOID, 0u, 0u, 0u, 0u},\n");
  mw__sb_printf(&b,
                "};\n__device__ const mw_kind_info *mw_kind(mw_u32 kind) {\n"
                "  return &mw_kinds[kind < %du ? kind : 0u];\n}\n",
                nk ? nk : 1);
  mw__sb_puts(&b, "__device__ const char *mw_kind_name(mw_u32 kind) {\n  switch (kind) {\n");
  for (int i = 0; i < nprogs; ++i)
    for (int k = 0; k < progs[i]->ntasks; ++k)
      mw__sb_printf(&b, "  case %uu: return \"%s\";\n", progs[i]->tasks[k].kind,
                    progs[i]->tasks[k].name);
  mw__sb_puts(&b, "  default: return \"?\";\n  }\n}\n");
  /* one step of a task body, on its frame in the lane stacks */
  mw__sb_puts(&b, "__device__ void mw_dispatch(mw_ctx *c, mw_u32 kind, mw_u8 *fr) {\n  switch (kind) {\n");
  for (int i = 0; i < nprogs; ++i)
    for (int k = 0; k < progs[i]->ntasks; ++k) put_dispatch_case(&b, i, &progs[i]->tasks[k]);
  mw__sb_puts(&b,
              "  default: mw_fail(c, MW_FAIL_BAD_KIND, \"no such task kind in the executor\");\n"
              "  }\n}\n");
  /* the kinds that never await, run as plain calls by the await that claims them */
  mw__sb_puts(&b, "__device__ void mw_dispatch_leaf(mw_ctx *c, mw_u32 kind, mw_u8 *fr) {\n  switch (kind) {\n");
  for (int i = 0; i < nprogs; ++i)
    for (int k = 0; k < progs[i]->ntasks; ++k)
      if (task_is_leaf(progs[i], &progs[i]->tasks[k])) put_dispatch_case(&b, i, &progs[i]->tasks[k]);
  mw__sb_puts(&b,
              "  default: mw_fail(c, MW_FAIL_BAD_KIND, \"no such leaf task kind in the executor\");\n"
              "  }\n}\n");
  mw__sb_printf(&b,
                "extern \"C\" __global__ void __launch_bounds__(128) mw_executor_kernel(mw_state "
                "*st) { mw_executor(st); }\n");
  if (opts->sim)
    mw__sb_puts(&b,
                "extern \"C\" __attribute__((visibility(\"default\"))) void mw_sim_kernel(void "
                "*st) { mw_executor((mw_state *)st); }\n"
                "extern \"C\" __attribute__((visibility(\"default\"))) unsigned mw_sim_protocol "
                "= MW_PROTOCOL_VERSION;\n");
  return mw__sb_take(&b);
}
