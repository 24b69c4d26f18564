// pingpong.cu - how tight the host <-> persistent-kernel ping-pong over pinned mapped memory can
// be, the floor the round trip is measured against (bench/baselines.cu): the same host loop
// (bench/pingpong.cuh: a store of n, a spin until the answer reads n) against kernels that differ
// in what they do per poll: (a) the floor baselines.cu used before (reads the answer back from
// host memory before each reply and fences), (b) the last answer kept in a register, a plain
// store, no fence, (c) as (b) with the request and the answer 128 bytes apart (no line shared by
// the two directions: baselines.cu's floor now), (d) as (c) with the reply fenced
// (__threadfence_system before the store). Prints p50 / p99 in microseconds, each kernel twice in
// turns.
// Build: nvcc -O3 -arch=sm_90 bench/micro/pingpong.cu -o pingpong && ./pingpong
#include <algorithm>
#include <cstdio>
#include <vector>

#include "../pingpong.cuh"

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

static void run(const char *name, void (*k)(volatile int *, volatile int *), int apart, cudaStream_t s) {
  std::vector<double> v = pingpong_times(k, apart, 20000, s);
  std::sort(v.begin(), v.end());
  printf("%-44s p50 %.3f us  p99 %.3f us  min %.3f us\n", name, v[v.size() / 2], v[v.size() * 99 / 100], v[0]);
}

int main() {
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (int turn = 0; turn < 2; ++turn) {
    run("(a) baselines.cu: answer read back, fence", pp_baseline, 1, s);
    run("(b) answer in a register, no fence", pp_register<false>, 1, s);
    run("(c) (b), request and answer 128 B apart", pp_register<false>, 32, s);
    run("(d) (c) with the reply fenced", pp_register<true>, 32, s);
  }
  return 0;
}
