// check.h - the micro benchmarks' check of a CUDA runtime call: the call's text and the error, then exit.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CHECK(x)                                                                                 \
  do {                                                                                           \
    cudaError_t e_ = (x);                                                                        \
    if (e_ != cudaSuccess) {                                                                     \
      fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                                   \
      exit(1);                                                                                   \
    }                                                                                            \
  } while (0)
