// max_pool2d / avg_pool2d / adaptive_avg_pool2d against naive references written
// here and PyTorch golden values (ceil_mode, count_include_pad), max-pool ties
// and NaN, gradient routing, gradchecks, dtypes, non-contiguous input, errors;
// the index-free 2x2 / stride-2 kernels against the indexed ones.
#include "core/kernels/pool.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "autograd/gradcheck.h"
#include "core/nn_ops.h"
#include "core/ops.h"
#include "tests/testing.h"

namespace weft {
namespace {
using testing::rnd;
using testing::tensor_near;
using testing::tensors_near;
using testing::values;

struct PoolCfg {
  int64_t N, C, H, W;
  std::array<int64_t, 2> k, s, p, d;
  bool ceil;
};

int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil) {
  double v = static_cast<double>(in + 2 * p - d * (k - 1) - 1) / s;
  int64_t o = static_cast<int64_t>(ceil ? std::ceil(v) : std::floor(v)) + 1;
  if (ceil && (o - 1) * s >= in + p) --o;
  return o;
}

// Naive max pool: plain scan of the window in row-major order, first max wins.
std::vector<double> naive_max(const Tensor& x, const PoolCfg& c, int64_t OH, int64_t OW) {
  auto v = values(x);
  std::vector<double> out;
  for (int64_t pl = 0; pl < c.N * c.C; ++pl)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        double m = -INFINITY;
        for (int64_t i = 0; i < c.k[0]; ++i)
          for (int64_t j = 0; j < c.k[1]; ++j) {
            int64_t h = oh * c.s[0] - c.p[0] + i * c.d[0], w = ow * c.s[1] - c.p[1] + j * c.d[1];
            if (h >= 0 && h < c.H && w >= 0 && w < c.W) m = std::max(m, v[(pl * c.H + h) * c.W + w]);
          }
        out.push_back(m);
      }
  return out;
}

// Naive avg pool (PyTorch divisor rules).
std::vector<double> naive_avg(const Tensor& x, const PoolCfg& c, int64_t OH, int64_t OW, bool include_pad) {
  auto v = values(x);
  std::vector<double> out;
  for (int64_t pl = 0; pl < c.N * c.C; ++pl)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        double s = 0;
        int64_t cnt = 0, padcnt = 0;
        for (int64_t i = 0; i < c.k[0]; ++i)
          for (int64_t j = 0; j < c.k[1]; ++j) {
            int64_t h = oh * c.s[0] - c.p[0] + i, w = ow * c.s[1] - c.p[1] + j;
            if (h < c.H + c.p[0] && w < c.W + c.p[1]) ++padcnt;  // inside the padded image
            if (h >= 0 && h < c.H && w >= 0 && w < c.W) {
              s += v[(pl * c.H + h) * c.W + w];
              ++cnt;
            }
          }
        out.push_back(s / (include_pad ? padcnt : cnt));
      }
  return out;
}

std::vector<PoolCfg> max_configs() {
  return {
      {2, 3, 8, 8, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false},   // the CNN's pool (fast path)
      {2, 2, 7, 9, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false},   // odd sizes, fast path drops the edge
      {2, 2, 6, 39, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false},  // wide rows: vector body + tail
      {1, 2, 7, 6, {3, 2}, {2, 1}, {1, 1}, {1, 1}, false},   // padding, non-square
      {2, 1, 9, 9, {3, 3}, {2, 2}, {1, 1}, {2, 2}, false},   // dilation 2
      {1, 2, 6, 7, {3, 3}, {2, 2}, {1, 0}, {1, 1}, true},    // ceil_mode
      {2, 2, 5, 5, {2, 2}, {2, 2}, {1, 1}, {1, 1}, true},    // ceil + padding
  };
}

TEST(MaxPool2d, MatchesNaive) {
  uint64_t seed = 1;
  for (const PoolCfg& c : max_configs())
    for (DType dt : {DType::Float64, DType::Float32}) {
      Tensor x = rnd({c.N, c.C, c.H, c.W}, dt, ++seed);
      Tensor y = max_pool2d(x, c.k, c.s, c.p, c.d, c.ceil);
      int64_t OH = out_size(c.H, c.k[0], c.s[0], c.p[0], c.d[0], c.ceil);
      int64_t OW = out_size(c.W, c.k[1], c.s[1], c.p[1], c.d[1], c.ceil);
      ASSERT_EQ(y.sizes(), (Shape{c.N, c.C, OH, OW}));
      EXPECT_TRUE(tensor_near(y, naive_max(x, c, OH, OW), 0));
    }
}

TEST(MaxPool2d, TorchGoldenCeilMode) {
  Tensor x = arange(25, {DType::Float64}).reshape({1, 1, 5, 5});
  Tensor y = max_pool2d(x, {3, 3}, {2, 2}, {1, 1}, {1, 1}, true);
  EXPECT_EQ(y.sizes(), (Shape{1, 1, 3, 3}));
  EXPECT_TRUE(tensor_near(y, {6, 8, 9, 16, 18, 19, 21, 23, 24}));
  // ceil_mode output sizes (PyTorch): 5 -> 3 with k2 p1 ceil; 6 -> 4 with k3 s2 p1 ceil; 6 -> 3 without
  EXPECT_EQ(max_pool2d(rnd({1, 1, 5, 5}), {2, 2}, {0, 0}, {1, 1}, {1, 1}, true).sizes(), (Shape{1, 1, 3, 3}));
  EXPECT_EQ(max_pool2d(rnd({1, 1, 6, 6}), {3, 3}, {2, 2}, {1, 1}, {1, 1}, true).sizes(), (Shape{1, 1, 4, 4}));
  EXPECT_EQ(max_pool2d(rnd({1, 1, 6, 6}), {3, 3}, {2, 2}, {1, 1}, {1, 1}, false).sizes(), (Shape{1, 1, 3, 3}));
  // the last window may not start in the right padding: 4 with k2 s2 p1 ceil -> 3, not 4
  EXPECT_EQ(max_pool2d(rnd({1, 1, 4, 4}), {2, 2}, {2, 2}, {1, 1}, {1, 1}, true).sizes(), (Shape{1, 1, 3, 3}));
}

TEST(MaxPool2d, TiesRouteToFirstMax) {
  // all-equal window: PyTorch picks the first element (row-major) of each window
  for (auto k : {std::array<int64_t, 2>{2, 2}, std::array<int64_t, 2>{3, 3}}) {
    for (DType dt : {DType::Float64, DType::Float32}) {
      Tensor x = ones({1, 1, 6, 36}, {dt}).requires_grad_();
      Tensor y = max_pool2d(x, k, k);
      y.backward(ones_like(y));
      auto g = values(x.grad());
      for (int64_t h = 0; h < 6; ++h)
        for (int64_t w = 0; w < 36; ++w)
          EXPECT_EQ(g[h * 36 + w], (h % k[0] == 0 && w % k[1] == 0) ? 1.0 : 0.0) << h << "," << w;
    }
  }
  // tie between the 2nd and 4th elements: the 2nd gets it (scalar and vector paths)
  Tensor x = tensor({0, 5, 1, 5}, {1, 1, 2, 2}).requires_grad_();
  max_pool2d(x, {2, 2}).sum().backward();
  EXPECT_TRUE(tensor_near(x.grad(), {0, 1, 0, 0}));
  Tensor xw = cat({tensor({0, 5}, {1, 1, 1, 2}).expand({1, 1, 1, 2}), tensor({1, 5}, {1, 1, 1, 2})}, 2);  // (1,1,2,2)
  Tensor wide = cat(std::vector<Tensor>(10, xw), 3).detach().requires_grad_();                            // (1,1,2,20)
  max_pool2d(wide, {2, 2}).sum().backward();
  auto gw = values(wide.grad());
  for (int64_t w = 0; w < 20; ++w) {
    EXPECT_EQ(gw[w], w % 2 == 1 ? 1.0 : 0.0) << w;
    EXPECT_EQ(gw[20 + w], 0.0) << w;
  }
}

TEST(MaxPool2d, NanPropagatesAndOverlapAccumulates) {
  float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = tensor({1, nan, 3, 4}, {1, 1, 2, 2});
  EXPECT_TRUE(std::isnan(values(max_pool2d(x, {2, 2}))[0]));
  // NaN in each window position of a wide row (vector path), float and double
  for (DType dt : {DType::Float32, DType::Float64}) {
    std::vector<double> v(2 * 32, 0.0);
    for (int64_t o = 0; o < 16; ++o) {
      int64_t pos = o % 4, h = pos / 2, w = 2 * o + pos % 2;
      v[h * 32 + w] = NAN;
      v[(1 - h) * 32 + 2 * o] = 5.0;  // a larger finite value elsewhere in the window
    }
    Tensor xn = tensor(v, {1, 1, 2, 32}).to(dt);
    auto out = values(max_pool2d(xn, {2, 2}));
    for (int64_t o = 0; o < 16; ++o) EXPECT_TRUE(std::isnan(out[o])) << o;
  }
  // overlapping windows (stride 1) that share a max: its gradient sums
  Tensor y = tensor({0, 0, 0, 0, 9, 0, 0, 0, 0}, {1, 1, 3, 3}).requires_grad_();
  max_pool2d(y, {2, 2}, {1, 1}).sum().backward();
  EXPECT_TRUE(tensor_near(y.grad(), {0, 0, 0, 0, 4, 0, 0, 0, 0}));
}

TEST(MaxPool2d, NonContiguousUnbatchedAndDtypes) {
  PoolCfg c{2, 3, 6, 8, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false};
  Tensor xt = rnd({2, 3, 8, 6}, DType::Float32, 4).transpose(2, 3);
  ASSERT_FALSE(xt.is_contiguous());
  EXPECT_TRUE(tensor_near(max_pool2d(xt, {2, 2}), naive_max(xt, c, 3, 4), 0));
  Tensor y3 = max_pool2d(xt.select(0, 1), {2, 2});
  EXPECT_EQ(y3.sizes(), (Shape{3, 3, 4}));
  EXPECT_TRUE(tensors_near(y3, max_pool2d(xt, {2, 2}).select(0, 1), 0));
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    Tensor xh = xt.to(dt);
    Tensor yh = max_pool2d(xh, {2, 2});
    EXPECT_EQ(yh.dtype(), dt);
    EXPECT_TRUE(tensor_near(yh, naive_max(xh, c, 3, 4), 0));
  }
}

// 2x2 windows at stride 2 take the index-free kernels (max_pool2x2_table):
// the same output, and gradients bit for bit those of the indexed kernels'
// scatter-add (ties, NaNs, -0 gradients, odd sizes whose last row and column
// no window covers, rows of under 8 windows, of whole blocks of 8, and of
// blocks plus a rest).
TEST(MaxPool2d, TwoByTwoIndexFreeMatchesTheIndexedKernels) {
  uint64_t seed = 70;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (DType dt : {DType::Float32, DType::Float64})
    for (auto hw : {std::array<int64_t, 2>{8, 8}, {7, 9}, {6, 39}, {5, 35}, {4, 32}, {4, 16}}) {
      const int64_t P = 6, H = hw[0], W = hw[1], OH = H / 2, OW = W / 2;
      Tensor x = rnd({2, 3, H, W}, DType::Float64, ++seed);
      // ties (values rounded to tenths) and a NaN every 13 elements
      std::vector<double> v = values(x);
      for (size_t i = 0; i < v.size(); ++i) v[i] = i % 13 == 5 ? nan : std::round(v[i] * 5) / 5;
      x = tensor(v, {2, 3, H, W}).to(dt).requires_grad_();
      Tensor y = max_pool2d(x, {2, 2});
      std::vector<double> gv = values(rnd({2, 3, OH, OW}, DType::Float64, ++seed));
      for (size_t i = 0; i < gv.size(); i += 7) gv[i] = -0.0;
      Tensor gy = tensor(gv, {2, 3, OH, OW}).to(dt);
      y.backward(gy);
      // the indexed kernels on the same planes
      Tensor xp = x.detach().contiguous().view({P, H, W});
      Tensor out = empty({P, OH, OW}, {dt}), idx = empty({P, OH, OW}, {DType::Int64});
      max_pool2d_table()(kCPU, dt, out, idx, xp, Pool2dParams{2, 2, 2, 2, 0, 0, 1, 1, false});
      Tensor gx = empty({P, H, W}, {dt});
      max_pool2d_backward_table()(kCPU, dt, gx, gy.contiguous().view({P, OH, OW}), idx);
      // the index-free kernels called directly (max_pool2d keeps the indices
      // for training on rows of under 8 windows)
      Tensor out2 = empty({P, OH, OW}, {dt}), gx2 = empty({P, H, W}, {dt});
      max_pool2x2_table()(kCPU, dt, out2, xp);
      max_pool2x2_backward_table()(kCPU, dt, gx2, gy.contiguous().view({P, OH, OW}), xp);
      std::vector<double> got = values(y), got2 = values(out2), want = values(out);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_TRUE(got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i]))) << H << "x" << W << " out " << i;
        EXPECT_TRUE(got2[i] == want[i] || (std::isnan(got2[i]) && std::isnan(want[i]))) << H << "x" << W << " " << i;
      }
      std::vector<double> g1 = values(x.grad()), g2 = values(gx2), g3 = values(gx);
      for (size_t i = 0; i < g1.size(); ++i) {
        EXPECT_TRUE(g1[i] == g3[i] && std::signbit(g1[i]) == std::signbit(g3[i])) << H << "x" << W << " grad " << i;
        EXPECT_TRUE(g2[i] == g3[i] && std::signbit(g2[i]) == std::signbit(g3[i])) << H << "x" << W << " kernel " << i;
      }
    }
}

// The index-free backward reads x again: changing it in place between the
// forward and the backward is an error, not a wrong gradient.
TEST(MaxPool2d, TwoByTwoBackwardRefusesAnInputChangedInPlace) {
  Tensor w = rnd({1, 2, 4, 16}, DType::Float32, 3).requires_grad_();  // 8 windows a row: index-free
  Tensor h = mul(w, scalar_tensor(2.0, {DType::Float32}));
  Tensor y = max_pool2d(h, {2, 2});
  h.add_(1.0);
  EXPECT_WEFT_ERROR(y.sum().backward(), "MaxPool2dBackward");
}

TEST(MaxPool2d, Gradcheck) {
  uint64_t seed = 50;
  for (const PoolCfg& c : max_configs()) {
    // distinct values (no ties) so finite differences are well defined
    Tensor x = add(rnd({c.N, c.C, c.H, c.W}, DType::Float64, ++seed),
                   mul(arange(c.N * c.C * c.H * c.W, {DType::Float64}).reshape({c.N, c.C, c.H, c.W}),
                       scalar_tensor(1e-4, {DType::Float64})))
                   .detach()
                   .requires_grad_();
    auto r = autograd::gradcheck(
        [&](const std::vector<Tensor>& v) { return max_pool2d(v[0], c.k, c.s, c.p, c.d, c.ceil); }, {x});
    EXPECT_TRUE(r.ok) << r.message;
  }
}

std::vector<PoolCfg> avg_configs() {
  return {
      {2, 3, 8, 8, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false}, {1, 2, 7, 6, {3, 2}, {2, 1}, {1, 1}, {1, 1}, false},
      {1, 2, 5, 5, {3, 3}, {2, 2}, {1, 1}, {1, 1}, true},  {2, 1, 5, 7, {2, 3}, {2, 2}, {1, 1}, {1, 1}, true},
      {1, 1, 6, 6, {3, 3}, {1, 1}, {0, 0}, {1, 1}, false},
  };
}

TEST(AvgPool2d, MatchesNaive) {
  uint64_t seed = 7;
  for (const PoolCfg& c : avg_configs())
    for (bool inc : {true, false})
      for (DType dt : {DType::Float64, DType::Float32}) {
        Tensor x = rnd({c.N, c.C, c.H, c.W}, dt, ++seed);
        Tensor y = avg_pool2d(x, c.k, c.s, c.p, c.ceil, inc);
        int64_t OH = out_size(c.H, c.k[0], c.s[0], c.p[0], 1, c.ceil);
        int64_t OW = out_size(c.W, c.k[1], c.s[1], c.p[1], 1, c.ceil);
        ASSERT_EQ(y.sizes(), (Shape{c.N, c.C, OH, OW}));
        EXPECT_TRUE(tensor_near(y, naive_avg(x, c, OH, OW, inc), dt == DType::Float64 ? 1e-12 : 1e-6));
      }
}

TEST(AvgPool2d, TorchGolden) {
  Tensor x = arange(25, {DType::Float64}).reshape({1, 1, 5, 5});
  EXPECT_TRUE(tensor_near(avg_pool2d(x, {3, 3}, {2, 2}, {1, 1}, true, true),
                          {1.3333333333333333, 3.0, 2.6666666666666665, 7.0, 12.0, 9.0, 8.0, 13.0, 9.333333333333334}));
  EXPECT_TRUE(tensor_near(avg_pool2d(x, {3, 3}, {2, 2}, {1, 1}, true, false),
                          {3.0, 4.5, 6.0, 10.5, 12.0, 13.5, 18.0, 19.5, 21.0}));
  EXPECT_TRUE(tensor_near(avg_pool2d(x, {2, 2}, {2, 2}, {1, 1}, true, true),
                          {0.0, 0.75, 1.75, 3.75, 9.0, 11.0, 8.75, 19.0, 21.0}));
}

TEST(AvgPool2d, GradcheckAndDtypes) {
  uint64_t seed = 70;
  for (const PoolCfg& c : avg_configs())
    for (bool inc : {true, false}) {
      Tensor x = rnd({c.N, c.C, c.H, c.W}, DType::Float64, ++seed).requires_grad_();
      auto r = autograd::gradcheck(
          [&](const std::vector<Tensor>& v) { return avg_pool2d(v[0], c.k, c.s, c.p, c.ceil, inc); }, {x});
      EXPECT_TRUE(r.ok) << r.message;
    }
  Tensor xt = rnd({1, 2, 6, 4}, DType::Float32, 3).transpose(2, 3);  // non-contiguous (1, 2, 4, 6)
  PoolCfg c{1, 2, 4, 6, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false};
  for (DType dt : {DType::Float32, DType::Float16, DType::BFloat16}) {
    Tensor y = avg_pool2d(xt.to(dt), {2, 2});
    EXPECT_EQ(y.dtype(), dt);
    EXPECT_TRUE(tensor_near(y, naive_avg(xt.to(dt), c, 2, 3, true), dt == DType::Float32 ? 1e-6 : 1e-2));
  }
}

TEST(AdaptiveAvgPool2d, MatchesNaiveAndGolden) {
  Tensor x = arange(25, {DType::Float64}).reshape({1, 1, 5, 5});
  EXPECT_TRUE(tensor_near(adaptive_avg_pool2d(x, {3, 2}), {3.5, 5.5, 11.0, 13.0, 18.5, 20.5}));
  for (auto os : {std::array<int64_t, 2>{1, 1}, std::array<int64_t, 2>{3, 4}, std::array<int64_t, 2>{7, 9},
                  std::array<int64_t, 2>{5, 2}}) {
    Tensor in = rnd({2, 3, 5, 7}, DType::Float64, os[0] * 10 + os[1]);
    auto v = values(in);
    std::vector<double> ref;
    for (int64_t pl = 0; pl < 6; ++pl)
      for (int64_t oh = 0; oh < os[0]; ++oh)
        for (int64_t ow = 0; ow < os[1]; ++ow) {
          int64_t hs = static_cast<int64_t>(std::floor(oh * 5.0 / os[0]));
          int64_t he = static_cast<int64_t>(std::ceil((oh + 1) * 5.0 / os[0]));
          int64_t ws = static_cast<int64_t>(std::floor(ow * 7.0 / os[1]));
          int64_t we = static_cast<int64_t>(std::ceil((ow + 1) * 7.0 / os[1]));
          double s = 0;
          for (int64_t h = hs; h < he; ++h)
            for (int64_t w = ws; w < we; ++w) s += v[(pl * 5 + h) * 7 + w];
          ref.push_back(s / ((he - hs) * (we - ws)));
        }
    Tensor y = adaptive_avg_pool2d(in, os);
    ASSERT_EQ(y.sizes(), (Shape{2, 3, os[0], os[1]}));
    EXPECT_TRUE(tensor_near(y, ref, 1e-12));
    Tensor xg = in.detach().requires_grad_();
    auto r = autograd::gradcheck([&](const std::vector<Tensor>& a) { return adaptive_avg_pool2d(a[0], os); }, {xg});
    EXPECT_TRUE(r.ok) << r.message;
  }
  // unbatched, half precision
  Tensor h = rnd({3, 4, 4}, DType::BFloat16, 2);
  Tensor yh = adaptive_avg_pool2d(h, {1, 1});
  EXPECT_EQ(yh.sizes(), (Shape{3, 1, 1}));
  EXPECT_EQ(yh.dtype(), DType::BFloat16);
  auto hv = values(h);
  for (int64_t c = 0; c < 3; ++c) {
    double s = 0;
    for (int64_t i = 0; i < 16; ++i) s += hv[c * 16 + i];
    EXPECT_NEAR(values(yh)[c], s / 16, 1e-2);
  }
}

TEST(Pool2d, Errors) {
  Tensor x = rnd({2, 3, 6, 6}, DType::Float32);
  EXPECT_WEFT_ERROR(max_pool2d(rnd({6, 6}), {2, 2}), "max_pool2d: expected a 3-D");
  EXPECT_WEFT_ERROR(avg_pool2d(rnd({1, 2, 3, 6, 6}), {2, 2}), "avg_pool2d: expected a 3-D");
  EXPECT_WEFT_ERROR(adaptive_avg_pool2d(rnd({6}), {2, 2}), "adaptive_avg_pool2d: expected a 3-D");
  EXPECT_WEFT_ERROR(max_pool2d(x, {2, 2}, {0, 0}, {2, 0}), "should be at most half");
  EXPECT_WEFT_ERROR(avg_pool2d(x, {3, 3}, {0, 0}, {2, 2}), "should be at most half");
  EXPECT_WEFT_ERROR(max_pool2d(x, {0, 2}), "kernel_size must be positive");
  EXPECT_WEFT_ERROR(max_pool2d(x, {2, 2}, {-1, 1}), "stride must be positive");
  EXPECT_WEFT_ERROR(max_pool2d(x, {2, 2}, {0, 0}, {0, 0}, {0, 1}), "dilation must be positive");
  EXPECT_WEFT_ERROR(max_pool2d(x, {7, 7}), "too small");
  EXPECT_WEFT_ERROR(avg_pool2d(x, {4, 8}), "too small");
  EXPECT_WEFT_ERROR(adaptive_avg_pool2d(x, {0, 2}), "output_size must be positive");
  EXPECT_WEFT_ERROR(max_pool2d(x.to(DType::Int64), {2, 2}), "floating dtype");
}

}  // namespace
}  // namespace weft
