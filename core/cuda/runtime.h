// CUDA devices: how many are visible (and why none), which is current, the
// process's device, and a scoped guard.
//
// Contract: device_count() never throws: no driver, no device or a driver too old
// all read as 0 GPUs, so CPU-only machines run binaries built with CUDA; the
// driver's own error is kept and unavailable_reason() returns it ("" when a GPU
// is visible). Every error about a missing GPU (check_device, the examples, the
// GPU tests' skip message) carries that reason. Every other call requires a GPU
// and throws a clear error without one.
//
// Devices follow Note [device switching] and Note [process device]
// (core/cuda/device_logic.h): DeviceGuard switches back to the previous device
// only if that device already has a context (so a rank on cuda:1 never creates
// one on GPU 0), and set_process_device() fixes the device of every thread of the
// process once (ProcessGroupNCCL::create calls it with the rank's GPU).
#pragma once

#include <string>

#include "core/device.h"

namespace weft::cuda {

int device_count();
inline bool is_available() { return device_count() > 0; }
// Why device_count() is 0, with the driver's error name and message; "" otherwise.
std::string unavailable_reason();
int current_device();
void set_device(int index);
// Note [process device]: every thread of the process works on `index` unless it
// switches itself. The first call wins (returns the device in effect) unless force.
int set_process_device(int index, bool force = false);
// -1 until set_process_device().
int process_device();
// Checks that `d` is a CUDA device that exists; the error names it, the count
// and, without a GPU, the driver's reason.
void check_device(Device d);
// Prints the CUDA runtime and driver versions once per process
// (core/cuda/library_versions.h); the cuDNN and cuBLAS handles call it at first use.
void report_cuda_versions();
// Waits for all work on the device (and reports deferred index errors,
// core/cuda/index_checks.h).
void synchronize(int index = -1);

// Sets the current device for a scope and restores the previous one (lazily when
// the previous one has no context: Note [device switching]).
class DeviceGuard {
 public:
  explicit DeviceGuard(int index);
  explicit DeviceGuard(Device d) : DeviceGuard(d.index) {}
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = -1;
};

}  // namespace weft::cuda
