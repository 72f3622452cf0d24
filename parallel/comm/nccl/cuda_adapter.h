// cuda_adapter: the one place where the NCCL backend reaches weft's CUDA
// runtime state, now core/cuda (devices, the current stream, the caching
// allocator). Everything else in parallel/nccl goes through it.
//
// Contract:
// - cuda_device_count(): visible GPUs; 0 when there is no GPU or no driver
//   (never throws; weft::cuda::device_count()).
// - compute_stream(device): the stream weft's kernels run on for `device` in
//   the calling thread (weft::cuda::current_stream). Collectives are ordered
//   after it with events (core/cuda/stream.h rule 2).
// - scratch(nbytes, device, stream): a (nbytes,) uint8 tensor on `device` from
//   the caching allocator, allocated with `stream` current, for staging on the
//   communication stream. Callers keep it (and every tensor a collective
//   touches) alive until the collective's completion event fired, so no
//   record_stream() is needed (stream.h rule 3).
// - DeviceGuard: weft::cuda::DeviceGuard. Return codes: WEFT_CUDA_CHECK from
//   core/cuda/check.h.
// - process_device() / set_process_device(d): Note [process device]
//   (core/cuda/device_logic.h): the GPU of every thread of this process, set
//   once (the first call wins; returns the device in effect).
// - note_communication(device, done): registers an operation queued on
//   `device` with weft::cuda::comm_activity() (Note [cudaFree and
//   communication]); done() must only query an event (event_finished).
// - event_finished(e): the event completed or failed (never "not ready").
// - unavailable_reason(): why no GPU is visible, with the driver's error.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <string>

#include "core/cuda/check.h"
#include "core/cuda/runtime.h"
#include "core/tensor.h"

namespace weft::parallel::cuda_adapter {

using DeviceGuard = weft::cuda::DeviceGuard;

int cuda_device_count();
cudaStream_t compute_stream(int device);
Tensor scratch(size_t nbytes, int device, cudaStream_t stream);
// "cudaErrorX (message)".
std::string cuda_error_text(cudaError_t e);
int process_device();
int set_process_device(int device);
void note_communication(int device, std::function<bool()> done);
bool event_finished(cudaEvent_t e);
std::string unavailable_reason();

}  // namespace weft::parallel::cuda_adapter
