// The plan search and the data-parallel reduction in plans (Note [gradient
// reduction]): hand-computed step times with ReduceGrad included, the choice
// it changes, the table line, and measure_allreduce on in-process ranks.
#include "parallel/partition/search.h"

#include <gtest/gtest.h>

#include "parallel/comm/inproc/testing.h"
#include "parallel/partition/comm_cost.h"
#include "tests/testing.h"

namespace weft::parallel::partition {
namespace {

LayerProfile layer(double fwd_s, double bwd_s, int64_t grad_bytes) {
  LayerProfile l;
  l.name = "l";
  l.type = "Linear";
  l.forward_s = fwd_s;
  l.backward_s = bwd_s;
  l.num_parameters = grad_bytes / 4;
  l.param_bytes = l.grad_bytes = grad_bytes;
  return l;
}

// 1F1B, two stages of one layer each (F 1, B 2), one micro-batch, reductions
// of 100 / 100 = 1 and 300 / 100 = 3:
//   rank 1: F [1,2] B [2,4] Reduce1 [4,7];  rank 0: F [0,1] B [4,6] Reduce0 [6,7].
// Step 7 (6 without the reduction); busy 3 per rank, bubble 1 - 6 / 14.
TEST(PlanWithReduction, StepTimeIncludesTheGradientAverage) {
  const std::vector<LayerProfile> layers{layer(1, 2, 100), layer(1, 2, 300)};
  BalanceOptions o;
  o.stages = 2;
  o.microbatches = 1;
  o.schedule = pipe::ScheduleKind::k1F1B;
  EXPECT_DOUBLE_EQ(evaluate_balance(layers, {1, 1}, o).step_time_s, 6);
  o.replicas = 2;
  o.allreduce = {.latency_s = 0, .bytes_per_s = 100};
  const PartitionPlan plan = evaluate_balance(layers, {1, 1}, o);
  EXPECT_DOUBLE_EQ(plan.stages[0].reduce_s, 1);
  EXPECT_DOUBLE_EQ(plan.stages[1].reduce_s, 3);
  EXPECT_DOUBLE_EQ(plan.step_time_s, 7);
  EXPECT_NEAR(plan.bubble_fraction, 1 - 6.0 / 14, 1e-12);
  const std::string table = partition_table(layers, plan);
  EXPECT_NE(table.find("data-parallel gradient average per step: stage 0 1000.000 ms, stage 1 3000.000 ms"),
            std::string::npos)
      << table;
  o.replicas = 1;  // one replica: nothing to average, whatever the cost
  EXPECT_DOUBLE_EQ(evaluate_balance(layers, {1, 1}, o).step_time_s, 6);
}

TEST(PlanWithReduction, LatencyIsChargedPerStage) {
  const std::vector<LayerProfile> layers{layer(1, 2, 0), layer(1, 2, 0)};
  BalanceOptions o;
  o.stages = 2;
  o.replicas = 4;
  o.allreduce = {.latency_s = 0.5, .bytes_per_s = 0};
  const PartitionPlan plan = evaluate_balance(layers, {1, 1}, o);
  EXPECT_DOUBLE_EQ(plan.stages[0].reduce_s, 0.5);
  EXPECT_DOUBLE_EQ(plan.step_time_s, 6.5);  // rank 0's B ends at 6, its reduction at 6.5
}

TEST(ChoosePlan, ScaledProfileAndFastestCandidate) {
  const std::vector<LayerProfile> layers{layer(1, 2, 100), layer(1, 2, 100)};
  const auto half = scaled(layers, 0.5);
  EXPECT_DOUBLE_EQ(half[0].forward_s, 0.5);
  EXPECT_EQ(half[0].grad_bytes, 100);  // gradients do not scale with rows
  SearchOptions s;
  s.plan.stages = 2;
  s.schedules = {pipe::ScheduleKind::kGPipe, pipe::ScheduleKind::k1F1B};
  s.chunks = {1, 2, 4};
  s.profiled_chunks = 1;
  const SearchResult r = choose_plan(layers, s);
  // Equal stages and no transfer: (m + p - 1) (F + B) / m shrinks with m; gpipe and 1f1b tie, gpipe comes first.
  EXPECT_EQ(r.chunks, 4);
  EXPECT_EQ(r.schedule, pipe::ScheduleKind::kGPipe);
  EXPECT_DOUBLE_EQ(r.plan.step_time_s, 5 * 0.75);
  EXPECT_DOUBLE_EQ(r.layers[0].forward_s, 0.25);
}

// With a large per-stage latency the step grows by it whatever m is, and the
// last stage's reduction overlaps rank 0's drain: still 4 chunks, step longer.
TEST(ChoosePlan, ReductionCostEntersTheChoice) {
  const std::vector<LayerProfile> layers{layer(1, 2, 100), layer(1, 2, 100)};
  SearchOptions s;
  s.plan.stages = 2;
  s.schedules = {pipe::ScheduleKind::k1F1B};
  s.chunks = {4};
  const double without = choose_plan(layers, s).plan.step_time_s;
  s.plan.replicas = 2;
  s.plan.allreduce = {.latency_s = 10, .bytes_per_s = 0};
  EXPECT_DOUBLE_EQ(choose_plan(layers, s).plan.step_time_s, without + 10);
  s.chunks = {0};
  EXPECT_WEFT_ERROR(choose_plan(layers, s), "micro-batch counts must be positive");
}

TEST(MeasureAllreduce, SameFitOnEveryRankAndNothingForOneRank) {
  run_ranks(3, [](std::shared_ptr<ProcessGroup> g) {
    const AllreduceCost c = measure_allreduce(*g, 1 << 16, 2);
    EXPECT_GT(c.latency_s, 0);
    EXPECT_GE(c.bytes_per_s, 0);
    Tensor t = zeros({2}, DType::Float64);
    t.data_ptr<double>()[0] = c.latency_s;
    t.data_ptr<double>()[1] = c.bytes_per_s;
    Tensor mx = t.clone();
    g->allreduce(mx, {ReduceOp::Max})->wait();
    EXPECT_TRUE(testing::tensors_near(t, mx, 0)) << "rank " << g->rank();
    const AllreduceCost b = broadcast_cost({.latency_s = 1.0 * g->rank(), .bytes_per_s = 2}, *g, 2);
    EXPECT_DOUBLE_EQ(b.latency_s, 2.0);
  });
  run_ranks(1, [](std::shared_ptr<ProcessGroup> g) {
    const AllreduceCost c = measure_allreduce(*g);
    EXPECT_EQ(c.latency_s, 0);
    EXPECT_EQ(c.bytes_per_s, 0);
  });
}

}  // namespace
}  // namespace weft::parallel::partition
