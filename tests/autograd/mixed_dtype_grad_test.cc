// The engine hands every node and leaf a gradient in the dtype of the tensor it
// is for (PyTorch's rule): an op that promotes mixed dtypes (bfloat16 + float32
// -> float32) passes the float32 output gradient back, and the bfloat16 operand
// must receive it in bfloat16, whether it is a leaf or an intermediate result.
#include <gtest/gtest.h>

#include "core/hooks.h"
#include "core/ops.h"
#include "tests/testing.h"

namespace weft {
namespace {

using testing::rnd;
using testing::tensor_near;
using testing::values;

TEST(MixedDtypeGrad, LeafGetsGradientInItsOwnDtype) {
  Tensor a = rnd({2, 3}, DType::BFloat16, 1).requires_grad_();
  Tensor b = rnd({2, 3}, DType::Float32, 2).requires_grad_();
  Tensor c = rnd({2, 3}, DType::Float32, 3);
  Tensor s = add(a, b);  // (2, 3) float32
  ASSERT_EQ(s.dtype(), DType::Float32);
  sum(mul(s, c)).backward();
  ASSERT_TRUE(a.grad().defined());
  EXPECT_EQ(a.grad().dtype(), DType::BFloat16);
  EXPECT_EQ(b.grad().dtype(), DType::Float32);
  // d/da = d/db = c; a's gradient is c rounded to bfloat16
  EXPECT_TRUE(tensor_near(a.grad(), values(c.to(DType::BFloat16)), 0));
  EXPECT_TRUE(tensor_near(b.grad(), values(c), 0));
}

TEST(MixedDtypeGrad, IntermediateGetsGradientInItsOwnDtype) {
  Tensor w = rnd({2, 3}, DType::Float32, 4).requires_grad_();
  Tensor r = rnd({2, 3}, DType::Float32, 5);
  Tensor c = rnd({2, 3}, DType::Float32, 6);
  Tensor seen;
  Tensor h = w.to(DType::BFloat16);  // bfloat16 intermediate
  h.register_hook([&](const Tensor& g) {
    seen = g;
    return Tensor();
  });
  sum(mul(add(r, h), c)).backward();
  ASSERT_TRUE(seen.defined());
  EXPECT_EQ(seen.dtype(), DType::BFloat16);
  EXPECT_EQ(w.grad().dtype(), DType::Float32);
  EXPECT_TRUE(tensor_near(w.grad(), values(c.to(DType::BFloat16)), 0));
}

}  // namespace
}  // namespace weft
