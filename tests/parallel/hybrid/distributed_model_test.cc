// DistributedModel transparency with ranks as threads (//parallel/comm/inproc):
// for grids pp x dp = 1x2, 2x1, 2x2, 4x1 and 1x4, several steps of SGD
// (momentum) and AdamW on a replica's share of each global batch give the
// single-process run's losses and parameters on the whole global batch within
// 1e-5; also with backward_passes_per_step 2, with the allreduce after the
// schedule instead of overlapped, with zb-h1 and interleaved schedules, zbv
// and interleaved-zb (two stages per rank; even and measured balances, with
// and without ZeRO-1), and with micro-batch averaging off and a summed
// loss. Replicas other than the
// first start from other weights: partitioning broadcasts data-parallel rank
// 0's. Errors: a grid that does not tile the world, local_*() before
// partitioning.
#include "parallel/hybrid/distributed_model.h"

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/autograd_meta.h"
#include "core/nn_ops.h"
#include "core/ops.h"
#include "core/rng.h"
#include "nn/nn.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "parallel/comm/inproc/testing.h"
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
  std::vector<RankResult> got(world);
  run_ranks(world, [&](std::shared_ptr<ProcessGroup> g) { got[g->rank()] = train_rank(c, ref, models[g->rank()], g); });
  // With 8 layers on 8 looped stages ranks 1 and 3 hold only Tanh layers.
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

// The V-placed zbv (rank r holds stages r and 2 pp - 1 - r, the first and
// the last on rank 0) and the looped interleaved-zb, two stages per rank,
// with and without ZeRO-1, split evenly by layer count and measured.
TEST(DistributedModel, ZeroBubbleVAndInterleavedZeroBubble) {
  for (pipe::ScheduleKind kind : {pipe::ScheduleKind::kZeroBubbleV, pipe::ScheduleKind::kInterleavedZeroBubble})
    for (auto [pp, dp] : std::vector<std::pair<int, int>>{{2, 2}, {4, 1}})
      for (bool zero : {false, true}) {
        Case c{pp, dp};
        c.schedule = kind;
        c.virtual_stages = 2;
        c.zero = zero;
        check(c);
      }
  for (pipe::ScheduleKind kind : {pipe::ScheduleKind::kZeroBubbleV, pipe::ScheduleKind::kInterleavedZeroBubble,
                                  pipe::ScheduleKind::kInterleaved1F1B}) {
    Case c{2, 2, Opt::kAdamW};
    c.schedule = kind;
    c.virtual_stages = 2;
    c.measured = true;
    check(c);
  }
}

// Note [gradient reduction]: a split schedule whose last micro-batch is
// checkpointed computes that micro-batch's parameter gradients in B, leaving
// its W none; the ReduceGrad still averages them (and every step's B runs
// with the reducer off).
TEST(DistributedModel, ZeroBubbleWithEveryMicroBatchCheckpointed) {
  Case zb{2, 2};
  zb.schedule = pipe::ScheduleKind::kZeroBubbleH1;
  zb.checkpoint = pipe::CheckpointMode::kAlways;
  check(zb);
  zb.checkpoint = pipe::CheckpointMode::kNever;
  check(zb);
}

TEST(DistributedModel, SummedLossWithoutMicrobatchAveraging) {
  Case c{2, 2};
  c.average = false;
  check(c);
}

TEST(DistributedModel, ZeroOneEqualsOneProcess) {
  for (auto [pp, dp] : std::vector<std::pair<int, int>>{{2, 2}, {1, 4}, {1, 3}}) {
    Case c{pp, dp};
    c.zero = true;
    check(c);
    c.opt = Opt::kAdamW;
    check(c);
  }
  Case acc{2, 2, Opt::kAdamW};
  acc.zero = true;
  acc.passes = 2;
  check(acc);
}

// A state saved on one grid (with or without ZeRO) resumes on another: the
// whole model's and optimizer's gathered states after 3 steps, loaded into
// freshly built models (other weights) on the new grid, continue equal to the
// uninterrupted one-process run.
TEST(DistributedModel, StateDictsReshardAcrossGridsAndZero) {
  struct Move {
    Case from, to;
  };
  Case z22{2, 2, Opt::kAdamW}, p41{4, 1, Opt::kAdamW}, z14{1, 4, Opt::kAdamW}, p11{1, 1, Opt::kAdamW};
  z22.zero = z14.zero = true;
  for (const Move& m : {Move{z22, p41}, Move{p41, z14}, Move{z14, p11}, Move{p11, z22}}) {
    SCOPED_TRACE(describe(m.from) + " -> " + describe(m.to));
    const int steps = 5, cut = 3;
    const Reference ref_from = reference(m.from, steps), ref_to = reference(m.to, steps);
    // Both grids see the same global batches only when dp agrees; compare each against its own reference.
    const Reference ref_cut = reference(m.from, cut);
    std::vector<RankResult> saved(m.from.pp * m.from.dp);
    std::vector<std::shared_ptr<nn::Sequential>> models;
    for (int r = 0; r < m.from.pp * m.from.dp; ++r) models.push_back(rank_model(m.from, r));
    run_ranks(m.from.pp * m.from.dp, [&](std::shared_ptr<ProcessGroup> g) {
      saved[g->rank()] = train_rank(m.from, ref_cut, models[g->rank()], g);
    });
    // A measured balance may leave a stage of pp 4 with only a Tanh (no parameter): every parameter must
    // still live on some rank, equal to the reference's.
    std::set<std::string> held;
    for (size_t r = 0; r < saved.size(); ++r) {
      compare(ref_cut, saved[r], static_cast<int>(r));
      for (const auto& [n, t] : saved[r].params) held.insert(n);
    }
    EXPECT_EQ(held.size(), ref_cut.params.size());
    // Resume on the new grid from rank 0's gathered state, against a reference that switches batches at `cut`.
    Reference mixed = ref_to;
    for (int k = 0; k < cut; ++k) {
      mixed.xs[k] = ref_from.xs[k];
      mixed.ys[k] = ref_from.ys[k];
    }
    {
      // The one-process run over the mixed batches (the grids' dp differ, so their global batches do).
      auto model = make_mlp(5);
      auto opt = make_opt(m.to.opt, model->named_parameters());
      for (int k = 0; k < steps; ++k) {
        opt->zero_grad();
        Tensor l = case_loss(m.to, model->forward(mixed.xs[k]), mixed.ys[k]);
        l.backward();
        mixed.loss[k] = l.item<double>();
        opt->step();
      }
      for (auto& [n, p] : model->named_parameters()) mixed.params[n] = p.detach();
      mixed.model_state = model->state_dict();
      mixed.opt_state = opt->state_dict_by_name();
    }
    std::vector<RankResult> resumed(m.to.pp * m.to.dp);
    std::vector<std::shared_ptr<nn::Sequential>> fresh;
    for (int r = 0; r < m.to.pp * m.to.dp; ++r) fresh.push_back(make_mlp(1000 + r));
    run_ranks(m.to.pp * m.to.dp, [&](std::shared_ptr<ProcessGroup> g) {
      resumed[g->rank()] = train_rank(m.to, mixed, fresh[g->rank()], g, cut, &saved[0]);
    });
    std::set<std::string> resumed_held;
    for (size_t r = 0; r < resumed.size(); ++r) {
      compare(mixed, resumed[r], static_cast<int>(r));
      for (const auto& [n, t] : resumed[r].params) resumed_held.insert(n);
    }
    EXPECT_EQ(resumed_held.size(), mixed.params.size());
  }
}

TEST(DistributedModel, ZeroDividesOptimizerStateByDp) {
  Case c{1, 4, Opt::kAdamW};
  c.zero = true;
  const Reference ref = reference(c, 1);
  std::vector<RankResult> got(4);
  std::vector<std::shared_ptr<nn::Sequential>> models;
  for (int r = 0; r < 4; ++r) models.push_back(rank_model(c, r));
  run_ranks(4, [&](std::shared_ptr<ProcessGroup> g) { got[g->rank()] = train_rank(c, ref, models[g->rank()], g); });
  // 6*10+10 + 10*10+10 + 10*10+10 + 10*3+3 = 323 parameters, padded to 324: 81 per rank, AdamW's two moments in
  // float32 (2 * 81 * 4 bytes) plus a step count.
  EXPECT_NE(got[0].memory.find("(0.0025 MiB unsharded, dp 4)"), std::string::npos) << got[0].memory;
  EXPECT_NE(got[0].memory.find("optimizer state: 0.0006 MiB per rank"), std::string::npos) << got[0].memory;
}

// Placement scopes (smp.partition): children built inside PlacementScope(i)
// go to stage i, the innermost scope wins, unplaced children follow the one
// before; the outputs kept on the last stage equal the whole model's.
TEST(DistributedModel, PlacementScopesGiveTheBalanceAndOutputsAreKept) {
  auto build = [](const std::vector<int>& stage_of_pair) {
    manual_seed(5);
    auto m = std::make_shared<nn::Sequential>();
    for (size_t i = 0; i < stage_of_pair.size(); ++i) {
      std::optional<nn::PlacementScope> outer;
      if (stage_of_pair[i] >= 0) outer.emplace(stage_of_pair[i]);
      m->push_back(
          std::make_shared<nn::Linear>(i == 0 ? kIn : kHidden, i + 1 == stage_of_pair.size() ? kOut : kHidden));
      {
        nn::PlacementScope inner(stage_of_pair[i] >= 0 ? stage_of_pair[i] : 0);  // innermost wins
        if (stage_of_pair[i] < 0) continue;  // (this Tanh would be placed; skip it to leave the next unplaced)
      }
      m->push_back(std::make_shared<nn::Tanh>());
    }
    return m;
  };
  EXPECT_EQ(nn::PlacementScope::current(), -1);
  {
    nn::PlacementScope a(1);
    {
      nn::PlacementScope b(0);
      EXPECT_EQ(nn::Tanh().placement(), 0);
    }
    EXPECT_EQ(nn::Tanh().placement(), 1);
  }
  EXPECT_EQ(nn::Tanh().placement(), -1);
  manual_seed(8);
  Tensor x = randn({6, kIn}), y = randn({6, kOut});
  std::vector<std::vector<int>> balances(2);
  std::vector<Tensor> outputs(2);
  auto whole = build({0, 1, 1, 1});
  const Tensor want = whole->forward(x).detach();
  std::vector<std::shared_ptr<nn::Sequential>> models{build({0, 1, 1, 1}), build({0, 1, 1, 1})};
  run_ranks(2, [&](std::shared_ptr<ProcessGroup> g) {
    DistributedModelOptions o;
    o.pp = 2;
    o.keep_output = true;
    DistributedModel dm(models[g->rank()], g, o);
    dm.step(x, y, [](const Tensor& out, const Tensor& t) { return mse_loss(out, t); });
    balances[g->rank()] = dm.balance();
    outputs[g->rank()] = dm.last_output();
  });
  EXPECT_EQ(balances[0], (std::vector<int>{2, 6}));
  EXPECT_EQ(balances[1], balances[0]);
  EXPECT_FALSE(outputs[0].defined());
  ASSERT_TRUE(outputs[1].defined());
  EXPECT_TRUE(testing::tensors_near(outputs[1], want, 1e-6));
  // Unplaced children follow the one before: {0, unplaced Linear, 1, 1} -> layers 0-2 on stage 0.
  auto mixed = build({0, -1, 1, 1});
  auto partition_of = [&](std::shared_ptr<nn::Sequential> m, int pp) {
    std::vector<int> b;
    run_ranks(pp, [&](std::shared_ptr<ProcessGroup> g) {
      DistributedModelOptions o;
      o.pp = pp;
      DistributedModel dm(g->rank() == 0 ? m : build({0, -1, 1, 1}), g, o);
      dm.partition(x);
      if (g->rank() == 0) b = dm.balance();
    });
    return b;
  };
  EXPECT_EQ(partition_of(mixed, 2), (std::vector<int>{3, 4}));
  EXPECT_WEFT_ERROR(partition_of(build({1, 0, 1, 1}), 2),
                    "layer 2 ('2', Linear) is placed on stage 0 after a layer on stage 1");
  EXPECT_WEFT_ERROR(partition_of(build({0, 2, 2, 2}), 2), "is placed on stage 2 but the pipeline has 2 stages");
  EXPECT_WEFT_ERROR(partition_of(build({0, 0, 0, 0}), 2), "no layer is placed on stage 1 (placements give 8,0)");
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
    // A state dict lacking a key of this rank's stages is refused naming it; other stages' keys are returned.
    nn::StateDict sd = dm.state_dict();
    EXPECT_EQ(sd.size(), 8u);
    // As nn::Module::load_state_dict: the other stage's keys come back as unexpected.
    const nn::Module::LoadResult r = dm.load_state_dict(sd);
    EXPECT_TRUE(r.missing_keys.empty());
    std::vector<std::string> others;
    for (const auto& [k, v] : sd)
      if ((k[0] < '4') != (g->rank() == 0)) others.push_back(k);
    EXPECT_EQ(r.unexpected_keys, others);
    const std::string dropped = g->rank() == 0 ? "2.bias" : "6.bias";
    sd.erase(dropped);
    EXPECT_WEFT_ERROR(dm.load_state_dict(sd), "missing keys of this rank's stages: " + dropped);
    EXPECT_EQ(dm.load_state_dict(sd, /*strict=*/false).missing_keys, std::vector<std::string>{dropped});
    sd = dm.state_dict();
    sd.insert("0.weight", zeros({3, 3}));
    if (g->rank() == 0) {
      EXPECT_WEFT_ERROR(dm.load_state_dict(sd), "0.weight");
    }
  });
}

// gather_whole_model() (collective) gathers every stage's state into the Sequential given, on every rank; this
// rank's layers are its stages themselves (trained in place), the others hold copies of the other rank's weights.
TEST(DistributedModel, GatherWholeModelHoldsEveryStagesStateOnEveryRank) {
  run_ranks(2, [&](std::shared_ptr<ProcessGroup> g) {
    DistributedModelOptions o;
    o.pp = 2;
    o.auto_partition = false;
    DistributedModel dm(make_mlp(1), g, o);
    dm.partition();
    NoGradGuard ng;
    for (Tensor p : dm.local_parameters()) p.fill_(1.0 + g->rank());  // each stage's own values
    const nn::StateDict all = dm.state_dict();
    std::shared_ptr<nn::Sequential> whole = dm.gather_whole_model();
    ASSERT_EQ(whole->state_dict().size(), all.size());
    for (const auto& [k, v] : whole->state_dict()) EXPECT_TRUE(testing::tensors_near(v, *all.find(k), 0)) << k;
    for (const auto& [k, v] : whole->named_parameters())
      EXPECT_EQ(v.data_ptr<float>()[0], k[0] < '4' ? 1.0f : 2.0f) << k;
    // This rank's stage layers are the whole model's layers (the same modules).
    const auto& stage = *dm.local_modules().front();
    EXPECT_EQ(stage.named_parameters().front().second.data_ptr<float>(),
              whole->named_parameters()[g->rank() == 0 ? 0 : 4].second.data_ptr<float>());
  });
}

// Automatic partitioning: every rank gets the plan computed from rank 0's
// measured profile (the same balance everywhere, equal to plan_partition on
// that profile); with auto_schedule over the one-stage schedules, no
// budget and no checkpointing the simulator's fastest is zb-h1 with the most
// micro-batches; a
// budget nothing fits names each candidate; factories need a balance. (The
// six schedules: stages_per_rank_test.)
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
    o.pipe.checkpoint = pipe::CheckpointMode::kNever;  // (checkpointed, a split B recomputes W: no zero bubble)
    o.auto_schedule = true;
    o.auto_schedules = {pipe::ScheduleKind::kGPipe, pipe::ScheduleKind::k1F1B, pipe::ScheduleKind::kZeroBubbleH1};
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
