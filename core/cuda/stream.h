// Streams and events, and the current stream every kernel launches on.
//
// Synchronisation rules (the whole backend follows them):
//  1. Every kernel, cuBLAS/cuDNN call and async copy runs on current_stream(device)
//     of the device that owns the output. The default current stream is the legacy
//     default stream (nullptr), which orders against every blocking stream, so code
//     that never sets a stream is correctly ordered without events.
//  2. Work that runs on another stream (the data-parallel communication stream) must
//     be ordered explicitly: record an Event on the producer stream, block() the
//     consumer stream on it. Streams created here are non-blocking (they do not
//     order against the legacy stream implicitly).
//  3. Memory freed while another stream may still use it must be announced with
//     record_stream() (core/cuda/allocator.h) so the caching allocator does not
//     hand it out before that stream's work is done.
//  4. Device-to-host copies synchronise the stream before returning (the host sees
//     the data); host-to-device copies from pinned memory are asynchronous.
#pragma once

#include <cuda_runtime_api.h>

namespace weft::cuda {

// The stream kernels on `device` launch on, for the calling thread.
cudaStream_t current_stream(int device);
void set_current_stream(int device, cudaStream_t stream);

// Sets the current stream of a device for a scope.
class StreamGuard {
 public:
  StreamGuard(int device, cudaStream_t stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  int device_;
  cudaStream_t prev_;
};

// An owned non-blocking stream on one device.
class Stream {
 public:
  explicit Stream(int device, int priority = 0);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }
  int device() const { return device_; }
  void synchronize() const;

 private:
  int device_;
  cudaStream_t stream_ = nullptr;
};

// An owned event (timing optional).
class Event {
 public:
  explicit Event(bool timing = false);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(cudaStream_t stream);
  // Makes `stream` wait (on the device) for the work captured by the last record().
  void block(cudaStream_t stream) const;
  bool query() const;  // true when the captured work is done
  void synchronize() const;
  // Milliseconds between this event and a later one (both recorded, timing on).
  float elapsed_ms(const Event& later) const;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace weft::cuda
