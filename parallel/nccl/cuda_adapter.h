// cuda_adapter: the one place where the NCCL backend reaches weft's CUDA
// runtime state (devices, the compute stream, scratch memory) and checks CUDA
// return codes. Everything else in parallel/nccl goes through it, so switching
// to core/cuda (current stream, caching allocator, check macros) touches only
// cuda_adapter.cc.
//
// Contract (until core/cuda lands):
// - cuda_device_count(): visible GPUs; 0 when there is no GPU or no driver
//   (never throws; tests use it to skip).
// - compute_stream(device): the stream weft's kernels run on for `device`:
//   the legacy default stream. Collectives are ordered after it with events.
// - scratch_alloc / scratch_free: stream-ordered device memory
//   (cudaMallocAsync / cudaFreeAsync on `stream`).
// - DeviceGuard: sets the current device, restores the previous one.
// - WEFT_CUDA_CHECK(call, context...): throws weft::Error with
//   cudaGetErrorName/String on failure.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

#include "core/error.h"

namespace weft::parallel::cuda_adapter {

int cuda_device_count();
cudaStream_t compute_stream(int device);
void* scratch_alloc(size_t nbytes, cudaStream_t stream);
void scratch_free(void* ptr, cudaStream_t stream);
std::string cuda_error_text(cudaError_t e);

class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace weft::parallel::cuda_adapter

#define WEFT_CUDA_CHECK(call, ...)                                                                            \
  do {                                                                                                        \
    cudaError_t e_ = (call);                                                                                  \
    if (e_ != cudaSuccess) {                                                                                  \
      (void)cudaGetLastError(); /* clear it: later calls start clean */                                       \
      WEFT_ERROR(__VA_ARGS__, ": ", #call, " failed: ", ::weft::parallel::cuda_adapter::cuda_error_text(e_)); \
    }                                                                                                         \
  } while (0)
