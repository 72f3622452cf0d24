// cuda_adapter (parallel/nccl/cuda_adapter.h) over core/cuda.
#include "parallel/nccl/cuda_adapter.h"

#include "core/cuda/stream.h"
#include "core/ops.h"

namespace weft::parallel::cuda_adapter {

int cuda_device_count() { return weft::cuda::device_count(); }

cudaStream_t compute_stream(int device) { return weft::cuda::current_stream(device); }

Tensor scratch(size_t nbytes, int device, cudaStream_t stream) {
  weft::cuda::StreamGuard sg(device, stream);  // cached for the communication stream
  return empty({static_cast<int64_t>(nbytes)}, {DType::UInt8, Device(DeviceType::CUDA, device)});  // (nbytes,)
}

std::string cuda_error_text(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
}

}  // namespace weft::parallel::cuda_adapter
