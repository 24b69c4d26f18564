// pingpong.cuh - the host <-> persistent-kernel ping-pong over pinned mapped memory, the floor the
// round trip is measured against: the tightest kernel and the host loop that times it, shared by
// bench/baselines.cu (the floor) and bench/micro/pingpong.cu (the floor beside looser kernels).
#ifndef MW_PINGPONG_CUH
#define MW_PINGPONG_CUH
#include <vector>

#include "cuda_bench.h"

// The host writes n into *in, the kernel answers n into *out; a negative n ends it. One read of
// host memory a poll, the last answer kept in a register, the reply a plain store (Fence: with
// __threadfence_system before it).
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

// Runs kernel k on stream s with the answer `apart` ints after the request (32: 128 bytes, no line
// shared by the two directions) and times n exchanges after 100 unmeasured ones; returns their
// times in microseconds, in the order measured.
static std::vector<double> pingpong_times(void (*k)(volatile int *, volatile int *), int apart, int n,
                                          cudaStream_t s) {
  int *h;
  CK(cudaHostAlloc(&h, 256, cudaHostAllocMapped));
  for (int i = 0; i < 64; ++i) h[i] = 0;
  int *d;
  CK(cudaHostGetDevicePointer(&d, h, 0));
  k<<<1, 1, 0, s>>>(d, d + apart);
  volatile int *in = h, *out = h + apart;
  std::vector<double> v;
  for (int i = 1; i <= n + 100; ++i) {
    double t0 = now();
    *in = i;
    while (*out != i) {
    }
    if (i > 100) v.push_back((now() - t0) * 1e6);
  }
  *in = -1;
  CK(cudaStreamSynchronize(s));
  CK(cudaGetLastError());
  CK(cudaFreeHost(h));
  return v;
}
#endif
