// baselines.cu - the launch-based ways to do bench/suite.lua's workloads, measured on the same
// GPU in the same run: prints "workload/figure,value" lines whose keys match the suite's rows
// (and a few more the suite shows as reference rows). It measures: the round trip of an empty
// launch + sync and the ping-pong floor over mapped memory; a chain of dependent launches, on a
// stream and as a CUDA graph; OpenMP fib on the host; saxpy and copy bandwidth; the block-task
// examples' matmul and softmax as plain kernels; the 3-stage
// pipeline per batch as launches on a stream ("(streams)"), as a CUDA graph (no suffix) and as
// a CUDA graph whose dependent stages use programmatic dependent launch ("(graph+PDL)",
// compute capability 9.0+ only, checked against the plain graph's output: on a mismatch it
// prints an error and exits with status 1); host-driven fan-out; pageable cudaMemcpy.
// Lines starting with "#" are notes (a figure left out, and why).
//   nvcc -O2 -arch=native -std=c++17 -Xcompiler -fopenmp bench/baselines.cu -o build-gpu/baselines
#include <cmath>

#include <omp.h>

#include "cuda_bench.h"

__global__ void empty() {}
__global__ void step(int *c) {
  if (threadIdx.x == 0) *c += 1;
}
__global__ void saxpy(float a, const float *x, float *y, long n) {
  long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i < n; i += (long)gridDim.x * blockDim.x) y[i] = a * x[i] + y[i];
}
__global__ void copy(const float *x, float *y, long n) {
  long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i < n; i += (long)gridDim.x * blockDim.x) y[i] = x[i];
}
#include "block_kernels.cuh"
#include "pingpong.cuh"
// one block of 32 threads per 16x16 tile, as the suite's tasks. The bodies are shared by the
// plain stage kernels and their PDL versions below, so every variant does the same arithmetic.
__device__ __forceinline__ void stage_in_body(float *t) {
  for (int i = threadIdx.x; i < 256; i += 32) t[blockIdx.x * 256 + i] = t[blockIdx.x * 256 + i] * 0.5f + 1.0f;
}
__device__ __forceinline__ void stage_mm_body(const float *t, const float *m, float *u) {
  for (int e = threadIdx.x; e < 256; e += 32) {
    int r = e / 16, c = e % 16;
    float s = 0.0f;
    for (int k = 0; k < 16; ++k) s += t[blockIdx.x * 256 + r * 16 + k] * m[k * 16 + c];
    u[blockIdx.x * 256 + e] = s;
  }
}
__device__ __forceinline__ void stage_out_body(float *u) {
  for (int i = threadIdx.x; i < 256; i += 32) u[blockIdx.x * 256 + i] = (u[blockIdx.x * 256 + i] - 1.0f) * 2.0f;
}
__global__ void stage_in(float *t) { stage_in_body(t); }
__global__ void stage_mm(const float *t, const float *m, float *u) { stage_mm_body(t, m, u); }
__global__ void stage_out(float *u) { stage_out_body(u); }
// The same stages for programmatic dependent launch (compute capability 9.0+): stage_mm and
// stage_out are launched with cudaLaunchAttributeProgrammaticStreamSerialization, so each may
// start while the stage before it is still running. cudaGridDependencySynchronize()
// (griddepcontrol.wait) blocks until the grid it depends on has completed and its memory
// operations are visible, so each dependent stage calls it before it touches what the stage
// before it writes (stage_mm reads t; stage_out reads and rewrites u). The trigger,
// cudaTriggerProgrammaticLaunchCompletion() (griddepcontrol.launch_dependents), only lets the
// next grid be scheduled once every block has called it or exited; it orders no memory by itself,
// so the visibility of the writes rests on the wait alone. It is called here after each block's
// stores are issued (every thread calls it); an earlier trigger would be correct as well, the
// dependent's blocks would only sit in the wait longer. Below sm_90 these kernels are the plain
// stages (the host runs the PDL variant only on 9.0+).
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();
#endif
}
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaTriggerProgrammaticLaunchCompletion();
#endif
}
__global__ void stage_in_pdl(float *t) {
  stage_in_body(t); // the first stage: launched plainly, it depends on no kernel in the graph
  pdl_trigger();
}
__global__ void stage_mm_pdl(const float *t, const float *m, float *u) {
  pdl_wait(); // stage_in's t
  stage_mm_body(t, m, u);
  pdl_trigger();
}
__global__ void stage_out_pdl(float *u) {
  pdl_wait(); // stage_mm's u
  stage_out_body(u);
}
__global__ void expert(const int *items, int first, int count, long long *out) {
  long long s = 0;
  for (int i = threadIdx.x; i < count; i += 32) s += items[first + i];
  for (int d = 16; d > 0; d /= 2) s += __shfl_down_sync(0xffffffffu, s, d);
  if (threadIdx.x == 0) atomicAdd((unsigned long long *)out, (unsigned long long)s);
}
// the ping-pong floor: pp_register<false> with request and answer 128 bytes apart, the tightest
// loop (bench/micro/pingpong.cu: reading the answer back and fencing each reply took 5.66 us p50
// against 2.53 us on an H100)
static long fib_omp(int n) {
  if (n < 2) return n;
  long a, b;
#pragma omp task shared(a) if (n > 20)
  a = fib_omp(n - 1);
  b = fib_omp(n - 2);
#pragma omp taskwait
  return a + b;
}

int main() {
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  // round trip: launch + synchronize an empty kernel
  {
    std::vector<double> v;
    for (int i = 0; i < 5100; ++i) {
      double t0 = now();
      empty<<<1, 32, 0, s>>>();
      CK(cudaStreamSynchronize(s));
      if (i >= 100) v.push_back((now() - t0) * 1e6);
    }
    printf("round trip/spawn->await p50,%.3f\n", pct(v, 0.5));
    printf("round trip/spawn->await p99,%.3f\n", pct(v, 0.99));
  }
  // the floor: host <-> persistent kernel over pinned mapped memory
  {
    std::vector<double> v = pingpong_times(pp_register<false>, 32, 10000, s);
    printf("round trip/ping-pong floor p50,%.3f\n", pct(v, 0.5));
    printf("round trip/ping-pong floor p99,%.3f\n", pct(v, 0.99));
  }
  // dependent chain: 10,000 dependent launches on a stream, and the same as a CUDA graph
  {
    const int n = 10000;
    int *c;
    CK(cudaMalloc(&c, sizeof(int)));
    for (int i = 0; i < 100; ++i) step<<<1, 32, 0, s>>>(c);
    CK(cudaStreamSynchronize(s));
    std::vector<double> v;
    for (int r = 0; r < 5; ++r) {
      double t0 = now();
      for (int i = 0; i < n; ++i) step<<<1, 32, 0, s>>>(c);
      CK(cudaStreamSynchronize(s));
      v.push_back((now() - t0) * 1e6 / n);
    }
    printf("dependent chain/hop (%d hops),%.3f\n", n, median(v));
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < n; ++i) step<<<1, 32, 0, s>>>(c);
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    CK(cudaGraphLaunch(ge, s));
    CK(cudaStreamSynchronize(s));
    v.clear();
    for (int r = 0; r < 5; ++r) {
      double t0 = now();
      CK(cudaGraphLaunch(ge, s));
      CK(cudaStreamSynchronize(s));
      v.push_back((now() - t0) * 1e6 / n);
    }
    printf("dependent chain/CUDA graph step,%.3f\n", median(v));
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
    CK(cudaFree(c));
  }
  // fork-join reference: fib(30) as OpenMP tasks on the host's cores
  {
    const int n = 30;
    long a = 0, b = 1;
    for (int i = 0; i < n + 1; ++i) { long t = a + b; a = b; b = t; }
    long tasks = 2 * a - 1;
    double t0 = now();
    long r;
#pragma omp parallel
#pragma omp single
    r = fib_omp(n);
    double t = now() - t0;
    printf("fork-join/fib(%d), %ld tasks,%.3f\n", n, tasks, tasks / t / 1e6);
    if (r != 832040) fprintf(stderr, "fib_omp wrong: %ld\n", r);
  }
  // bulk: saxpy over 256 MB each of x and y, and a copy for the bandwidth ceiling
  {
    const long n = 67108864;
    float *x, *y;
    CK(cudaMalloc(&x, n * sizeof(float)));
    CK(cudaMalloc(&y, n * sizeof(float)));
    CK(cudaMemset(x, 0, n * sizeof(float)));
    CK(cudaMemset(y, 0, n * sizeof(float)));
    int sms;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    std::vector<double> v, w;
    for (int r = 0; r < 11; ++r) {
      double t0 = now();
      saxpy<<<sms * 8, 256, 0, s>>>(2.0f, x, y, n);
      CK(cudaStreamSynchronize(s));
      if (r) v.push_back(12.0 * n / (now() - t0) / 1e9);
      t0 = now();
      copy<<<sms * 8, 256, 0, s>>>(x, y, n);
      CK(cudaStreamSynchronize(s));
      if (r) w.push_back(8.0 * n / (now() - t0) / 1e9);
    }
    printf("bulk/saxpy over %.1f MB,%.3f\n", n * 8 / 1048576.0, median(v));
    printf("bulk/copy bandwidth,%.3f\n", median(w));
    CK(cudaFree(x));
    CK(cudaFree(y));
  }
  // block tasks: the examples' matmul (n = 2048) and softmax (8192 rows of 4096), launch +
  // synchronize, the median of 10 timed runs after one untimed (the suite's rows of the same name)
  {
    const int n = 2048, rows = 8192, cols = 4096;
    float *a, *b, *c;
    block_buffers(n, rows, cols, &a, &b, &c);
    double mm, sm;
    host_block_rates(a, b, c, n, rows, cols, s, 10, &mm, &sm);
    printf("block tasks/matmul %d x %d,%.3f\n", n, n, mm);
    printf("block tasks/softmax %d rows of %d,%.3f\n", rows, cols, sm);
    CK(cudaFree(a));
    CK(cudaFree(b));
    CK(cudaFree(c));
  }
  // pipeline: three dependent stages per batch, as launches on a stream, as a CUDA graph, and as
  // a CUDA graph whose dependent stages use programmatic dependent launch (PDL, compute
  // capability 9.0+). Each figure is the median of 50 timed runs of launch + synchronize.
  {
    float *t, *m, *u;
    CK(cudaMalloc(&t, 64 * 256 * sizeof(float)));
    CK(cudaMalloc(&u, 64 * 256 * sizeof(float)));
    CK(cudaMalloc(&m, 256 * sizeof(float)));
    CK(cudaMemset(t, 0, 64 * 256 * sizeof(float)));
    CK(cudaMemset(m, 0, 256 * sizeof(float)));
    int major = 0;
    CK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
    if (major < 9)
      printf("# pipeline graph+PDL: needs compute capability 9.0, this device is %d.x, not measured\n", major);
    // the check of the PDL graph against the plain one: both run once from the same t, m and u
    // (u set to a value no stage writes, so a stage that ran too early shows)
    std::vector<float> t_init(64 * 256), u_init(64 * 256, -777.0f), m_init(256);
    for (int i = 0; i < 64 * 256; ++i) t_init[i] = (float)(i % 5);
    for (int i = 0; i < 256; ++i) m_init[i] = (float)((i / 16 * 3 + i % 16) % 7) * 0.25f - 0.5f;
    auto run_once = [&](cudaGraphExec_t x, int batch, std::vector<float> &t_out, std::vector<float> &u_out) {
      size_t bytes = batch * 256 * sizeof(float);
      t_out.resize(batch * 256);
      u_out.resize(batch * 256);
      // stream-ordered copies: s does not synchronize with the legacy stream
      CK(cudaMemcpyAsync(t, t_init.data(), bytes, cudaMemcpyHostToDevice, s));
      CK(cudaMemcpyAsync(u, u_init.data(), bytes, cudaMemcpyHostToDevice, s));
      CK(cudaMemcpyAsync(m, m_init.data(), 256 * sizeof(float), cudaMemcpyHostToDevice, s));
      CK(cudaGraphLaunch(x, s));
      CK(cudaMemcpyAsync(t_out.data(), t, bytes, cudaMemcpyDeviceToHost, s));
      CK(cudaMemcpyAsync(u_out.data(), u, bytes, cudaMemcpyDeviceToHost, s));
      CK(cudaMemsetAsync(m, 0, 256 * sizeof(float), s)); // back to the m the timed runs use
      CK(cudaStreamSynchronize(s));
    };
    // the median of 50 timed launches of graph x (after one untimed), in us
    auto time_graph = [&](cudaGraphExec_t x) {
      std::vector<double> w;
      for (int r = 0; r < 51; ++r) {
        double t0 = now();
        CK(cudaGraphLaunch(x, s));
        CK(cudaStreamSynchronize(s));
        if (r) w.push_back((now() - t0) * 1e6);
      }
      return median(w);
    };
    for (int batch : {1, 2, 4, 8, 16, 32, 64}) {
      std::vector<double> v;
      for (int r = 0; r < 51; ++r) {
        double t0 = now();
        stage_in<<<batch, 32, 0, s>>>(t);
        stage_mm<<<batch, 32, 0, s>>>(t, m, u);
        stage_out<<<batch, 32, 0, s>>>(u);
        CK(cudaStreamSynchronize(s));
        if (r) v.push_back((now() - t0) * 1e6);
      }
      printf("pipeline/3 stages, batch %d (streams),%.3f\n", batch, median(v));
      cudaGraph_t g;
      cudaGraphExec_t ge;
      CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
      stage_in<<<batch, 32, 0, s>>>(t);
      stage_mm<<<batch, 32, 0, s>>>(t, m, u);
      stage_out<<<batch, 32, 0, s>>>(u);
      CK(cudaStreamEndCapture(s, &g));
      CK(cudaGraphInstantiate(&ge, g, 0));
      printf("pipeline/3 stages, batch %d,%.3f\n", batch, time_graph(ge));
      if (major >= 9) {
        // The PDL graph is built by stream capture: the dependent stages are launched with
        // cudaLaunchKernelEx and cudaLaunchAttributeProgrammaticStreamSerialization, which the
        // programming guide documents as usable under stream capture (CUDA 12.3+): capture
        // turns each such launch into a programmatic edge from the kernel before it
        // (cudaGraphKernelNodePortProgrammatic, cudaGraphDependencyTypeProgrammatic), the
        // same edge an explicitly built graph would get from cudaGraphAddNode with that edge
        // data. Capture keeps the three variants built the same way; the edges are checked
        // below, so a driver that captured plain edges gives no figure rather than a wrong one.
        cudaLaunchAttribute attr[1];
        attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[0].val.programmaticStreamSerializationAllowed = 1;
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(batch);
        cfg.blockDim = dim3(32);
        cfg.dynamicSmemBytes = 0;
        cfg.stream = s;
        cfg.attrs = attr;
        cfg.numAttrs = 1;
        cudaGraph_t gp;
        cudaGraphExec_t gpe;
        CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        stage_in_pdl<<<batch, 32, 0, s>>>(t);
        CK(cudaLaunchKernelEx(&cfg, stage_mm_pdl, (const float *)t, (const float *)m, u));
        CK(cudaLaunchKernelEx(&cfg, stage_out_pdl, u));
        CK(cudaStreamEndCapture(s, &gp));
        cudaGraphNode_t from[8], to[8];
        cudaGraphEdgeData ed[8] = {};
        size_t ne = 8;
        cudaError_t qe = cudaGraphGetEdges(gp, from, to, ed, &ne);
        int programmatic = 0;
        for (size_t i = 0; qe == cudaSuccess && i < ne; ++i)
          if (ed[i].type == cudaGraphDependencyTypeProgrammatic) ++programmatic;
        if (qe != cudaSuccess || ne != 2 || programmatic != 2) {
          printf("# pipeline graph+PDL, batch %d: %s: %d programmatic edges of %d in the captured graph, "
                 "not 2 of 2, not measured\n", batch, cudaGetErrorString(qe), programmatic, (int)ne);
        } else {
          CK(cudaGraphInstantiate(&gpe, gp, 0));
          std::vector<float> t_plain, u_plain, t_pdl, u_pdl;
          run_once(ge, batch, t_plain, u_plain);
          run_once(gpe, batch, t_pdl, u_pdl);
          for (int i = 0; i < batch * 256; ++i) {
            for (int which = 0; which < 2; ++which) {
              float a = which ? u_pdl[i] : t_pdl[i], b = which ? u_plain[i] : t_plain[i];
              if (!(fabsf(a - b) <= 1e-5f * fmaxf(1.0f, fabsf(b)))) {
                fprintf(stderr, "error: pipeline graph+PDL, batch %d: %s[%d] is %g where the plain graph gives %g\n",
                        batch, which ? "u" : "t", i, a, b);
                printf("error: pipeline graph+PDL differs from the plain graph at batch %d\n", batch);
                exit(1);
              }
            }
          }
          printf("pipeline/3 stages, batch %d (graph+PDL),%.3f\n", batch, time_graph(gpe));
          CK(cudaGraphExecDestroy(gpe));
        }
        CK(cudaGraphDestroy(gp));
      }
      CK(cudaGraphExecDestroy(ge));
      CK(cudaGraphDestroy(g));
    }
    CK(cudaFree(t));
    CK(cudaFree(u));
    CK(cudaFree(m));
  }
  // dynamic fan-out, host-driven: the sizes live on the device, so the host reads them back
  // and launches one kernel per non-empty group
  {
    const int groups = 48;
    std::vector<int> counts(groups), items;
    srand(11);
    for (int g = 0; g < groups; ++g) {
      counts[g] = rand() % 3 == 0 ? 0 : 1 + rand() % 512;
      for (int i = 0; i < counts[g]; ++i) items.push_back(rand() % 201 - 100);
    }
    int *dc, *di;
    long long *dout;
    CK(cudaMalloc(&dc, groups * sizeof(int)));
    CK(cudaMalloc(&di, items.size() * sizeof(int)));
    CK(cudaMalloc(&dout, sizeof(long long)));
    CK(cudaMemcpy(dc, counts.data(), groups * sizeof(int), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(di, items.data(), items.size() * sizeof(int), cudaMemcpyHostToDevice));
    std::vector<double> v;
    std::vector<int> hc(groups);
    for (int r = 0; r < 51; ++r) {
      double t0 = now();
      CK(cudaMemcpyAsync(hc.data(), dc, groups * sizeof(int), cudaMemcpyDeviceToHost, s));
      CK(cudaMemsetAsync(dout, 0, sizeof(long long), s));
      CK(cudaStreamSynchronize(s));
      int first = 0;
      for (int g = 0; g < groups; ++g) {
        if (hc[g] > 0) expert<<<1, 32, 0, s>>>(di, first, hc[g], dout);
        first += hc[g];
      }
      long long total;
      CK(cudaMemcpyAsync(&total, dout, sizeof total, cudaMemcpyDeviceToHost, s));
      CK(cudaStreamSynchronize(s));
      if (r) v.push_back((now() - t0) * 1e6);
    }
    printf("dynamic fan-out/48 groups,%.3f\n", median(v));
    CK(cudaFree(dc));
    CK(cudaFree(di));
    CK(cudaFree(dout));
  }
  // buffers: 256 MB written to and read back from the device, from ordinary (pageable) host
  // memory as a script's FFI array is, with cudaMemcpy: the PCIe copy the bindings compete with
  {
    const size_t bytes = 256u << 20;
    std::vector<float> host(bytes / sizeof(float), 1.0f);
    float *dev;
    CK(cudaMalloc(&dev, bytes));
    std::vector<double> v;
    for (int r = 0; r < 6; ++r) {
      double t0 = now();
      CK(cudaMemcpy(dev, host.data(), bytes, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(host.data(), dev, bytes, cudaMemcpyDeviceToHost));
      if (r) v.push_back(2.0 * bytes / (now() - t0) / 1e9);
    }
    printf("buffers/write+read 256 MB, FFI array,%.3f\n", median(v));
    CK(cudaFree(dev));
  }
  CK(cudaStreamDestroy(s));
  return 0;
}
