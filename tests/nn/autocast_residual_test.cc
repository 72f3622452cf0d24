// Linear under bfloat16 autocast feeding a float32 residual, as in a transformer
// block (h = x + proj(y)): the sum promotes to float32, so the gradient reaching
// the bfloat16 linear output arrives in float32 and must be cast to bfloat16
// before linear's backward multiplies it with the saved bfloat16 input. Checked
// against the same graph run in float32 (bf16 tolerance), for 3-D and 2-D inputs,
// with and without bias.
#include <cmath>

#include <gtest/gtest.h>

#include "core/autocast.h"
#include "core/autograd_meta.h"
#include "core/ops.h"
#include "nn/layers.h"
#include "tests/testing.h"

namespace weft {
namespace {

using testing::rnd;
using testing::tensors_near;

struct Grads {
  Tensor x, res, w, b;
};

// loss = sum(c * (res + lin(x))); backward outside any autocast scope.
Grads run(nn::Linear& lin, const Tensor& x0, const Tensor& res0, const Tensor& c, bool amp) {
  Tensor x = x0.detach().clone().requires_grad_();
  Tensor res = res0.detach().clone().requires_grad_();
  lin.zero_grad();
  Tensor loss;
  {
    AutocastGuard guard(DeviceType::CPU, DType::BFloat16, amp);
    Tensor y = lin.forward(x);  // (..., out)
    EXPECT_EQ(y.dtype(), amp ? DType::BFloat16 : DType::Float32);
    Tensor h = add(res, y);  // float32: the residual stream stays float32
    EXPECT_EQ(h.dtype(), DType::Float32);
    loss = sum(mul(h, c));
  }
  loss.backward();
  return {x.grad(), res.grad(), lin.weight.grad(), lin.bias.defined() ? lin.bias.grad() : Tensor()};
}

void check(const Shape& xs, bool bias) {
  SCOPED_TRACE("input " + shape_str(xs) + (bias ? " with bias" : " without bias"));
  const int64_t in_f = xs.back(), out_f = 6;
  nn::Linear lin(in_f, out_f, bias);
  {
    NoGradGuard ng;
    lin.weight.copy_(rnd({out_f, in_f}, DType::Float32, 11));
    if (bias) lin.bias.copy_(rnd({out_f}, DType::Float32, 12));
  }
  Shape ys = xs;
  ys.back() = out_f;
  Tensor x = rnd(xs, DType::Float32, 13), res = rnd(ys, DType::Float32, 14), c = rnd(ys, DType::Float32, 15);

  Grads want = run(lin, x, res, c, /*amp=*/false);
  Grads got;
  ASSERT_NO_THROW(got = run(lin, x, res, c, /*amp=*/true));
  // gradients reach the float32 leaves in float32
  for (const Tensor* t : {&got.x, &got.res, &got.w}) {
    ASSERT_TRUE(t->defined());
    EXPECT_EQ(t->dtype(), DType::Float32);
    for (double v : testing::values(*t)) EXPECT_TRUE(std::isfinite(v));
  }
  // the residual's gradient is c exactly; the rest within bfloat16 rounding of
  // the float32 run (sums over at most 12 rows of values in [-1, 1))
  EXPECT_TRUE(tensors_near(got.res, want.res, 0));
  EXPECT_TRUE(tensors_near(got.x, want.x, 3e-2));
  EXPECT_TRUE(tensors_near(got.w, want.w, 3e-2));
  if (bias) {
    ASSERT_TRUE(got.b.defined());
    EXPECT_EQ(got.b.dtype(), DType::Float32);
    EXPECT_TRUE(tensors_near(got.b, want.b, 3e-2));
  }
}

TEST(AutocastResidual, Linear3dInputWithBias) { check({2, 3, 8}, true); }
TEST(AutocastResidual, Linear3dInputWithoutBias) { check({2, 3, 8}, false); }
TEST(AutocastResidual, Linear2dInputWithBias) { check({4, 8}, true); }

}  // namespace
}  // namespace weft
