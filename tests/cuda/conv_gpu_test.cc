// CUDA conv2d (cuDNN, core/cuda/conv.cc) against the CPU kernels: forward and
// backward (input, weight, bias grads) over stride / padding / dilation / groups
// and odd sizes, float32 / float64 (and 16-bit dtypes vs the CPU's float32 path),
// TF32 opt-in, and a float64 gradcheck through the GPU.
#include <gtest/gtest.h>

#include "autograd/gradcheck.h"
#include "core/cuda/blas.h"
#include "core/nn_ops.h"
#include "core/ops.h"
#include "tests/cuda/gpu_testing.h"

namespace weft {
namespace {
using testing::kGPU;
using testing::matches_cpu;
using testing::rnd;

struct Case {
  int64_t N, Cin, H, W, Cout, kH, kW, sH, sW, pH, pW, dH, dW, groups;
  bool bias;
};

const Case kCases[] = {
    {1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, false},     // 1x1 everything
    {2, 3, 7, 9, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, true},      // same padding
    {3, 4, 11, 8, 6, 3, 2, 2, 3, 1, 0, 1, 1, 2, true},     // strides, groups
    {2, 6, 13, 13, 6, 3, 3, 1, 2, 2, 1, 2, 1, 6, true},    // depthwise, dilation
    {1, 8, 31, 17, 12, 5, 5, 2, 2, 2, 2, 1, 1, 4, false},  // odd sizes
    {4, 3, 32, 32, 16, 7, 7, 2, 2, 3, 3, 1, 1, 1, true},   // stem-like
};

std::vector<Tensor> conv_fwd_bwd(const std::vector<Tensor>& in, const Case& c) {
  Tensor x = in[0].detach().requires_grad_(), w = in[1].detach().requires_grad_();
  Tensor b = c.bias ? in[2].detach().requires_grad_() : Tensor();
  Tensor y = conv2d(x, w, b, {c.sH, c.sW}, {c.pH, c.pW}, {c.dH, c.dW}, c.groups);
  Tensor go = rnd(y.sizes(), y.dtype(), 99).to(y.device());
  y.backward(go);
  std::vector<Tensor> r{y.detach(), x.grad(), w.grad()};
  if (c.bias) r.push_back(b.grad());
  return r;
}

TEST(CudaConv2d, ForwardBackwardMatchCpu) {
  WEFT_REQUIRE_GPU();
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (const Case& c : kCases) {
      std::vector<Tensor> in{rnd({c.N, c.Cin, c.H, c.W}, dt, 1), rnd({c.Cout, c.Cin / c.groups, c.kH, c.kW}, dt, 2),
                             rnd({c.Cout}, dt, 3)};
      const double tol = dt == DType::Float64 ? 1e-10 : 1e-4;
      EXPECT_TRUE(matches_cpu([&c](const std::vector<Tensor>& v) { return conv_fwd_bwd(v, c); }, in, tol))
          << dt << " case N=" << c.N << " Cin=" << c.Cin << " H=" << c.H << " W=" << c.W << " groups=" << c.groups;
    }
  }
}

TEST(CudaConv2d, HalfTypesRunNativelyAndMatchCpu) {
  WEFT_REQUIRE_GPU();
  // the CPU computes 16-bit convs in float32 and rounds; cuDNN accumulates in float32 too
  for (DType dt : {DType::BFloat16, DType::Float16}) {
    const Case& c = kCases[2];
    std::vector<Tensor> in{rnd({c.N, c.Cin, c.H, c.W}, dt, 1), rnd({c.Cout, c.Cin / c.groups, c.kH, c.kW}, dt, 2),
                           rnd({c.Cout}, dt, 3)};
    EXPECT_TRUE(matches_cpu([&c](const std::vector<Tensor>& v) { return conv_fwd_bwd(v, c); }, in,
                            dt == DType::BFloat16 ? 4e-2 : 1e-2))
        << dt;
  }
}

TEST(CudaConv2d, UnbatchedAndTF32) {
  WEFT_REQUIRE_GPU();
  Tensor x = rnd({3, 10, 10}, DType::Float32, 1), w = rnd({4, 3, 3, 3}, DType::Float32, 2);
  auto fn = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{conv2d(in[0], in[1], Tensor(), {1, 1}, {1, 1})};
  };
  // cuDNN may pick Winograd/FFT algorithms: float32 to 1e-4 as in ForwardBackwardMatchCpu
  EXPECT_TRUE(matches_cpu(fn, {x, w}, 1e-4));
  cuda::set_allow_tf32(true);
  EXPECT_TRUE(matches_cpu(fn, {x, w}, 1e-2));
  cuda::set_allow_tf32(false);
}

TEST(CudaConv2d, GradcheckFloat64OnGpu) {
  WEFT_REQUIRE_GPU();
  Tensor x = rnd({2, 4, 6, 5}, DType::Float64, 1).requires_grad_();
  Tensor w = rnd({6, 2, 3, 2}, DType::Float64, 2).requires_grad_();
  Tensor b = rnd({6}, DType::Float64, 3).requires_grad_();
  auto r = autograd::gradcheck(
      [](const std::vector<Tensor>& in) {
        return conv2d(in[0].to(kGPU), in[1].to(kGPU), in[2].to(kGPU), {2, 1}, {1, 1}, {1, 2}, 2).cpu();
      },
      {x, w, b});
  EXPECT_TRUE(r) << r.message;
}

}  // namespace
}  // namespace weft
