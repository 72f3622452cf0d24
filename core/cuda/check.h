// Return-code checks for the CUDA runtime, cuBLAS and cuDNN.
//
// Contract: every call into these libraries goes through one of these macros; a
// failure throws weft::Error carrying the library's own message, the failing
// expression and its location. A sticky kernel-launch error is cleared first so
// later calls are not poisoned by an error already reported.
#pragma once

#include <cuda_runtime_api.h>

#include "core/error.h"

#define WEFT_CUDA_CHECK(expr)                                                                             \
  do {                                                                                                    \
    cudaError_t weft_cuda_err_ = (expr);                                                                  \
    if (weft_cuda_err_ != cudaSuccess) {                                                                  \
      (void)cudaGetLastError();                                                                           \
      WEFT_ERROR("CUDA error ", static_cast<int>(weft_cuda_err_), " (", cudaGetErrorName(weft_cuda_err_), \
                 "): ", cudaGetErrorString(weft_cuda_err_), " in ", #expr);                               \
    }                                                                                                     \
  } while (0)

// After a kernel launch: reports launch-configuration errors (not asynchronous faults).
#define WEFT_CUDA_KERNEL_CHECK(kernel_name)                                                               \
  do {                                                                                                    \
    cudaError_t weft_cuda_err_ = cudaGetLastError();                                                      \
    if (weft_cuda_err_ != cudaSuccess)                                                                    \
      WEFT_ERROR("CUDA kernel ", kernel_name, " failed to launch: ", cudaGetErrorString(weft_cuda_err_)); \
  } while (0)
