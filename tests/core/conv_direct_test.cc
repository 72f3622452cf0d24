// The direct float32 convolution (core/cpu/conv_direct_avx512.h) that conv2d
// runs for layers with few taps: output, weight, bias and input gradients
// against the float64 im2col + GEMM path (itself checked against a naive loop
// in conv_test.cc), over the geometries the direct path takes (odd plane
// sizes, channel counts that leave partial tiles, several tap blocks, dilation,
// pH = 0, several image chunks); results independent of the thread count; and
// the geometries it must leave to im2col + GEMM.
#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "core/cpu/conv_direct_avx512.h"
#include "core/cpu/conv_lanes_avx512.h"
#include "core/cpu/gemm.h"
#include "core/nn_ops.h"
#include "core/ops.h"
#include "core/parallel.h"
#include "tests/testing.h"

namespace weft {
namespace {
using testing::rnd;
using testing::tensors_near;
using testing::values;

struct Geo {
  int64_t N, C, H, W, Cout, kH, kW, pH, pW, dH, dW;
  bool bias;
};

cpu::Conv2dGeom geom_of(const Geo& c) {
  const int64_t OH = c.H + 2 * c.pH - c.dH * (c.kH - 1), OW = c.W + 2 * c.pW - c.dW * (c.kW - 1);
  return {c.C, c.H, c.W, c.kH, c.kW, 1, 1, c.pH, c.pW, c.dH, c.dW, OH, OW};
}

std::vector<Geo> direct_geometries() {
  return {
      {3, 1, 9, 7, 13, 3, 3, 1, 1, 1, 1, true},    // 63 positions (partial vector), 13 channels
      {2, 3, 6, 10, 5, 3, 3, 1, 1, 1, 1, true},    // RGB: 27 taps in several blocks
      {2, 1, 8, 8, 8, 5, 5, 2, 2, 1, 1, false},    // 5x5, no bias
      {2, 3, 7, 9, 16, 3, 3, 1, 1, 1, 1, true},    // RGB, 16 channels: two full panels
      {2, 1, 9, 11, 8, 3, 3, 2, 1, 2, 1, true},    // 3x3 compile-time with a row dilation of 2
      {2, 1, 7, 8, 8, 3, 3, 1, 2, 1, 2, true},     // column dilation 2: the runtime kernel for 8 channels
      {2, 2, 7, 9, 3, 3, 3, 2, 2, 2, 2, true},     // dilation 2
      {2, 1, 6, 11, 4, 3, 3, 0, 1, 1, 1, true},    // pH = 0: OH = H - 2
      {2, 32, 3, 5, 3, 1, 1, 0, 0, 1, 1, true},    // 1x1 over 32 channels: the most taps taken
      {17, 1, 5, 6, 6, 3, 1, 1, 0, 1, 1, true},    // 3 x 1 kernel, 17 images: chunks of 8, 8, 1
      {2, 1, 28, 28, 32, 3, 3, 1, 1, 1, 1, true},  // the Fashion-MNIST CNN's first layer (compile-time 3x3)
  };
}

// y, and the gradients of sum(y * gy) with respect to x, w, b.
std::vector<Tensor> run(const Geo& c, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& gy) {
  Tensor xr = x.detach().requires_grad_(), wr = w.detach().requires_grad_();
  Tensor br = c.bias ? b.detach().requires_grad_() : Tensor();
  Tensor y = conv2d(xr, wr, br, {1, 1}, {c.pH, c.pW}, {c.dH, c.dW});
  y.backward(gy);
  return {y.detach(), xr.grad(), wr.grad(), c.bias ? br.grad() : Tensor()};
}

class ConvDirect : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cpu::gemm_f32_uses_avx512()) GTEST_SKIP() << "no AVX-512 on this CPU: conv2d has no direct path here";
  }
};

TEST_F(ConvDirect, MatchesTheFloat64Path) {
  uint64_t seed = 40;
  for (const Geo& c : direct_geometries()) {
    const cpu::Conv2dGeom g = geom_of(c);
    ASSERT_TRUE(cpu::conv_direct_applies(g, 1)) << "C " << c.C << " k " << c.kH << "x" << c.kW;
    Tensor x = rnd({c.N, c.C, c.H, c.W}, DType::Float64, ++seed);
    Tensor w = rnd({c.Cout, c.C, c.kH, c.kW}, DType::Float64, ++seed);
    Tensor b = rnd({c.Cout}, DType::Float64, ++seed);
    Tensor gy = rnd({c.N, c.Cout, g.OH, g.OW}, DType::Float64, ++seed);
    auto ref = run(c, x, w, b, gy);
    auto got = run(c, x.to(DType::Float32), w.to(DType::Float32), b.to(DType::Float32), gy.to(DType::Float32));
    const char* what[] = {"output", "input gradient", "weight gradient", "bias gradient"};
    for (size_t i = 0; i < got.size(); ++i) {
      if (!ref[i].defined()) continue;
      // float32 sums of up to N * OH * OW = 1,568 terms of magnitude <= 1
      EXPECT_TRUE(tensors_near(got[i], ref[i], 2e-5))
          << what[i] << ", C " << c.C << " k " << c.kH << "x" << c.kW << " N " << c.N;
    }
  }
}

// The same sums as the im2col + GEMM path gives, up to float32 rounding.
TEST_F(ConvDirect, AgreesWithTheGemmPath) {
  Geo c{9, 1, 12, 12, 10, 3, 3, 1, 1, 1, 1, true};
  Tensor x = rnd({c.N, 1, 12, 12}, DType::Float32, 1), w = rnd({10, 1, 3, 3}, DType::Float32, 2);
  Tensor b = rnd({10}, DType::Float32, 3), gy = rnd({c.N, 10, 12, 12}, DType::Float32, 4);
  auto direct = run(c, x, w, b, gy);
  cpu::set_conv_direct_enabled(false);
  cpu::set_conv_lanes_enabled(false);  // (which would take the output next)
  EXPECT_FALSE(cpu::conv_direct_applies(geom_of(c), 1));
  auto gemm = run(c, x, w, b, gy);
  cpu::set_conv_lanes_enabled(true);
  cpu::set_conv_direct_enabled(true);
  for (size_t i = 0; i < direct.size(); ++i) EXPECT_TRUE(tensors_near(direct[i], gemm[i], 2e-5)) << "result " << i;
}

// Note [conv direct determinism]: 1 and 3 threads give the same bits.
TEST_F(ConvDirect, ThreadCountIndependent) {
  Geo c{19, 3, 10, 13, 7, 3, 3, 1, 1, 1, 1, true};
  Tensor x = rnd({c.N, 3, 10, 13}, DType::Float32, 5), w = rnd({7, 3, 3, 3}, DType::Float32, 6);
  Tensor b = rnd({7}, DType::Float32, 7), gy = rnd({c.N, 7, 10, 13}, DType::Float32, 8);
  const int nt = get_num_threads();
  set_num_threads(1);
  auto r1 = run(c, x, w, b, gy);
  set_num_threads(3);
  auto r3 = run(c, x, w, b, gy);
  set_num_threads(nt);
  for (size_t i = 0; i < r1.size(); ++i) EXPECT_EQ(values(r1[i]), values(r3[i])) << "result " << i;
}

// Geometries outside the contract stay on im2col + GEMM (conv_test.cc checks
// their values).
TEST_F(ConvDirect, LeavesOtherGeometriesToTheGemm) {
  const cpu::Conv2dGeom same{1, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 8, 8};
  EXPECT_TRUE(cpu::conv_direct_applies(same, 1));
  EXPECT_FALSE(cpu::conv_direct_applies(same, 2)) << "groups";
  cpu::Conv2dGeom g = same;
  g.sW = 2, g.OW = 4;
  EXPECT_FALSE(cpu::conv_direct_applies(g, 1)) << "stride";
  g = same;
  g.pW = 0, g.OW = 6;
  EXPECT_FALSE(cpu::conv_direct_applies(g, 1)) << "output narrower than the input";
  g = same;
  g.C = 4;  // 36 taps
  EXPECT_FALSE(cpu::conv_direct_applies(g, 1)) << "too many taps";
}

}  // namespace
}  // namespace weft
