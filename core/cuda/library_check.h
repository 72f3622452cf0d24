// Return-code checks for cuBLAS and cuDNN (the runtime's are in core/cuda/check.h).
//
// Contract: every cuBLAS / cuDNN call goes through one of these macros; a failure
// throws weft::Error with the library's status name/string, the failing expression
// and its location (WEFT_ERROR adds the location).
#pragma once

#include <cudnn.h>

#include <cublas_v2.h>

#include "core/error.h"

#define WEFT_CUBLAS_CHECK(expr)                                                                                  \
  do {                                                                                                           \
    cublasStatus_t weft_cublas_st_ = (expr);                                                                     \
    if (weft_cublas_st_ != CUBLAS_STATUS_SUCCESS)                                                                \
      WEFT_ERROR("cuBLAS error ", static_cast<int>(weft_cublas_st_), " (", cublasGetStatusName(weft_cublas_st_), \
                 "): ", cublasGetStatusString(weft_cublas_st_), " in ", #expr);                                  \
  } while (0)

#define WEFT_CUDNN_CHECK(expr)                                                                                        \
  do {                                                                                                                \
    cudnnStatus_t weft_cudnn_st_ = (expr);                                                                            \
    if (weft_cudnn_st_ != CUDNN_STATUS_SUCCESS)                                                                       \
      WEFT_ERROR("cuDNN error ", static_cast<int>(weft_cudnn_st_), ": ", cudnnGetErrorString(weft_cudnn_st_), " in ", \
                 #expr);                                                                                              \
  } while (0)
