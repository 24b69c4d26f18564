/* protocol.h - the memory layouts and handshakes shared by the host runtime and the device executor.
 *
 * Included by the host (C, gcc), by the device runtime under NVRTC (CUDA C++) and by the sim
 * build (C++ on the host). Every structure that both sides touch is defined here, once, with the
 * ordering rule of each step next to it. Integer types come from the includer as mw_u8 .. mw_u64,
 * mw_i32, mw_i64 (host: <stdint.h>; device: builtin types), so this header includes nothing.
 *
 * Memory places:
 *   pinned  host memory mapped into the device address space (cuMemHostAlloc DEVICEMAP):
 *           the control block, the inbox ring, the completion ring.
 *   device  device memory allocated by the host (cuMemAlloc): the executor state, frames,
 *           future slots, queues, free lists, per-worker state and statistics.
 *   On sim both are plain host memory shared by all threads.
 *
 * Ordering vocabulary used below:
 *   dev-release  = __threadfence() then a volatile store      (pairs with dev-acquire)
 *   dev-acquire  = a volatile load then __threadfence()
 *   sys-release  = __threadfence_system() then a volatile store (pairs with host-acquire)
 *   host-release = atomic_store_explicit(memory_order_release) (pairs with sys-acquire)
 *   sys-acquire  = a volatile load then __threadfence_system()
 *   host-acquire = atomic_load_explicit(memory_order_acquire)
 */
#ifndef MW_PROTOCOL_H
#define MW_PROTOCOL_H

#define MW_PROTOCOL_VERSION 3

/* ---- handles ----------------------------------------------------------------------------
 * A future handle is 64 bits: generation in the high word, slot index + 1 in the low word.
 * Handle 0 is "no future". Generations start at 1 and grow by one each time a slot is reused,
 * so a handle kept past its slot's release is detected as stale. */
#define MW_FUT_SLOT(h) ((mw_u32)((h)&0xffffffffu) - 1u)
#define MW_FUT_GEN(h) ((mw_u32)((h) >> 32))
#define MW_FUT_MAKE(slot, gen) ((((mw_u64)(gen)) << 32) | (mw_u64)((slot) + 1u))

/* ---- future slots (device memory) --------------------------------------------------------
 * ctl packs generation and one word: gen << 32 | word.
 *   word == MW_CTL_CLOSED  complete: status, value, code and msg are final
 *   otherwise              pending; word & MW_CTL_WAITER is the waiting frame's index + 1
 *                          (0: nobody waits), word & MW_CTL_CANCEL says cancellation was asked
 * A slot whose ctl generation is g-1 with word CLOSED is, for a handle of generation g, a
 * future that has not started yet (the slot was handed out but its task has not run): an
 * awaiter may register on it by moving ctl to (g, waiter) with a CAS, a canceller may move it
 * to (g, CANCEL). So allocating a slot never writes ctl, and a host may hand out a handle
 * before the device has seen the spawn.
 *
 * Completion (producer, one lane):  write value/status/code/msg; __threadfence();
 *   old = atomicExch(ctl, gen<<32|CLOSED); if old's word names a waiter, wake it (see join below).
 * Await (waiter, one lane): CAS ctl from (gen, no waiter) or (gen-1, CLOSED) to (gen, me),
 *   keeping the CANCEL bit; a CAS that finds (gen, CLOSED) means already complete.
 *   __threadfence() after seeing CLOSED before reading value (pairs with the producer's fence
 *   before the exchange).
 * Each slot has exactly one device waiter at a time; a second awaiter of the same pending
 * future gets MW_FAIL_AWAITED.
 *
 * Cancellation (canceller, one lane of any worker: a task calling cancel(f), a worker taking a
 *   host cancel message from the inbox, a task finishing by cancellation for its children):
 *   1. CAS ctl from (gen, word) or (gen-1, CLOSED) to the same with MW_CTL_CANCEL set. A CAS
 *      that finds (gen, CLOSED) means complete (nothing to do, "not delivered"); a newer
 *      generation means a stale handle. At most one canceller succeeds per generation, and
 *      the generation check makes a late request for an earlier task harmless.
 *   2. __threadfence() (SC; pairs with the task's fence in its await, see join below).
 *   3. read fref (the producer's frame and its epoch); if there is one, CAS the frame's join
 *      from (epoch, bits) to (epoch, bits | WOKEN). A different epoch means the frame has been
 *      reused: the task is finished, nothing to do. If the old bits had no HOLD and a COUNT
 *      above zero, the task was suspended: the canceller makes it runnable (it alone, since no
 *      decrement can bring a word with WOKEN to zero). Otherwise the task runs, is queued or
 *      is registering, and sees CANCEL itself.
 *   A task that finishes by cancellation finds the generation of each child it owns from the
 *   child's slot (its reference keeps the slot): ctl's generation, or the next one when ctl is
 *   CLOSED with status still PENDING (a device slot's status is PENDING from the spawn until
 *   the completion writes it, before CLOSED).
 *   The task itself reads its own ctl (cancel requested: gen matches, not CLOSED, CANCEL set)
 *   when it starts (never running the body then), at each spawn (the spawn is skipped and the
 *   task ends cancelled) and at each await (before registering and again after resuming), and
 *   stops there with status CANCELLED. A cancel request that arrives while the body runs
 *   between those points is seen at the next one; a body that returns before it completes
 *   normally. A task that ends cancelled (itself, or by awaiting a cancelled child with
 *   await) first cancels every child it still owns (spawned, not released), then completes. */
#define MW_CTL_EMPTY 0u
#define MW_CTL_CLOSED 0xffffffffu
#define MW_CTL_CANCEL 0x40000000u
#define MW_CTL_WAITER 0x3fffffffu /* frames are at most 2^26 (the host's capacity bound) */

enum mw_status { MW_ST_PENDING = 0, MW_ST_OK = 1, MW_ST_FAILED = 2, MW_ST_CANCELLED = 3 };

/* result types: how the 8 value bytes are to be read */
enum mw_rtype {
  MW_RT_VOID = 0,
  MW_RT_BOOL,
  MW_RT_I32,
  MW_RT_U32,
  MW_RT_I64,
  MW_RT_U64,
  MW_RT_F32,
  MW_RT_F64,
  MW_RT_PTR,
  MW_RT_FUTURE
};

/* failure codes raised by the runtime itself (task code uses positive codes of its own) */
enum mw_fail_code {
  MW_FAIL_USER = 1,          /* fail() without a code */
  MW_FAIL_CAPACITY = -1,     /* no free frame or future slot for a spawn */
  MW_FAIL_STALE = -2,        /* awaited or read a stale future handle */
  MW_FAIL_AWAITED = -3,      /* a second task awaited a future that already has a waiter */
  MW_FAIL_CHILD = -4,        /* an awaited child failed */
  MW_FAIL_NOT_READY = -5,    /* value() of a future that is not complete */
  MW_FAIL_BAD_KIND = -6,     /* descriptor named a kind this executor does not have */
  MW_FAIL_DIVERGED = -7,     /* lanes reached different collectives (sim checks this) */
  MW_FAIL_BULK_AWAIT = -8,   /* a bulk instance tried to await */
  MW_FAIL_CANCELLED = -9     /* cancelled: the task itself, or a child it awaited with await */
};

#define MW_MSG_BYTES 96

typedef struct mw_slot {
  mw_u64 ctl;     /* see above; all changes by atomicCAS / atomicExch */
  mw_u64 value;   /* result bits, valid once CLOSED */
  mw_u32 status;  /* enum mw_status, valid once CLOSED; device slots: PENDING from the spawn */
  mw_u32 rtype;   /* enum mw_rtype of the producer's result */
  mw_i32 code;    /* failure code when status is FAILED or CANCELLED (MW_FAIL_CANCELLED) */
  mw_u32 refs;    /* device slots: producer + owner references; freed at 0 (atomicSub) */
  mw_u32 sibling; /* next slot (index + 1) in the owning task's child list; owner-only */
  mw_u32 kind;    /* producer's kind id, for messages */
  mw_u64 fref;    /* producer's frame: epoch << 32 | (frame index + 1); 0 = none yet. Written
                   * by whoever sets the frame up (spawn, inbox take) before the task can run;
                   * read by cancellers, who check the epoch against the frame's join. */
  char msg[MW_MSG_BYTES]; /* failure message, NUL-terminated */
} mw_slot;            /* 144 bytes */

/* ---- frames (device memory) --------------------------------------------------------------
 * A frame is the whole state of one task: this header, then the task's parameters and
 * declared locals (the generated struct). Frames are frame_bytes apart in one array.
 * A frame is owned by exactly one worker at a time: the one running it, or, while it is
 * suspended, nobody (it is reachable only through the waiter word of the slots it awaits, and
 * through its producer slot's fref for a canceller); whoever makes it runnable owns it next.
 * A task woken by a canceller leaves registrations behind: its frame outlives the task until
 * the last of them completes (DONE below). */
#define MW_FRAME_HDR_BYTES 64u

/* MW_FR_CANCEL: a bulk task skipped instances because it was cancelled (atomicOr);
 * MW_FR_FAILED: a bulk instance failed, the first to set it writes the message (atomicOr). */
enum mw_frame_flags { MW_FR_BULK = 1u, MW_FR_CANCEL = 2u, MW_FR_HOST = 4u, MW_FR_FAILED = 8u };

/* join: epoch << 32 | bits. The epoch grows by one each time the frame is set up for a task
 * (plain store by the one setting it up, which owns the free frame), so a canceller holding an
 * old fref cannot touch the frame of a later task. The bits, all changed by atomics except the
 * store that opens an await (by the task, which owns its frame):
 *   COUNT  awaited futures not yet complete
 *   HOLD   the task is still registering (the count is not final)
 *   WOKEN  a canceller took over the wake-up (set once, by CAS, see Cancellation above)
 *   DONE   the task has finished while COUNT was not zero: the frame is freed by the
 *          completion that brings COUNT to zero
 * Await (task, lane 0): store join = epoch | HOLD + n; __threadfence() (SC, pairs with the
 *   canceller's step 2: either the task sees CANCEL in its own ctl, or the canceller sees this
 *   store); read own ctl: if cancelled, take HOLD + n back and stop. Else register on each
 *   future, then atomically subtract HOLD + (futures already complete). If the result has
 *   WOKEN the task goes on (a canceller came while it registered: it will stop); if COUNT is
 *   zero it goes on; else it is suspended.
 * Completion of an awaited future: atomically subtract 1. A result of exactly 0 makes the task
 *   runnable; a result with COUNT zero and DONE set frees the frame; anything else does
 *   nothing (more to come, the task is registering, or a canceller woke it).
 * Finish: a task whose join has WOKEN may still have registrations outstanding (it was woken
 *   while suspended). It takes back the first one (await_f[1], recorded when registering) with
 *   a CAS of that slot's ctl from (gen, its waiter word) to the same without waiter, and on
 *   success subtracts 1 from COUNT itself (that future's completion will not). Then it sets
 *   DONE with atomicOr and frees the frame only if COUNT was zero. A task without WOKEN has
 *   COUNT zero and frees its frame at once. */
#define MW_JOIN_COUNT 0x00ffffffu
#define MW_JOIN_HOLD 0x01000000u
#define MW_JOIN_WOKEN 0x02000000u
#define MW_JOIN_DONE 0x04000000u

typedef struct mw_frame_hdr {
  mw_u32 kind;     /* kind id */
  mw_u32 resume;   /* resume point of the state machine, 0 = start */
  mw_u64 fut;      /* the future this task completes */
  mw_u64 join;     /* epoch << 32 | MW_JOIN_* bits, see above */
  mw_u32 flags;    /* enum mw_frame_flags */
  mw_u32 children; /* first owned child slot (index + 1), 0 = none */
  mw_u64 await_f[2]; /* the current await: [0] the first failed future (1: stale, 2: another
                      * waiter); [1] the first future it registered on */
  /* bulk: n instances share this frame; each queue entry holds one reference */
  mw_u32 bulk_n;
  mw_u32 bulk_next; /* next index to claim (atomicAdd; atomicExch to n when cancelled) */
  mw_u32 bulk_done; /* instances finished or skipped (atomicAdd); reaching n completes the future */
  mw_u32 bulk_refs; /* queue entries + running workers holding the frame (atomicAdd/Sub) */
} mw_frame_hdr;

/* ---- queue entries -------------------------------------------------------------------------
 * A run queue holds frame indices (u32). MW_NONE is "empty". */
#define MW_NONE 0xffffffffu

/* ---- inbox ring (pinned; host produces, device workers consume) ---------------------------
 * cap cells, cap a power of two. Cell i's seq tells its state for ticket t (t % cap == i):
 *   seq == t        free, the host may write ticket t
 *   seq == t + 1    full, published: the device may take ticket t
 *   the device, after copying the cell out, sets seq = t + cap (free for ticket t + cap).
 * Host write: wait seq == t (host-acquire), fill the cell, host-release seq = t + 1.
 * Device take: head is a device-memory counter. Read t = head, sys-acquire seq; if seq == t+1,
 *   CAS head t -> t+1 to claim, copy the cell, then sys-release seq = t + cap.
 *
 * A cell is either a spawn or, with MW_IN_CANCEL, a cancel request for the future in fut (kind,
 * args unused): the worker that takes it runs the Cancellation steps of the slot section on
 * that future; it needs no frame. Cancelling a host future whose spawn the device has not
 * taken yet: the host also sets MW_IN_CANCELLED in the spawn's own cell while its seq is still
 * t + 1 (a plain release store; the host is the only writer of cells and reuses this one only
 * for ticket t + cap, after the device freed it). A worker that copies a spawn with that flag
 * completes its future as cancelled without running it. Whether the device read the flag
 * before or after the store is a race the host cannot see, so it always sends the cancel
 * message too: a second request for a cancelled or complete future is a no-op. */
#define MW_INBOX_ARG_BYTES 96u

typedef struct mw_inbox_cell {
  mw_u64 seq;
  mw_u64 fut;   /* host future handle the task completes, or the one to cancel */
  mw_u32 kind;  /* kind id */
  mw_u32 bytes; /* bytes of args used */
  mw_u32 flags; /* MW_IN_BULK: args followed by n in bulk_n; MW_IN_CANCEL, MW_IN_CANCELLED */
  mw_u32 bulk_n;
  mw_u8 args[MW_INBOX_ARG_BYTES]; /* the task's parameter struct, laid out by the generator */
} mw_inbox_cell; /* 128 bytes */

enum mw_inbox_flags { MW_IN_BULK = 1u, MW_IN_CANCEL = 2u, MW_IN_CANCELLED = 4u };

/* ---- completion ring (pinned; device workers produce, the host consumes) -----------------
 * cap cells, cap a power of two and at least the number of host future slots, so a producer
 * never finds it full (each host slot completes once before the host can reuse it).
 * Device: t = atomicAdd(comp_tail, 1); fill cell t % cap; sys-release seq = t + 1.
 * Host: for its head t, host-acquire seq == t + 1, read, then host-release seq = t + cap
 *   (not read by the device, kept for symmetry and debugging), head = t + 1. */
typedef struct mw_comp_cell {
  mw_u64 seq;
  mw_u64 fut;
  mw_u64 value;
  mw_u32 status;
  mw_u32 rtype;
  mw_i32 code;
  mw_u32 kind;
  char msg[MW_MSG_BYTES];
} mw_comp_cell; /* 136 bytes */

/* ---- control block (pinned) ---------------------------------------------------------------
 * Polling: the first MW_POLLERS workers take from the inbox when they are idle, and also, when
 *   busy, every 20 us between tasks and between chunks of a bulk task, so host spawns and
 *   cancel requests are not held up while the device has other work.
 * Stopping: the host writes mw_state.stop = 1 into device memory (a copy on a stream of its
 *   own, which does not wait for the executor); every worker reads it with a volatile load at
 *   the top of its loop, takes no new task, hands its queued work to the global queue and
 *   arrives at mw_state.stop_arrived (atomicAdd). The workers leave only all together: the
 *   add that makes stop_arrived == nworkers is the commit point, after which every worker
 *   exits. Until then an arrived worker waits, and if the host clears stop (a task ran past
 *   the host's deadline) it takes its arrival back with a CAS from a value < nworkers and
 *   goes back to work. So a stop either ends with every worker gone or with every worker at
 *   work, never with part of them (the executor would lose the workers a queued task needs).
 *   The host writes stop = 0 and stop_arrived = 0 (one copy) before each launch.
 *   Host memory is read only by the few pollers (hundreds of warps polling across the
 *   bus queue every host read behind theirs: measured as millisecond round trips).
 * heartbeat: the pollers sys-store the global timer while idle and every worker after each
 *   4096th task: the host watchdog reads it to say whether the executor is alive.
 * exited: each worker atomically increments when it leaves; the host waits for all (or for
 *   the kernel to finish) before it relaunches.
 * Tracing is switched in device memory, not here: see "task traces" below. */
typedef struct mw_control {
  volatile mw_u32 exited;
  volatile mw_u64 heartbeat;
  volatile mw_u32 fault;      /* device-detected fault, a mw_fail_code; 0 = none */
  volatile mw_u32 fault_kind; /* kind id that caused it */
  mw_u32 pad[3];
} mw_control;

/* ---- task traces (device memory, allocated by the host while tracing) ----------------------
 * Each run of a task body on a worker (a "run": from the start or from the await it resumed at,
 * to its return, failure or next suspending await) is one event; a bulk worker's run of a chunk
 * of instances is one event. The body's run only: what the executor does between runs (taking,
 * completing, waking) shows as the gaps between a worker's events.
 *
 * trace_buf (one allocation): mw_trace_head head[trace_workers], then
 *   mw_trace_ev ev[trace_workers][trace_cap]; worker w owns head[w] and ev[w][*] and writes
 *   them with lane 0 only, plain stores, no atomics: event head[w].count goes to
 *   ev[w][count] when count < trace_cap, and count is incremented either way (so
 *   count - trace_cap runs were dropped when count > trace_cap).
 *
 * Switching (mw_state.trace_*): trace_gen is odd while tracing is on; the host bumps it by one
 *   at every start and stop, so every change is new to every worker.
 *   Host start: h2d trace_cap, trace_workers, trace_buf, trace_ack (heads zeroed); then h2d
 *     trace_gen (odd). Each h2d is complete before the next (a synchronous copy).
 *     Then, while the executor runs, it waits (up to a deadline) until trace_ack[w] == that
 *     gen for every running worker: a worker acks before it takes its next task, so every
 *     run of a task spawned after the start returned is recorded. A task spawned before it
 *     may have runs from before the start (not recorded) and after it.
 *   Worker, lane 0, at the top of its loop, a volatile load of trace_gen next to that of the
 *     stop flag (in flight together): if it differs from the one it holds: dev-acquire (the
 *     fields above), volatile loads of them, then __threadfence_system() (every event it wrote
 *     so far before the ack) and a volatile store trace_ack[w] = trace_gen. It records only
 *     while its gen is odd and w < trace_workers. Between that check and the end of the run
 *     it records, it uses the buffer it picked up, so it writes at most one more event after
 *     the host's stop.
 *   Host stop: h2d trace_gen (even, g); then, while the executor runs, waits until
 *     trace_ack[w] == g for every running worker: from then on no worker touches the buffer
 *     (pairs with the worker's fence before its ack) and the host reads it with d2h. A worker
 *     that stays inside one run past the host's deadline is "busy": its events are read up to
 *     the count read before them, and the buffer is not freed until its ack reaches g.
 * trace_ack (one u32 per worker of the runtime) is allocated at the first start and kept. */
typedef struct mw_trace_head {
  mw_u64 count;   /* runs recorded or dropped by this worker */
  mw_u64 pad[7];  /* a cache line per worker */
} mw_trace_head;  /* 64 bytes */

enum mw_trace_end { MW_TR_DONE = 0, MW_TR_AWAIT = 1, MW_TR_FAILED = 2, MW_TR_CANCELLED = 3 };

typedef struct mw_trace_ev {
  mw_u64 t0, t1; /* device timer (ns; %globaltimer, CLOCK_MONOTONIC on sim) at the run's start and end */
  mw_u64 fut;    /* the task's future handle: the same in every run of one task */
  mw_u32 arg;    /* plain: resume point (0 = start, else the line of the await it resumed at);
                    bulk: the first instance of the chunk */
  mw_u16 kind;   /* kind id */
  mw_u8 end;     /* enum mw_trace_end */
  mw_u8 n;       /* bulk: instances in the chunk (at most 64); 0 for a plain task */
} mw_trace_ev;   /* 32 bytes */

/* ---- per-worker state (device memory) -----------------------------------------------------
 * The deque is a Chase-Lev work-stealing deque of frame indices: the owner pushes and pops at
 * bottom, thieves CAS top. Owner push: write buf[b], dev-release bottom = b + 1. Owner pop:
 * bottom = b - 1; __threadfence(); read top; ... Thief: read top; __threadfence(); read bottom;
 * read buf[t]; CAS top t -> t + 1. The LIFO slot holds the next task to run on this warp;
 * only the owner touches it. The free caches hold recycled frame and slot indices that only
 * this worker allocates from (no atomics on the common path). */
#define MW_DEQUE_CAP 256u
#define MW_CACHE_CAP 32u

typedef struct mw_stat_row {
  mw_u64 spawned, completed, failed, cancelled;
} mw_stat_row;

typedef struct mw_worker {
  /* read by thieves: each on a cache line of its own, apart from the owner's private state */
  mw_u64 top;    /* thieves advance with atomicCAS */
  mw_u64 pad_top[15];
  mw_u64 bottom; /* owner only writes */
  mw_u64 pad_bottom[15];
  mw_u32 buf[MW_DEQUE_CAP];
  /* the owner's own */
  mw_u32 lifo;   /* next frame to run here, MW_NONE if none */
  mw_u32 nfree_frames, nfree_slots;
  mw_u32 rng;
  mw_u64 steals;
  mw_u64 idle_loops;
  /* frames this worker took from and gave back to the free lists (caches included): their
   * sums over the workers give the frames in use, deferred frees of cancelled tasks counted */
  mw_u64 frames_taken, frames_freed;
  mw_u32 free_frames[MW_CACHE_CAP];
  mw_u32 free_slots[MW_CACHE_CAP];
  /* sim only: the frame (+1) whose body runs, and why the warp was restarted while it ran */
  mw_u32 running;
  char abort_msg[MW_MSG_BYTES];
} mw_worker;

/* ---- the executor state (device memory; one per runtime) ----------------------------------
 * The host allocates every array, fills this struct and copies it to the device before the
 * first launch; it survives relaunches (kernel rebuilds), so nothing lives in module globals.
 * Capacity: nframes frames, nslots future slots of which the first host_slots belong to the
 * host (allocated by the host, never entered in the device free list). */
typedef struct mw_state {
  /* sizes */
  mw_u32 nframes, frame_bytes, nslots, host_slots;
  mw_u32 nworkers, nkinds, inbox_cap, comp_cap;
  mw_u32 gq_cap, cache_cap, pad0, pad1;
  /* pinned, device addresses */
  mw_control *ctl;
  mw_inbox_cell *inbox;
  mw_comp_cell *comp;
  /* device */
  mw_u8 *frames;
  mw_slot *slots;
  mw_worker *workers;
  mw_stat_row *stats;  /* nworkers * MW_MAX_KINDS rows, each written by its worker only */
  mw_u32 *frame_next;  /* free-stack links for frames */
  mw_u32 *slot_next;   /* free-stack links for device slots */
  mw_u32 *gq;          /* global run queue cells: frame index, MW_NONE when empty */
  mw_u64 *gq_seq;      /* Vyukov MPMC sequence per cell */
  /* counters and stack heads (device, atomics) */
  mw_u64 frame_head;   /* Treiber head: tag << 32 | (index + 1) */
  mw_u64 slot_head;
  mw_u64 gq_head, gq_tail;
  mw_u64 inbox_head;   /* next inbox ticket to take */
  mw_u64 comp_tail;    /* next completion ticket to write */
  mw_u64 launches;     /* executor launches so far */
  mw_u32 stop;         /* written by the host (see Stopping above) */
  mw_u32 stop_arrived; /* workers waiting to leave (see Stopping above); follows stop */
  mw_u64 t0;           /* globaltimer at the first launch */
  /* tracing, written by the host (see "task traces" above) */
  mw_u32 trace_gen;     /* odd while on */
  mw_u32 trace_cap;     /* events per worker in trace_buf */
  mw_u32 trace_workers; /* workers with a part of trace_buf */
  mw_u32 pad3;
  mw_u8 *trace_buf;
  mw_u32 *trace_ack;    /* per worker: the last trace_gen it acted on */
} mw_state;

#define MW_MAX_KINDS 64u

#endif /* MW_PROTOCOL_H */
