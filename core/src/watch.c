/* watch.c - the completion fd (mw_runtime_fd): an eventfd that a watcher thread makes readable
 * while completions wait in the ring, for event loops that poll(). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "util.h"

/* ---- the completion fd (mw_runtime_fd) ----------------------------------------------------
 * A watcher thread looks at the completion ring where the host thread last left it and, when a
 * completion waits there, writes the eventfd and sets armed. It only reads: the cell, and
 * the positions the host thread publishes (comp_head_pub after a poll, spawned_pub after a
 * spawn). The host thread drains the eventfd at the end of each poll when armed is set. The
 * watcher sets armed before it writes, so a poll that the write wakes finds it set and drains;
 * after the write it checks that no poll came in between (armed still set, the head where it
 * was), and otherwise takes its signal back (reads the fd, clears armed) and looks again after
 * its shortest nap: the fd is never left readable with armed clear, a completion that comes
 * after a drain is signalled anew, and the fd is readable with nothing to process only for the
 * moment between such a write and its taking back. A poll publishes its head before it drains,
 * and the watcher reads armed before the head: when it finds armed clear, the head it reads is
 * as fresh as the drain. The
 * watcher naps WATCH_NAP_MIN_NS after a spawn or a drain, twice as long each time it finds
 * nothing up to WATCH_NAP_MAX_NS, and WATCH_IDLE_NS when every spawn has completed; before a nap
 * of WATCH_DEEP_NS or more it says so (deep), and a spawn or a drain then wakes it. */
#define WATCH_NAP_MIN_NS 20000L
#define WATCH_NAP_MAX_NS 1000000L
#define WATCH_IDLE_NS 50000000L
#define WATCH_DEEP_NS 200000L

typedef struct mw__watch {
  mw_runtime *rt;
  int fd;
  pthread_t tid;
  pthread_mutex_t lock;
  pthread_cond_t cond; /* CLOCK_MONOTONIC */
  int stop;            /* under lock */
  _Atomic int armed;   /* the fd was written and not drained yet */
  _Atomic int deep;    /* the watcher naps long: wake it on news */
  _Atomic int broken;  /* the runtime faulted: the fd stays readable, nothing drains it */
} mw__watch;

static void watch_wake(mw__watch *w) {
  pthread_mutex_lock(&w->lock);
  atomic_store(&w->deep, 0);
  pthread_cond_signal(&w->cond);
  pthread_mutex_unlock(&w->lock);
}

void mw__watch_spawned(mw_runtime *rt) {
  atomic_store(&rt->spawned_pub, rt->host_spawned);
  if (atomic_load(&rt->watch->deep)) watch_wake(rt->watch);
}

void mw__watch_drain(mw_runtime *rt) {
  mw__watch *w = rt->watch;
  /* a broken runtime's fd stays readable: every look of a poller finds the news */
  if (atomic_load(&w->broken) || !atomic_load_explicit(&w->armed, memory_order_acquire)) return;
  uint64_t count;
  if (read(w->fd, &count, sizeof count) < 0 && errno != EAGAIN) return;
  atomic_store(&w->armed, 0);
  if (atomic_load(&w->deep)) watch_wake(w);
}

/* Makes the fd readable (a completion waits, or the runtime broke). Either thread. armed goes
 * up first: a poll that the write wakes finds it up and drains. */
static void watch_signal(mw__watch *w) {
  uint64_t one = 1;
  atomic_store(&w->armed, 1);
  if (write(w->fd, &one, sizeof one) < 0 && errno != EAGAIN) atomic_store(&w->armed, 0);
}

/* Makes the fd readable for good: the runtime is broken (either thread). */
void mw__watch_break(mw__watch *w) {
  atomic_store(&w->broken, 1);
  watch_signal(w);
}

static void *watch_main(void *arg) {
  mw__watch *w = arg;
  mw_runtime *rt = w->rt;
  long nap = WATCH_NAP_MIN_NS;
  pthread_mutex_lock(&w->lock);
  while (!w->stop) {
    pthread_mutex_unlock(&w->lock);
    int armed = atomic_load(&w->armed);
    uint64_t head = atomic_load(&rt->comp_head_pub);
    uint64_t spawned = atomic_load(&rt->spawned_pub);
    mw__comp_rec rec;
    int waiting = mw__comp_read(rt, head, &rec);
    long next;
    if (waiting && !armed) {
      watch_signal(w);
      armed = 1;
      if (!atomic_load(&w->armed) || atomic_load(&rt->comp_head_pub) != head) {
        /* the host thread polled meanwhile (on its own, or woken by the write before it was
         * done): it consumed, or drained before the write. Take the signal back, so that the fd
         * is never left readable with armed down; the next look, a short nap away, signals
         * what still waits. */
        uint64_t count;
        if (!atomic_load(&w->broken) && (read(w->fd, &count, sizeof count) >= 0 || errno == EAGAIN)) {
          atomic_store(&w->armed, 0);
          armed = 0;
        }
        if (atomic_load(&w->broken)) watch_signal(w); /* broken meanwhile: readable again */
      }
      next = nap = WATCH_NAP_MIN_NS;
    } else if (!waiting && head == spawned) {
      next = WATCH_IDLE_NS; /* nothing in flight: a spawn wakes it */
      nap = WATCH_NAP_MIN_NS;
    } else {
      next = nap; /* in flight, or signalled and not drained yet */
      if (nap < WATCH_NAP_MAX_NS) nap = nap * 2 < WATCH_NAP_MAX_NS ? nap * 2 : WATCH_NAP_MAX_NS;
    }
    pthread_mutex_lock(&w->lock);
    if (w->stop) break;
    if (next >= WATCH_DEEP_NS) {
      atomic_store(&w->deep, 1);
      /* news between the look and here would not have woken it: look again at once */
      if (atomic_load(&rt->spawned_pub) != spawned || atomic_load(&w->armed) != armed) {
        atomic_store(&w->deep, 0);
        nap = WATCH_NAP_MIN_NS;
        continue;
      }
    }
    struct timespec at;
    clock_gettime(CLOCK_MONOTONIC, &at);
    at.tv_nsec += next;
    at.tv_sec += at.tv_nsec / 1000000000L;
    at.tv_nsec %= 1000000000L;
    while (!w->stop && (next < WATCH_DEEP_NS || atomic_load(&w->deep)) &&
           pthread_cond_timedwait(&w->cond, &w->lock, &at) == 0) {
    }
    if (!atomic_load(&w->deep) && next >= WATCH_DEEP_NS) nap = WATCH_NAP_MIN_NS; /* woken */
    atomic_store(&w->deep, 0);
  }
  pthread_mutex_unlock(&w->lock);
  return NULL;
}

/* Stops the watcher (at once: it waits on a condition variable) and closes the fd. */
void mw__watch_stop(mw_runtime *rt) {
  mw__watch *w = rt->watch;
  if (!w) return;
  pthread_mutex_lock(&w->lock);
  w->stop = 1;
  pthread_cond_signal(&w->cond);
  pthread_mutex_unlock(&w->lock);
  pthread_join(w->tid, NULL);
  close(w->fd);
  pthread_cond_destroy(&w->cond);
  pthread_mutex_destroy(&w->lock);
  rt->watch = NULL;
  free(w);
}

MW_API int mw_runtime_fd(mw_runtime *rt, int *fd) {
  MW_NOT_NULL(fd, "mw_runtime_fd");
  MW_NOT_NULL(rt, "mw_runtime_fd");
  if (rt->watch) {
    *fd = rt->watch->fd;
    return 0;
  }
  mw__watch *w = calloc(1, sizeof *w);
  if (!w) return MW_ENOMEM;
  w->rt = rt;
  w->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (w->fd < 0) {
    mw__rt_error(rt, "mw_runtime_fd: eventfd: %s", strerror(errno));
    free(w);
    return MW_EIO;
  }
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&w->cond, &ca);
  pthread_condattr_destroy(&ca);
  pthread_mutex_init(&w->lock, NULL);
  atomic_store(&rt->comp_head_pub, rt->comp_head);
  atomic_store(&rt->spawned_pub, rt->host_spawned);
  if (rt->faulted) mw__watch_break(w); /* a broken runtime has news for its poller at once */
  /* the watcher takes no signal: they are for the threads that wait (Ctrl-C) */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&w->tid, NULL, watch_main, w);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc) {
    mw__rt_error(rt, "mw_runtime_fd: cannot start the watcher thread: %s", strerror(rc));
    close(w->fd);
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->lock);
    free(w);
    return MW_EIO;
  }
  rt->watch = w;
  *fd = w->fd;
  return 0;
}
