// The Trainer's checkpoints: every N steps into root/step-<N> with keep-last
// rotation; resuming from the latest (mid-epoch and at an epoch's end) and
// from an io/checkpoint single file reproduces the uninterrupted run
// exactly; resume errors name the path.
#include "io/checkpoint.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "parallel/checkpoint/reader.h"
#include "parallel/checkpoint/rotation.h"
#include "tests/train/cases.h"
#include "train/callbacks.h"
#include "train/trainer.h"

namespace weft::train {
namespace {

using namespace testcases;  // NOLINT
namespace fs = std::filesystem;

std::string fresh_dir(const std::string& name) {
  const std::string d = ::testing::TempDir() + "/" + name;
  fs::remove_all(d);
  return d;
}

struct TrainRun {
  std::vector<EpochRecord> history;
  std::map<std::string, Tensor> weights;
  int64_t step = 0;
};

// Fits `epochs` with the cosine schedule; `setup` adds callbacks or resumes first. A resumed run
// starts from other weights than the reference: loading must replace them all.
TrainRun fit(int64_t epochs, const std::function<void(Trainer&)>& setup = nullptr, bool resumed = false) {
  auto m = model(resumed ? kSeed + 1 : kSeed);
  Trainer t(Local{}, m, ce, sgd(sgd_options()), {.valid_name = "test"});
  t.add<LRSchedule>(cosine(epochs));
  if (setup) setup(t);
  io::DataLoader train = loader(dataset()), valid(dataset(32, 5), {.batch_size = 16});
  t.fit(train, &valid, epochs);
  return {t.state().history, weights(*m), t.state().step};
}

void expect_same(const TrainRun& a, const TrainRun& b) {
  ASSERT_EQ(a.history.size(), b.history.size());
  for (size_t e = 0; e < a.history.size(); ++e) {
    EXPECT_EQ(a.history[e].train_loss, b.history[e].train_loss) << "epoch " << e + 1;
    EXPECT_EQ(a.history[e].train_metric, b.history[e].train_metric) << "epoch " << e + 1;
    EXPECT_EQ(a.history[e].valid_loss, b.history[e].valid_loss) << "epoch " << e + 1;
    EXPECT_EQ(a.history[e].lr, b.history[e].lr) << "epoch " << e + 1;
    EXPECT_EQ(a.history[e].step, b.history[e].step) << "epoch " << e + 1;
  }
  EXPECT_EQ(a.step, b.step);
  for (const auto& [k, v] : a.weights) EXPECT_TRUE(testing::tensors_near(b.weights.at(k), v, 0)) << k;
}

std::vector<int64_t> steps_under(const std::string& root) {
  std::vector<int64_t> s;
  for (const auto& [step, dir] : parallel::checkpoint::committed_checkpoints(root)) s.push_back(step);
  return s;
}

std::function<void(Trainer&)> stop_at_step(int64_t step) {
  return [step](Trainer& t) {
    t.add<Lambda>(Lambda::Events{.step_end = [step](Trainer& tr) {
      if (tr.state().step == step) tr.request_stop();
    }});
  };
}

TEST(TrainerCheckpoint, EveryNStepsWritesStepDirectoriesAndKeepLastPrunes) {
  const std::string all = fresh_dir("every_steps_all"), kept = fresh_dir("every_steps_kept");
  fit(2, [&](Trainer& t) { t.add<Checkpoint>(CheckpointOptions{.root = all, .every_steps = 4, .quiet = true}); });
  EXPECT_EQ(steps_under(all), (std::vector<int64_t>{4, 8, 12}));  // 6 steps per epoch, 12 in all
  EXPECT_TRUE(fs::exists(all + "/step-00000004/manifest.json"));
  fit(2, [&](Trainer& t) {
    t.add<Checkpoint>(CheckpointOptions{.root = kept, .every_steps = 4, .keep_last = 2, .quiet = true});
  });
  EXPECT_EQ(steps_under(kept), (std::vector<int64_t>{8, 12}));
  // Every epoch by default.
  const std::string epochs = fresh_dir("every_epoch");
  fit(2, [&](Trainer& t) { t.add<Checkpoint>(CheckpointOptions{.root = epochs, .quiet = true}); });
  EXPECT_EQ(steps_under(epochs), (std::vector<int64_t>{6, 12}));
}

TEST(TrainerCheckpoint, MetadataIsWrittenIntoEverySaveBesideTheTrainersOwn) {
  const std::string root = fresh_dir("metadata");
  fit(2, [&](Trainer& t) {
    t.add<Checkpoint>(CheckpointOptions{.root = root, .quiet = true, .metadata = {{"model.layers", "3"}}});
  });
  ASSERT_EQ(steps_under(root), (std::vector<int64_t>{6, 12}));
  for (const char* dir : {"/step-00000006", "/step-00000012"}) {
    const auto meta = parallel::checkpoint::CheckpointReader(root + dir)
                          .trainer_state()
                          .at("metadata")
                          .get<std::map<std::string, std::string>>();
    EXPECT_EQ(meta.at("model.layers"), "3") << dir;
    EXPECT_EQ(meta.count("weft.train.history.1"), 1u) << dir;  // the trainer's history is still there
  }
}

TEST(TrainerCheckpoint, EveryNMinutesSavesOnceThatLongHasPassed) {
  // A tiny period: due after every step. A long one: never within the run.
  const std::string often = fresh_dir("every_minutes_often"), never = fresh_dir("every_minutes_never");
  fit(2, [&](Trainer& t) {
    t.add<Checkpoint>(CheckpointOptions{.root = often, .every_minutes = 1e-9, .keep_last = 3, .quiet = true});
  });
  EXPECT_EQ(steps_under(often), (std::vector<int64_t>{10, 11, 12}));
  fit(2, [&](Trainer& t) { t.add<Checkpoint>(CheckpointOptions{.root = never, .every_minutes = 60, .quiet = true}); });
  EXPECT_TRUE(steps_under(never).empty());
}

TEST(TrainerCheckpoint, ResumeFromTheLatestEqualsTheUninterruptedRun) {
  const TrainRun full = fit(3);
  // Interrupted mid-epoch 2 (step 8 of 18; the latest checkpoint is step 7, batch 1 of epoch 2), and
  // at the end of epoch 1 (step 6), then resumed from the root.
  for (int64_t every : {7, 6}) {
    SCOPED_TRACE("checkpoint every " + std::to_string(every) + " steps");
    const std::string root = fresh_dir("resume_" + std::to_string(every));
    fit(3, [&](Trainer& t) {
      t.add<Checkpoint>(CheckpointOptions{.root = root, .every_steps = every, .quiet = true});
      stop_at_step(8)(t);
    });
    ASSERT_EQ(steps_under(root).back(), every);
    const TrainRun resumed = fit(
        3, [&](Trainer& t) { t.resume(root); }, true);
    expect_same(full, resumed);
  }
}

TEST(TrainerCheckpoint, ResumeFromASingleFileCheckpointOfIoCheckpoint) {
  // The examples' older --save format, written by the hand loop after epoch 1.
  const TrainRun full = fit(3);
  const std::string file = ::testing::TempDir() + "/single.ckpt";
  {
    auto ds = dataset();
    auto m = model();
    optim::SGD opt(m->parameters(), sgd_options());
    optim::CosineAnnealingLR sched(opt, 3);
    io::DataLoader train = loader(ds);
    train.set_epoch(0);
    for (auto& b : train) {
      Tensor loss = ce((*m)(b.data), b.target);
      opt.zero_grad();
      loss.backward();
      opt.step();
    }
    sched.step();
    io::CheckpointContents c;
    for (const auto& [k, v] : m->state_dict()) c.model[k] = v.clone();
    for (const auto& [k, v] : opt.state_dict()) c.optimizer[k] = v.clone();
    c.scheduler = sched.state_dict();
    c.rng = get_rng_state();
    c.step = kRows / kBatch;
    c.epoch = 1;
    c.metadata["history.1"] = "0.5 0.25 0.75 0.125 100 2";
    io::save_checkpoint(file, c);
  }
  const TrainRun resumed = fit(
      3, [&](Trainer& t) { t.resume(file); }, true);
  ASSERT_EQ(resumed.history.size(), 3u);
  EXPECT_EQ(resumed.history[0].train_loss, 0.5);  // the file's history
  EXPECT_EQ(resumed.history[0].valid_metric, 0.125);
  TrainRun tail = full, got = resumed;
  tail.history.erase(tail.history.begin());
  got.history.erase(got.history.begin());
  expect_same(tail, got);
}

TEST(TrainerCheckpoint, ResumeErrorsNameThePath) {
  Trainer t(Local{}, model(), ce, sgd(sgd_options()));
  const std::string missing = ::testing::TempDir() + "/no_such_checkpoint";
  EXPECT_WEFT_ERROR(t.resume(missing), "resume: '" + missing + "': no such file or directory");
  // An empty directory (what --resume DIR gave before: "truncated: 0 bytes").
  const std::string empty = fresh_dir("empty_root");
  fs::create_directories(empty);
  EXPECT_WEFT_ERROR(t.resume(empty), "resume: '" + empty +
                                         "' is a directory with no committed checkpoint: expected a partitioned "
                                         "checkpoint directory (with manifest.json) or a root holding step-<N>");
  // A checkpoint directory whose save did not commit.
  const std::string uncommitted = fresh_dir("uncommitted");
  fs::create_directories(uncommitted);
  std::ofstream(uncommitted + "/trainer_state.json") << "{}";
  EXPECT_WEFT_ERROR(t.resume(uncommitted), "'" + uncommitted + "' is a checkpoint directory without manifest.json");
  // A file that is not a checkpoint.
  const std::string text = ::testing::TempDir() + "/not_a_checkpoint.txt";
  std::ofstream(text) << "hello, this is not a checkpoint at all";
  EXPECT_WEFT_ERROR(t.resume(text), "resume: '" + text + "' is not a checkpoint: ");
}

}  // namespace
}  // namespace weft::train
