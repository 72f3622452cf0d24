// The direct convolution with the output channels in the vector lanes
// (core/cpu/conv_lanes_avx512.h): its output bit for bit that of im2col +
// GEMM (Note [conv lanes bits]), with and without a bias, at 1 and 3 threads,
// on geometries that take every kind of tile (output rows of 1 to 30
// positions, cut into blocks of at most 14; full and partial panels of 32
// channels, of more and fewer than 16; padding, no row padding, dilation, 1x1
// and 5x5 kernels, 1 to 900 taps: one to three K blocks of the GEMM; strides
// of 2, "valid" layers);
// against a float64 reference; that conv2d takes it; the input gradient as a
// convolution of the output gradient; and the geometries it leaves to the
// GEMM paths.
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "core/cpu/conv_cols_avx512.h"
#include "core/cpu/conv_direct_avx512.h"
#include "core/cpu/conv_lanes_avx512.h"
#include "core/cpu/gemm.h"
#include "core/error.h"
#include "core/nn_ops.h"
#include "core/ops.h"
#include "core/parallel.h"
#include "tests/testing.h"

namespace weft {
namespace {
using testing::rnd;

// A layer of stride s; by default (s = 1, pw < 0) one whose output rows are
// as wide as its input's (pW = dW (k - 1) / 2, k odd), else padding pw.
struct Geo {
  int64_t N, C, H, W, k, pH, dH, dW, cout;
  int64_t s = 1, pw = -1;
  int64_t pW() const { return pw >= 0 ? pw : dW * (k - 1) / 2; }
  int64_t OH() const { return (H + 2 * pH - dH * (k - 1) - 1) / s + 1; }
  int64_t OW() const { return (W + 2 * pW() - dW * (k - 1) - 1) / s + 1; }
  cpu::Conv2dGeom geom() const { return {C, H, W, k, k, s, s, pH, pW(), dH, dW, OH(), OW()}; }
};

// Strided layers, and layers whose rows are narrower than their input's (the
// forward only).
std::vector<Geo> other_geometries() {
  return {
      {3, 16, 14, 14, 3, 1, 1, 1, 32, 2, 1},  // stride 2, 3x3 pad 1: 7x7 outputs
      {2, 8, 15, 17, 3, 1, 1, 1, 16, 2, 0},   // stride 2, no column padding, odd sizes: 7x8
      {2, 4, 9, 30, 5, 0, 1, 1, 48, 1, 0},    // "valid" 5x5: 5x26 outputs, rows of 13 + 13
      {2, 6, 12, 12, 3, 2, 2, 2, 32, 2, 2},   // stride 2, dilation 2: 6x6
      {2, 64, 8, 8, 1, 0, 1, 1, 32, 2, 0},    // 1x1 at stride 2 (read in place)
      {1, 50, 9, 9, 3, 1, 1, 1, 16, 3, 1},    // row and column stride 3: the GEMM paths
  };
}

std::vector<Geo> geometries() {
  return {
      {3, 2, 5, 1, 3, 1, 1, 1, 5},      // one position a row (pW = 1: every tap but the middle column is padding)
      {2, 3, 4, 13, 3, 1, 1, 1, 17},    // 13 positions, a panel of 17 channels (two zmm, one lane used)
      {2, 4, 6, 15, 3, 0, 1, 1, 33},    // rows of 7 + 8, pH = 0 (OH = H - 2), panels of 32 and 1
      {2, 1, 7, 30, 5, 2, 1, 1, 16},    // 5x5 over one channel, rows of 10 + 10 + 10, one full zmm
      {2, 3, 9, 9, 3, 2, 2, 2, 8},      // dilation 2 (pW = 2)
      {3, 5, 8, 7, 1, 0, 1, 1, 9},      // 1x1
      {2, 2, 4, 28, 3, 1, 1, 1, 20},    // rows of 14 + 14
      {2, 32, 14, 14, 3, 1, 1, 1, 64},  // the Fashion-MNIST CNN's second layer
      {1, 42, 6, 6, 3, 1, 1, 1, 70},    // 378 taps (one K block of the GEMM), panels of 32, 32 and 6
      {2, 48, 5, 7, 3, 1, 1, 1, 32},    // 432 taps: two K blocks of 216
      {1, 100, 4, 5, 3, 1, 1, 1, 24},   // 900 taps: three K blocks of 300
  };
}

class ConvLanes : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cpu::gemm_f32_uses_avx512()) GTEST_SKIP() << "no AVX-512 on this CPU: conv2d runs im2col + GEMM here";
  }
};

// conv2d through im2col + the AVX-512 GEMM (the direct, implicit and lanes
// paths switched off).
Tensor im2col_path(const Geo& c, const Tensor& x, const Tensor& w, const Tensor& b) {
  cpu::set_conv_lanes_enabled(false);
  cpu::set_conv_direct_enabled(false);
  cpu::set_conv_cols_enabled(false);
  Tensor y = conv2d(x, w, b, {c.s, c.s}, {c.pH, c.pW()}, {c.dH, c.dW});
  cpu::set_conv_lanes_enabled(true);
  cpu::set_conv_direct_enabled(true);
  cpu::set_conv_cols_enabled(true);
  return y;
}

bool same_bits(const Tensor& a, const std::vector<float>& b) {
  return a.numel() == static_cast<int64_t>(b.size()) &&
         std::memcmp(a.data_ptr<float>(), b.data(), b.size() * sizeof(float)) == 0;
}

// Every geometry the forward takes (column stride 1 or 2).
std::vector<Geo> forward_geometries() {
  std::vector<Geo> all = geometries();
  for (const Geo& c : other_geometries())
    if (c.s <= 2) all.push_back(c);
  return all;
}

TEST_F(ConvLanes, GivesIm2colsBits) {
  uint64_t seed = 50;
  const int nt = get_num_threads();
  for (const Geo& c : forward_geometries()) {
    const cpu::Conv2dGeom g = c.geom();
    Tensor x = rnd({c.N, c.C, c.H, c.W}, DType::Float32, ++seed);
    Tensor w = rnd({c.cout, c.C, c.k, c.k}, DType::Float32, ++seed);
    Tensor b = rnd({c.cout}, DType::Float32, ++seed);
    for (bool with_bias : {true, false}) {
      set_num_threads(1);
      const Tensor ref = im2col_path(c, x, w, with_bias ? b : Tensor());
      for (int threads : {1, 3}) {
        set_num_threads(threads);
        std::vector<float> out(ref.numel(), -7.0f);
        cpu::conv_lanes_forward(c.N, x.data_ptr<float>(), w.data_ptr<float>(),
                                with_bias ? b.data_ptr<float>() : nullptr, c.cout, g, out.data());
        EXPECT_TRUE(same_bits(ref, out)) << "C " << c.C << " W " << c.W << " k " << c.k << " s " << c.s << " cout "
                                         << c.cout << (with_bias ? ", bias" : ", no bias") << ", " << threads
                                         << " threads";
      }
    }
  }
  set_num_threads(nt);
}

// An independent check of the sums: float64 loops over the definition.
TEST_F(ConvLanes, MatchesAFloat64Reference) {
  uint64_t seed = 80;
  for (const Geo& c : forward_geometries()) {
    Tensor x = rnd({c.N, c.C, c.H, c.W}, DType::Float32, ++seed);
    Tensor w = rnd({c.cout, c.C, c.k, c.k}, DType::Float32, ++seed);
    Tensor b = rnd({c.cout}, DType::Float32, ++seed);
    const float *px = x.data_ptr<float>(), *pw = w.data_ptr<float>(), *pb = b.data_ptr<float>();
    const int64_t OH = c.OH(), OW = c.OW();
    std::vector<double> want(c.N * c.cout * OH * OW);
    for (int64_t n = 0; n < c.N; ++n)
      for (int64_t o = 0; o < c.cout; ++o)
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow) {
            double s = pb[o];
            for (int64_t ci = 0; ci < c.C; ++ci)
              for (int64_t ki = 0; ki < c.k; ++ki)
                for (int64_t kj = 0; kj < c.k; ++kj) {
                  const int64_t ih = oh * c.s + ki * c.dH - c.pH, iw = ow * c.s + kj * c.dW - c.pW();
                  if (ih < 0 || ih >= c.H || iw < 0 || iw >= c.W) continue;
                  s += double(px[((n * c.C + ci) * c.H + ih) * c.W + iw]) * pw[((o * c.C + ci) * c.k + ki) * c.k + kj];
                }
            want[((n * c.cout + o) * OH + oh) * OW + ow] = s;
          }
    std::vector<float> out(want.size());
    cpu::conv_lanes_forward(c.N, px, pw, pb, c.cout, c.geom(), out.data());
    // float32 sums of up to 901 terms of magnitude <= 1 with random signs: the
    // partial sums wander like sqrt(k), so the rounding errors add up to about
    // 2^-24 * 900 / sqrt(2) = 4e-5; 3e-4 leaves room for the tails
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(out[i], want[i], 3e-4) << "element " << i << ", C " << c.C << " W " << c.W << " k " << c.k;
  }
}

// conv2d's forward returns the kernel's bits on the CNN's second layer at
// batch 4. (Which path conv2d took cannot be seen in the values, since every
// forward path gives these bits; the input gradient's routing is checked by
// Conv2dBackwardTakesIt, whose bits differ from col2im's.)
TEST_F(ConvLanes, Conv2dForwardGivesTheKernelsBits) {
  const Geo c{4, 32, 14, 14, 3, 1, 1, 1, 64};
  Tensor x = rnd({c.N, c.C, c.H, c.W}, DType::Float32, 7);
  Tensor w = rnd({c.cout, c.C, 3, 3}, DType::Float32, 8);
  Tensor b = rnd({c.cout}, DType::Float32, 9);
  std::vector<float> out(c.N * c.cout * c.H * c.W);
  cpu::conv_lanes_forward(c.N, x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), c.cout, c.geom(),
                          out.data());
  EXPECT_TRUE(same_bits(conv2d(x, w, b, {1, 1}, {1, 1}), out));
}

TEST_F(ConvLanes, LeavesOtherGeometriesToTheGemmPaths) {
  const cpu::Conv2dGeom same{16, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 8, 8};
  EXPECT_TRUE(cpu::conv_lanes_applies(same, 1, 32));
  EXPECT_TRUE(cpu::conv_lanes_input_grad_applies(same, 1));
  EXPECT_FALSE(cpu::conv_lanes_applies(same, 2, 32)) << "groups";
  EXPECT_FALSE(cpu::conv_lanes_input_grad_applies(same, 2)) << "groups";
  for (int64_t cout : {16, 30, 32, 48, 56, 64, 128})
    EXPECT_TRUE(cpu::conv_lanes_applies(same, 1, cout)) << cout << " channels";
  for (int64_t cout : {1, 8, 15, 17, 24, 33, 40, 55, 65})
    EXPECT_FALSE(cpu::conv_lanes_applies(same, 1, cout)) << cout << " channels use under 7/8 of the lanes";
  cpu::Conv2dGeom g = same;
  g.sW = 2, g.OW = 4;
  EXPECT_TRUE(cpu::conv_lanes_applies(g, 1, 32)) << "column stride 2";
  EXPECT_FALSE(cpu::conv_lanes_input_grad_applies(g, 1)) << "stride";
  g.sW = 3, g.OW = 3;
  EXPECT_FALSE(cpu::conv_lanes_applies(g, 1, 32)) << "column stride 3";
  g = same;
  g.sH = 3, g.OH = 3;
  EXPECT_TRUE(cpu::conv_lanes_applies(g, 1, 32)) << "row stride 3";
  EXPECT_FALSE(cpu::conv_lanes_input_grad_applies(g, 1)) << "row stride 3";
  g = same;
  g.pW = 0, g.OW = 6;
  EXPECT_TRUE(cpu::conv_lanes_applies(g, 1, 32)) << "output narrower than the input";
  EXPECT_FALSE(cpu::conv_lanes_input_grad_applies(g, 1)) << "output narrower than the input";
  g = same;
  g.C = 43;  // 387 taps
  EXPECT_TRUE(cpu::conv_lanes_applies(g, 1, 32)) << "more taps than one K block of the GEMM";
  EXPECT_TRUE(cpu::conv_lanes_input_grad_applies(g, 1)) << "43 input channels, 43 of 48 lanes";
  g = same;
  g.C = 8;
  EXPECT_FALSE(cpu::conv_lanes_input_grad_applies(g, 1)) << "8 input channels";
  g = same;
  g.pH = 3, g.OH = 12;
  EXPECT_TRUE(cpu::conv_lanes_applies(g, 1, 32));
  EXPECT_FALSE(cpu::conv_lanes_input_grad_applies(g, 1))
      << "pH > dH (kH - 1): the transposed padding would be negative";
  cpu::set_conv_lanes_enabled(false);
  EXPECT_FALSE(cpu::conv_lanes_applies(same, 1, 32)) << "switched off";
  EXPECT_FALSE(cpu::conv_lanes_input_grad_applies(same, 1)) << "switched off";
  cpu::set_conv_lanes_enabled(true);
}

// The input gradient (conv_lanes_input_grad): against float64 loops over the
// definition (gx[n, c, ih, iw] = sum of go[n, o, oh, ow] w[o, c, ki, kj] over
// ih = oh + ki dH - pH, iw = ow + kj dW - pW), against GEMM + col2im up to
// rounding, and the same bits at 1 and 3 threads.
TEST_F(ConvLanes, InputGradient) {
  uint64_t seed = 120;
  const int nt = get_num_threads();
  std::vector<Geo> geos = geometries();
  geos.push_back({2, 48, 5, 9, 3, 2, 1, 1, 40});  // pH = dH (kH - 1): the transposed padding is 0
  for (const Geo& c : geos) {
    const cpu::Conv2dGeom g = c.geom();
    const int64_t OH = c.OH(), OW = c.W;
    Tensor x = rnd({c.N, c.C, c.H, c.W}, DType::Float32, ++seed);
    Tensor w = rnd({c.cout, c.C, c.k, c.k}, DType::Float32, ++seed);
    Tensor gy = rnd({c.N, c.cout, OH, OW}, DType::Float32, ++seed);
    const float *pw = w.data_ptr<float>(), *pg = gy.data_ptr<float>();
    std::vector<double> want(c.N * c.C * c.H * c.W, 0.0);
    for (int64_t n = 0; n < c.N; ++n)
      for (int64_t o = 0; o < c.cout; ++o)
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow)
            for (int64_t ci = 0; ci < c.C; ++ci)
              for (int64_t ki = 0; ki < c.k; ++ki)
                for (int64_t kj = 0; kj < c.k; ++kj) {
                  const int64_t ih = oh + ki * c.dH - c.pH, iw = ow + kj * c.dW - c.pW();
                  if (ih < 0 || ih >= c.H || iw < 0 || iw >= c.W) continue;
                  want[((n * c.C + ci) * c.H + ih) * c.W + iw] +=
                      double(pg[((n * c.cout + o) * OH + oh) * OW + ow]) * pw[((o * c.C + ci) * c.k + ki) * c.k + kj];
                }
    std::vector<float> got[2];
    for (int i = 0; i < 2; ++i) {
      set_num_threads(i == 0 ? 1 : 3);
      got[i].assign(want.size(), -7.0f);
      cpu::conv_lanes_input_grad(c.N, pg, pw, c.cout, g, got[i].data());
    }
    set_num_threads(nt);
    EXPECT_EQ(got[0], got[1]) << "1 and 3 threads, C " << c.C << " W " << c.W << " k " << c.k;
    // sums of up to cout k^2 = 630 terms of magnitude <= 1, random signs
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(got[0][i], want[i], 1e-4) << "element " << i << ", C " << c.C << " W " << c.W << " k " << c.k;
    // conv2d's input gradient through GEMM + col2im
    cpu::set_conv_lanes_enabled(false);
    Tensor xr = x.detach().requires_grad_();
    conv2d(xr, w, Tensor(), {1, 1}, {c.pH, c.pW()}, {c.dH, c.dW}).backward(gy);
    cpu::set_conv_lanes_enabled(true);
    const std::vector<double> col2im = testing::values(xr.grad());
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[0][i], col2im[i], 1e-4) << "element " << i;
  }
}

// conv2d's backward takes it where it applies: the CNN's second layer at
// batch 4, its input gradient the kernel's bits.
TEST_F(ConvLanes, Conv2dBackwardTakesIt) {
  const Geo c{4, 32, 14, 14, 3, 1, 1, 1, 64};
  ASSERT_TRUE(cpu::conv_lanes_input_grad_applies(c.geom(), 1));
  Tensor x = rnd({c.N, c.C, c.H, c.W}, DType::Float32, 17).requires_grad_();
  Tensor w = rnd({c.cout, c.C, 3, 3}, DType::Float32, 18).requires_grad_();
  Tensor gy = rnd({c.N, c.cout, c.H, c.W}, DType::Float32, 19);
  conv2d(x, w, Tensor(), {1, 1}, {1, 1}).backward(gy);
  std::vector<float> gx(c.N * c.C * c.H * c.W);
  cpu::conv_lanes_input_grad(c.N, gy.data_ptr<float>(), w.data_ptr<float>(), c.cout, c.geom(), gx.data());
  EXPECT_TRUE(same_bits(x.grad(), gx));
}

TEST_F(ConvLanes, RefusesOtherGeometriesByName) {
  cpu::Conv2dGeom g{4, 4, 4, 3, 3, 3, 3, 1, 1, 1, 1, 2, 2};
  std::vector<float> x(4 * 16), w(2 * 36), out(2 * 16);
  EXPECT_WEFT_ERROR(cpu::conv_lanes_forward(1, x.data(), w.data(), nullptr, 2, g, out.data()),
                    "needs a column stride of 1 or 2, got stride (3, 3)");
  g = {4, 4, 4, 3, 3, 1, 1, 3, 1, 1, 1, 8, 4};
  EXPECT_WEFT_ERROR(cpu::conv_lanes_input_grad(1, out.data(), w.data(), 2, g, x.data()), "pH <= dH (kH - 1), got pH 3");
}

}  // namespace
}  // namespace weft
