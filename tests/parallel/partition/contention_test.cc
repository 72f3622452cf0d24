// Ranks that oversubscribe their cores (parallel/partition/contention.h): the
// pure shared-cores figure against hand-computed hosts, the speed protocol
// against a workload whose times are known, the model workload on a real
// Sequential, and the simulated plan with the speeds and with checkpointing.
#include "parallel/partition/contention.h"

#include <atomic>

#include <gtest/gtest.h>

#include "core/ops.h"
#include "core/rng.h"
#include "nn/nn.h"
#include "parallel/comm/inproc/testing.h"
#include "parallel/partition/plan.h"
#include "parallel/pipe/generators.h"
#include "parallel/pipe/simulate.h"
#include "tests/testing.h"

namespace weft::parallel::partition {
namespace {

RankCores rank_on(const std::string& host, long pid, std::vector<int> cpus, int threads) {
  return RankCores{host, pid, std::move(cpus), threads};
}

TEST(Contention, SharedCoresFromHostsAffinityAndThreads) {
  // 4 single-threaded processes on a 2-CPU host, pipelines of 2: each pipeline has 2 x 2 / 4 = 1 rank's worth.
  std::vector<RankCores> four;
  for (long p = 0; p < 4; ++p) four.push_back(rank_on("a", p, {0, 1}, 1));
  EXPECT_DOUBLE_EQ(shared_cores(four, 2), 1.0);
  EXPECT_DOUBLE_EQ(shared_cores(four, 4), 2.0);
  // 2 processes on 2 CPUs: nothing shared.
  EXPECT_DOUBLE_EQ(shared_cores({four[0], four[1]}, 2), 0.0);
  // The ranks of one in-process group are threads of one process: its pool counts once.
  std::vector<RankCores> threads(4, rank_on("a", 7, {0, 1}, 2));
  EXPECT_DOUBLE_EQ(shared_cores(threads, 2), 0.0);
  // Affinity masks bind each process to one CPU of the two: the union is still 2 CPUs for 4 threads of 2 each.
  std::vector<RankCores> bound{rank_on("a", 1, {0}, 2), rank_on("a", 2, {1}, 2)};
  EXPECT_DOUBLE_EQ(shared_cores(bound, 2), 1.0);
  // Two hosts: the most oversubscribed sets it (host b: 3 threads on 1 CPU).
  std::vector<RankCores> hosts{rank_on("a", 1, {0, 1}, 1), rank_on("a", 2, {0, 1}, 1), rank_on("b", 1, {0}, 1),
                               rank_on("b", 2, {0}, 2)};
  EXPECT_DOUBLE_EQ(shared_cores(hosts, 2), 2.0 / 3);
  EXPECT_WEFT_ERROR(shared_cores(four, 0), "shared_cores: pipeline_ranks must be positive, got 0");
  const RankCores me = local_rank_cores();
  EXPECT_FALSE(me.cpus.empty());
  EXPECT_GE(me.threads, 1);
}

// A workload that takes 1 s on world rank 0 and 2 s elsewhere (reported, not
// slept): alone = 1; k = 1 computes on ranks 0 and 2 of a 2 x 2 grid (mean
// 1.5), k = 2 on all four (mean 1.75).
TEST(Contention, SpeedsAreTheTimeAloneOverTheMeanOfTheComputingRanks) {
  std::vector<std::vector<double>> got(4);
  std::vector<int> runs(4, 0);
  run_ranks(4, [&](std::shared_ptr<ProcessGroup> g) {
    const int r = g->rank();
    Workload w = [&, r] {
      ++runs[r];
      return r == 0 ? 1.0 : 2.0;
    };
    got[r] = measure_compute_speeds(*g, r % 2, 2, w, 3);
  });
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(got[r].size(), 2u) << "rank " << r;
    EXPECT_DOUBLE_EQ(got[r][0], 1 / 1.5) << "rank " << r;
    EXPECT_DOUBLE_EQ(got[r][1], 1 / 1.75) << "rank " << r;
  }
  // Rank 0 runs in every phase (3 x 3), rank 2 in k = 1 and 2, ranks 1 and 3 in k = 2 only.
  EXPECT_EQ(runs, (std::vector<int>{9, 3, 6, 3}));
  EXPECT_WEFT_ERROR(
      run_ranks(1, [&](std::shared_ptr<ProcessGroup> g) { measure_compute_speeds(*g, 1, 1, [] { return 1.0; }); }),
      "measure_compute_speeds: pipeline rank 1 of 1");
}

// The model workload: every rank runs root's batch through the model (the
// others pass no sample), the parameters' gradients are untouched, and an
// in-process group (one process) needs no speeds at all.
TEST(Contention, ModelWorkloadRunsRootsBatchOnEveryRank) {
  std::vector<std::shared_ptr<nn::Sequential>> models;
  for (int r = 0; r < 2; ++r) {
    manual_seed(1);
    models.push_back(nn::Sequential::of(std::make_shared<nn::Linear>(8, 16), std::make_shared<nn::ReLU>(),
                                        std::make_shared<nn::Linear>(16, 4)));
  }
  manual_seed(2);
  const Tensor x = randn({5, 8});
  std::vector<double> secs(2, 0);
  std::vector<std::vector<double>> speeds(2, {9.0});
  run_ranks(2, [&](std::shared_ptr<ProcessGroup> g) {
    const int r = g->rank();
    Workload w = model_workload(*models[r], r == 0 ? x : Tensor(), *g, 0);
    secs[r] = w();
    for (const auto& p : models[r]->parameters()) EXPECT_FALSE(p.grad().defined());
    speeds[r] = plan_compute_speeds(*g, r, 2, [&] { return model_workload(*models[r], x, *g, 0); });
  });
  EXPECT_GT(secs[0], 0);
  EXPECT_GT(secs[1], 0);
  EXPECT_TRUE(speeds[0].empty());
  EXPECT_TRUE(speeds[1].empty());
}

// The plan's simulated step with speeds and checkpointing, against the
// simulator run by hand on the same costs; the table names the speeds.
TEST(Contention, PlanSimulatesWithSpeedsAndCheckpointing) {
  std::vector<LayerProfile> layers(4);
  for (auto& l : layers) l.forward_s = 1, l.backward_s = 2;
  PlanOptions o;
  o.stages = 2;
  o.microbatches = 4;
  o.method = BalanceMethod::kManual;
  o.balance = {2, 2};
  const PartitionPlan plain = plan_partition(layers, o);
  EXPECT_DOUBLE_EQ(plain.step_time_s, 30);  // (m + p - 1) x (F + B) = 5 x 6
  o.compute_speeds = {1, 0.5};
  o.checkpoint = pipe::CheckpointMode::kExceptLast;
  const PartitionPlan shared = plan_partition(layers, o);
  pipe::CostModel c = pipe::CostModel::uniform(2, 2, 4, 0);
  c.speed = {1, 0.5};
  c.checkpointed = 3;
  const pipe::Simulation want = pipe::simulate(pipe::one_f_one_b_schedule(2, 4), c);
  EXPECT_DOUBLE_EQ(shared.step_time_s, want.makespan);
  EXPECT_DOUBLE_EQ(shared.bubble_fraction, want.bubble_fraction);
  EXPECT_GT(shared.step_time_s, plain.step_time_s);
  const std::string table = partition_table(layers, shared);
  EXPECT_NE(table.find("ranks share cores: speed while 1, 2 of the pipeline's ranks compute: 1.00, 0.50"),
            std::string::npos)
      << table;
  EXPECT_EQ(partition_table(layers, plain).find("ranks share cores"), std::string::npos);
}

}  // namespace
}  // namespace weft::parallel::partition
