// ThreadBalance: how a parallel CPU product shares its tiles among threads that
// do not run at one speed (Note [gemm balance]).
//
// Contract: split() cuts `units` whole units into `parts` contiguous shares in
// proportion to per-thread weights; record() teaches the weights from the
// shares' measured end times; over_balanced_slabs() does both around one
// parallel_for whose part q runs on thread q. Weights only move the split
// points, so the products that use them give the same bits whatever the
// weights (Note [gemm determinism] in core/cpu/gemm.h).
//
// Note [gemm balance]: the threads of one product need not run at one speed. On
// a shared host a core is slowed by what its neighbours run, and which core is
// slower changes from second to second (on a 2-vCPU Xeon guest the two ran
// sgemm 1024 at 95 and 111 GFLOP/s side by side, then the other way round).
// Equal slabs then wait for the slower thread. So thread q gets a share
// proportional to its weight w_q: the rate (units per second, counted from the
// call's start to the thread's end, so a late wake-up counts against it) that
// thread reached in earlier large products, smoothed over calls. Rates are
// measured on whatever shares ran, so the weights settle where the threads
// finish together (a fixed cost per share, such as packing the other operand,
// damps the steps without moving that point). Each weight stays within [1/4, 4]
// of the mean, so no thread starves and stops being measured. The weights are
// relaxed atomics: products running at once may interleave their updates, which
// costs at most a less even split.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

#include "core/parallel.h"

namespace weft::cpu {

class ThreadBalance {
 public:
  static constexpr int kMaxThreads = 64;
  static constexpr double kSmooth = 0.25;  // weight of the newest call in the average
  static constexpr double kMinWeight = 0.25, kMaxWeight = 4.0;

  ThreadBalance() { reset(); }
  // Every weight back to 1 (equal shares).
  void reset();
  // Boundaries s[0] = 0 <= s[1] <= ... <= s[parts] = units of the parts' shares
  // (s has parts + 1 entries); equal shares while the balance is off
  // (set_thread_balance_enabled below) or for more than kMaxThreads parts.
  void split(int parts, int64_t units, int64_t* s) const;
  // Part q ran units[q] units and ended secs[q] seconds after the call began.
  // Ignored unless every part ran some units in a positive time, and while the
  // balance is off.
  void record(int parts, const int64_t* units, const double* secs);
  double weight(int q) const { return q < kMaxThreads ? w_[q].load(std::memory_order_relaxed) : 1.0; }

 private:
  std::array<std::atomic<float>, kMaxThreads> w_;
};

// On (the default): the GEMMs size their slabs by ThreadBalance and flash
// attention hands out its matrices one at a time. Off: equal shares and no
// learning, as if threads ran at one speed. For benchmarks comparing the two
// (//bench:balance_ab); not thread-safe against products running meanwhile.
void set_thread_balance_enabled(bool on);
bool thread_balance_enabled();

// The balance shared by the CPU GEMMs (float32, bfloat16): a thread's speed is
// its core's, whatever it multiplies.
ThreadBalance& gemm_thread_balance();

// Runs tile(s0, s1) on up to get_num_threads() slabs of [0, extent) cut at
// multiples of `unit`, one slab per thread, shared by gemm_thread_balance();
// `work` (multiply-adds) decides whether to go parallel at all (>= 2^18) and
// whether the call is long enough to teach the weights (>= 2^23). Inside a
// parallel region, or with one thread, it is one call tile(0, extent).
template <typename Tile>
void over_balanced_slabs(int64_t extent, double work, int64_t unit, const Tile& tile) {
  const int64_t tiles = (extent + unit - 1) / unit;
  const int parts = work >= double(1 << 18) && !in_parallel_region()
                        ? static_cast<int>(std::min<int64_t>(get_num_threads(), tiles))
                        : 1;
  if (parts <= 1) {
    if (extent > 0) tile(0, extent);
    return;
  }
  ThreadBalance& balance = gemm_thread_balance();
  std::vector<int64_t> bounds(parts + 1);
  std::vector<double> ends(parts);
  balance.split(parts, tiles, bounds.data());
  const auto start = std::chrono::steady_clock::now();
  // parallel_for hands out one chunk per thread in order: part q runs on thread q
  parallel_for(0, parts, 1, [&](int64_t q0, int64_t q1) {
    for (int64_t q = q0; q < q1; ++q) {
      const int64_t s0 = std::min(extent, bounds[q] * unit), s1 = std::min(extent, bounds[q + 1] * unit);
      if (s0 < s1) tile(s0, s1);
      ends[q] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
  });
  if (work >= double(1 << 23)) {
    std::vector<int64_t> units(parts);
    for (int q = 0; q < parts; ++q) units[q] = bounds[q + 1] - bounds[q];
    balance.record(parts, units.data(), ends.data());
  }
}

}  // namespace weft::cpu
