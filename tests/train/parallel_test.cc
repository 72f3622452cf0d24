// The Trainer's distributed layouts with ranks as threads (//parallel/comm/inproc)
// against the single-process Trainer on the same global batches (itself
// bitwise the hand-written loop, trainer_test.cc): DataParallel over 2 ranks,
// Pipeline over 2 stages (1F1B, 2 micro-batches) and Hybrid pp 2 x dp 2
// (also with ZeRO-1 and gradient clipping), and zbv (two stages per rank in
// a V, the last stage on the lead) as a pipeline on 2 ranks and pp 2 x dp 2
// with ZeRO-1 give the per-epoch losses and the
// final weights within 1e-5, and the accuracy — running, after every step, as
// the progress bar shows it on the lead, and per epoch — is the true one on
// every rank, although the pipeline's lead holds the first stage and never
// sees an output.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "parallel/comm/inproc/testing.h"
#include "parallel/data/comm_volume.h"
#include "parallel/data/ddp.h"
#include "parallel/data/sampler.h"
#include "tests/train/cases.h"
#include "train/callbacks.h"
#include "train/trainer.h"

namespace weft::train {
namespace {

using namespace testcases;  // NOLINT

constexpr int64_t kEpochs = 2;

struct TrainRun {
  std::vector<EpochRecord> history;
  std::vector<std::vector<double>> step_accuracy;
  std::map<std::string, Tensor> weights;
};

// Trains with `layout` on `train` (this rank's loader); `weights` from the whole model.
TrainRun run(Layout layout, std::shared_ptr<nn::Sequential> m, io::DataLoader& train, double clip = 0) {
  Trainer t(std::move(layout), m, ce, sgd(sgd_options()), {.clip_grad_norm = clip});
  t.add<LRSchedule>(cosine(kEpochs));
  TrainRun r;
  t.add<Lambda>(
      Lambda::Events{.epoch_begin = [&](Trainer&) { r.step_accuracy.emplace_back(); },
                     .step_end = [&](Trainer& tr) { r.step_accuracy.back().push_back(tr.state().running_metric()); }});
  t.fit(train, nullptr, kEpochs);
  r.history = t.state().history;
  r.weights = weights(*t.whole_model());
  return r;
}

TrainRun reference(double clip = 0) {
  io::DataLoader train = loader(dataset());
  return run(Local{}, model(), train, clip);
}

// This replica's rows of every global batch (GlobalBatchSampler).
std::unique_ptr<io::DataLoader> replica_loader(int replicas, int replica) {
  auto sampler = std::make_shared<parallel::GlobalBatchSampler>(
      kRows, kBatch, replicas, replica, parallel::GlobalBatchSamplerOptions{.shuffle = true, .seed = kSeed});
  return std::make_unique<io::DataLoader>(dataset(), io::DataLoaderOptions{.batch_size = sampler->local_batch()},
                                          sampler);
}

void expect_close(const TrainRun& ref, const TrainRun& got, int rank) {
  SCOPED_TRACE("rank " + std::to_string(rank));
  ASSERT_EQ(got.history.size(), ref.history.size());
  for (size_t e = 0; e < ref.history.size(); ++e) {
    EXPECT_NEAR(got.history[e].train_loss, ref.history[e].train_loss, 1e-5) << "epoch " << e + 1;
    // Accuracy counts rows: equal unless float rounding flips one row's argmax.
    EXPECT_NEAR(got.history[e].train_metric, ref.history[e].train_metric, 1.01 / kRows) << "epoch " << e + 1;
    EXPECT_EQ(got.history[e].step, ref.history[e].step);
    EXPECT_DOUBLE_EQ(got.history[e].lr, ref.history[e].lr);
    ASSERT_EQ(got.step_accuracy[e].size(), ref.step_accuracy[e].size());
    for (size_t k = 0; k < ref.step_accuracy[e].size(); ++k)
      EXPECT_NEAR(got.step_accuracy[e][k], ref.step_accuracy[e][k], 1.01 / kBatch)
          << "epoch " << e + 1 << " step " << k;
  }
  ASSERT_EQ(got.weights.size(), ref.weights.size());
  for (const auto& [k, v] : ref.weights) EXPECT_TRUE(testing::tensors_near(got.weights.at(k), v, 1e-5)) << k;
}

TEST(TrainerLayouts, DataParallelEqualsOneProcessOnTheGlobalBatch) {
  const TrainRun ref = reference();
  std::vector<std::shared_ptr<nn::Sequential>> models;
  for (int r = 0; r < 2; ++r) models.push_back(model(kSeed + r));  // DDP broadcasts rank 0's weights
  std::vector<TrainRun> got(2);
  parallel::run_ranks(2, [&](std::shared_ptr<parallel::ProcessGroup> g) {
    auto train = replica_loader(2, g->rank());
    got[g->rank()] = run(DataParallel{.group = g}, models[g->rank()], *train);
  });
  for (int r = 0; r < 2; ++r) expect_close(ref, got[r], r);
}

// DataParallel's hooks for data parallelism built elsewhere (DASO's node
// DDP): the wrapped DDP reduces (its hook counts bytes, the options' hook of
// a DDP the Trainer would build counts none), the step hook runs once per
// step with the Trainer's optimizer, and the training is plain DataParallel's.
TEST(TrainerLayouts, DataParallelThroughAWrappedDdpAndAStepHook) {
  const TrainRun ref = reference();
  std::vector<std::shared_ptr<nn::Sequential>> models;
  for (int r = 0; r < 2; ++r) models.push_back(model(kSeed + r));  // the wrapped DDP broadcasts rank 0's weights
  std::vector<TrainRun> got(2);
  std::vector<int64_t> hooked(2, 0);
  std::vector<std::shared_ptr<int64_t>> wrapped_bytes, built_bytes;
  for (int r = 0; r < 2; ++r) {
    wrapped_bytes.push_back(std::make_shared<int64_t>(0));
    built_bytes.push_back(std::make_shared<int64_t>(0));
  }
  parallel::run_ranks(2, [&](std::shared_ptr<parallel::ProcessGroup> g) {
    const int r = g->rank();
    auto train = replica_loader(2, r);
    parallel::DistributedDataParallel ddp(models[r], g, {.comm_hook = parallel::counting_hook(wrapped_bytes[r])});
    got[r] = run(DataParallel{.group = g,
                              .ddp = {.comm_hook = parallel::counting_hook(built_bytes[r])},
                              .wrapped = &ddp,
                              .step =
                                  [&, r](optim::Optimizer& o) {
                                    ++hooked[r];
                                    o.step();
                                  }},
                 models[r], *train);
  });
  for (int r = 0; r < 2; ++r) {
    expect_close(ref, got[r], r);
    EXPECT_EQ(hooked[r], ref.history.back().step) << "rank " << r;
    EXPECT_GT(*wrapped_bytes[r], 0) << "rank " << r;
    EXPECT_EQ(*built_bytes[r], 0) << "rank " << r;
  }
}

TEST(TrainerLayouts, PipelineEqualsOneProcessAndItsLeadSeesTheTrueAccuracy) {
  const TrainRun ref = reference();
  std::vector<std::shared_ptr<nn::Sequential>> models;
  for (int r = 0; r < 2; ++r) models.push_back(model());
  std::vector<TrainRun> got(2);
  parallel::run_ranks(2, [&](std::shared_ptr<parallel::ProcessGroup> g) {
    io::DataLoader train = loader(dataset());  // every stage walks the same batches
    parallel::pipe::PipeOptions po;
    po.chunks = 2;
    po.schedule = parallel::pipe::ScheduleKind::k1F1B;
    got[g->rank()] = run(Pipeline{.group = g, .balance = {2, 1}, .pipe = po}, models[g->rank()], train);
  });
  for (int r = 0; r < 2; ++r) expect_close(ref, got[r], r);
  EXPECT_GT(got[0].step_accuracy[0].back(), 0.2);  // rank 0 holds stage 0: no outputs of its own
}

// The model with a Flatten after the head (a no-op on (N, 3)): four layers,
// one per stage of zbv on 2 ranks (rank 0 holds stages 0 and 3: the first
// layer and the last, so the lead scores).
std::shared_ptr<nn::Sequential> model4(uint64_t seed = kSeed) {
  auto m = model(seed);
  m->push_back(std::make_shared<nn::Flatten>());
  return m;
}

TEST(TrainerLayouts, ZeroBubbleVPipelineAndHybridEqualOneProcess) {
  io::DataLoader ref_train = loader(dataset());
  const TrainRun ref = run(Local{}, model4(), ref_train);
  parallel::pipe::PipeOptions po;
  po.chunks = 2;
  po.schedule = parallel::pipe::ScheduleKind::kZeroBubbleV;
  po.virtual_stages = 2;
  std::vector<std::shared_ptr<nn::Sequential>> models;
  for (int r = 0; r < 2; ++r) models.push_back(model4());
  std::vector<TrainRun> got(2);
  parallel::run_ranks(2, [&](std::shared_ptr<parallel::ProcessGroup> g) {
    io::DataLoader train = loader(dataset());
    got[g->rank()] = run(Pipeline{.group = g, .balance = {1, 1, 1, 1}, .pipe = po}, models[g->rank()], train);
  });
  for (int r = 0; r < 2; ++r) expect_close(ref, got[r], r);
  // pp 2 x dp 2 with ZeRO-1, the balance measured and planned for the V.
  models.clear();
  for (int r = 0; r < 4; ++r) models.push_back(model4(kSeed + r / 2));
  std::vector<TrainRun> grid(4);
  parallel::run_ranks(4, [&](std::shared_ptr<parallel::ProcessGroup> g) {
    auto train = replica_loader(2, g->rank() / 2);
    parallel::hybrid::DistributedModelOptions o;
    o.pp = 2;
    o.pipe = po;
    o.shard_optimizer_state = true;
    o.print_table = false;
    grid[g->rank()] = run(Hybrid{.world = g, .options = o}, models[g->rank()], *train);
  });
  for (int r = 0; r < 4; ++r) expect_close(ref, grid[r], r);
}

void hybrid(bool zero, double clip) {
  SCOPED_TRACE(std::string("zero ") + (zero ? "on" : "off") + ", clip " + std::to_string(clip));
  const TrainRun ref = reference(clip);
  std::vector<std::shared_ptr<nn::Sequential>> models;
  for (int r = 0; r < 4; ++r) models.push_back(model(kSeed + r / 2));  // replica 1 starts elsewhere
  std::vector<TrainRun> got(4);
  parallel::run_ranks(4, [&](std::shared_ptr<parallel::ProcessGroup> g) {
    auto train = replica_loader(2, g->rank() / 2);  // rank = replica * pp + stage
    parallel::hybrid::DistributedModelOptions o;
    o.pp = 2;
    o.dp = 2;
    o.balance = {2, 1};
    o.pipe.chunks = 2;
    o.pipe.schedule = parallel::pipe::ScheduleKind::k1F1B;
    o.shard_optimizer_state = zero;
    o.print_table = false;
    got[g->rank()] = run(Hybrid{.world = g, .options = o}, models[g->rank()], *train, clip);
  });
  for (int r = 0; r < 4; ++r) expect_close(ref, got[r], r);
}

TEST(TrainerLayouts, HybridTwoByTwoEqualsOneProcess) { hybrid(false, 0); }

// One checkpoint format for every layout: saved by pp 2 x dp 2 with ZeRO after epoch 1 (every rank its
// part), resumed in one process, the run ends as the one-process run.
TEST(TrainerLayouts, AHybridCheckpointResumesInOneProcess) {
  const TrainRun ref = reference();
  const std::string root = ::testing::TempDir() + "/hybrid_to_local";
  std::filesystem::remove_all(root);
  std::vector<std::shared_ptr<nn::Sequential>> models;
  for (int r = 0; r < 4; ++r) models.push_back(model());
  parallel::run_ranks(4, [&](std::shared_ptr<parallel::ProcessGroup> g) {
    auto train = replica_loader(2, g->rank() / 2);
    parallel::hybrid::DistributedModelOptions o;
    o.pp = 2;
    o.balance = {2, 1};
    o.pipe.chunks = 2;
    o.shard_optimizer_state = true;
    o.print_table = false;
    Trainer t(Hybrid{.world = g, .options = o}, models[g->rank()], ce, sgd(sgd_options()));
    t.add<LRSchedule>(cosine(kEpochs));
    t.add<Checkpoint>(CheckpointOptions{.root = root, .quiet = true});
    t.fit(*train, nullptr, 1);
  });
  auto m = model(kSeed + 5);
  Trainer t(Local{}, m, ce, sgd(sgd_options()));
  t.add<LRSchedule>(cosine(kEpochs));
  t.resume(root);
  io::DataLoader train = loader(dataset());
  t.fit(train, nullptr, kEpochs);
  ASSERT_EQ(t.state().history.size(), 2u);
  for (size_t e = 0; e < 2; ++e) EXPECT_NEAR(t.state().history[e].train_loss, ref.history[e].train_loss, 1e-5);
  for (const auto& [k, v] : ref.weights) EXPECT_TRUE(testing::tensors_near(weights(*m).at(k), v, 1e-5)) << k;
}

TEST(TrainerLayouts, HybridWithZeroAndClippingEqualsOneProcessWithClipping) {
  const TrainRun clipped = reference(0.5), plain = reference();
  EXPECT_NE(clipped.history.back().train_loss, plain.history.back().train_loss);  // clipping acts
  hybrid(true, 0.5);
}

}  // namespace
}  // namespace weft::train
