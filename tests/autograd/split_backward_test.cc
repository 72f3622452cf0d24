// Note [split backward]: backward_input then backward_weight accumulate
// exactly what one backward does; the first half gives the inputs' gradients
// and leaves linear's weight gradients (Note [parameters first]) to the second,
// including a parameter that gets gradient from both halves.
#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "core/ops.h"
#include "core/rng.h"
#include "tests/testing.h"

namespace weft::autograd {
namespace {

using testing::tensors_near;

struct Net {
  Tensor w1 = randn({5, 4}).requires_grad_(true), b1 = randn({5}).requires_grad_(true);
  Tensor w2 = randn({3, 5}).requires_grad_(true), b2 = randn({3}).requires_grad_(true);
  Tensor forward(const Tensor& x) const { return linear(tanh(linear(x, w1, b1)), w2, b2); }
  std::vector<Tensor> params() const { return {w1, b1, w2, b2}; }
};

TEST(SplitBackward, HalvesEqualOneBackward) {
  manual_seed(1);
  Net net;
  Tensor x = randn({6, 4}).requires_grad_(true), g = randn({6, 3});
  backward({net.forward(x)}, {g});
  std::vector<Tensor> want = {x.grad()};
  for (auto& p : net.params()) want.push_back(p.grad());
  x.zero_grad();
  for (auto& p : net.params()) p.zero_grad();

  DeferredGrads rest = backward_input({net.forward(x)}, {g}, {x});
  EXPECT_TRUE(tensors_near(x.grad(), want[0], 1e-6));
  for (auto& p : net.params()) EXPECT_FALSE(p.grad().defined()) << "a weight gradient ran in the first half";
  EXPECT_FALSE(rest.empty());
  backward_weight(std::move(rest));
  for (size_t i = 0; i < 4; ++i) EXPECT_TRUE(tensors_near(net.params()[i].grad(), want[i + 1], 1e-6)) << i;
  EXPECT_TRUE(tensors_near(x.grad(), want[0], 1e-6));  // not accumulated twice
}

TEST(SplitBackward, AParameterFedByBothHalvesSumsOnce) {
  // out = linear(x, w) + x * w (x and w both 4x4): w's gradient comes from
  // linear's parameter part (second half) and from the product's node, which
  // also leads to x (first half).
  manual_seed(2);
  Tensor w = randn({4, 4}).requires_grad_(true);
  Tensor x = randn({4, 4}).requires_grad_(true), g = randn({4, 4});
  auto f = [&] { return add(linear(x, w), mul(x, w)); };
  backward({f()}, {g});
  Tensor want_x = x.grad().clone(), want_w = w.grad().clone();
  x.zero_grad();
  w.zero_grad();
  DeferredGrads rest = backward_input({f()}, {g}, {x});
  EXPECT_TRUE(tensors_near(x.grad(), want_x, 1e-6));
  EXPECT_FALSE(w.grad().defined());
  backward_weight(std::move(rest));
  EXPECT_TRUE(tensors_near(w.grad(), want_w, 1e-6));
}

TEST(SplitBackward, NoInputsDefersEverything) {
  manual_seed(3);
  Net net;
  Tensor x = randn({2, 4}), g = randn({2, 3});  // x needs no grad: the first stage of a pipeline
  backward({net.forward(x)}, {g});
  Tensor want = net.w1.grad().clone();
  net.w1.zero_grad();
  DeferredGrads rest = backward_input({net.forward(x)}, {g}, {});
  EXPECT_FALSE(net.w1.grad().defined());
  backward_weight(std::move(rest));
  EXPECT_TRUE(tensors_near(net.w1.grad(), want, 1e-6));
}

TEST(SplitBackward, InputsMustBeLeavesThatRequireGrad) {
  Tensor x = randn({2}).requires_grad_(true);
  Tensor y = mul(x, x);
  EXPECT_WEFT_ERROR(backward_input({sum(y)}, {}, {y}), "backward_input: input 0 must be a leaf that requires grad");
  EXPECT_WEFT_ERROR(backward_input({sum(y)}, {}, {randn({2})}), "backward_input: input 0");
}

}  // namespace
}  // namespace weft::autograd
