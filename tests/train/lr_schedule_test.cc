// LRSchedule with the schedulers that carry state of their own:
// ReduceLROnPlateau stepped at each epoch's end with the validation loss (the
// training loss without validation, or a chosen key), equal to the scheduler
// replayed by hand on the recorded values; ReduceLROnPlateau and OneCycleLR
// (with its cycled momentum) saved in checkpoints and resumed mid-run equal to
// the uninterrupted run; kStep with ReduceLROnPlateau refused.
#include "train/lr_schedule.h"

#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "parallel/checkpoint/reader.h"
#include "tests/train/cases.h"
#include "train/callbacks.h"
#include "train/trainer.h"

namespace weft::train {
namespace {

using namespace testcases;  // NOLINT
using RP = optim::ReduceLROnPlateauOptions;

SchedulerFactory plateau(RP options) {
  return [options](optim::Optimizer& o) { return std::make_unique<optim::ReduceLROnPlateau>(o, options); };
}

// Reductions are frequent: patience 0, an improvement must be 50%, and an
// epoch of cooldown follows each reduction.
const RP kPlateau{.factor = 0.5, .patience = 0, .threshold = 0.5, .cooldown = 1};

struct ScheduleRun {
  std::vector<EpochRecord> history;
  std::map<std::string, Tensor> weights;
  std::vector<double> momentum;  // the first group's momentum at each step's start
  optim::SchedulerStateDict scheduler;
};

// Fits `epochs` with SGD (momentum) and the scheduler from `factory` stepped
// `every`; `setup` adds callbacks or resumes first.
ScheduleRun fit(int64_t epochs, SchedulerFactory factory, LRSchedule::Every every, bool validate,
                const std::function<void(Trainer&)>& setup = nullptr, const std::string& monitor = "",
                bool resumed = false) {
  auto m = model(resumed ? kSeed + 1 : kSeed);
  Trainer t(Local{}, m, ce, sgd(sgd_options()), {.valid_name = "test"});
  t.add<LRSchedule>(std::move(factory), every, monitor);
  ScheduleRun r;
  t.add<Lambda>(Lambda::Events{
      .step_begin = [&](Trainer& tr) { r.momentum.push_back(tr.optimizer().param_groups()[0].get("momentum")); }});
  if (setup) setup(t);
  io::DataLoader train = loader(dataset()), valid(dataset(32, 5), {.batch_size = 16});
  t.fit(train, validate ? &valid : nullptr, epochs);
  r.history = t.state().history;
  r.weights = weights(*m);
  r.scheduler = t.scheduler()->state_dict();
  return r;
}

// The lrs a ReduceLROnPlateau with `options` gives after each of `values`, from lr 0.1.
std::vector<double> replay(const RP& options, const std::vector<double>& values) {
  Tensor p = zeros({1}).requires_grad_(true);
  optim::SGD opt({p}, optim::SGDOptions{.lr = 0.1});
  optim::ReduceLROnPlateau s(opt, options);
  std::vector<double> lrs;
  for (double v : values) {
    s.step(v);
    lrs.push_back(s.get_last_lr()[0]);
  }
  return lrs;
}

// Each epoch's lr (recorded before the epoch's scheduler step) is the replayed
// scheduler's after the epochs before; returns how many reductions there were.
int check_replay(const std::vector<EpochRecord>& h, const RP& options, const std::string& key) {
  std::vector<double> values;
  for (const auto& r : h) values.push_back(r.get(key, "accuracy", "test"));
  const std::vector<double> lrs = replay(options, values);
  EXPECT_EQ(h[0].lr, 0.1);
  int reductions = 0;
  for (size_t e = 1; e < h.size(); ++e) {
    EXPECT_EQ(h[e].lr, lrs[e - 1]) << key << " epoch " << e + 1;
    reductions += h[e].lr < h[e - 1].lr;
  }
  return reductions;
}

TEST(LRSchedulePlateau, StepsWithTheValidationLossOrTheTrainingLossOrAChosenKey) {
  const ScheduleRun valid = fit(6, plateau(kPlateau), LRSchedule::Every::kEpoch, true);
  ASSERT_EQ(valid.history.size(), 6u);
  EXPECT_GT(check_replay(valid.history, kPlateau, "test_loss"), 0);
  EXPECT_EQ(valid.scheduler.at("last_epoch").item<int64_t>(), 6);

  const ScheduleRun train = fit(6, plateau(kPlateau), LRSchedule::Every::kEpoch, false);
  EXPECT_TRUE(std::isnan(train.history[0].valid_loss));
  EXPECT_GT(check_replay(train.history, kPlateau, "train_loss"), 0);

  const RP max{.mode = RP::Mode::kMax, .factor = 0.5, .patience = 0, .threshold = 0.05};
  const ScheduleRun acc = fit(6, plateau(max), LRSchedule::Every::kEpoch, true, nullptr, "test_accuracy");
  EXPECT_GT(check_replay(acc.history, max, "test_accuracy"), 0);
}

TEST(LRSchedulePlateau, StepsPerEpochOnly) {
  EXPECT_WEFT_ERROR(fit(1, plateau({}), LRSchedule::Every::kStep, true),
                    "LRSchedule: a ReduceLROnPlateau steps once per epoch with the epoch's metric: use Every::kEpoch");
}

std::function<void(Trainer&)> checkpoint_and_stop(const std::string& root, int64_t every, int64_t stop) {
  return [=](Trainer& t) {
    t.add<Checkpoint>(CheckpointOptions{.root = root, .every_steps = every, .quiet = true});
    t.add<Lambda>(Lambda::Events{.step_end = [stop](Trainer& tr) {
      if (tr.state().step == stop) tr.request_stop();
    }});
  };
}

void expect_same(const ScheduleRun& a, const ScheduleRun& b) {
  ASSERT_EQ(a.history.size(), b.history.size());
  for (size_t e = 0; e < a.history.size(); ++e) {
    EXPECT_EQ(a.history[e].lr, b.history[e].lr) << "epoch " << e + 1;
    EXPECT_EQ(a.history[e].train_loss, b.history[e].train_loss) << "epoch " << e + 1;
    EXPECT_EQ(a.history[e].valid_loss, b.history[e].valid_loss) << "epoch " << e + 1;
  }
  for (const auto& [k, v] : a.weights) EXPECT_TRUE(testing::tensors_near(b.weights.at(k), v, 0)) << k;
  ASSERT_EQ(a.scheduler.size(), b.scheduler.size());
  for (const auto& [k, v] : a.scheduler) EXPECT_TRUE(testing::tensors_near(b.scheduler.at(k), v, 0)) << k;
}

TEST(LRSchedulePlateau, ResumedFromACheckpointEqualsTheUninterruptedRun) {
  const ScheduleRun full = fit(5, plateau(kPlateau), LRSchedule::Every::kEpoch, true);
  EXPECT_GT(check_replay(full.history, kPlateau, "test_loss"), 0);
  // Checkpoints every 7 steps (6 per epoch), stopped at step 17: resumed from step 14, in epoch 3.
  const std::string root = fresh_dir("plateau_resume");
  fit(5, plateau(kPlateau), LRSchedule::Every::kEpoch, true, checkpoint_and_stop(root, 7, 17));
  ASSERT_EQ(steps_under(root).back(), 14);
  // The counters are in trainer_state.json (Note [scheduler JSON]).
  const auto js = parallel::checkpoint::CheckpointReader(root + "/step-00000014").trainer_state().at("scheduler");
  EXPECT_EQ(js.at("last_epoch").get<int64_t>(), 2);
  EXPECT_TRUE(js.at("best").is_number());
  EXPECT_TRUE(js.at("num_bad_epochs").is_number_integer());
  EXPECT_TRUE(js.at("cooldown_counter").is_number_integer());
  const ScheduleRun resumed = fit(
      5, plateau(kPlateau), LRSchedule::Every::kEpoch, true, [&](Trainer& t) { t.resume(root); }, "", true);
  expect_same(full, resumed);
}

TEST(LRScheduleOneCycle, ResumedMidEpochEqualsTheUninterruptedRunMomentumIncluded) {
  // 3 epochs of 6 steps; OneCycleLR over the 18 steps, stepped per step, cycling SGD's momentum.
  auto one_cycle = [](optim::Optimizer& o) {
    return std::make_unique<optim::OneCycleLR>(o, 0.5, 18, optim::OneCycleLROptions{.three_phase = true});
  };
  const ScheduleRun full = fit(3, one_cycle, LRSchedule::Every::kStep, true);
  ASSERT_EQ(full.momentum.size(), 18u);
  EXPECT_EQ(full.momentum[0], 0.95);
  EXPECT_LT(full.momentum[5], 0.9);
  const std::string root = fresh_dir("one_cycle_resume");
  fit(3, one_cycle, LRSchedule::Every::kStep, true, checkpoint_and_stop(root, 4, 10));
  ASSERT_EQ(steps_under(root).back(), 8);
  ScheduleRun resumed = fit(
      3, one_cycle, LRSchedule::Every::kStep, true, [&](Trainer& t) { t.resume(root); }, "", true);
  expect_same(full, resumed);
  // The resumed run's steps 9..18 had the uninterrupted run's momentum from its first step on.
  ASSERT_EQ(resumed.momentum.size(), 10u);
  for (size_t k = 0; k < 10; ++k) EXPECT_EQ(resumed.momentum[k], full.momentum[k + 8]) << "step " << k + 9;
}

}  // namespace
}  // namespace weft::train
