// CUDA devices: how many are visible, which is current, and a scoped guard.
//
// Contract: device_count() never throws: no driver, no device or a driver too old
// all read as 0 GPUs, so CPU-only machines run binaries built with CUDA. Every
// other call requires a GPU and throws a clear error without one.
#pragma once

#include "core/device.h"

namespace weft::cuda {

int device_count();
inline bool is_available() { return device_count() > 0; }
int current_device();
void set_device(int index);
// Checks that `d` is a CUDA device that exists; the error names it and the count.
void check_device(Device d);
// Waits for all work on the device.
void synchronize(int index = -1);

// Sets the current device for a scope and restores the previous one.
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
