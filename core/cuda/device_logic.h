// The CUDA backend's device bookkeeping as plain logic over a driver interface,
// free of CUDA so it is tested on any machine with a fake driver
// (tests/cuda/device_logic_test.cc); core/cuda/runtime.cc binds it to the CUDA
// runtime.
//
// Contract:
// - probe_devices(): the answer to "how many GPUs?" with the driver's error
//   kept. count is 0 whenever the call failed, and `reason` says why, e.g.
//   "cudaGetDeviceCount failed: cudaErrorInsufficientDriver (CUDA driver version
//   is insufficient for CUDA runtime version)"; a machine without a device reads
//   "no CUDA device: cudaErrorNoDevice (...)". reason is "" when count > 0.
// - Note [device switching]: DeviceSelector does what PyTorch's
//   c10::cuda::{ExchangeDevice, MaybeSetDevice} do. Since CUDA 12,
//   cudaSetDevice(d) creates d's primary context (about 0.5 GB), so a guard that
//   switches to cuda:1 and "back" to device 0 gives every rank of a multi-GPU job
//   a context on GPU 0. exchange(d) switches for real; restore(prev) switches back
//   only when prev already has a primary context, and otherwise just records prev
//   as the thread's device (current() returns it) without touching the driver.
// - Note [process device]: set_process_device(d) sets the device once for the
//   whole process (PyTorch's torch.cuda.set_device in a DDP rank):
//   the calling thread switches at once, every other thread the first time it
//   asks for its device (current(), set(), exchange()). A later call with another
//   device is ignored unless `force` (the first choice wins: a rank keeps its GPU).
// - Thread state is per DeviceSelector and per thread; the process device is per
//   DeviceSelector. All members are thread-safe.
#pragma once

#include <atomic>
#include <string>

namespace weft::cuda {

struct DriverProbe {
  int count = 0;
  std::string reason;  // why count is 0; "" otherwise
};

// `ok`: the device-count call succeeded; `no_device`: it failed because the
// machine has no device; `n`: the count it reported; `error_name`/`error_text`:
// the driver's own name and message for the failure.
DriverProbe probe_devices(bool ok, bool no_device, int n, const std::string& error_name, const std::string& error_text);

// The driver calls the selector needs (CUDA runtime in runtime.cc, a fake in tests).
class DeviceOps {
 public:
  virtual ~DeviceOps() = default;
  virtual int get() = 0;                     // the thread's device (creates no context)
  virtual void set(int device) = 0;          // switch the thread (creates device's primary context)
  virtual bool has_context(int device) = 0;  // device's primary context exists already
};

class DeviceSelector {
 public:
  explicit DeviceSelector(DeviceOps* ops) : ops_(ops) {}
  DeviceSelector(const DeviceSelector&) = delete;
  DeviceSelector& operator=(const DeviceSelector&) = delete;

  // The calling thread's device (its recorded device, Note [device switching]).
  int current();
  // Makes `device` the thread's device (a real switch when it is not already).
  void set(int device);
  // For a guard: switches the thread to `device`; returns what restore() takes.
  int exchange(int device);
  // Undoes exchange(): back to `prev`, lazily when prev has no primary context.
  void restore(int prev);
  // Note [process device]. Returns the process device in effect afterwards.
  int set_process_device(int device, bool force = false);
  // -1 until set_process_device().
  int process_device() const { return process_device_.load(); }

 private:
  struct ThreadState;
  ThreadState& thread_state();  // applies the process device on a thread's first use

  DeviceOps* ops_;
  std::atomic<int> process_device_{-1};
};

}  // namespace weft::cuda
