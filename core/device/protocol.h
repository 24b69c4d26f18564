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
 *           future slots, waiter nodes, the global run queue, free lists, per-worker rows.
 *   shared  on-chip memory of one CTA (a worker CTA of MW_CTA_WARPS warps, one or more per SM):
 *           each warp's spawn records, recent children, inline levels, caches and counters
 *           (mw_wstate). Lost when the executor exits: everything in it is handed to device
 *           memory before a worker leaves (see Stopping). On sim the host allocates it
 *           (mw_state.sim_cta) and the warps of one CTA are host threads sharing it.
 *   On sim every place is plain host memory shared by all threads.
 *
 * Ordering vocabulary used below:
 *   dev-release  = fence.acq_rel.gpu (__threadfence) then a volatile store or an atomic
 *   dev-acquire  = a volatile load or an atomic, then fence.acq_rel.gpu
 *   cta-release / cta-acquire = the same with fence.acq_rel.cta (__threadfence_block), for two
 *                  warps of one CTA; it orders device memory too, for threads of that CTA
 *   sys-release  = __threadfence_system() then a volatile store (pairs with host-acquire)
 *   host-release = atomic_store_explicit(memory_order_release) (pairs with sys-acquire)
 *   sys-acquire  = a volatile load then __threadfence_system()
 *   host-acquire = atomic_load_explicit(memory_order_acquire)
 *
 * The shape of the executor (runtime.cuh, device_api.cuh and executor.cuh have the code):
 *   A worker is a warp: all 32 lanes run a task body together. A task *spawned* on the device is
 *   first a record in its spawner's warp (shared memory, no device memory touched but its future
 *   slot's plain fields). When the spawner awaits it and nobody took it, it runs right there,
 *   *inline*: its frame (parameters and locals, one copy per lane) goes on the lane stacks above
 *   the spawner's, and the spawner resumes when it returns, like a call (a *level* of the warp's
 *   inline chain). Only what must leave the warp goes to device memory: a record another warp of
 *   the CTA takes (a *steal*, of records older than MW_STEAL_AGE_NS), one published to the
 *   global run queue for idle workers of other CTAs, and a level that must *suspend* (it awaits a
 *   future that is not complete and that it cannot run itself): it gets a frame in device
 *   memory, registers as a waiter, and the levels under it in the chain do the same in turn. */
#ifndef MW_PROTOCOL_H
#define MW_PROTOCOL_H

#define MW_PROTOCOL_VERSION 13

/* ---- handles ----------------------------------------------------------------------------
 * A future handle is 64 bits: generation in the high word, slot index + 1 in the low word.
 * Handle 0 is "no future". Generations start at 1 and grow by one each time a slot is reused,
 * so a handle kept past its slot's release is detected as stale. */
#define MW_FUT_SLOT(h) ((mw_u32)((h)&0xffffffffu) - 1u)
#define MW_FUT_GEN(h) ((mw_u32)((h) >> 32))
#define MW_FUT_MAKE(slot, gen) ((((mw_u64)(gen)) << 32) | (mw_u64)((slot) + 1u))
/* An inline result: a child that ran at its spawn (spawn-now, below) and completed OK with a
 * result that 32 bits can carry has no slot: its handle is the result. Low word: the tag in bits
 * 16-31 (no slot index reaches it: the runtime refuses such a capacity), the result type in
 * bits 8-15, in bits 0-1 how the high word gives the 64 result bits: MW_INL_ZERO zero-extended,
 * MW_INL_SIGN sign-extended, MW_INL_HIGH the result's high word (its low word is 0, as for
 * doubles like 1.0 or 0.5). Every reader of a handle takes it as a future complete OK; there is
 * nothing to hold, release or cancel. */
#define MW_FUT_INLINE_TAG 0xfffe0000u
#define MW_FUT_IS_INLINE(h) (((mw_u32)(h)&0xffff0000u) == MW_FUT_INLINE_TAG)
#define MW_FUT_INLINE_RTYPE(h) (((mw_u32)(h) >> 8) & 255u)
#define MW_INL_ZERO 0u
#define MW_INL_SIGN 1u
#define MW_INL_HIGH 2u
#define MW_SLOTS_MAX 0xfff00000u /* slot indexes stay below the inline tag */

/* ---- future slots (device memory) --------------------------------------------------------
 * ctl packs generation and one word: gen << 32 | word.
 *   word == MW_CTL_CLOSED  complete: status, value, code and msg are final
 *   otherwise              pending; word & MW_CTL_WAITER is the head of its waiter list (a
 *                          waiter node's index + 1; 0: nobody waits), word & MW_CTL_CANCEL says
 *                          cancellation was asked
 * A slot whose ctl generation is g-1 with word CLOSED is, for a handle of generation g, a
 * future that has not started yet (handed out, its task not run): an awaiter may register on
 * it by moving ctl to (g, waiter) with a CAS, a canceller may move it to (g, CANCEL). So
 * allocating a slot never writes ctl, and a host may hand out a handle before the device has
 * seen the spawn.
 *
 * Waiters: any number of tasks await one future. Each registration takes a waiter node
 * (mw_state.nodes: frame index + next node) and pushes it on the slot's list:
 *   Await (waiter, lane 0): node.frame = its frame; loop { node.next = head of the ctl read;
 *     __threadfence(); CAS ctl from (gen or gen-1 unstarted, word) to (gen, word's CANCEL bit |
 *     node) }; a CAS that finds (gen, CLOSED) means complete (the node goes back, the future
 *     counts as done). The fence orders node and frame before the CAS that publishes them.
 *   Completion (producer, one lane): write value/status/code/msg; __threadfence();
 *     old = atomicExch(ctl, gen<<32|CLOSED); __threadfence() (acquire: the nodes' contents);
 *     walk old's list, waking each frame (join below) and freeing each node.
 *   A reader that finds (gen, CLOSED) issues __threadfence() before reading the result (pairs
 *   with the producer's fence before the exchange): mw_outcome, mw_await_more, and
 *   mw_await_closed, which keeps an OK result in its warp's mw_wstate.seen_* for value() (the
 *   result of a handle's generation never changes; release() of the handle forgets it).
 *
 * Private completion. A child run inline by its spawner completes with plain stores of its
 * result and of ctl = (gen, CLOSED), no fence, no atomic, when no other warp can hold its
 * handle. A handle leaves its warp only in the arguments of a task of a kind with future
 * parameters, in a future-typed result, or in a frame that suspends; the first two bump the
 * warp's share epoch (mw_wstate.epoch) before the record or result is written, and a child
 * records the epoch of its spawn: a child completes privately only while the epoch is still
 * the one of its spawn and its level never had a frame. (Task code that stores a handle into
 * device memory for another task to await is outside this contract: README, task code.)
 * Everything else (a stolen or published child, a task with a frame, a host future) completes
 * with the exchange above.
 *
 * Spawn-now. A spawn that the next statement awaits (the compiler marks it) of a pure kind runs
 * at once on the spawner's warp: no record, no frame; nobody but the spawner can hold its handle
 * before that await. A child that ends OK with a result that fits gets an inline handle (above):
 * no slot, no completion to write, nothing to free. Otherwise (a failure, a wide result) it takes
 * the slot reserved before its body ran and completes privately.
 *
 * Cancellation (canceller, one lane of any worker: a task calling cancel(f), a worker taking a
 *   host cancel message from the inbox, a task finishing by cancellation for its children):
 *   1. CAS ctl from (gen, word) or (gen-1, CLOSED) to the same with MW_CTL_CANCEL set. A CAS
 *      that finds (gen, CLOSED) means complete (nothing to do, "not delivered"); a newer
 *      generation means a stale handle. At most one canceller succeeds per generation.
 *   2. __threadfence() (SC; pairs with the task's fence in its await, see join below).
 *   3. read fref (the producer's frame and its epoch); if there is one, CAS the frame's join
 *      from (epoch, bits) to (epoch, bits | WOKEN). A different epoch means the frame has been
 *      reused: the task is finished, nothing to do. If the old bits had no HOLD and a COUNT
 *      above zero, the task was suspended: the canceller makes it runnable (it alone, since no
 *      decrement can bring a word with WOKEN to zero). Otherwise the task runs, is queued or
 *      is registering, and sees CANCEL itself.
 *   4. A canceller that took over the wake-up of a suspended task owns its frame until it makes
 *      it runnable: first it asks the task's children (the frame's children list, linked
 *      through their slots' sibling words, as the task left it before its suspend's fence) with
 *      steps 1-3, and does the same for each child it finds suspended in turn, down the tree
 *      (at most MW_CANCEL_DOWN frames in hand; past that a frame is made runnable at once and
 *      asks its children when it runs). So a cancelled tree stops while its woken tasks still
 *      wait for a warp. The children's slots stay valid meanwhile: the suspended owner's
 *      reference keeps them.
 *   A running task reads its own ctl (and those of the levels under it in its warp's inline
 *   chain) when it starts from a record or frame (a host task that the inbox's take keeps to
 *   run on its own warp only when that take carried out a cancel request: a request carried
 *   out later reaches it at its first spawn, await or tick), when it suspends, and at its spawns and
 *   awaits at most every MW_TICK_NS; it then stops at that spawn or await with status
 *   CANCELLED, and so do the levels above it. A task that ends cancelled (itself, or by
 *   awaiting a cancelled child with await) first cancels every child it still owns (spawned,
 *   not released): one still in a record of its warp is marked (MW_RF_CANCELLED) and completes
 *   cancelled without running wherever it is taken; others through their slot, the generation
 *   being the slot's, or the next one when ctl is CLOSED with status still PENDING (a device
 *   slot's status is PENDING from the spawn until the completion writes it, before CLOSED).
 *
 * References (refs): a device slot is freed when its producer has completed, its owner (the
 * spawning task) has released it or finished, and every holder (a task given the future as an
 * argument; the spawner takes the holder's reference, so it never goes from 0 to 1) has
 * finished. refs counts them, starting at 2 (producer + owner) at the spawn; drops are
 * atomicSub, the one reaching 0 frees. A child completed privately and released by its owner
 * while the epoch is unchanged is freed by the owner with no atomic. Host slots keep their
 * holder count in mw_state.hrefs[slot] instead; the host frees a host slot that was passed as
 * an argument only once it reads hrefs 0 there (and its own holders have completed). */
#define MW_CTL_EMPTY 0u
#define MW_CTL_CLOSED 0xffffffffu
#define MW_CTL_CANCEL 0x40000000u
#define MW_CTL_WAITER 0x3fffffffu /* nodes are at most 2^30 - 1 */

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
  MW_FAIL_CAPACITY = -1,     /* no free frame, future slot or waiter node */
  MW_FAIL_STALE = -2,        /* awaited or read a stale future handle */
  MW_FAIL_AWAITED = -3,      /* (unused since futures take any number of waiters) */
  MW_FAIL_CHILD = -4,        /* an awaited child failed */
  MW_FAIL_NOT_READY = -5,    /* value() of a future that is not complete */
  MW_FAIL_BAD_KIND = -6,     /* descriptor named a kind this executor does not have */
  MW_FAIL_DIVERGED = -7,     /* lanes reached different collectives (sim checks this) */
  MW_FAIL_BULK_AWAIT = -8,   /* a bulk instance tried to await */
  MW_FAIL_CANCELLED = -9     /* cancelled: the task itself, or a child it awaited with await */
};

#define MW_MSG_BYTES 96
/* The failure of a spawn or await whose lanes passed different arguments (sim): "<task>: spawn"
 * MW_DIVERGED_AT "<line>", the line counted in the program's canonical places, which the host
 * puts as the line of the user's file. */
#define MW_DIVERGED_AT " with different arguments per lane at line "

typedef struct mw_slot {
  mw_u64 ctl;     /* see above; changed by atomicCAS / atomicExch (plain store: private) */
  mw_u64 value;   /* result bits, valid once CLOSED */
  mw_u32 status;  /* enum mw_status, valid once CLOSED; device slots: PENDING from the spawn */
  mw_u32 rtype;   /* enum mw_rtype of the producer's result */
  mw_i32 code;    /* failure code when status is FAILED or CANCELLED (MW_FAIL_CANCELLED) */
  mw_u32 refs;    /* device slots: producer + owner + holders, see References */
  mw_u32 sibling; /* next slot (index + 1) in the owning task's child list; owner-only */
  mw_u32 kind;    /* producer's kind id, for messages */
  mw_u64 fref;    /* producer's frame: epoch << 32 | (frame index + 1); 0 = none (not started,
                   * or running without a frame). Written by whoever gives the task a frame,
                   * before it can suspend; read by cancellers, who check the epoch against
                   * the frame's join. */
  char msg[MW_MSG_BYTES]; /* failure message, NUL-terminated */
} mw_slot;            /* 144 bytes */

/* ---- frames (device memory) --------------------------------------------------------------
 * A frame is the whole state of one task that left its warp (suspended, or queued in the
 * global run queue, or a bulk task): this header, then the task's parameters and declared
 * locals (the generated struct). Frames are frame_bytes apart in one array. A task running
 * inline has no frame. A frame is owned by exactly one worker at a time: the one running it,
 * or, while it is suspended, nobody (it is reachable only through the waiter nodes of the
 * slots it awaits, and through its producer slot's fref for a canceller); whoever makes it
 * runnable owns it next. A task woken by a canceller leaves registrations behind: its frame
 * outlives the task until the last of them completes (DONE below). */
#define MW_FRAME_HDR_BYTES 64u

/* MW_FR_CANCEL: a bulk task skipped instances because it was cancelled (atomicOr);
 * MW_FR_FAILED: a bulk instance failed, the first to set it writes the message (atomicOr). */
enum mw_frame_flags {
  MW_FR_BULK = 1u, MW_FR_CANCEL = 2u, MW_FR_HOST = 4u, MW_FR_FAILED = 8u, MW_FR_BLOCK = 16u,
  MW_FR_GRID_LAST = 32u /* a block task's grid counted its last instance: a worker completes it */
};
/* A task's generation: 0 for a spawn of the host, its spawner's + 1 for a spawn of a task (at
 * most MW_GEN_MAX). It travels with the task: bits 16-31 of its frame's flags (above the
 * mw_frame_flags), of its level's flags (above the mw_level_flags) and mw_rec.gen. An elided
 * call keeps its spawner's (its spawns are elided or refused, never records). The executor
 * elides no spawn of a task younger than mw_ctx.elide_gen (task_api.cuh, MW_ELIDE_GEN_OF). */
#define MW_GEN_SHIFT 16u
#define MW_GEN_MAX 0xffffu
#define MW_GEN_OF(flags) ((mw_u32)(flags) >> MW_GEN_SHIFT)
#define MW_GEN_BITS(flags) ((mw_u32)(flags) & (MW_GEN_MAX << MW_GEN_SHIFT))

/* join: epoch << 32 | bits. The epoch grows by one each time the frame is set up for a task
 * (plain store by the one setting it up, which owns the free frame), so a canceller holding an
 * old fref cannot touch the frame of a later task. The bits, all changed by atomics except the
 * store that opens an await (by the task, which owns its frame):
 *   COUNT  awaited futures not yet complete
 *   HOLD   the task is still registering (the count is not final)
 *   WOKEN  a canceller took over the wake-up (set once, by CAS, see Cancellation above)
 *   DONE   the task has finished while COUNT was not zero: the frame is freed by the
 *          completion that brings COUNT to zero
 * Suspend (task, lane 0, its frame written): store join = epoch | HOLD + n; __threadfence()
 *   (SC, pairs with the canceller's step 2: either the task sees CANCEL in its own ctl, or the
 *   canceller sees this store); read own ctl: if cancelled, take HOLD + n back and stop. Else
 *   register on each future, then atomically subtract HOLD + (futures already complete). If
 *   the result has WOKEN the task goes on (a canceller came while it registered: it will
 *   stop); if COUNT is zero it goes on (on its warp, frame kept); else it is suspended.
 * Completion of an awaited future: atomically subtract 1. A result of exactly 0 makes the task
 *   runnable; a result with COUNT zero and DONE set frees the frame; anything else does
 *   nothing (more to come, the task is registering, or a canceller woke it).
 * Finish: a task whose join has WOKEN may still have registrations outstanding. It sets DONE
 *   with atomicOr and frees the frame only if COUNT was zero. A task without WOKEN has COUNT
 *   zero and frees its frame at once. */
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
  mw_u32 children; /* first owned child slot (index + 1), 0 = none; a block task's frame
                    * launched as a grid: the grid's blocks that ended (Block tasks) */
  mw_u64 await_f[2]; /* the current await: [0] the first failed future (1: stale) */
  /* bulk: n instances share this frame; each queue entry or record holds one reference */
  mw_u32 bulk_n;
  mw_u32 bulk_next; /* next index to claim (atomicAdd; atomicExch to n when cancelled) */
  mw_u32 bulk_done; /* instances finished or skipped (atomicAdd); reaching n completes the future */
  mw_u32 bulk_refs; /* queue entries + running workers holding the frame (atomicAdd/Sub) */
} mw_frame_hdr;

/* ---- waiter nodes (device memory) ----------------------------------------------------------
 * frame | (mw_u64)next << 32, next = node index + 1 (0 ends the list). A free node's next links
 * the free stack. Nodes are allocated from the worker's cache, else the Treiber stack. */
#define MW_NODE(frame, next) ((mw_u64)(frame) | ((mw_u64)(next) << 32))

/* ---- the free frame ring (device memory) -----------------------------------------------------
 * The free frames are a ring of frame_rmask + 1 cells (a power of two at least nframes) with two
 * tickets, frame_rhead (next to take) and frame_rtail (next to give). Cell t & frame_rmask holds
 * MW_FRING(t, frame): the frame in its low word and the low word of t + 1 in its high word, so
 * one 8-byte load shows whether the cell holds what ticket t put there.
 *   give n frames (lane 0): dev-release (the frames' last uses before anyone reuses them), then
 *     t = atomicAdd(frame_rtail, n) and cell t + i gets MW_FRING(t + i, frame i), one volatile
 *     8-byte store each. No wait: the frames in the ring or being given never number more than
 *     nframes, so the cell of ticket t last held ticket t - cap, which a taker has passed.
 *   take up to n frames (lane 0): h = frame_rhead, the cells h .. h + n - 1 read together; the
 *     k cells in a row from h whose high word is the low word of their ticket + 1 are taken by
 *     a CAS of frame_rhead from h to h + k, then dev-acquire. None whole while frame_rtail > h: a
 *     giver is between its atomicAdd and its store: the taker reads again. None whole and
 *     frame_rtail == h: no free frame.
 * A take of many frames (a poller taking 32 host spawns) costs three dependent device-memory
 * round trips however many it takes, a give two; a free stack would walk its links one
 * dependent load per frame. The warps keep caches in front of it (mw_wstate.free_frames). */
#define MW_FRING(t, frame) ((mw_u64)(mw_u32)((t) + 1u) << 32 | (mw_u64)(mw_u32)(frame))

/* ---- queue entries -------------------------------------------------------------------------
 * The global run queue holds frame indices (u32). MW_NONE is "empty". It is a bounded MPMC
 * ring with a sequence word per cell (gq_seq): a push takes ticket t = atomicAdd(gq_tail), waits
 * for gq_seq[t & mask] == t, stores the frame, dev-release (the fence also publishes the frame's
 * contents), gq_seq = t + 1. An idle warp pops only while it holds its CTA's turn (gq_turn of
 * the CTA's first warp, taken by CAS 0 -> 1, given back by exchange). The holder claims the run
 * of filled cells t .. t + n - 1 from gq_head (gq_seq[i] == its ticket + 1 each, n at most the
 * CTA's warps waiting for the turn, itself included, and MW_GQ_POP_RUN) with one CAS of gq_head
 * from t to t + n, dev-acquire (pairs with the pushes' releases), reads the frames, a fence,
 * gq_seq = ticket + cap for each (the cells free again). Hand-off (mw_wstate.gq_hand): a warp
 * that waits for the turn stores 1 in its own word; the holder hands frame f to it by CAS 1 ->
 * f + 2, after its acquire above, so the frame's contents are visible to whoever sees f + 2 and
 * fences (the waiter: reads f + 2, stores 0, dev-acquire, runs f). A waiter that sees the turn
 * free first withdraws by CAS 1 -> 0; if that CAS fails it was handed a frame and takes it. A
 * frame no waiter accepts goes back by a push. So a popped frame is always in exactly one of:
 * the holder's hands, one waiter's gq_hand, or the queue again. */
#define MW_NONE 0xffffffffu

/* ---- LL words: records that one read sees whole ---------------------------------------------
 * The host-device rings carry their records as LL words (after NCCL's low-latency protocol): an
 * 8-byte word holds 4 bytes of data in its low half and a 4-byte flag in its high half, written
 * with one 8-byte store, so a reader sees the data and its flag together. The flag of every word
 * of the record of ticket t is MW_LL_FLAG(t); a record is whole when every word's flag is its
 * ticket's. The writer stores the words in any order with no fence between them; the reader needs
 * no seq to read first and no acquire fence: the flags it checked are in the words it read. The
 * device reads and writes them 16 bytes (two words) at a time; 8-byte halves are single-copy
 * atomic on both sides (x86 aligned 8-byte stores and loads; the GPU's 16-byte accesses of host
 * memory are not split below 8 bytes). A cell is rewritten for ticket t + cap only, so a stale
 * word carries another ticket's flag (flags repeat every 2^32 tickets, records every cap). */
#define MW_LL_FLAG(t) ((mw_u32)(t) + 1u)
#define MW_LL_WORD(data, flag) ((mw_u64)(mw_u32)(data) | (mw_u64)(mw_u32)(flag) << 32)

/* ---- inbox ring (pinned; host produces, device workers consume) ---------------------------
 * cap cells of 32 LL words (256 bytes), cap a power of two, and beside them inbox_free[cap]:
 *   inbox_free[i] == t    cell i is free: the host may write ticket t (t % cap == i)
 *   every word of cell i flagged MW_LL_FLAG(t)   the spawn of ticket t is published
 *   the device, after reading cell i, sets inbox_free[i] = t + cap.
 * Host write: wait inbox_free[i] == t (host-acquire), then store the 32 words (relaxed 8-byte
 *   stores, any order, all of them: the device checks every flag).
 * Device take: head (device memory) is the next ticket to take. A worker reads t = head and the
 *   cells t .. t+w-1 whole, the warp together (16 bytes a lane, w <= 32: one read of host memory
 *   in flight per lane per two cells); the n whole ones in a row from t are claimed together with
 *   CAS head t -> t+n. The data is already in the lanes' registers. Lane 0 then frees the n
 *   cells: a __syncwarp, then n relaxed stores of inbox_free, with no fence: every load of the
 *   cells has returned its value before the stores issue, since those values decided (the flags'
 *   check, the claim) that they run, and a GPU makes no store visible ahead of the loads it
 *   depends on; a read of host memory is done at the host once its value came back, so the
 *   host's next write of the cell cannot reach what the warp read. (A system fence there cost
 *   3,400 cycles a take on an H100, most of a PCIe round trip: bench/NOTES.md, v67.) Cells are
 *   freed in any order across takes: the host checks each cell's own word.
 *   A streaming take (the warp's last take found more than one spawn; MW_TAKE_PEEK=0 reads
 *   every cell before the claim instead): lane 0
 *   reads t = head and the last word of cell t+W-1 alone; if it carries ticket t+W-1's flag
 *   and the warp's cache holds W frames, CAS head t -> t+W claims the W cells before any is
 *   read, and the warp then reads them, each part again until its flags are whole. The host
 *   writes tickets in order, so on a host that makes its stores visible in order (x86) the
 *   first read finds them whole; elsewhere a part may be read again, never taken stale. A
 *   lost CAS costs that one read (the frames stay in the cache, what passes its share back to
 *   the free ring). Several pollers reading whole runs of cells while the host writes them
 *   took ~16 us a round of 8 KB (bench/micro/hostread.cu: the lines pass between the host's
 *   cache and the reads), the lost claims most of it.
 *   The spawns of one take are set up (frame, slot) before lane 0 carries out, in ticket order,
 *   the cancel requests among them, so a request never overtakes the spawn it names.
 *   Own frames: the one spawn a take keeps to run on its warp was written whole by that warp's
 *   lanes (header, arguments, the payload's zeroes) after the frame came out of its cache; no
 *   other warp has seen the frame. So starting it takes no fence (a frame from the global queue
 *   does: the pusher's fence pairs with it), and it reads nothing of the frame back: kind,
 *   future and flags stay in the take's registers, a fresh header is known, and each lane
 *   keeps the 8 bytes of arguments it read, which the lane stacks get by shuffles. The cancel
 *   check reads the slot's ctl as for any frame (a canceller marks the slot, and a frame's join
 *   only once it has suspended).
 * Data words (d[k] is the low half of word k): d[0..23] the task's parameter struct (96 bytes,
 * laid out by the generator; zeroes past its size), d[24] kind, d[25] flags, d[26..27] fut (low,
 * high), d[28] bulk_n, d[29..31] zero.
 *
 * A cell is either a spawn or, with MW_IN_CANCEL, a cancel request for the future in fut (kind,
 * args unused): the worker that takes it runs the Cancellation steps of the slot section on
 * that future; it needs no frame. Cancelling a host future whose spawn the device has not
 * taken yet: the host also rewrites word 25 of the spawn's own cell with MW_IN_CANCELLED added
 * (the same flag, one 8-byte store) while inbox_free[i] still says it is not taken; the host is
 * the only writer of cells, and its rewrite for ticket t + cap comes after this store in its own
 * order, so a rewrite that lands after the device took the cell changes nothing it reads. A
 * worker that copies a spawn with that flag completes its future as cancelled without running
 * it. Whether the device read the flag before or after the store is a race the host cannot see,
 * so it always sends the cancel message too: a second request for a cancelled or complete future
 * is a no-op.
 * A spawn whose arguments hold futures: the worker that takes it adds a holder reference to
 * each (atomicAdd on the slot's refs, or on hrefs for a host slot) before anything can run;
 * the host keeps each such host future (and does not reuse its slot) until the spawn has
 * completed and hrefs reads 0. */
#define MW_INBOX_ARG_BYTES 96u
#define MW_INBOX_WORDS 32u
enum { MW_IN_W_KIND = 24, MW_IN_W_FLAGS = 25, MW_IN_W_FUT = 26, MW_IN_W_BULK_N = 28 };

typedef struct mw_inbox_cell {
  mw_u64 w[MW_INBOX_WORDS];
} mw_inbox_cell; /* 256 bytes */

enum mw_inbox_flags { MW_IN_BULK = 1u, MW_IN_CANCEL = 2u, MW_IN_CANCELLED = 4u, MW_IN_BLOCK = 8u };

/* ---- completion ring (pinned; device workers produce, the host consumes) -----------------
 * cap cells of 8 LL words (64 bytes), cap a power of two and at least the number of host future
 * slots, so a producer never finds it full (each host slot completes once before the host can
 * reuse it), and beside them comp_msg[cap][MW_MSG_BYTES], the message of a failed one.
 * Device (lane 0): t = atomicAdd(comp_tail, 1); on failure only, the message into comp_msg[i]
 *   and a sys fence; then the 8 words flagged MW_LL_FLAG(t), four 16-byte stores, no fence.
 *   The record leaves as soon as the outcome is known: before the task lets go of its frame,
 *   children and holds, before the counters' flush and before the slot's own completion (its
 *   fence and exchange); those follow on the same warp and end with the closed word below.
 * Host: for its head t, the cell is whole when every word's flag is MW_LL_FLAG(t) (host-acquire
 *   loads); it reads the message after that when the status says failed; head = t + 1.
 * Closing: closed[host_slots] (pinned, u32). Once the warp that wrote the record of host slot
 *   s, generation g, has let go of everything the task held, added its counters to its rows
 *   (atomics in device memory), passed a dev-release fence (the one before the slot's
 *   exchange) and exchanged the slot's ctl to (g, CLOSED), it stores closed[s] = g (a volatile
 *   store whose value is computed from the exchange's result, so it issues after the exchange
 *   has been performed). The host, having read the record, treats s as complete at once, but:
 *   - it gives s to a new spawn only after it reads closed[s] == g (host-acquire): an exchange
 *     of generation g landing after the next spawn's waiters registered would drop them;
 *   - it reads the statistics rows (d2h) only after every record it has read is closed, so it
 *     reads counters that include the work of every task it waited for (the fence orders the
 *     rows' atomics before the closed store, as it did before the record when that came last).
   Holds are not part of it: a host slot given to tasks is freed only when hrefs reads 0.
 * Data words: d[0..1] fut (low, high), d[2..3] value (low, high), d[4] status | rtype << 8,
 * d[5] kind, d[6] code, d[7] zero. */
#define MW_COMP_WORDS 8u
enum { MW_CO_W_FUT = 0, MW_CO_W_VALUE = 2, MW_CO_W_STATUS = 4, MW_CO_W_KIND = 5, MW_CO_W_CODE = 6 };

typedef struct mw_comp_cell {
  mw_u64 w[MW_COMP_WORDS];
} mw_comp_cell; /* 64 bytes */

/* ---- control block (pinned) ---------------------------------------------------------------
 * Polling: the first MW_POLLERS workers take from the inbox when they are idle, and also, when
 *   busy, every 20 us at their spawns and awaits and between chunks of a bulk task, so host
 *   spawns and cancel requests are not held up while the device has other work. An idle poller
 *   naps between looks (up to about a microsecond), except within a millisecond of a take that
 *   found a spawn: while the host is at work it looks again at once.
 * Stopping: the host writes mw_state.stop = 1 into device memory (a copy on a stream of its
 *   own, which does not wait for the executor); every worker reads it with a volatile load at
 *   the top of its loop (where no task of its runs), takes no new task, hands what its warp
 *   holds to device memory (records become frames in the global run queue, caches go back to
 *   the free lists, counters to their rows) and arrives at mw_state.stop_arrived (atomicAdd).
 *   The workers leave only all together: the add that makes stop_arrived == nworkers is the
 *   commit point, after which every worker exits. Until then an arrived worker waits, and if
 *   the host clears stop (a task ran past the host's deadline) it takes its arrival back with
 *   a CAS from a value < nworkers and goes back to work. So a stop either ends with every
 *   worker gone or with every worker at work, never with part of them.
 *   The host writes stop = 0 and stop_arrived = 0 (one copy) before each launch.
 *   Host memory is read only by the few pollers (hundreds of warps polling across the
 *   bus queue every host read behind theirs: measured as millisecond round trips).
 * heartbeat: the pollers sys-store the global timer while idle and every worker after each
 *   4096th task it starts from its loop: the host watchdog reads it.
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
 * to its return, failure or next await that leaves the body: a suspension, or a child run
 * inline after it) is one event; a bulk worker's run of a chunk of instances is one event. The
 * body's run only: what the executor does between runs (taking, completing, waking) shows as the
 * gaps between a worker's events.
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
 *     that stays inside one task tree past the host's deadline is "busy": its events are read
 *     up to the count read before them, and the buffer is not freed until its ack reaches g.
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

/* ---- per-worker rows (device memory) --------------------------------------------------------
 * Counters: each warp counts in its shared state (frames taken and freed, and the counts of the
 * task kinds it met lately: mw_wstate.cnt, see below) and adds them to its rows here with
 * atomicAdd (no result used) whenever it closes a host future's slot (completion ring), completes a
 * future another warp may wait for, goes idle, and before it leaves. The host reads the rows with
 * d2h: each is exact once every task it counted has been seen complete.
 *
 * Kind counters. A runtime holds up to MW_MAX_KINDS kinds, too many for a counter per kind in
 * each warp or a row per kind for each worker, so both are small direct-mapped caches:
 *   the warp's cache (shared): MW_KIND_CACHE entries; kind k counts in entry k & (MW_KIND_CACHE
 *     - 1) (mw_wstate.cnt_kind says which kind it holds, dirty which hold counts). A count for
 *     a kind whose entry holds another first flushes that entry (below) and takes it over.
 *   the worker's entries (device): MW_STAT_ENTRIES mw_stat_entry per worker (worker w's at
 *     stats[w * MW_STAT_ENTRIES]); kind k adds into entry k & (MW_STAT_ENTRIES - 1). The worker
 *     alone writes them, and keeps a copy of their kind fields (mw_wstate.row_kind, read from
 *     device memory when the worker starts), so a flush reads no device memory. An entry that
 *     holds another kind is first retagged: its counts are taken out (atomicExch to 0) and
 *     added to that kind's spill row (spill[kind], atomicAdd: rows shared by all workers, rare:
 *     only kinds whose entries collide in one worker's flushes), then its kind is stored.
 *   A kind's figures = its spill row + every worker's entry that holds it; the totals = every
 *   spill row + every entry. Once the tasks counted have completed (the ordering above) they
 *   are exact; read while a worker retags an entry, a kind's figures may be off for that long
 *   (the counts taken out but not yet in the spill row, or in both), the totals too. */
#define MW_CACHE_CAP 32u
#define MW_MAX_KINDS 4096u   /* a power of two; kind ids fit the 16-bit tags and trace events */
#define MW_KIND_CACHE 32u    /* kind counter entries per warp (a power of two; a dirty bit each) */
#define MW_STAT_ENTRIES 64u  /* kind counter entries per worker in device memory (a power of two) */

typedef struct mw_stat_row {
  mw_u64 spawned, completed, failed, cancelled;
} mw_stat_row;

typedef struct mw_stat_entry {
  mw_u32 kind;     /* the kind it counts (plain store by its worker; 0 at first) */
  mw_u32 pad;
  mw_stat_row n;   /* atomicAdd by its worker; atomicExch to 0 when it is retagged */
} mw_stat_entry;   /* 40 bytes */

typedef struct mw_worker {
  mw_u64 steals;       /* records taken from other warps of the CTA and frames from the queue */
  mw_u64 idle_loops;
  /* frames this worker took from and gave back to the free lists (caches included): their
   * sums over the workers give the frames in use, deferred frees of cancelled tasks counted */
  mw_u64 frames_taken, frames_freed;
  mw_u32 queued;       /* records in its warp when it last added its counters (a snapshot) */
  /* sim only: 1 + the kind of the bulk task the warp runs (0: none), for fault reports; and
   * why the warp was restarted (abort_msg) */
  mw_u32 running;
  char abort_msg[MW_MSG_BYTES];
} mw_worker;

/* ---- the warp's shared state (shared memory; mw_state.sim_cta on sim) -----------------------
 * Spawn records (rec). State word: seq << 4 | enum mw_rec_state, changed only as follows:
 *   FREE -> READY   the owner warp, after filling the record: cta-release (its lanes' stores
 *                   __syncwarp'ed first). seq grows by one at each fill.
 *   READY -> OWNED  the owner's claim (CAS): it runs the record inline or as its next task
 *   READY -> TAKEN  a thief's claim (CAS; another warp of the CTA, or one publishing it to the
 *                   global queue) of a record that is *stealable*: a runnable frame that waited
 *                   MW_STEAL_AGE_NS; a spawn that waited that long while its owner made two more
 *                   spawns or awaits (so the child an await right after its spawn wants stays
 *                   with its spawner however slow the spawner is), or that waited
 *                   MW_STRAND_NS whatever its owner does (a spawner that computes on without
 *                   spawning or awaiting keeps it back at most that long)
 *   TAKEN -> FREE   the thief, after copying what it needs (cta-release: the owner refills it)
 *   OWNED -> FREE   the owner, after its lanes copied what they need (their __syncwarp orders
 *                   it; no fence: no other warp acts on a record that leaves OWNED)
 * A record is a spawn not yet run (MW_RF_SPAWN: kind, fut and args, and a frame reserved for it),
 * a bulk task its spawner may join (MW_RF_BULK), or a task with a frame that is runnable (a
 * woken task; the waker's warp runs it next unless a thief takes it). flags may be or'ed by the owner while the record is OWNED (MW_RF_CANCELLED), and
 * is read by the claimer after its claim.
 * The other parts (kid, lv, caches, counters) belong to the warp alone. */
#define MW_CTA_WARPS 4u        /* worker warps per CTA */
#define MW_RECS 16u            /* spawn records per warp */
#define MW_KIDS 16u            /* recent children per warp */
#define MW_LEVELS 40u          /* deepest inline chain (levels) */
#define MW_STEAL_AGE_NS 1000u  /* a record is taken by another warp only once this old */
#define MW_STRAND_NS 20000u    /* a spawn is taken by another warp once this old, in any case */
#define MW_TICK_NS 2000u       /* periodic checks of a busy warp: cancellation, publication, polling */
#ifndef MW_TICK_CALLS
#define MW_TICK_CALLS 64u      /* spawns and awaits between two looks at the clock (a power of two) */
#endif
/* The executor's stack (elided calls, task_api.cuh): a spawn inside an elided call is refused
 * when the elided calls nested on the executor's thread already take mw_state.stack_bytes of
 * stack, counted from the outermost one's own frame (mw_runtime_desc.stack_bytes, default
 * MW_STACK_BYTES; sim: MW_SIM_STACK_BYTES, its lanes' fibers having 256 KiB). Real tasks do not
 * nest on the stack (each level runs from the executor's loop), so that is the only depth the
 * stack does not bound by itself. Measured from the outermost elided call, as a distance: on the
 * GPU most of the executor and the bodies it runs are inlined into the kernel, whose one frame
 * holds their locals at offsets of the compiler's choosing (sm_90: a body's local lay 32 bytes
 * above the executor's), so addresses are ordered by depth only past the first real call. The
 * reference is taken in the outermost elided call's spawner (task_api.cuh, mw_elide_enter),
 * whose frame may be the kernel's own (a real body: what an elided call runs is a fast body,
 * which calls only fast bodies, task_api.cuh); as a distance it still bounds the stack from
 * above: elided calls nest without bound only through a cycle of fast bodies, and a function on a cycle of
 * calls is a real call (NVVM inlines nothing into it), whose frame lies below the frames it is
 * called from; so the distance from anywhere in the spawner's frame counts at least what the
 * calls below it take, and two places in one frame are a frame apart at most.
 * The cuda backend sets each thread's stack to the kernel's own local memory + stack_bytes +
 * MW_STACK_SLACK (the frames between the executor and the outermost elided call, which hold
 * the frames of the tasks their bodies may run in place, and the frame of the last call
 * allowed). */
#define MW_STACK_BYTES 16384u
#define MW_STACK_SLACK 4096u
#ifndef MW_SIM_STACK_BYTES /* a sim build may take less, to meet the depth a GPU allows */
#define MW_SIM_STACK_BYTES (96u * 1024u)
#endif

enum mw_rec_state { MW_REC_FREE = 0, MW_REC_READY = 1, MW_REC_OWNED = 2, MW_REC_TAKEN = 3 };
/* MW_RF_SPAWN: a spawn not yet run: kind, fut and args are here, frame is reserved for it (a
 * spawn takes its frame from the warp's cache at once, so capacity is counted as before and a
 * record can always become a frame) but not written; else frame is a runnable task's.
 * MW_RF_CANCELLED: its owner cancelled the spawn: it completes cancelled without running.
 * MW_RF_BULK: frame is a bulk task's, written and holding the record's reference, that its
 * spawner may join (see Joining a bulk task); fut is 0; stealable as a spawn is. */
enum mw_rec_flags { MW_RF_SPAWN = 1u, MW_RF_CANCELLED = 2u, MW_RF_BULK = 4u };

typedef struct mw_rec {
  mw_u32 state;  /* seq << 4 | enum mw_rec_state */
  mw_u32 kind;
  mw_u64 fut;
  mw_u64 t0;     /* globaltimer when it became READY */
  mw_u32 frame;  /* the spawn's reserved frame, or a runnable task's (see MW_RF_SPAWN) */
  mw_u32 flags;  /* enum mw_rec_flags */
  mw_u32 epoch;  /* the owner's share epoch at the spawn */
  mw_u32 sibling; /* the slot's sibling link as written at the spawn */
  mw_u32 calls;   /* the owner's progress (mw_wstate.progress) when it became READY */
  mw_u32 gen;     /* the spawned task's generation (MW_GEN_SHIFT) */
  mw_u8 args[MW_INBOX_ARG_BYTES];
} mw_rec; /* 144 bytes */

/* A child that completed inline, as its owner level sees it: its result, so that value() and
 * release() touch no device memory. A spawn still waiting is found in the records. */
enum mw_kid_state { MW_KID_NONE = 0, MW_KID_DONE = 1 };

typedef struct mw_kid {
  mw_u64 fut;
  mw_u64 value;
  mw_u32 sibling; /* the slot's sibling link as written at the spawn */
  mw_u32 epoch;   /* the warp's share epoch at the spawn */
  mw_u8 state;    /* enum mw_kid_state */
  mw_u8 status;   /* enum mw_status */
  mw_u8 rtype;    /* enum mw_rtype */
  mw_u8 level;    /* the owning level */
  mw_u8 priv;     /* completed privately: its slot still counts the producer's reference */
  mw_u8 pad[3];
} mw_kid; /* 32 bytes */

/* A level of the warp's inline chain: level 0 is the task the warp took from a record, the
 * global queue or the inbox; level d + 1 is a child that level d awaits and runs inline, or a
 * *nested root*: a woken task in a record of the CTA that waited MW_STEAL_AGE_NS, which the warp
 * runs while level d waits at an await, so that a woken task does not wait for a busy warp's
 * whole chain (spawns nobody took wait for an idle worker, the owner's await or its loop). A root level (MW_LV_ROOT) completes with the exchange, and when it
 * finishes or suspends the level below goes on with its await; cancellation of a level reaches
 * the levels above it up to the next root. Its frame (one copy per lane) is at byte off of the
 * lane stacks, the futures of the await in progress right after it. */
enum mw_level_flags {
  MW_LV_CANCELLED = 1u, /* it saw its cancellation: it stops at its next spawn or await */
  MW_LV_PUBLIC = 2u,    /* its frame was written and its slot's fref set: it completes with the
                         * exchange, never privately */
  MW_LV_ROOT = 4u       /* a task the warp took (level 0, or nested): see below */
};

typedef struct mw_level {
  mw_u64 fut;       /* the future it completes */
  mw_u64 bad;       /* the await in progress: first failed future (1: stale or invalid) */
  mw_u32 kind, resume;
  mw_u32 frame;     /* its frame in device memory (reserved at the spawn; written when it
                     * suspends: MW_LV_PUBLIC) */
  mw_u32 children;  /* owned children list head (slot index + 1) */
  mw_u32 flags;     /* enum mw_level_flags; the task's generation in bits 16-31 (MW_GEN_SHIFT) */
  mw_u32 epoch;     /* the share epoch at its spawn (inline levels) */
  mw_u32 off;       /* byte offset of its frame in the lane stacks */
  mw_u32 sibling;   /* its slot's sibling link (inline levels) */
  mw_u16 naw, cur;  /* the await in progress: futures, and the next one to look at */
  mw_u32 bulk;      /* frame + 1 of the latest bulk task it spawned into a record (0: none), a
                     * hint for its await: see Joining a bulk task */
} mw_level; /* 56 bytes */

/* Joining a bulk task. A bulk task of a leaf kind that a task spawns goes to a record of the
 * spawner's warp (MW_RF_BULK), not to the global queue, and the level notes its frame in
 * mw_level.bulk. An await of that future alone claims the record (READY -> OWNED) and runs the
 * instances on the awaiting warp, at the lane stack's offset after the level's frame, with the
 * same claims (atomicAdd on bulk_next) and invitations as any worker running a bulk task: the
 * record's reference is the join's, dropped when no instance is left to claim; then the await
 * goes on as usual (the task completes when the last instance finishes, whoever ran it). Before
 * it, the joiner watches the future's slot for up to MW_JOIN_SPIN_NS while other workers finish
 * the instances they claimed (a plain load of the slot's ctl word: a hint; the await reads the
 * slot as always), so a short task's await finds it complete and does not suspend. So a
 * stage of a pipeline does not wait for an idle worker to find it, nor its driver for a wake-up.
 * A record that nobody joins is published as a spawn's is (stolen, aged, evicted, flushed, or
 * run by its own warp next) and runs through the global path (mw_run_bulk). The note in
 * mw_level.bulk is only a hint: the record is looked up by its frame and claimed by CAS. */

/* Running a bulk task's instances alone. A spawner that awaits its bulk task at once may run the
 * instances itself, one after the other, with no claims, board or invitations (the generated
 * spawn-now of a pure kind, and the join of a bulk record, "alone"): when there is one, or when
 * the kind's instances fit in MW_ALONE_CYCLES together as last timed, or, never timed, when
 * there are at most MW_JOIN_ALONE (runtime: mw_alone). Every warp that runs instances times them
 * (clock64, per chunk) and stores the cycles per instance in inst_cycles[kind] when it differs
 * by more than a quarter from what it read there when it began: plain loads and stores, a hint
 * that may be stale or torn by no more than a racing writer's figure. It decides who runs the
 * instances, never whether they run or how often. */

/* The bulk board. A bulk task with instances for more than one worker is posted on the board
 * (mw_state.board: MW_BOARD cells in one 32-byte sector) by the first worker that claims from it,
 * instead of one global-queue invitation per worker: every idle warp reads the board in its idle
 * loop with one load and joins at once, so the chip fills within one idle nap and no hand-over
 * races for a queue cell. The global-queue invitations stay as the fallback when the board is
 * full.
 *   cell: 0 free; (sequence << 32) | (frame + 1) while posted; with MW_BOARD_GONE while removed.
 *   Post (lane 0 of a worker holding a reference on the frame): bulk_refs += 1 (the board's
 *     reference); release (the frame's contents: the spawner may be this warp, whose bulk
 *     record went no further than its CTA); then CAS 0 -> cell on a free cell (the sequence makes each post's cell value
 *     unique, so a joiner never mistakes a later post for the one it read). A worker that
 *     finds the frame in a cell already (it joined there, or another joiner posted it first;
 *     with MW_BOARD_GONE, every instance is claimed) posts nothing and invites nobody: one cell
 *     a task, and global-queue invitations only while the board is full of other tasks.
 *   Seats: a poster stores in board_seats[k], before its CAS on cell k, how many more workers
 *     the task has chunks for; a joiner first takes a seat (atomicSub; none left: it does not
 *     join, and touches nothing else), so a task of 32 instances draws a few dozen joiners, not
 *     every idle warp of the chip, whose joins would hold up its claims and its Remove. Only a
 *     hint: a seat taken for a later post of the same cell, or a count that racing posters
 *     overwrote, changes how many help, never whether every instance runs (the poster claims on
 *     until none is left).
 *   Join (lane 0 of an idle warp): read cell c; board_users[k] += 1; SC fence; read the cell
 *     again: the same c means the board's reference is still held and stays held until
 *     board_users[k] drops (Remove waits for it), so bulk_refs += 1 (the joiner's reference) is
 *     safe; SC fence; board_users[k] -= 1. Otherwise board_users[k] -= 1 and nothing was touched.
 *   Remove (lane 0 of any worker leaving the task's instances, all of which are claimed by then,
 *     while it holds its own reference): CAS c -> c | MW_BOARD_GONE (one remover wins); SC fence;
 *     wait until board_users[k] is 0 (joiners between their two reads, a few atomics long); SC
 *     fence; cell = 0; drop the board's reference (never the last: the remover holds one).
 *   A joiner reads the frame after its SC fences, so the post's release is its acquire.
 * The two SC fences pair as a store-buffering pattern: a joiner either sees GONE on its second
 * read, or its users increment is seen by the remover's wait. Every worker that runs instances
 * removes at its exit, and the poster is one of them, so no cell outlives its task; at the stop
 * barrier no worker is inside a bulk task, so the board is empty across relaunches. */
#define MW_BOARD 4
#define MW_BOARD_GONE 0x8000000000000000ull

/* Block tasks. A task declared `task block void name(params) { ... }` runs its body on all
 * MW_CTA_WARPS warps of one worker CTA at once. In the body: `warp` (0 .. MW_CTA_WARPS - 1),
 * `thread` (warp * 32 + lane), `nthreads` (MW_CTA_WARPS * 32), `lane`, `index` (its instance
 * when spawned in bulk, else 0), `barrier()` (every warp of the CTA: bar.sync 1 on cuda; on sim a
 * CTA barrier that fails the task, with the lines, when the warps reach different barriers or
 * one leaves while others wait), and `__shared__` declarations, which the generator turns into
 * references into the CTA's block area (at most MW_BLOCK_SMEM bytes: dynamic shared memory on
 * cuda, as much as the image's mw_block_area_bytes says: the largest need of its block tasks,
 * rounded to 128 bytes, in one unit, MW_BLOCK_SMEM in parts, 0 without block tasks; host memory
 * per CTA on sim, MW_BLOCK_SMEM bytes, mw_state.sim_block); their sum is checked against
 * MW_BLOCK_SMEM at compile time, at the user's line. First version:
 * a block task spawns and awaits nothing, fails nothing and returns nothing (a compile error at
 * the user's line says so); any task may spawn and await it, the host too, alone or in bulk.
 *   Its frame: MW_FR_BLOCK (the host's spawn: MW_IN_BLOCK in its inbox flags), bulk_n instances
 *     (1 for a spawn alone), claimed, counted and referenced as a bulk task's are (bulk_next,
 *     bulk_done, bulk_refs). A spawn puts it in the global run queue at once: never a record,
 *     never run inline or at the spawn, so an await of it suspends until a CTA completes it.
 *   The CTA's block slot (mw_blk_slot: shared memory beside the warps' states; sim_blk on sim):
 *     word = seq << 12 | host warp << 8 | arrived warps (a bit each) << 4 | state;
 *     state FREE -> HELD (the host warp's CAS) -> RUN (the arrival that completes the mask) ->
 *     FREE (the host warp, after the last instance), or HELD -> FREE (withdrawn, by the host
 *     warp's CAS). Every change to FREE bumps seq, so a late arrival's CAS fails.
 *   Hold: a worker that takes a block frame (global queue, inbox) is its host warp. A CTA of
 *     fewer than MW_CTA_WARPS warps (the last one, when the worker count is not a multiple of
 *     MW_CTA_WARPS) never holds one: it pushes the frame back to the queue and naps (a runtime
 *     with no complete CTA refuses to compile a block task). A frame whose instances are all
 *     claimed is dropped; one cancelled before it ran is completed cancelled without a hold.
 *     Else the host warp stores the frame in own[its warp], cta-release (fence.cta), and CASes
 *     the word from FREE to HELD with its own bit; a word not FREE (another block task held
 *     here) sends the frame back to the queue.
 *   Drain and arrival: every warp reads the word at the top of its loop (the one shared load
 *     the idle loop pays) and, finding HELD, arrives (CAS adding its bit; the one completing the
 *     mask also sets RUN) instead of taking work; warps still in a body arrive when it ends. An
 *     arrived warp waits for RUN (then runs) or for a new seq or FREE (withdrawn: it goes on).
 *   Bounded: the host warp withdraws the hold (CAS HELD -> FREE, seq + 1) when the word is not
 *     RUN within MW_BLOCK_HOLD_NS (a warp of the CTA in a long body) or the executor stops, and
 *     pushes the frame back to the global queue, for a CTA whose warps are idle; so neither a
 *     busy CTA nor a stop waits on a held block task.
 *   Run (every warp, mw_block_run). Per instance: the host warp claims it (atomicAdd
 *     bulk_next; a cancelled task's rest is claimed and skipped) and stores it in index
 *     (MW_NONE: none left); bar.sync 1 (all warps see it; after the first, each reads own[host]
 *     and passes a gpu fence: the frame, which the host warp acquired from the queue); every
 *     warp copies the frame to its lane stacks and runs the body with its warp and the
 *     instance; bar.sync 1 (every warp's stores before the completion); the host warp
 *     counts it done (fence, atomicAdd bulk_done: the last, on any CTA, completes the future as
 *     a bulk task's last instance does). After the instance that reads MW_NONE the host warp
 *     drops its reference (bulk_drop: the last frees the frame) and stores FREE with seq + 1.
 *     The host warp's first claim may invite more CTAs through the global queue (references,
 *     at most MW_BULK_FANOUT, only while warps are hungry, never past one per complete CTA).
 *   Barrier 1 is the block task's alone (the executor uses barrier 0 once, at a launch).
 *   Sim: barrier() and the executor's steps meet at a CTA barrier of host memory (bar, line[],
 *     bad): each warp stores where it is (a body line, MW_BLK_AT_END at the body's end,
 *     MW_BLK_AT_NEXT, MW_BLK_AT_LOST) and adds itself; the arrival that completes it compares
 *     the places and, if they differ, fails the task (MW_FR_FAILED first wins; the message
 *     "<task>: warps at different barriers: line L (warps ...), ..." with MW_BLK_DIVERGED, whose
 *     lines the host puts in the user's file) and every warp leaves the body there (a C++
 *     exception caught around the body): that barrier stands for the instance's end. Lanes of one
 *     warp at different barrier() lines fail it the same way. A warp restarted inside a body (its
 *     lanes diverged across call sites) finds in[its warp] set: the instance fails with its
 *     divergence message and the warp meets the others at the barrier as MW_BLK_AT_LOST. A wait
 *     at the barrier leaves the warp once the runtime faulted. A fault or trap in a body is a
 *     fault of the runtime, as for any task.
 *   As a grid (cuda, an image compiled with MW_GRIDS: one unit, linked with the device runtime
 *     library): the image has a kernel for each block kind (blockIdx.x the instance, less the
 *     first; the same body, __shared__ struct in dynamic shared memory and bar.sync 1) and
 *     mw_grid_launch. The host sets grid_min before each launch (twice the complete CTAs, when
 *     the executor leaves room on an SM for another CTA of its size; else 0). A warp that takes
 *     a block frame whose unclaimed instances are at least grid_min (not cancelled, its CTA
 *     complete) claims them all (atomicExch bulk_next, n: [i, n)), zeroes children and
 *     launches the grid fire-and-forget; its reference goes to the grid (a failed launch fails
 *     the task, its instances counted). Each block, after its body and a CTA barrier, fences
 *     and adds 1 to bulk_done; the one that reaches bulk_n sets MW_FR_GRID_LAST (atomicOr);
 *     then it fences and adds 1 to children, and the block that makes it the grid's size pushes
 *     the frame to the global queue (the grid's reference back). Any warp that takes a block
 *     frame first clears MW_FR_GRID_LAST (atomicAnd, when a load shows it): the one that
 *     cleared it fences and completes the future (mw_bulk_complete), then drops its reference.
 *     The instances a grid took all run (a cancel after the launch does not stop them) and
 *     trace nothing; a grid in flight keeps the executor's kernel from ending (a parent grid
 *     ends after its children), so a stop waits for it and its push lands before the next
 *     launch. Such an image also has mw_grid_prime, which launches an empty grid from the
 *     device; the host launches it once, and waits for it, when it loads the image, before the
 *     executor: without it a grid launched by the executor faulted (CUDA_ERROR_LAUNCH_FAILED) in
 *     a context that had first run an image without the device runtime (bench/NOTES.md, v67). */

/* Bytes of a worker CTA's block area (block tasks' __shared__ variables). */
#define MW_BLOCK_SMEM 32768u
/* How long (ns) a host warp holds a block task for its CTA's warps to arrive before it
 * withdraws it (see Block tasks above). */
#ifndef MW_BLOCK_HOLD_NS
#ifdef MW_SIM
#define MW_BLOCK_HOLD_NS 20000000ull
#else
#define MW_BLOCK_HOLD_NS 1000000ull
#endif
#endif
enum mw_blk_state { MW_BLK_FREE = 0, MW_BLK_HELD = 1, MW_BLK_RUN = 2 };
#define MW_BLK_STATE(v) ((v)&15u)
#define MW_BLK_MASK(v) (((v) >> 4) & 15u)
#define MW_BLK_HOST(v) (((v) >> 8) & 15u)
#define MW_BLK_SEQ(v) ((v) >> 12)
/* sim: where a warp arrived at the CTA barrier, besides the line of a barrier() of the body */
enum { MW_BLK_AT_END = 0, MW_BLK_AT_NEXT = -1, MW_BLK_AT_LOST = -2 };
/* the failure message of warps that reached different barriers (sim): "<task>" MW_BLK_DIVERGED
 * then "line L (warps ...)" parts, the lines counted as MW_DIVERGED_AT's are */
#define MW_BLK_DIVERGED ": warps at different barriers: "

/* The CTA's block slot (see Block tasks above; shared memory beside the warps' states, so that
 * their layout does not change; sim: mw_state.sim_blk, one per CTA). */
typedef struct mw_blk_slot {
  mw_u32 word;   /* seq << 12 | host warp << 8 | arrived warps << 4 | enum mw_blk_state */
  mw_u32 index;  /* the instance the CTA runs next, written by the host warp; MW_NONE: none left */
  mw_u32 bar;    /* sim: the CTA barrier, generation << 4 | warps arrived */
  mw_u32 bad;    /* sim: the last barrier found the warps at different places */
  mw_i32 line[MW_CTA_WARPS]; /* sim: where each warp arrived (MW_BLK_AT_*, else a line) */
  mw_u32 own[MW_CTA_WARPS];  /* warp w's: the frame + 1 it holds or last held as host */
  mw_u32 in[MW_CTA_WARPS];   /* warp w's: 1 + the host warp while it runs the instances */
} mw_blk_slot;   /* 64 bytes */

typedef struct mw_wstate {
  mw_rec rec[MW_RECS];
  mw_kid kid[MW_KIDS];
  mw_level lv[MW_LEVELS];
  mw_u32 free_frames[MW_CACHE_CAP];
  mw_u32 free_slots[MW_CACHE_CAP];
  mw_u32 slot_gen[MW_CACHE_CAP];   /* the generation each cached slot's next handle gets */
  mw_u32 free_nodes[MW_CACHE_CAP];
  mw_u32 nfree_frames, nfree_slots, nfree_nodes;
  mw_u32 depth;     /* levels running (0: none); read by the sim after a warp restart */
  mw_u32 epoch;     /* share epoch (see Private completion) */
  mw_u32 kid_next;  /* where the next child entry goes (ring) */
  mw_u32 kid_used;  /* bit i: kid[i] holds an entry */
  mw_u32 progress;  /* spawns and awaits of the warp so far (read by the CTA's other warps) */
  mw_u32 last_rec;  /* the record of the latest spawn (a hint: the await that follows wants it) */
  mw_u32 rec_seq;
  mw_u64 tick;      /* globaltimer of the last tick */
  mw_u64 polled;    /* pollers: when the inbox was last looked at */
  mw_u64 seen_fut;  /* the future an await last found complete in its slot (mw_await_closed), */
  mw_u64 seen_value; /* its result and result type, for value(); 0 when none or released */
  mw_u32 seen_rtype;
  mw_u32 seen_pad;
  mw_u32 dirty;     /* bit e: cnt[e] holds counts not yet in the rows */
  mw_u32 frames_taken, frames_freed, steals;
  mw_u32 gq_turn;   /* in the CTA's first warp: 1 while one of its warps pops the global queue */
  mw_u32 gq_hand;   /* MW_GQ_POP_RUN > 1: 0, 1 while this warp waits for the CTA's turn, f + 2
                     * once the turn's holder handed it frame f (runtime.cuh, mw_gq_pop_cta) */
  /* kind counters (see per-worker rows): the kind each cache entry counts, and the kind each
   * of the worker's device entries holds (a copy) */
  mw_u16 cnt_kind[MW_KIND_CACHE];
  mw_u16 row_kind[MW_STAT_ENTRIES];
  mw_u32 cnt[MW_KIND_CACHE][4]; /* spawned, completed, failed, cancelled since the last flush */
} mw_wstate;

/* ---- the executor state (device memory; one per runtime) ----------------------------------
 * The host allocates every array, fills this struct and copies it to the device before the
 * first launch; it survives relaunches (kernel rebuilds), so nothing lives in module globals.
 * Capacity: nframes frames, nslots future slots of which the first host_slots belong to the
 * host (allocated by the host, never entered in the device free list), nnodes waiter nodes. */
typedef struct mw_state {
  /* sizes */
  mw_u32 nframes, frame_bytes, nslots, host_slots;
  mw_u32 nworkers, nkinds, inbox_cap, comp_cap;
  mw_u32 gq_cap, cache_cap, nnodes, frame_rmask; /* frame_rmask: the free frame ring's cells - 1 */
  /* pinned, device addresses */
  mw_control *ctl;
  mw_inbox_cell *inbox;
  mw_u64 *inbox_free;  /* inbox_cap: the ticket each inbox cell is free for */
  mw_comp_cell *comp;
  char *comp_msg;      /* comp_cap * MW_MSG_BYTES: the message of a failed completion */
  mw_u32 *closed;      /* host_slots: the generation each host slot was last closed at (completion ring) */
  /* device */
  mw_u8 *frames;
  mw_slot *slots;
  mw_worker *workers;
  mw_stat_entry *stats; /* nworkers * MW_STAT_ENTRIES kind counters, each written by its worker
                        * only (see per-worker rows) */
  mw_stat_row *spill;  /* MW_MAX_KINDS rows: counts of retagged entries (atomicAdd) */
  mw_u32 *inst_cycles; /* MW_MAX_KINDS: per kind, the clock cycles one instance of its bulk
                        * tasks took where last timed, 0 before; plain loads and stores of any
                        * warp, a hint (task_api.cuh, mw_alone) */
  mw_u64 *frame_ring;  /* the free frame ring (see above) */
  mw_u32 *slot_next;   /* free-stack links for device slots */
  mw_u32 *gq;          /* global run queue cells: frame index, MW_NONE when empty */
  mw_u64 *gq_seq;      /* Vyukov MPMC sequence per cell */
  mw_u64 *nodes;       /* waiter nodes (MW_NODE) */
  mw_u32 *hrefs;       /* host slots: holder references taken by tasks */
  mw_wstate *sim_cta;  /* sim: the CTAs' shared state, MW_CTA_WARPS per CTA; NULL on cuda */
  mw_u8 *sim_block;    /* sim: the CTAs' block areas, MW_BLOCK_SMEM bytes each; NULL on cuda */
  mw_blk_slot *sim_blk; /* sim: the CTAs' block slots; NULL on cuda */
  /* counters, ring tickets and stack heads (device, atomics) */
  mw_u64 frame_rhead, frame_rtail; /* the free frame ring's tickets: next to take, next to give */
  mw_u64 slot_head;
  mw_u64 node_head;
  mw_u64 gq_head, gq_tail;
  mw_u64 inbox_head;   /* next inbox ticket to take */
  mw_u64 comp_tail;    /* next completion ticket to write */
  mw_u64 launches;     /* executor launches so far */
  mw_u32 stop;         /* written by the host (see Stopping above) */
  mw_u32 stop_arrived; /* workers waiting to leave (see Stopping above); follows stop */
  mw_u32 hungry;       /* workers that found nothing to do (atomicAdd/Sub); busy warps publish
                        * aged records to the global queue while it is not 0 */
  mw_u32 grid_min;     /* a block task of at least this many unclaimed instances is launched as
                        * a grid (Block tasks, "As a grid"); 0: never. Set by the host before a
                        * launch */
  mw_u64 t0;           /* globaltimer at the first launch */
  /* tracing, written by the host (see "task traces" above) */
  mw_u32 trace_gen;     /* odd while on */
  mw_u32 trace_cap;     /* events per worker in trace_buf */
  mw_u32 trace_workers; /* workers with a part of trace_buf */
  mw_u32 pad3;
  mw_u8 *trace_buf;
  mw_u32 *trace_ack;    /* per worker: the last trace_gen it acted on */
  /* the bulk board (see The bulk board above; device, atomics) */
  mw_u64 board[MW_BOARD];
  mw_u32 board_users[MW_BOARD];
  mw_u32 board_seats[MW_BOARD]; /* joiners still wanted, a hint (see The bulk board above) */
  mw_u32 board_seq;
  mw_u32 stack_bytes; /* the executor's stack budget (MW_STACK_BYTES above); set before launch */
  mw_u64 grids;       /* block tasks' grids launched from the device (atomicAdd; Block tasks) */
} mw_state;

#endif /* MW_PROTOCOL_H */
