// pingpong.cu - how tight the host <-> persistent-kernel ping-pong over pinned mapped memory can
// be, the floor the round trip is measured against (bench/baselines.cu): the same host loop (a
// store of n, a spin until the answer reads n) against kernels that differ in what they do per
// poll: (a) baselines.cu's (reads the answer back from host memory before each reply and fences),
// (b) the last answer kept in a register, a plain store, no fence, (c) as (b) with the request and
// the answer 128 bytes apart (no line shared by the two directions), (d) as (c) with the reply
// fenced (__threadfence_system before the store). Prints p50 / p99 in microseconds, each kernel
// twice in turns.
// Build: nvcc -O3 -arch=sm_90 bench/micro/pingpong.cu -o pingpong && ./pingpong
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <vector>

#include "check.h"

static double now() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

__global__ void pp_baseline(volatile int *in, volatile int *out) {
  for (;;) {
    int v = *in;
    if (v < 0) return;
    if (v != *out) {
      __threadfence_system();
      *out = v;
    }
  }
}
template <bool Fence> __global__ void pp_register(volatile int *in, volatile int *out) {
  int last = 0;
  for (;;) {
    int v = *in;
    if (v < 0) return;
    if (v != last) {
      if (Fence) __threadfence_system();
      *out = v;
      last = v;
    }
  }
}

static void run(const char *name, void (*k)(volatile int *, volatile int *), int apart, cudaStream_t s) {
  int *h;
  CHECK(cudaHostAlloc(&h, 256, cudaHostAllocMapped));
  for (int i = 0; i < 64; ++i) h[i] = 0;
  int *d;
  CHECK(cudaHostGetDevicePointer(&d, h, 0));
  k<<<1, 1, 0, s>>>(d, d + apart);
  volatile int *in = h, *out = h + apart;
  std::vector<double> v;
  for (int i = 1; i <= 20100; ++i) {
    double t0 = now();
    *in = i;
    while (*out != i) {
    }
    if (i > 100) v.push_back((now() - t0) * 1e6);
  }
  *in = -1;
  CHECK(cudaStreamSynchronize(s));
  CHECK(cudaGetLastError());
  std::sort(v.begin(), v.end());
  printf("%-44s p50 %.3f us  p99 %.3f us  min %.3f us\n", name, v[v.size() / 2], v[v.size() * 99 / 100], v[0]);
  CHECK(cudaFreeHost(h));
}

int main() {
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (int turn = 0; turn < 2; ++turn) {
    run("(a) baselines.cu: answer read back, fence", pp_baseline, 1, s);
    run("(b) answer in a register, no fence", pp_register<false>, 1, s);
    run("(c) (b), request and answer 128 B apart", pp_register<false>, 32, s);
    run("(d) (c) with the reply fenced", pp_register<true>, 32, s);
  }
  return 0;
}
