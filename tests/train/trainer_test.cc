// The single-process Trainer: equal, bitwise, to the loop written by hand
// (per-epoch losses, accuracies and final weights); the metrics file; LR
// schedules per step and per epoch; early stopping on a scripted value.
#include "train/trainer.h"

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/train/cases.h"
#include "train/callbacks.h"

namespace weft::train {
namespace {

using namespace testcases;  // NOLINT

Trainer local_trainer(std::shared_ptr<nn::Sequential> m, TrainerOptions o = {}) {
  return Trainer(Local{}, std::move(m), ce, sgd(sgd_options()), std::move(o));
}

TEST(Trainer, LocalEqualsTheHandWrittenLoopBitwise) {
  const int64_t epochs = 3;
  const Reference ref = hand_loop(epochs);
  auto m = model();
  Trainer t(Local{}, m, ce, sgd(sgd_options()));
  t.add<LRSchedule>(cosine(epochs));
  std::vector<std::vector<double>> step_acc;
  t.add<Lambda>(
      Lambda::Events{.epoch_begin = [&](Trainer&) { step_acc.emplace_back(); },
                     .step_end = [&](Trainer& tr) { step_acc.back().push_back(tr.state().running_metric()); }});
  io::DataLoader train = loader(dataset());
  t.fit(train, nullptr, epochs);
  ASSERT_EQ(t.state().history.size(), static_cast<size_t>(epochs));
  EXPECT_EQ(t.state().epoch, epochs);
  EXPECT_EQ(t.state().step, epochs * kRows / kBatch);
  for (int64_t e = 0; e < epochs; ++e) {
    EXPECT_EQ(t.state().history[e].train_loss, ref.train_loss[e]) << "epoch " << e + 1;
    EXPECT_EQ(t.state().history[e].train_metric, ref.train_accuracy[e]) << "epoch " << e + 1;
    EXPECT_EQ(step_acc[e], ref.step_accuracy[e]) << "epoch " << e + 1;
    EXPECT_TRUE(std::isnan(t.state().history[e].valid_loss));
  }
  for (const auto& [k, v] : weights(*m)) EXPECT_TRUE(testing::tensors_near(v, ref.weights.at(k), 0)) << k;
  EXPECT_LT(ref.train_loss.back(), ref.train_loss.front());  // it learns
}

// The step-driven form: step k trains batch_at(k); an evaluation period of 6 steps is an epoch of 6 batches.
// A training loader without batches is refused before any epoch is recorded
// (an empty dataset, or fewer examples than a batch with drop_last).
TEST(Trainer, FitRefusesALoaderWithoutBatches) {
  Trainer t(Local{}, model(), ce, sgd(sgd_options()));
  io::DataLoader empty = loader(dataset(0));
  EXPECT_WEFT_ERROR(t.fit(empty, nullptr, 2),
                    "Trainer::fit: the training loader has no batches (its dataset has 0 examples, batch_size 16): "
                    "nothing to train");
  io::DataLoader short_of_a_batch(dataset(10), {.batch_size = 16, .drop_last = true});
  EXPECT_WEFT_ERROR(t.fit(short_of_a_batch, nullptr, 2), "(its dataset has 10 examples, batch_size 16, drop_last)");
  EXPECT_TRUE(t.state().history.empty());
  EXPECT_EQ(t.state().epoch, 0);
  // with nothing left to train (epochs reached) it is not an error
  EXPECT_NO_THROW(t.fit(empty, nullptr, 0));
}

TEST(Trainer, FitStepsEqualsFitOnTheSameBatches) {
  auto ds = dataset();
  io::DataLoader order = loader(ds);
  std::vector<io::Batch> batches;
  for (int64_t e = 0; e < 2; ++e) {
    order.set_epoch(e);
    for (auto& b : order) batches.push_back(b);
  }
  auto a = model();
  Trainer by_epoch(Local{}, a, ce, sgd(sgd_options()));
  io::DataLoader train = loader(ds), valid(dataset(32, 5), {.batch_size = 16});
  by_epoch.fit(train, &valid, 2);
  auto b = model();
  Trainer by_step(Local{}, b, ce, sgd(sgd_options()));
  by_step.fit_steps([&](int64_t k) { return batches.at(k); }, 12, {.eval_every = 6, .valid = &valid});
  ASSERT_EQ(by_step.state().history.size(), 2u);
  for (size_t e = 0; e < 2; ++e) {
    EXPECT_EQ(by_step.state().history[e].step, static_cast<int64_t>(6 * (e + 1)));
    EXPECT_EQ(by_step.state().history[e].train_loss, by_epoch.state().history[e].train_loss);
    EXPECT_EQ(by_step.state().history[e].valid_loss, by_epoch.state().history[e].valid_loss);
  }
  for (const auto& [k, v] : weights(*a)) EXPECT_TRUE(testing::tensors_near(weights(*b).at(k), v, 0)) << k;
  // A last, shorter period: 7 steps in periods of 3 are 3 records, at steps 3, 6 and 7.
  Trainer short_tail(Local{}, model(), ce, sgd(sgd_options()));
  short_tail.fit_steps([&](int64_t k) { return batches.at(k); }, 7, {.eval_every = 3});
  ASSERT_EQ(short_tail.state().history.size(), 3u);
  EXPECT_EQ(short_tail.state().history.back().step, 7);
}

TEST(Trainer, EvaluateIsTheMeanLossAndAccuracyOverTheLoader) {
  auto ds = dataset(40, 11);
  auto m = model();
  Trainer t = local_trainer(m);
  io::DataLoader valid(ds, {.batch_size = 16});
  EvalResult e = t.evaluate(valid);
  Tensor out = (*m)(ds->data());
  EXPECT_NEAR(e.loss, cross_entropy(out, ds->targets()).item<double>(), 1e-6);
  EXPECT_EQ(e.metric, static_cast<double>((argmax(out, 1) == ds->targets()).sum().item<int64_t>()) / 40);
  EXPECT_EQ(e.rows, 40);
}

TEST(Trainer, MetricsJsonLinesMatchTheEpochs) {
  const std::string path = ::testing::TempDir() + "/trainer_metrics.jsonl";
  {
    std::ofstream stale(path);
    stale << "{\"epoch\": 99}\n";  // a fresh fit rewrites the file
  }
  auto ds = dataset();
  Trainer t = local_trainer(model(), {.valid_name = "test"});
  t.add<MetricsLog>(path);
  t.add<LRSchedule>(cosine(2));
  io::DataLoader train = loader(ds), valid(dataset(32, 5), {.batch_size = 16});
  t.fit(train, &valid, 2);
  std::ifstream in(path);
  std::string line;
  std::vector<nlohmann::json> rows;
  while (std::getline(in, line)) rows.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(rows.size(), 2u);
  for (size_t i = 0; i < rows.size(); ++i) {
    const EpochRecord& r = t.state().history[i];
    EXPECT_EQ(rows[i]["epoch"].get<int64_t>(), static_cast<int64_t>(i + 1));
    EXPECT_EQ(rows[i]["step"].get<int64_t>(), static_cast<int64_t>((i + 1) * kRows / kBatch));
    EXPECT_NEAR(rows[i]["train_loss"].get<double>(), r.train_loss, 1e-6);
    EXPECT_NEAR(rows[i]["train_accuracy"].get<double>(), r.train_metric, 1e-6);
    EXPECT_NEAR(rows[i]["test_loss"].get<double>(), r.valid_loss, 1e-6);
    EXPECT_NEAR(rows[i]["test_accuracy"].get<double>(), r.valid_metric, 1e-6);
    EXPECT_FALSE(std::isnan(r.valid_loss));
  }
  // Epoch 1's lr is the base lr; epoch 2's cosine-annealed over 2 epochs: 0.1 * (1 + cos(pi / 2)) / 2.
  EXPECT_NEAR(rows[0]["lr"].get<double>(), 0.1, 1e-12);
  EXPECT_NEAR(rows[1]["lr"].get<double>(), 0.05, 1e-12);
}

TEST(Trainer, LRScheduleStepsPerStepAndPerEpoch) {
  // StepLR(step_size 2, gamma 0.5): the lr of step k (0-based) is 0.1 * 0.5^(k / 2) per step, 0.1 * 0.5^(epoch / 2) per
  // epoch.
  for (auto every : {LRSchedule::Every::kStep, LRSchedule::Every::kEpoch}) {
    Trainer t = local_trainer(model());
    t.add<LRSchedule>([](optim::Optimizer& o) { return std::make_unique<optim::StepLR>(o, 2, 0.5); }, every);
    std::vector<double> lrs;
    t.add<Lambda>(Lambda::Events{.step_begin = [&](Trainer& tr) { lrs.push_back(tr.lr()); }});
    io::DataLoader train = loader(dataset());
    t.fit(train, nullptr, 3);
    const int64_t per_epoch = kRows / kBatch;
    ASSERT_EQ(lrs.size(), static_cast<size_t>(3 * per_epoch));
    for (size_t k = 0; k < lrs.size(); ++k) {
      const int64_t n =
          every == LRSchedule::Every::kStep ? static_cast<int64_t>(k) : static_cast<int64_t>(k) / per_epoch;
      EXPECT_DOUBLE_EQ(lrs[k], 0.1 * std::pow(0.5, static_cast<double>(n / 2))) << "step " << k;
    }
  }
}

// A scripted value per epoch, recorded in the history by a callback.
std::shared_ptr<Lambda> script(std::vector<double> values) {
  return std::make_shared<Lambda>(Lambda::Events{
      .epoch_end = [values](Trainer& t) { t.state().history.back().extra["score"] = values.at(t.state().epoch - 1); },
      .order = -5});
}

TEST(Trainer, EarlyStopStopsAtTheExpectedEpoch) {
  struct Case {
    std::vector<double> scores;
    EarlyStopOptions options;
    int64_t stop_after;  // 0: runs all epochs
  };
  using Mode = EarlyStopOptions::Mode;
  const std::vector<Case> cases = {
      // best 0.8 after epoch 2; epochs 3 and 4 do not improve: patience 2 stops after epoch 4.
      {{1.0, 0.8, 0.9, 0.85, 0.7, 0.6}, {.monitor = "score", .mode = Mode::kMin, .patience = 2}, 4},
      // min_delta 0.05: 0.78 and 0.76 are not improvements over 0.8.
      {{1.0, 0.8, 0.78, 0.76, 0.5, 0.4}, {.monitor = "score", .mode = Mode::kMin, .patience = 2, .min_delta = 0.05}, 4},
      // max mode: rises, then falls once: patience 1 stops after epoch 4.
      {{0.1, 0.2, 0.3, 0.25, 0.4, 0.5}, {.monitor = "score", .mode = Mode::kMax, .patience = 1}, 4},
      // always improving: never stops.
      {{6, 5, 4, 3, 2, 1}, {.monitor = "score", .mode = Mode::kMin, .patience = 1}, 0},
  };
  for (const Case& c : cases) {
    Trainer t = local_trainer(model());
    t.add(script(c.scores));
    auto& stop = t.add<EarlyStop>(c.options);
    int64_t epochs_begun = 0;
    t.add<Lambda>(Lambda::Events{.epoch_begin = [&](Trainer&) { ++epochs_begun; }});
    io::DataLoader train = loader(dataset());
    t.fit(train, nullptr, 6);
    const int64_t expected = c.stop_after ? c.stop_after : 6;
    EXPECT_EQ(t.state().epoch, expected);
    EXPECT_EQ(epochs_begun, expected);
    EXPECT_EQ(stop.stopped_epoch(), c.stop_after);
  }
}

TEST(Trainer, EarlyStopMonitorsTheValidationLossByDefaultAndAMissingValueNeverImproves) {
  Trainer t = local_trainer(model());
  auto& stop = t.add<EarlyStop>();  // "valid_loss", patience 1
  io::DataLoader train = loader(dataset());
  t.fit(train, nullptr, 3);  // no validation: valid_loss is NaN
  EXPECT_EQ(stop.stopped_epoch(), 1);
  EXPECT_EQ(t.state().epoch, 1);
  EXPECT_WEFT_ERROR(
      t.state().history.back().get("nope", "accuracy", "valid"),
      "no value named 'nope' (known: epoch, step, train_loss, train_accuracy, valid_loss, valid_accuracy");
}

}  // namespace
}  // namespace weft::train
