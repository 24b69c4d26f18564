// smcost.cu - per-operation latency of what an SM-local executor would use, on the GPU the
// executor runs on: shared-memory loads and atomics, CTA-scope fences (after global stores too), warp collectives, a call
// through a switch with a frame on the stack, global read-after-own-write, the global timer's
// step. One warp; cycles per dependent step over 2000 steps (clock64).
// Build: nvcc -O2 -arch=sm_90 bench/micro/smcost.cu -o smcost && ./smcost
#include <cstdio>

#define N 2000
#define MEASURE(label, body)                                     \
  do {                                                          \
    __syncwarp();                                               \
    long long t0 = clock64();                                   \
    for (int j = 0; j < N; ++j) { body; }                       \
    long long t = (clock64() - t0) / N;                         \
    if (lane == 0) { out[k].cyc = t; out[k].name = label; }     \
    ++k;                                                        \
  } while (0)

struct row { const char *name; long long cyc; };
struct frame { unsigned v[64]; }; // 256 bytes, like a task frame copy

__device__ __noinline__ unsigned callee(frame f, unsigned depth, unsigned kind);
__device__ __noinline__ unsigned body_a(frame f, unsigned depth) {
  f.v[depth & 63] += depth;
  return depth ? callee(f, depth - 1, depth & 1) + 1 : f.v[7];
}
__device__ __noinline__ unsigned body_b(frame f, unsigned depth) {
  f.v[(depth * 3) & 63] ^= depth;
  return depth ? callee(f, depth - 1, depth & 1) + 2 : f.v[9];
}
__device__ __noinline__ unsigned callee(frame f, unsigned depth, unsigned kind) {
  switch (kind) {
    case 0: return body_a(f, depth);
    default: return body_b(f, depth);
  }
}

__global__ void k(unsigned *g, long long *ns, row *out, unsigned seed) {
  __shared__ unsigned s[1024];
  unsigned lane = threadIdx.x & 31, p = 0, q = seed & 1;
  int k = 0;
  for (int i = lane; i < 1024; i += 32) s[i] = (i * 37 + 32) & 1023;
  __syncwarp();
  volatile unsigned *vs = s;
  if (lane == 0) {
    MEASURE("shared load, dependent (volatile)", p = vs[p]);
    MEASURE("shared atomicCAS, dependent", p = atomicCAS(&s[p & 1023], 1u << 30, 0) & 1023);
    MEASURE("shared atomicAdd, dependent", p = atomicAdd(&s[p & 1023], 0) & 1023);
    MEASURE("shared atomicExch, result unused", atomicExch(&s[(j * 32) & 1023], (unsigned)(j & 1023)));
    MEASURE("shared store + fence.acq_rel.cta + load", vs[(p + 1) & 1023] = p; asm volatile("fence.acq_rel.cta;" ::: "memory"); p = vs[p & 1023] & 1023);
    MEASURE("shared store + fence.sc.cta + load", vs[(p + 1) & 1023] = p; asm volatile("fence.sc.cta;" ::: "memory"); p = vs[p & 1023] & 1023);
    MEASURE("shared store + fence.acq_rel.gpu + load", vs[(p + 1) & 1023] = p; asm volatile("fence.acq_rel.gpu;" ::: "memory"); p = vs[p & 1023] & 1023);
    MEASURE("global store, then plain load of it", g[(p + 64) & 4095] = p; p = g[(p + 64) & 4095] & 1023);
    MEASURE("global store, then volatile load of it", g[(p + 64) & 4095] = p; p = ((volatile unsigned *)g)[(p + 64) & 4095] & 1023);
    MEASURE("global plain load, dependent (L1 after first pass)", p = g[p & 4095] & 4095);
    MEASURE("global atomicExch, result unused", atomicExch(&g[8192 + ((j * 32) & 4095)], (unsigned)j));
    MEASURE("global red.add (no result)", atomicAdd(&g[8192 + ((j * 32) & 4095)], 1u));
    MEASURE("global atomicExch, dependent", p = atomicExch(&g[8192 + (p & 4095)], p) & 4095);
    MEASURE("global plain stores x8 (posted)", for (int u = 0; u < 8; ++u) g[16384 + ((j * 8 + u) & 4095)] = j);
    MEASURE("global store + fence.acq_rel.cta + shared load", g[16384 + ((j * 8) & 4095)] = p; asm volatile("fence.acq_rel.cta;" ::: "memory"); p = vs[p & 1023] & 1023);
    MEASURE("global stores x5 + fence.acq_rel.cta + shared load", for (int u = 0; u < 5; ++u) g[16384 + ((j * 8 + u) & 4095)] = p; asm volatile("fence.acq_rel.cta;" ::: "memory"); p = vs[p & 1023] & 1023);
    MEASURE("shared store + fence.acq_rel.gpu + L1-hit global load", vs[(p + 1) & 1023] = p; asm volatile("fence.acq_rel.gpu;" ::: "memory"); p = g[p & 4095] & 1023);
  }
  __syncwarp();
  MEASURE("__shfl_sync, dependent (32 lanes)", p = __shfl_sync(0xffffffffu, p + 1, (p + q) & 31));
  MEASURE("__syncwarp (32 lanes)", __syncwarp());
  MEASURE("ballot + shfl broadcast (32 lanes)", p += __shfl_sync(0xffffffffu, __ballot_sync(0xffffffffu, p & 1), 0));
  {
    frame f;
    for (int i = 0; i < 64; ++i) f.v[i] = i * lane + seed;
    __syncwarp();
    long long t0 = clock64();
    unsigned r = 0;
    for (int j = 0; j < 200; ++j) r += callee(f, 10, j & 1);
    long long t = (clock64() - t0) / (200 * 11);
    if (lane == 0) { out[k].cyc = t; out[k].name = "call via switch, 256-byte frame by value (per call)"; }
    ++k;
    p += r;
  }
  if (lane == 0) {
    // the global timer's step: smallest nonzero difference between successive reads
    unsigned long long a, b, best = ~0ull;
    for (int i = 0; i < 20000; ++i) {
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(a));
      do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(b)); } while (b == a);
      if (b - a < best) best = b - a;
    }
    ns[0] = (long long)best;
    ns[1] = k;
  }
  if (p == 0xdeadbeef) g[0] = p; // keep p alive
}

int main() {
  unsigned *g;
  long long *ns, hns[2];
  row *out, hout[64];
  cudaDeviceSetLimit(cudaLimitStackSize, 16384); // the recursive calls below need more than the default
  cudaMalloc(&g, 1 << 20);
  unsigned init[4096];
  for (int i = 0; i < 4096; ++i) init[i] = (i * 97 + 64) & 4095;
  cudaMemcpy(g, init, sizeof init, cudaMemcpyHostToDevice);
  cudaMalloc(&ns, 16);
  cudaMalloc(&out, sizeof hout);
  for (int rep = 0; rep < 3; ++rep) { k<<<1, 32>>>(g, ns, out, 1); cudaDeviceSynchronize(); }
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) { printf("CUDA error: %s\n", cudaGetErrorString(e)); return 1; }
  cudaMemcpy(hns, ns, 16, cudaMemcpyDeviceToHost);
  cudaMemcpy(hout, out, sizeof hout, cudaMemcpyDeviceToHost);
  // names are device pointers: print by index with a host-side copy of the names
  static const char *names[] = {
    "shared load, dependent (volatile)", "shared atomicCAS, dependent", "shared atomicAdd, dependent",
    "shared atomicExch, result unused", "shared store + fence.acq_rel.cta + load",
    "shared store + fence.sc.cta + load", "shared store + fence.acq_rel.gpu + load",
    "global store, then plain load of it", "global store, then volatile load of it",
    "global plain load, dependent (L1 after first pass)", "global atomicExch, result unused",
    "global red.add (no result)", "global atomicExch, dependent", "global plain stores x8 (posted)",
    "global store + fence.acq_rel.cta + shared load", "global stores x5 + fence.acq_rel.cta + shared load",
    "shared store + fence.acq_rel.gpu + L1-hit global load",
    "__shfl_sync, dependent (32 lanes)", "__syncwarp (32 lanes)", "ballot + shfl broadcast (32 lanes)",
    "call via switch, 256-byte frame by value (per call)"};
  for (int i = 0; i < (int)hns[1] && i < 21; ++i) printf("%-55s %6lld cycles\n", names[i], hout[i].cyc);
  printf("%-55s %6lld ns\n", "globaltimer step", hns[0]);
  return 0;
}
