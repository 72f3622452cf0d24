// Note [deferred batch norm]: a BatchNorm fed a mini-batch as k micro-batches
// with set_deferred(k) ends with the running statistics of one forward on the
// whole mini-batch, while each micro-batch is normalised with its own
// statistics; and a checkpointed BatchNorm updates its running statistics once,
// not again when backward recomputes it.
#include <gtest/gtest.h>

#include "autograd/checkpoint.h"
#include "core/nn_ops.h"
#include "core/ops.h"
#include "core/rng.h"
#include "nn/nn.h"
#include "tests/testing.h"

namespace weft::nn {
namespace {

using testing::tensors_near;

TEST(DeferredBatchNorm, RunningStatisticsEqualTheWholeMiniBatchs) {
  for (int64_t dims : {2, 4}) {
    manual_seed(1);
    Tensor x = dims == 2 ? add(mul(randn({12, 3}), full({12, 3}, 2.0)), full({12, 3}, 0.5))
                         : add(randn({6, 3, 2, 2}), full({6, 3, 2, 2}, -1.0));
    std::shared_ptr<BatchNorm> whole, deferred;
    if (dims == 2) {
      whole = std::make_shared<BatchNorm1d>(3);
      deferred = std::make_shared<BatchNorm1d>(3);
    } else {
      whole = std::make_shared<BatchNorm2d>(3);
      deferred = std::make_shared<BatchNorm2d>(3);
    }
    deferred->set_deferred(3);
    for (int step = 0; step < 2; ++step) {
      (*whole)(x);
      const int64_t rows = x.size(0) / 3;
      for (int k = 0; k < 3; ++k) {
        Tensor part = x.narrow(0, k * rows, rows);
        Tensor y = (*deferred)(part);
        // Normalised with the micro-batch's own statistics.
        Tensor want = batch_norm(part, Tensor(), Tensor(), deferred->weight, deferred->bias, true);
        EXPECT_TRUE(tensors_near(y, want, 1e-6));
        if (k < 2) {
          EXPECT_EQ(deferred->num_batches_tracked.item<int64_t>(), step) << "committed early";
        }
      }
      EXPECT_TRUE(tensors_near(deferred->running_mean, whole->running_mean, 1e-6)) << dims << "D step " << step;
      EXPECT_TRUE(tensors_near(deferred->running_var, whole->running_var, 1e-6)) << dims << "D step " << step;
      EXPECT_EQ(deferred->num_batches_tracked.item<int64_t>(), step + 1);
    }
  }
}

TEST(DeferredBatchNorm, EvalModeUsesTheRunningStatistics) {
  auto bn = std::make_shared<BatchNorm1d>(2);
  bn->set_deferred(2);
  Tensor x = randn({4, 2});
  (*bn)(x.narrow(0, 0, 2));
  (*bn)(x.narrow(0, 2, 2));
  bn->eval();
  Tensor y = (*bn)(x);
  Tensor want = batch_norm(x, bn->running_mean, bn->running_var, bn->weight, bn->bias, false);
  EXPECT_TRUE(tensors_near(y, want, 1e-6));
  EXPECT_WEFT_ERROR(bn->set_deferred(-1), "BatchNorm1d: deferred chunks must be >= 0, got -1");
}

TEST(BatchNormCheckpoint, RecomputationDoesNotUpdateRunningStatisticsAgain) {
  manual_seed(2);
  Tensor x = randn({8, 3});
  auto plain = std::make_shared<BatchNorm1d>(3), ckpt = std::make_shared<BatchNorm1d>(3);
  sum((*plain)(x)).backward();
  Tensor y = autograd::checkpoint([&](const std::vector<Tensor>& in) { return (*ckpt)(in[0]); }, {x});
  sum(y).backward();  // recomputes ckpt's forward
  EXPECT_TRUE(tensors_near(ckpt->running_mean, plain->running_mean, 1e-7));
  EXPECT_TRUE(tensors_near(ckpt->running_var, plain->running_var, 1e-7));
  EXPECT_EQ(ckpt->num_batches_tracked.item<int64_t>(), 1);
  EXPECT_TRUE(tensors_near(ckpt->weight.grad(), plain->weight.grad(), 1e-6));
}

}  // namespace
}  // namespace weft::nn
