// Device bookkeeping of the CUDA backend (core/cuda/device_logic.h).
#include "core/cuda/device_logic.h"

#include <unordered_map>

namespace weft::cuda {

DriverProbe probe_devices(bool ok, bool no_device, int n, const std::string& error_name,
                          const std::string& error_text) {
  DriverProbe p;
  const std::string err = error_name + " (" + error_text + ")";
  if (!ok) {
    p.reason = no_device ? "no CUDA device: " + err : "cudaGetDeviceCount failed: " + err;
    return p;
  }
  if (n <= 0) {
    p.reason = "cudaGetDeviceCount reports no device";
    return p;
  }
  p.count = n;
  return p;
}

struct DeviceSelector::ThreadState {
  bool initialized = false;
  int recorded = -1;  // Note [device switching]: the thread's device when not the driver's
};

DeviceSelector::ThreadState& DeviceSelector::thread_state() {
  // Keyed by selector so tests can use several; a thread sees few selectors.
  thread_local std::unordered_map<const DeviceSelector*, ThreadState> states;
  ThreadState& st = states[this];
  if (!st.initialized) {
    st.initialized = true;
    const int pd = process_device_.load();
    if (pd >= 0 && ops_->get() != pd) ops_->set(pd);  // Note [process device]
  }
  return st;
}

int DeviceSelector::current() {
  ThreadState& st = thread_state();
  return st.recorded >= 0 ? st.recorded : ops_->get();
}

void DeviceSelector::set(int device) {
  ThreadState& st = thread_state();
  st.recorded = -1;
  if (ops_->get() != device) ops_->set(device);
}

int DeviceSelector::exchange(int device) {
  ThreadState& st = thread_state();
  const int prev = st.recorded >= 0 ? st.recorded : ops_->get();
  st.recorded = -1;
  if (ops_->get() != device) ops_->set(device);
  return prev;
}

void DeviceSelector::restore(int prev) {
  ThreadState& st = thread_state();
  if (prev < 0) return;
  if (ops_->get() == prev) {
    st.recorded = -1;
  } else if (ops_->has_context(prev)) {
    ops_->set(prev);
    st.recorded = -1;
  } else {
    st.recorded = prev;  // no context created on prev: PyTorch's MaybeSetDevice
  }
}

int DeviceSelector::set_process_device(int device, bool force) {
  int expected = -1;
  if (!process_device_.compare_exchange_strong(expected, device) && force) process_device_.store(device);
  const int pd = process_device_.load();
  ThreadState& st = thread_state();  // initialises this thread with the old value, if any
  st.recorded = -1;
  if (ops_->get() != pd) ops_->set(pd);
  return pd;
}

}  // namespace weft::cuda
