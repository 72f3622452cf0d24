// max_pool1d, avg_pool1d, adaptive_avg_pool1d, rms_norm and the layers over
// them (MaxPool1d, AvgPool1d, AdaptiveAvgPool1d, RMSNorm, ConvTranspose1d)
// against PyTorch's values (tests/nn/golden/pool1d_rms_norm_golden.safetensors,
// from tools/golden/make_pool1d_rms_norm_golden.py), hand-worked values,
// float64 gradchecks, low precision against float32, and the error messages.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "autograd/gradcheck.h"
#include "core/nn_ops.h"
#include "nn/nn.h"
#include "tests/golden.h"
#include "tests/nn/golden_case.h"
#include "tests/testing.h"

namespace weft {
namespace {

using testing::rnd;
using testing::tensors_near;
using testing::values;

const testing::Golden& golden() {
  static const testing::Golden g("tests/nn/golden/pool1d_rms_norm_golden.safetensors");
  return g;
}
void check_both(const std::string& c, const testing::GoldenFn& fn) { testing::check_golden_both(golden(), c, fn); }
Tensor leaf(Tensor t) {
  t.requires_grad_(true);
  return t;
}
void expect_gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn, const std::vector<Tensor>& in) {
  auto r = autograd::gradcheck(fn, in);
  EXPECT_TRUE(r.ok) << r.message;
}

// ------------------------------------------------------------ 1-D pooling

TEST(Pool1d, GoldenAgainstPyTorch) {
  check_both("maxpool1d_k3s2p1", [](const Tensor& x, const Tensor&, const Tensor&) { return max_pool1d(x, 3, 2, 1); });
  check_both("maxpool1d_dil_ceil",
             [](const Tensor& x, const Tensor&, const Tensor&) { return max_pool1d(x, 3, 2, 1, 2, true); });
  check_both("maxpool1d_unbatched", [](const Tensor& x, const Tensor&, const Tensor&) { return max_pool1d(x, 2); });
  check_both("avgpool1d_k3s2p1", [](const Tensor& x, const Tensor&, const Tensor&) { return avg_pool1d(x, 3, 2, 1); });
  check_both("avgpool1d_ceil_excl",
             [](const Tensor& x, const Tensor&, const Tensor&) { return avg_pool1d(x, 4, 3, 2, true, false); });
  check_both("adaptive1d_4", [](const Tensor& x, const Tensor&, const Tensor&) { return adaptive_avg_pool1d(x, 4); });
  check_both("adaptive1d_7", [](const Tensor& x, const Tensor&, const Tensor&) { return adaptive_avg_pool1d(x, 7); });
  check_both("adaptive1d_unbatched",
             [](const Tensor& x, const Tensor&, const Tensor&) { return adaptive_avg_pool1d(x, 3); });
}

TEST(Pool1d, HandWorked) {
  // One channel, L = 5: [1, 5, 2, 4, 3].
  Tensor x = tensor({1.0f, 5.0f, 2.0f, 4.0f, 3.0f}, {1, 1, 5});
  EXPECT_EQ(values(max_pool1d(x, 2)), (std::vector<double>{5, 4}));                    // stride = kernel: [1 5] [2 4]
  EXPECT_EQ(values(max_pool1d(x, 3, 1)), (std::vector<double>{5, 5, 4}));              // windows of 3, stride 1
  EXPECT_EQ(values(max_pool1d(x, 2, 2, 0, 1, true)), (std::vector<double>{5, 4, 3}));  // ceil: a last [3]
  EXPECT_EQ(values(avg_pool1d(x, 2)), (std::vector<double>{3, 3}));
  // Padding 1 counted: [0 1] [5 2] [4 3] / 2; not counted: the first window is [1] alone.
  EXPECT_EQ(values(avg_pool1d(x, 2, 2, 1)), (std::vector<double>{0.5, 3.5, 3.5}));
  EXPECT_EQ(values(avg_pool1d(x, 2, 2, 1, false, false)), (std::vector<double>{1, 3.5, 3.5}));
  // Adaptive to 2: windows [0, 3) and [2, 5) (PyTorch's floor / ceil bounds).
  EXPECT_EQ(values(adaptive_avg_pool1d(x, 2)), (std::vector<double>{8.0f / 3.0f, 3}));
  EXPECT_EQ(values(adaptive_avg_pool1d(x, 5)), values(x));
}

TEST(Pool1d, GradcheckAndUnbatched) {
  Tensor x = leaf(rnd({2, 3, 10}, DType::Float64, 31));
  expect_gradcheck([](const std::vector<Tensor>& in) { return max_pool1d(in[0], 3, 2, 1, 2, true); }, {x});
  expect_gradcheck([](const std::vector<Tensor>& in) { return avg_pool1d(in[0], 4, 3, 2, true, false); }, {x});
  expect_gradcheck([](const std::vector<Tensor>& in) { return adaptive_avg_pool1d(in[0], 4); }, {x});
  Tensor u = rnd({3, 10}, DType::Float32, 32);
  EXPECT_TRUE(tensors_near(max_pool1d(u, 3, 2), max_pool1d(u.unsqueeze(0), 3, 2).squeeze(0), 0));
  EXPECT_TRUE(tensors_near(avg_pool1d(u, 3, 2), avg_pool1d(u.unsqueeze(0), 3, 2).squeeze(0), 0));
  EXPECT_TRUE(tensors_near(adaptive_avg_pool1d(u, 4), adaptive_avg_pool1d(u.unsqueeze(0), 4).squeeze(0), 0));
}

TEST(Pool1d, Errors) {
  Tensor x = rnd({2, 3, 8}, DType::Float32, 33);
  EXPECT_WEFT_ERROR(max_pool1d(rnd({2, 3, 4, 5}, DType::Float32, 1), 2),
                    "max_pool1d: expected a 2-D (C, L) or 3-D (N, C, L) input, got shape [2, 3, 4, 5]");
  EXPECT_WEFT_ERROR(max_pool1d(x, 0), "max_pool1d: kernel_size must be positive, got 0");
  EXPECT_WEFT_ERROR(max_pool1d(x, 2, -1), "max_pool1d: stride must be positive, got -1");
  EXPECT_WEFT_ERROR(max_pool1d(x, 3, 1, 1, 0), "max_pool1d: dilation must be positive, got 0");
  EXPECT_WEFT_ERROR(max_pool1d(x, 3, 1, 2),
                    "max_pool1d: padding 2 should be at most half of the effective kernel "
                    "size 3");
  EXPECT_WEFT_ERROR(avg_pool1d(x, 2, 1, 2), "avg_pool1d: padding 2 should be at most half of the kernel size 2");
  EXPECT_WEFT_ERROR(avg_pool1d(x.to(DType::Int64), 2), "avg_pool1d: expected a floating dtype, got int64");
  EXPECT_WEFT_ERROR(adaptive_avg_pool1d(x, 0), "adaptive_avg_pool1d: output_size must be positive, got 0");
  EXPECT_WEFT_ERROR(adaptive_avg_pool1d(rnd({8}, DType::Float32, 2), 2),
                    "adaptive_avg_pool1d: expected a 2-D (C, L) or 3-D (N, C, L) input, got shape [8]");
  EXPECT_WEFT_ERROR(max_pool1d(rnd({2, 3, 0}, DType::Float32, 3), 1),
                    "max_pool1d: input shape [2, 3, 0] has an empty length dimension");
}

// ------------------------------------------------------------ RMS normalisation

TEST(RmsNorm, GoldenAgainstPyTorch) {
  check_both("rms_weight", [](const Tensor& x, const Tensor& w, const Tensor&) { return rms_norm(x, {8}, w); });
  check_both("rms_2d_eps", [](const Tensor& x, const Tensor&, const Tensor&) {
    return rms_norm(x, {3, 8}, Tensor(), 1e-3);
  });
  check_both("rms_offset", [](const Tensor& x, const Tensor& w, const Tensor&) { return rms_norm(x, {6}, w, 1e-5); });
}

TEST(RmsNorm, HandWorkedAndDefaultEps) {
  // [3, 4]: mean square 12.5, so y = x / sqrt(12.5 + eps).
  Tensor x = tensor<double>({3.0, 4.0}, {1, 2});
  const double eps64 = std::numeric_limits<double>::epsilon();
  std::vector<double> y = values(rms_norm(x, {2}));
  EXPECT_DOUBLE_EQ(y[0], 3.0 / std::sqrt(12.5 + eps64));
  EXPECT_DOUBLE_EQ(y[1], 4.0 / std::sqrt(12.5 + eps64));
  // All zeros: 0 * rsqrt(eps) = 0, and eps defaults to the dtype's epsilon (float32's here), not 0.
  Tensor z = zeros({2, 3});
  EXPECT_EQ(values(rms_norm(z, {3})), std::vector<double>(6, 0.0));
  Tensor tiny = full({1, 1}, 1e-4f);
  const double e32 = std::numeric_limits<float>::epsilon();
  EXPECT_NEAR(values(rms_norm(tiny, {1}))[0], 1e-4 / std::sqrt(1e-8 + e32), 1e-6);
  EXPECT_NEAR(values(rms_norm(tiny, {1}, Tensor(), 0.0))[0], 1.0, 1e-6);
}

TEST(RmsNorm, GradcheckAndLowPrecision) {
  Tensor x = leaf(rnd({3, 4, 5}, DType::Float64, 41)), w = leaf(rnd({4, 5}, DType::Float64, 42));
  expect_gradcheck([](const std::vector<Tensor>& in) { return rms_norm(in[0], {4, 5}, in[1], 1e-6); }, {x, w});
  expect_gradcheck([](const std::vector<Tensor>& in) { return rms_norm(in[0], {5}); }, {x});
  // bfloat16 and float16: normalised in float32, rounded once at the end.
  Tensor x32 = rnd({4, 16}, DType::Float32, 43);
  for (DType dt : {DType::BFloat16, DType::Float16}) {
    Tensor xh = x32.to(dt);
    Tensor y = rms_norm(xh, {16});
    EXPECT_EQ(y.dtype(), dt);
    EXPECT_TRUE(tensors_near(y, rms_norm(xh.to(DType::Float32), {16}).to(dt), 0));
  }
}

TEST(RmsNorm, Errors) {
  Tensor x = rnd({2, 3, 4}, DType::Float32, 44);
  EXPECT_WEFT_ERROR(rms_norm(x, {3}), "rms_norm: input shape [2, 3, 4] does not end in normalized_shape [3]");
  EXPECT_WEFT_ERROR(rms_norm(x, {2, 2, 3, 4}),
                    "rms_norm: input shape [2, 3, 4] does not end in normalized_shape [2, 2, 3, 4]");
  EXPECT_WEFT_ERROR(rms_norm(x, {4}, ones({3})), "rms_norm: weight shape [3] does not match normalized_shape [4]");
  EXPECT_WEFT_ERROR(rms_norm(x, {}), "rms_norm: normalized_shape must have at least one dimension");
  EXPECT_WEFT_ERROR(rms_norm(x, {4}, Tensor(), -1.0), "rms_norm: eps must be non-negative, got -1");
  EXPECT_WEFT_ERROR(rms_norm(x.to(DType::Int64), {4}), "rms_norm: expected a floating dtype, got int64");
}

// ------------------------------------------------------------ the layers

TEST(Layers1d, ModulesMatchTheFunctionalForms) {
  Tensor x = rnd({2, 3, 12}, DType::Float32, 51);
  nn::MaxPool1d mp(3, 2, 1);
  EXPECT_TRUE(tensors_near(mp.forward(x), max_pool1d(x, 3, 2, 1), 0));
  nn::AvgPool1d ap(4, 0, 2, true, false);
  EXPECT_TRUE(tensors_near(ap.forward(x), avg_pool1d(x, 4, 4, 2, true, false), 0));
  nn::AdaptiveAvgPool1d aap(5);
  EXPECT_TRUE(tensors_near(aap.forward(x), adaptive_avg_pool1d(x, 5), 0));
  EXPECT_TRUE(mp.parameters().empty());

  nn::RMSNorm rn(12);
  ASSERT_TRUE(rn.weight.defined());
  EXPECT_EQ(rn.weight.sizes(), (Shape{12}));
  EXPECT_EQ(values(rn.weight), std::vector<double>(12, 1.0));  // PyTorch's init: ones
  EXPECT_TRUE(tensors_near(rn.forward(x), rms_norm(x, {12}), 0));
  EXPECT_EQ(rn.extra_repr(), "[12], eps=None, elementwise_affine=True");
  nn::RMSNorm plain(Shape{3, 12}, 1e-5, false);
  EXPECT_FALSE(plain.weight.defined());
  EXPECT_TRUE(plain.parameters().empty());
  EXPECT_TRUE(tensors_near(plain.forward(x), rms_norm(x, {3, 12}, Tensor(), 1e-5), 0));
  EXPECT_WEFT_ERROR(nn::RMSNorm(Shape{}), "RMSNorm: normalized_shape must have at least one dimension");
}

TEST(Layers1d, ConvTranspose1dAgainstPyTorch) {
  // PyTorch's nn.ConvTranspose1d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2, dilation=2).
  nn::ConvTranspose1d conv(4, 6, 3, {.stride = 2, .padding = 1, .output_padding = 1, .dilation = 2, .groups = 2});
  EXPECT_EQ(conv.weight.sizes(), (Shape{4, 3, 3}));  // (C_in, C_out / groups, K)
  EXPECT_EQ(conv.bias.sizes(), (Shape{6}));
  // Default init: uniform within 1 / sqrt(fan_in), fan_in = C_out / groups * K = 9.
  for (double v : values(conv.bias)) EXPECT_LE(std::abs(v), 1.0 / 3.0);
  for (double v : values(conv.weight)) EXPECT_LE(std::abs(v), 1.0 / 3.0);
  check_both("convtranspose1d_module", [&](const Tensor& x, const Tensor& w, const Tensor& b) {
    conv.weight = w;
    conv.bias = b;
    return conv.forward(x);
  });
  EXPECT_EQ(conv.extra_repr(), "4, 6, kernel_size=3, stride=2, padding=1");
  nn::ConvTranspose1d nobias(2, 2, 1, {.bias = false});
  EXPECT_FALSE(nobias.bias.defined());
  EXPECT_EQ(nobias.parameters().size(), 1u);
  EXPECT_WEFT_ERROR(nn::ConvTranspose1d(4, 5, 3, {.groups = 2}),
                    "ConvTranspose1d: in_channels 4 and out_channels 5 must both be divisible by groups 2");
  EXPECT_WEFT_ERROR(nn::ConvTranspose1d(4, 4, 0), "ConvTranspose1d: kernel size must be positive, got 0");
}

}  // namespace
}  // namespace weft
