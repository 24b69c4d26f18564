// baselines.cu - the launch-based ways to do bench/suite.lua's workloads, measured on the same
// GPU in the same run: prints "workload/figure,value" lines whose keys match the suite's rows
// (and a few more the suite shows as reference rows).
//   nvcc -O2 -arch=native -Xcompiler -fopenmp bench/baselines.cu -o build-gpu/baselines
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>
#include <omp.h>

#define CK(x)                                                                             \
  do {                                                                                    \
    cudaError_t e_ = (x);                                                                 \
    if (e_ != cudaSuccess) {                                                              \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(1);                                                                            \
    }                                                                                     \
  } while (0)

static double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
static double pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, (size_t)(v.size() * p))];
}
static double median(std::vector<double> v) { return pct(v, 0.5); }

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
// one block of 32 threads per 16x16 tile, as the suite's tasks
__global__ void stage_in(float *t) {
  for (int i = threadIdx.x; i < 256; i += 32) t[blockIdx.x * 256 + i] = t[blockIdx.x * 256 + i] * 0.5f + 1.0f;
}
__global__ void stage_mm(const float *t, const float *m, float *u) {
  for (int e = threadIdx.x; e < 256; e += 32) {
    int r = e / 16, c = e % 16;
    float s = 0.0f;
    for (int k = 0; k < 16; ++k) s += t[blockIdx.x * 256 + r * 16 + k] * m[k * 16 + c];
    u[blockIdx.x * 256 + e] = s;
  }
}
__global__ void stage_out(float *u) {
  for (int i = threadIdx.x; i < 256; i += 32) u[blockIdx.x * 256 + i] = (u[blockIdx.x * 256 + i] - 1.0f) * 2.0f;
}
__global__ void expert(const int *items, int first, int count, long long *out) {
  long long s = 0;
  for (int i = threadIdx.x; i < count; i += 32) s += items[first + i];
  for (int d = 16; d > 0; d /= 2) s += __shfl_down_sync(0xffffffffu, s, d);
  if (threadIdx.x == 0) atomicAdd((unsigned long long *)out, (unsigned long long)s);
}
// ping-pong: the host writes n into *in, the kernel answers n into *out; 0 ends it
__global__ void pingpong(volatile int *in, volatile int *out) {
  for (;;) {
    int v = *in;
    if (v < 0) return;
    if (v != *out) {
      __threadfence_system();
      *out = v;
    }
  }
}

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
    int *h;
    CK(cudaHostAlloc(&h, 2 * sizeof(int), cudaHostAllocMapped));
    h[0] = 0;
    h[1] = 0;
    int *d;
    CK(cudaHostGetDevicePointer(&d, h, 0));
    pingpong<<<1, 1, 0, s>>>(d, d + 1);
    volatile int *in = h, *out = h + 1;
    std::vector<double> v;
    for (int i = 1; i <= 10100; ++i) {
      double t0 = now();
      *in = i;
      while (*out != i) {
      }
      if (i > 100) v.push_back((now() - t0) * 1e6);
    }
    *in = -1;
    CK(cudaStreamSynchronize(s));
    printf("round trip/ping-pong floor p50,%.3f\n", pct(v, 0.5));
    printf("round trip/ping-pong floor p99,%.3f\n", pct(v, 0.99));
    CK(cudaFreeHost(h));
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
  // pipeline: three dependent stages per batch, as launches on a stream and as a CUDA graph
  {
    float *t, *m, *u;
    CK(cudaMalloc(&t, 64 * 256 * sizeof(float)));
    CK(cudaMalloc(&u, 64 * 256 * sizeof(float)));
    CK(cudaMalloc(&m, 256 * sizeof(float)));
    CK(cudaMemset(t, 0, 64 * 256 * sizeof(float)));
    CK(cudaMemset(m, 0, 256 * sizeof(float)));
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
      v.clear();
      for (int r = 0; r < 51; ++r) {
        double t0 = now();
        CK(cudaGraphLaunch(ge, s));
        CK(cudaStreamSynchronize(s));
        if (r) v.push_back((now() - t0) * 1e6);
      }
      printf("pipeline/3 stages, batch %d,%.3f\n", batch, median(v));
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
