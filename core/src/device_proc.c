/* device_proc.c - the cuda backend as the library sees it: a device process per runtime that
 * holds the CUDA context (so a device fault never poisons the host process), and the proxy ops
 * that talk to it. The protocol is in device_link.h. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend_cuda.h"
#include "device_link.h"
#include "internal.h"
#include "util.h"

/* How long the library waits for any one answer before it gives up on the device process. */
#define LINK_TIMEOUT_MS 60000

/* ---- socket helpers (both sides) ---------------------------------------------------------- */

/* Waits until fd is ready for events, up to timeout_ms (-1: forever). 1 ready, 0 timed out. */
static int wait_fd(int fd, short events, int timeout_ms) {
  struct pollfd p = {fd, events, 0};
  for (;;) {
    int n = poll(&p, 1, timeout_ms);
    if (n >= 0) return n > 0;
    if (errno != EINTR) return 1; /* let the read or write report it */
  }
}

static int send_all(int fd, const void *buf, size_t n, int timeout_ms) {
  const char *p = buf;
  while (n) {
    if (!wait_fd(fd, POLLOUT, timeout_ms)) return MW_ETIMEDOUT;
    ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return MW_EIO;
    p += k;
    n -= (size_t)k;
  }
  return 0;
}

static int recv_all(int fd, void *buf, size_t n, int timeout_ms) {
  char *p = buf;
  while (n) {
    if (!wait_fd(fd, POLLIN, timeout_ms)) return MW_ETIMEDOUT;
    ssize_t k = recv(fd, p, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return MW_EIO;
    p += k;
    n -= (size_t)k;
  }
  return 0;
}

static size_t page_round(size_t n) {
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  return (n + pg - 1) / pg * pg;
}

/* ---- the device process --------------------------------------------------------------------- */

static int reply(int fd, int rc, const char *err, uint64_t a, uint64_t b, const void *data,
                 size_t len) {
  mw__rep r = {rc, 0, a, b, len};
  size_t el = (rc && err) ? strlen(err) : 0;
  r.errlen = (uint32_t)el;
  if (send_all(fd, &r, sizeof r, -1) || (el && send_all(fd, err, el, -1)) ||
      (len && send_all(fd, data, len, -1)))
    return MW_EIO;
  return 0;
}

/* Receives a request; for OP_PIN also the descriptor it carries. */
static int recv_req(int fd, mw__req *q, int *passed) {
  char ctl[CMSG_SPACE(sizeof(int))];
  struct iovec io = {q, sizeof *q};
  struct msghdr m = {0};
  m.msg_iov = &io;
  m.msg_iovlen = 1;
  m.msg_control = ctl;
  m.msg_controllen = sizeof ctl;
  *passed = -1;
  ssize_t k;
  do k = recvmsg(fd, &m, 0);
  while (k < 0 && errno == EINTR);
  if (k <= 0) return MW_EIO;
  for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) memcpy(passed, CMSG_DATA(c), sizeof(int));
  if ((size_t)k < sizeof *q) return recv_all(fd, (char *)q + k, sizeof *q - (size_t)k, -1);
  return 0;
}

static void publish(mw__link_status *st, int state, const char *err) {
  if (err) snprintf(st->err, sizeof st->err, "%.1000s", err);
  atomic_store_explicit(&st->state, state, memory_order_release);
}

/* The device process's state between requests. */
typedef struct server {
  const mw__backend_ops *o; /* the cuda backend, in this process */
  mw__backend *be;          /* its state, from OP_OPEN */
  mw__link_status *st;
  int opened, running;
  char err[8192]; /* the message of the request being answered (mw__backend_args.err) */
} server;

/* Maps the memfd passed with OP_PIN and registers it with the driver; a: the device address,
 * b: this process's mapping (the library's token for it). */
static int serve_pin(server *sv, const mw__req *q, int passed, uint64_t *a, uint64_t *b) {
  void *p = passed >= 0 ? mmap(NULL, q->a, PROT_READ | PROT_WRITE, MAP_SHARED, passed, 0) : MAP_FAILED;
  if (p == MAP_FAILED) {
    snprintf(sv->err, sizeof sv->err, "the device process cannot map shared memory: %s", strerror(errno));
    return MW_ENOMEM;
  }
  int rc = mw__cuda_register_host(sv->be, p, q->a, a);
  if (rc) munmap(p, q->a);
  else *b = (uint64_t)(uintptr_t)p;
  return rc;
}

/* Carries out one request (device_link.h) with its payload (data): the reply's fields in *a,
 * *b, its payload in *out. */
static int serve_one(server *sv, const mw__req *q, const void *data, int passed, uint64_t *a,
                     uint64_t *b, void **out, size_t *outlen) {
  const mw__backend_ops *o = sv->o;
  mw__backend *be = sv->be;
  int rc = 0;
  switch (q->op) {
    case MW_OP_OPEN: {
      mw__backend_args args = {.device = (int)q->a, .workers = (uint32_t)q->b,
                               .stack_bytes = (uint32_t)q->c, .err = sv->err,
                               .errlen = sizeof sv->err};
      mw__backend_info info = {0, 0, 0};
      rc = o->open(&args, &sv->be, &info);
      sv->opened = !rc;
      *a = info.max_workers;
      *b = info.workers | (sv->opened ? (uint64_t)info.arch << 32 : 0);
      return rc;
    }
    case MW_OP_PIN: return serve_pin(sv, q, passed, a, b);
    case MW_OP_UNPIN:
      mw__cuda_unregister_host(be, (void *)(uintptr_t)q->a);
      munmap((void *)(uintptr_t)q->a, q->b);
      return 0;
    case MW_OP_ALLOC: return o->alloc(be, q->a, a);
    case MW_OP_FREE: o->free(be, q->a); return 0;
    case MW_OP_H2D: return o->h2d(be, q->a, data, q->len);
    case MW_OP_D2H:
      *out = malloc(q->b ? q->b : 1);
      if (!*out) return MW_ENOMEM;
      if (!(rc = o->d2h(be, *out, q->a, q->b))) *outlen = q->b;
      return rc;
    case MW_OP_H2D_STAGED: return o->h2d(be, q->a, (const void *)(uintptr_t)q->b, q->c);
    case MW_OP_D2H_STAGED: return o->d2h(be, (void *)(uintptr_t)q->b, q->a, q->c);
    case MW_OP_LOAD: return o->load(be, data, q->len);
    case MW_OP_LAUNCH: {
      uint32_t nworkers = (uint32_t)q->b;
      rc = o->launch(be, q->a, &nworkers);
      if (!rc) {
        sv->running = 1;
        publish(sv->st, 1, NULL);
      }
      *a = nworkers;
      return rc;
    }
    default:
      snprintf(sv->err, sizeof sv->err, "unknown request %u", q->op);
      return MW_EINVAL;
  }
}

/* While the executor runs and no request waits: publishes its end, else waits a little for a
 * request. */
static void watch_executor(server *sv, int fd) {
  int q = sv->o->query(sv->be);
  if (q != 1) {
    publish(sv->st, q, q < 0 ? sv->err : NULL);
    sv->running = 0;
    return;
  }
  struct timespec ts = {0, MW_LINK_POLL_US * 1000L};
  struct pollfd p = {fd, POLLIN, 0};
  ppoll(&p, 1, &ts, NULL);
}

/* Receives the payload of q in *data (malloc'd; left NULL when q has none); nonzero when the
 * library has gone or there is no memory for it. */
static int recv_payload(int fd, const mw__req *q, void **data) {
  if (q->len) {
    *data = malloc(q->len);
    if (!*data || recv_all(fd, *data, q->len, -1)) return 1;
  }
  return 0;
}

/* OP_CLOSE: closes the backend if it was opened, then acknowledges. */
static void serve_close(server *sv, int fd, void *data) {
  free(data);
  if (sv->opened) sv->o->close(sv->be);
  reply(fd, 0, NULL, 0, 0, NULL, 0);
}

/* Carries out request q (with its payload data and descriptor passed, both released here) and
 * sends the reply; nonzero when the reply could not be sent. */
static int answer(server *sv, int fd, const mw__req *q, void *data, int passed) {
  sv->err[0] = 0;
  uint64_t a = 0, b = 0;
  void *out = NULL;
  size_t outlen = 0;
  int rc = serve_one(sv, q, data, passed, &a, &b, &out, &outlen);
  if (passed >= 0) close(passed);
  free(data);
  int sent = reply(fd, rc, sv->err, a, b, out, outlen);
  free(out);
  return sent;
}

/* Serves requests on fd until OP_CLOSE or until the library goes away; between requests,
 * watches the executor while it runs. Runs in the device process. */
static int serve(int fd, mw__link_status *st) {
  server sv = {&mw__backend_cuda_local, NULL, st, 0, 0, ""};
  for (;;) {
    if (!wait_fd(fd, POLLIN, sv.running ? 0 : -1)) {
      watch_executor(&sv, fd);
      continue;
    }
    mw__req q;
    int passed = -1;
    if (recv_req(fd, &q, &passed)) break; /* the library has gone */
    void *data = NULL;
    if (recv_payload(fd, &q, &data)) break;
    if (q.op == MW_OP_CLOSE) {
      serve_close(&sv, fd, data);
      return 0;
    }
    if (answer(&sv, fd, &q, data, passed)) break;
  }
  /* the library went away without OP_CLOSE: the context goes with this process */
  return 0;
}

/* ---- the library's side --------------------------------------------------------------------- */

typedef struct pinned {
  void *host;
  size_t size;
  uint64_t token;
  struct pinned *next;
} pinned;

typedef struct proxy {
  char *err; /* mw__backend_args.err */
  size_t errlen;
  pid_t pid;
  int fd;
  int dead;     /* the device process is gone or no longer trusted */
  int launched; /* an executor was launched since the last quiesce */
  mw__link_status *st;
  pinned *pins;
  pinned *stage; /* the staging region of large copies (2 * MW_STAGE_HALF), made at the first */
} proxy;

/* Device processes killed whose exit was not yet collected. */
#define MAX_ZOMBIES 64
static pid_t zombies[MAX_ZOMBIES];
static int nzombies;
static pthread_mutex_t zombies_lock = PTHREAD_MUTEX_INITIALIZER; /* runtimes on several threads */

static void reap_zombies(void) {
  pthread_mutex_lock(&zombies_lock);
  int j = 0;
  for (int i = 0; i < nzombies; ++i)
    if (waitpid(zombies[i], NULL, WNOHANG) == 0) zombies[j++] = zombies[i];
  nzombies = j;
  pthread_mutex_unlock(&zombies_lock);
}

/* Waits up to timeout_s for the child to exit; else leaves it for reap_zombies. */
static void collect(pid_t pid, double timeout_s) {
  double end = mw__now() + timeout_s;
  for (;;) {
    pid_t r = waitpid(pid, NULL, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) return;
    if (mw__now() > end) break;
    mw__sleep_ns(1000000);
  }
  pthread_mutex_lock(&zombies_lock);
  if (nzombies < MAX_ZOMBIES) zombies[nzombies++] = pid;
  pthread_mutex_unlock(&zombies_lock);
}

#define fail(px, ...) mw__put_error((px)->err, (px)->errlen, __VA_ARGS__)

/* Marks the device process unusable, kills it, and says why in px->err. */
static int lose(proxy *px, int rc, const char *what) {
  if (!px->dead) {
    px->dead = 1;
    kill(px->pid, SIGKILL);
    if (rc == MW_ETIMEDOUT)
      fail(px, "the device process did not answer %s within %d s", what, LINK_TIMEOUT_MS / 1000);
    else
      fail(px, "the device process exited during %s", what);
  }
  return MW_EFAULT;
}

/* One request and its reply. payload/out may be NULL. Returns the child's code (its message in
 * px->err) or MW_EFAULT when the link broke. */
/* Sends request q with its payload (and a descriptor when pass_fd >= 0). */
static int link_send(proxy *px, const char *what, mw__req q, const void *payload, int pass_fd) {
  if (px->dead) {
    fail(px, "the device process is gone (%s)", what);
    return MW_EFAULT;
  }
  int rc;
  if (pass_fd >= 0) {
    char ctl[CMSG_SPACE(sizeof(int))];
    memset(ctl, 0, sizeof ctl);
    struct iovec io = {&q, sizeof q};
    struct msghdr m = {0};
    m.msg_iov = &io;
    m.msg_iovlen = 1;
    m.msg_control = ctl;
    m.msg_controllen = sizeof ctl;
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
    ssize_t k;
    do k = sendmsg(px->fd, &m, MSG_NOSIGNAL);
    while (k < 0 && errno == EINTR);
    rc = k == (ssize_t)sizeof q ? 0 : MW_EIO;
  } else {
    rc = send_all(px->fd, &q, sizeof q, LINK_TIMEOUT_MS);
  }
  if (!rc && q.len) rc = send_all(px->fd, payload, q.len, LINK_TIMEOUT_MS);
  return rc ? lose(px, rc, what) : 0;
}

/* Receives the answer to the oldest request in flight: its message goes to px->err, its
 * payload (at most outcap bytes) to out. Returns the request's status. */
static int link_recv(proxy *px, const char *what, mw__rep *rep, void *out, size_t outcap) {
  mw__rep r;
  int rc = recv_all(px->fd, &r, sizeof r, LINK_TIMEOUT_MS);
  if (!rc && r.errlen) {
    char *msg = malloc(r.errlen + 1);
    if (!msg) return lose(px, MW_EIO, what);
    rc = recv_all(px->fd, msg, r.errlen, LINK_TIMEOUT_MS);
    if (!rc) {
      msg[r.errlen] = 0;
      snprintf(px->err, px->errlen, "%s", msg);
    }
    free(msg);
  }
  if (!rc && r.len) rc = r.len <= outcap ? recv_all(px->fd, out, r.len, LINK_TIMEOUT_MS) : MW_EIO;
  if (rc) return lose(px, rc, what);
  if (rep) *rep = r;
  if (r.rc) mw__set_error_str(px->err);
  return r.rc;
}

/* One request and its answer. */
static int call(proxy *px, const char *what, mw__req q, const void *payload, int pass_fd,
                mw__rep *rep, void *out, size_t outcap) {
  int rc = link_send(px, what, q, payload, pass_fd);
  return rc ? rc : link_recv(px, what, rep, out, outcap);
}

/* ---- starting a device process ----------------------------------------------------------- */

/* The device process is a fresh program, moonwarp-device: a forked copy of this process would
 * not do, because NVRTC loads the driver into this process when it compiles, and the driver
 * refuses to initialise in a child forked after that. Found at $MOONWARP_DEVICE_PROCESS, else
 * beside the shared object holding this code (the Lua module of a rock or a build), else in
 * MW_LIBEXEC_REL from its folder (an installed libmoonwarp.so: libexec/moonwarp), else one or
 * two folders up (the build tree). */
static char device_path[4096];
static pthread_once_t device_path_once = PTHREAD_ONCE_INIT;
static void find_device_program(void);
static const char *device_program(void) {
  pthread_once(&device_path_once, find_device_program); /* two runtimes may start on two threads */
  return device_path[0] ? device_path : NULL;
}
static void find_device_program(void) {
  char *path = device_path;
  size_t cap = sizeof device_path;
  const char *env = getenv("MOONWARP_DEVICE_PROCESS");
  if (env && *env) {
    snprintf(path, cap, "%s", env);
    return;
  }
  Dl_info info;
  if (!dladdr((void *)&device_program, &info) || !info.dli_fname) return;
  char dir[4000];
  snprintf(dir, sizeof dir, "%s", info.dli_fname);
  for (int up = 0; up < 3; ++up) {
    char *slash = strrchr(dir, '/');
    if (!slash) break;
    *slash = 0;
    snprintf(path, cap, "%s/moonwarp-device", dir);
    if (access(path, X_OK) == 0) return;
#ifdef MW_LIBEXEC_REL
    if (up == 0) {
      snprintf(path, cap, "%s/%s/moonwarp-device", dir, MW_LIBEXEC_REL);
      if (access(path, X_OK) == 0) return;
    }
#endif
  }
  path[0] = 0;
}

/* Entry of the device process: `moonwarp-device serve` (socket on fd 3, status page on fd 4) or
 * `moonwarp-device probe` (writes the probe's code and message to fd 3). */
int mw__device_main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "moonwarp-device: started by the moonwarp library, not by hand\n");
    return 2;
  }
  signal(SIGINT, SIG_IGN); /* the library's process decides what ^C means */
  signal(SIGPIPE, SIG_IGN);
  if (!strcmp(argv[1], "probe")) {
    char m[1024] = "";
    int r = mw__cuda_probe(m, sizeof m);
    if (write(3, &r, sizeof r) < 0 || write(3, m, strlen(m)) < 0) return 1;
    return 0;
  }
  if (!strcmp(argv[1], "serve")) {
    mw__link_status *st =
        mmap(NULL, sizeof *st, PROT_READ | PROT_WRITE, MAP_SHARED, 4, 0);
    if (st == MAP_FAILED) return 1;
    close(4);
    return serve(3, st);
  }
  return 2;
}

/* Forks the device process with fd3 and fd4 (or -1) as its descriptors 3 and 4. It dies with
 * this process. Returns the pid, or -1 with errno. */
static pid_t spawn_device(const char *mode, int fd3, int fd4) {
  const char *prog = device_program();
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid != 0) return pid;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);
  /* descriptors 3 and 4, through spare numbers so neither overwrites the other */
  int a = fcntl(fd3, F_DUPFD, 10), b = fd4 >= 0 ? fcntl(fd4, F_DUPFD, 10) : -1;
  if (a < 0 || dup2(a, 3) < 0 || (b >= 0 && dup2(b, 4) < 0)) _exit(1);
  for (int i = 5; i < 1024; ++i) close(i);
  char *argv[] = {(char *)"moonwarp-device", (char *)mode, NULL};
  if (prog) {
    execv(prog, argv);
    _exit(127);
  }
  /* no program found: serve from this fork (start_child saw that the driver is not loaded in
   * the parent yet, which a fork could not initialise again) */
  _exit(mw__device_main(2, argv));
}

static int start_child(proxy *px) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
    fail(px, "socketpair: %s", strerror(errno));
    return MW_EIO;
  }
  int sfd = memfd_create("moonwarp-status", MFD_CLOEXEC);
  if (sfd < 0 || ftruncate(sfd, (off_t)page_round(sizeof *px->st)) ||
      (px->st = mmap(NULL, sizeof *px->st, PROT_READ | PROT_WRITE, MAP_SHARED, sfd, 0)) ==
          MAP_FAILED) {
    px->st = NULL;
    fail(px, "shared memory for the device process: %s", strerror(errno));
    if (sfd >= 0) close(sfd);
    close(sv[0]);
    close(sv[1]);
    return MW_ENOMEM;
  }
  atomic_store(&px->st->state, 0);
  void *cuda = device_program() ? NULL : dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (cuda) {
    /* a plain fork of a process that has loaded the driver cannot initialise it */
    dlclose(cuda);
    munmap(px->st, sizeof *px->st);
    px->st = NULL;
    close(sfd);
    close(sv[0]);
    close(sv[1]);
    fail(px, "the device program moonwarp-device is not installed next to the moonwarp "
             "library (set MOONWARP_DEVICE_PROCESS to its path)");
    return MW_ENODEV;
  }
  reap_zombies();
  pid_t pid = spawn_device("serve", sv[1], sfd);
  int err = errno;
  close(sv[1]);
  close(sfd);
  if (pid < 0) {
    close(sv[0]);
    fail(px, "fork: %s", strerror(err));
    return MW_ENOMEM;
  }
  px->pid = pid;
  px->fd = sv[0];
  return 0;
}

static int proxy_open(const mw__backend_args *a, mw__backend **out, mw__backend_info *info) {
  int rc;
  proxy *px = calloc(1, sizeof *px);
  if (!px) return MW_ENOMEM;
  px->err = a->err;
  px->errlen = a->errlen;
  px->fd = -1;
  *out = (mw__backend *)px;
  if ((rc = start_child(px))) return rc;
  mw__req q = {MW_OP_OPEN, 0, (uint64_t)a->device, a->workers, 0, a->stack_bytes};
  mw__rep r;
  if ((rc = call(px, "opening the device", q, NULL, -1, &r, NULL, 0))) return rc;
  info->max_workers = (uint32_t)r.a;
  info->workers = (uint32_t)r.b;
  info->arch = (int)(r.b >> 32);
  return 0;
}

static void proxy_close(mw__backend *b) {
  proxy *px = (proxy *)b;
  if (!px) return;
  if (px->pid > 0) {
    if (!px->dead) {
      mw__req q = {MW_OP_CLOSE, 0, 0, 0, 0, 0};
      call(px, "closing the device", q, NULL, -1, NULL, NULL, 0);
    }
    close(px->fd);
    collect(px->pid, px->dead ? 10.0 : 30.0);
  }
  for (pinned *p = px->pins, *n; p; p = n) {
    n = p->next;
    munmap(p->host, p->size);
    free(p);
  }
  if (px->st) munmap(px->st, sizeof *px->st);
  free(px);
}

static int proxy_alloc_pinned(mw__backend *b, size_t n, void **host, uint64_t *dev) {
  proxy *px = (proxy *)b;
  size_t size = page_round(n);
  pinned *p = calloc(1, sizeof *p);
  int fd = memfd_create("moonwarp-pinned", MFD_CLOEXEC);
  if (!p || fd < 0 || ftruncate(fd, (off_t)size)) {
    fail(px, "shared memory for the device: %s", strerror(errno));
    if (fd >= 0) close(fd);
    free(p);
    return MW_ENOMEM;
  }
  p->host = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p->host == MAP_FAILED) {
    fail(px, "mmap: %s", strerror(errno));
    close(fd);
    free(p);
    return MW_ENOMEM;
  }
  p->size = size;
  mw__req q = {MW_OP_PIN, 0, size, 0, 0, 0};
  mw__rep r;
  int rc = call(px, "pinning shared memory", q, NULL, fd, &r, NULL, 0);
  close(fd);
  if (rc) {
    munmap(p->host, size);
    free(p);
    return rc;
  }
  p->token = r.b;
  p->next = px->pins;
  px->pins = p;
  *host = p->host;
  *dev = r.a;
  return 0;
}

static void proxy_free_pinned(mw__backend *b, void *host) {
  proxy *px = (proxy *)b;
  for (pinned **pp = &px->pins; *pp; pp = &(*pp)->next) {
    pinned *p = *pp;
    if (p->host != host) continue;
    if (!px->dead) {
      mw__req q = {MW_OP_UNPIN, 0, p->token, p->size, 0, 0};
      call(px, "unpinning shared memory", q, NULL, -1, NULL, NULL, 0);
    }
    munmap(p->host, p->size);
    *pp = p->next;
    free(p);
    return;
  }
}

static int proxy_alloc(mw__backend *b, size_t n, uint64_t *dev) {
  mw__req q = {MW_OP_ALLOC, 0, n, 0, 0, 0};
  mw__rep r;
  int rc = call((proxy *)b, "allocating device memory", q, NULL, -1, &r, NULL, 0);
  if (!rc) *dev = r.a;
  return rc;
}

static void proxy_free(mw__backend *b, uint64_t dev) {
  proxy *px = (proxy *)b;
  if (px->dead) return;
  mw__req q = {MW_OP_FREE, 0, dev, 0, 0, 0};
  call(px, "freeing device memory", q, NULL, -1, NULL, NULL, 0);
}

/* The staging region, pinned by the child at the first large copy. */
static pinned *stage_region(proxy *px) {
  if (!px->stage) {
    void *host;
    uint64_t dev;
    if (proxy_alloc_pinned((mw__backend *)px, 2 * (size_t)MW_STAGE_HALF, &host, &dev)) return NULL;
    px->stage = px->pins; /* proxy_alloc_pinned puts it first */
  }
  return px->stage;
}

/* A large copy through the staging halves (device_link.h): chunk i goes through half i % 2,
 * with the child's request for one chunk in flight while the library fills (to the device) or
 * empties (from the device) the other half. Every request sent is answered before it returns. */
static int staged_copy(proxy *px, int to_dev, uint64_t dev, char *host, size_t n) {
  const char *what = to_dev ? "a copy to the device" : "a copy from the device";
  pinned *sg = stage_region(px);
  if (!sg) return MW_ENOMEM;
  size_t nchunks = (n + MW_STAGE_HALF - 1) / MW_STAGE_HALF, sent = 0, answered = 0;
  int rc = 0;
  while (answered < nchunks) {
    /* both halves in flight: the child copies chunk i while the library fills chunk i + 1 (to
     * the device), or empties chunk i - 1 (from the device) */
    while (!rc && sent < nchunks && sent < answered + 2) {
      size_t off = sent * (size_t)MW_STAGE_HALF, len = sent + 1 == nchunks ? n - off : MW_STAGE_HALF;
      size_t half = (sent & 1) * (size_t)MW_STAGE_HALF;
      if (to_dev) memcpy((char *)sg->host + half, host + off, len);
      mw__req q = {to_dev ? MW_OP_H2D_STAGED : MW_OP_D2H_STAGED, 0, dev + off, sg->token + half, 0, len};
      if ((rc = link_send(px, what, q, NULL, -1))) return rc; /* the link is lost: nothing to drain */
      ++sent;
    }
    if (answered == sent) break; /* an earlier answer failed: nothing more in flight */
    int r = link_recv(px, what, NULL, NULL, 0);
    if (r && !rc) rc = r;
    if (r == MW_EFAULT && px->dead) return r;
    if (!rc && !to_dev) {
      size_t off = answered * (size_t)MW_STAGE_HALF, len = answered + 1 == nchunks ? n - off : MW_STAGE_HALF;
      memcpy(host + off, (char *)sg->host + (answered & 1) * (size_t)MW_STAGE_HALF, len);
    }
    ++answered;
  }
  return rc;
}

static int proxy_h2d(mw__backend *b, uint64_t dst, const void *src, size_t n) {
  proxy *px = (proxy *)b;
  if (n >= MW_STAGE_MIN && !getenv("MOONWARP_NO_STAGING")) return staged_copy(px, 1, dst, (char *)src, n);
  mw__req q = {MW_OP_H2D, 0, dst, 0, n, 0};
  return call(px, "a copy to the device", q, src, -1, NULL, NULL, 0);
}

static int proxy_d2h(mw__backend *b, void *dst, uint64_t src, size_t n) {
  proxy *px = (proxy *)b;
  if (n >= MW_STAGE_MIN && !getenv("MOONWARP_NO_STAGING")) return staged_copy(px, 0, src, dst, n);
  mw__req q = {MW_OP_D2H, 0, src, n, 0, 0};
  return call(px, "a copy from the device", q, NULL, -1, NULL, dst, n);
}

/* The image (compiled here, in the library's process: NVRTC needs no driver) goes to the
 * device process as the request's payload. */
static int proxy_load(mw__backend *b, const void *image, size_t size) {
  mw__req q = {MW_OP_LOAD, 0, 0, 0, size, 0};
  return call((proxy *)b, "handing over the executor image", q, image, -1, NULL, NULL, 0);
}

static int proxy_launch(mw__backend *b, uint64_t state_dev, uint32_t *nworkers) {
  proxy *px = (proxy *)b;
  mw__req q = {MW_OP_LAUNCH, 0, state_dev, *nworkers, 0, 0};
  mw__rep r;
  int rc = call(px, "launching the executor", q, NULL, -1, &r, NULL, 0);
  if (rc) return rc;
  px->launched = 1;
  *nworkers = (uint32_t)r.a;
  return 0;
}

static int proxy_query(mw__backend *b) {
  proxy *px = (proxy *)b;
  if (!px->dead) {
    int status;
    pid_t r = waitpid(px->pid, &status, WNOHANG);
    if (r == px->pid) {
      px->dead = 1;
      px->pid = -1;
      if (WIFSIGNALED(status))
        fail(px, "the device process was killed by signal %d", WTERMSIG(status));
      else
        fail(px, "the device process exited with status %d", WEXITSTATUS(status));
      return MW_EFAULT;
    }
  } else {
    if (!px->err[0]) fail(px, "the device process is gone");
    return MW_EFAULT;
  }
  int s = atomic_load_explicit(&px->st->state, memory_order_acquire);
  if (s < 0) {
    snprintf(px->err, px->errlen, "%s", px->st->err);
    return s;
  }
  return s;
}

static int proxy_quiesce(mw__backend *b, double deadline) {
  double end = mw__now() + deadline;
  for (;;) {
    int q = proxy_query(b);
    if (q <= 0) return 0;
    if (mw__now() > end) return MW_ETIMEDOUT;
    mw__sleep_ns(MW_LINK_POLL_US * 500L);
  }
}

/* A kernel that never returns cannot be preempted: the device process is killed, and the driver
 * frees its context with it. */
static void proxy_abandon(mw__backend *b) {
  proxy *px = (proxy *)b;
  if (px->dead) return;
  px->dead = 1;
  kill(px->pid, SIGKILL);
}

static int probe_isolated(char *err, size_t n); /* below */

const mw__backend_ops mw__backend_cuda = {
    MW__CUDA_TRAITS,
    .probe = probe_isolated, /* asked in a short-lived device process */
    .open = proxy_open,
    .close = proxy_close,
    .alloc_pinned = proxy_alloc_pinned,
    .free_pinned = proxy_free_pinned,
    .alloc = proxy_alloc,
    .free = proxy_free,
    .h2d = proxy_h2d,
    .d2h = proxy_d2h,
    .load = proxy_load,
    .launch = proxy_launch,
    .query = proxy_query,
    .quiesce = proxy_quiesce,
    .abandon = proxy_abandon,
};

/* ---- probing without touching the driver here ----------------------------------------------- */

/* Whether a cuda device answers, asked in a short-lived device process so that this process
 * never initialises the driver. Remembered. */
static int probe_isolated(char *err, size_t n) {
  static int done, rc;
  static char msg[1024];
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* one probe, whatever the threads */
  pthread_mutex_lock(&lock);
  if (done) {
    snprintf(err, n, "%s", msg);
    pthread_mutex_unlock(&lock);
    return rc;
  }
  int pfd[2];
  if (pipe2(pfd, O_CLOEXEC)) {
    pthread_mutex_unlock(&lock);
    return MW_EIO;
  }
  pid_t pid = spawn_device("probe", pfd[1], -1);
  close(pfd[1]);
  int r = MW_ENODEV;
  char m[1024] = "the cuda probe failed";
  if (pid > 0) {
    size_t got = 0;
    ssize_t k;
    char buf[sizeof r + sizeof m];
    while (got < sizeof buf - 1 && (k = read(pfd[0], buf + got, sizeof buf - 1 - got)) != 0) {
      if (k < 0 && errno == EINTR) continue;
      if (k < 0) break;
      got += (size_t)k;
    }
    if (got >= sizeof r) {
      memcpy(&r, buf, sizeof r);
      size_t ml = got - sizeof r;
      memcpy(m, buf + sizeof r, ml);
      m[ml] = 0;
    }
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
  }
  close(pfd[0]);
  rc = r;
  snprintf(msg, sizeof msg, "%s", m);
  done = 1;
  snprintf(err, n, "%s", msg);
  pthread_mutex_unlock(&lock);
  return rc;
}
