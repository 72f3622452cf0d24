// Autocast on the CPU (core/autocast.h): output dtypes of lower-precision and
// float32 ops, values against hand-rounded float32 references, gradients reaching
// float32 master parameters in float32, nesting and disabling, device-type scoping,
// and the cast cache: one cast per parameter per guard or CastCacheScope, a new
// cast after an in-place update, micro-batches backpropagating through one
// shared cast with the same gradients as casting each time.
#include "core/autocast.h"

#include <optional>

#include <gtest/gtest.h>

#include "core/autograd_meta.h"
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

TEST(Autocast, ParameterCastsAreCachedWhileAGuardLives) {
  Tensor w = rnd({5, 8}, DType::Float32, 31).requires_grad_();
  Tensor b = rnd({5}, DType::Float32, 32).requires_grad_();
  Tensor x1 = rnd({3, 8}, DType::Float32, 33), x2 = rnd({4, 8}, DType::Float32, 34);
  {
    AutocastGuard g(DeviceType::CPU, DType::BFloat16);
    Tensor y1 = linear(x1, w, b), y2 = linear(x2, w, b);
    EXPECT_EQ(autocast::cached_casts(), 2u);  // w and b; x1, x2 (no grad) are cast each time
    {
      AutocastGuard off(DeviceType::CPU, DType::BFloat16, false);  // a disabled scope keeps the cache
      EXPECT_EQ(autocast::cached_casts(), 2u);
    }
    {
      NoGradGuard ng;  // nothing is cached while grad is not recorded
      linear(x1, rnd({5, 8}, DType::Float32, 35).requires_grad_());
    }
    EXPECT_EQ(autocast::cached_casts(), 2u);
    EXPECT_TRUE(tensors_near(y2, linear(bf(x2), bf(w), bf(b)), 1e-2));
  }
  EXPECT_EQ(autocast::cached_casts(), 0u);  // emptied with the last guard
}

TEST(Autocast, AnInPlaceUpdateCastsAgain) {
  Tensor w = rnd({5, 8}, DType::Float32, 41).requires_grad_();
  Tensor x = rnd({3, 8}, DType::Float32, 42);
  autocast::CastCacheScope scope;
  Tensor before, after;
  {
    AutocastGuard g(DeviceType::CPU, DType::BFloat16);
    before = linear(x, w);  // a leaf: cached (w.t() is a view, cast each time)
  }
  EXPECT_EQ(autocast::cached_casts(), 1u);
  {
    NoGradGuard ng;
    w.mul_(-2.0);  // bumps w's version
  }
  {
    AutocastGuard g(DeviceType::CPU, DType::BFloat16);
    after = linear(x, w);
  }
  EXPECT_TRUE(tensors_near(after, matmul(bf(x), bf(w).t()), 1e-2));
  EXPECT_TRUE(tensors_near(after, before * -2.0, 1e-6));  // exact: -2 scales bfloat16 values exactly
}

// Three micro-batches, each forward under its own guard, backward outside it:
// inside a CastCacheScope they share one cast of w and b, and the gradients are
// bit for bit those of casting per micro-batch (each backward converts its own
// gradient to float32 before it is accumulated).
TEST(Autocast, MicroBatchesShareOneCastPerScope) {
  Tensor x = rnd({6, 8}, DType::Float32, 51);
  Tensor target = tensor(std::vector<int64_t>{0, 4, 1, 2, 3, 4}, {6});
  auto grads = [&](bool scoped) {
    Tensor w = rnd({5, 8}, DType::Float32, 52).requires_grad_();
    Tensor b = rnd({5}, DType::Float32, 53).requires_grad_();
    std::optional<autocast::CastCacheScope> scope;
    if (scoped) scope.emplace();
    for (int64_t mb = 0; mb < 3; ++mb) {
      Tensor loss;
      {
        AutocastGuard g(DeviceType::CPU, DType::BFloat16);
        loss = cross_entropy(linear(x.slice(0, 2 * mb, 2 * mb + 2), w, b), target.slice(0, 2 * mb, 2 * mb + 2));
      }
      EXPECT_EQ(autocast::cached_casts(), scoped ? 2u : 0u);
      loss.backward();
    }
    return std::vector<Tensor>{w.grad(), b.grad()};
  };
  std::vector<Tensor> shared = grads(true), each = grads(false);
  EXPECT_TRUE(tensors_near(shared[0], each[0], 0));
  EXPECT_TRUE(tensors_near(shared[1], each[1], 0));
  EXPECT_EQ(autocast::cached_casts(), 0u);
}

}  // namespace
}  // namespace weft
