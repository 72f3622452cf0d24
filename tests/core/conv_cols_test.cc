// The implicit column matrix (core/cpu/conv_cols_avx512.h) that conv2d's
// float32 GEMMs read instead of im2col's: its B panels against panels cut by
// hand from im2col's matrix (geometries whose planes are not a multiple of 16
// positions, so runs of 16 cross from one image into the next; planes of
// under 32 positions; dilation, pH = 0, 1x1 kernels, the CNN's second layer;
// windows starting mid-image and partial last panels); conv2d's output and
// gradients bit for bit those of im2col + GEMM at 1 and 3 threads; and the
// geometries it leaves to im2col.
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "core/cpu/conv_cols_avx512.h"
#include "core/cpu/conv_lanes_avx512.h"
#include "core/cpu/gemm.h"
#include "core/cpu/gemm_avx512.h"
#include "core/error.h"
#include "core/nn_ops.h"
#include "core/ops.h"
#include "core/parallel.h"
#include "tests/testing.h"

namespace weft {
namespace {
using testing::rnd;
using testing::values;

struct Geo {
  int64_t N, C, H, W, k, pH, pW, dH, dW;
};

cpu::Conv2dGeom geom_of(const Geo& c) {
  const int64_t OH = c.H + 2 * c.pH - c.dH * (c.k - 1), OW = c.W + 2 * c.pW - c.dW * (c.k - 1);
  return {c.C, c.H, c.W, c.k, c.k, 1, 1, c.pH, c.pW, c.dH, c.dW, OH, OW};
}

std::vector<Geo> geometries() {
  return {
      {2, 2, 9, 7, 3, 1, 1, 1, 1},     // 63 positions: runs of 16 cross into the next image
      {3, 3, 5, 6, 3, 1, 1, 1, 1},     // 30 positions: a run can start in one image and end in the next
      {2, 1, 6, 11, 5, 2, 2, 1, 1},    // 5x5, 66 positions
      {2, 2, 7, 9, 3, 2, 2, 2, 2},     // dilation 2
      {2, 2, 6, 11, 3, 0, 1, 1, 1},    // pH = 0: OH = H - 2
      {2, 16, 4, 5, 1, 0, 0, 1, 1},    // 1x1 over 16 channels, 20 positions
      {2, 32, 14, 14, 3, 1, 1, 1, 1},  // the Fashion-MNIST CNN's second layer
  };
}

struct Aligned {
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float[], Free> p;
  explicit Aligned(int64_t n) : p(static_cast<float*>(std::aligned_alloc(64, ((n * 4 + 63) / 64) * 64))) {}
};

// What GemmPackB's contract (core/cpu/gemm_avx512.h) asks for B's window
// [p0, p0 + kc) x [j0, j0 + nc), B(p, j) given as a function.
template <typename F>
std::vector<float> panels(int64_t p0, int64_t kc, int64_t j0, int64_t nc, F b) {
  std::vector<float> out((nc + 31) / 32 * 32 * kc, -1.0f);
  for (int64_t jr = 0; jr < nc; jr += 32) {
    const int64_t cols = std::min<int64_t>(32, nc - jr), w = cols > 16 ? 32 : 16;
    for (int64_t p = 0; p < kc; ++p)
      for (int64_t jj = 0; jj < w; ++jj) out[jr * kc + p * w + jj] = jj < cols ? b(p0 + p, j0 + jr + jj) : 0.0f;
  }
  return out;
}

// The panels a packer writes for the window, the unused tail left as the reference has it.
std::vector<float> packed(const cpu::GemmPackB& pk, int64_t p0, int64_t kc, int64_t j0, int64_t nc) {
  const int64_t size = (nc + 31) / 32 * 32 * kc;
  Aligned buf(size);
  std::fill(buf.p.get(), buf.p.get() + size, -1.0f);
  pk.pack(p0, kc, j0, nc, buf.p.get());
  return std::vector<float>(buf.p.get(), buf.p.get() + size);
}

class ConvCols : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cpu::gemm_f32_uses_avx512()) GTEST_SKIP() << "no AVX-512 on this CPU: conv2d runs im2col here";
  }
};

TEST_F(ConvCols, PanelsAreIm2colsValues) {
  uint64_t seed = 10;
  for (const Geo& c : geometries()) {
    const cpu::Conv2dGeom g = geom_of(c);
    ASSERT_TRUE(cpu::conv_cols_applies(g, 1)) << "C " << c.C << " k " << c.k;
    const int64_t taps = c.C * c.k * c.k, L = g.OH * g.OW, n = c.N * L;
    Tensor x = rnd({c.N, c.C, c.H, c.W}, DType::Float32, ++seed);
    const float* px = x.data_ptr<float>();
    std::vector<float> cols(taps * n);  // the chunk's column matrix, images side by side
    for (int64_t i = 0; i < c.N; ++i) cpu::im2col(px + i * c.C * c.H * c.W, g, cols.data() + i * L, n);
    const cpu::ConvColsPlan plan(g);
    const cpu::ConvColsPack pack(plan, px);
    const cpu::ConvColsTPack tpack(plan, px);
    auto col = [&](int64_t p, int64_t j) { return cols[p * n + j]; };   // B = cols
    auto colt = [&](int64_t p, int64_t j) { return cols[j * n + p]; };  // B = cols^T
    // (p0, kc, j0, nc) windows of B: whole, then starting mid-image with a
    // partial last panel (kc <= 384, nc <= 256 as the GEMM asks)
    const int64_t kt = std::min<int64_t>(taps, 384), kn = std::min<int64_t>(n, 384);
    const int64_t wins[][4] = {{0, kt, 0, std::min<int64_t>(n, 256)},
                               {taps / 3, taps - taps / 3, n / 2, n - n / 2},
                               {1, std::min<int64_t>(taps - 1, 7), L - 5, std::min<int64_t>(n - L + 5, 23)}};
    for (const auto& wdw : wins) {
      EXPECT_EQ(packed(pack, wdw[0], wdw[1], wdw[2], wdw[3]), panels(wdw[0], wdw[1], wdw[2], wdw[3], col))
          << "cols, C " << c.C << " k " << c.k << " window " << wdw[0] << " " << wdw[2];
    }
    const int64_t twins[][4] = {{0, kn, 0, std::min<int64_t>(taps, 256)},
                                {L - 3, std::min<int64_t>(n - L + 3, 37), taps / 2, taps - taps / 2},
                                {n / 2, n - n / 2, 1, std::min<int64_t>(taps - 1, 17)}};
    for (const auto& wdw : twins) {
      EXPECT_EQ(packed(tpack, wdw[0], wdw[1], wdw[2], wdw[3]), panels(wdw[0], wdw[1], wdw[2], wdw[3], colt))
          << "cols^T, C " << c.C << " k " << c.k << " window " << wdw[0] << " " << wdw[2];
    }
  }
}

// y, and the gradients of sum(y * gy) with respect to x, w, b.
std::vector<Tensor> run(const Geo& c, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& gy) {
  Tensor xr = x.detach().requires_grad_(), wr = w.detach().requires_grad_(), br = b.detach().requires_grad_();
  Tensor y = conv2d(xr, wr, br, {1, 1}, {c.pH, c.pW}, {c.dH, c.dW});
  y.backward(gy);
  return {y.detach(), xr.grad(), wr.grad(), br.grad()};
}

// The GEMMs sum the same packed values in the same order, so conv2d gives the
// bits of im2col + GEMM, whichever path each thread count takes.
TEST_F(ConvCols, Conv2dGivesIm2colsBits) {
  uint64_t seed = 30;
  const int nt = get_num_threads();
  for (Geo c : geometries()) {
    c.N = 13;  // several chunks, the last one partial
    const cpu::Conv2dGeom g = geom_of(c);
    const int64_t cout = 20;
    Tensor x = rnd({c.N, c.C, c.H, c.W}, DType::Float32, ++seed);
    Tensor w = rnd({cout, c.C, c.k, c.k}, DType::Float32, ++seed);
    Tensor b = rnd({cout}, DType::Float32, ++seed);
    Tensor gy = rnd({c.N, cout, g.OH, g.OW}, DType::Float32, ++seed);
    // (the lanes kernel, which takes the forward and the input gradient of
    // some of these layers, is off here: conv_lanes_test checks it)
    cpu::set_conv_lanes_enabled(false);
    cpu::set_conv_cols_enabled(false);
    set_num_threads(1);
    const auto ref = run(c, x, w, b, gy);
    cpu::set_conv_cols_enabled(true);
    for (int threads : {1, 3}) {
      set_num_threads(threads);
      const auto got = run(c, x, w, b, gy);
      const char* what[] = {"output", "input gradient", "weight gradient", "bias gradient"};
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_EQ(values(got[i]), values(ref[i])) << what[i] << ", C " << c.C << " k " << c.k << ", " << threads;
    }
  }
  cpu::set_conv_lanes_enabled(true);
  set_num_threads(nt);
}

// Note [conv per-image weight gradient]: where the GEMM's K blocks are the
// chunk's images (two 14x14 or 10x20 images a chunk: 392 or 400 positions,
// blocks of 196 or 200), conv2d runs one weight-gradient GEMM per image on
// grad_out in place; the bits are still those of im2col + one GEMM over the
// gathered chunk, as they are where it keeps that GEMM. Both with the input
// gradient computed by the lanes kernel and with none wanted.
TEST_F(ConvCols, PerImageWeightGradientGivesIm2colsBits) {
  uint64_t seed = 70;
  const int nt = get_num_threads();
  // (10x10: chunks of three images, 300 positions in one K block, so one GEMM a chunk)
  for (const Geo& c :
       {Geo{7, 32, 14, 14, 3, 1, 1, 1, 1}, Geo{5, 16, 10, 20, 3, 1, 1, 1, 1}, Geo{7, 16, 10, 10, 3, 1, 1, 1, 1}}) {
    const cpu::Conv2dGeom g = geom_of(c);
    if (c.H != 10 || c.W != 10) {
      ASSERT_EQ(cpu::gemm_avx512_k_block(2 * g.OH * g.OW), g.OH * g.OW);
    }
    const int64_t cout = 24;
    Tensor x = rnd({c.N, c.C, c.H, c.W}, DType::Float32, ++seed);
    Tensor w = rnd({cout, c.C, c.k, c.k}, DType::Float32, ++seed);
    Tensor b = rnd({cout}, DType::Float32, ++seed);
    Tensor gy = rnd({c.N, cout, g.OH, g.OW}, DType::Float32, ++seed);
    auto grads = [&](bool x_grad) {
      Tensor xr = x.detach().requires_grad_(x_grad), wr = w.detach().requires_grad_(), br = b.detach().requires_grad_();
      conv2d(xr, wr, br, {1, 1}, {c.pH, c.pW}, {c.dH, c.dW}).backward(gy);
      return std::vector<Tensor>{wr.grad(), br.grad()};
    };
    cpu::set_conv_cols_enabled(false);
    set_num_threads(1);
    const auto ref = grads(false);
    cpu::set_conv_cols_enabled(true);
    for (bool x_grad : {false, true})
      for (int threads : {1, 3}) {
        set_num_threads(threads);
        const auto got = grads(x_grad);
        EXPECT_EQ(values(got[0]), values(ref[0]))
            << "weight gradient, H " << c.H << ", x grad " << x_grad << ", " << threads << " threads";
        EXPECT_EQ(values(got[1]), values(ref[1])) << "bias gradient, H " << c.H;
      }
  }
  set_num_threads(nt);
}

TEST_F(ConvCols, LeavesOtherGeometriesToIm2col) {
  const cpu::Conv2dGeom same{4, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 8, 8};
  EXPECT_TRUE(cpu::conv_cols_applies(same, 1));
  EXPECT_FALSE(cpu::conv_cols_applies(same, 2)) << "groups";
  cpu::Conv2dGeom g = same;
  g.sW = 2, g.OW = 4;
  EXPECT_FALSE(cpu::conv_cols_applies(g, 1)) << "stride";
  g = same;
  g.pW = 0, g.OW = 6;
  EXPECT_FALSE(cpu::conv_cols_applies(g, 1)) << "output narrower than the input";
  g = same;
  g.H = 3, g.W = 5, g.OH = 3, g.OW = 5;
  EXPECT_FALSE(cpu::conv_cols_applies(g, 1)) << "15 positions";
  g = same;
  g.C = 1;
  EXPECT_FALSE(cpu::conv_cols_applies(g, 1)) << "9 taps";
  cpu::set_conv_cols_enabled(false);
  EXPECT_FALSE(cpu::conv_cols_applies(same, 1)) << "switched off";
  cpu::set_conv_cols_enabled(true);
}

// A C of under 16 columns is computed transposed by the GEMM (Note [narrow
// gemm]), which a packed B cannot follow: refused with the sizes.
TEST_F(ConvCols, PackedBNeedsSixteenColumns) {
  const Geo c{1, 2, 9, 7, 3, 1, 1, 1, 1};
  const cpu::Conv2dGeom g = geom_of(c);
  Tensor x = rnd({1, 2, 9, 7}, DType::Float32, 3);
  const cpu::ConvColsPlan plan(g);
  const cpu::ConvColsPack pack(plan, x.data_ptr<float>());
  std::vector<float> a(4 * 18, 1.0f), out(4 * 15);
  try {
    cpu::gemm_avx512_f32_packed_b(4, 15, 18, a.data(), 18, 1, pack, out.data(), 15, false);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("n >= 16 (got 15)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace weft
