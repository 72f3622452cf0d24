// Per-rank state in the Trainer's checkpoints (Note [rank state] in
// train/rank_state.h), with DASO as fashion_mnist_ddp --daso runs it: a
// DataParallel Trainer over the node DDP of 2 pretend nodes x 2 ranks (ranks
// as threads), DASO stepping its optimizer, DASO's state registered as the
// per-rank part "daso". 4 epochs of 6 steps: warm-up, two cycling epochs
// (skips 4, wait 2, local_skip 2: "S . F . . B", the node averaging at
// steps 0, 2, 4, 5), cool-down.
// - Saved after every step and resumed from each one (an average in flight
//   after cycling steps 0 and 1, the node's ranks apart after 1, 3 and 4,
//   epoch boundaries), every rank ends with bitwise the parameters, and the
//   run with the history, of the uninterrupted run.
// - The rank-state files are in the manifest (written by the lead); a
//   corrupted, truncated or missing one is refused naming the rank and the
//   file, on every rank; another world size or node split is refused naming
//   both layouts; a checkpoint without per-rank state is refused; a run
//   without DASO resumes a DASO checkpoint from rank 0's model alone.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "io/atomic_file.h"
#include "parallel/checkpoint/load.h"
#include "parallel/checkpoint/reader.h"
#include "parallel/comm/inproc/testing.h"
#include "parallel/data/daso.h"
#include "parallel/data/sampler.h"
#include "tests/train/cases.h"
#include "train/callbacks.h"
#include "train/trainer.h"

namespace weft::train {
namespace {

using namespace testcases;  // NOLINT
namespace ck = parallel::checkpoint;
namespace fs = std::filesystem;
using GroupPtr = std::shared_ptr<parallel::ProcessGroup>;

constexpr int kWorld = 4, kPerNode = 2;
constexpr int64_t kEpochs = 4, kSteps = kRows / kBatch;  // 6 steps of the global batch per epoch

struct RankRun {
  std::vector<double> params;
  std::vector<EpochRecord> history;
};

std::vector<double> flat(const nn::Module& m) {
  std::vector<double> out;
  for (const auto& p : m.parameters()) {
    const auto v = testing::values(p);
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

std::unique_ptr<io::DataLoader> rank_loader(int world, int rank) {
  auto sampler = std::make_shared<parallel::GlobalBatchSampler>(
      kRows, kBatch, world, rank, parallel::GlobalBatchSamplerOptions{.shuffle = true, .seed = kSeed});
  return std::make_unique<io::DataLoader>(dataset(), io::DataLoaderOptions{.batch_size = sampler->local_batch()},
                                          sampler);
}

struct Spec {
  int per_node = kPerNode;
  bool daso = true;  // false: plain DataParallel
  std::optional<CheckpointOptions> checkpoint;
  std::string resume;
};

// One rank's run; `m` built beforehand (models are built outside the threads).
RankRun run_rank(const GroupPtr& g, std::shared_ptr<nn::Sequential> m, const Spec& spec) {
  auto train = rank_loader(g->size(), g->rank());
  std::unique_ptr<parallel::NodeDataParallel> nd;
  std::unique_ptr<parallel::Daso> daso;
  DataParallel layout{.group = g};
  if (spec.daso) {
    nd = std::make_unique<parallel::NodeDataParallel>(m, parallel::make_node_groups(g, {spec.per_node}));
    layout.wrapped = &nd->ddp();
    layout.step = [&](optim::Optimizer&) { daso->step(); };
  }
  Trainer t(layout, m, ce, sgd(sgd_options()), {.name = "rank_state_test"});
  t.add<LRSchedule>(cosine(kEpochs));
  if (spec.daso) {
    parallel::DasoOptions o;
    o.schedule.total_epochs = kEpochs;
    o.schedule.warmup_epochs = 1;
    o.schedule.cooldown_epochs = 1;
    o.schedule.max_global_skips = 4;
    o.schedule.local_skip_factor = 2;
    o.steps_per_epoch = static_cast<int>(kSteps);
    daso = std::make_unique<parallel::Daso>(*nd, t.optimizer(), o);
    t.add_rank_state({.name = "daso",
                      .layout = nd->groups().layout.str(),
                      .save = [&] { return daso->state_dict(); },
                      .load = [&](const std::map<std::string, Tensor>& sd) { daso->load_state_dict(sd); }});
    t.add<Lambda>(Lambda::Events{
        .epoch_end = [&](Trainer& tr) { daso->end_epoch(tr.state().history.back().train_loss); }, .order = 6});
  }
  if (spec.checkpoint) t.add<Checkpoint>(*spec.checkpoint);
  if (!spec.resume.empty()) t.resume(spec.resume);
  t.fit(*train, nullptr, kEpochs);
  return {flat(*m), t.state().history};
}

std::vector<RankRun> run(const Spec& spec, int world = kWorld, uint64_t seed = kSeed) {
  std::vector<std::shared_ptr<nn::Sequential>> models;
  for (int r = 0; r < world; ++r) models.push_back(model(seed + r));  // rank 0's is broadcast (or resumed)
  std::vector<RankRun> out(world);
  parallel::run_ranks(world, [&](GroupPtr g) { out[g->rank()] = run_rank(g, models[g->rank()], spec); });
  return out;
}

std::string step_dir(const std::string& root, int64_t step) { return root + "/" + ck::step_dir_name(step); }

// A copy of checkpoint `dir` to damage.
std::string copy_of(const std::string& dir, const std::string& name) {
  const std::string to = fresh_dir(name);
  fs::copy(dir, to, fs::copy_options::recursive);
  return to;
}

void expect_same_run(const std::vector<RankRun>& want, const std::vector<RankRun>& got) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t r = 0; r < want.size(); ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(got[r].params, want[r].params);
    ASSERT_EQ(got[r].history.size(), want[r].history.size());
    for (size_t e = 0; e < want[r].history.size(); ++e) {
      EXPECT_EQ(got[r].history[e].train_loss, want[r].history[e].train_loss) << "epoch " << e + 1;
      EXPECT_EQ(got[r].history[e].step, want[r].history[e].step) << "epoch " << e + 1;
    }
  }
}

// Saved after every step (and the uninterrupted run's own result), shared by the tests.
const std::string& saved_root() {
  static const std::string root = [] {
    const std::string r = fresh_dir("rank_state_every_step");
    run(Spec{.checkpoint = CheckpointOptions{.root = r, .every_steps = 1, .quiet = true}});
    return r;
  }();
  return root;
}

TEST(RankState, DasoResumesBitwiseFromEveryStep) {
  const std::vector<RankRun> whole = run(Spec{});
  // Saving does not change the run.
  const std::string root = fresh_dir("rank_state_saving");
  expect_same_run(whole, run(Spec{.checkpoint = CheckpointOptions{.root = root, .every_steps = 1, .quiet = true}}));
  ASSERT_EQ(steps_under(root).size(), static_cast<size_t>(kEpochs * kSteps));
  for (int64_t step = 1; step < kEpochs * kSteps; ++step) {
    SCOPED_TRACE("resumed from step " + std::to_string(step));
    expect_same_run(whole, run(Spec{.resume = step_dir(root, step)}, kWorld, kSeed + 10));
  }
}

TEST(RankState, FilesAreInTheManifestWithWhatDiffersByRank) {
  const std::string& root = saved_root();
  for (int64_t step : {7, 8, 10, 12, 18}) {
    SCOPED_TRACE("step " + std::to_string(step));
    const std::string dir = step_dir(root, step);
    const ck::Manifest m = ck::read_manifest(dir);
    const int in_epoch = static_cast<int>((step - 1) % kSteps);  // the step just taken, 0-based in its epoch
    const bool cycling = step > kSteps && step <= 3 * kSteps;
    for (int r = 0; r < kWorld; ++r) {
      const std::string name = "rank-state-0000" + std::to_string(r) + "-of-00004.safetensors";
      ASSERT_TRUE(m.files.count(name)) << name;
      EXPECT_EQ(m.files.at(name).rank, 0);  // the lead wrote it
      const io::SafetensorsFile f = io::safetensors_deserialize(ck::read_listed_file(dir, m, name));
      EXPECT_EQ(f.metadata.at("rank"), std::to_string(r));
      EXPECT_EQ(f.metadata.at("layout.daso"), "2 nodes x 2 ranks: [0, 1] [2, 3]");
      EXPECT_EQ(f.tensors.at("daso.step_in_epoch").item<int64_t>(), in_epoch + 1);
      // In flight after steps 0 and 1 of a cycling epoch; own parameters unless the step blocked.
      EXPECT_EQ(f.tensors.count("daso.pending.parts"), cycling && in_epoch <= 1 ? 1u : 0u);
      EXPECT_EQ(f.tensors.count("daso.params"), cycling && in_epoch != kSteps - 1 ? 1u : 0u);
      EXPECT_EQ(f.tensors.count("daso.optimizer.state.0.momentum_buffer"), 1u);
    }
    EXPECT_EQ(ck::load_model_state(dir).size(), 4u);  // the model index does not list them
  }
}

// Resumes `dir` on `world` ranks and expects every rank to fail with `want`.
void expect_resume_error(const std::string& dir, const std::string& want, int world = kWorld, int per_node = kPerNode,
                         bool daso = true) {
  std::vector<std::shared_ptr<nn::Sequential>> models;
  for (int r = 0; r < world; ++r) models.push_back(model(kSeed + r));
  parallel::run_ranks(world, [&](GroupPtr g) {
    EXPECT_WEFT_ERROR(run_rank(g, models[g->rank()], Spec{.per_node = per_node, .daso = daso, .resume = dir}), want);
  });
}

TEST(RankState, DamagedOrMissingFilesNameTheRankAndFile) {
  const std::string src = step_dir(saved_root(), 8);
  {
    const std::string d = copy_of(src, "rank_state_corrupted");
    const std::string f = d + "/rank-state-00002-of-00004.safetensors";
    std::string bytes = io::read_file(f);
    bytes[bytes.size() - 3] ^= 0x40;  // same size, other bytes
    io::write_file_synced(f, bytes);
    expect_resume_error(d, "rank 2: the per-rank state of rank 2: '" + f + "' is corrupted: checksum mismatch");
  }
  {
    const std::string d = copy_of(src, "rank_state_truncated");
    const std::string f = d + "/rank-state-00001-of-00004.safetensors";
    const std::string bytes = io::read_file(f);
    io::write_file_synced(f, bytes.substr(0, 100));
    expect_resume_error(d, "rank 1: the per-rank state of rank 1: '" + f + "' is truncated: it has 100 of " +
                               std::to_string(bytes.size()) + " bytes");
  }
  {
    const std::string d = copy_of(src, "rank_state_missing");
    const std::string f = d + "/rank-state-00003-of-00004.safetensors";
    fs::remove(f);
    expect_resume_error(d, "rank 3: the per-rank state of rank 3: '" + f + "' is missing");
  }
}

TEST(RankState, AnotherLayoutIsRefusedNamingBoth) {
  const std::string dir = step_dir(saved_root(), 8);
  expect_resume_error(dir,
                      "holds the per-rank state of 4 ranks (daso: 2 nodes x 2 ranks: [0, 1] [2, 3]); this run has 2 "
                      "ranks (daso: 1 node x 2 ranks: [0, 1]): per-rank state resumes only on the layout that saved "
                      "it; resume on 4 ranks with that layout, or without daso",
                      2, 2);
  expect_resume_error(dir,
                      "holds per-rank state 'daso' saved over 2 nodes x 2 ranks: [0, 1] [2, 3]; this run has 4 nodes "
                      "x 1 rank: [0] [1] [2] [3]: per-rank state resumes only on the layout that saved it",
                      kWorld, 1);
}

TEST(RankState, WithoutItOrWithoutDaso) {
  // A plain DataParallel checkpoint holds none.
  const std::string plain = fresh_dir("rank_state_plain");
  run(Spec{.daso = false, .checkpoint = CheckpointOptions{.root = plain, .quiet = true}});
  expect_resume_error(step_dir(plain, kSteps),
                      "holds no per-rank state, which this run's daso needs (it was saved by a run without it)");
  // Without DASO, a DASO checkpoint resumes from rank 0's model (the per-rank files unused).
  const std::string dir = step_dir(saved_root(), 2 * kSteps);
  const std::map<std::string, Tensor> rank0 = ck::load_model_state(dir);
  std::vector<std::shared_ptr<nn::Sequential>> models;
  for (int r = 0; r < kWorld; ++r) models.push_back(model(kSeed + 20 + r));
  parallel::run_ranks(kWorld, [&](GroupPtr g) {
    Trainer t(DataParallel{.group = g}, models[g->rank()], ce, sgd(sgd_options()), {.name = "rank_state_test"});
    t.resume(dir);
    t.prepare();
    EXPECT_EQ(t.state().step, 2 * kSteps);
    for (const auto& [k, v] : models[g->rank()]->state_dict())
      EXPECT_EQ(testing::values(v), testing::values(rank0.at(k))) << k;
  });
}

}  // namespace
}  // namespace weft::train
