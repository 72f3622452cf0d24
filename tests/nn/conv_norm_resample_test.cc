// conv_transpose2d, conv1d, conv_transpose1d, group_norm, interpolate and
// leaky_relu against PyTorch's values (tests/nn/golden/
// conv_norm_resample_golden.safetensors, from
// tools/golden/make_conv_norm_resample_golden.py), conv_transpose2d against
// conv2d as its adjoint, pad's modes and Conv2d's same padding and
// padding_mode, float64 gradchecks, the nn layers over them, and the error
// messages.
#include <cmath>
#include <functional>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "autograd/gradcheck.h"
#include "core/autograd_meta.h"
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
  static const testing::Golden g("tests/nn/golden/conv_norm_resample_golden.safetensors");
  return g;
}
const Tensor& G(const std::string& key) { return golden()(key); }
Tensor leaf(Tensor t) {
  t.requires_grad_(true);
  return t;
}
void expect_gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn, const std::vector<Tensor>& in) {
  auto r = autograd::gradcheck(fn, in);
  EXPECT_TRUE(r.ok) << r.message;
}

using Fn = testing::GoldenFn;
void check_case(const std::string& c, const Fn& fn, DType dt = DType::Float32, double tol = 2e-5) {
  testing::check_golden_case(golden(), c, fn, dt, tol);
}
void check_both(const std::string& c, const Fn& fn) { testing::check_golden_both(golden(), c, fn); }

// ------------------------------------------------------------ transposed convolution

TEST(ConvTranspose, GoldenAgainstPyTorch) {
  check_both("convt2d_s2", [](const Tensor& x, const Tensor& w, const Tensor& b) {
    return conv_transpose2d(x, w, b, {2, 2}, {1, 1}, {1, 1});
  });
  check_both("convt2d_groups", [](const Tensor& x, const Tensor& w, const Tensor&) {
    return conv_transpose2d(x, w, Tensor(), {1, 2}, {0, 1}, {0, 0}, 2, {2, 2});
  });
  check_both("convt2d_plain",
             [](const Tensor& x, const Tensor& w, const Tensor& b) { return conv_transpose2d(x, w, b); });
  check_both("conv1d", [](const Tensor& x, const Tensor& w, const Tensor& b) { return conv1d(x, w, b, 2, 1, 2, 2); });
  check_both("convt1d",
             [](const Tensor& x, const Tensor& w, const Tensor& b) { return conv_transpose1d(x, w, b, 3, 1, 2); });
  EXPECT_EQ(G("convt2d_s2.out").sizes(), (Shape{2, 3, 10, 12}));  // (5 - 1) 2 - 2 + 2 + 1 + 1
}

// <conv_transpose2d(x, w), g> = <x, conv2d(g, w)> for every x and g: the
// definition, checked in float64 on shapes the golden cases do not cover.
TEST(ConvTranspose, IsTheAdjointOfConv2d) {
  struct Case {
    Shape x, w;
    std::array<int64_t, 2> s, p, op, d;
    int64_t groups;
  };
  for (const Case& c : {Case{{3, 6, 7, 5}, {6, 2, 3, 2}, {3, 2}, {1, 0}, {2, 1}, {1, 1}, 3},
                        Case{{2, 4, 6, 6}, {4, 5, 3, 3}, {1, 1}, {1, 1}, {0, 0}, {1, 1}, 1},
                        Case{{1, 2, 9, 3}, {2, 3, 1, 4}, {2, 1}, {0, 2}, {1, 0}, {1, 3}, 1}}) {
    Tensor x = rnd(c.x, DType::Float64, 3), w = rnd(c.w, DType::Float64, 4);
    Tensor y = conv_transpose2d(x, w, Tensor(), c.s, c.p, c.op, c.groups, c.d);
    Tensor g = rnd(y.sizes(), DType::Float64, 5);
    Tensor back = conv2d(g, w, Tensor(), c.s, c.p, c.d, c.groups);
    ASSERT_EQ(back.sizes(), x.sizes());
    const double lhs = values(sum(y * g))[0], rhs = values(sum(x * back))[0];
    EXPECT_NEAR(lhs, rhs, 1e-10 * (1 + std::abs(rhs))) << shape_str(c.x);
  }
}

TEST(ConvTranspose, Gradcheck) {
  Tensor x = leaf(rnd({2, 4, 3, 4}, DType::Float64, 7)), w = leaf(rnd({4, 2, 3, 2}, DType::Float64, 8));
  Tensor b = leaf(rnd({4}, DType::Float64, 9));
  expect_gradcheck(
      [](const std::vector<Tensor>& in) {
        // a transposed input: the op makes its operands contiguous itself
        Tensor xt = in[0].transpose(2, 3).contiguous().transpose(2, 3);
        return conv_transpose2d(xt, in[1], in[2], {2, 1}, {1, 0}, {1, 0}, 2, {1, 2});
      },
      {x, w, b});
  Tensor x1 = leaf(rnd({2, 3, 5}, DType::Float64, 10)), w1 = leaf(rnd({3, 2, 3}, DType::Float64, 11));
  expect_gradcheck([](const std::vector<Tensor>& in) { return conv_transpose1d(in[0], in[1], Tensor(), 2, 1, 1); },
                   {x1, w1});
  Tensor w2 = leaf(rnd({4, 3, 2}, DType::Float64, 12));
  expect_gradcheck([](const std::vector<Tensor>& in) { return conv1d(in[0], in[1], Tensor(), 1, 1, 2); }, {x1, w2});
}

TEST(ConvTranspose, UnbatchedAndLowPrecision) {
  Tensor x = rnd({3, 4, 5}, DType::Float32, 1), w = rnd({3, 2, 2, 3}, DType::Float32, 2);
  Tensor b = rnd({2}, DType::Float32, 3);
  Tensor batched = conv_transpose2d(x.unsqueeze(0), w, b, {2, 2});
  Tensor y = conv_transpose2d(x, w, b, {2, 2});
  EXPECT_TRUE(tensors_near(y, batched.squeeze(0), 0));
  Tensor x1 = rnd({4, 9}, DType::Float32, 4), w1 = rnd({5, 4, 3}, DType::Float32, 5);
  EXPECT_TRUE(tensors_near(conv1d(x1, w1), conv1d(x1.unsqueeze(0), w1).squeeze(0), 0));
  // bfloat16 runs in float32 on the CPU: the float32 result of the rounded inputs, rounded
  Tensor xb = x.to(DType::BFloat16), wb = w.to(DType::BFloat16), bb = b.to(DType::BFloat16);
  Tensor yb = conv_transpose2d(xb, wb, bb, {2, 2});
  EXPECT_EQ(yb.dtype(), DType::BFloat16);
  Tensor ref = conv_transpose2d(xb.to(DType::Float32), wb.to(DType::Float32), bb.to(DType::Float32), {2, 2});
  EXPECT_TRUE(tensors_near(yb, ref.to(DType::BFloat16), 0));
  EXPECT_TRUE(tensors_near(yb, y, 2e-2));
}

TEST(ConvTranspose, Errors) {
  Tensor x = rnd({2, 4, 5, 5}, DType::Float32), w = rnd({4, 3, 3, 3}, DType::Float32);
  EXPECT_WEFT_ERROR(conv_transpose2d(x, w, Tensor(), {2, 2}, {0, 0}, {2, 0}), "output_padding (2, 0)");
  EXPECT_WEFT_ERROR(conv_transpose2d(rnd({2, 3, 5, 5}, DType::Float32), w), "has 3 channels but weight shape");
  EXPECT_WEFT_ERROR(conv_transpose2d(x, w, rnd({4}, DType::Float32)), "does not match the 3 output channels");
  EXPECT_WEFT_ERROR(conv_transpose2d(x, w, Tensor(), {1, 1}, {0, 0}, {0, 0}, 3), "groups = 3 does not divide");
  EXPECT_WEFT_ERROR(conv_transpose2d(rnd({1, 4, 1, 1}, DType::Float32), w, Tensor(), {1, 1}, {2, 2}),
                    "gives an output of -1 x -1");
  EXPECT_WEFT_ERROR(conv_transpose2d(x, w.to(DType::Float64)), "input dtype float32 and weight dtype float64");
  EXPECT_WEFT_ERROR(conv1d(x, rnd({2, 4, 3}, DType::Float32)), "conv1d: expected a 2-D (C, L) or 3-D (N, C, L)");
  EXPECT_WEFT_ERROR(conv_transpose1d(rnd({2, 4, 5}, DType::Float32), w), "conv_transpose1d: expected a 3-D weight");
}

// ------------------------------------------------------------------ group norm

TEST(GroupNorm, GoldenAgainstPyTorch) {
  check_both("gn_affine", [](const Tensor& x, const Tensor& w, const Tensor& b) { return group_norm(x, 3, w, b); });
  // an offset of 100 on unit-sized values
  check_both("gn_plain",
             [](const Tensor& x, const Tensor&, const Tensor&) { return group_norm(x, 2, Tensor(), Tensor(), 1e-3); });
}

TEST(GroupNorm, GradcheckAndGroupsOfOne) {
  Tensor x = leaf(rnd({2, 6, 3, 2}, DType::Float64, 21)), w = leaf(rnd({6}, DType::Float64, 22));
  Tensor b = leaf(rnd({6}, DType::Float64, 23));
  expect_gradcheck([](const std::vector<Tensor>& in) { return group_norm(in[0].transpose(2, 3), 3, in[1], in[2]); },
                   {x, w, b});
  // one channel per group with a batch of one: instance norm, each (n, c) plane on its own
  Tensor y = group_norm(x.detach(), 6);
  Tensor plane = x.detach().select(1, 4);  // (2, 3, 2)
  Tensor ref = layer_norm(plane, {3, 2});
  EXPECT_TRUE(tensors_near(y.select(1, 4), ref, 1e-12));
}

TEST(GroupNorm, Errors) {
  Tensor x = rnd({2, 6, 4}, DType::Float32);
  EXPECT_WEFT_ERROR(group_norm(x, 4), "num_groups = 4 does not divide the 6 channels");
  EXPECT_WEFT_ERROR(group_norm(x, 3, rnd({5}, DType::Float32)), "weight shape [5] does not match the 6 channels");
  EXPECT_WEFT_ERROR(group_norm(rnd({6}, DType::Float32), 3), "at least 2 dims");
  EXPECT_WEFT_ERROR(nn::GroupNorm(4, 6), "GroupNorm: num_groups 4 must be positive and divide num_channels 6");
}

// ----------------------------------------------------------------- interpolate

TEST(Interpolate, GoldenAgainstPyTorch) {
  using M = InterpolateMode;
  const std::vector<std::pair<std::string, InterpolateOptions>> cases = {
      {"near_size", InterpolateOptions{.size = {7, 9}, .mode = M::Nearest}},
      {"near_x2", InterpolateOptions{.scale_factor = {2}, .mode = M::Nearest}},
      {"near_s17", InterpolateOptions{.scale_factor = {1.7}, .mode = M::Nearest}},
      {"near_down", InterpolateOptions{.size = {3, 4}, .mode = M::Nearest}},
      {"nearx_s06", InterpolateOptions{.scale_factor = {0.6, 1.5}, .mode = M::NearestExact}},
      {"near_3d", InterpolateOptions{.size = {11}, .mode = M::Nearest}},
      {"near_5d", InterpolateOptions{.size = {4, 6, 3}, .mode = M::Nearest}},
      {"bil_size", InterpolateOptions{.size = {7, 4}, .mode = M::Bilinear}},
      {"bil_ac", InterpolateOptions{.size = {9, 11}, .mode = M::Bilinear, .align_corners = true}},
      {"bil_s15", InterpolateOptions{.scale_factor = {1.5}, .mode = M::Bilinear}},
      {"bil_s13", InterpolateOptions{.scale_factor = {1.3, 0.7}, .mode = M::Bilinear}},
      {"lin_s23", InterpolateOptions{.scale_factor = {2.3}, .mode = M::Linear}},
      {"lin_ac1", InterpolateOptions{.size = {1}, .mode = M::Linear, .align_corners = true}},
      {"lin_ac", InterpolateOptions{.size = {12}, .mode = M::Linear, .align_corners = true}},
  };
  for (const auto& [c, opts] : cases) {
    InterpolateOptions o = opts;
    check_both("interp_" + c, [o](const Tensor& x, const Tensor&, const Tensor&) { return interpolate(x, o); });
  }
}

TEST(Interpolate, HandWorkedAndIdentity) {
  // (1, 1, 3) -> 5, linear, align_corners=False: source positions 0.6 k - 0.2 clamped at 0
  Tensor x = tensor({0.0f, 10.0f, 20.0f}, {1, 1, 3});
  EXPECT_TRUE(testing::tensor_near(interpolate(x, InterpolateOptions{.size = {5}, .mode = InterpolateMode::Linear}),
                                   {0, 4, 10, 16, 20}, 1e-6));
  EXPECT_TRUE(testing::tensor_near(
      interpolate(x, InterpolateOptions{.size = {5}, .mode = InterpolateMode::Linear, .align_corners = true}),
      {0, 5, 10, 15, 20}, 1e-6));
  EXPECT_TRUE(testing::tensor_near(interpolate(x, InterpolateOptions{.size = {6}, .mode = InterpolateMode::Nearest}),
                                   {0, 0, 10, 10, 20, 20}, 0));
  // the same size is the input itself, for every mode
  Tensor x4 = rnd({2, 3, 4, 5}, DType::Float32, 31);
  for (InterpolateMode m : {InterpolateMode::Nearest, InterpolateMode::NearestExact, InterpolateMode::Bilinear})
    EXPECT_TRUE(tensors_near(interpolate(x4, InterpolateOptions{.size = {4, 5}, .mode = m}), x4, 0));
  // nearest works on integers, bilinear on bfloat16 (computed in float32)
  Tensor xi = tensor<int64_t>({1, 2, 3, 4}, {1, 1, 2, 2}, {DType::Int64});
  Tensor yi = interpolate(xi, InterpolateOptions{.scale_factor = {2}, .mode = InterpolateMode::Nearest});
  EXPECT_EQ(yi.dtype(), DType::Int64);
  EXPECT_EQ(values(yi), (std::vector<double>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
  Tensor yb =
      interpolate(x4.to(DType::BFloat16), InterpolateOptions{.size = {7, 3}, .mode = InterpolateMode::Bilinear});
  EXPECT_EQ(yb.dtype(), DType::BFloat16);
  EXPECT_TRUE(tensors_near(yb,
                           interpolate(x4.to(DType::BFloat16).to(DType::Float32),
                                       InterpolateOptions{.size = {7, 3}, .mode = InterpolateMode::Bilinear})
                               .to(DType::BFloat16),
                           0));
}

TEST(Interpolate, Gradcheck) {
  Tensor x = leaf(rnd({1, 2, 3, 4}, DType::Float64, 41));
  for (bool ac : {false, true}) {
    expect_gradcheck(
        [ac](const std::vector<Tensor>& in) {
          return interpolate(
              in[0].transpose(2, 3),
              InterpolateOptions{.size = {5, 2}, .mode = InterpolateMode::Bilinear, .align_corners = ac});
        },
        {x});
  }
  expect_gradcheck(
      [](const std::vector<Tensor>& in) {
        return interpolate(in[0], InterpolateOptions{.scale_factor = {1.6, 0.5}, .mode = InterpolateMode::Nearest});
      },
      {x});
}

TEST(Interpolate, Errors) {
  Tensor x3 = rnd({1, 2, 5}, DType::Float32), x4 = rnd({1, 2, 5, 5}, DType::Float32);
  EXPECT_WEFT_ERROR(interpolate(x4, InterpolateOptions{}), "give exactly one of size and scale_factor");
  InterpolateOptions both = InterpolateOptions{.size = {3, 3}, .mode = InterpolateMode::Nearest};
  both.scale_factor = {2.0};
  EXPECT_WEFT_ERROR(interpolate(x4, both), "give exactly one of size and scale_factor");
  EXPECT_WEFT_ERROR(interpolate(x3, InterpolateOptions{.size = {7}, .mode = InterpolateMode::Bilinear}),
                    "mode bilinear expects a 4-D input");
  EXPECT_WEFT_ERROR(interpolate(x4, InterpolateOptions{.size = {7, 7}, .mode = InterpolateMode::Linear}),
                    "mode linear expects a 3-D input");
  EXPECT_WEFT_ERROR(
      interpolate(x4, InterpolateOptions{.size = {7, 7}, .mode = InterpolateMode::Nearest, .align_corners = true}),
      "align_corners applies to the linear modes and bicubic only, not nearest");
  EXPECT_WEFT_ERROR(interpolate(x4, InterpolateOptions{.size = {7, 7, 7}, .mode = InterpolateMode::Nearest}),
                    "one per spatial dim");
  EXPECT_WEFT_ERROR(interpolate(x4, InterpolateOptions{.scale_factor = {0.1}, .mode = InterpolateMode::Nearest}),
                    "must be positive in every spatial dim");
  EXPECT_WEFT_ERROR(interpolate(x4, InterpolateOptions{.scale_factor = {-2}, .mode = InterpolateMode::Nearest}),
                    "must be positive");
  EXPECT_WEFT_ERROR(interpolate(x3.to(DType::Int64), InterpolateOptions{.size = {7}, .mode = InterpolateMode::Linear}),
                    "mode linear expects a floating input");
  EXPECT_WEFT_ERROR(
      interpolate(rnd({2, 5}, DType::Float32), InterpolateOptions{.size = {7}, .mode = InterpolateMode::Nearest}),
      "at least one spatial dim");
}

// ------------------------------------------------------- pad modes and conv padding

TEST(PadModes, GoldenAgainstPyTorch) {
  check_both("pad_reflect", [](const Tensor& x, const Tensor&, const Tensor&) {
    return pad(x, {2, 1, 3, 0}, PadMode::Reflect);
  });
  check_both("pad_replicate", [](const Tensor& x, const Tensor&, const Tensor&) {
    return pad(x, {3, 2, 0, 4}, PadMode::Replicate);
  });
  check_both("pad_circular", [](const Tensor& x, const Tensor&, const Tensor&) {
    return pad(x, {5, 1, 2, 4}, PadMode::Circular);
  });
  check_both("pad_reflect_1d", [](const Tensor& x, const Tensor&, const Tensor&) {
    return pad(x, {3, 2}, PadMode::Reflect);
  });
}

TEST(PadModes, HandWorkedAndErrors) {
  Tensor x = tensor({1.0f, 2.0f, 3.0f}, {3});
  EXPECT_EQ(values(pad(x, {2, 2}, PadMode::Reflect)), (std::vector<double>{3, 2, 1, 2, 3, 2, 1}));
  EXPECT_EQ(values(pad(x, {2, 1}, PadMode::Replicate)), (std::vector<double>{1, 1, 1, 2, 3, 3}));
  EXPECT_EQ(values(pad(x, {3, 2}, PadMode::Circular)), (std::vector<double>{1, 2, 3, 1, 2, 3, 1, 2}));
  EXPECT_EQ(values(pad(x, {1, 1}, PadMode::Constant, 9)), (std::vector<double>{9, 1, 2, 3, 9}));
  EXPECT_WEFT_ERROR(pad(x, {3, 0}, PadMode::Reflect), "mode reflect pads dim 0 of size 3 by (3, 0)");
  EXPECT_WEFT_ERROR(pad(x, {4, 0}, PadMode::Circular), "mode circular pads dim 0 of size 3 by (4, 0)");
  EXPECT_WEFT_ERROR(pad(x, {-1, 0}, PadMode::Replicate), "mode replicate takes non-negative amounts");
}

TEST(Conv2dPadding, SameAndModesAgainstPyTorch) {
  nn::Conv2dOptions same, refl, circ;
  same.same_padding = true;
  same.dilation = {1, 2};
  refl.padding = {1, 2};
  refl.padding_mode = PadMode::Reflect;
  circ.same_padding = true;
  circ.padding_mode = PadMode::Circular;
  for (const auto& [c, o] : std::vector<std::pair<std::string, nn::Conv2dOptions>>{
           {"conv_same_k4", same}, {"conv_reflect", refl}, {"conv_circular_same", circ}}) {
    SCOPED_TRACE(c);
    nn::Conv2d conv(3, 4, {3, 4}, o);
    {
      NoGradGuard no_grad;
      conv.weight.copy_(G(c + ".w"));
      conv.bias.copy_(G(c + ".b"));
    }
    Tensor x = leaf(G(c + ".x").clone());
    Tensor y = conv.forward(x);
    ASSERT_TRUE(tensors_near(y, G(c + ".out"), 2e-5));
    y.backward(G(c + ".go"));
    EXPECT_TRUE(tensors_near(x.grad(), G(c + ".dx"), 2e-5));
    EXPECT_TRUE(tensors_near(conv.weight.grad(), G(c + ".dw"), 2e-5));
    EXPECT_TRUE(tensors_near(conv.bias.grad(), G(c + ".db"), 2e-5));
  }
  nn::Conv2dOptions strided = same;
  strided.stride = {2, 1};
  EXPECT_WEFT_ERROR(nn::Conv2d(3, 4, 3, strided), "same padding needs a stride of 1");
}

// ------------------------------------------------------------------ leaky_relu

TEST(LeakyReLU, GoldenAndGradcheck) {
  check_both("leaky", [](const Tensor& x, const Tensor&, const Tensor&) { return leaky_relu(x, 0.2); });
  Tensor x = leaf(rnd({3, 4}, DType::Float64, 51) + 0.0005);  // no element at 0
  expect_gradcheck([](const std::vector<Tensor>& in) { return leaky_relu(in[0], 0.1); }, {x});
  EXPECT_WEFT_ERROR(leaky_relu(tensor<int64_t>({1, -2}, {2}, {DType::Int64})), "leaky_relu: expected a floating");
}

// ----------------------------------------------------------------------- layers

TEST(Layers, ParametersInitAndForward) {
  nn::ConvTranspose2dOptions o;
  o.stride = {2, 2};
  o.padding = {1, 1};
  o.output_padding = {1, 1};
  o.groups = 2;
  nn::ConvTranspose2d up(8, 6, 3, o);
  auto params = up.named_parameters();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0].first, "weight");
  EXPECT_EQ(params[0].second.sizes(), (Shape{8, 3, 3, 3}));  // (C_in, C_out / groups, kH, kW)
  EXPECT_EQ(params[1].second.sizes(), (Shape{6}));
  // PyTorch's init: |w| < 1 / sqrt(fan_in) with fan_in = C_out / groups * kH * kW = 27
  const double bound = 1 / std::sqrt(27.0);
  double wmax = 0;
  for (double v : values(up.weight)) wmax = std::max(wmax, std::abs(v));
  EXPECT_LE(wmax, bound);
  EXPECT_GT(wmax, 0.8 * bound);  // 216 draws reach past 0.8 of the bound
  Tensor x = rnd({2, 8, 4, 5}, DType::Float32, 61);
  Tensor y = up.forward(x);
  EXPECT_EQ(y.sizes(), (Shape{2, 6, 8, 10}));
  EXPECT_TRUE(tensors_near(y, conv_transpose2d(x, up.weight, up.bias, {2, 2}, {1, 1}, {1, 1}, 2), 0));

  nn::Conv1d c1(4, 6, 3, {.stride = 2, .padding = 1});
  EXPECT_EQ(c1.weight.sizes(), (Shape{6, 4, 3}));
  EXPECT_EQ(c1.forward(rnd({2, 4, 9}, DType::Float32)).sizes(), (Shape{2, 6, 5}));

  nn::GroupNorm gn(2, 6);
  EXPECT_EQ(gn.named_parameters().size(), 2u);
  Tensor xg = rnd({3, 6, 5}, DType::Float32, 62);
  EXPECT_TRUE(tensors_near(gn.forward(xg), group_norm(xg, 2), 0));  // weight 1, bias 0
  EXPECT_TRUE(nn::GroupNorm(3, 6, 1e-5, false).named_parameters().empty());

  nn::Upsample us(InterpolateOptions{.scale_factor = {2}, .mode = InterpolateMode::Bilinear, .align_corners = true});
  EXPECT_EQ(us.forward(x).sizes(), (Shape{2, 8, 8, 10}));

  nn::LeakyReLU lr(0.3);
  EXPECT_TRUE(testing::tensor_near(lr.forward(tensor({-2.0f, 0.0f, 3.0f}, {3})), {-0.6, 0, 3}, 1e-7));
  nn::Sequential net;
  net.push_back(std::make_shared<nn::ConvTranspose2d>(8, 6, 3, o));
  net.push_back(std::make_shared<nn::GroupNorm>(3, 6));
  net.push_back(std::make_shared<nn::LeakyReLU>(0.2));
  net.push_back(std::make_shared<nn::Identity>());
  net.push_back(std::make_shared<nn::Softmax>(1));
  Tensor p = net.forward(x);
  EXPECT_TRUE(tensors_near(sum(p, {1}), ones({2, 8, 10}), 1e-6));
  sum(p * rnd(p.sizes(), DType::Float32, 63)).backward();
  for (const auto& [name, t] : net.named_parameters()) EXPECT_TRUE(t.grad().defined()) << name;
  EXPECT_TRUE(tensors_near(nn::LogSoftmax(1).forward(x), log_softmax(x, 1), 0));
}

}  // namespace
}  // namespace weft
