#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "core/ops.h"
#include "tests/testing.h"

namespace weft {
namespace {
using testing::tensor_near;

TEST(Tensor, FactoriesAndItem) {
  Tensor z = zeros({2, 3});
  EXPECT_EQ(z.sizes(), (Shape{2, 3}));
  EXPECT_EQ(z.dtype(), DType::Float32);
  EXPECT_TRUE(tensor_near(z, {0, 0, 0, 0, 0, 0}));
  EXPECT_TRUE(tensor_near(full({2}, 2.5), {2.5, 2.5}));
  EXPECT_TRUE(tensor_near(arange(5), {0, 1, 2, 3, 4}));
  EXPECT_EQ(arange(5).dtype(), DType::Int64);
  EXPECT_TRUE(tensor_near(linspace(0, 1, 5), {0, 0.25, 0.5, 0.75, 1.0}));
  EXPECT_FLOAT_EQ(full({1, 1}, 3.0).item<float>(), 3.0f);
  EXPECT_WEFT_ERROR(zeros({2}).item<float>(), "item()");
}

TEST(Tensor, AddBroadcastAndBackward) {
  Tensor a = tensor({1, 2, 3, 4, 5, 6}, {2, 3}).requires_grad_();
  Tensor b = tensor({10, 20, 30}, {3}).requires_grad_();
  Tensor c = a * b + a;
  EXPECT_TRUE(tensor_near(c, {11, 42, 93, 44, 105, 186}));
  c.sum().backward();
  EXPECT_TRUE(tensor_near(a.grad(), {11, 21, 31, 11, 21, 31}));
  EXPECT_TRUE(tensor_near(b.grad(), {5, 7, 9}));
}

TEST(Tensor, ViewsShareStorage) {
  Tensor a = arange(6, {DType::Float32}).view({2, 3});
  Tensor t = a.t();
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_TRUE(tensor_near(t.contiguous(), {0, 3, 1, 4, 2, 5}));
  Tensor s = a.select(1, 1);
  EXPECT_TRUE(tensor_near(s, {1, 4}));
  EXPECT_WEFT_ERROR(t.view({6}), "view");
}

}  // namespace
}  // namespace weft

#include "autograd/gradcheck.h"
namespace weft {
namespace {
TEST(Tensor, GradcheckMulDiv) {
  Tensor a = tensor(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3}).requires_grad_();
  Tensor b = tensor(std::vector<double>{1.5, -2.5, 3.5}, {3}).requires_grad_();
  auto r = autograd::gradcheck([](const std::vector<Tensor>& x) { return x[0] * x[1] / (x[1] + x[0]) - x[0]; }, {a, b});
  EXPECT_TRUE(r.ok) << r.message;
}
}  // namespace
}  // namespace weft
