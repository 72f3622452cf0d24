// cuda_adapter (parallel/comm/nccl/cuda_adapter.h) over core/cuda.
#include "parallel/comm/nccl/cuda_adapter.h"

#include <utility>

#include "core/cuda/comm_activity.h"
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

int process_device() { return weft::cuda::process_device(); }

int set_process_device(int device) { return weft::cuda::set_process_device(device); }

void note_communication(int device, std::function<bool()> done) {
  weft::cuda::comm_activity().add(device, std::move(done));
}

bool event_finished(cudaEvent_t e) {
  const cudaError_t r = cudaEventQuery(e);
  if (r == cudaErrorNotReady) return false;
  if (r != cudaSuccess) (void)cudaGetLastError();
  return true;
}

std::string unavailable_reason() { return weft::cuda::unavailable_reason(); }

}  // namespace weft::parallel::cuda_adapter
