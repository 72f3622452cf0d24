// cuDNN handles.
//
// Contract: cudnn_handle(device) returns the calling thread's cuDNN handle for
// `device` (created on first use, cached per thread and device, never destroyed,
// like blas_handle), bound to current_stream(device) on every call. Call it under
// a DeviceGuard for `device`, on every use. Workspaces come from the caching
// allocator per call (cudnn_workspace), freed in stream order.
#pragma once

#include <cudnn.h>

#include <cstdint>

#include "core/tensor.h"

namespace weft::cuda {

cudnnHandle_t cudnn_handle(int device);

// A device buffer of at least `bytes` bytes on `device` (an undefined tensor for 0).
Tensor cudnn_workspace(int device, size_t bytes);

}  // namespace weft::cuda
