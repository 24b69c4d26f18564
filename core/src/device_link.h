/* device_link.h - the link between the library and its device process: the request and reply
 * records on the socket, and the status page both processes map.
 *
 * Why a second process: after a device fault (an illegal address, a trap) the CUDA driver
 * refuses every later context in the process (cuCtxCreate answers the fault's error even after
 * cuCtxDestroy; measured on an H200, driver 580). So the library never calls the driver itself:
 * a child process forked at runtime creation holds the context, and a new runtime gets a new
 * child. The rings the executor shares with the host (mw_control, the inbox, the completion
 * ring) are memfd pages both processes map; the child pins them with cuMemHostRegister, so the
 * hot path (spawn, completion, heartbeat) crosses no process boundary. Everything else (buffers,
 * copies, module loads, launches) is a request on a socketpair, answered in order.
 *
 * Each request is one mw__req, then req.len payload bytes (OP_PIN also carries a descriptor,
 * SCM_RIGHTS). Each reply is one mw__rep, then rep.errlen bytes of message, then rep.len payload
 * bytes. The child answers one request at a time; between requests, while an executor runs, it
 * polls the executor's stream every MW_LINK_POLL_US and publishes the outcome in the status page:
 * it writes err first, then stores state with release; the library loads state with acquire
 * before it reads err. */
#ifndef MW_DEVICE_LINK_H
#define MW_DEVICE_LINK_H

#include <stdatomic.h>
#include <stdint.h>

#define MW_LINK_POLL_US 200

enum mw__link_op {
  MW_OP_OPEN = 1, /* a: device, b: workers asked -> a: max workers, b: workers | sm << 32 */
  MW_OP_PIN,      /* fd, a: bytes -> a: device address, b: the child's mapping (a token) */
  MW_OP_UNPIN,    /* a: token, b: bytes */
  MW_OP_ALLOC,    /* a: bytes -> a: device address */
  MW_OP_FREE,     /* a: device address */
  MW_OP_H2D,      /* a: device address, payload: the bytes */
  MW_OP_D2H,      /* a: device address, b: bytes -> payload: the bytes */
  MW_OP_LOAD,     /* payload: an executor image (ops.load) */
  MW_OP_LAUNCH,   /* a: state address, b: workers -> a: workers launched */
  MW_OP_CLOSE,    /* the child frees everything, answers, exits */
  MW_OP_H2D_STAGED, /* a: device address, b: source in the child's mapping of a pinned region, c: bytes */
  MW_OP_D2H_STAGED  /* a: device address, b: destination in the child's mapping, c: bytes */
};

/* Large copies go through a staging region of two halves (pinned memfd pages, OP_PIN) rather
 * than as payload: the library fills one half while the child copies the other, so a copy
 * crosses no socket and the driver's copy is a DMA from page-locked memory. Requests are
 * answered in order, so the library keeps one staged request in flight while it fills or
 * empties the other half. */
#define MW_STAGE_HALF (8u << 20)
#define MW_STAGE_MIN (256u << 10) /* smaller copies travel as payload: one round trip */

typedef struct mw__req {
  uint32_t op, pad;
  uint64_t a, b, len;
  uint64_t c; /* a third argument (staged copies) */
} mw__req;

typedef struct mw__rep {
  int32_t rc;
  uint32_t errlen;
  uint64_t a, b, len;
} mw__rep;

/* The executor as the child last saw it: 1 running, 0 exited (or never launched), or a negative
 * MW_E* after a fault, with the driver's message in err. */
typedef struct mw__link_status {
  _Atomic int32_t state;
  char err[1024];
} mw__link_status;

#endif /* MW_DEVICE_LINK_H */
