// Gradients of the elementwise ops: gradcheck (float64 central differences)
// for every differentiable op, including broadcasting and in-place forms, plus
// the PyTorch conventions at kinks checked by hand.
#include <cmath>
#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "autograd/gradcheck.h"
#include "core/ops.h"
#include "tests/testing.h"

namespace weft {
namespace {
using testing::tensor_near;

Tensor leaf(const std::vector<double>& v, const Shape& s) { return tensor(v, s).requires_grad_(); }

void expect_gradcheck(const std::string& name, const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                      const std::vector<Tensor>& inputs) {
  auto r = autograd::gradcheck(fn, inputs);
  EXPECT_TRUE(r.ok) << name << ": " << r.message;
}

// values away from 0 (kinks of abs/relu/sign) and from clamp bounds
const std::vector<double> kAny = {-2.1, -0.7, -0.3, 0.4, 0.9, 1.8};
const std::vector<double> kPos = {0.3, 0.7, 1.1, 1.6, 2.2, 3.1};

TEST(ElementwiseGrad, UnaryOps) {
  struct C {
    std::string name;
    std::function<Tensor(const Tensor&)> op;
    const std::vector<double>* in;
  };
  std::vector<C> cases = {
      {"neg", [](const Tensor& t) { return neg(t); }, &kAny},
      {"exp", [](const Tensor& t) { return exp(t); }, &kAny},
      {"log", [](const Tensor& t) { return log(t); }, &kPos},
      {"sqrt", [](const Tensor& t) { return sqrt(t); }, &kPos},
      {"rsqrt", [](const Tensor& t) { return rsqrt(t); }, &kPos},
      {"abs", [](const Tensor& t) { return abs(t); }, &kAny},
      {"relu", [](const Tensor& t) { return relu(t); }, &kAny},
      {"gelu", [](const Tensor& t) { return gelu(t); }, &kAny},
      {"gelu_tanh", [](const Tensor& t) { return gelu(t, GeluApproximation::Tanh); }, &kAny},
      {"silu", [](const Tensor& t) { return silu(t); }, &kAny},
      {"sigmoid", [](const Tensor& t) { return sigmoid(t); }, &kAny},
      {"tanh", [](const Tensor& t) { return tanh(t); }, &kAny},
      {"clamp", [](const Tensor& t) { return clamp(t, -1.0, 1.0); }, &kAny},
      {"clamp_min", [](const Tensor& t) { return clamp(t, 0.0, std::nullopt); }, &kAny},
      {"clamp_max", [](const Tensor& t) { return clamp(t, std::nullopt, 0.5); }, &kAny},
      {"sign", [](const Tensor& t) { return sign(t); }, &kAny},
      {"pow2", [](const Tensor& t) { return pow(t, 2); }, &kAny},
      {"pow3", [](const Tensor& t) { return pow(t, 3); }, &kAny},
      {"pow_half", [](const Tensor& t) { return pow(t, 0.5); }, &kPos},
      {"pow_neg", [](const Tensor& t) { return pow(t, -1.5); }, &kPos},
      {"pow0", [](const Tensor& t) { return pow(t, 0); }, &kAny},
  };
  for (const auto& c : cases) {
    expect_gradcheck(c.name, [&](const std::vector<Tensor>& x) { return c.op(x[0]); }, {leaf(*c.in, {2, 3})});
    // non-contiguous input inside the graph
    expect_gradcheck(c.name + "_t", [&](const std::vector<Tensor>& x) { return c.op(x[0].t()); },
                     {leaf(*c.in, {2, 3})});
  }
}

TEST(ElementwiseGrad, BinaryOpsWithBroadcasting) {
  Tensor a = leaf(kPos, {2, 3});
  Tensor b = leaf({0.5, -1.3, 2.2}, {3});
  Tensor col = leaf({0.8, 1.9}, {2, 1});
  expect_gradcheck("pow", [](const std::vector<Tensor>& x) { return pow(x[0], x[1]); }, {a, b});
  expect_gradcheck("pow_col", [](const std::vector<Tensor>& x) { return pow(x[1], x[0]); }, {col, a});
  // maximum/minimum: no ties in the inputs
  Tensor m = leaf(kAny, {2, 3});
  expect_gradcheck("maximum", [](const std::vector<Tensor>& x) { return maximum(x[0], x[1]); }, {m, b});
  expect_gradcheck("minimum", [](const std::vector<Tensor>& x) { return minimum(x[0], x[1]); }, {m, col});
  expect_gradcheck("maximum_t", [](const std::vector<Tensor>& x) { return maximum(x[0].t(), x[1]); },
                   {m, leaf({0.1, -0.5}, {2})});
  Tensor c = gt(tensor({1, 0, 1}, {3}), tensor({0.5f}));
  expect_gradcheck("where", [c](const std::vector<Tensor>& x) { return where(c, x[0], x[1]); }, {m, col});
  expect_gradcheck(
      "where_scalar_b",
      [c](const std::vector<Tensor>& x) { return where(c, x[0], wrapped_scalar(2.0, DType::Float64, kCPU)); }, {b});
  Tensor cbig = gt(tensor({1, 0, 1, 0, 0, 1}, {2, 3}), tensor({0.5f}));
  expect_gradcheck("where_big_cond", [cbig](const std::vector<Tensor>& x) { return where(cbig, x[0], x[1]); },
                   {b, leaf({0.3}, {1})});
  // mixes with existing ops
  expect_gradcheck("chain", [](const std::vector<Tensor>& x) { return sigmoid(x[0] * x[1]) + gelu(x[0] - x[1]); },
                   {m, b});
}

TEST(ElementwiseGrad, InPlaceOps) {
  struct C {
    std::string name;
    std::function<void(Tensor&)> op;
    const std::vector<double>* in;
  };
  std::vector<C> cases = {
      {"neg_", [](Tensor& t) { neg_(t); }, &kAny},
      {"exp_", [](Tensor& t) { exp_(t); }, &kAny},
      {"sqrt_", [](Tensor& t) { sqrt_(t); }, &kPos},
      {"relu_", [](Tensor& t) { relu_(t); }, &kAny},
      {"sigmoid_", [](Tensor& t) { sigmoid_(t); }, &kAny},
      {"tanh_", [](Tensor& t) { tanh_(t); }, &kAny},
      {"clamp_", [](Tensor& t) { clamp_(t, -1.0, 1.0); }, &kAny},
  };
  for (const auto& c : cases) {
    // y = x * 1.5 (a non-leaf), modified in place, then used again
    expect_gradcheck(c.name,
                     [&](const std::vector<Tensor>& x) {
                       Tensor y = x[0] * 1.5;
                       c.op(y);
                       return y * x[0];
                     },
                     {leaf(*c.in, {2, 3})});
  }
  Tensor t1 = leaf({0.5, -1.3, 2.2}, {3});
  Tensor t2 = leaf({0.8, 1.9}, {2, 1});
  Tensor a = leaf(kAny, {2, 3});
  expect_gradcheck("addcmul_",
                   [](const std::vector<Tensor>& x) {
                     Tensor y = x[0] * 1.0;
                     addcmul_(y, x[1], x[2], 0.7);
                     return y;
                   },
                   {a, t1, t2});
  expect_gradcheck("addcdiv_",
                   [](const std::vector<Tensor>& x) {
                     Tensor y = x[0] * 1.0;
                     addcdiv_(y, x[1], x[2], -1.3);
                     return y;
                   },
                   {a, t1, t2});
  expect_gradcheck("lerp_",
                   [](const std::vector<Tensor>& x) {
                     Tensor y = x[0] * 1.0;
                     lerp_(y, x[1], 0.3);
                     return y;
                   },
                   {a, t1});
}

TEST(ElementwiseGrad, KinksFollowPyTorch) {
  Tensor x = tensor({-1.0f, 0.0f, 2.0f}).requires_grad_();
  relu(x).sum().backward();
  EXPECT_TRUE(tensor_near(x.grad(), {0, 0, 1}));  // relu'(0) = 0
  x.zero_grad();
  abs(x).sum().backward();
  EXPECT_TRUE(tensor_near(x.grad(), {-1, 0, 1}));  // abs'(0) = 0
  x.zero_grad();
  clamp(x, -1, 2).sum().backward();
  EXPECT_TRUE(tensor_near(x.grad(), {1, 1, 1}));  // bounds are inclusive
  x.zero_grad();
  clamp(x, 0, 1).sum().backward();
  EXPECT_TRUE(tensor_near(x.grad(), {0, 1, 0}));
  x.zero_grad();
  sign(x).sum().backward();
  EXPECT_TRUE(tensor_near(x.grad(), {0, 0, 0}));
  // maximum/minimum split the gradient evenly on ties
  Tensor a = tensor({1.0f, 2.0f}).requires_grad_(), b = tensor({1.0f, 3.0f}).requires_grad_();
  maximum(a, b).sum().backward();
  EXPECT_TRUE(tensor_near(a.grad(), {0.5, 0}));
  EXPECT_TRUE(tensor_near(b.grad(), {0.5, 1}));
  // pow(0, b) with b >= 0: gradient w.r.t. b is 0, not NaN
  Tensor base = tensor({0.0f, 2.0f}).requires_grad_(), e = tensor({2.0f, 3.0f}).requires_grad_();
  pow(base, e).sum().backward();
  EXPECT_TRUE(tensor_near(e.grad(), {0, 8 * std::log(2.0)}, 1e-6));
  EXPECT_TRUE(tensor_near(base.grad(), {0, 12}, 1e-6));
}

TEST(ElementwiseGrad, Float32AndBroadcastGradShapes) {
  Tensor a = tensor({1, 2, 3, 4, 5, 6}, {2, 3}).requires_grad_();
  Tensor b = tensor({0.5, 1.5, 2.5}, {3}).requires_grad_();
  Tensor c = tensor({1, 0}, {2, 1}).requires_grad_();
  (maximum(a, b) + where(gt(a, tensor({3.0f})), b, c) + pow(a, b)).sum().backward();
  EXPECT_EQ(a.grad().sizes(), (Shape{2, 3}));
  EXPECT_EQ(b.grad().sizes(), (Shape{3}));
  EXPECT_EQ(c.grad().sizes(), (Shape{2, 1}));
  EXPECT_EQ(b.grad().dtype(), DType::Float32);
  // where gradient to c: positions where a <= 3 -> row 0 all three
  EXPECT_TRUE(tensor_near(c.grad(), {3, 0}));
}

TEST(ElementwiseGrad, SavedOutputModifiedInPlaceIsAnError) {
  Tensor x = tensor({0.5f, 1.0f}).requires_grad_();
  Tensor y = exp(x);
  y.mul_(tensor({2.0f}));
  EXPECT_WEFT_ERROR(y.sum().backward(), "ExpBackward");
  Tensor z = x * 1.0;
  sigmoid_(z);  // saved output of sigmoid_ is z itself
  relu_(z);
  EXPECT_WEFT_ERROR(z.sum().backward(), "SigmoidBackward");
}

TEST(ElementwiseGrad, IntegerOrBoolInputsDoNotRecord) {
  Tensor xi = tensor(std::vector<int64_t>{1, 2});
  Tensor e = exp(xi);
  EXPECT_FALSE(e.requires_grad());
  Tensor x = tensor({1.0f, 2.0f}).requires_grad_();
  EXPECT_FALSE(eq(x, x).requires_grad());
  EXPECT_FALSE(logical_not(x).requires_grad());
  EXPECT_TRUE(where(gt(x, tensor({1.5f})), x, xi).requires_grad());
}

}  // namespace
}  // namespace weft
