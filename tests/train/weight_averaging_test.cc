// The WeightAveraging callback (train/weight_averaging.h) in a one-process
// Trainer on the synthetic task of tests/train/cases.h: an EMA of every step
// against the same average taken by hand in double, SWA of epoch ends from a
// start step with the evaluations it runs, a run resumed from a checkpoint
// averaging bitwise as the uninterrupted one, a 2-stage pipeline whose
// stages' averages make the one-process one, DataParallel replicas that each
// keep it, and the errors.
#include "train/weight_averaging.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "optim/swa_utils.h"
#include "parallel/checkpoint/rotation.h"
#include "parallel/comm/inproc/testing.h"
#include "parallel/data/sampler.h"
#include "tests/train/cases.h"
#include "train/callbacks.h"
#include "train/trainer.h"

namespace weft::train {
namespace {

using namespace testcases;                          // NOLINT
constexpr int64_t kStepsPerEpoch = kRows / kBatch;  // 6

using Weights = std::map<std::string, Tensor>;

Weights as_map(const std::vector<std::pair<std::string, Tensor>>& named) {
  Weights out;
  for (const auto& [k, v] : named) out[k] = v.detach().clone();
  return out;
}

TEST(WeightAveraging, EmaOfEveryStepEqualsTheHandAverage) {
  auto ds = dataset();
  io::DataLoader train = loader(ds);
  auto m = model();
  Trainer t(Local{}, m, ce, sgd(sgd_options()));
  Weights hand;  // float64: w after the first step, then 0.9 ema + 0.1 w
  t.add<Lambda>(Lambda::Events{.step_end = [&](Trainer&) {
    for (const auto& [k, v] : m->named_parameters()) {
      const Tensor w = v.detach().to(DType::Float64);
      hand[k] = hand.count(k) ? hand[k] * 0.9 + w * 0.1 : w.clone();
    }
  }});
  auto& wa = t.add<WeightAveraging>(
      WeightAveragingOptions{.multi_avg_fn = optim::ema_multi_avg_fn(0.9), .apply_at_end = false});
  t.fit(train, nullptr, 2);
  EXPECT_EQ(wa.num_averaged(), 2 * kStepsPerEpoch);
  const Weights avg = as_map(wa.averaged());
  ASSERT_EQ(avg.size(), 4u);
  for (const auto& [k, v] : avg) EXPECT_TRUE(testing::tensors_near(v.to(DType::Float64), hand.at(k), 1e-6)) << k;
  // apply_at_end false: the model keeps its training weights.
  EXPECT_FALSE(testing::tensors_near(m->named_parameters()[0].second, avg.at("0.weight"), 1e-6));
}

TEST(WeightAveraging, SwaOfEpochEndsFromAStartStepAndItsEvaluations) {
  auto ds = dataset();
  io::DataLoader train = loader(ds);
  io::DataLoader valid(dataset(32, 5), {.batch_size = 16});
  auto m = model();
  Trainer t(Local{}, m, ce, sgd(sgd_options()));
  std::vector<Weights> ends;  // the training weights at each epoch's end
  t.add<Lambda>(Lambda::Events{.epoch_end = [&](Trainer&) { ends.push_back(as_map(m->named_parameters())); }});
  auto& wa = t.add<WeightAveraging>(WeightAveragingOptions{.start_step = 2 * kStepsPerEpoch, .every_steps = 0});
  t.fit(train, &valid, 4);
  ASSERT_EQ(ends.size(), 4u);
  EXPECT_EQ(wa.num_averaged(), 3);  // the ends of epochs 2, 3 and 4

  auto mean_of = [&](std::vector<int> epochs) {
    Weights out;
    for (const auto& [k, v] : ends[0]) {
      Tensor s = zeros_like(v).to(DType::Float64);
      for (int e : epochs) s = s + ends[e - 1].at(k).to(DType::Float64);
      out[k] = s / static_cast<double>(epochs.size());
    }
    return out;
  };
  const Weights swa = mean_of({2, 3, 4});
  for (const auto& [k, v] : as_map(wa.averaged())) {
    EXPECT_TRUE(testing::tensors_near(v.to(DType::Float64), swa.at(k), 1e-6)) << k;
  }
  // apply_at_end: the model holds the average.
  for (const auto& [k, v] : m->named_parameters()) {
    EXPECT_TRUE(testing::tensors_near(v.to(DType::Float64), swa.at(k), 1e-6)) << k;
  }

  // An epoch's evaluation runs with the average of the epochs before it: epoch 2's with its own weights (no
  // average yet), epoch 4's with the average of epochs 2 and 3.
  auto valid_loss_of = [&](const Weights& w) {
    auto r = model();
    nn::StateDict sd;
    for (const auto& [k, v] : w) sd.insert(k, v.to(DType::Float32));
    r->load_state_dict(sd);
    Trainer e(Local{}, r, ce, sgd(sgd_options()));
    return e.evaluate(valid).loss;
  };
  EXPECT_NEAR(t.state().history[1].valid_loss, valid_loss_of(ends[1]), 1e-6);
  EXPECT_NEAR(t.state().history[3].valid_loss, valid_loss_of(mean_of({2, 3})), 1e-6);
}

// The committed checkpoint of `root` at `step`.
std::string dir_at(const std::string& root, int64_t step) {
  for (const auto& [s, dir] : parallel::checkpoint::committed_checkpoints(root))
    if (s == step) return dir;
  ADD_FAILURE() << "no checkpoint at step " << step << " under " << root;
  return "";
}

struct AveragingRun {
  Weights average, weights;
  std::vector<EpochRecord> history;
};

AveragingRun ema_run(const std::string& root, const std::string& resume_from, bool with_averaging = true) {
  auto ds = dataset();
  io::DataLoader train = loader(ds);
  io::DataLoader valid(dataset(32, 5), {.batch_size = 16});
  auto m = model(resume_from.empty() ? kSeed : kSeed + 1);
  Trainer t(Local{}, m, ce, sgd(sgd_options()));
  WeightAveraging* wa = nullptr;
  if (with_averaging)
    wa = &t.add<WeightAveraging>(
        WeightAveragingOptions{.multi_avg_fn = optim::ema_multi_avg_fn(0.8), .start_step = 3, .every_steps = 2});
  t.add<Checkpoint>(CheckpointOptions{.root = root, .quiet = true});
  if (!resume_from.empty()) t.resume(resume_from);
  t.fit(train, &valid, 4);
  AveragingRun r;
  if (wa) r.average = as_map(wa->averaged());
  r.weights = as_map(m->named_parameters());
  r.history = t.state().history;
  return r;
}

TEST(WeightAveraging, AResumedRunAveragesAsTheUninterruptedOne) {
  const std::string root = fresh_dir("wa_uninterrupted");
  const AveragingRun whole = ema_run(root, "");
  ASSERT_EQ(steps_under(root).size(), 4u);
  for (int64_t step : {kStepsPerEpoch, 2 * kStepsPerEpoch}) {
    SCOPED_TRACE(step);
    const AveragingRun resumed = ema_run(fresh_dir("wa_resumed"), dir_at(root, step));
    for (const auto& [k, v] : whole.average) EXPECT_TRUE(testing::tensors_near(resumed.average.at(k), v, 0.0)) << k;
    for (const auto& [k, v] : whole.weights) EXPECT_TRUE(testing::tensors_near(resumed.weights.at(k), v, 0.0)) << k;
    ASSERT_EQ(resumed.history.size(), whole.history.size());
    EXPECT_EQ(resumed.history.back().valid_loss, whole.history.back().valid_loss);
  }
  // A checkpoint saved without the callback lacks its part.
  const std::string plain = fresh_dir("wa_plain");
  ema_run(plain, "", /*with_averaging=*/false);
  EXPECT_WEFT_ERROR(ema_run(fresh_dir("wa_plain_resumed"), dir_at(plain, kStepsPerEpoch)), "weight_averaging");
}

// A pipeline of 2 stages (ranks as threads): each rank averages its stage's
// parameters, which together are the one-process run's average, and the
// gathered model holds that average at the end.
TEST(WeightAveraging, EachPipelineStageAveragesItsOwnParameters) {
  const WeightAveragingOptions ema{.multi_avg_fn = optim::ema_multi_avg_fn(0.8)};
  io::DataLoader one_train = loader(dataset());
  Trainer one(Local{}, model(), ce, sgd(sgd_options()));
  one.add<WeightAveraging>(ema);
  one.fit(one_train, nullptr, 2);
  const Weights want = as_map(one.find<WeightAveraging>()->averaged());
  ASSERT_EQ(want.size(), 4u);
  ASSERT_FALSE(testing::tensors_near(want.at("0.weight"), weights(*model()).at("0.weight"), 1e-3));  // it moved

  std::vector<Weights> got(2), whole(2);
  parallel::run_ranks(2, [&](std::shared_ptr<parallel::ProcessGroup> g) {
    io::DataLoader train = loader(dataset());  // every stage walks the same batches
    parallel::pipe::PipeOptions po;
    po.chunks = 2;
    Trainer t(Pipeline{.group = g, .balance = {2, 1}, .pipe = po}, model(), ce, sgd(sgd_options()));
    auto& wa = t.add<WeightAveraging>(ema);
    t.fit(train, nullptr, 2);
    got[g->rank()] = as_map(wa.averaged());
    whole[g->rank()] = weights(*t.whole_model());
  });
  ASSERT_EQ(got[0].size() + got[1].size(), want.size());
  for (int r = 0; r < 2; ++r) {
    for (const auto& [k, v] : got[r])
      EXPECT_TRUE(testing::tensors_near(v, want.at(k), 1e-5)) << "rank " << r << " " << k;
    for (const auto& [k, v] : want)
      EXPECT_TRUE(testing::tensors_near(whole[r].at(k), v, 1e-5)) << "rank " << r << " " << k;
  }
}

// DataParallel over 2 ranks on the global batches: every replica keeps the
// one-process run's average.
TEST(WeightAveraging, EveryDataParallelReplicaKeepsTheOneProcessAverage) {
  const WeightAveragingOptions swa{.start_step = 2, .every_steps = 3};
  io::DataLoader one_train = loader(dataset());
  Trainer one(Local{}, model(), ce, sgd(sgd_options()));
  auto& one_wa = one.add<WeightAveraging>(swa);
  one.fit(one_train, nullptr, 2);
  EXPECT_EQ(one_wa.num_averaged(), 4);  // steps 2, 5, 8, 11
  const Weights want = as_map(one_wa.averaged());

  std::vector<Weights> got(2);
  std::vector<int64_t> counts(2);
  parallel::run_ranks(2, [&](std::shared_ptr<parallel::ProcessGroup> g) {
    auto sampler = std::make_shared<parallel::GlobalBatchSampler>(
        kRows, kBatch, 2, g->rank(), parallel::GlobalBatchSamplerOptions{.shuffle = true, .seed = kSeed});
    io::DataLoader train(dataset(), io::DataLoaderOptions{.batch_size = sampler->local_batch()}, sampler);
    Trainer t(DataParallel{.group = g}, model(kSeed + g->rank()), ce, sgd(sgd_options()));  // DDP broadcasts rank 0's
    auto& wa = t.add<WeightAveraging>(swa);
    t.fit(train, nullptr, 2);
    got[g->rank()] = as_map(wa.averaged());
    counts[g->rank()] = wa.num_averaged();
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(counts[r], 4) << "rank " << r;
    ASSERT_EQ(got[r].size(), want.size()) << "rank " << r;
    for (const auto& [k, v] : want) {
      EXPECT_TRUE(testing::tensors_near(got[r].at(k), v, 1e-5)) << "rank " << r << " " << k;
    }
  }
}

TEST(WeightAveraging, Errors) {
  EXPECT_WEFT_ERROR(WeightAveraging({.avg_fn = optim::swa_avg_fn(), .multi_avg_fn = optim::swa_multi_avg_fn()}),
                    "WeightAveraging: Only one of avg_fn and multi_avg_fn should be provided");
  EXPECT_WEFT_ERROR(WeightAveraging({.every_steps = -1}), "every_steps must be >= 0 (0: once per epoch), got -1");
  auto m = model();
  Trainer t(Local{}, m, ce, sgd(sgd_options()));
  auto& wa = t.add<WeightAveraging>();
  EXPECT_WEFT_ERROR(wa.apply(), "WeightAveraging::apply: no average yet");
}

}  // namespace
}  // namespace weft::train
