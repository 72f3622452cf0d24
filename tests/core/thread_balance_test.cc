// cpu::ThreadBalance (core/cpu/thread_balance.h, Note [gemm balance]): the split
// against hand-computed boundaries, one update against hand-computed weights,
// the feedback loop on simulated threads of unequal speed (with a fixed cost per
// share, as packing the other operand is) settling where they finish together,
// the clamp that keeps a slow thread measured, records it must ignore,
// over_balanced_slabs covering its range once with part q on thread q, and the
// GEMMs (float32, bfloat16 on every path this CPU runs) giving the same bits
// under skewed weights as on one thread.
#include "core/cpu/thread_balance.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <mutex>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "core/cpu/gemm.h"
#include "core/cpu/gemm_bf16.h"
#include "core/half.h"
#include "core/parallel.h"

namespace weft {
namespace {

using cpu::ThreadBalance;

std::vector<int64_t> split(const ThreadBalance& b, int parts, int64_t units) {
  std::vector<int64_t> s(parts + 1);
  b.split(parts, units, s.data());
  return s;
}

TEST(ThreadBalance, EqualWeightsSplitEvenly) {
  ThreadBalance b;
  EXPECT_EQ(split(b, 2, 32), (std::vector<int64_t>{0, 16, 32}));
  EXPECT_EQ(split(b, 3, 10), (std::vector<int64_t>{0, 3, 7, 10}));   // 10/3 and 20/3 rounded
  EXPECT_EQ(split(b, 4, 2), (std::vector<int64_t>{0, 1, 1, 2, 2}));  // fewer units than parts
}

TEST(ThreadBalance, OneRecordMovesTheWeightsByHand) {
  ThreadBalance b;
  // thread 1 took twice as long for the same units: rates 16 and 8, targets
  // 2 * 16 / 24 = 4/3 and 2/3; smoothed: 0.75 + 0.25 * 4/3 and 0.75 + 0.25 * 2/3
  const int64_t units[] = {16, 16};
  const double secs[] = {1.0, 2.0};
  b.record(2, units, secs);
  EXPECT_NEAR(b.weight(0), 0.75 + 0.25 * 4.0 / 3.0, 1e-6);
  EXPECT_NEAR(b.weight(1), 0.75 + 0.25 * 2.0 / 3.0, 1e-6);
  // 120 units at weights 13/12 and 11/12: 65 and 55
  EXPECT_EQ(split(b, 2, 120), (std::vector<int64_t>{0, 65, 120}));
  b.reset();
  EXPECT_EQ(b.weight(0), 1.0);
  EXPECT_EQ(b.weight(1), 1.0);
}

// Three simulated threads at speeds 1, 0.5 and 0.8 units per second, each share
// costing a fixed 20 s besides: after some calls they end within 2% of each other.
TEST(ThreadBalance, SettlesWhereUnequalThreadsFinishTogether) {
  ThreadBalance b;
  const double speed[] = {1.0, 0.5, 0.8}, fixed = 20;
  const int64_t total = 3000;
  auto ends = [&](const std::vector<int64_t>& s, int64_t* units, double* secs) {
    for (int q = 0; q < 3; ++q) units[q] = s[q + 1] - s[q], secs[q] = fixed + units[q] / speed[q];
  };
  int64_t units[3];
  double secs[3];
  ends(split(b, 3, total), units, secs);
  const double first = *std::max_element(secs, secs + 3) / *std::min_element(secs, secs + 3);
  EXPECT_GT(first, 1.5);  // equal shares: the slow thread ends far behind
  for (int call = 0; call < 80; ++call) {
    ends(split(b, 3, total), units, secs);
    b.record(3, units, secs);
  }
  ends(split(b, 3, total), units, secs);
  EXPECT_LT(*std::max_element(secs, secs + 3) / *std::min_element(secs, secs + 3), 1.02)
      << secs[0] << " " << secs[1] << " " << secs[2];
  // and the slowest thread does the least
  EXPECT_LT(units[1], units[2]);
  EXPECT_LT(units[2], units[0]);
}

TEST(ThreadBalance, AVerySlowThreadKeepsAShare) {
  ThreadBalance b;
  const int64_t units[] = {50, 50};
  const double secs[] = {1.0, 1000.0};
  for (int call = 0; call < 100; ++call) b.record(2, units, secs);
  EXPECT_NEAR(b.weight(1), ThreadBalance::kMinWeight, 1e-3);
  const auto s = split(b, 2, 100);
  EXPECT_GT(s[2] - s[1], 10);  // 100 * 0.25 / (0.25 + ~2)
}

// More parts than weights (a machine of more than kMaxThreads threads): equal
// shares whatever the first threads' weights.
TEST(ThreadBalance, SplitsEquallyBeyondItsWeights) {
  ThreadBalance b;
  const int64_t units[] = {10, 10};
  const double secs[] = {1.0, 4.0};
  for (int call = 0; call < 20; ++call) b.record(2, units, secs);
  ASSERT_GT(b.weight(0), 1.4);
  const int parts = ThreadBalance::kMaxThreads + 6;
  const auto s = split(b, parts, 10 * parts);
  for (int q = 0; q <= parts; ++q) EXPECT_EQ(s[q], 10 * q);
}

TEST(ThreadBalance, IgnoresRecordsItCannotUse) {
  ThreadBalance b;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::pair<std::vector<int64_t>, std::vector<double>> bad[] = {
      {{0, 10}, {1.0, 1.0}},   // a part without units
      {{10, 10}, {0.0, 1.0}},  // no time
      {{10, 10}, {nan, 1.0}},
      {{10, 10}, {-1.0, 1.0}},
  };
  for (const auto& [units, secs] : bad) b.record(2, units.data(), secs.data());
  const int64_t one_unit[] = {10};
  const double one_sec[] = {5.0};
  b.record(1, one_unit, one_sec);  // one part: nothing to balance
  EXPECT_EQ(b.weight(0), 1.0);
  EXPECT_EQ(b.weight(1), 1.0);
}

TEST(ThreadBalance, SwitchedOffItSplitsEquallyAndLearnsNothing) {
  ThreadBalance b;
  const int64_t units[] = {16, 16};
  const double secs[] = {1.0, 2.0};
  b.record(2, units, secs);
  const float w0 = b.weight(0);
  cpu::set_thread_balance_enabled(false);
  EXPECT_FALSE(cpu::thread_balance_enabled());
  EXPECT_EQ(split(b, 2, 120), (std::vector<int64_t>{0, 60, 120}));
  b.record(2, units, secs);
  EXPECT_EQ(b.weight(0), w0);
  cpu::set_thread_balance_enabled(true);
  EXPECT_EQ(split(b, 2, 120), (std::vector<int64_t>{0, 65, 120}));
}

// Skews the GEMMs' weights: thread 0 `ratio` times faster than the others.
void skew_gemm_balance(int threads, double ratio) {
  ThreadBalance& b = cpu::gemm_thread_balance();
  b.reset();
  std::vector<int64_t> units(threads, 100);
  std::vector<double> secs(threads, ratio);
  secs[0] = 1.0;
  for (int call = 0; call < 40; ++call) b.record(threads, units.data(), secs.data());
}

TEST(ThreadBalance, OverBalancedSlabsCoverTheRangeOnceWithPartQOnThreadQ) {
  const int prev = get_num_threads();
  for (int threads : {2, 3})
    for (double ratio : {1.0, 3.0, 1.0 / 3.0}) {
      set_num_threads(threads);
      skew_gemm_balance(threads, ratio);
      const int64_t extent = 1000, unit = 32;
      std::mutex mu;
      std::vector<std::pair<int64_t, int64_t>> slabs;
      std::vector<int> thread_of;
      cpu::over_balanced_slabs(extent, 1e9, unit, [&](int64_t s0, int64_t s1) {
        std::lock_guard<std::mutex> lock(mu);
        slabs.emplace_back(s0, s1);
#ifdef _OPENMP
        thread_of.push_back(omp_get_thread_num());
#else
        thread_of.push_back(0);
#endif
      });
      std::vector<size_t> order(slabs.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return slabs[x] < slabs[y]; });
      int64_t next = 0;
      for (size_t i = 0; i < order.size(); ++i) {
        const auto [s0, s1] = slabs[order[i]];
        EXPECT_EQ(s0, next) << threads << " threads, ratio " << ratio;
        EXPECT_TRUE(s1 == extent || s1 % unit == 0) << s1;
        EXPECT_LT(s0, s1);
        next = s1;
#ifdef _OPENMP
        EXPECT_EQ(thread_of[order[i]], static_cast<int>(i)) << "slab " << i << " ran on another thread";
#endif
      }
      EXPECT_EQ(next, extent);
      EXPECT_EQ(slabs.size(), static_cast<size_t>(threads));
      if (ratio > 1) {  // thread 0 gets the largest share
        const auto first = slabs[order[0]];
        EXPECT_GT(first.second - first.first, extent / threads);
      }
    }
  cpu::gemm_thread_balance().reset();
  set_num_threads(prev);
}

uint64_t g_state = 11;
float next_value() {  // k/64, k in [-64, 64)
  g_state = g_state * 6364136223846793005ull + 1442695040888963407ull;
  return static_cast<float>(static_cast<int>((g_state >> 33) % 128) - 64) / 64.0f;
}

// The same bits on one thread and on 2 or 3 with skewed weights, for row slabs
// (m > n) and column slabs, float32 and every bfloat16 path this CPU runs.
TEST(ThreadBalance, GemmBitsDoNotDependOnTheWeights) {
  struct Shape {
    int64_t m, n, k;
  };
  const Shape shapes[] = {{700, 90, 300}, {90, 700, 300}, {257, 333, 1100}};
  std::vector<cpu::Bf16GemmPath> paths;
  for (auto p : {cpu::Bf16GemmPath::kFloat32, cpu::Bf16GemmPath::kAvx512Emulated, cpu::Bf16GemmPath::kAvx512Bf16,
                 cpu::Bf16GemmPath::kAmxEmulated, cpu::Bf16GemmPath::kAmxBf16})
    if (cpu::bf16_gemm_path_available(p)) paths.push_back(p);
  const int prev = get_num_threads();
  for (const Shape& s : shapes) {
    std::vector<float> a(s.m * s.k), b(s.k * s.n);
    for (float& v : a) v = next_value();
    for (float& v : b) v = next_value();
    std::vector<uint16_t> a16(a.size()), b16(b.size());
    for (size_t i = 0; i < a.size(); ++i) a16[i] = BFloat16(a[i]).x;
    for (size_t i = 0; i < b.size(); ++i) b16[i] = BFloat16(b[i]).x;
    auto run_f32 = [&] {
      std::vector<float> c(s.m * s.n);
      cpu::gemm<float>(s.m, s.n, s.k, a.data(), s.k, 1, b.data(), s.n, 1, c.data(), s.n);
      return c;
    };
    auto run_bf16 = [&](cpu::Bf16GemmPath p) {
      std::vector<float> c(s.m * s.n);
      cpu::gemm_bf16(p, s.m, s.n, s.k, a16.data(), s.k, 1, b16.data(), s.n, 1, c.data(), s.n);
      return c;
    };
    set_num_threads(1);
    const std::vector<float> f32 = run_f32();
    std::vector<std::vector<float>> bf16;
    for (auto p : paths) bf16.push_back(run_bf16(p));
    for (int threads : {2, 3})
      for (double ratio : {3.0, 1.0 / 3.0}) {
        set_num_threads(threads);
        SCOPED_TRACE(::testing::Message() << s.m << "x" << s.n << "x" << s.k << ", " << threads
                                          << " threads, thread 0 weight ratio " << ratio);
        skew_gemm_balance(threads, ratio);  // (each product teaches the weights a little: skewed again before each)
        EXPECT_TRUE(run_f32() == f32);
        for (size_t i = 0; i < paths.size(); ++i) {
          skew_gemm_balance(threads, ratio);
          EXPECT_TRUE(run_bf16(paths[i]) == bf16[i]) << cpu::bf16_gemm_path_name(paths[i]);
        }
      }
  }
  cpu::gemm_thread_balance().reset();
  set_num_threads(prev);
}

// A large product on 2 threads teaches the weights (its two shares never end at
// exactly the same rate), so the GEMMs do go through the balance.
TEST(ThreadBalance, LargeGemmsTeachTheWeights) {
  const int64_t m = 512, n = 512, k = 256;  // 2^26 multiply-adds
  std::vector<float> a(m * k, 0.5f), b(k * n, 0.25f), c(m * n);
  std::vector<uint16_t> a16(a.size(), BFloat16(0.5f).x), b16(b.size(), BFloat16(0.25f).x);
  const int prev = get_num_threads();
  set_num_threads(2);
  cpu::gemm_thread_balance().reset();
  cpu::gemm<float>(m, n, k, a.data(), k, 1, b.data(), n, 1, c.data(), n);
  EXPECT_NE(cpu::gemm_thread_balance().weight(0), 1.0) << "float32";
  for (auto p : {cpu::Bf16GemmPath::kAmxBf16, cpu::Bf16GemmPath::kAvx512Bf16, cpu::Bf16GemmPath::kAmxEmulated})
    if (cpu::bf16_gemm_path_available(p)) {
      cpu::gemm_thread_balance().reset();
      cpu::gemm_bf16(p, m, n, k, a16.data(), k, 1, b16.data(), n, 1, c.data(), n);
      EXPECT_NE(cpu::gemm_thread_balance().weight(0), 1.0) << cpu::bf16_gemm_path_name(p);
    }
  cpu::gemm_thread_balance().reset();
  set_num_threads(prev);
}

}  // namespace
}  // namespace weft
