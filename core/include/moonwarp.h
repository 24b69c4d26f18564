/* moonwarp.h - the embedding API: device coroutines on a persistent GPU executor (or its CPU sim).
 *
 * Conventions: opaque handles; functions return 0 or a negative MW_E* code; the detailed
 * message of the last failure on a runtime (compiler log, CUDA error string) is read with
 * mw_runtime_last_error(rt), and the one of a failure before a runtime exists with
 * mw_last_error(). The library never prints and never aborts. Descriptor structs are
 * zero-initialised: zero means default. One runtime is used by one host thread at a time.
 *
 * NULL: a NULL handle (runtime, program, buffer) or a NULL pointer that a function writes
 * through is misuse. A function that returns an int returns MW_EINVAL, writes nothing, and
 * mw_last_error() names the argument; mw_runtime_backend(NULL) returns "", and
 * mw_runtime_last_error(NULL) returns mw_last_error(); mw_buffer_address and mw_buffer_size of
 * NULL are 0; mw_buffer_free(NULL) and mw_runtime_poll(NULL) do nothing. Pointers documented as
 * optional may be NULL: a descriptor (defaults), out_error and out_log, the mw_result of
 * mw_future_poll, mw_future_await and mw_future_await_any, the stats of mw_trace_stop,
 * mw_trace_stop's path, the flag of mw_runtime_set_interrupt, the futures and the count of
 * mw_spawn_n. A future handle that is 0, stale or of another runtime is MW_ESTALE, never a crash.
 *
 * Waiting. The GPU writes completions into host memory that it maps and cannot raise an
 * interrupt on the host: something on the host must look at that memory to learn that a task
 * completed. Every blocking call (mw_future_await, mw_future_await_any, a spawn or cancel waiting
 * for capacity) looks in a loop that first spins (cuda: the first 500 us, a round trip takes
 * tens of microseconds and a few device stages hundreds; sim: a few yields of the thread), then sleeps between looks with naps
 * that grow with the time waited (a sixteenth of it, from 20 us on cuda and 50 us on sim up to
 * 1 ms, slept with a 1 us timer slack): a long wait costs its thread about a thousandth of a core, and a completion is seen at
 * most one nap after it happened. A wait for capacity naps from the start (the device frees it
 * at its own pace, with the inbox's spawns queued ahead). mw_runtime_fd gives a file descriptor for event loops instead; its watcher
 * thread does that looking.
 */
#ifndef MOONWARP_H
#define MOONWARP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(MW_BUILDING)
#define MW_API __attribute__((visibility("default")))
#else
#define MW_API
#endif

/* ---- errors: one list makes the enum, the names and the messages ---- */
#define MW_ERRNO_MAP(XX)                                                    \
  XX(EINVAL, -1, "invalid argument")                                        \
  XX(ENOMEM, -2, "out of memory")                                           \
  XX(ENODEV, -3, "no usable device, driver or compiler")                    \
  XX(ECOMPILE, -4, "task source failed to compile")                         \
  XX(ENOTASK, -5, "no such task")                                           \
  XX(ECAPACITY, -6, "capacity exhausted")                                   \
  XX(ETIMEDOUT, -7, "timed out")                                            \
  XX(EFAULT, -8, "device fault")                                            \
  XX(ECLOSED, -9, "runtime is closed")                                      \
  XX(ESTALE, -10, "stale or foreign future")                                \
  XX(EFAILED, -11, "task failed")                                           \
  XX(ECANCELED, -12, "task cancelled")                                      \
  XX(ECUDA, -13, "CUDA driver error")                                       \
  XX(EIO, -14, "input/output error")                                        \
  XX(EAGAIN, -15, "not ready")                                              \
  XX(ERANGE, -16, "out of range")                                          \
  XX(EINTR, -17, "interrupted")

enum {
  MW_OK = 0,
#define MW__ERRNO(name, val, msg) MW_##name = (val),
  MW_ERRNO_MAP(MW__ERRNO)
#undef MW__ERRNO
};

MW_API const char *mw_strerror(int err);
MW_API const char *mw_err_name(int err);
MW_API const char *mw_last_error(void); /* this thread's last detailed message */
MW_API const char *mw_version(void);

/* ---- value types of task parameters and results ---- */
typedef enum mw_type {
  MW_T_VOID = 0,
  MW_T_BOOL,
  MW_T_I8,
  MW_T_U8,
  MW_T_I16,
  MW_T_U16,
  MW_T_I32,
  MW_T_U32,
  MW_T_I64,
  MW_T_U64,
  MW_T_F32,
  MW_T_F64,
  MW_T_PTR,    /* device buffer pointer */
  MW_T_FUTURE, /* a future handle */
  MW_T__COUNT
} mw_type;

MW_API const char *mw_type_name(mw_type t);

/* ---- runtime ---- */
typedef struct mw_runtime mw_runtime;
typedef struct mw_program mw_program;
typedef struct mw_buffer mw_buffer;
typedef uint64_t mw_future; /* 0 is no future */

typedef struct mw_runtime_desc {
  const char *backend;   /* "auto" (NULL), "cuda" or "sim"; MOONWARP_BACKEND when NULL */
  int device;            /* CUDA device ordinal */
  uint32_t capacity;     /* frames and device future slots; 0 = default */
  uint32_t host_futures; /* futures the host may hold at once; 0 = default */
  uint32_t workers;      /* 0 = fill the device (cuda) or 4 (sim) */
  uint32_t frame_bytes;  /* bytes per task frame including a 64-byte header; 0 = 256 */
  /* seconds a program load waits for running task bodies to reach a point where the executor
   * can stop and take the new program; past it the load is refused and the executor carries
   * on with every worker; 0 = 10 s */
  double relaunch_timeout;
  /* how a program load builds the executor image: "parts" compiles the new program alone and
   * links it with the executor's part (compiled once) and the programs loaded before, so one
   * more program costs what it alone costs; "one_unit" compiles the executor and every loaded
   * program in one unit, so each load costs more as programs add up, and the GPU executor runs
   * faster (its calls need no calling convention: README, compiles); "tiered" loads as "parts"
   * does, then builds the one-unit image in a thread and swaps it in when it is ready. NULL:
   * "one_unit" on cuda, "parts" on sim. $MOONWARP_BUILD overrides it. */
  const char *build;
  /* bytes of stack each executor thread may use for task bodies that call one another in place
   * (a spawn of a self-contained task runs as a plain call when no worker is idle); a spawn
   * nested deeper fails with a capacity error. 0 = 16384; 4096 .. 524288. cuda reserves this
   * much (plus the executor's own) for every thread the GPU can hold; sim uses 96 KiB whatever
   * it says. */
  uint32_t stack_bytes;
} mw_runtime_desc;

MW_API int mw_runtime_create(const mw_runtime_desc *desc, mw_runtime **out);
/* Stops the executor (waiting up to deadline_s seconds for running tasks; <= 0 means 10 s),
 * fails whatever is still pending and frees everything. Always frees rt. */
MW_API int mw_runtime_close(mw_runtime *rt, double deadline_s);
MW_API const char *mw_runtime_backend(const mw_runtime *rt); /* "cuda" or "sim" */
MW_API const char *mw_runtime_last_error(const mw_runtime *rt);
MW_API int mw_runtime_faulted(const mw_runtime *rt); /* 0, or the MW_E* that broke it */

typedef struct mw_stats {
  uint64_t spawned, completed, failed, cancelled; /* device tasks, all kinds */
  uint64_t host_spawned, host_completed;          /* from the host */
  uint64_t in_flight;                             /* host futures not yet complete */
  uint64_t steals, launches;
  uint64_t heartbeat;        /* the executor's last heartbeat (device clock, ns) */
  double heartbeat_age_s;    /* host seconds since the heartbeat last moved */
  double uptime_s;
  uint32_t workers, kinds;
  uint32_t frames, frames_in_use; /* capacity; frames held by tasks (exact once idle) */
  uint32_t host_futures, host_futures_held; /* capacity; held by the host (not yet released) */
  uint64_t queued_inbox;  /* host spawns the device has not taken yet */
  uint64_t queued_global; /* tasks in the global run queue */
  uint64_t queued_local;  /* tasks in the workers' deques and LIFO slots */
  uint64_t tier_swaps;    /* build "tiered": one-unit images swapped in behind parts loads */
  uint64_t grids;         /* block tasks whose instances ran as a grid launched from the device */
  /* host spawns that found no free host future (its slot not yet closed by the device, or
   * held), and that found the inbox full (the device had not taken the spawns before), and the
   * seconds they waited for it: where a stream of spawns spends what its calls do not */
  uint64_t waits_future, waits_inbox;
  double waits_future_s, waits_inbox_s;
} mw_stats;

MW_API int mw_runtime_stats(mw_runtime *rt, mw_stats *out);
/* per-kind counters; kind ids are those of mw_task_info.kind */
MW_API int mw_runtime_kind_stats(mw_runtime *rt, uint32_t kind, uint64_t out[4]);
/* the same for kinds first .. first + n - 1 from one read of the counters (out[i] is kind
 * first + i); MW_ENOTASK (out untouched) unless they are all loaded */
MW_API int mw_runtime_kinds_stats(mw_runtime *rt, uint32_t first, uint32_t n, uint64_t (*out)[4]);
/* What one instance of each bulk kind first .. first + n - 1 took on the device as last timed,
 * in device clock cycles (out[i] is kind first + i; 0: never timed), the figure by which a
 * spawner chooses to run a bulk task's instances alone; MW_ENOTASK unless they are all loaded */
MW_API int mw_runtime_kinds_instance_cycles(mw_runtime *rt, uint32_t first, uint32_t n, uint32_t *out);
/* The name counters and traces give a kind: its task's name, or "name#kind" where a task loaded
 * before has that name (two programs may define one name). *out is valid while rt is open.
 * 0, MW_ENOTASK for a kind not loaded, MW_ENOMEM when its name could not be kept at the load. */
MW_API int mw_runtime_kind_name(const mw_runtime *rt, uint32_t kind, const char **out);

/* ---- programs ---- */
typedef struct mw_task_info {
  const char *name;
  uint32_t kind;      /* runtime-wide kind id */
  mw_type ret;
  int nparams;
  const mw_type *param_types;
  const char *const *param_names;
  const char *signature; /* "long fib(int n)" */
  const char *file;
  int line;
} mw_task_info;

typedef struct mw_compile_desc {
  const char *filename; /* for messages (and #line directives of mw_compile_cubin and debug
                         * builds); NULL = "<string>" */
  const char *arch;     /* "sm_90" etc.; NULL = the device's own */
  int first_line;       /* line of filename where the source starts; 0 = 1 */
  /* Preprocessor macros of this program only: ndefines strings "NAME" (defined as 1) or
   * "NAME=VALUE" (VALUE verbatim, "" for an empty macro). They are defined around the program's
   * own text (helper code, its #includes, local declarations, task bodies), not in the runtime's
   * code or another program's; task signatures are read by moonwarp before the preprocessor
   * runs, so a type in a signature cannot be a macro.
   * NAME is an identifier, not a word of the task language (task, local, future, spawn, await,
   * value, lane, index, ...) nor one starting with _, MW_ or mw_, and not a macro already
   * defined where the program starts (by the runtime's headers or a program loaded before: the
   * compile fails saying so); VALUE is one line that does not end with a backslash nor leave a
   * comment open. */
  const char *const *defines;
  int ndefines;
  /* Directories searched for #include "..." and <...> (in this order, before the system's),
   * for the whole compile: every program of the runtime is compiled in one translation unit,
   * so the directories of all programs loaded so far apply, those of earlier programs first.
   * Each must be a directory; a relative one is made absolute at this call. The headers found
   * in them are part of the compile cache's key. */
  const char *const *include_dirs;
  int ninclude_dirs;
  /* Non-zero: compile with debug information and without optimisation (NVRTC -G, the sim's
   * C++ compiler -g -O0); once a program asked for it, the runtime's later compiles keep it.
   * 0: optimised, with line information (NVRTC -lineinfo, the sim -O2 -g). Device code built
   * with -G runs many times slower. */
  int debug;
  /* mw_compile_cubin_desc: the frame size of the runtimes the cubin is for
   * (mw_runtime_desc.frame_bytes, which bounds a task's parameters and locals); 0 = the
   * default, 256. mw_program_compile: 0 or its runtime's own, else MW_EINVAL. */
  uint32_t frame_bytes;
} mw_compile_desc;

/* Parses, generates, compiles and loads a program into the runtime (relaunching the executor
 * with all programs loaded so far). On MW_ECOMPILE the log, with the user's file and line, is
 * in mw_runtime_last_error(rt). MW_EINVAL for bad options in desc (defines, include_dirs), the
 * message naming the option: "option 'defines': '1N' is not an identifier". */
MW_API int mw_program_compile(mw_runtime *rt, const char *source, const mw_compile_desc *desc,
                              mw_program **out);
/* Lets go of p: nothing will spawn its tasks from the host any more. The next program load on
 * its runtime drops it once none of its tasks runs, waits or is queued and no host future is
 * pending, and gives its kinds to later programs (so a runtime that keeps redefining tasks, a
 * REPL, never runs out of kinds); until then it runs as before. p must not be used after. */
MW_API int mw_program_release(mw_program *p);
MW_API int mw_program_task_count(const mw_program *p);
MW_API int mw_program_task(const mw_program *p, int i, mw_task_info *out);
MW_API int mw_program_find(const mw_program *p, const char *name); /* index or MW_ENOTASK */

/* Without a runtime: parse and generate only (no compiler). out_source is malloc'd. */
MW_API int mw_generate_source(const char *source, const char *filename, const char *backend,
                              char **out_source, char **out_error);
/* Without a runtime or device: compile a program with NVRTC into a cubin for arch. */
MW_API int mw_compile_cubin(const char *source, const char *filename, const char *arch,
                            void **out_cubin, size_t *out_size, char **out_log);
/* The same with a compile descriptor (NULL: defaults): its filename, first_line, arch (NULL =
 * "sm_90"), defines, include_dirs, debug and frame_bytes, as a runtime's compile would use
 * them. */
MW_API int mw_compile_cubin_desc(const char *source, const mw_compile_desc *desc,
                                 void **out_cubin, size_t *out_size, char **out_log);

/* ---- spawning and futures ---- */
typedef union mw_value {
  int64_t i;
  uint64_t u;
  double d;
  mw_future f;
} mw_value;

typedef struct mw_result {
  int status;   /* MW_OK, MW_EFAILED, MW_ECANCELED, MW_EFAULT */
  mw_type type; /* type of value */
  mw_value value;
  int code;          /* task failure code */
  char message[128]; /* "fib: message" for failures */
} mw_result;

/* args: one mw_value per parameter, read as the parameter's type (integers in .i or .u,
 * floats in .d, buffers as device address in .u, futures in .f). timeout_s bounds the wait
 * for inbox or host-future capacity: < 0 waits forever, 0 not at all. */
MW_API int mw_spawn(mw_runtime *rt, const mw_program *p, int task, const mw_value *args,
                    int nargs, double timeout_s, mw_future *out);
/* n instances (n >= 1, else MW_EINVAL), index 0..n-1, one future for all. */
MW_API int mw_spawn_bulk(mw_runtime *rt, const mw_program *p, int task, uint32_t n,
                         const mw_value *args, int nargs, double timeout_s, mw_future *out);
/* 0 and *out filled when complete, MW_EAGAIN while pending. Processes completions. */
MW_API int mw_future_poll(mw_runtime *rt, mw_future f, mw_result *out);
/* n spawns of one task, each as mw_spawn would make it: args holds n * nargs values, spawn i
 * reading args[i * nargs ...] (args may be NULL when nargs is 0). out receives the n futures;
 * out NULL spawns fire-and-forget: the host lets go of each future at once, its slot is reused
 * once the task completes, and its result is dropped (rt's stats still count it). timeout_s
 * bounds each wait for capacity, as in mw_spawn. *spawned (optional) is how many were made: n on
 * 0; on failure the spawns before the one that failed stand, their futures in out[0..]. */
MW_API int mw_spawn_n(mw_runtime *rt, const mw_program *p, int task, uint32_t n,
                      const mw_value *args, int nargs, double timeout_s, mw_future *out,
                      uint32_t *spawned);
/* Waits up to timeout_s (< 0: forever). MW_ETIMEDOUT when it runs out; MW_EINTR when the
 * interrupt flag (mw_runtime_set_interrupt) is set, the future left as it was. */
MW_API int mw_future_await(mw_runtime *rt, mw_future f, double timeout_s, mw_result *out);
/* Waits for the first of n futures (n >= 1) to complete: *index is its position (the lowest one
 * when several are complete) and out its result. MW_ESTALE with *index at a future that is
 * stale; MW_ETIMEDOUT and MW_EINTR as in mw_future_await. */
MW_API int mw_future_await_any(mw_runtime *rt, const mw_future *fs, int n, double timeout_s,
                               int *index, mw_result *out);
/* Asks f's task to stop. A task that has not started never runs; a running one stops at its
 * next spawn or await (a task suspended in an await is woken to stop at once); the children
 * it still owns are cancelled too. Awaiting f then gives status MW_ECANCELED, code -9 and the
 * message "task 'name' was cancelled". Returns 1 when the request was sent (f was pending: it
 * ends cancelled unless its task completes first, a race only the result tells), 0 when f is
 * complete already (nothing changes), else a negative MW_E*. timeout_s bounds the wait for a
 * free inbox cell, as in mw_spawn. */
MW_API int mw_future_cancel(mw_runtime *rt, mw_future f, double timeout_s);
/* Gives up the host's hold on f; its slot is reused once the task has completed. */
MW_API int mw_future_release(mw_runtime *rt, mw_future f);
/* Processes completions without waiting; returns how many were processed. Drains the fd of
 * mw_runtime_fd. */
MW_API int mw_runtime_poll(mw_runtime *rt);
/* A file descriptor that is readable while completions wait for mw_runtime_poll, for event loops
 * (poll, epoll, libuv): when it is readable, call mw_runtime_poll (or await), which drains it;
 * it may be readable with nothing to process (then the poll finds nothing). It is an eventfd
 * owned by the runtime: do not read, write or close it; mw_runtime_close closes it. The first
 * call starts a watcher thread that looks at the completion ring (only reading where the ring
 * stands: the completions stay for this thread) and writes the eventfd: it looks every 20 us
 * after a spawn, backing off to every 1 ms while tasks run on, and every 50 ms while none is in
 * flight (a spawn wakes it), so a completion makes the fd readable within about the time the
 * task took and at most 1 ms later. A fault of the executor is noticed by this thread's calls,
 * not by the watcher: an event loop should also call mw_runtime_poll on a timer now and then.
 * Later calls return the same fd. 0, or MW_EIO when no eventfd or thread could be made. */
MW_API int mw_runtime_fd(mw_runtime *rt, int *fd);
/* Makes the blocking calls on rt (mw_future_await, mw_future_await_any, spawns and cancels waiting
 * for capacity) return MW_EINTR soon after *flag becomes non-zero: before their next nap, at once
 * when a signal to their thread cut the nap short. flag is a volatile sig_atomic_t (an int) that
 * a signal handler sets; the library never clears it; NULL removes it. */
MW_API int mw_runtime_set_interrupt(mw_runtime *rt, const volatile int *flag);

/* ---- buffers (device memory) ---- */
MW_API int mw_buffer_alloc(mw_runtime *rt, size_t bytes, mw_buffer **out);
MW_API int mw_buffer_write(mw_buffer *b, size_t offset, const void *src, size_t bytes);
MW_API int mw_buffer_read(mw_buffer *b, size_t offset, void *dst, size_t bytes);
MW_API uint64_t mw_buffer_address(const mw_buffer *b);
MW_API size_t mw_buffer_size(const mw_buffer *b);
MW_API void mw_buffer_free(mw_buffer *b);

/* ---- task traces ----
 * While tracing is on, every run of a task body is recorded per worker with the device timer:
 * a task that suspends at awaits shows as one slice per run (from its start or the await it
 * resumed at, to its return, failure or next suspending await); a bulk task as one slice per
 * chunk of instances a worker ran. Safe while the executor runs. */
typedef struct mw_trace_stats {
  uint64_t events;  /* runs written (recorded) */
  uint64_t dropped; /* runs not recorded because a worker's buffer was full */
  uint32_t workers; /* workers that had a buffer */
  uint32_t busy;    /* workers still inside one run when the stop gave up waiting: that run is
                       missing from the trace */
} mw_trace_stats;

#define MW_TRACE_MAX_EVENTS_PER_WORKER (1u << 24)

/* Starts recording into per-worker device buffers of events_per_worker runs each (0 = 4096,
 * at most MW_TRACE_MAX_EVENTS_PER_WORKER). MW_EINVAL when tracing is already on. */
MW_API int mw_trace_start(mw_runtime *rt, uint32_t events_per_worker);
/* Stops recording, reads the buffers back and writes them to path as a Chrome trace event JSON
 * file (Perfetto, chrome://tracing); path NULL discards them. stats may be NULL. MW_EINVAL when
 * tracing is not on; MW_EIO when path cannot be opened for writing (tracing stays on, nothing
 * is lost: call again with another path) or writing it fails (the trace is lost). */
MW_API int mw_trace_stop(mw_runtime *rt, const char *path, mw_trace_stats *stats);

#ifdef __cplusplus
}
#endif
#endif /* MOONWARP_H */
