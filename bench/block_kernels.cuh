// block_kernels.cuh - the block-task examples' algorithms as plain CUDA, for the standalone
// benchmarks (baselines.cu launches them from the host, devlaunch.cu from the device): one
// 128-thread block a tile or a row. examples/matmul.lua's mm_tile (a 64x64 tile of C, k in steps
// of 16 through shared memory, an 8x4 block of outputs a thread) and examples/softmax.lua's
// softmax_row (a row's maximum and sum through shuffles and shared memory), and their timing from
// the host.
#ifndef MW_BLOCK_KERNELS_CUH
#define MW_BLOCK_KERNELS_CUH
#include "cuda_bench.h"
#define MM_TILE 64
#define MM_KSTEP 16
__device__ __forceinline__ void mm_tile_body(const float *A, const float *B, float *C, int n, unsigned tile) {
  __shared__ float As[MM_KSTEP][MM_TILE], Bs[MM_KSTEP][MM_TILE];
  const int tiles = n / MM_TILE, thread = threadIdx.x;
  const int row0 = (int)(tile / tiles) * MM_TILE, col0 = (int)(tile % tiles) * MM_TILE;
  const int ty = thread / 16, tx = thread % 16;
  float acc[8][4];
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
  for (int k0 = 0; k0 < n; k0 += MM_KSTEP) {
    for (int e = thread; e < MM_TILE * MM_KSTEP; e += 128) {
      const int ar = e / MM_KSTEP, ak = e % MM_KSTEP;
      As[ak][ar] = A[(long)(row0 + ar) * n + k0 + ak];
      const int bk = e / MM_TILE, bc = e % MM_TILE;
      Bs[bk][bc] = B[(long)(k0 + bk) * n + col0 + bc];
    }
    __syncthreads();
    for (int k = 0; k < MM_KSTEP; ++k) {
      float a[8], b[4];
      for (int i = 0; i < 8; ++i) a[i] = As[k][ty * 8 + i];
      for (int j = 0; j < 4; ++j) b[j] = Bs[k][tx * 4 + j];
      for (int i = 0; i < 8; ++i)
        for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
    }
    __syncthreads();
  }
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 4; ++j) C[(long)(row0 + ty * 8 + i) * n + col0 + tx * 4 + j] = acc[i][j];
}
__device__ __forceinline__ void softmax_row_body(const float *x, float *y, int cols, unsigned row) {
  __shared__ float part[4];
  const int thread = threadIdx.x, lane = thread % 32, warp = thread / 32;
  const float *in = x + (long)row * cols;
  float *out = y + (long)row * cols;
  float m = -3.402823466e38f;
  for (int i = thread; i < cols; i += 128) m = fmaxf(m, in[i]);
  for (int o = 16; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if (lane == 0) part[warp] = m;
  __syncthreads();
  m = fmaxf(fmaxf(part[0], part[1]), fmaxf(part[2], part[3]));
  __syncthreads();
  float s = 0.0f;
  for (int i = thread; i < cols; i += 128) s += __expf(in[i] - m);
  for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (lane == 0) part[warp] = s;
  __syncthreads();
  const float inv = 1.0f / (part[0] + part[1] + part[2] + part[3]);
  for (int i = thread; i < cols; i += 128) out[i] = __expf(in[i] - m) * inv;
}
__global__ void __launch_bounds__(128) mm_tile(const float *A, const float *B, float *C, int n) {
  mm_tile_body(A, B, C, n, blockIdx.x);
}
__global__ void __launch_bounds__(128) softmax_row(const float *x, float *y, int cols) {
  softmax_row_body(x, y, cols, blockIdx.x);
}
/* Three device buffers for both (n x n and rows x cols floats, whichever is more): a and b
 * zeroed, c the output. */
static inline void block_buffers(int n, int rows, int cols, float **a, float **b, float **c) {
  const size_t bytes = std::max((size_t)n * n, (size_t)rows * cols) * sizeof(float);
  CK(cudaMalloc(a, bytes));
  CK(cudaMalloc(b, bytes));
  CK(cudaMalloc(c, bytes));
  CK(cudaMemset(*a, 0, bytes));
  CK(cudaMemset(*b, 0, bytes));
}
/* Both launched from the host on stream s, launch + synchronize, rounds + 1 times: the medians
 * of the rounds after the first, the matmul (n x n, of a and b into c) in GFLOP/s in *mm, the
 * softmax (rows x cols, of a into c) in GB/s in *sm. */
static inline void host_block_rates(const float *a, const float *b, float *c, int n, int rows, int cols,
                                    cudaStream_t s, int rounds, double *mm, double *sm) {
  std::vector<double> v, w;
  for (int r = 0; r < rounds + 1; ++r) {
    double t0 = now();
    mm_tile<<<(n / MM_TILE) * (n / MM_TILE), 128, 0, s>>>(a, b, c, n);
    CK(cudaStreamSynchronize(s));
    if (r) v.push_back(2.0 * n * n * (double)n / (now() - t0) / 1e9);
    t0 = now();
    softmax_row<<<rows, 128, 0, s>>>(a, c, cols);
    CK(cudaStreamSynchronize(s));
    if (r) w.push_back(2.0 * rows * (double)cols * 4 / (now() - t0) / 1e9);
  }
  *mm = median(v);
  *sm = median(w);
}
#endif
