/* program.h - a parsed program: task declarations with their typed signatures, frame locals and
 * source positions; the parser and the source generator that turns it into a device module. */
#ifndef MW_PROGRAM_H
#define MW_PROGRAM_H

#include <stddef.h>
#include <stdint.h>

#include "moonwarp.h"

typedef struct mw__param {
  char *name;
  char *decl;     /* the declaration as written, "float *x" */
  char *type_txt; /* the type part, "float *" */
  mw_type type;
  uint32_t offset, size;
} mw__param;

typedef struct mw__local {
  char *decl; /* "future a, b" */
  int line;
} mw__local;

typedef struct mw__task {
  char *name;
  char *ret_txt;
  mw_type ret;
  int nparams;
  mw__param *params;
  mw_type *param_types;     /* views for mw_task_info */
  const char **param_names;
  char *signature;          /* "long fib(int n)" */
  int line;                 /* line of the 'task' keyword */
  int block;                /* 'task block ...': its body runs on every warp of a worker CTA
                             * (protocol.h, Block tasks) */
  uint32_t args_size;       /* bytes of the argument struct, as the host lays it out */
  uint32_t kind;            /* runtime-wide kind id, set when loaded */
  size_t decl_start, decl_end; /* [task keyword, closing brace] in the source */
  size_t body_start, body_end; /* [opening brace, closing brace] */
  int body_line;
  int nlocals;
  mw__local *locals;
  /* spawns that the next statement awaits ('f = spawn(t, ...);' then 'await(f);' or
   * 'try_await(f);'): the generated body calls the spawn-now form there (device_api.cuh,
   * mw_spawn_now), or fuses the pair (generate.c, put_fused_pair) */
  int nnow;
  struct mw__now_site *now;
} mw__task;

/* A spawn-now site, 'f = spawn(t, args); await(f);', as offsets into the source: its 'spawn'
 * word, f, the ',' or ')' after t, the spawn's ')', just past the first ';' and just past the
 * second; and the index of the task t it spawns. */
typedef struct mw__now_site {
  size_t word, stmt, args, close, semi, end;
  int task;
} mw__now_site;

typedef struct mw__parsed {
  char *file;
  char *src;  /* the source with every 'local' declaration blanked out */
  int first_line; /* line number of the source's first line in file */
  int ntasks;
  mw__task *tasks;
  int ndefines;     /* the program's defines (mw_compile_desc), set after parsing */
  char **def_names;
  char **def_values;
  /* the program's tag (letters and digits): its namespace and exported names are mw_<tag>, its
   * canonical place name MW_PLACE_PREFIX <tag> '>'; "" gives it "p" and its index in the list
   * it is generated with */
  char tag[24];
  int debug; /* built for a debugger: its lines are the user's, not canonical places */
} mw__parsed;

/* One declarator of a 'local' declaration as written ("future a, *b = 0, c[4]"). */
typedef struct mw__declarator {
  const char *name; /* the name, in the declaration's text, len bytes */
  size_t len;
  int array, stars; /* an array ('[' before any '='); the stars before the name */
  int plain;        /* a name and its stars only (no array, no parenthesis): a copy of it is a value */
  const char *type_end; /* the first declarator's: where its stars and name begin (the type is
                         * before); NULL for the others */
} mw__declarator;
/* The next declarator of the 'local' declaration decl from *at (decl at first) into *out, *at
 * moved past it; 0 after the last. */
int mw__next_declarator(const char *decl, const char **at, mw__declarator *out);

/* Parses task declarations out of src. On error returns MW_ECOMPILE (or MW_ENOMEM) with a
 * "file:line: message" in err. */
int mw__parse(const char *src, const char *file, int first_line, mw__parsed *out, char *err,
              size_t errlen);
void mw__parsed_free(mw__parsed *p);
/* MW_ECOMPILE with "file:line: ..." in err when p has a block task and a runtime of workers
 * workers has no worker CTA of all its cta_warps warps (protocol.h, Block tasks); 0 otherwise. */
int mw__check_block_tasks(const mw__parsed *p, unsigned workers, unsigned cta_warps, char *err, size_t errlen);

typedef struct mw__gen_opts {
  int sim;              /* generate for the sim backend (host C++) */
  uint32_t frame_bytes; /* frame size, header included */
  /* 1: canonical places: each program's lines are named MW_PLACE_PREFIX, its index, '>', and
   * counted from its source's first line, so the generated source does not depend on where the
   * source sits (the compile cache's key); mw__user_places and mw__user_line map them back.
   * 0: the user's file and lines themselves (a source for people to read) */
  int canon;
  /* 1 (cuda, one unit): block tasks may also run as grids launched from the device
   * (protocol.h, Block tasks, "As a grid"): the image must be compiled relocatable and linked
   * with the device runtime library (mw__grids_of says whether a list of programs has any) */
  int grids;
} mw__gen_opts;

#define MW_PLACE_PREFIX "<mw-"

/* The tag of program p, the i-th of its list (mw__parsed.tag). */
void mw__prog_tag(const mw__parsed *p, int i, char out[24]);

/* Generates one translation unit from all programs loaded on a runtime: the embedded device
 * runtime, each program in a namespace of its own, the dispatch switch and the kernel entry.
 * Kind ids come from each task's kind field. Returns a malloc'd string or NULL on OOM. */
char *mw__generate(mw__parsed *const *progs, int nprogs, const mw__gen_opts *opts);
/* Whether the one-unit image of progs[0..nprogs) has grid kernels under opts: opts->grids, on
 * cuda, and a block task among them. */
int mw__grids_of(mw__parsed *const *progs, int nprogs, const mw__gen_opts *opts);

/* The parts of an image compiled one by one and linked (image.h): the executor (the device
 * runtime and its entry points, no task code); one program (progs[0]: its tasks and what the
 * link part names of it, independent of its kinds); the link part (the kind table, names and
 * dispatch over progs[0..nprogs), by their tags and kinds). */
typedef enum mw__gen_part { MW_GEN_EXECUTOR, MW_GEN_PROGRAM, MW_GEN_LINK } mw__gen_part;
char *mw__generate_part(mw__gen_part part, mw__parsed *const *progs, int nprogs,
                        const mw__gen_opts *opts);
/* The C++ compiler's (or NVRTC's) log of a generated source in the user's terms: generated
 * names (namespaces, frames, spawn functions, value()'s type) put as the task code writes them,
 * notes about the generated code (gen_path, the file the compiler was given) left out. Returns a
 * malloc'd string or NULL on OOM. */
char *mw__user_log(const char *log, const char *gen_path);
/* text (a compiler's log, an executor's message) with each canonical place of progs (the list
 * the source was generated from) put as the user's: "<mw-p0>:3" and "<mw-p0>(3)" as the
 * program's file and the line there, a bare "<mw-p0>" as the file. Returns a malloc'd string or
 * NULL on OOM. */
char *mw__user_places(const char *text, mw__parsed *const *progs, int nprogs);
/* The line of p's file that line of its canonical places is (lines below 1 stay as they are). */
int mw__user_line(const mw__parsed *p, int line);
/* Bytes of each lane's stack of inline frames for frames of frame_bytes (header included). */
unsigned mw__lane_stack_bytes(unsigned frame_bytes);

mw_type mw__type_from_text(const char *type_txt, uint32_t *size);

/* ---- compile options (options.c) ---- */

/* What applies to a compile as a whole: the union of its programs' options. */
typedef struct mw__build_opts {
  const char *const *include_dirs; /* absolute, searched in this order */
  int ninclude_dirs;
  int debug;                       /* 1: debug information, no optimisation */
  int fast;                        /* 1: compile fast (NVRTC --Ofast-compile=min, 12.8 and later) */
  char deps[65]; /* digest of the headers the source reaches in include_dirs ("" when none) */
} mw__build_opts;

/* Checks desc's defines and include_dirs (desc may be NULL) and takes them over: the defines
 * into p (names and values; "NAME" gets the value "1"), the directories, made absolute, into
 * *dirs (malloc'd, *ndirs of them; free with mw__free_strings). MW_EINVAL with "option
 * 'defines': ..." in err for bad input, MW_ENOMEM. Nothing is kept on failure. */
int mw__take_compile_options(const mw_compile_desc *desc, mw__parsed *p, char ***dirs,
                             int *ndirs, char *err, size_t errlen);
void mw__free_strings(char **v, int n);

/* The digest (BLAKE2b, hex) of every header that the #include lines of src reach through
 * dirs, followed into the headers themselves: their paths and contents, so that an edited
 * header makes a new cache key. A header named by a macro is not followed; headers not found
 * in dirs (the system's) are left out. out is "" when nothing was found. 0, MW_EIO (libsodium),
 * MW_ENOMEM. */
int mw__include_digest(const char *src, const char *const *dirs, int ndirs, char out[65]);

#endif
