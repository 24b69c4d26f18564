// cuda_bench.h - what the standalone CUDA benchmarks (baselines.cu, devlaunch.cu) share: a CUDA
// call checked (a failure exits naming the call), the host's clock, percentiles.
#ifndef MW_CUDA_BENCH_H
#define MW_CUDA_BENCH_H
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>

#define CK(x)                                                                             \
  do {                                                                                    \
    cudaError_t e_ = (x);                                                                 \
    if (e_ != cudaSuccess) {                                                              \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(1);                                                                            \
    }                                                                                     \
  } while (0)

static inline double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
static inline double pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, (size_t)(v.size() * p))];
}
static inline double median(std::vector<double> v) { return pct(v, 0.5); }
#endif
