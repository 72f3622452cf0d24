// Deferred range checks of GPU-resident indices (core/cuda/index_checks.h,
// Note [deferred index checks] in core/cuda/index_check_log.h).
#include "core/cuda/index_checks.h"

#include <array>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/cuda/check.h"
#include "core/cuda/index_check_log.h"
#include "core/cuda/runtime.h"

namespace weft::cuda {
namespace {

constexpr int kMaxDevices = 64;

struct DeviceLog {
  std::mutex mu;
  IndexCheckLog log;
  int64_t* words = nullptr;  // 2 * kSlots device words, allocated once (never freed)
};

DeviceLog& log_of(int device) {
  WEFT_CHECK(device >= 0 && device < kMaxDevices, "CUDA device index ", device, " out of range");
  static auto* logs = new std::array<DeviceLog, kMaxDevices>();  // leaked: used until exit
  return (*logs)[static_cast<size_t>(device)];
}

// Caller holds l.mu and a DeviceGuard for the device.
std::string flush_locked(DeviceLog& l) {
  if (l.log.empty()) return "";
  for (void* s : l.log.streams()) WEFT_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(s)));
  const int n = l.log.used();
  std::vector<int64_t> host(static_cast<size_t>(2 * n));
  WEFT_CUDA_CHECK(cudaMemcpy(host.data(), l.words, host.size() * sizeof(int64_t), cudaMemcpyDeviceToHost));
  return l.log.settle(host.data(), n);
}

}  // namespace

unsigned long long* index_check_slot(int device, cudaStream_t stream, const char* op, const char* what, int64_t bound) {
  DeviceLog& l = log_of(device);
  DeviceGuard g(device);
  std::string error;
  int slot = -1;
  {
    std::lock_guard<std::mutex> lk(l.mu);
    if (l.words == nullptr)
      WEFT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&l.words), 2 * IndexCheckLog::kSlots * sizeof(int64_t)));
    IndexCheckLog::Entry e{op, what, bound, stream};
    slot = l.log.take(e);
    if (slot < 0) {
      error = flush_locked(l);
      slot = l.log.take(e);
    }
  }
  int64_t* p = l.words + 2 * slot;
  WEFT_CUDA_CHECK(cudaMemsetAsync(p, 0, 2 * sizeof(int64_t), stream));
  WEFT_CHECK(error.empty(), error);
  return reinterpret_cast<unsigned long long*>(p);
}

void flush_index_checks(int device) {
  if (device < 0 || device >= kMaxDevices) return;
  DeviceLog& l = log_of(device);
  std::string error;
  {
    std::lock_guard<std::mutex> lk(l.mu);
    if (l.log.empty()) return;
    DeviceGuard g(device);
    error = flush_locked(l);
  }
  WEFT_CHECK(error.empty(), error);
}

}  // namespace weft::cuda
