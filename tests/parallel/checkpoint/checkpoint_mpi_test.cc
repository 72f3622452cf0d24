// Partitioned checkpoints over MPI, one process per rank (mpirun -np 2 and
// 4): saved at 2 x (np/2) with ZeRO (synchronously and in the background),
// resumed on every grid that tiles the world with and without ZeRO, the
// losses within 1e-5 of one process and, on the saving grid, bitwise those
// of the uninterrupted run; every rank's RNG state comes back to that rank.
#include <filesystem>

#include <gtest/gtest.h>

#include "parallel/comm/mpi/process_group_mpi.h"
#include "tests/parallel/checkpoint/ck_cases.h"

namespace weft::parallel::checkpoint {
namespace {

using namespace testcases;  // NOLINT
namespace fs = std::filesystem;

constexpr int kSteps = 8, kSaveAfter = 3;

// The same fresh directory on every rank.
std::string shared_dir(ProcessGroup& world, const std::string& tag) {
  const char* t = std::getenv("TEST_TMPDIR");
  const std::string d = std::string(t ? t : "/tmp") + "/pck_mpi_" + std::to_string(world.size()) + "_" + tag;
  if (world.rank() == 0) fs::remove_all(d);
  world.barrier()->wait();
  return d;
}

void resharding(bool async) {
  auto world = init_process_group();
  const int n = world->size(), r = world->rank();
  const Data d = make_data(kSteps);
  const std::vector<double> ref = reference_losses(Opt::kAdamW, d, kSteps);
  const std::string root = shared_dir(*world, async ? "async" : "sync");
  TrainRun save{{2, n / 2, true}, Opt::kAdamW, 0, async ? kSteps : kSaveAfter + 1};
  save.save_root = root;
  save.save_after = kSaveAfter;
  save.save_options.async = async;
  const TrainResult saved = run_rank(save, d, world, rank_model(save, r));
  expect_losses_near(saved.losses, ref, 0, 1e-5, "saving at " + save.layout.str());
  for (int pp = 1; pp <= n; ++pp) {
    if (n % pp) continue;
    for (bool zero : {false, true}) {
      TrainRun resume{{pp, n / pp, zero}, Opt::kAdamW, kSaveAfter + 1, kSteps};
      resume.resume = root;
      const TrainResult res = run_rank(resume, d, world, rank_model(resume, r));
      EXPECT_EQ(res.loaded.step, kSaveAfter + 1);
      expect_losses_near(res.losses, ref, kSaveAfter + 1, 1e-5,
                         save.layout.str() + " -> " + resume.layout.str() + " rank " + std::to_string(r));
      if (pp == 2 && zero) {  // the saving layout: bitwise the uninterrupted run
        TrainRun whole{{2, n / 2, true}, Opt::kAdamW, 0, kSteps};
        const TrainResult w = run_rank(whole, d, world, rank_model(whole, r));
        expect_losses_near(res.losses, w.losses, kSaveAfter + 1, 0, "same layout, rank " + std::to_string(r));
      }
    }
  }
}

TEST(PartitionedCheckpointMPI, ResumesOnEveryGrid) { resharding(false); }
TEST(PartitionedCheckpointMPI, BackgroundSaveResumesOnEveryGrid) { resharding(true); }

TEST(PartitionedCheckpointMPI, EveryRankGetsItsRngStateBack) {
  auto world = init_process_group();
  const int n = world->size(), r = world->rank();
  const Data d = make_data(2);
  const std::string root = shared_dir(*world, "rng");
  hybrid::DistributedModelOptions o;
  o.pp = 1;
  o.balance = balance_for(1);
  hybrid::DistributedModel dm(make_mlp(5), world, o);
  hybrid::DistributedOptimizer opt(dm, [&](const optim::NamedParameters& p) { return make_opt(Opt::kSgd, p); });
  dm.partition(d.xs[0].narrow(0, 0, kRows / n));
  manual_seed(1000 + r);
  randn({3 + r});  // each rank somewhere else in its own stream
  const GeneratorState mine = get_rng_state();
  save(root, Stateful{&dm, &opt, nullptr}, TrainingState{1, 0, 1, {}});
  manual_seed(7);
  load(root, Stateful{&dm, &opt, nullptr});
  EXPECT_EQ(get_rng_state(), mine) << "rank " << r;
}

}  // namespace
}  // namespace weft::parallel::checkpoint
