// Preemption (train/preemption.h): a signal stops every rank at the same step
// boundary with a committed checkpoint there, from which a resumed run ends
// bitwise where the uninterrupted one does; the previous handlers come back
// after fit; bad signals are refused.
#include "train/preemption.h"

#include <csignal>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "parallel/checkpoint/rotation.h"
#include "parallel/comm/inproc/testing.h"
#include "tests/testing.h"
#include "tests/train/cases.h"
#include "train/callbacks.h"
#include "train/trainer.h"

namespace weft::train {
namespace {

using namespace testcases;  // NOLINT

constexpr int64_t kEpochs = 3;

struct FitRun {
  std::map<std::string, Tensor> weights;
  int64_t step = 0;
  bool preempted = false;
  int signal = 0, rank = -1;
};

// Fits kEpochs on one process; with a root, checkpoints every epoch there and
// stops on SIGUSR1, which a callback raises after step `raise_at` (0: never).
FitRun fit_local(const std::string& root, int64_t raise_at, bool resume = false) {
  auto m = model(resume ? kSeed + 1 : kSeed);
  Trainer t(Local{}, m, ce, sgd(sgd_options()), {.valid_name = "test"});
  t.add<LRSchedule>(cosine(kEpochs));
  Preemption* pre = nullptr;
  if (!root.empty()) {
    auto& ck = t.add<Checkpoint>(CheckpointOptions{.root = root, .quiet = true});
    pre = &t.add<Preemption>(PreemptionOptions{.checkpoint = &ck});
    t.add<Lambda>(Lambda::Events{.step_end = [raise_at](Trainer& tr) {
      if (tr.state().step == raise_at) std::raise(SIGUSR1);  // the scheduler's warning
    }});
    if (resume) t.resume(root);
  }
  io::DataLoader train = loader(dataset()), valid(dataset(32, 5), {.batch_size = 16});
  t.fit(train, &valid, kEpochs);
  FitRun r{weights(*m), t.state().step};
  if (pre) r.preempted = pre->preempted(), r.signal = pre->signal(), r.rank = pre->rank();
  return r;
}

TEST(Preemption, StopsAtTheStepSavesThereAndResumesExactly) {
  const FitRun ref = fit_local("", 0);
  const std::string root = fresh_dir("preempt_local");
  // kRows / kBatch = 6 steps per epoch: step 5 is inside the first (a mid-epoch save).
  const FitRun cut = fit_local(root, 5);
  EXPECT_TRUE(cut.preempted);
  EXPECT_EQ(cut.signal, SIGUSR1);
  EXPECT_EQ(cut.rank, 0);
  EXPECT_EQ(cut.step, 5);
  const std::vector<int64_t> saved = steps_under(root);
  ASSERT_FALSE(saved.empty());
  EXPECT_EQ(saved.back(), 5);  // the stop's own save, committed at fit end
  const FitRun resumed = fit_local(root, -1, /*resume=*/true);
  EXPECT_FALSE(resumed.preempted);
  EXPECT_EQ(resumed.step, ref.step);
  for (const auto& [k, v] : ref.weights) EXPECT_TRUE(testing::tensors_near(resumed.weights.at(k), v, 0)) << k;
}

int g_seen = 0;
extern "C" void count_signal(int) { ++g_seen; }

TEST(Preemption, PreviousHandlersComeBackAfterFit) {
  struct sigaction mine {
  }, old{};
  mine.sa_handler = count_signal;
  sigemptyset(&mine.sa_mask);
  ASSERT_EQ(sigaction(SIGUSR1, &mine, &old), 0);
  g_seen = 0;
  const FitRun r = fit_local(fresh_dir("preempt_restore"), 2);
  EXPECT_TRUE(r.preempted);
  EXPECT_EQ(g_seen, 0);  // during fit the signal was Preemption's
  std::raise(SIGUSR1);
  EXPECT_EQ(g_seen, 1);  // after it, ours again
  sigaction(SIGUSR1, &old, nullptr);
}

// Two ranks (threads of one process, as under an in-process group): rank 1
// raises SIGTERM after step 3; both stop at that step and agree on the
// signal, with the stop's checkpoint committed. (Both threads share the
// process's signal, so either may count as the rank that received it.)
TEST(Preemption, EveryRankStopsAtTheSameStep) {
  const std::string root = fresh_dir("preempt_ranks");
  std::vector<int64_t> steps(2, -1);
  std::vector<int> signals(2, 0);
  std::vector<std::shared_ptr<nn::Sequential>> models{model(kSeed), model(kSeed)};
  parallel::run_ranks(2, [&](std::shared_ptr<parallel::ProcessGroup> g) {
    const int r = g->rank();
    Trainer t(DataParallel{.group = g}, models[r], ce, sgd(sgd_options()), {.valid_name = "test"});
    auto& ck = t.add<Checkpoint>(CheckpointOptions{.root = root, .quiet = true});
    auto& pre = t.add<Preemption>(PreemptionOptions{.checkpoint = &ck});
    t.add<Lambda>(Lambda::Events{.step_end = [r](Trainer& tr) {
      if (r == 1 && tr.state().step == 3) std::raise(SIGTERM);
    }});
    io::DataLoader train = loader(dataset()), valid(dataset(32, 5), {.batch_size = 16});
    t.fit(train, &valid, kEpochs);
    steps[r] = t.state().step;
    signals[r] = pre.signal();
  });
  EXPECT_EQ(steps, (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(signals, (std::vector<int>{SIGTERM, SIGTERM}));
  EXPECT_EQ(steps_under(root).back(), 3);
}

TEST(Preemption, RefusesSignalsItCannotHandle) {
  EXPECT_WEFT_ERROR(Preemption(PreemptionOptions{.signals = {SIGKILL}}), "Preemption: signal 9 cannot be handled");
  EXPECT_WEFT_ERROR(Preemption(PreemptionOptions{.signals = {}}), "Preemption: no signals to stop on");
  EXPECT_EQ(kResumeExitCode, 75);
}

}  // namespace
}  // namespace weft::train
