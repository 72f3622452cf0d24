// DistributedModel with several stages per rank (zbv's V, interleaved-zb),
// ranks as threads: tied weights (a small language model whose head uses the
// embedding's weight, parallel/pipe tied_lm.h) under pp x dp equal one
// process with a true tie, with and without ZeRO-1, whether the two members
// sit on one rank (zbv: stages 0 and 2 pp - 1 on rank 0; each rank's model
// with its own copy, or a true tie inside the rank) or on two (interleaved-zb);
// automatic partitioning with two stages per rank (the plan the partition
// package computes from the measured profile, rank 0 holding stages 0 and 3
// under zbv); auto_schedule over the six schedules; a plan with two stages
// per rank given beforehand; the errors that remain.
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/nn_ops.h"
#include "core/ops.h"
#include "core/rng.h"
#include "optim/sgd.h"
#include "parallel/comm/inproc/testing.h"
#include "parallel/hybrid/distributed_model.h"
#include "parallel/hybrid/distributed_optimizer.h"
#include "parallel/partition/search.h"
#include "tests/parallel/hybrid/dm_cases.h"
#include "tests/parallel/pipe/tied_lm.h"
#include "tests/testing.h"

namespace weft::parallel::hybrid {
namespace {

using pipe::ScheduleKind;

Tensor mse(const Tensor& out, const Tensor& target) { return mse_loss(out, target); }

struct TiedCase {
  ScheduleKind kind;
  int pp, dp;
  bool zero = false;
  bool shared = false;  // each rank's model ties its head to its embedding's own tensor
};

// Three SGD steps on replicas' shares of global batches of 6 rows per replica
// against one process on the global batches with a true tie.
void check_tied(const TiedCase& c) {
  SCOPED_TRACE(pipe::schedule_name(c.kind) + " pp " + std::to_string(c.pp) + " x dp " + std::to_string(c.dp) +
               (c.zero ? " zero" : "") + (c.shared ? " shared" : " copies"));
  constexpr int64_t kRows = 6;
  const int steps = 3, world = c.pp * c.dp;
  manual_seed(11);
  std::vector<Tensor> xs, ys;
  for (int k = 0; k < steps; ++k) {
    xs.push_back(pipe::tokens(kRows * c.dp));
    ys.push_back(randn({kRows * c.dp, pipe::kSeq, pipe::kVocab}));
  }
  auto ref = pipe::make_lm(/*shared=*/true);
  optim::SGD ref_opt(ref->parameters(), {0.2, 0.5});
  std::vector<double> ref_loss;
  for (int k = 0; k < steps; ++k) {
    ref->zero_grad();
    Tensor l = mse(ref->forward(xs[k]), ys[k]);
    l.backward();
    ref_loss.push_back(l.item<double>());
    ref_opt.step();
  }
  std::map<std::string, Tensor> want;
  for (auto& [n, p] : ref->named_parameters()) want[n] = p.detach();
  want["7.weight"] = want["0.weight"];

  std::vector<std::shared_ptr<nn::Sequential>> models;  // replicas past the first start elsewhere
  for (int r = 0; r < world; ++r) models.push_back(pipe::make_lm(c.shared, r < c.pp ? 3 : 50 + r));
  std::vector<std::vector<std::pair<std::string, Tensor>>> got(world);
  std::vector<std::vector<int>> stage_ids(world);
  run_ranks(world, [&](std::shared_ptr<ProcessGroup> g) {
    const int r = g->rank();
    DistributedModelOptions o;
    o.pp = c.pp;
    o.pipe.chunks = 2;
    o.pipe.schedule = c.kind;
    o.pipe.virtual_stages = 2;
    o.pipe.tied = pipe::kTied;
    o.shard_optimizer_state = c.zero;
    o.auto_partition = false;
    DistributedModel dm(models[r], g, o);
    DistributedOptimizer opt(dm, [](const optim::NamedParameters& p) {
      return std::make_unique<optim::SGD>(p, optim::SGDOptions{0.2, 0.5});
    });
    for (int k = 0; k < steps; ++k) {
      const int d = dm.dp_rank();
      opt.zero_grad();
      const double loss = dm.step(xs[k].narrow(0, d * kRows, kRows), ys[k].narrow(0, d * kRows, kRows), mse);
      EXPECT_NEAR(loss, ref_loss[k], 1e-5) << "rank " << r << " step " << k;
      opt.step();
    }
    stage_ids[r] = dm.pipe().stage_ids();
    for (const auto& part : dm.local_modules())
      for (auto& [n, p] : part->named_parameters()) got[r].emplace_back(n, p.detach());
  });
  int tied_seen = 0;
  for (int r = 0; r < world; ++r)
    for (const auto& [n, t] : got[r]) {
      EXPECT_TRUE(testing::tensors_near(t, want.at(n), 1e-5)) << n << " on rank " << r;
      tied_seen += n == "0.weight" || n == "7.weight";
    }
  EXPECT_EQ(tied_seen, 2 * c.dp);
  if (c.kind == ScheduleKind::kZeroBubbleV) {
    EXPECT_EQ(stage_ids[0], (std::vector<int>{0, 2 * c.pp - 1}));
  }
}

TEST(StagesPerRank, TiedWeightsEqualOneProcess) {
  // zbv: the embedding (stage 0) and the head (stage 2 pp - 1) both on rank 0.
  for (const TiedCase& c :
       {TiedCase{ScheduleKind::kZeroBubbleV, 2, 2}, TiedCase{ScheduleKind::kZeroBubbleV, 2, 2, true},
        TiedCase{ScheduleKind::kZeroBubbleV, 2, 2, false, true}, TiedCase{ScheduleKind::kZeroBubbleV, 2, 2, true, true},
        TiedCase{ScheduleKind::kZeroBubbleV, 4, 1}})
    check_tied(c);
  // interleaved-zb: the embedding on rank 0, the head (stage 3) on rank 1.
  check_tied({ScheduleKind::kInterleavedZeroBubble, 2, 2});
  check_tied({ScheduleKind::kInterleavedZeroBubble, 2, 2, true});
}

// Automatic partitioning with two stages per rank: the partition package's
// plan for the measured profile (zbv's placement), rank 0 holding stages 0
// and 3, each stage the slice of the balance at its index.
TEST(StagesPerRank, AutomaticPartitioningPlacesTwoStagesPerRank) {
  using testcases::make_mlp;
  std::vector<std::shared_ptr<nn::Sequential>> models{make_mlp(5), make_mlp(5)};
  manual_seed(3);
  Tensor x = randn({8, testcases::kIn});
  std::vector<std::vector<int>> balances(2), stages(2);
  std::vector<std::vector<std::string>> names(2);
  std::string table;
  run_ranks(2, [&](std::shared_ptr<ProcessGroup> g) {
    const int r = g->rank();
    DistributedModelOptions o;
    o.pp = 2;
    o.pipe.chunks = 2;
    o.pipe.schedule = ScheduleKind::kZeroBubbleV;
    o.pipe.virtual_stages = 2;
    std::ostringstream out;
    o.table = &out;
    DistributedModel dm(models[r], g, o);
    dm.partition(r == 0 ? x : Tensor());
    balances[r] = dm.balance();
    stages[r] = dm.pipe().stage_ids();
    for (const auto& [n, p] : dm.local_named_parameters()) names[r].push_back(n);
    partition::PlanOptions po;
    po.stages = 4;
    po.virtual_stages = 2;
    po.microbatches = 2;
    po.schedule = ScheduleKind::kZeroBubbleV;
    EXPECT_EQ(dm.balance(), partition::plan_partition(dm.profile(), po).balance);
    EXPECT_EQ(dm.plan().virtual_stages, 2);
    if (r == 0) table = out.str();
  });
  ASSERT_EQ(balances[0].size(), 4u);
  EXPECT_EQ(balances[1], balances[0]);
  EXPECT_EQ(stages[0], (std::vector<int>{0, 3}));
  EXPECT_EQ(stages[1], (std::vector<int>{1, 2}));
  // Rank 0's parameters: the first balance[0] layers' and the last balance[3] layers'.
  std::vector<int> bounds{0};
  for (int b : balances[0]) bounds.push_back(bounds.back() + b);
  for (const std::string& n : names[0]) {
    const int layer = std::stoi(n.substr(0, n.find('.')));
    EXPECT_TRUE(layer < bounds[1] || layer >= bounds[3]) << n;
  }
  EXPECT_NE(table.find("partition: 8 layers over 4 stages on 2 ranks (2 per rank), zbv with 2 micro-batches"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("stage  rank  layers"), std::string::npos) << table;
}

// auto_schedule weighs all six schedules: every rank runs the plan that
// choose_plan makes of the measured profile (schedule, stages per rank,
// micro-batches and balance), and the pipeline is built with it.
TEST(StagesPerRank, AutoScheduleChoosesAmongSixSchedules) {
  using testcases::make_mlp;
  EXPECT_EQ(auto_virtual_stages(ScheduleKind::kZeroBubbleV, 1), 2);
  EXPECT_EQ(auto_virtual_stages(ScheduleKind::kInterleaved1F1B, 1), 2);
  EXPECT_EQ(auto_virtual_stages(ScheduleKind::kInterleavedZeroBubble, 3), 3);
  EXPECT_EQ(auto_virtual_stages(ScheduleKind::kZeroBubbleH1, 3), 1);
  std::vector<std::shared_ptr<nn::Sequential>> models{make_mlp(5), make_mlp(5)};
  manual_seed(3);
  Tensor x = randn({8, testcases::kIn});
  std::vector<std::string> chosen(2);
  run_ranks(2, [&](std::shared_ptr<ProcessGroup> g) {
    const int r = g->rank();
    DistributedModelOptions o;
    o.pp = 2;
    o.pipe.chunks = 2;
    o.auto_schedule = true;
    o.auto_chunks = {2, 4};
    o.print_table = false;
    DistributedModel dm(models[r], g, o);
    dm.partition(r == 0 ? x : Tensor());
    partition::SearchOptions s;
    s.plan.stages = 2;
    s.plan.checkpoint = o.pipe.checkpoint;  // the runner's default, except_last, which the plan simulates
    s.schedules = {ScheduleKind::kGPipe,
                   ScheduleKind::k1F1B,
                   ScheduleKind::kZeroBubbleH1,
                   ScheduleKind::kInterleaved1F1B,
                   ScheduleKind::kInterleavedZeroBubble,
                   ScheduleKind::kZeroBubbleV};
    s.virtual_stages = {1, 1, 1, 2, 2, 2};
    s.chunks = {2, 4};
    s.profiled_chunks = 2;
    const partition::SearchResult want = partition::choose_plan(dm.profile(), s);
    const pipe::Schedule& sched = dm.pipe().schedule();
    EXPECT_EQ(sched.name, pipe::schedule_name(want.schedule));
    EXPECT_EQ(sched.virtual_stages, want.virtual_stages);
    EXPECT_EQ(sched.num_microbatches, want.chunks);
    EXPECT_EQ(dm.balance(), want.plan.balance);
    EXPECT_EQ(dm.balance().size(), 2u * want.virtual_stages);
    chosen[r] = sched.name + " v" + std::to_string(sched.virtual_stages);
  });
  EXPECT_EQ(chosen[0], chosen[1]);
}

// A plan with two stages per rank made beforehand runs as given, its stages per rank included.
TEST(StagesPerRank, APlanMadeBeforehandSetsTheStagesPerRank) {
  using testcases::make_mlp;
  std::vector<partition::LayerProfile> profile(8);
  for (auto& l : profile) l.forward_s = 1, l.backward_s = 2;
  partition::PlanOptions po;
  po.stages = 4;
  po.virtual_stages = 2;
  po.microbatches = 2;
  po.schedule = ScheduleKind::kZeroBubbleV;
  const partition::PartitionPlan plan = partition::plan_partition(profile, po);
  EXPECT_EQ(plan.balance, (std::vector<int>{2, 2, 2, 2}));
  run_ranks(2, [&](std::shared_ptr<ProcessGroup> g) {
    DistributedModelOptions o;
    o.pp = 2;
    o.plan = plan;
    DistributedModel dm(make_mlp(5), g, o);
    dm.partition();
    EXPECT_EQ(dm.pipe().schedule().name, "zbv");
    EXPECT_EQ(dm.pipe().options().virtual_stages, 2);
    EXPECT_EQ(dm.pipe().stage_ids(), g->rank() == 0 ? (std::vector<int>{0, 3}) : (std::vector<int>{1, 2}));
  });
}

TEST(StagesPerRank, WhatAutomaticPartitioningCannotPlanIsNamed) {
  using testcases::make_mlp;
  manual_seed(3);
  Tensor x = randn({8, testcases::kIn});
  EXPECT_WEFT_ERROR(run_ranks(2,
                              [&](std::shared_ptr<ProcessGroup> g) {
                                DistributedModelOptions o;
                                o.pp = 2;
                                o.pipe.user_schedule = pipe::make_schedule(ScheduleKind::k1F1B, 2, 1);
                                DistributedModel dm(make_mlp(5), g, o);
                                dm.partition(g->rank() == 0 ? x : Tensor());
                              }),
                    "with a user schedule (options.pipe.user_schedule, 1f1b) give options.balance");
}

}  // namespace
}  // namespace weft::parallel::hybrid
