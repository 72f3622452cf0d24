// Communication kernels in flight (core/cuda/comm_activity.h).
#include "core/cuda/comm_activity.h"

#include <algorithm>
#include <thread>

namespace weft::cuda {

namespace {
constexpr size_t kPruneAbove = 64;  // entries per device before add() polls
}

int CommActivity::poll_locked(int device) {
  auto it = pending_.find(device);
  if (it == pending_.end()) return 0;
  auto& v = it->second;
  v.erase(std::remove_if(v.begin(), v.end(), [](const Probe& done) { return done(); }), v.end());
  return static_cast<int>(v.size());
}

void CommActivity::add(int device, Probe done) {
  std::lock_guard<std::mutex> lk(mu_);
  auto& v = pending_[device];
  if (v.size() >= kPruneAbove) poll_locked(device);
  v.push_back(std::move(done));
}

int CommActivity::in_flight(int device) {
  std::lock_guard<std::mutex> lk(mu_);
  return poll_locked(device);
}

int CommActivity::wait_idle(int device, std::chrono::milliseconds budget) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  while (true) {
    const int n = in_flight(device);
    if (n == 0 || std::chrono::steady_clock::now() >= deadline) return n;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

CommActivity& comm_activity() {
  static auto* a = new CommActivity;
  return *a;
}

}  // namespace weft::cuda
