// Autocast on CUDA (core/autocast.h): a bfloat16 autocast region runs matmul /
// linear / conv2d / sdpa in bfloat16 on the GPU (cuBLAS / cuDNN natively), float32
// ops in float32, values agree with the CPU under the same autocast, and gradients
// reach float32 master weights on the GPU in float32, also through a float32
// residual added to a bfloat16 linear output.
#include <gtest/gtest.h>

#include "core/autocast.h"
#include "core/nn_ops.h"
#include "core/ops.h"
#include "tests/cuda/gpu_testing.h"

namespace weft {
namespace {
using testing::kGPU;
using testing::rnd;
using testing::tensors_near;

TEST(CudaAutocast, OutputDtypesAndValuesMatchCpuAutocast) {
  WEFT_REQUIRE_GPU();
  Tensor x = rnd({4, 16}, DType::Float32, 1), w = rnd({8, 16}, DType::Float32, 2), b = rnd({8}, DType::Float32, 3);
  Tensor img = rnd({2, 3, 9, 9}, DType::Float32, 4), cw = rnd({5, 3, 3, 3}, DType::Float32, 5);
  Tensor cpu_lin, cpu_conv;
  {
    AutocastGuard g(DeviceType::CPU, DType::BFloat16);
    cpu_lin = linear(x, w, b);
    cpu_conv = conv2d(img, cw, Tensor(), {1, 1}, {1, 1});
  }
  AutocastGuard g(DeviceType::CUDA, DType::BFloat16);
  Tensor lin = linear(x.to(kGPU), w.to(kGPU), b.to(kGPU));
  EXPECT_EQ(lin.dtype(), DType::BFloat16);
  EXPECT_TRUE(tensors_near(lin.cpu(), cpu_lin, 2e-2));
  Tensor cv = conv2d(img.to(kGPU), cw.to(kGPU), Tensor(), {1, 1}, {1, 1});
  EXPECT_EQ(cv.dtype(), DType::BFloat16);
  EXPECT_TRUE(tensors_near(cv.cpu(), cpu_conv, 3e-2));
  EXPECT_EQ(softmax(lin, 1).dtype(), DType::Float32);
  // a CPU tensor is unaffected by a CUDA guard
  EXPECT_EQ(linear(x, w, b).dtype(), DType::Float32);
}

TEST(CudaAutocast, GradientsReachFloat32MasterWeights) {
  WEFT_REQUIRE_GPU();
  Tensor x = rnd({6, 8}, DType::Float32, 11).to(kGPU);
  Tensor w = rnd({5, 8}, DType::Float32, 12).to(kGPU).requires_grad_();
  Tensor target = tensor(std::vector<int64_t>{0, 4, 1, 2, 3, 4}, {6}).to(kGPU);
  Tensor loss;
  {
    AutocastGuard g(DeviceType::CUDA, DType::BFloat16);
    Tensor logits = linear(x, w);
    ASSERT_EQ(logits.dtype(), DType::BFloat16);
    loss = cross_entropy(logits, target);
    ASSERT_EQ(loss.dtype(), DType::Float32);
  }
  loss.backward();
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().dtype(), DType::Float32);
  EXPECT_TRUE(w.grad().device().is_cuda());
  Tensor w2 = w.detach().cpu().requires_grad_();
  cross_entropy(linear(x.cpu(), w2), target.cpu()).backward();
  EXPECT_TRUE(tensors_near(w.grad().cpu(), w2.grad(), 3e-2));
}

// A transformer block's residual (h = x + proj(y)): float32 + bfloat16 is float32,
// so the bfloat16 linear output gets its gradient cast back to bfloat16 by the
// engine (Note [gradient dtype] in autograd/engine.cc) before linear's backward.
TEST(CudaAutocast, LinearInto3dFloat32ResidualBackward) {
  WEFT_REQUIRE_GPU();
  Tensor x = rnd({2, 5, 16}, DType::Float32, 21), res = rnd({2, 5, 8}, DType::Float32, 22);
  Tensor w0 = rnd({8, 16}, DType::Float32, 23), b0 = rnd({8}, DType::Float32, 24);
  Tensor c = rnd({2, 5, 8}, DType::Float32, 25);
  Tensor xg = x.to(kGPU).requires_grad_(), w = w0.to(kGPU).requires_grad_(), b = b0.to(kGPU).requires_grad_();
  Tensor loss;
  {
    AutocastGuard g(DeviceType::CUDA, DType::BFloat16);
    Tensor y = linear(xg, w, b);  // (2, 5, 8) bfloat16
    ASSERT_EQ(y.dtype(), DType::BFloat16);
    Tensor h = add(res.to(kGPU), y);  // (2, 5, 8) float32
    ASSERT_EQ(h.dtype(), DType::Float32);
    loss = sum(mul(h, c.to(kGPU)));
  }
  ASSERT_NO_THROW(loss.backward());
  Tensor xr = x.clone().requires_grad_(), wr = w0.clone().requires_grad_(), br = b0.clone().requires_grad_();
  sum(mul(add(res, linear(xr, wr, br)), c)).backward();
  for (auto [got, want] : {std::pair{xg, xr}, std::pair{w, wr}, std::pair{b, br}}) {
    ASSERT_TRUE(got.grad().defined());
    EXPECT_EQ(got.grad().dtype(), DType::Float32);
    EXPECT_TRUE(tensors_near(got.grad().cpu(), want.grad(), 3e-2));
  }
}

}  // namespace
}  // namespace weft
