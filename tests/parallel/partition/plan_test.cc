// Partition plans (parallel/partition/plan.h): per-stage estimates, the
// simulated step time and bubble, the methods, budget errors and the exact
// table text.
#include "parallel/partition/plan.h"

#include <mutex>
#include <sstream>

#include <gtest/gtest.h>

#include "parallel/comm/inproc/testing.h"
#include "tests/testing.h"

namespace weft::parallel::partition {
namespace {

constexpr int64_t kMiB = 1 << 20;

LayerProfile make(std::string name, std::string type, double fwd_ms, int64_t params) {
  LayerProfile l;
  l.name = std::move(name);
  l.type = std::move(type);
  l.forward_s = fwd_ms * 1e-3;
  l.backward_s = 2 * fwd_ms * 1e-3;
  l.num_parameters = params;
  l.param_bytes = 4 * params;
  l.grad_bytes = 4 * params;
  l.optimizer_state_bytes = 8 * params;  // Adam
  l.activation_bytes = kMiB;
  l.output_bytes = 1000;
  return l;
}

// Two stages of F = 1 ms, B = 2 ms when split [2, 2].
std::vector<LayerProfile> hand_layers() {
  return {make("0", "Linear", 0.5, 100), make("1", "ReLU", 0.5, 0), make("2", "Linear", 0.75, 50),
          make("head", "Linear", 0.25, 10)};
}

PlanOptions hand_options() {
  PlanOptions o;
  o.stages = 2;
  o.microbatches = 4;
  return o;
}

TEST(EvaluateBalance, StageEstimates) {
  const PartitionPlan plan = evaluate_balance(hand_layers(), {2, 2}, hand_options());
  ASSERT_EQ(plan.stages.size(), 2u);
  const StageEstimate& s0 = plan.stages[0];
  EXPECT_EQ(s0.begin, 0);
  EXPECT_EQ(s0.end, 2);
  EXPECT_EQ(s0.num_parameters, 100);
  EXPECT_EQ(s0.live_microbatches, 2);  // 1F1B: p - 0
  EXPECT_EQ(s0.resident_bytes, 1600);
  EXPECT_EQ(s0.activation_bytes, 2 * kMiB);
  EXPECT_EQ(s0.peak_memory_bytes, 1600 + 2 * 2 * kMiB);
  EXPECT_NEAR(s0.time_s, 3e-3, 1e-12);
  const StageEstimate& s1 = plan.stages[1];
  EXPECT_EQ(s1.num_parameters, 60);
  EXPECT_EQ(s1.live_microbatches, 1);
  EXPECT_EQ(s1.peak_memory_bytes, 960 + 2 * kMiB);
  EXPECT_EQ(s1.transfer_s, 0);
  // 1F1B, 2 stages, 4 micro-batches, F = 1, B = 2: busy 12 ms per rank and the
  // textbook bubble (p - 1) / (m + p - 1) = 1/5, so 15 ms.
  EXPECT_NEAR(plan.step_time_s, 15e-3, 1e-9);
  EXPECT_NEAR(plan.bubble_fraction, 0.2, 1e-9);
  EXPECT_NEAR(plan.bottleneck_s, 3e-3, 1e-12);
  EXPECT_EQ(plan.schedule, "1f1b");
}

TEST(EvaluateBalance, ZeroBubbleSplitsTheBackward) {
  PlanOptions o = hand_options();
  o.schedule = pipe::ScheduleKind::kZeroBubbleH1;
  // F = B = W = 1 ms: every rank idles p - 1 = 1 ms.
  EXPECT_NEAR(evaluate_balance(hand_layers(), {2, 2}, o).step_time_s, 13e-3, 1e-9);
}

TEST(EvaluateBalance, TransfersAndChecks) {
  PlanOptions o = hand_options();
  o.bandwidth_bytes_per_s = 1e6;  // 1000 bytes: 1 ms
  const PartitionPlan plan = evaluate_balance(hand_layers(), {2, 2}, o);
  EXPECT_NEAR(plan.stages[0].transfer_s, 1e-3, 1e-12);
  EXPECT_NEAR(plan.stages[0].time_s, 4e-3, 1e-12);
  EXPECT_EQ(plan.stages[1].transfer_s, 0);
  EXPECT_GT(plan.step_time_s, 15e-3);
  EXPECT_WEFT_ERROR(evaluate_balance(hand_layers(), {2, 1}, o), "covers 3 of 4 layers");
  EXPECT_WEFT_ERROR(evaluate_balance(hand_layers(), {4}, o), "has 1 stages, the costs 2");
  EXPECT_WEFT_ERROR(evaluate_balance(hand_layers(), {0, 4}, o), "does not split 4 layers into non-empty stages");
}

TEST(PlanPartition, Methods) {
  PlanOptions o = hand_options();
  EXPECT_EQ(plan_partition(hand_layers(), o).balance, (std::vector<int>{2, 2}));
  o.method = BalanceMethod::kByTime;
  EXPECT_EQ(plan_partition(hand_layers(), o).balance, balance_by_time(hand_layers(), 2));
  o.method = BalanceMethod::kBySize;
  EXPECT_EQ(plan_partition(hand_layers(), o).balance, balance_by_size(hand_layers(), 2));
  o.method = BalanceMethod::kManual;
  EXPECT_WEFT_ERROR(plan_partition(hand_layers(), o), "manual placement needs a balance");
  o.balance = {1, 3};
  EXPECT_EQ(plan_partition(hand_layers(), o).balance, (std::vector<int>{1, 3}));
  o.method = BalanceMethod::kOptimal;
  EXPECT_WEFT_ERROR(plan_partition(hand_layers(), o), "a balance [1, 3] was given but the method is not kManual");
}

TEST(PlanPartition, BudgetErrors) {
  PlanOptions o = hand_options();
  o.memory_budget_bytes = 3 * kMiB + 1000;
  o.method = BalanceMethod::kManual;
  o.balance = {2, 2};
  EXPECT_WEFT_ERROR(plan_partition(hand_layers(), o),
                    "partition: stage 0 (layers 0-1 Linear ReLU) of balance [2, 2] needs 4.0 MiB at its peak (0.0 MiB "
                    "resident + 2 live micro-batches x 2.0 MiB), more than the memory budget of 3.0 MiB per device");
  // The optimal method moves layers to the stage with fewer live micro-batches.
  o.method = BalanceMethod::kOptimal;
  o.balance.clear();
  EXPECT_EQ(plan_partition(hand_layers(), o).balance, (std::vector<int>{1, 3}));
  // Every layer fits somewhere, but stage 0 holds one layer and stage 1 two.
  o.memory_budget_bytes = 2 * kMiB + 2000;
  EXPECT_WEFT_ERROR(plan_partition(hand_layers(), o), "partition: no balance of 4 layers over 2 stages fits");
}

TEST(PartitionTable, ExactText) {
  const PartitionPlan plan = evaluate_balance(hand_layers(), {2, 2}, hand_options());
  EXPECT_EQ(partition_table(hand_layers(), plan),
            "partition: 4 layers over 2 stages, 1f1b with 4 micro-batches, no memory budget\n"
            "stage  layers                  parameters  peak memory  time/micro-batch\n"
            "    0  0-1 Linear ReLU                100      4.0 MiB          3.000 ms\n"
            "    1  2-3 Linear head:Linear          60      2.0 MiB          3.000 ms\n"
            "predicted step time 15.000 ms, bubble 20.0% (bottleneck 3.000 ms per micro-batch)\n");
}

TEST(PartitionTable, LongStagesAndBudget) {
  std::vector<LayerProfile> layers;
  for (int k = 0; k < 6; ++k) layers.push_back(make(std::to_string(k), k == 5 ? "LayerNorm" : "Block", 1, 1000));
  PlanOptions o;
  o.stages = 2;
  o.microbatches = 2;
  o.schedule = pipe::ScheduleKind::kGPipe;
  o.memory_budget_bytes = 64 * kMiB;
  const PartitionPlan plan = plan_partition(layers, o);
  EXPECT_EQ(plan.balance, (std::vector<int>{3, 3}));
  const std::string table = partition_table(layers, evaluate_balance(layers, {1, 5}, o));
  EXPECT_NE(table.find("gpipe with 2 micro-batches, memory budget 64.0 MiB per device\n"), std::string::npos) << table;
  EXPECT_NE(table.find("    0  0 Block  "), std::string::npos) << table;
  EXPECT_NE(table.find("    1  1-5 Block Block ... LayerNorm  "), std::string::npos) << table;
}

TEST(PrintPartitionTable, OnlyRankZero) {
  const PartitionPlan plan = evaluate_balance(hand_layers(), {2, 2}, hand_options());
  std::mutex mu;
  std::vector<std::string> printed(3);
  run_ranks(3, [&](std::shared_ptr<ProcessGroup> group) {
    std::ostringstream os;
    print_partition_table(hand_layers(), plan, *group, os);
    std::lock_guard<std::mutex> lock(mu);
    printed[group->rank()] = os.str();
  });
  EXPECT_EQ(printed[0], partition_table(hand_layers(), plan));
  EXPECT_EQ(printed[1], "");
  EXPECT_EQ(printed[2], "");
}

}  // namespace
}  // namespace weft::parallel::partition
