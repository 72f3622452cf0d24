// DistributedModel transparency with ranks as threads (//parallel:inproc):
// for grids pp x dp = 1x2, 2x1, 2x2, 4x1 and 1x4, several steps of SGD
// (momentum) and AdamW on a replica's share of each global batch give the
// single-process run's losses and parameters on the whole global batch within
// 1e-5; also with backward_passes_per_step 2, with the allreduce after the
// schedule instead of overlapped, with zb-h1 and interleaved schedules, and
// with micro-batch averaging off and a summed loss. Replicas other than the
// first start from other weights: partitioning broadcasts data-parallel rank
// 0's. Errors: a grid that does not tile the world, local_*() before
// partitioning.
#include "parallel/hybrid/distributed_model.h"

#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/nn_ops.h"
#include "core/ops.h"
#include "core/rng.h"
#include "nn/nn.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "parallel/inproc/process_group_inproc.h"
#include "tests/parallel/hybrid/dm_cases.h"
#include "tests/testing.h"

namespace weft::parallel::hybrid {
namespace {

using namespace testcases;  // NOLINT

void check(const Case& c, int steps = 4) {
  SCOPED_TRACE(describe(c));
  const int world = c.pp * c.dp;
  const Reference ref = reference(c, steps);
  std::vector<std::shared_ptr<nn::Sequential>> models;
  for (int r = 0; r < world; ++r) models.push_back(rank_model(c, r));
  std::vector<std::map<std::string, Tensor>> got(world);
  run_ranks(world, [&](std::shared_ptr<ProcessGroup> g) { got[g->rank()] = train_rank(c, ref, models[g->rank()], g); });
  for (int r = 0; r < world; ++r) compare(ref, got[r], r);
}

TEST(DistributedModel, GridsEqualOneProcessSgd) {
  for (auto [pp, dp] : std::vector<std::pair<int, int>>{{1, 2}, {2, 1}, {2, 2}, {4, 1}, {1, 4}}) check({pp, dp});
}

TEST(DistributedModel, GridsEqualOneProcessAdamW) {
  for (auto [pp, dp] : std::vector<std::pair<int, int>>{{2, 2}, {1, 4}, {4, 1}}) check({pp, dp, Opt::kAdamW});
}

TEST(DistributedModel, BackwardPassesPerStepTwo) {
  Case c{2, 2};
  c.passes = 2;
  check(c);
  c.overlap = false;
  check(c);
}

TEST(DistributedModel, AllreduceAfterTheScheduleZeroBubbleAndInterleaved) {
  Case c{2, 2};
  c.overlap = false;
  check(c);
  Case zb{2, 2};
  zb.schedule = pipe::ScheduleKind::kZeroBubbleH1;
  check(zb);
  Case il{2, 2};
  il.schedule = pipe::ScheduleKind::kInterleaved1F1B;
  il.virtual_stages = 2;
  check(il);
}

TEST(DistributedModel, SummedLossWithoutMicrobatchAveraging) {
  Case c{2, 2};
  c.average = false;
  check(c);
}

TEST(DistributedModel, Errors) {
  EXPECT_WEFT_ERROR(run_ranks(4,
                              [&](std::shared_ptr<ProcessGroup> g) {
                                DistributedModelOptions o;
                                o.pp = 3;
                                DistributedModel dm(make_mlp(1), g, o);
                              }),
                    "make_grid: pp 3 does not divide the world size 4");
  EXPECT_WEFT_ERROR(run_ranks(4,
                              [&](std::shared_ptr<ProcessGroup> g) {
                                DistributedModelOptions o;
                                o.pp = 2;
                                o.dp = 3;
                                DistributedModel dm(make_mlp(1), g, o);
                              }),
                    "make_grid: pp 2 x dp 3 = 6 ranks, but the world has 4");
  run_ranks(2, [&](std::shared_ptr<ProcessGroup> g) {
    DistributedModelOptions o;
    o.pp = 2;
    o.auto_partition = false;
    DistributedModel dm(make_mlp(1), g, o);
    EXPECT_FALSE(dm.partitioned());
    EXPECT_WEFT_ERROR(dm.local_parameters(), "DistributedModel::local_parameters: the model is not partitioned yet");
    dm.partition();
    EXPECT_TRUE(dm.partitioned());
    EXPECT_EQ(dm.balance(), (std::vector<int>{4, 4}));
    EXPECT_EQ(dm.local_named_parameters().front().first, g->rank() == 0 ? "0.weight" : "4.weight");
  });
}

// Automatic partitioning: every rank gets the plan computed from rank 0's
// measured profile (the same balance everywhere, equal to plan_partition on
// that profile); with auto_schedule and no budget the simulator's fastest is
// zb-h1 with the most micro-batches; a budget nothing fits names each
// candidate; factories need a balance.
TEST(DistributedModel, AutomaticPartitioningAndScheduleChoice) {
  const int world = 4;
  std::vector<std::vector<int>> balances(world);
  std::vector<std::string> schedules(world), tables(world);
  std::vector<int> chunks(world);
  std::vector<std::shared_ptr<nn::Sequential>> models;
  for (int r = 0; r < world; ++r) models.push_back(make_mlp(5));
  manual_seed(3);
  Tensor x = randn({16, kIn});
  run_ranks(world, [&](std::shared_ptr<ProcessGroup> g) {
    const int r = g->rank();
    DistributedModelOptions o;
    o.pp = 4;
    o.pipe.chunks = 2;
    o.auto_schedule = true;
    o.auto_chunks = {1, 2, 4};
    std::ostringstream table;
    o.table = &table;
    DistributedModel dm(models[r], g, o);
    dm.partition(r == 0 ? x : Tensor());
    balances[r] = dm.balance();
    schedules[r] = dm.pipe().schedule().name;
    chunks[r] = dm.pipe().schedule().num_microbatches;
    tables[r] = table.str();
    ASSERT_EQ(dm.profile().size(), 8u);
    partition::PlanOptions po;
    po.stages = 4;
    po.microbatches = 4;
    po.schedule = pipe::ScheduleKind::kZeroBubbleH1;
    std::vector<partition::LayerProfile> at4 = dm.profile();
    for (auto& l : at4) l.forward_s /= 2, l.backward_s /= 2, l.activation_bytes /= 2, l.output_bytes /= 2;
    EXPECT_EQ(dm.balance(), partition::plan_partition(at4, po).balance);
  });
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(balances[r], balances[0]);
    EXPECT_EQ(schedules[r], "zb-h1");
    EXPECT_EQ(chunks[r], 4);
    EXPECT_EQ(tables[r].empty(), r != 0);
  }
  EXPECT_NE(tables[0].find("partition: 8 layers over 4 stages, zb-h1 with 4 micro-batches"), std::string::npos)
      << tables[0];
  EXPECT_WEFT_ERROR(run_ranks(2,
                              [&](std::shared_ptr<ProcessGroup> g) {
                                DistributedModelOptions o;
                                o.pp = 2;
                                o.auto_schedule = true;
                                o.memory_budget_bytes = 1;
                                o.print_table = false;
                                DistributedModel dm(make_mlp(5), g, o);
                                dm.partition(g->rank() == 0 ? x : Tensor());
                              }),
                    "no schedule and micro-batch count fits:\n  gpipe with 1 micro-batches: ");
  EXPECT_WEFT_ERROR(run_ranks(2,
                              [&](std::shared_ptr<ProcessGroup> g) {
                                DistributedModelOptions o;
                                o.pp = 2;
                                std::vector<pipe::LayerFactory> f(4, [] { return std::make_shared<nn::Tanh>(); });
                                DistributedModel dm(f, g, o);
                                dm.partition(x);
                              }),
                    "with layer factories give options.balance");
}

}  // namespace
}  // namespace weft::parallel::hybrid
