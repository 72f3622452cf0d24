// Backward order: AccumulateGrad runs as soon as it is ready, and linear and
// conv2d accumulate their weight and bias gradients (firing their
// post-accumulate hooks) before they compute the input gradient (Note
// [parameters first] in core/autograd_meta.h). Data-parallel training relies on
// this to start a layer's allreduce while the layer's input-gradient kernel runs.
#include <string>
#include <vector>

#include "core/autograd_meta.h"
#include "core/nn_ops.h"
#include "core/ops.h"
#include "core/rng.h"
#include "tests/testing.h"

namespace weft {
namespace {

using testing::tensors_near;

struct Log {
  std::vector<std::string> order;
  void watch(const Tensor& t, const std::string& name) {
    t.register_post_accumulate_grad_hook([this, name](const Tensor&) { order.push_back(name); });
  }
};

TEST(BackwardOrder, LinearAccumulatesWeightAndBiasBeforeInputGradient) {
  manual_seed(3);
  Tensor x = randn({4, 3}).requires_grad_(true);  // (N, in)
  Tensor w = randn({5, 3}).requires_grad_(true);  // (out, in)
  Tensor b = randn({5}).requires_grad_(true);     // (out)
  Log log;
  log.watch(x, "x");
  log.watch(w, "w");
  log.watch(b, "b");
  sum(linear(x, w, b)).backward();
  ASSERT_EQ(log.order.size(), 3u);
  EXPECT_EQ(log.order.back(), "x") << "the input gradient must come after the weight and bias";
  // d sum(x w^T + b) / dx = ones(N, out) w; / dw = ones(out, N) x; / db = N.
  EXPECT_TRUE(tensors_near(x.grad(), matmul(ones({4, 5}), w)));
  EXPECT_TRUE(tensors_near(w.grad(), matmul(ones({5, 4}), x)));
  EXPECT_TRUE(tensors_near(b.grad(), full({5}, 4.0)));
}

TEST(BackwardOrder, StackedLinearsReleaseWeightsFromLastLayerToFirst) {
  manual_seed(4);
  Tensor x = randn({6, 3});                        // (N, 3), no grad
  Tensor w1 = randn({4, 3}).requires_grad_(true);  // (4, 3)
  Tensor w2 = randn({2, 4}).requires_grad_(true);  // (2, 4)
  Tensor h = randn({6, 4}).requires_grad_(true);   // a leaf added to layer 1's output
  Log log;
  log.watch(w1, "w1");
  log.watch(w2, "w2");
  log.watch(h, "h");
  sum(linear(relu(linear(x, w1) + h), w2)).backward();
  // w2 is ready before layer 2's input gradient reaches h, and w1 comes last.
  EXPECT_EQ(log.order, (std::vector<std::string>{"w2", "h", "w1"}));
}

TEST(BackwardOrder, LinearOnlyInputOrOnlyWeightNeedsGrad) {
  manual_seed(5);
  Tensor x = randn({2, 7, 3});  // (B, T, in): batch dims folded into rows
  Tensor w = randn({5, 3});
  Tensor b = randn({5});
  Tensor xg = x.clone().requires_grad_(true);
  sum(linear(xg, w, b) * 2.0).backward();
  EXPECT_TRUE(tensors_near(xg.grad(), expand(matmul(full({1, 5}, 2.0), w), {2, 7, 3})));
  Tensor wg = w.clone().requires_grad_(true);
  sum(linear(x, wg) * 2.0).backward();
  EXPECT_TRUE(tensors_near(wg.grad(), matmul(full({5, 14}, 2.0), reshape(x, {14, 3}))));
}

TEST(BackwardOrder, Conv2dAccumulatesWeightAndBiasBeforeInputGradient) {
  manual_seed(6);
  Tensor x = randn({2, 3, 6, 5}).requires_grad_(true);  // (N, Cin, H, W)
  Tensor w = randn({4, 3, 3, 3}).requires_grad_(true);  // (Cout, Cin, kH, kW)
  Tensor b = randn({4}).requires_grad_(true);           // (Cout)
  Log log;
  log.watch(x, "x");
  log.watch(w, "w");
  log.watch(b, "b");
  Tensor y = conv2d(x, w, b, {1, 1}, {1, 1});  // (2, 4, 6, 5)
  Tensor r = randn(y.sizes());
  sum(y * r).backward();
  ASSERT_EQ(log.order.size(), 3u);
  EXPECT_EQ(log.order.back(), "x");
  // Against the one-node reference: autograd::grad through conv2d with x, w, b
  // each alone requiring grad (each then has a single backward node).
  Tensor x1 = x.detach().requires_grad_(true);
  sum(conv2d(x1, w.detach(), b.detach(), {1, 1}, {1, 1}) * r).backward();
  EXPECT_TRUE(tensors_near(x.grad(), x1.grad(), 1e-5));
  Tensor w1 = w.detach().requires_grad_(true), b1 = b.detach().requires_grad_(true);
  sum(conv2d(x.detach(), w1, b1, {1, 1}, {1, 1}) * r).backward();
  EXPECT_TRUE(tensors_near(w.grad(), w1.grad(), 1e-5));
  EXPECT_TRUE(tensors_near(b.grad(), b1.grad(), 1e-5));
  // b's gradient is the sum of r over (N, H, W).
  EXPECT_TRUE(tensors_near(b.grad(), sum(r, {0, 2, 3}), 1e-4));
}

TEST(BackwardOrder, LinearBiasDtypeMismatchIsAnError) {
  Tensor x = randn({2, 3});
  Tensor w = randn({4, 3});
  Tensor b = zeros({4}, {DType::Float64});
  EXPECT_WEFT_ERROR(linear(x, w, b), "linear: bias dtype");
}

}  // namespace
}  // namespace weft
