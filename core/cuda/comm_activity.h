// Communication kernels in flight, per device, for Note [cudaFree and
// communication] (core/cuda/caching_allocator.h). Free of CUDA so it is tested
// on any machine (tests/cuda/comm_activity_test.cc).
//
// Contract:
// - add(device, done): a communication operation was queued on `device`;
//   done() returns true once it finished (or can no longer run). The NCCL
//   backend adds every collective and point-to-point batch with a probe on its
//   completion event. Probes must not free device memory (they are polled while
//   the caching allocator holds its lock) and must not throw.
// - in_flight(device) polls the device's probes, drops the finished ones and
//   returns how many remain. wait_idle(device, budget) polls until none remain
//   or `budget` passed, and returns how many remain.
// - Finished entries are also dropped as new ones are added, so a process that
//   never polls keeps a bounded list. Thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <vector>

namespace weft::cuda {

class CommActivity {
 public:
  using Probe = std::function<bool()>;
  void add(int device, Probe done);
  int in_flight(int device);
  int wait_idle(int device, std::chrono::milliseconds budget);

 private:
  int poll_locked(int device);
  std::mutex mu_;
  std::map<int, std::vector<Probe>> pending_;
};

// The process's registry (leaked: used until exit).
CommActivity& comm_activity();

}  // namespace weft::cuda
