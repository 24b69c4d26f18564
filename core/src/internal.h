/* internal.h - the runtime object and the interface every backend (cuda, sim) implements. */
#ifndef MW_INTERNAL_H
#define MW_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "moonwarp.h"
#include "image.h"
#include "program.h"
#include "protocol_host.h"

/* A backend's state for one runtime: opaque to the runtime, which holds it in rt->be (each
 * backend casts it to its own struct). */
typedef struct mw__backend mw__backend;

/* What a backend is opened with. */
typedef struct mw__backend_args {
  int device;       /* mw_runtime_desc.device */
  uint32_t workers; /* mw_runtime_desc.workers: 0 for the backend's default */
  uint32_t stack_bytes; /* mw_runtime_desc.stack_bytes, defaulted (cuda: the launch sizes the stack) */
  char *err;        /* where every op puts its error message (errlen bytes), until close */
  size_t errlen;
  /* sim: the task of kind (its name, file, line), 1 if found; called by executor threads */
  int (*find_task)(void *ctx, uint32_t kind, const char **name, const char **file, int *line);
  /* sim: msg (the executor's) with the programs' canonical places put as the user's files and
   * lines, into out (cut to cap); called by executor threads */
  void (*user_places)(void *ctx, const char *msg, char *out, size_t cap);
  void *ctx; /* find_task's and user_places' first argument */
} mw__backend_args;

/* What open found. */
typedef struct mw__backend_info {
  uint32_t max_workers; /* the most workers the device runs at once */
  uint32_t workers;     /* the workers a launch starts unless the runtime asks for fewer */
  int arch;             /* cuda: 90 for sm_90; 0 on sim */
} mw__backend_info;

/* One per backend. Every function is called by one thread: the runtime's host thread (in a
 * device process, its loop serving the library's requests, device_proc.c). Device addresses
 * are uint64_t (on sim they are host addresses). Errors: a negative MW_E* with the message in
 * the err of mw__backend_args. */
typedef struct mw__backend_ops {
  const char *name;
  /* which compiler makes its images (image.h): 1 the host C++ compiler (a shared object; the
   * generated code is C++ for the host, mw__gen_opts.sim), 0 NVRTC (a cubin for info.arch) */
  int host_code;
  int cta_in_memory;      /* 1: the CTAs' shared state is device memory (mw_state.sim_cta) */
  int shares_cpus;        /* 1: the executor runs on this process's CPUs: waits yield, not spin */
  uint32_t default_capacity; /* task frames when mw_runtime_desc.capacity is 0 */
  int claim_device;       /* 1: a process holds at most one open runtime per device (runtime.c) */
  const char *clock;      /* what the executor's timestamps count (a trace's "clock") */
  int (*probe)(char *err, size_t n); /* auto: 0 when a device answers, else MW_E* and why in err */
  /* Opens the device (context, streams) and says in *info what it found. *be is set as soon as
   * there is something to free, even when open fails: close(*be) frees it. */
  int (*open)(const mw__backend_args *a, mw__backend **be, mw__backend_info *info);
  /* Frees everything the backend holds (be may be NULL). The executor has stopped (or is
   * abandoned). */
  void (*close)(mw__backend *be);
  int (*alloc_pinned)(mw__backend *be, size_t n, void **host, uint64_t *dev);
  void (*free_pinned)(mw__backend *be, void *host);
  int (*alloc)(mw__backend *be, size_t n, uint64_t *dev);
  void (*free)(mw__backend *be, uint64_t dev);
  int (*h2d)(mw__backend *be, uint64_t dst, const void *src, size_t n);
  int (*d2h)(mw__backend *be, void *dst, uint64_t src, size_t n);
  /* Loads an image (size bytes, made by image.h with this table's host_code) as the executor
   * of the next launch; the bytes stay the caller's. Called only while no executor runs (on
   * cuda loading a module would wait for it). An image the backend refuses (sim: MW_ECOMPILE,
   * "loading the sim program: ..."; cuda: the driver's error) leaves the one loaded before. */
  int (*load)(mw__backend *be, const void *image, size_t size);
  /* Launches the executor of the last load on the mw_state at state_dev with *nworkers
   * workers; *nworkers may come back changed (cuda: the workers asked at open, or the default,
   * as far as the new image's occupancy allows; the mw_state's nworkers is written then). */
  int (*launch)(mw__backend *be, uint64_t state_dev, uint32_t *nworkers);
  /* 1 while the executor runs, 0 once it has exited, or a negative MW_E* after a fault (with
   * the message in err). Never blocks. */
  int (*query)(mw__backend *be);
  /* Waits up to deadline seconds until no executor code runs any more (the stop flag is set
   * already). 0 once it has exited (normally or by a fault), MW_ETIMEDOUT if it still runs. */
  int (*quiesce)(mw__backend *be, double deadline);
  /* Gives up on an executor that does not stop (hung task): frees what can be freed. close
   * still follows. */
  void (*abandon)(mw__backend *be);
} mw__backend_ops;

extern const mw__backend_ops mw__backend_sim;
extern const mw__backend_ops mw__backend_cuda;       /* device_proc.c: in a device process */
extern const mw__backend_ops mw__backend_cuda_local; /* backend_cuda.c: in this process */
/* the rest of the cuda backend that device_proc.c shares with backend_cuda.c: backend_cuda.h */

typedef struct mw__hslot {
  uint32_t gen;
  uint8_t state; /* MW_ST_* */
  uint8_t held;  /* the host still holds a handle */
  uint8_t bulk;
  uint8_t live; /* spawned and not yet returned to the free list */
  uint32_t kind;
  uint8_t cancel_sent; /* a cancel request went to the device */
  uint8_t given;       /* passed to a task as an argument: device tasks may hold it (hrefs) */
  uint8_t deferred;    /* otherwise free, waiting for the device's holders to let go */
  uint8_t closing;     /* its record was read, its closed word not yet (protocol.h, Closing) */
  uint32_t holders;    /* host spawns not yet complete that were given it as an argument */
  uint32_t nholds;     /* host futures this spawn was given (holds[]) */
  uint32_t *holds;
  uint64_t ticket;     /* the inbox ticket of its spawn */
  mw_result res;
} mw__hslot;

struct mw_program {
  mw_runtime *rt;
  mw__parsed parsed;
  int index; /* position in rt->progs */
  char **include_dirs; /* its include directories (absolute) */
  int ninclude_dirs;
  int debug;
  int released;  /* let go of (mw_program_release): the next load drops it once it is idle */
  mw__image obj; /* its compiled part of the executor image (mw__generate_part) */
};

struct mw_buffer {
  mw_runtime *rt;
  uint64_t dev;
  size_t size;
  mw_buffer *next, *prev;
};

struct mw_runtime {
  const mw__backend_ops *ops;
  mw__backend *be; /* the backend's state (ops->open) */
  mw_runtime_desc desc;
  uint32_t nframes, nslots, host_slots, frame_bytes;
  double relaunch_timeout; /* seconds a program load waits for a stop (mw_runtime_desc) */
  uint32_t stack_bytes;    /* mw_runtime_desc.stack_bytes, defaulted (protocol.h, MW_STACK_BYTES) */
  uint32_t max_workers, nworkers;
  int arch; /* what the images are compiled for (mw__backend_info.arch) */
  /* pinned */
  mw_control *ctl;
  uint64_t ctl_dev;
  mw_inbox_cell *inbox;
  uint64_t inbox_dev, inbox_tail;
  uint32_t inbox_cap;
  uint64_t *inbox_free; /* protocol.h, inbox ring */
  uint64_t inbox_free_dev;
  mw_comp_cell *comp;
  uint64_t comp_dev, comp_head;
  uint32_t comp_cap;
  char *comp_msg; /* protocol.h, completion ring */
  uint64_t comp_msg_dev;
  uint32_t *closed; /* host_slots: protocol.h, completion ring, Closing */
  uint64_t closed_dev;
  /* device */
  uint64_t state_dev, frames_dev, slots_dev, workers_dev, stats_dev;
  uint64_t frame_ring_dev, slot_next_dev, gq_dev, gq_seq_dev, nodes_dev, hrefs_dev, sim_cta_dev;
  uint64_t sim_block_dev, sim_blk_dev; /* sim: the CTAs' block areas and slots (protocol.h, mw_state) */
  uint32_t nnodes;
  mw_state state; /* what was copied to state_dev */
  /* host futures */
  mw__hslot *hs;
  uint32_t *hfree, nhfree;
  /* free host slots the device has not closed yet (mw__hslot.closing), oldest first: a ring of
   * host_slots cells, nclosing of them from closing_head */
  uint32_t *closing, closing_head, nclosing;
  uint32_t nclosing_live; /* host slots with mw__hslot.closing set */
  uint32_t ndeferred;  /* host slots waiting for their device holders (mw__hslot.deferred) */
  double last_sweep;   /* when hrefs was last read */
  uint64_t host_spawned, host_completed, in_flight;
  uint64_t waits_future, waits_inbox; /* mw_stats: spawns that waited, and for how long */
  double waits_future_s, waits_inbox_s;
  /* programs and buffers */
  mw_program **progs;
  int nprogs;
  /* the programs of the image the executor runs, as it was generated (the canonical places'
   * indices): what executor threads read (mw__backend_args), changed only while it is stopped */
  mw__parsed *run_progs[MW_MAX_KINDS];
  int run_nprogs;
  int one_unit;  /* every load compiles all programs in one unit (mw_runtime_desc.build) */
  int tiered;    /* build "tiered": a parts load, then the one-unit image built behind it */
  struct mw__tier_job *tier; /* that build while it runs or waits to be swapped in */
  uint64_t tier_gen;         /* loads so far: a build for an older set of programs is dropped */
  double tier_retry;         /* when to try a swap again after a stop that timed out */
  uint64_t tier_swapped;     /* one-unit images swapped in (mw_stats.tier_swaps) */
  mw__image exec_obj; /* the executor's part of the images (compiled once) */
  int exec_debug;     /* exec_obj was built for a debugger */
  uint32_t nkinds;
  char *kind_names[MW_MAX_KINDS]; /* mw_runtime_kind_name, set as each program loads */
  uint8_t kind_ret[MW_MAX_KINDS]; /* each kind's result type (mw_type), for its completions */
  /* the counters of each kind when a program took it again after one that was dropped: its
   * figures count from there */
  uint64_t kind_base[MW_MAX_KINDS][4];
  mw_buffer *buffers;
  struct mw__trace *trace; /* task traces (trace.c); NULL until the first trace_start */
  int running, faulted;
  int abandoned; /* closed while a task still ran: device memory is left to it */
  double t_start;
  double last_check; /* when check_alive last asked the backend */
  uint64_t launches, last_heartbeat;
  double heartbeat_seen; /* when last_heartbeat was first read */
  const volatile int *interrupt; /* mw_runtime_set_interrupt: waits end with MW_EINTR when set */
  /* mw_runtime_fd's watcher (watch.c); NULL until the first call. While it runs, the host
   * thread publishes where it stands for it: comp_head once a poll moved it, the spawns made. */
  struct mw__watch *watch;
  _Atomic uint64_t comp_head_pub, spawned_pub;
  char err[8192];
};

void mw__rt_error(mw_runtime *rt, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Puts the message in err (errlen bytes) and makes it this thread's last error, as mw__rt_error
 * does with rt->err: how a backend reports into mw__backend_args.err. */
void mw__put_error(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* trace.c: frees the trace state at close; device memory too when free_device (the executor has
 * stopped) */
void mw__trace_free(mw_runtime *rt, int free_device);
/* relaunches the executor after a device allocation where MOONWARP_RELAUNCH_AFTER_ALLOC=1 */
void mw__relaunch_after_alloc(mw_runtime *rt);

/* The line of the user's file that line of the running image's code of task kind is (a line
 * that the executor reports, as an await's resume point). */
int mw__kind_line(const mw_runtime *rt, uint32_t kind, int line);

/* The parts of a runtime's host side, one file each (runtime.c's first lines say which), as they
 * use one another. */
#define DEFAULT_FRAME_BYTES 256u
/* runtime.c: the executor's start, stop and health; a failure message's lines put as the user's */
int mw__start_executor(mw_runtime *rt);
int mw__stop_executor(mw_runtime *rt, double deadline);
int mw__restart_executor(mw_runtime *rt);
int mw__check_alive(mw_runtime *rt); /* a fault marks the runtime faulted; returns it */
int mw__usable(mw_runtime *rt);      /* 0, or why nothing may be spawned (with the message) */
void mw__user_message_line(const mw_runtime *rt, uint32_t kind, char *msg, size_t cap);
void mw__program_free(mw_program *p);
size_t mw__stats_bytes(const mw_runtime *rt); /* the kinds' rows in device memory, in bytes */
uint64_t mw__hints_dev(const mw_runtime *rt); /* the kinds' instance times after them */
int mw__grid_env_ok(void);
int mw__build_of_env(const char **out);
int mw__frame_bytes_ok(uint32_t frame_bytes);
/* programs.c: the one-unit build behind a parts load (build "tiered") */
void mw__tier_abandon(mw_runtime *rt);
void mw__tier_try(mw_runtime *rt);
/* host_futures.c: host slots, let go of or settled; the wait for the device's closed words */
void mw__hslot_settle(mw_runtime *rt, uint32_t s);
void mw__hslot_free(mw_runtime *rt, uint32_t s);
int mw__wait_closed(mw_runtime *rt);
/* stats.c: the kinds' counters as the device keeps them */
int mw__kinds_stats_raw(mw_runtime *rt, uint32_t first, uint32_t n, uint64_t (*out)[4]);

/* A completion record as the host reads it (protocol.h, completion ring; host_futures.c reads it
 * whole or not at all: mw__comp_read returns whether ticket t's has arrived). */
typedef struct mw__comp_rec {
  uint64_t fut, value;
  uint32_t status, rtype, kind;
  int32_t code;
} mw__comp_rec;
int mw__comp_read(const mw_runtime *rt, uint64_t t, mw__comp_rec *r);

/* watch.c, the completion fd's watcher: told of a spawn and of a poll's drain (both only where
 * rt->watch is set), of a fault (the fd stays readable), and stopped at close. */
void mw__watch_spawned(mw_runtime *rt);
void mw__watch_drain(mw_runtime *rt);
void mw__watch_break(struct mw__watch *w);
void mw__watch_stop(mw_runtime *rt);

#endif
