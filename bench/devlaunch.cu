// devlaunch.cu - how long a launch from the device takes on this GPU: the figures that decide
// whether a very large bulk task should launch a real grid from the device (dynamic parallelism
// or a device graph) rather than run its instances on the executor's warps (bench/NOTES.md).
// Prints "devlaunch/figure,value" lines (µs), each the median of several rounds:
//   - tail-launch chain: N dependent kernels, each launching the next into
//     cudaStreamTailLaunch (it starts once its parent has ended), per hop;
//   - device graph chain: a graph of one kernel, instantiated for device launch, that
//     tail-launches itself N times (cudaGetCurrentGraphExec), per hop;
//   - fire-and-forget grid: a one-thread kernel launches a grid of one block per SM into
//     cudaStreamFireAndForget; from the launch call to the first block's start and to the last
//     block's start (globaltimer);
//   - the same grid launched from the host, from cudaLaunchKernel's call to the last block's
//     start, for comparison;
//   - whole work launched from the device: the block-task examples' matmul (2048 x 2048) and
//     softmax (8192 rows of 4096) as grids (block_kernels.cuh) that a resident kernel launches
//     fire-and-forget and waits for (the grid's last block to end raises a flag), in GFLOP/s and
//     GB/s from the launch call to the flag, beside the same grids launched from the host. The
//     resident kernel stands for the executor: one CTA of 128 threads an SM with the shared
//     memory it keeps for a block task's matmul (35 KB), its warps napping on a flag, with few
//     registers and with about the executor's 255 a thread (224 floats each kept live).
//   nvcc -O2 -arch=native -rdc=true bench/devlaunch.cu -lcudadevrt -o build-gpu/devlaunch
//   build-gpu/devlaunch [hops]
#include "block_kernels.cuh"
#include "cuda_bench.h"

__device__ __forceinline__ unsigned long long gtimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

struct marks {
  unsigned long long t0, first, last; /* ns of the global timer */
  int left;                            /* hops still to go */
};

/* one hop of a tail-launch chain: the first writes t0, the last t1 (in first) */
__global__ void tail_hop(marks *m) {
  if (m->t0 == 0) m->t0 = gtimer();
  if (--m->left <= 0) {
    m->first = gtimer();
    return;
  }
  tail_hop<<<1, 1, 0, cudaStreamTailLaunch>>>(m);
}

/* one hop of a device graph that launches itself */
__global__ void graph_hop(marks *m) {
  if (m->t0 == 0) m->t0 = gtimer();
  if (--m->left <= 0) {
    m->first = gtimer();
    return;
  }
  cudaGraphLaunch(cudaGetCurrentGraphExec(), cudaStreamGraphTailLaunch);
}

/* a block of a wide grid: when it started */
__global__ void wide(marks *m) {
  if (threadIdx.x == 0) {
    unsigned long long t = gtimer();
    atomicMin(&m->first, t);
    atomicMax(&m->last, t);
  }
}
__global__ void launch_wide(marks *m, int blocks) {
  m->t0 = gtimer();
  wide<<<blocks, 128, 0, cudaStreamFireAndForget>>>(m);
}
/* the host's launch, timed on the device's clock: t0 from a one-thread kernel just before */
__global__ void stamp(marks *m) { m->t0 = gtimer(); }

/* the grids a resident kernel launches: the last block to end raises *flag to seq */
__device__ __forceinline__ void last_block_raises(unsigned *ended, volatile int *flag, int seq) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(ended, 1u) == gridDim.x - 1) {
      *ended = 0;
      __threadfence();
      *flag = seq;
    }
  }
}
__global__ void __launch_bounds__(128) mm_raise(const float *A, const float *B, float *C, int n, unsigned *ended,
                                                volatile int *flag, int seq) {
  mm_tile_body(A, B, C, n, blockIdx.x);
  last_block_raises(ended, flag, seq);
}
__global__ void __launch_bounds__(128) softmax_raise(const float *x, float *y, int cols, unsigned *ended,
                                                     volatile int *flag, int seq) {
  softmax_row_body(x, y, cols, blockIdx.x);
  last_block_raises(ended, flag, seq);
}
struct whole {
  const float *a, *b;
  float *c;
  int n, rows, cols, rounds;
  unsigned *ended;
  volatile int *flag, *stop;
  unsigned long long *ns; /* per round: matmul, then softmax */
};
/* the resident kernel: thread 0 of CTA 0 launches each grid and waits for its flag, rounds
 * times each; every other warp naps on *stop until the rounds are done. KEEP floats a thread
 * stay live in registers all along (a loop that asks for them at every turn): with KEEP = 224
 * the kernel holds about as many registers as the executor's 255 a thread */
template <int KEEP> __device__ __forceinline__ void keep_live(float (&r)[KEEP ? KEEP : 1]) {
#pragma unroll
  for (int i = 0; i < KEEP; ++i) asm volatile("" : "+f"(r[i]));
}
template <int KEEP> __global__ void __launch_bounds__(128, 1) resident(whole w) {
  float r[KEEP ? KEEP : 1];
#pragma unroll
  for (int i = 0; i < (KEEP ? KEEP : 1); ++i) r[i] = (float)(threadIdx.x + i);
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    int seq = 0;
    for (int q = 0; q < w.rounds; ++q) {
      unsigned long long t0 = gtimer();
      mm_raise<<<(w.n / MM_TILE) * (w.n / MM_TILE), 128, 0, cudaStreamFireAndForget>>>(w.a, w.b, w.c, w.n, w.ended,
                                                                                       w.flag, ++seq);
      while (*w.flag != seq) {
        keep_live<KEEP>(r);
        __nanosleep(200);
      }
      w.ns[2 * q] = gtimer() - t0;
      t0 = gtimer();
      softmax_raise<<<w.rows, 128, 0, cudaStreamFireAndForget>>>(w.a, w.c, w.cols, w.ended, w.flag, ++seq);
      while (*w.flag != seq) {
        keep_live<KEEP>(r);
        __nanosleep(200);
      }
      w.ns[2 * q + 1] = gtimer() - t0;
    }
    *w.stop = 1;
    __threadfence();
  } else {
    while (*w.stop == 0) {
      keep_live<KEEP>(r);
      __nanosleep(1000);
    }
  }
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < (KEEP ? KEEP : 1); ++i) sum += r[i];
  if (sum == -1.0f) *w.stop = 2; /* never: the registers' values are used */
}

static marks *fresh(marks *m, int left) {
  marks h = {0, ~0ull, 0, left};
  CK(cudaMemcpy(m, &h, sizeof h, cudaMemcpyHostToDevice));
  return m;
}
static marks read(const marks *m) {
  marks h;
  CK(cudaMemcpy(&h, m, sizeof h, cudaMemcpyDeviceToHost));
  return h;
}

/* A chain of hops started by launch() on the device (each hop launches the next), rounds + 1
 * times: prints the median time per hop of the rounds after the first. 1 when a chain stopped
 * short. */
template <class F>
static int chain(const char *what, marks *m, int hops, int rounds, cudaStream_t s, F launch) {
  std::vector<double> v;
  for (int r = 0; r < rounds + 1; ++r) {
    fresh(m, hops);
    launch();
    CK(cudaStreamSynchronize(s));
    CK(cudaGetLastError());
    marks h = read(m);
    if (h.left != 0) {
      fprintf(stderr, "%s stopped with %d hops left\n", what, h.left);
      return 1;
    }
    if (r) v.push_back((h.first - h.t0) / 1e3 / (hops - 1));
  }
  printf("devlaunch/%s, per hop,%.3f\n", what, median(v));
  return 0;
}

int main(int argc, char **argv) {
  const int hops = argc > 1 ? atoi(argv[1]) : 2000, rounds = 9;
  if (hops < 2) {
    fprintf(stderr, "usage: devlaunch [hops]   (hops: a number of 2 or more, default 2000)\n");
    return 2;
  }
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  printf("# %s, %d SMs; %d hops per chain, median of %d rounds\n", prop.name, sms, hops, rounds);
  marks *m;
  CK(cudaMalloc(&m, sizeof *m));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  /* tail-launch chain */
  if (chain("tail-launch chain", m, hops, rounds, s, [&] { tail_hop<<<1, 1, 0, s>>>(m); })) return 1;

  /* device graph chain */
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  graph_hop<<<1, 1, 0, s>>>(m);
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&ge, g, cudaGraphInstantiateFlagDeviceLaunch));
  CK(cudaGraphUpload(ge, s));
  if (chain("device graph chain", m, hops, rounds, s, [&] { CK(cudaGraphLaunch(ge, s)); })) return 1;

  /* a grid of one block per SM, launched from the device and from the host */
  std::vector<double> first, last, host_last, host_wall;
  for (int r = 0; r < rounds + 1; ++r) {
    launch_wide<<<1, 1, 0, s>>>(fresh(m, 0), sms);
    CK(cudaStreamSynchronize(s));
    marks h = read(m);
    if (r) {
      first.push_back((h.first - h.t0) / 1e3);
      last.push_back((h.last - h.t0) / 1e3);
    }
    stamp<<<1, 1, 0, s>>>(fresh(m, 0));
    double t = now();
    wide<<<sms, 128, 0, s>>>(m);
    double t1 = now();
    CK(cudaStreamSynchronize(s));
    h = read(m);
    if (r) {
      host_last.push_back((h.last - h.t0) / 1e3);
      host_wall.push_back((t1 - t) * 1e6);
    }
  }
  printf("devlaunch/fire-and-forget grid of %d blocks, launch to first block,%.3f\n", sms, median(first));
  printf("devlaunch/fire-and-forget grid of %d blocks, launch to last block,%.3f\n", sms, median(last));
  printf("devlaunch/host-launched grid of %d blocks, previous kernel's start to last block,%.3f\n", sms,
         median(host_last));
  printf("devlaunch/host-launched grid of %d blocks, the launch call itself,%.3f\n", sms, median(host_wall));
  /* whole work from the device, beside the host's launches */
  {
    const int n = 2048, rows = 8192, cols = 4096, keep = 35 * 1024;
    whole w = {nullptr, nullptr, nullptr, n, rows, cols, rounds + 1, nullptr, nullptr, nullptr, nullptr};
    float *a, *b, *c;
    block_buffers(n, rows, cols, &a, &b, &c);
    w.a = a, w.b = b, w.c = c;
    int *flags;
    CK(cudaMalloc(&w.ended, sizeof(unsigned)));
    CK(cudaMalloc(&flags, 2 * sizeof(int)));
    CK(cudaMalloc(&w.ns, 2 * w.rounds * sizeof(unsigned long long)));
    CK(cudaMemset(w.ended, 0, sizeof(unsigned)));
    CK(cudaMemset(flags, 0, 2 * sizeof(int)));
    w.flag = flags, w.stop = flags + 1;
    cudaFuncAttributes fa;
    CK(cudaFuncGetAttributes(&fa, mm_raise));
    int alone = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&alone, mm_raise, 128, 0));
    printf("# the matmul grid: %d registers a thread, %d blocks an SM when alone\n", fa.numRegs, alone);
    cudaFuncAttributes light, heavy;
    CK(cudaFuncGetAttributes(&light, resident<0>));
    CK(cudaFuncGetAttributes(&heavy, resident<224>));
    /* how -1: the one-warp kernel once untimed, while the clocks rise from idle */
    for (int how = -1; how < 3; ++how) {
      CK(cudaMemset(flags, 0, 2 * sizeof(int)));
      if (how <= 0) resident<0><<<1, 32, 0, s>>>(w);
      else if (how == 1) resident<0><<<sms, 128, keep, s>>>(w);
      else resident<224><<<sms, 128, keep, s>>>(w);
      CK(cudaStreamSynchronize(s));
      CK(cudaGetLastError());
      if (how < 0) continue;
      std::vector<unsigned long long> ns(2 * w.rounds);
      CK(cudaMemcpy(ns.data(), w.ns, ns.size() * sizeof ns[0], cudaMemcpyDeviceToHost));
      std::vector<double> mm, sm;
      for (int r = 1; r < w.rounds; ++r) {
        mm.push_back(2.0 * n * n * (double)n / (ns[2 * r] / 1e9) / 1e9);
        sm.push_back(2.0 * rows * (double)cols * 4 / (ns[2 * r + 1] / 1e9) / 1e9);
      }
      char by[96] = "from a one-warp kernel";
      if (how) snprintf(by, sizeof by, "from a resident kernel of one CTA an SM, %d registers",
                        how == 1 ? light.numRegs : heavy.numRegs);
      printf("devlaunch/matmul %d x %d launched %s (GFLOP/s),%.3f\n", n, n, by, median(mm));
      printf("devlaunch/softmax %d rows of %d launched %s (GB/s),%.3f\n", rows, cols, by, median(sm));
    }
    double mm, sm;
    host_block_rates(a, b, c, n, rows, cols, s, rounds, &mm, &sm);
    printf("devlaunch/matmul %d x %d launched from the host, launch + synchronize (GFLOP/s),%.3f\n", n, n, mm);
    printf("devlaunch/softmax %d rows of %d launched from the host, launch + synchronize (GB/s),%.3f\n", rows, cols, sm);
    CK(cudaFree(a));
    CK(cudaFree(b));
    CK(cudaFree(c));
    CK(cudaFree(w.ended));
    CK(cudaFree(flags));
    CK(cudaFree(w.ns));
  }
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  CK(cudaFree(m));
  return 0;
}
