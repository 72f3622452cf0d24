// Several stages per rank in the partition package (Note [stages per rank] in
// parallel/partition/balance.h): zbv's V placement and the looped placement
// of interleaved-zb decide which stages a rank sums; hand-checked balances,
// the branch and bound equal to brute force on random tables (budgets and
// transfers included), each stage's live micro-batches, the per-rank memory
// check and its errors, the plan table with its rank column, and the search
// choosing zbv when it is fastest and skipping it, with its reason, when
// only 1F1B fits the budget.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "parallel/partition/balance.h"
#include "parallel/partition/plan.h"
#include "parallel/partition/search.h"
#include "tests/testing.h"

namespace weft::parallel::partition {
namespace {

using pipe::ScheduleKind;
using Balance = std::vector<int>;
constexpr int64_t kMiB = 1 << 20;

// F = t ms, B = 2t ms (a stage's time per micro-batch 3t ms); activation bytes per micro-batch.
LayerProfile layer(double t_ms, int64_t activation = 0) {
  LayerProfile l;
  l.type = "Linear";
  l.forward_s = t_ms * 1e-3;
  l.backward_s = 2 * t_ms * 1e-3;
  l.activation_bytes = activation;
  return l;
}

std::vector<LayerProfile> layers_of(const std::vector<double>& t_ms) {
  std::vector<LayerProfile> out;
  for (double t : t_ms) out.push_back(layer(t));
  return out;
}

PlanOptions placed(ScheduleKind kind, int ranks, int microbatches, int virtual_stages = 2) {
  PlanOptions o;
  o.schedule = kind;
  o.stages = ranks * virtual_stages;
  o.virtual_stages = virtual_stages;
  o.microbatches = microbatches;
  return o;
}

TEST(StagesPerRank, LiveMicrobatchesPerStage) {
  // zbv on 2 ranks: rank 0 holds stages 0 and 3 (3 + 1 = 4 stage activations,
  // 2p), rank 1 stages 1 and 2 (2 + 2); with 4 ranks and 8 micro-batches
  // every rank's two stages keep 8 together.
  EXPECT_EQ(live_microbatches(ScheduleKind::kZeroBubbleV, 4, 4, 2), (Balance{3, 2, 2, 1}));
  EXPECT_EQ(live_microbatches(ScheduleKind::kZeroBubbleV, 8, 8, 2), (Balance{7, 6, 5, 4, 4, 3, 2, 1}));
  EXPECT_EQ(live_microbatches(ScheduleKind::kGPipe, 4, 4, 2), (Balance{4, 4, 4, 4}));
  // One stage per rank: as before.
  EXPECT_EQ(live_microbatches(ScheduleKind::k1F1B, 4, 8), (Balance{4, 3, 2, 1}));
  EXPECT_WEFT_ERROR(live_microbatches(ScheduleKind::kZeroBubbleV, 5, 4, 2), "5 stages do not make 2 stage(s) per rank");
}

TEST(StagesPerRank, HandCheckedBalancesFollowThePlacement) {
  // 4 equal layers on 2 ranks: one layer per stage; rank 0 holds stages 0 and 3.
  const PartitionPlan four = plan_partition(layers_of({1, 1, 1, 1}), placed(ScheduleKind::kZeroBubbleV, 2, 4));
  EXPECT_EQ(four.balance, (Balance{1, 1, 1, 1}));
  ASSERT_EQ(four.stages.size(), 4u);
  EXPECT_EQ(four.stages[0].rank, 0);
  EXPECT_EQ(four.stages[1].rank, 1);
  EXPECT_EQ(four.stages[2].rank, 1);
  EXPECT_EQ(four.stages[3].rank, 0);
  EXPECT_NEAR(four.bottleneck_s, 3e-3, 1e-12);  // a stage of 3 ms; two per rank
  // F = B = W = 1 ms per stage: 24 ms of work per rank and zbv's p - 1 = 1 idle: bubble 1/25.
  EXPECT_NEAR(four.step_time_s, 25e-3, 1e-12);
  EXPECT_NEAR(four.bubble_fraction, 1.0 / 25, 1e-12);
  // 8 equal layers: the even balance (16 equal layers on 4 ranks too).
  EXPECT_EQ(plan_partition(layers_of({1, 1, 1, 1, 1, 1, 1, 1}), placed(ScheduleKind::kZeroBubbleV, 2, 4)).balance,
            (Balance{2, 2, 2, 2}));
  EXPECT_EQ(plan_partition(layers_of(std::vector<double>(16, 1)), placed(ScheduleKind::kZeroBubbleV, 4, 8)).balance,
            (Balance{2, 2, 2, 2, 2, 2, 2, 2}));
  // Times 3, 1, 1, 1, 1, 1 (F = t ms, stage time 3t): the slowest stage is
  // layer 0 alone (9 ms), and the other five layers go to three stages of at
  // most 3 each. The busiest rank decides next: under zbv rank 0 holds stages
  // 0 and 3, so stage 3 gets one layer (rank 0: 3 + 1, rank 1: 2 + 2; [1, 1,
  // 3, 1] ties but has larger squares); looped, rank 0 holds stages 0 and 2,
  // so stage 2 gets one: [1, 2, 1, 2].
  const auto head = layers_of({3, 1, 1, 1, 1, 1});
  const PartitionPlan v = plan_partition(head, placed(ScheduleKind::kZeroBubbleV, 2, 4));
  EXPECT_EQ(v.balance, (Balance{1, 2, 2, 1}));
  EXPECT_NEAR(v.bottleneck_s, 9e-3, 1e-12);
  const PartitionPlan looped = plan_partition(head, placed(ScheduleKind::kInterleavedZeroBubble, 2, 4));
  EXPECT_EQ(looped.balance, (Balance{1, 2, 1, 2}));
  EXPECT_NEAR(looped.bottleneck_s, 9e-3, 1e-12);
  EXPECT_EQ(looped.stages[2].rank, 0);
}

// Random tables: the branch and bound equals brute force, with budgets and transfers.
TEST(StagesPerRank, SearchEqualsBruteForce) {
  std::mt19937 rng(17);
  std::uniform_int_distribution<int> tenth(1, 30), bytes(0, 8), coin(0, 3);
  int feasible = 0, infeasible = 0;
  for (int trial = 0; trial < 600; ++trial) {
    const int ranks = 2 + trial % 2, n = 2 * ranks + trial % 5;
    std::vector<LayerProfile> layers;
    for (int k = 0; k < n; ++k) {
      LayerProfile l = layer(coin(rng) == 0 ? 1.0 : tenth(rng) / 10.0, bytes(rng) * kMiB);
      l.param_bytes = bytes(rng) * kMiB;
      l.output_bytes = bytes(rng) * 1000;
      layers.push_back(l);
    }
    BalanceOptions o =
        placed(trial % 3 == 0 ? ScheduleKind::kInterleavedZeroBubble : ScheduleKind::kZeroBubbleV, ranks, 4);
    if (trial % 4 == 1) o.bandwidth_bytes_per_s = 1e6;
    if (trial % 2 == 0) o.memory_budget_bytes = (20 + bytes(rng) * 5) * kMiB;
    const StageCosts c(layers, o);
    const auto fast = optimal_balance(c), slow = brute_force_balance(c);
    ASSERT_EQ(fast.has_value(), slow.has_value()) << "trial " << trial;
    if (!fast) {
      ++infeasible;
      continue;
    }
    ++feasible;
    EXPECT_EQ(*fast, *slow) << "trial " << trial;
    if (o.memory_budget_bytes > 0) {
      for (int64_t m : rank_memory_bytes(c, *fast)) EXPECT_LE(m, o.memory_budget_bytes) << "trial " << trial;
    }
  }
  EXPECT_GT(feasible, 100);
  EXPECT_GT(infeasible, 10);
}

// Each stage alone fits 3.5 MiB, but rank 0's stages 0 and 3 need 3 + 1 MiB together.
TEST(StagesPerRank, TheBudgetHoldsForARanksStagesTogether) {
  std::vector<LayerProfile> layers;
  for (int k = 0; k < 4; ++k) layers.push_back(layer(1, kMiB));
  PlanOptions o = placed(ScheduleKind::kZeroBubbleV, 2, 4);
  o.memory_budget_bytes = 7 * kMiB / 2;
  const PartitionPlan plan = evaluate_balance(layers, {1, 1, 1, 1}, o);
  EXPECT_EQ(plan.stages[0].peak_memory_bytes, 3 * kMiB);
  EXPECT_EQ(plan.rank_memory_bytes, (std::vector<int64_t>{4 * kMiB, 4 * kMiB}));
  o.method = BalanceMethod::kManual;
  o.balance = {1, 1, 1, 1};
  EXPECT_WEFT_ERROR(plan_partition(layers, o),
                    "partition: rank 0 of balance [1, 1, 1, 1] needs 4.0 MiB at its peak with its stages together "
                    "(stage 0 (layers 0 Linear): 0.0 MiB resident + 3 live micro-batches x 1.0 MiB; stage 3 (layers "
                    "3 Linear): 0.0 MiB resident + 1 live micro-batches x 1.0 MiB), more than the memory budget of "
                    "3.5 MiB per device");
  o.method = BalanceMethod::kOptimal;
  o.balance.clear();
  EXPECT_WEFT_ERROR(plan_partition(layers, o),
                    "partition: no balance of 4 layers over 4 stages (2 ranks, 2 stages each as zbv places them) fits "
                    "the memory budget of 3.5 MiB per device; the smallest achievable peak is 4.0 MiB (rank 0, "
                    "stages 0 and 3, of balance [1, 1, 1, 1])");
  o.memory_budget_bytes = 4 * kMiB;
  EXPECT_EQ(plan_partition(layers, o).balance, (Balance{1, 1, 1, 1}));
}

TEST(StagesPerRank, TheTableShowsEachStagesRank) {
  const PartitionPlan plan = plan_partition(layers_of({1, 1, 1, 1}), placed(ScheduleKind::kZeroBubbleV, 2, 4));
  EXPECT_EQ(partition_table(layers_of({1, 1, 1, 1}), plan),
            "partition: 4 layers over 4 stages on 2 ranks (2 per rank), zbv with 4 micro-batches, no memory budget\n"
            "stage  rank  layers    parameters  peak memory  time/micro-batch\n"
            "    0     0  0 Linear           0      0.0 MiB          3.000 ms\n"
            "    1     1  1 Linear           0      0.0 MiB          3.000 ms\n"
            "    2     1  2 Linear           0      0.0 MiB          3.000 ms\n"
            "    3     0  3 Linear           0      0.0 MiB          3.000 ms\n"
            "peak memory per rank (its stages together): rank 0 0.0 MiB, rank 1 0.0 MiB\n"
            "predicted step time 25.000 ms, bubble 4.0% (bottleneck 3.000 ms per micro-batch; busiest rank 0 "
            "6.000 ms)\n");
}

SearchOptions six_schedules(int ranks, int chunks) {
  SearchOptions s;
  s.plan.stages = ranks;
  s.schedules = {ScheduleKind::kGPipe,
                 ScheduleKind::k1F1B,
                 ScheduleKind::kZeroBubbleH1,
                 ScheduleKind::kInterleaved1F1B,
                 ScheduleKind::kInterleavedZeroBubble,
                 ScheduleKind::kZeroBubbleV};
  s.virtual_stages = {1, 1, 1, 2, 2, 2};
  s.chunks = {chunks};
  s.profiled_chunks = chunks;
  return s;
}

TEST(StagesPerRank, TheSearchPicksZbvWhenFastest) {
  // 4 equal layers on 2 ranks, 4 micro-batches: gpipe and 1F1B 5 x 6 = 30 ms,
  // ZB-H1 26 ms (24 of work, one idle stage-time of 2 ms), interleaved 27 ms,
  // interleaved-zb and zbv 25 ms; the tie keeps interleaved-zb, listed first.
  const SearchResult r = choose_plan(layers_of({1, 1, 1, 1}), six_schedules(2, 4));
  EXPECT_EQ(r.schedule, ScheduleKind::kInterleavedZeroBubble);
  EXPECT_EQ(r.virtual_stages, 2);
  EXPECT_NEAR(r.plan.step_time_s, 25e-3, 1e-12);
  SearchOptions only = six_schedules(2, 4);
  only.schedules = {ScheduleKind::k1F1B, ScheduleKind::kZeroBubbleV};
  only.virtual_stages = {1, 2};
  const SearchResult v = choose_plan(layers_of({1, 1, 1, 1}), only);
  EXPECT_EQ(v.schedule, ScheduleKind::kZeroBubbleV);
  EXPECT_EQ(v.plan.balance, (Balance{1, 1, 1, 1}));
  EXPECT_EQ(v.plan.stages[3].rank, 0);
  EXPECT_TRUE(v.skipped.empty());
}

// Layer 0 keeps 4 MiB per live micro-batch: 1F1B and ZB-H1 keep 2 on stage 0
// (8 MiB), zbv 3 (12 MiB), interleaved-zb 3 and gpipe and interleaved 4: under
// a 10 MiB budget only the one-stage 1F1B order fits, and the fastest of those is ZB-H1.
TEST(StagesPerRank, ABudgetThatFitsOneFOneBButNotZbvSkipsZbv) {
  std::vector<LayerProfile> layers = layers_of({1, 1, 1, 1});
  layers[0].activation_bytes = 4 * kMiB;
  SearchOptions s = six_schedules(2, 4);
  s.plan.memory_budget_bytes = 10 * kMiB;
  const SearchResult r = choose_plan(layers, s);
  EXPECT_EQ(r.schedule, ScheduleKind::kZeroBubbleH1);
  EXPECT_EQ(r.virtual_stages, 1);
  ASSERT_EQ(r.skipped.size(), 4u);
  EXPECT_EQ(r.skipped[0].rfind("gpipe with 4 micro-batches: partition: layer 0 (Linear) does not fit", 0), 0u)
      << r.skipped[0];
  EXPECT_EQ(r.skipped[3].rfind("zbv (2 stages per rank) with 4 micro-batches: partition: layer 0 (Linear) does not "
                               "fit on any stage: it needs 12.0 MiB",
                               0),
            0u)
      << r.skipped[3];
  // Without the budget zbv's 25 ms wins over ZB-H1's 26 ms (listed first, it wins the tie with interleaved-zb).
  s.plan.memory_budget_bytes = 0;
  s.schedules.pop_back();
  s.schedules.insert(s.schedules.begin(), ScheduleKind::kZeroBubbleV);
  s.virtual_stages = {2, 1, 1, 1, 2, 2};
  EXPECT_EQ(choose_plan(layers, s).schedule, ScheduleKind::kZeroBubbleV);
}

}  // namespace
}  // namespace weft::parallel::partition
