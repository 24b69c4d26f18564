/* roundtrip.c - the host channel from C, with no Lua in the path, to set beside the figures from
 * Lua (bench/core.lua, bench/suite.lua): the round trip (spawn a task that returns at once, await
 * it), then fire-and-forget spawns per second (mw_spawn_n without futures, timed until the
 * runtime has counted every one completed), and the spawn calls alone in bursts that cannot wait
 * for capacity (the host's own cost of a spawn).
 *   build/bench_roundtrip [n [m]]   (n round trips after 200 warm ones, default 5000; m spawns,
 *                                    default 1000000) */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "moonwarp.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 5000;
  if (n < 1) n = 1;
  mw_runtime *rt;
  int rc = mw_runtime_create(NULL, &rt);
  if (rc) {
    fprintf(stderr, "runtime: %s: %s\n", mw_err_name(rc), mw_last_error());
    return 1;
  }
  mw_program *prog;
  mw_compile_desc cd = {.filename = "roundtrip.c", .first_line = 1};
  if ((rc = mw_program_compile(rt, "task int nop() { return 1; }\n", &cd, &prog))) {
    fprintf(stderr, "compile: %s\n%s\n", mw_err_name(rc), mw_runtime_last_error(rt));
    mw_runtime_close(rt, 0);
    return 1;
  }
  int nop = mw_program_find(prog, "nop");
  double *lat = malloc(sizeof *lat * (size_t)n);
  if (!lat) return 1;
  for (int i = -200; i < n; ++i) {
    mw_future f;
    mw_result res;
    double t0 = now();
    if ((rc = mw_spawn(rt, prog, nop, NULL, 0, -1, &f)) || (rc = mw_future_await(rt, f, 10.0, &res))) {
      fprintf(stderr, "round trip: %s: %s\n", mw_err_name(rc), mw_runtime_last_error(rt));
      mw_runtime_close(rt, 0);
      return 1;
    }
    if (i >= 0) lat[i] = (now() - t0) * 1e6;
    mw_future_release(rt, f);
    if (res.status != MW_OK || res.value.i != 1) {
      fprintf(stderr, "round trip: wrong result\n");
      return 1;
    }
  }
  qsort(lat, (size_t)n, sizeof *lat, cmp);
  printf("C round trip on %s, %d: p50 %.2f us, p99 %.2f us, min %.2f us\n", mw_runtime_backend(rt), n,
         lat[n / 2], lat[(int)(n * 0.99)], lat[0]);
  free(lat);
  int m = argc > 2 ? atoi(argv[2]) : 1000000;
  mw_stats s0, s1;
  if (m > 0 && !mw_runtime_stats(rt, &s0)) {
    double t0 = now(), t1 = 0;
    uint32_t made = 0;
    rc = mw_spawn_n(rt, prog, nop, (uint32_t)m, NULL, 0, 10.0, NULL, &made);
    double ts = now() - t0;
    /* the counters are read now and then (mw_runtime_stats reads the device's rows too) */
    uint64_t done = 0;
    for (unsigned k = 0; !rc && done < made; ++k) {
      if ((k & 255) != 0) {
        mw_runtime_poll(rt);
        continue;
      }
      if ((rc = mw_runtime_stats(rt, &s1))) break;
      done = s1.host_completed - s0.host_completed;
      if (done < made && now() - t0 > 60) {
        fprintf(stderr, "spawns: %llu of %u completed after 60 s\n", (unsigned long long)done, made);
        rc = MW_ETIMEDOUT;
      }
    }
    t1 = now() - t0;
    if (rc) {
      fprintf(stderr, "spawns: %s: %s\n", mw_err_name(rc), mw_runtime_last_error(rt));
      mw_runtime_close(rt, 0);
      return 1;
    }
    printf("C fire-and-forget spawns on %s, %u: %.0f spawns/s completed (the spawn calls alone: "
           "%.0f/s)\n", mw_runtime_backend(rt), made, made / t1, made / ts);
    printf("  of the calls' %.3f s: %.3f s in %llu waits for a host future, %.3f s in %llu waits "
           "for an inbox cell\n", ts, s1.waits_future_s - s0.waits_future_s,
           (unsigned long long)(s1.waits_future - s0.waits_future), s1.waits_inbox_s - s0.waits_inbox_s,
           (unsigned long long)(s1.waits_inbox - s0.waits_inbox));
  }
  /* bursts of 2048 spawns into a drained inbox (4096 cells) with host futures to spare: no call
   * can wait for capacity, so this is the host's own cost of a spawn, whatever the device does */
  double burst = 0;
  uint32_t bursts = 0;
  for (int b = 0; !rc && b < 50; ++b) {
    double td = now();
    for (;;) { /* drained: everything spawned so far completed */
      mw_runtime_poll(rt);
      if ((rc = mw_runtime_stats(rt, &s1)) || s1.in_flight == 0 || now() - td > 10) break;
    }
    if (rc || s1.in_flight) break;
    uint32_t made = 0;
    double t0 = now();
    rc = mw_spawn_n(rt, prog, nop, 2048, NULL, 0, 10.0, NULL, &made);
    burst += now() - t0;
    bursts += made;
  }
  if (bursts && !rc)
    printf("C spawn calls on %s in bursts of 2048 (no wait for capacity): %.0f/s, %.3f us each\n",
           mw_runtime_backend(rt), bursts / burst, burst / bursts * 1e6);
  return mw_runtime_close(rt, 0) ? 1 : 0;
}
