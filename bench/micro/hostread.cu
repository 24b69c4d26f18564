// hostread.cu - what a read of pinned mapped host memory costs a warp, as the inbox's take reads
// it: rounds of L 16-byte loads per lane (ld.volatile, all in flight, 512 contiguous bytes a load
// instruction), each round waiting for the last, by 1 to 8 warps on as many SMs, reading the same
// bytes or each its own, with and without a host thread that keeps storing to those lines (as
// the host writes cells while the device reads). Prints ns per round and the bytes a second.
// Build: nvcc -O3 -arch=sm_90 bench/micro/hostread.cu -o hostread -lpthread && ./hostread
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
#include <pthread.h>

#include "check.h"

#define ROUNDS 2000
#define REGION (64u * 1024u) // bytes each warp reads from when "own": 8 rounds of 8 KB apart

__device__ __forceinline__ uint4 ld_volatile(const void *p) {
  uint4 u;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(u.x), "=r"(u.y), "=r"(u.z), "=r"(u.w)
               : "l"(p));
  return u;
}
__device__ __forceinline__ unsigned long long gtimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}

// one warp per block; each round: L loads per lane of 16 bytes, lane l reading part l of a
// 512-byte row, rows k = 0..L-1 one after the other; the next round waits for the
// last round's: each round's values are broadcast (a shuffle) before the next round's loads issue
template <int L> __global__ void rounds(const char *buf, int own, unsigned long long *ns, unsigned *sink) {
  const unsigned lane = threadIdx.x & 31u;
  const char *base = buf + (own ? (size_t)blockIdx.x * REGION : 0);
  unsigned acc = 0;
  __syncwarp();
  unsigned long long t0 = gtimer();
  for (int r = 0; r < ROUNDS; ++r) {
    const char *p = base + (size_t)((r & 7) * L * 512);
    uint4 u[L];
#pragma unroll
    for (int k = 0; k < L; ++k) u[k] = ld_volatile(p + k * 512 + lane * 16);
#pragma unroll
    for (int k = 0; k < L; ++k) acc += u[k].x ^ u[k].w;
    acc = __shfl_sync(0xffffffffu, acc, 0) | 0u; // every lane waits for the round
  }
  unsigned long long t1 = gtimer();
  if (lane == 0) ns[blockIdx.x] = t1 - t0;
  if (acc == 0x12345678u) sink[0] = acc;
}

static std::atomic<int> writing{0};
static char *hostbuf;
static void *writer(void *) { // stores to every line of the first 64 KB, round and round
  unsigned v = 1;
  while (writing.load(std::memory_order_relaxed))
    for (size_t i = 0; i < REGION; i += 64) {
      ((volatile unsigned *)(hostbuf + i))[1] = v++;
      if (!writing.load(std::memory_order_relaxed)) break;
    }
  return nullptr;
}

template <int L> static void measure(const char *dbuf, int warps, int own, int host_writes) {
  unsigned long long *ns;
  unsigned *sink;
  CHECK(cudaMalloc(&ns, sizeof(unsigned long long) * warps));
  CHECK(cudaMalloc(&sink, sizeof(unsigned)));
  pthread_t th;
  if (host_writes) {
    writing = 1;
    pthread_create(&th, nullptr, writer, nullptr);
  }
  rounds<L><<<warps, 32>>>(dbuf, own, ns, sink); // warm-up
  CHECK(cudaDeviceSynchronize());
  rounds<L><<<warps, 32>>>(dbuf, own, ns, sink);
  CHECK(cudaDeviceSynchronize());
  if (host_writes) {
    writing = 0;
    pthread_join(th, nullptr);
  }
  unsigned long long h[8];
  CHECK(cudaMemcpy(h, ns, sizeof(unsigned long long) * warps, cudaMemcpyDeviceToHost));
  double worst = 0, sum = 0;
  for (int w = 0; w < warps; ++w) {
    double per = (double)h[w] / ROUNDS;
    sum += per;
    if (per > worst) worst = per;
  }
  double bytes = (double)L * 512 * warps * ROUNDS / (worst * ROUNDS * 1e-9);
  printf("%2d load(s) a lane (%5d B a round), %d warp(s), %s bytes%s: %7.0f ns a round (mean %7.0f), %6.2f GB/s in all\n",
         L, L * 512, warps, own ? "own" : "the same", host_writes ? ", host storing" : "", worst, sum / warps,
         bytes / 1e9);
  CHECK(cudaFree(ns));
  CHECK(cudaFree(sink));
}

int main() {
  CHECK(cudaHostAlloc((void **)&hostbuf, 8 * REGION, cudaHostAllocMapped));
  memset(hostbuf, 1, 8 * REGION);
  char *dbuf;
  CHECK(cudaHostGetDevicePointer((void **)&dbuf, hostbuf, 0));
  for (int hw = 0; hw <= 1; ++hw)
    for (int own = 0; own <= 1; ++own)
      for (int w = 1; w <= 8; w *= 2) {
        if (w == 1 && own) continue;
        measure<1>(dbuf, w, own, hw);
        measure<4>(dbuf, w, own, hw);
        measure<16>(dbuf, w, own, hw);
      }
  // and device memory, for scale
  char *dmem;
  CHECK(cudaMalloc(&dmem, 8 * REGION));
  CHECK(cudaMemset(dmem, 1, 8 * REGION));
  printf("device memory:\n");
  measure<1>(dmem, 1, 0, 0);
  measure<16>(dmem, 1, 0, 0);
  measure<16>(dmem, 4, 0, 0);
  return 0;
}
