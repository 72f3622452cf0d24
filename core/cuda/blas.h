// cuBLAS handles and the TF32 switch.
//
// Contract: blas_handle(device) returns the calling thread's cuBLAS handle for
// `device` (created on first use, cached per thread and device, never destroyed:
// destroying handles at thread/process exit can race the driver's teardown), bound
// to current_stream(device) and to a workspace from the caching allocator cached
// per (device, stream). Call it under a DeviceGuard for `device`, on every use, so
// the handle always follows the current stream.
//
// set_allow_tf32(true) lets float32 matmuls (cuBLAS) and convolutions (cuDNN) use
// TF32 tensor cores (10-bit mantissa inputs, float32 accumulation); default off,
// like torch.backends.cuda.matmul.allow_tf32. Process-wide.
#pragma once

#include <cublas_v2.h>

namespace weft::cuda {

cublasHandle_t blas_handle(int device);

void set_allow_tf32(bool allow);
bool allow_tf32();

}  // namespace weft::cuda
