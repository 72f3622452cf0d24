// The balancers (parallel/partition/balance.h): the exact DP equals brute force
// on random cost tables (budgets, transfers and ties included), hand-computed
// optima, infeasibility errors, live micro-batches per schedule, and
// fairscale's balance_by_time / balance_by_size.
#include "parallel/partition/balance.h"

#include <cstdint>
#include <random>

#include <gtest/gtest.h>

#include "tests/testing.h"

namespace weft::parallel::partition {
namespace {

constexpr int64_t kMiB = 1 << 20;

LayerProfile layer(double time, int64_t resident = 0, int64_t activation = 0, int64_t output = 0,
                   std::string type = "Linear") {
  LayerProfile l;
  l.type = std::move(type);
  l.forward_s = time / 3;
  l.backward_s = time - l.forward_s;
  l.param_bytes = resident;
  l.activation_bytes = activation;
  l.output_bytes = output;
  return l;
}

std::vector<LayerProfile> times(const std::vector<double>& t) {
  std::vector<LayerProfile> out;
  for (size_t k = 0; k < t.size(); ++k) {
    out.push_back(layer(0));
    out.back().name = std::to_string(k);
    out.back().forward_s = t[k];  // exact: no split rounding
  }
  return out;
}

BalanceOptions opts(int stages, int microbatches = 1) {
  BalanceOptions o;
  o.stages = stages;
  o.microbatches = microbatches;
  return o;
}

using Balance = std::vector<int>;

TEST(LiveMicrobatches, FollowTheSchedule) {
  using pipe::ScheduleKind;
  EXPECT_EQ(live_microbatches(ScheduleKind::k1F1B, 4, 8), (Balance{4, 3, 2, 1}));
  EXPECT_EQ(live_microbatches(ScheduleKind::k1F1B, 4, 2), (Balance{2, 2, 2, 1}));
  EXPECT_EQ(live_microbatches(ScheduleKind::kGPipe, 3, 5), (Balance{5, 5, 5}));
  EXPECT_EQ(live_microbatches(ScheduleKind::kZeroBubbleH1, 4, 8), (Balance{4, 3, 2, 1}));
  EXPECT_EQ(live_microbatches(ScheduleKind::k1F1B, 1, 3), (Balance{1}));
}

TEST(OptimalBalance, HandCases) {
  EXPECT_EQ(optimal_balance(times({1, 1, 1, 1}), opts(2)), (Balance{2, 2}));
  EXPECT_EQ(optimal_balance(times({1, 2, 3, 4, 5, 6}), opts(2)), (Balance{4, 2}));  // 10 | 11
  EXPECT_EQ(optimal_balance(times({1, 1, 1, 1, 1, 10}), opts(3)), (Balance{2, 3, 1}));
  // Equal bottleneck and equal sum of squares: the earliest boundary.
  EXPECT_EQ(optimal_balance(times({1, 2, 1}), opts(2)), (Balance{1, 2}));
  // Equal bottleneck (6): [1, 2, 2] has the smaller sum of squares than [1, 1, 3].
  EXPECT_EQ(optimal_balance(times({6, 1, 1, 1, 1}), opts(3)), (Balance{1, 2, 2}));
  EXPECT_EQ(optimal_balance(times({5, 5, 5}), opts(3)), (Balance{1, 1, 1}));
  EXPECT_EQ(optimal_balance(times({5, 5, 5}), opts(1)), (Balance{3}));
}

TEST(OptimalBalance, BoundaryTransfers) {
  // A boundary after layer 1 costs 10 s, after layers 0 and 2 one second.
  auto layers = times({1, 1, 1, 1});
  layers[0].output_bytes = 1'000'000'000;
  layers[1].output_bytes = 10'000'000'000;
  layers[2].output_bytes = 1'000'000'000;
  BalanceOptions o = opts(2);
  o.bandwidth_bytes_per_s = 1e9;
  EXPECT_EQ(optimal_balance(layers, o), (Balance{1, 3}));  // 1 + 1 | 3
  StageCosts c(layers, o);
  EXPECT_EQ(stage_times(c, {1, 3}), (std::vector<double>{2, 3}));
  EXPECT_EQ(stage_times(c, {2, 2}), (std::vector<double>{12, 2}));
  // The last stage sends nothing.
  EXPECT_EQ(c.transfer_s(4, 1), 0);
}

// 4 layers of 10 MiB resident + 10 MiB activations; 1F1B over 2 stages and 4
// micro-batches keeps 2 micro-batches alive on stage 0 and 1 on stage 1, so a
// stage of k layers needs 30k MiB on stage 0 and 20k MiB on stage 1.
std::vector<LayerProfile> memory_layers() {
  std::vector<LayerProfile> l;
  for (double t : {1.0, 1.0, 1.0, 5.0}) l.push_back(layer(t, 10 * kMiB, 10 * kMiB));
  return l;
}

TEST(OptimalBalance, MemoryBudget) {
  BalanceOptions o = opts(2, 4);
  EXPECT_EQ(StageCosts(memory_layers(), o).live(), (Balance{2, 1}));
  EXPECT_EQ(optimal_balance(memory_layers(), o), (Balance{3, 1}));  // no budget: 3 | 5
  o.memory_budget_bytes = 60 * kMiB;                                // stage 0 holds at most 2 layers
  EXPECT_EQ(optimal_balance(memory_layers(), o), (Balance{2, 2}));
  EXPECT_EQ(StageCosts(memory_layers(), o).memory_bytes(0, 2, 0), 60 * kMiB);
  o.memory_budget_bytes = 50 * kMiB;  // 1 + 2 layers at most: nothing fits
  EXPECT_FALSE(optimal_balance(memory_layers(), o).has_value());
  EXPECT_WEFT_ERROR(solve_balance(memory_layers(), o),
                    "partition: no balance of 4 layers over 2 stages fits the memory budget of 50.0 MiB per device; "
                    "the smallest achievable peak is 60.0 MiB (stage 1 of balance [1, 3])");
  // GPipe keeps all 4 micro-batches on both stages.
  o.schedule = pipe::ScheduleKind::kGPipe;
  o.memory_budget_bytes = 100 * kMiB;
  EXPECT_EQ(StageCosts(memory_layers(), o).live(), (Balance{4, 4}));
  EXPECT_EQ(optimal_balance(memory_layers(), o), (Balance{2, 2}));
  // An explicit live vector overrides the schedule.
  o.live = {1, 1};
  EXPECT_EQ(optimal_balance(memory_layers(), o), (Balance{3, 1}));
}

TEST(SolveBalance, NamesTheLayerThatFitsNowhere) {
  auto layers = memory_layers();
  layers[3].name = "head";
  layers[3].param_bytes = 100 * kMiB;  // may only go on stage 1: 100 + 1 x 10 MiB
  BalanceOptions o = opts(2, 4);
  o.memory_budget_bytes = 60 * kMiB;
  EXPECT_WEFT_ERROR(solve_balance(layers, o),
                    "partition: layer 3 'head' (Linear) does not fit on any stage: it needs 110.0 MiB (100.0 MiB of "
                    "parameters, gradients, optimizer state and buffers + 1 live micro-batches x 10.0 MiB of "
                    "activations) even on stage 1, more than the memory budget of 60.0 MiB per device");
  o.memory_budget_bytes = 110 * kMiB;
  EXPECT_EQ(solve_balance(layers, o), (Balance{3, 1}));
}

TEST(SolveBalance, ArgumentErrors) {
  EXPECT_WEFT_ERROR(solve_balance(times({1, 1}), opts(3)), "2 layers cannot fill 3 stages");
  EXPECT_WEFT_ERROR(solve_balance(times({1, 1}), opts(0)), "the number of stages must be positive (got 0)");
  auto bad = times({1, -2});
  EXPECT_WEFT_ERROR(solve_balance(bad, opts(1)), "layer 1 (Linear) has forward_s = -2");
  BalanceOptions o = opts(2);
  o.live = {1, 2, 3};
  EXPECT_WEFT_ERROR(solve_balance(times({1, 1}), o), "live micro-batches has 3 entries for 2 stages");
  EXPECT_WEFT_ERROR(stage_times(StageCosts(times({1, 1, 1}), opts(2)), {1, 1}), "covers 2 of 3 layers");
}

// Random tables: small integer times (so ties are common), random bytes,
// budgets from none to infeasible, transfers on or off, every schedule's live
// counts or explicit ones. The DP must pick exactly brute force's balance.
TEST(OptimalBalance, EqualsBruteForceOnRandomTables) {
  std::mt19937_64 rng(20240611);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int feasible = 0, infeasible = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const int n = uniform(1, 9);
    const int p = uniform(1, std::min(n, 5));
    std::vector<LayerProfile> layers;
    const bool fractional = trial % 3 == 0;
    for (int k = 0; k < n; ++k) {
      LayerProfile l;
      l.name = "l";
      l.name += std::to_string(k);
      l.forward_s = fractional ? std::uniform_real_distribution<double>(0, 1)(rng) : uniform(0, 4);
      l.backward_s = fractional ? std::uniform_real_distribution<double>(0, 2)(rng) : uniform(0, 4);
      l.param_bytes = uniform(0, 50);
      l.grad_bytes = l.param_bytes;
      l.optimizer_state_bytes = uniform(0, 2) * l.param_bytes;
      l.activation_bytes = uniform(0, 30);
      l.output_bytes = uniform(0, 8);
      layers.push_back(l);
    }
    BalanceOptions o = opts(p, uniform(1, 6));
    o.schedule = std::vector<pipe::ScheduleKind>{pipe::ScheduleKind::k1F1B, pipe::ScheduleKind::kGPipe,
                                                 pipe::ScheduleKind::kZeroBubbleH1}[uniform(0, 2)];
    if (uniform(0, 3) == 0) {
      o.live.clear();
      for (int s = 0; s < p; ++s) o.live.push_back(uniform(0, 4));
    }
    if (uniform(0, 1)) o.bandwidth_bytes_per_s = uniform(1, 4);
    if (uniform(0, 3) > 0) o.memory_budget_bytes = uniform(1, 600);
    const StageCosts c(layers, o);
    const auto dp = optimal_balance(c);
    const auto brute = brute_force_balance(c);
    ASSERT_EQ(dp, brute) << "trial " << trial << ": n=" << n << " p=" << p << " budget=" << o.memory_budget_bytes
                         << " dp=" << (dp ? balance_str(*dp) : "none")
                         << " brute=" << (brute ? balance_str(*brute) : "none");
    if (dp) {
      ++feasible;
      EXPECT_EQ(solve_balance(layers, o), *dp);
    } else {
      ++infeasible;
      EXPECT_WEFT_ERROR(solve_balance(layers, o), "partition: ");
    }
  }
  // Both outcomes were exercised.
  EXPECT_GT(feasible, 500);
  EXPECT_GT(infeasible, 200);
}

TEST(MinMemoryBalance, SmallestPeak) {
  BalanceOptions o = opts(2, 4);
  // Stage 0 costs 30 MiB per layer, stage 1 20: [1, 3] and [2, 2] both peak at 60.
  EXPECT_EQ(min_memory_balance(StageCosts(memory_layers(), o)), (Balance{1, 3}));
}

TEST(BlockPartition, FairscaleSemantics) {
  // Normalised [0, .2, .4, .6, .8, 1]: blocks 3 | 3 move one element left.
  EXPECT_EQ(block_partition({1, 2, 3, 4, 5, 6}, 2), (Balance{4, 2}));
  // Normalised [0, 0, 0, 0, 0, 1]: the first blocks already differ by at most
  // one largest element, so fairscale stops (the exact optimum is [2, 3, 1]).
  EXPECT_EQ(block_partition({1, 1, 1, 1, 1, 10}, 3), (Balance{2, 2, 2}));
  // Six zeros then four ones: three moves to [8, 2].
  EXPECT_EQ(block_partition({0, 0, 0, 0, 0, 0, 5, 5, 5, 5}, 2), (Balance{8, 2}));
  EXPECT_EQ(block_partition({3, 3, 3}, 3), (Balance{1, 1, 1}));
  EXPECT_EQ(block_partition({7, 7, 7, 7, 7}, 2), (Balance{2, 3}));  // equal costs: n / parts each, rest last
  EXPECT_WEFT_ERROR(block_partition({1, 2}, 3), "2 costs are fewer than 3 parts");
}

TEST(BlockPartition, AlwaysCoversEveryLayer) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 2000; ++trial) {
    const int n = std::uniform_int_distribution<int>(1, 24)(rng);
    const int parts = std::uniform_int_distribution<int>(1, n)(rng);
    std::vector<double> costs(n);
    for (double& c : costs) c = std::uniform_int_distribution<int>(0, 100)(rng);
    const Balance b = block_partition(costs, parts);
    ASSERT_EQ(static_cast<int>(b.size()), parts);
    int sum = 0;
    for (int x : b) {
      ASSERT_GE(x, 0) << "trial " << trial;
      sum += x;
    }
    ASSERT_EQ(sum, n);
  }
}

TEST(FairscaleBalancers, ByTimeAndBySize) {
  std::vector<LayerProfile> layers;
  for (int k = 1; k <= 6; ++k) {
    LayerProfile l;
    l.forward_s = k * 0.25;
    l.backward_s = k * 0.75;  // time = k
    l.param_bytes = 7 - k;    // size = (7 - k) x 4 + activation 1
    l.grad_bytes = l.param_bytes;
    l.optimizer_state_bytes = 2 * l.param_bytes;
    l.activation_bytes = 1;
    layers.push_back(l);
  }
  EXPECT_EQ(balance_by_time(layers, 2), (Balance{4, 2}));
  EXPECT_EQ(balance_by_size(layers, 2), (Balance{2, 4}));  // the mirror image
  EXPECT_WEFT_ERROR(balance_by_time(layers, 7), "6 layers cannot fill 7 stages");
}

}  // namespace
}  // namespace weft::parallel::partition
