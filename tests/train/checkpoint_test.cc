// The Trainer's checkpoints: every N steps into root/step-<N> with keep-last
// rotation; resuming from the latest (mid-epoch and at an epoch's end, and
// a step-driven run stopped between evaluations) and from an io/checkpoint
// single file reproduces the uninterrupted run exactly; resume errors name
// the path.
#include "io/checkpoint.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "parallel/checkpoint/reader.h"
#include "parallel/checkpoint/rotation.h"
#include "tests/parallel/checkpoint/tamper.h"
#include "tests/train/cases.h"
#include "train/callbacks.h"
#include "train/trainer.h"

namespace weft::train {
namespace {

using namespace testcases;  // NOLINT
namespace fs = std::filesystem;

struct TrainRun {
  std::vector<EpochRecord> history;
  std::map<std::string, Tensor> weights;
  int64_t step = 0;
};

// Fits `epochs` with the cosine schedule; `setup` adds callbacks or resumes first. A resumed run
// starts from other weights than the reference: loading must replace them all.
TrainRun fit(int64_t epochs, const std::function<void(Trainer&)>& setup = nullptr, bool resumed = false,
             const OptimizerFactory& optimizer = sgd(sgd_options())) {
  auto m = model(resumed ? kSeed + 1 : kSeed);
  Trainer t(Local{}, m, ce, optimizer, {.valid_name = "test"});
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

TEST(TrainerCheckpoint, ResumeEqualsTheUninterruptedRunWithEachOptimizersState) {
  const std::vector<std::pair<std::string, OptimizerFactory>> optimizers = {
      {"rmsprop", rmsprop({.lr = 0.01, .weight_decay = 1e-3, .momentum = 0.5, .centered = true})},
      {"adagrad", adagrad({.lr = 0.05, .lr_decay = 0.01, .initial_accumulator_value = 0.1})},
      {"adam_amsgrad", adam({.lr = 0.01, .amsgrad = true})}};
  for (const auto& [name, optimizer] : optimizers) {
    SCOPED_TRACE(name);
    const TrainRun full = fit(2, nullptr, false, optimizer);
    EXPECT_LT(full.history.back().train_loss, full.history.front().train_loss);
    const std::string root = fresh_dir("resume_" + name);
    fit(
        2,
        [&](Trainer& t) {
          t.add<Checkpoint>(CheckpointOptions{.root = root, .every_steps = 4, .quiet = true});
          stop_at_step(5)(t);
        },
        false, optimizer);
    const TrainRun resumed = fit(
        2, [&](Trainer& t) { t.resume(root); }, true, optimizer);
    expect_same(full, resumed);
  }
}

// StepLog: each step's (step, epoch, loss) as read back from the file.
std::vector<std::tuple<int64_t, int64_t, double>> step_log(const std::string& path) {
  std::vector<std::tuple<int64_t, int64_t, double>> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    out.emplace_back(j.at("step").get<int64_t>(), j.at("epoch").get<int64_t>(), j.at("loss").get<double>());
  }
  return out;
}

TEST(TrainerCheckpoint, StepLogHoldsEveryStepOnceAcrossAResume) {
  // The uninterrupted run's losses, step by step (6 steps per epoch, 18 in all), from a Lambda.
  std::vector<double> losses;
  const std::string full_log = fresh_dir("step_log_full") + ".jsonl";
  fit(3, [&](Trainer& t) {
    t.add<Lambda>(Lambda::Events{.step_end = [&](Trainer& tr) { losses.push_back(tr.state().loss); }});
    t.add<StepLog>(full_log);
  });
  ASSERT_EQ(losses.size(), 18u);
  const auto full = step_log(full_log);
  ASSERT_EQ(full.size(), 18u);
  for (size_t k = 0; k < full.size(); ++k) {
    EXPECT_EQ(std::get<0>(full[k]), static_cast<int64_t>(k) + 1);
    EXPECT_EQ(std::get<1>(full[k]), static_cast<int64_t>(k) / 6) << "step " << k + 1;
    EXPECT_EQ(std::get<2>(full[k]), losses[k]) << "step " << k + 1;  // 17 digits read back bitwise
  }
  // Stopped at step 10 with the latest checkpoint at step 7: the log has steps 1..10; resumed, steps 8..10
  // of the stopped run are dropped and trained again, and the log equals the uninterrupted one.
  const std::string root = fresh_dir("step_log_resume"), log = root + ".jsonl";
  fit(3, [&](Trainer& t) {
    t.add<Checkpoint>(CheckpointOptions{.root = root, .every_steps = 7, .keep_last = 1, .quiet = true});
    t.add<StepLog>(log);
    stop_at_step(10)(t);
  });
  ASSERT_EQ(step_log(log).size(), 10u);
  fit(
      3,
      [&](Trainer& t) {
        t.add<StepLog>(log);
        t.resume(root);
      },
      true);
  EXPECT_EQ(step_log(log), full);
  // A line that is not a step record is named: one without a step, and one
  // whose step does not fit an int64.
  std::vector<std::string> lines;
  {
    std::ifstream in(log);
    for (std::string l; std::getline(in, l);) lines.push_back(l);
  }
  ASSERT_EQ(lines.size(), 18u);
  for (const char* bad : {"{\"epoch\": 1}", "{\"step\": 99999999999999999999, \"epoch\": 1, \"loss\": 0.5}"}) {
    {
      std::ofstream out(log, std::ios::trunc);
      for (const std::string& l : lines) out << l << "\n";
      out << bad << "\n";
    }
    try {
      fit(
          3,
          [&](Trainer& t) {
            t.add<StepLog>(log);
            t.resume(root);
          },
          true);
      ADD_FAILURE() << "a damaged step log was accepted: " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(log + " line 19 is not a step record"), std::string::npos) << e.what();
    }
  }
}

// The step-driven form, as the GPT example runs it: an evaluation every 4 steps, a Checkpoint at each (the
// default: every period), the LR stepped per step, to 16 steps.
struct StepsRun {
  std::vector<double> losses;  // each step's
  std::vector<EpochRecord> history;
  std::map<std::string, Tensor> weights;
  int64_t step = 0;
};

constexpr int64_t kSteps = 16, kEvalEvery = 4;

// Trains to max_steps (resuming from `root` first when `resume`), saving into `root` and writing `metrics`.
// `every`: the cosine schedule over kSteps steps (kStep) or over the kSteps / kEvalEvery periods (kEpoch).
StepsRun run_steps(int64_t max_steps, const std::string& root, const std::string& metrics, bool resume,
                   LRSchedule::Every every = LRSchedule::Every::kStep) {
  auto ds = dataset();
  io::DataLoader order = loader(ds);
  std::vector<io::Batch> batches;
  for (int64_t e = 0; static_cast<int64_t>(batches.size()) < kSteps; ++e) {
    order.set_epoch(e);
    for (auto& b : order) batches.push_back(b);
  }
  auto m = model(resume ? kSeed + 1 : kSeed);
  Trainer t(Local{}, m, ce, sgd(sgd_options()), {.valid_name = "test"});
  t.add<LRSchedule>(cosine(every == LRSchedule::Every::kStep ? kSteps : kSteps / kEvalEvery), every);
  StepsRun run;
  t.add<Lambda>(Lambda::Events{.step_end = [&](Trainer& tr) { run.losses.push_back(tr.state().loss); }});
  t.add<MetricsLog>(metrics);
  t.add<Checkpoint>(CheckpointOptions{.root = root, .quiet = true});
  if (resume) t.resume(root);
  io::DataLoader valid(dataset(32, 5), {.batch_size = 16});
  t.fit_steps([&](int64_t k) { return batches.at(k); }, max_steps, {.eval_every = kEvalEvery, .valid = &valid});
  run.history = t.state().history;
  run.weights = weights(*m);
  run.step = t.state().step;
  return run;
}

// The history a new Trainer resumed from the root's latest checkpoint has.
std::vector<EpochRecord> saved_history(const std::string& root) {
  Trainer t(Local{}, model(), ce, sgd(sgd_options()));
  t.resume(root);
  t.prepare();
  return t.state().history;
}

// The (epoch, step) of each line of a metrics file.
std::vector<std::pair<int64_t, int64_t>> metrics_periods(const std::string& path) {
  std::vector<std::pair<int64_t, int64_t>> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    out.emplace_back(j.at("epoch").get<int64_t>(), j.at("step").get<int64_t>());
  }
  return out;
}

void expect_same_history(const std::vector<EpochRecord>& a, const std::vector<EpochRecord>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t e = 0; e < a.size(); ++e) {
    EXPECT_EQ(a[e].epoch, b[e].epoch) << "record " << e;
    EXPECT_EQ(a[e].step, b[e].step) << "record " << e;
    EXPECT_EQ(a[e].train_loss, b[e].train_loss) << "record " << e;
    EXPECT_EQ(a[e].train_metric, b[e].train_metric) << "record " << e;
    EXPECT_EQ(a[e].valid_loss, b[e].valid_loss) << "record " << e;
    EXPECT_EQ(a[e].valid_metric, b[e].valid_metric) << "record " << e;
    EXPECT_EQ(a[e].lr, b[e].lr) << "record " << e;
  }
}

TEST(TrainerCheckpoint, FitStepsStoppedBetweenEvaluationsAndResumedEqualsTheUninterruptedRun) {
  const std::string full_root = fresh_dir("steps_full"), root = fresh_dir("steps_stopped");
  const std::string full_metrics = full_root + ".jsonl", metrics = root + ".jsonl";
  const StepsRun full = run_steps(kSteps, full_root, full_metrics, false);
  ASSERT_EQ(full.history.size(), 4u);  // periods 1..4 at steps 4, 8, 12, 16
  for (size_t e = 0; e < 4; ++e) {
    EXPECT_EQ(full.history[e].epoch, static_cast<int64_t>(e + 1));
    EXPECT_EQ(full.history[e].step, static_cast<int64_t>(kEvalEvery * (e + 1)));
  }
  // Stopped at step 10 (max_steps 10, as a program's --stop-after does): period 3 is evaluated and saved
  // after 2 of its 4 steps. The resumed run trains steps 11..16 from that checkpoint.
  const StepsRun stopped = run_steps(10, root, metrics, false);
  EXPECT_EQ(steps_under(root), (std::vector<int64_t>{4, 8, 10}));
  ASSERT_EQ(stopped.history.size(), 3u);
  EXPECT_EQ(stopped.history.back().epoch, 3);
  EXPECT_EQ(stopped.history.back().step, 10);
  const StepsRun resumed = run_steps(kSteps, root, metrics, true);
  EXPECT_EQ(steps_under(root), (std::vector<int64_t>{4, 8, 10, 12, 16}));

  std::vector<double> losses = stopped.losses;
  losses.insert(losses.end(), resumed.losses.begin(), resumed.losses.end());
  EXPECT_EQ(losses, full.losses);
  // Period 3 is the one of steps 9..12, its training loss over those 4 steps, as uninterrupted.
  expect_same_history(full.history, resumed.history);
  EXPECT_EQ(resumed.step, full.step);
  for (const auto& [k, v] : full.weights) EXPECT_TRUE(testing::tensors_near(resumed.weights.at(k), v, 0)) << k;
  // The last checkpoint and the metrics file hold the same periods as the uninterrupted run's.
  expect_same_history(saved_history(full_root), saved_history(root));
  expect_same_history(full.history, saved_history(root));
  EXPECT_EQ(metrics_periods(metrics), metrics_periods(full_metrics));
}

TEST(TrainerCheckpoint, FitStepsStoppedBetweenEvaluationsStepsAPerPeriodScheduleAsTheUninterruptedRun) {
  // The schedule steps once per period (4 steps): stopped at step 10 inside period 3, whose record is
  // made and saved then, the schedule must not step for period 3 until its real end at step 12.
  const std::string full_root = fresh_dir("period_sched_full"), root = fresh_dir("period_sched_stopped");
  const auto every = LRSchedule::Every::kEpoch;
  const StepsRun full = run_steps(kSteps, full_root, full_root + ".jsonl", false, every);
  const StepsRun stopped = run_steps(10, root, root + ".jsonl", false, every);
  ASSERT_EQ(stopped.history.size(), 3u);
  EXPECT_EQ(stopped.history.back().step, 10);
  // the LR of steps 9..10 (period 3), as uninterrupted, is what the record holds
  EXPECT_EQ(stopped.history.back().lr, full.history[2].lr);
  EXPECT_NE(full.history[2].lr, full.history[3].lr);  // the schedule changes the LR each period
  const StepsRun resumed = run_steps(kSteps, root, root + ".jsonl", true, every);
  std::vector<double> losses = stopped.losses;
  losses.insert(losses.end(), resumed.losses.begin(), resumed.losses.end());
  EXPECT_EQ(losses, full.losses);
  expect_same_history(full.history, resumed.history);
  for (const auto& [k, v] : full.weights) EXPECT_TRUE(testing::tensors_near(resumed.weights.at(k), v, 0)) << k;
  expect_same_history(full.history, saved_history(root));
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

// Note [checkpoint cross-checks] (parallel/checkpoint/consistency.h): a resume from a checkpoint whose
// trainer_state.json was edited and re-signed (its checksum agrees) is refused naming the file and the field,
// never with a bare JSON exception; the untouched checkpoint still resumes.
TEST(TrainerCheckpoint, ResumeRefusesABrokenTrainerStateNamingTheFileAndField) {
  namespace tamper = parallel::checkpoint::tamper;
  const std::string root = fresh_dir("broken_state");
  fit(1, [&](Trainer& t) { t.add<Checkpoint>(CheckpointOptions{.root = root, .quiet = true}); });
  const std::string good = root + "/step-00000006";
  ASSERT_TRUE(fs::exists(good + "/manifest.json"));
  auto copy = [&](const std::string& name) {
    const std::string d = fresh_dir(name) + "/step-00000006";
    fs::create_directories(d);
    fs::copy(good, d, fs::copy_options::recursive);
    return d;
  };
  auto resume = [](const std::string& d) { return [d](Trainer& t) { t.resume(d); }; };
  // Not JSON: the parser's message, with the file's path.
  std::string d = copy("broken_state_text");
  tamper::edit_file(d, "trainer_state.json", [](std::string& b) { b.resize(b.size() / 2); });
  EXPECT_WEFT_ERROR(fit(2, resume(d), true),
                    "checkpoint '" + d + "': '" + d + "/trainer_state.json' is not valid JSON: [json.exception");
  // A field of the wrong type.
  d = copy("broken_state_step");
  tamper::edit_json(d, "trainer_state.json", [](nlohmann::json& j) { j["step"] = "six"; });
  EXPECT_WEFT_ERROR(fit(2, resume(d), true),
                    "'" + d + "/trainer_state.json': \"step\" must be an integer (it is \"six\")");
  // A field that disagrees with the manifest's (an end-of-epoch save: epoch 1, batch 0).
  d = copy("broken_state_batch");
  tamper::edit_json(d, "trainer_state.json", [](nlohmann::json& j) { j["batch"] = 3; });
  EXPECT_WEFT_ERROR(fit(2, resume(d), true),
                    "checkpoint '" + d + "': manifest.json batch 0 disagrees with trainer_state.json batch 3");
  d = copy("broken_state_epoch");
  tamper::edit_manifest(d, [](nlohmann::json& m) { m["epoch"] = 2; });
  EXPECT_WEFT_ERROR(fit(2, resume(d), true),
                    "checkpoint '" + d + "': manifest.json epoch 2 disagrees with trainer_state.json epoch 1");
  // The untouched checkpoint resumes, and a resumed run ends where an uninterrupted one does.
  EXPECT_EQ(fit(2, resume(good), true).step, fit(2).step);
}

}  // namespace
}  // namespace weft::train
