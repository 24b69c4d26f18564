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
//     start, for comparison.
//   nvcc -O2 -arch=native -rdc=true bench/devlaunch.cu -lcudadevrt -o build-gpu/devlaunch
//   build-gpu/devlaunch [hops]
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
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  CK(cudaFree(m));
  return 0;
}
