// Autocast on the CPU (core/autocast.h): output dtypes of lower-precision and
// float32 ops, values against hand-rounded float32 references, gradients reaching
// float32 master parameters in float32, nesting and disabling, device-type scoping.
#include "core/autocast.h"

#include <gtest/gtest.h>

#include "core/nn_ops.h"
#include "core/ops.h"
#include "tests/testing.h"

namespace weft {
namespace {

using testing::rnd;
using testing::tensors_near;

// t rounded to bfloat16 and back (what autocast feeds the kernels).
Tensor bf(const Tensor& t) { return t.detach().to(DType::BFloat16).to(DType::Float32); }

TEST(Autocast, MatmulFamilyRunsInBFloat16) {
  Tensor a = rnd({5, 7}, DType::Float32, 1), b = rnd({7, 3}, DType::Float32, 2);
  Tensor w = rnd({3, 7}, DType::Float32, 3), bias = rnd({3}, DType::Float32, 4);
  Tensor a3 = rnd({2, 5, 7}, DType::Float32, 5), b3 = rnd({2, 7, 3}, DType::Float32, 6);
  AutocastGuard g(DeviceType::CPU, DType::BFloat16);
  Tensor y = matmul(a, b);
  EXPECT_EQ(y.dtype(), DType::BFloat16);
  EXPECT_TRUE(tensors_near(y, matmul(bf(a), bf(b)).to(DType::BFloat16), 1e-6));
  EXPECT_EQ(mm(a, b).dtype(), DType::BFloat16);
  EXPECT_EQ(bmm(a3, b3).dtype(), DType::BFloat16);
  Tensor l = linear(a, w, bias);
  EXPECT_EQ(l.dtype(), DType::BFloat16);
  {
    AutocastGuard off(DeviceType::CPU, DType::BFloat16, false);
    Tensor want = add(matmul(bf(a), transpose(bf(w), 0, 1)).to(DType::BFloat16).to(DType::Float32), bf(bias));
    EXPECT_TRUE(tensors_near(l, want, 1e-2));
  }
  // float64 is not autocast (as in PyTorch)
  EXPECT_EQ(matmul(a.to(DType::Float64), b.to(DType::Float64)).dtype(), DType::Float64);
  // mixed float32 / bfloat16 operands are both cast
  EXPECT_EQ(matmul(a, b.to(DType::BFloat16)).dtype(), DType::BFloat16);
}

TEST(Autocast, Float32OpsCastUp) {
  Tensor x = rnd({4, 6}, DType::BFloat16, 7);
  Tensor target = tensor(std::vector<int64_t>{0, 5, 2, 3}, {4});
  AutocastGuard g(DeviceType::CPU, DType::BFloat16);
  Tensor s = softmax(x, 1);
  EXPECT_EQ(s.dtype(), DType::Float32);
  EXPECT_TRUE(tensors_near(s, softmax(x.to(DType::Float32), 1), 1e-6));
  EXPECT_EQ(log_softmax(x, 1).dtype(), DType::Float32);
  Tensor ce = cross_entropy(x, target);
  EXPECT_EQ(ce.dtype(), DType::Float32);
  Tensor lw = ones({6}), lb = zeros({6});
  EXPECT_EQ(layer_norm(x, {6}, lw, lb).dtype(), DType::Float32);
  EXPECT_EQ(mse_loss(x, x).dtype(), DType::Float32);
  // float32 inputs stay float32; float64 stays float64
  EXPECT_EQ(softmax(x.to(DType::Float64), 1).dtype(), DType::Float64);
}

TEST(Autocast, GradientsReachFloat32MasterWeights) {
  Tensor x = rnd({6, 8}, DType::Float32, 11);
  Tensor w = rnd({5, 8}, DType::Float32, 12).requires_grad_();
  Tensor b = rnd({5}, DType::Float32, 13).requires_grad_();
  Tensor target = tensor(std::vector<int64_t>{0, 4, 1, 2, 3, 4}, {6});
  Tensor loss;
  {
    AutocastGuard g(DeviceType::CPU, DType::BFloat16);
    Tensor logits = linear(x, w, b);
    ASSERT_EQ(logits.dtype(), DType::BFloat16);
    loss = cross_entropy(logits, target);
    ASSERT_EQ(loss.dtype(), DType::Float32);
  }
  loss.backward();
  ASSERT_TRUE(w.grad().defined());
  ASSERT_TRUE(b.grad().defined());
  EXPECT_EQ(w.grad().dtype(), DType::Float32);
  EXPECT_EQ(b.grad().dtype(), DType::Float32);
  // reference: the same graph in float32 (bfloat16 rounding bounds the difference)
  Tensor w2 = w.detach().clone().requires_grad_(), b2 = b.detach().clone().requires_grad_();
  cross_entropy(linear(x, w2, b2), target).backward();
  EXPECT_TRUE(tensors_near(w.grad(), w2.grad(), 3e-2));
  EXPECT_TRUE(tensors_near(b.grad(), b2.grad(), 3e-2));
}

TEST(Autocast, Conv2dAndAttention) {
  Tensor x = rnd({2, 3, 6, 6}, DType::Float32, 21);
  Tensor w = rnd({4, 3, 3, 3}, DType::Float32, 22).requires_grad_();
  Tensor q = rnd({1, 2, 5, 4}, DType::Float32, 23), k = rnd({1, 2, 5, 4}, DType::Float32, 24),
         v = rnd({1, 2, 5, 4}, DType::Float32, 25);
  Tensor y, att;
  {
    AutocastGuard g(DeviceType::CPU, DType::BFloat16);
    y = conv2d(x, w, Tensor(), {1, 1}, {1, 1});
    att = scaled_dot_product_attention(q, k, v, true);
  }
  EXPECT_EQ(y.dtype(), DType::BFloat16);
  EXPECT_TRUE(tensors_near(y, conv2d(bf(x), bf(w), Tensor(), {1, 1}, {1, 1}), 2e-2));
  EXPECT_EQ(att.dtype(), DType::BFloat16);
  EXPECT_TRUE(tensors_near(att, scaled_dot_product_attention(q, k, v, true), 3e-2));
  sum(y.to(DType::Float32)).backward();
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().dtype(), DType::Float32);
}

TEST(Autocast, NestingDisableAndDeviceScope) {
  Tensor a = rnd({3, 4}, DType::Float32, 31), b = rnd({4, 2}, DType::Float32, 32);
  EXPECT_FALSE(autocast::is_enabled(DeviceType::CPU));
  EXPECT_EQ(matmul(a, b).dtype(), DType::Float32);
  {
    AutocastGuard outer(DeviceType::CPU, DType::BFloat16);
    EXPECT_TRUE(autocast::is_enabled(DeviceType::CPU));
    EXPECT_EQ(matmul(a, b).dtype(), DType::BFloat16);
    {
      AutocastGuard off(DeviceType::CPU, DType::BFloat16, false);
      EXPECT_FALSE(autocast::is_enabled(DeviceType::CPU));
      EXPECT_EQ(matmul(a, b).dtype(), DType::Float32);
    }
    {
      AutocastGuard half(DeviceType::CPU, DType::Float16);
      EXPECT_EQ(autocast::dtype(DeviceType::CPU), DType::Float16);
      EXPECT_EQ(matmul(a, b).dtype(), DType::Float16);
    }
    EXPECT_EQ(autocast::dtype(DeviceType::CPU), DType::BFloat16);
    EXPECT_EQ(matmul(a, b).dtype(), DType::BFloat16);
  }
  EXPECT_FALSE(autocast::is_enabled(DeviceType::CPU));
  EXPECT_EQ(matmul(a, b).dtype(), DType::Float32);
  {
    // a CUDA guard does not touch CPU tensors
    AutocastGuard cuda(DeviceType::CUDA, DType::BFloat16);
    EXPECT_TRUE(autocast::is_enabled(DeviceType::CUDA));
    EXPECT_EQ(matmul(a, b).dtype(), DType::Float32);
  }
  EXPECT_FALSE(autocast::is_enabled(DeviceType::CUDA));
  EXPECT_WEFT_ERROR(AutocastGuard bad(DeviceType::CPU, DType::Float64), "bfloat16 or float16");
}

}  // namespace
}  // namespace weft
