// LocalPipe (one process, a thread per device; all devices are the CPU here):
// SGD training equals one process for each schedule; forward() equals the
// whole model; a step whose stage throws fails naming it and the next step
// runs; dropout draws are reproducible and recomputed with the same masks;
// argument errors.
#include "parallel/pipe/local_pipe.h"

#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/nn_ops.h"
#include "core/ops.h"
#include "core/rng.h"
#include "nn/nn.h"
#include "optim/sgd.h"
#include "tests/testing.h"

namespace weft::parallel::pipe {
namespace {

constexpr int64_t kIn = 5, kHidden = 9, kOut = 2;

std::shared_ptr<nn::Sequential> make_mlp() {
  manual_seed(31);
  auto m = std::make_shared<nn::Sequential>();
  for (int i = 0; i < 4; ++i) {
    m->push_back(std::make_shared<nn::Linear>(i == 0 ? kIn : kHidden, i == 3 ? kOut : kHidden));
    m->push_back(std::make_shared<nn::Tanh>());
  }
  return m;
}

Tensor mse(const Tensor& out, const Tensor& target) { return mse_loss(out, target); }

TEST(LocalPipe, TrainingEqualsOneProcess) {
  struct Case {
    ScheduleKind kind;
    int devices, virtual_stages;
    std::vector<int> balance;
  };
  for (const Case& c :
       {Case{ScheduleKind::kGPipe, 2, 1, {3, 5}}, Case{ScheduleKind::k1F1B, 3, 1, {2, 2, 4}},
        Case{ScheduleKind::kInterleaved1F1B, 2, 2, {2, 2, 2, 2}}, Case{ScheduleKind::kZeroBubbleH1, 2, 1, {4, 4}},
        Case{ScheduleKind::kZeroBubbleV, 2, 2, {2, 2, 2, 2}},
        Case{ScheduleKind::kZeroBubbleV, 4, 2, std::vector<int>(8, 1)},
        Case{ScheduleKind::kInterleavedZeroBubble, 2, 2, {2, 2, 2, 2}}}) {
    SCOPED_TRACE(schedule_name(c.kind));
    manual_seed(6);
    std::vector<Tensor> xs, ys;
    for (int k = 0; k < 3; ++k) {
      xs.push_back(randn({10, kIn}));
      ys.push_back(randn({10, kOut}));
    }
    auto whole = make_mlp(), piped = make_mlp();
    optim::SGD a(whole->parameters(), {0.1, 0.9}), b(piped->parameters(), {0.1, 0.9});
    PipeOptions o;
    o.chunks = 4;
    o.schedule = c.kind;
    o.virtual_stages = c.virtual_stages;
    LocalPipe pipe(piped, c.balance, std::vector<Device>(c.devices, kCPU), o);
    ASSERT_EQ(pipe.parameters().size(), piped->parameters().size());
    for (size_t k = 0; k < xs.size(); ++k) {
      a.zero_grad();
      Tensor want = mse(whole->forward(xs[k]), ys[k]);
      want.backward();
      a.step();
      b.zero_grad();
      EXPECT_NEAR(pipe.step(xs[k], ys[k], mse), want.item<double>(), 1e-6) << "step " << k;
      b.step();
    }
    auto w = whole->named_parameters(), p = piped->named_parameters();
    for (size_t i = 0; i < w.size(); ++i)
      EXPECT_TRUE(testing::tensors_near(p[i].second, w[i].second, 1e-5)) << w[i].first;
    EXPECT_TRUE(testing::tensors_near(pipe.forward(xs[0]), whole->forward(xs[0]).detach(), 1e-6));
  }
}

TEST(LocalPipe, AFailingStageFailsTheStepAndTheNextStepRuns) {
  auto model = make_mlp();
  PipeOptions o;
  o.chunks = 2;
  LocalPipe pipe(model, {4, 4}, {kCPU, kCPU}, o);
  pipe.set_timeout(std::chrono::seconds(20));
  // Input of the wrong width: stage 0's first Linear throws on its F.
  EXPECT_WEFT_ERROR(pipe.step(randn({4, kIn + 1}), randn({4, kOut}), mse), "run_ranks: rank 0 of 2 failed");
  EXPECT_WEFT_ERROR(pipe.step(randn({4, kIn + 1}), randn({4, kOut}), mse), "(F0.0, micro-batch 0) failed");
  const double loss = pipe.step(randn({4, kIn}), randn({4, kOut}), mse);
  EXPECT_GT(loss, 0);
}

// Dropout in both partitions: every device's thread draws from a stream of
// its own, forked from the caller's generator at each step. So a step is
// reproducible after manual_seed, checkpointed micro-batches redraw the
// masks of the plain step, and the next step draws new masks.
TEST(LocalPipe, DropoutIsReproducibleAndRecomputedWithTheSameMasks) {
  auto make = [] {
    manual_seed(41);
    return nn::Sequential::of(std::make_shared<nn::Linear>(kIn, kHidden), std::make_shared<nn::Dropout>(0.5),
                              std::make_shared<nn::Tanh>(), std::make_shared<nn::Linear>(kHidden, kHidden),
                              std::make_shared<nn::Dropout>(0.5), std::make_shared<nn::Linear>(kHidden, kOut));
  };
  manual_seed(42);
  const Tensor x = randn({8, kIn}), y = randn({8, kOut});
  struct Run {
    double first, second;
    std::vector<Tensor> grads;  // after the first step
  };
  auto run = [&](CheckpointMode mode) {
    auto model = make();
    PipeOptions o;
    o.chunks = 4;
    o.checkpoint = mode;
    LocalPipe pipe(model, {3, 3}, {kCPU, kCPU}, o);
    Run out;
    manual_seed(7);
    out.first = pipe.step(x, y, mse);
    for (const Tensor& p : pipe.parameters()) out.grads.push_back(p.grad().clone());
    out.second = pipe.step(x, y, mse);  // gradients accumulate; the loss is the forward's
    return out;
  };
  const Run plain = run(CheckpointMode::kNever), again = run(CheckpointMode::kNever),
            recomputed = run(CheckpointMode::kAlways);
  EXPECT_EQ(plain.first, again.first);
  EXPECT_EQ(plain.first, recomputed.first);
  EXPECT_NE(plain.first, plain.second) << "the second step drew the first step's masks";
  ASSERT_EQ(plain.grads.size(), recomputed.grads.size());
  for (size_t i = 0; i < plain.grads.size(); ++i) {
    EXPECT_TRUE(testing::tensors_near(recomputed.grads[i], plain.grads[i], 0)) << "parameter " << i;
    EXPECT_TRUE(testing::tensors_near(again.grads[i], plain.grads[i], 0)) << "parameter " << i;
  }
}

TEST(LocalPipe, ArgumentErrorsAreNamed) {
  auto model = make_mlp();
  EXPECT_WEFT_ERROR(LocalPipe(model, {4, 4}, {}), "LocalPipe: no devices");
  EXPECT_WEFT_ERROR(LocalPipe(model, {4, 4}, {kCPU, kCPU, kCPU}),
                    "Pipe: balance [4, 4] has 2 stages but the group has 3 rank(s)");
  EXPECT_WEFT_ERROR(LocalPipe(nullptr, {4, 4}, {kCPU, kCPU}), "LocalPipe: module is null");
  LocalPipe ok(model, {6, 2}, {kCPU, kCPU});
  EXPECT_EQ(ok.partitions().size(), 2u);
  EXPECT_EQ(ok.partitions()[1]->named_parameters().front().first, "6.weight");
  EXPECT_EQ(ok.device_of_stage(1), kCPU);
}

}  // namespace
}  // namespace weft::parallel::pipe
