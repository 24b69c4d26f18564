// pathcost.cu - what one step of the executor's inline path costs, by the way it reaches its
// state: a context in local memory handed to a noinline function, warp state in shared memory
// reached through a generic pointer or through the __shared__ array itself, lane 0 working and
// broadcasting or every lane computing the same. One warp; cycles per call over 2000 calls.
// Build: nvcc -O3 -arch=sm_90 bench/micro/pathcost.cu -o pathcost && ./pathcost
#include <cstdio>

#define N 2000
#define WARPS 4

struct wst { unsigned rec[16], kid[16], depth, epoch, next, last; };
struct ctx {
  wst *ws; // generic pointer to this warp's shared state
  unsigned cw, lane, d, pad[29];
};
__shared__ wst cta_ws[WARPS];

// 8 dependent steps, each: the state pointer from the context, then a field of the state, then
// a store to the state
__device__ __noinline__ unsigned chain_generic(ctx *c, unsigned p) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    p = c->ws->rec[(p + c->d) & 15];
    c->ws->kid[i] = p; // a store: the context may alias, so it is read again
  }
  return p;
}
// the same with the state named as the __shared__ array (the compiler emits shared loads)
__device__ __noinline__ unsigned chain_shared(ctx *c, unsigned p) {
  wst *ws = &cta_ws[c->cw];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    p = ws->rec[(p + c->d) & 15];
    ws->kid[i] = p;
  }
  return p;
}
// the same with everything in registers of the caller (a forceinline step)
__device__ __forceinline__ unsigned chain_regs(wst *ws, unsigned d, unsigned p) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    p = ws->rec[(p + d) & 15];
    ws->kid[i] = p;
  }
  return p;
}
__device__ __noinline__ unsigned empty_call(ctx *c, unsigned p) { return p + c->d; }
// lane 0 reads and updates, then broadcasts (the executor's pattern)
__device__ __noinline__ unsigned lane0_bcast(ctx *c, unsigned p) {
  unsigned v = 0;
  if (c->lane == 0) {
    wst *ws = &cta_ws[c->cw];
    v = ws->rec[p & 15] + ws->kid[(p + 1) & 15];
    ws->last = v;
  }
  return __shfl_sync(0xffffffffu, v, 0);
}
// every lane reads the same words (a broadcast read), one lane writes
__device__ __noinline__ unsigned all_lanes(ctx *c, unsigned p) {
  wst *ws = &cta_ws[c->cw];
  unsigned v = ws->rec[p & 15] + ws->kid[(p + 1) & 15];
  if (c->lane == 0) ws->last = v;
  return v;
}
__device__ __noinline__ unsigned globaltimer_read(ctx *c, unsigned p) {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return p + (unsigned)t + c->d;
}
__device__ __noinline__ unsigned syncwarp_call(ctx *c, unsigned p) {
  __syncwarp();
  return p + c->d;
}

struct row { long long cyc; };

#define MEASURE(expr)                                      \
  do {                                                     \
    __syncwarp();                                          \
    long long t0 = clock64();                              \
    for (int j = 0; j < N; ++j) { p = (expr) & 15; }       \
    long long t = (clock64() - t0) / N;                    \
    if (lane == 0) out[k] = t;                             \
    ++k;                                                   \
  } while (0)

__global__ void kern(long long *out, unsigned seed) {
  unsigned lane = threadIdx.x & 31, cw = threadIdx.x >> 5;
  ctx c;
  c.cw = cw;
  c.lane = lane;
  c.d = seed & 1;
  c.ws = &cta_ws[cw];
  for (int i = lane; i < 16; i += 32) c.ws->rec[i] = c.ws->kid[i] = (i * 7 + 3) & 15;
  __syncwarp();
  unsigned p = seed, k = 0;
  if (cw != 0) return;
  ctx *cp = &c; // the context stays in local memory: its address goes to noinline calls
  MEASURE(chain_generic(cp, p));
  MEASURE(chain_shared(cp, p));
  MEASURE(chain_regs(&cta_ws[cw], c.d, p));
  MEASURE(empty_call(cp, p));
  MEASURE(lane0_bcast(cp, p));
  MEASURE(all_lanes(cp, p));
  MEASURE(syncwarp_call(cp, p));
  MEASURE(globaltimer_read(cp, p));
  if (p == 0xdeadbeef) out[63] = p;
}

int main() {
  long long *out, h[64];
  cudaMalloc(&out, sizeof h);
  for (int rep = 0; rep < 3; ++rep) {
    kern<<<1, 32 * WARPS>>>(out, 1);
    cudaDeviceSynchronize();
  }
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) { printf("CUDA error: %s\n", cudaGetErrorString(e)); return 1; }
  cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost);
  static const char *names[] = {
    "8 dependent loads, ctx(local)->ws(generic)->field, noinline",
    "8 dependent loads, ctx(local)->cw, __shared__ array, noinline",
    "8 dependent loads, state in registers, inlined",
    "empty noinline call with the context",
    "lane 0 reads 2 + writes 1, shfl broadcast, noinline",
    "every lane reads 2, lane 0 writes 1, noinline",
    "__syncwarp in a noinline call",
    "globaltimer read in a noinline call (dependent)"};
  for (int i = 0; i < 8; ++i) printf("%-64s %6lld cycles per call\n", names[i], h[i]);
  return 0;
}
