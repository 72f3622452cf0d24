// ThreadBalance (contract and Note [gemm balance] in core/cpu/thread_balance.h).
#include "core/cpu/thread_balance.h"

#include <cmath>

namespace weft::cpu {

namespace {
std::atomic<bool> g_enabled{true};
}

void set_thread_balance_enabled(bool on) { g_enabled.store(on, std::memory_order_relaxed); }
bool thread_balance_enabled() { return g_enabled.load(std::memory_order_relaxed); }

void ThreadBalance::reset() {
  for (auto& w : w_) w.store(1.0f, std::memory_order_relaxed);
}

void ThreadBalance::split(int parts, int64_t units, int64_t* s) const {
  if (!thread_balance_enabled() || parts > kMaxThreads) {
    for (int q = 0; q <= parts; ++q) s[q] = units * q / parts;
    return;
  }
  double total = 0;
  for (int q = 0; q < parts; ++q) total += weight(q);
  double cum = 0;
  s[0] = 0;
  for (int q = 1; q <= parts; ++q) {
    cum += weight(q - 1);
    s[q] = q == parts ? units
                      : std::clamp<int64_t>(static_cast<int64_t>(std::llround(units * cum / total)), s[q - 1], units);
  }
}

void ThreadBalance::record(int parts, const int64_t* units, const double* secs) {
  if (parts < 2 || parts > kMaxThreads || !thread_balance_enabled()) return;
  std::array<double, kMaxThreads> rate{};
  double total = 0;
  for (int q = 0; q < parts; ++q) {
    if (units[q] <= 0 || !(secs[q] > 0) || !std::isfinite(secs[q])) return;
    rate[q] = units[q] / secs[q];
    total += rate[q];
  }
  for (int q = 0; q < parts; ++q) {
    const double target = std::clamp(parts * rate[q] / total, kMinWeight, kMaxWeight);
    w_[q].store(static_cast<float>((1 - kSmooth) * weight(q) + kSmooth * target), std::memory_order_relaxed);
  }
}

ThreadBalance& gemm_thread_balance() {
  static ThreadBalance balance;
  return balance;
}

}  // namespace weft::cpu
