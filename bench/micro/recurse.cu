// recurse.cu - what an SM gives to recursive calls whose frames live in local memory, at 1, 2, 4
// and 8 warps an SM: plain fib by a __noinline__ function calling itself, its frame padded with
// PAD bytes written at entry and read before return (an elided level of the executor's fib
// makes ~70 local stores and ~80 loads in a 208-byte frame). Every lane computes the same
// fib(N), as a warp that runs a task does. Prints calls a second per warp and per SM.
// Build: nvcc -O3 -arch=sm_90 bench/micro/recurse.cu -o recurse && ./recurse [n]
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#include "check.h"

template <int PAD> __device__ __noinline__ long rfib(int n, int salt) {
  if (n < 2) return n;
  volatile int pad[PAD / 4 > 0 ? PAD / 4 : 1]; // the frame's other words, as a body's locals
  if (PAD) {
#pragma unroll
    for (int k = 0; k < PAD / 4; ++k) pad[k] = n + k + salt;
  }
  long a = rfib<PAD>(n - 1, salt);
  long b = rfib<PAD>(n - 2, salt);
  long s = a + b;
  if (PAD) {
#pragma unroll
    for (int k = 0; k < PAD / 4; ++k) s += pad[k] - (n + k + salt); // adds 0, read back
  }
  return s;
}

template <int PAD> __global__ void kern(int n, long *out, long long *cycles) {
  long long t0 = clock64();
  long r = rfib<PAD>(n, threadIdx.x & 0);
  long long t1 = clock64();
  if ((threadIdx.x & 31) == 0) {
    out[blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32] = r;
    cycles[blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32] = t1 - t0;
  }
}

static long fib_calls(int n) { // calls of rfib for fib(n): 2 fib(n+1) - 1
  long a = 0, b = 1;
  for (int i = 0; i < n + 1; ++i) {
    long t = a + b;
    a = b;
    b = t;
  }
  return 2 * a - 1;
}

template <int PAD> static void run(int sms, int n) {
  for (int w = 1; w <= 8; w *= 2) {
    long *out;
    long long *cyc;
    CHECK(cudaMalloc(&out, sizeof(long) * sms * w));
    CHECK(cudaMalloc(&cyc, sizeof(long long) * sms * w));
    kern<PAD><<<sms, 32 * w>>>(n, out, cyc); // warm-up
    CHECK(cudaDeviceSynchronize());
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    CHECK(cudaEventRecord(a));
    kern<PAD><<<sms, 32 * w>>>(n, out, cyc);
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    long r = 0;
    CHECK(cudaMemcpy(&r, out, sizeof r, cudaMemcpyDeviceToHost));
    long long c0 = 0;
    CHECK(cudaMemcpy(&c0, cyc, sizeof c0, cudaMemcpyDeviceToHost));
    double calls = (double)fib_calls(n);
    printf("pad %3d B, %d warp(s) an SM: fib(%d) = %ld, %.0f cycles a call (warp 0), %.3f M calls/s a warp, %.2f M a SM\n",
           PAD, w, n, r, (double)c0 / calls, calls / (ms * 1e3), calls * w / (ms * 1e3));
    CHECK(cudaFree(out));
    CHECK(cudaFree(cyc));
  }
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 20;
  cudaDeviceProp p;
  CHECK(cudaGetDeviceProperties(&p, 0));
  CHECK(cudaDeviceSetLimit(cudaLimitStackSize, 16384));
  printf("%s, %d SMs, one CTA an SM\n", p.name, p.multiProcessorCount);
  run<0>(p.multiProcessorCount, n);
  run<64>(p.multiProcessorCount, n);
  run<96>(p.multiProcessorCount, n);
  run<208>(p.multiProcessorCount, n);
  return 0;
}
