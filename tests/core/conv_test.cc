// conv2d against a naive direct-loop reference written here (stride, padding,
// dilation, groups, depthwise, bias, non-square, batches, non-contiguous input,
// every float dtype), gradchecks for input/weight/bias, and shape errors.
#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "autograd/gradcheck.h"
#include "core/nn_ops.h"
#include "core/ops.h"
#include "core/parallel.h"
#include "tests/testing.h"

namespace weft {
namespace {
using testing::rnd;
using testing::tensor_near;
using testing::tensors_near;
using testing::values;

struct Cfg {
  int64_t N, Cin, H, W, Cout, kH, kW;
  std::array<int64_t, 2> stride, pad, dil;
  int64_t groups;
  bool bias;
};

// Direct 7-loop reference: out[n, co, oh, ow] = b[co] + sum w[co, ci, i, j] x[n, g*Cg + ci, ...].
std::vector<double> naive_conv(const Tensor& x, const Tensor& w, const Tensor& b, const Cfg& c, int64_t OH,
                               int64_t OW) {
  auto vx = values(x), vw = values(w);
  std::vector<double> vb = b.defined() ? values(b) : std::vector<double>(c.Cout, 0.0);
  const int64_t Cg = c.Cin / c.groups, Cog = c.Cout / c.groups;
  std::vector<double> out(c.N * c.Cout * OH * OW, 0.0);
  for (int64_t n = 0; n < c.N; ++n)
    for (int64_t co = 0; co < c.Cout; ++co)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double s = vb[co];
          int64_t g = co / Cog;
          for (int64_t ci = 0; ci < Cg; ++ci)
            for (int64_t i = 0; i < c.kH; ++i)
              for (int64_t j = 0; j < c.kW; ++j) {
                int64_t h = oh * c.stride[0] - c.pad[0] + i * c.dil[0];
                int64_t ww = ow * c.stride[1] - c.pad[1] + j * c.dil[1];
                if (h < 0 || h >= c.H || ww < 0 || ww >= c.W) continue;
                s += vw[((co * Cg + ci) * c.kH + i) * c.kW + j] * vx[((n * c.Cin + g * Cg + ci) * c.H + h) * c.W + ww];
              }
          out[((n * c.Cout + co) * OH + oh) * OW + ow] = s;
        }
  return out;
}

std::vector<Cfg> configs() {
  return {
      {2, 3, 7, 6, 4, 3, 3, {1, 1}, {0, 0}, {1, 1}, 1, true},    // plain
      {3, 2, 9, 8, 5, 3, 2, {2, 2}, {1, 0}, {1, 1}, 1, true},    // stride 2, non-square kernel, padding
      {2, 3, 10, 9, 2, 3, 3, {1, 2}, {2, 1}, {2, 2}, 1, false},  // dilation 2, no bias
      {2, 4, 6, 7, 6, 3, 3, {1, 1}, {1, 1}, {1, 1}, 2, true},    // groups 2
      {2, 4, 6, 6, 4, 3, 3, {2, 1}, {1, 1}, {1, 1}, 4, true},    // depthwise
      {2, 4, 5, 5, 8, 3, 3, {1, 1}, {1, 1}, {1, 1}, 4, false},   // depthwise multiplier 2
      {3, 6, 5, 4, 4, 1, 1, {1, 1}, {0, 0}, {1, 1}, 2, true},    // 1x1 pointwise, grouped
      {2, 3, 5, 6, 4, 1, 1, {2, 2}, {1, 0}, {1, 1}, 1, true},    // 1x1 strided, padded
      {4, 1, 8, 8, 5, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},    // 1 input channel (first layer)
      {1, 2, 4, 4, 3, 4, 4, {1, 1}, {0, 0}, {1, 1}, 1, true},    // kernel == image
      {2, 2, 6, 5, 3, 2, 3, {3, 2}, {1, 1}, {2, 1}, 1, true},    // mixed
  };
}

int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
  return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

TEST(Conv2d, MatchesNaiveReference) {
  uint64_t seed = 10;
  for (const Cfg& c : configs()) {
    for (DType dt : {DType::Float64, DType::Float32}) {
      Tensor x = rnd({c.N, c.Cin, c.H, c.W}, dt, ++seed);
      Tensor w = rnd({c.Cout, c.Cin / c.groups, c.kH, c.kW}, dt, ++seed);
      Tensor b = c.bias ? rnd({c.Cout}, dt, ++seed) : Tensor();
      Tensor y = conv2d(x, w, b, c.stride, c.pad, c.dil, c.groups);
      int64_t OH = out_size(c.H, c.kH, c.stride[0], c.pad[0], c.dil[0]);
      int64_t OW = out_size(c.W, c.kW, c.stride[1], c.pad[1], c.dil[1]);
      ASSERT_EQ(y.sizes(), (Shape{c.N, c.Cout, OH, OW}));
      EXPECT_EQ(y.dtype(), dt);
      EXPECT_TRUE(tensor_near(y, naive_conv(x, w, b, c, OH, OW), dt == DType::Float64 ? 1e-12 : 1e-5))
          << "config groups=" << c.groups << " k=" << c.kH << "x" << c.kW;
    }
  }
}

TEST(Conv2d, HandComputed) {
  // 1x1x3x3 image, 2x2 all-ones kernel, bias 0.5: sums of 2x2 windows.
  Tensor x = tensor({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3});
  Tensor w = ones({1, 1, 2, 2});
  Tensor b = tensor({0.5f}, {1});
  EXPECT_TRUE(tensor_near(conv2d(x, w, b), {12.5, 16.5, 24.5, 28.5}));
  // padding 1, stride 2: corners of the padded image
  EXPECT_TRUE(tensor_near(conv2d(x, w, Tensor(), {2, 2}, {1, 1}), {1, 5, 11, 28}));
}

TEST(Conv2d, NonContiguousAndUnbatched) {
  Cfg c{2, 3, 6, 5, 4, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true};
  Tensor xt = rnd({2, 3, 5, 6}, DType::Float64, 3).transpose(2, 3);  // (2, 3, 6, 5), non-contiguous
  ASSERT_FALSE(xt.is_contiguous());
  Tensor w = rnd({4, 3, 3, 3}, DType::Float64, 4).transpose(2, 3);  // non-contiguous weight
  Tensor b = rnd({8}, DType::Float64, 5).slice(0, 0, 8, 2);         // strided bias
  Tensor y = conv2d(xt, w, b, {1, 1}, {1, 1});
  EXPECT_TRUE(tensor_near(y, naive_conv(xt, w, b, c, 6, 5), 1e-12));
  // unbatched (C, H, W) input gives (C_out, OH, OW)
  Tensor y1 = conv2d(xt.select(0, 1), w, b, {1, 1}, {1, 1});
  ASSERT_EQ(y1.sizes(), (Shape{4, 6, 5}));
  EXPECT_TRUE(tensors_near(y1, y.select(0, 1), 1e-12));
}

TEST(Conv2d, HalfPrecisionDtypes) {
  Cfg c{2, 2, 5, 5, 3, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true};
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    Tensor x = rnd({2, 2, 5, 5}, dt, 7), w = rnd({3, 2, 3, 3}, dt, 8), b = rnd({3}, dt, 9);
    Tensor y = conv2d(x, w, b, {1, 1}, {1, 1});
    EXPECT_EQ(y.dtype(), dt);
    EXPECT_TRUE(tensor_near(y, naive_conv(x, w, b, c, 5, 5), 2e-2));
  }
}

TEST(Conv2d, ThreadCountIndependent) {
  Tensor x = rnd({9, 3, 8, 8}, DType::Float32, 1).requires_grad_();
  Tensor w = rnd({5, 3, 3, 3}, DType::Float32, 2).requires_grad_();
  Tensor b = rnd({5}, DType::Float32, 3).requires_grad_();
  auto run = [&] {
    x.zero_grad();
    w.zero_grad();
    b.zero_grad();
    Tensor y = conv2d(x, w, b, {1, 1}, {1, 1});
    y.backward(ones_like(y));
    return std::vector<Tensor>{y.detach(), x.grad(), w.grad(), b.grad()};
  };
  int nt = get_num_threads();
  set_num_threads(1);
  auto r1 = run();
  set_num_threads(std::max(nt, 2));
  auto r2 = run();
  set_num_threads(nt);
  for (size_t i = 0; i < r1.size(); ++i) EXPECT_EQ(values(r1[i]), values(r2[i])) << "result " << i;
}

TEST(Conv2d, Gradcheck) {
  uint64_t seed = 100;
  for (const Cfg& c : configs()) {
    Tensor x = rnd({std::min<int64_t>(c.N, 2), c.Cin, c.H, c.W}, DType::Float64, ++seed).requires_grad_();
    Tensor w = rnd({c.Cout, c.Cin / c.groups, c.kH, c.kW}, DType::Float64, ++seed).requires_grad_();
    std::vector<Tensor> in{x, w};
    if (c.bias) in.push_back(rnd({c.Cout}, DType::Float64, ++seed).requires_grad_());
    auto r = autograd::gradcheck(
        [&](const std::vector<Tensor>& v) {
          return conv2d(v[0], v[1], v.size() > 2 ? v[2] : Tensor(), c.stride, c.pad, c.dil, c.groups);
        },
        in);
    EXPECT_TRUE(r.ok) << r.message << " (groups=" << c.groups << ")";
  }
}

// Batches split into several image chunks (with a short last chunk), and one
// large image (a single chunk): values and all three gradients.
TEST(Conv2d, ChunkedBatchesAndSingleLargeImage) {
  for (Cfg c : {Cfg{9, 2, 8, 8, 3, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},
                Cfg{1, 2, 20, 20, 3, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true}}) {
    Tensor x = rnd({c.N, c.Cin, c.H, c.W}, DType::Float64, 21);
    Tensor w = rnd({c.Cout, c.Cin, 3, 3}, DType::Float64, 22);
    Tensor b = rnd({c.Cout}, DType::Float64, 23);
    EXPECT_TRUE(tensor_near(conv2d(x, w, b, {1, 1}, {1, 1}), naive_conv(x, w, b, c, c.H, c.W), 1e-12));
  }
  Tensor x = rnd({5, 2, 8, 8}, DType::Float64, 24).requires_grad_();  // chunks of 4 and 1 images
  Tensor w = rnd({3, 2, 3, 3}, DType::Float64, 25).requires_grad_();
  Tensor b = rnd({3}, DType::Float64, 26).requires_grad_();
  auto r = autograd::gradcheck(
      [](const std::vector<Tensor>& v) {
        return conv2d(v[0], v[1], v[2], {1, 1}, {1, 1});
      },
      {x, w, b});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(Conv2d, GradOnlyForWhatRequiresIt) {
  Tensor x = rnd({2, 2, 5, 5}, DType::Float64, 1);  // data: no grad
  Tensor w = rnd({3, 2, 3, 3}, DType::Float64, 2).requires_grad_();
  Tensor b = rnd({3}, DType::Float64, 3);
  Tensor y = conv2d(x, w, b, {1, 1}, {1, 1});
  y.sum().backward();
  EXPECT_TRUE(w.grad().defined());
  // d(sum y)/d w[co, ci, i, j] = sum over n and output positions of the matching input pixel
  Cfg c{2, 2, 5, 5, 3, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false};
  auto vx = values(x);
  std::vector<double> expect(3 * 2 * 9, 0.0);
  for (int64_t co = 0; co < 3; ++co)
    for (int64_t ci = 0; ci < 2; ++ci)
      for (int64_t i = 0; i < 3; ++i)
        for (int64_t j = 0; j < 3; ++j) {
          double s = 0;
          for (int64_t n = 0; n < 2; ++n)
            for (int64_t oh = 0; oh < 5; ++oh)
              for (int64_t ow = 0; ow < 5; ++ow) {
                int64_t h = oh - 1 + i, ww = ow - 1 + j;
                if (h >= 0 && h < 5 && ww >= 0 && ww < 5) s += vx[((n * 2 + ci) * 5 + h) * 5 + ww];
              }
          expect[((co * 2 + ci) * 3 + i) * 3 + j] = s;
        }
  EXPECT_TRUE(tensor_near(w.grad(), expect, 1e-12));
  (void)c;
}

// A batch of no images: an empty output, and zero weight and bias gradients
// (as PyTorch), in float32 (the AVX-512 paths) and float64; the input's is empty.
TEST(Conv2d, EmptyBatch) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    Tensor x = zeros({0, 2, 5, 5}, {dt}).requires_grad_();
    Tensor w = rnd({3, 2, 3, 3}, dt, 2).requires_grad_();
    Tensor b = rnd({3}, dt, 3).requires_grad_();
    Tensor y = conv2d(x, w, b, {1, 1}, {1, 1});
    EXPECT_EQ(y.sizes(), (Shape{0, 3, 5, 5}));
    y.sum().backward();
    EXPECT_TRUE(tensor_near(w.grad(), std::vector<double>(54, 0.0), 0)) << dt;
    EXPECT_TRUE(tensor_near(b.grad(), {0, 0, 0}, 0)) << dt;
    EXPECT_EQ(x.grad().sizes(), (Shape{0, 2, 5, 5}));
  }
}

TEST(Conv2d, Errors) {
  Tensor x = rnd({2, 4, 6, 6}, DType::Float32);
  Tensor w = rnd({6, 4, 3, 3}, DType::Float32);
  EXPECT_WEFT_ERROR(conv2d(rnd({4, 6, 6, 1, 1}, DType::Float32), w), "conv2d: expected a 3-D");
  EXPECT_WEFT_ERROR(conv2d(rnd({6, 6}, DType::Float32), w), "[6, 6]");
  EXPECT_WEFT_ERROR(conv2d(x, rnd({6, 4, 3}, DType::Float32)), "4-D weight");
  EXPECT_WEFT_ERROR(conv2d(x, rnd({6, 3, 3, 3}, DType::Float32)), "has 4 channels but weight shape");
  EXPECT_WEFT_ERROR(conv2d(x, rnd({6, 1, 3, 3}, DType::Float32), Tensor(), {1, 1}, {0, 0}, {1, 1}, 3),
                    "groups = 3 does not divide the 4 input channels");
  EXPECT_WEFT_ERROR(conv2d(x, rnd({5, 2, 3, 3}, DType::Float32), Tensor(), {1, 1}, {0, 0}, {1, 1}, 2),
                    "does not divide the 5 output channels");
  EXPECT_WEFT_ERROR(conv2d(x, w, rnd({5}, DType::Float32)), "bias shape");
  EXPECT_WEFT_ERROR(conv2d(x, rnd({6, 4, 7, 7}, DType::Float32)), "output size would be <= 0");
  EXPECT_WEFT_ERROR(conv2d(x, w, Tensor(), {1, 1}, {0, 0}, {4, 4}), "output size would be <= 0");
  EXPECT_WEFT_ERROR(conv2d(x, w, Tensor(), {0, 1}), "stride must be positive");
  EXPECT_WEFT_ERROR(conv2d(x, w, Tensor(), {1, 1}, {-1, 0}), "padding must be non-negative");
  EXPECT_WEFT_ERROR(conv2d(x, w.to(DType::Float64)), "dtype");
  EXPECT_WEFT_ERROR(conv2d(x.to(DType::Int64), w.to(DType::Int64)), "floating dtype");
}

}  // namespace
}  // namespace weft
