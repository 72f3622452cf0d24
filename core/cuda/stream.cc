#include "core/cuda/stream.h"

#include <array>

#include "core/cuda/check.h"
#include "core/cuda/runtime.h"

namespace weft::cuda {
namespace {
constexpr int kMaxDevices = 64;
thread_local std::array<cudaStream_t, kMaxDevices> t_current{};  // all nullptr: legacy stream

int slot(int device) {
  WEFT_CHECK(device >= 0 && device < kMaxDevices, "CUDA device index ", device, " out of range");
  return device;
}
}  // namespace

cudaStream_t current_stream(int device) { return t_current[slot(device)]; }
void set_current_stream(int device, cudaStream_t stream) { t_current[slot(device)] = stream; }

StreamGuard::StreamGuard(int device, cudaStream_t stream) : device_(device), prev_(current_stream(device)) {
  set_current_stream(device, stream);
}
StreamGuard::~StreamGuard() { set_current_stream(device_, prev_); }

Stream::Stream(int device, int priority) : device_(device) {
  DeviceGuard g(device);
  WEFT_CUDA_CHECK(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, priority));
}
Stream::~Stream() {
  if (stream_) (void)cudaStreamDestroy(stream_);
}
void Stream::synchronize() const { WEFT_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

Event::Event(bool timing) {
  WEFT_CUDA_CHECK(cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming));
}
Event::~Event() {
  if (event_) (void)cudaEventDestroy(event_);
}
void Event::record(cudaStream_t stream) { WEFT_CUDA_CHECK(cudaEventRecord(event_, stream)); }
void Event::block(cudaStream_t stream) const { WEFT_CUDA_CHECK(cudaStreamWaitEvent(stream, event_, 0)); }
bool Event::query() const {
  cudaError_t e = cudaEventQuery(event_);
  if (e == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  WEFT_CUDA_CHECK(e);
  return true;
}
void Event::synchronize() const { WEFT_CUDA_CHECK(cudaEventSynchronize(event_)); }
float Event::elapsed_ms(const Event& later) const {
  float ms = 0;
  WEFT_CUDA_CHECK(cudaEventElapsedTime(&ms, event_, later.event_));
  return ms;
}

}  // namespace weft::cuda
