// instance_norm, pixel_shuffle / pixel_unshuffle and embedding's padding_idx
// against PyTorch's values (tests/nn/golden/norm_shuffle_embedding_golden.safetensors,
// from tools/golden/make_norm_shuffle_embedding_golden.py); the layers over them
// (InstanceNorm1d/2d, PixelShuffle, PixelUnshuffle, Embedding, Dropout1d/2d,
// Unflatten, the padding layers) against their functional forms, hand-worked
// values and statistics; and the error messages.
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "autograd/gradcheck.h"
#include "core/nn_ops.h"
#include "core/rng.h"
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
  static const testing::Golden g("tests/nn/golden/norm_shuffle_embedding_golden.safetensors");
  return g;
}
const Tensor& G(const std::string& key) { return golden()(key); }
void check_both(const std::string& c, const testing::GoldenFn& fn) { testing::check_golden_both(golden(), c, fn); }

// ------------------------------------------------------------ instance norm

TEST(InstanceNorm, GoldenAgainstPyTorch) {
  check_both("in2d_affine", [](const Tensor& x, const Tensor& w, const Tensor& b) {
    return instance_norm(x, Tensor(), Tensor(), w, b);
  });
  // An offset of 50 against the float64 reference: float32 inputs near 50 carry only ~2e-6 of their
  // deviations (std 0.7), which float32 gradients show at ~3e-5; a one-pass variance would lose ~3e-4.
  auto offset = [](const Tensor& x, const Tensor&, const Tensor&) {
    return instance_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-3);
  };
  testing::check_golden_case(golden(), "in1d_offset", offset, DType::Float32, 1e-4);
  testing::check_golden_case(golden(), "in1d_offset", offset, DType::Float64, 1e-6);
  for (const char* c : {"in2d_running", "in2d_eval"}) {
    SCOPED_TRACE(c);
    const bool use_input_stats = std::string(c) == "in2d_running";
    for (DType dt : {DType::Float32, DType::Float64}) {
      Tensor rm = G(std::string(c) + ".rm").to(dt).clone(), rv = G(std::string(c) + ".rv").to(dt).clone();
      testing::check_golden_case(
          golden(), c,
          [&](const Tensor& x, const Tensor& w, const Tensor& b) {
            return instance_norm(x, rm, rv, w, b, use_input_stats, 0.2, 1e-5);
          },
          dt);
      // Updated with the mean of each sample's update, or left alone.
      EXPECT_TRUE(tensors_near(rm, G(std::string(c) + ".rm_after"), 1e-6));
      EXPECT_TRUE(tensors_near(rv, G(std::string(c) + ".rv_after"), 1e-6));
    }
  }
}

TEST(InstanceNorm, HandWorkedAndGradcheck) {
  // One sample, one channel, [1, 3]: mean 2, biased variance 1 -> [-1, 1] / sqrt(1 + eps).
  Tensor x = tensor<double>({1.0, 3.0}, {1, 1, 2});
  std::vector<double> y = values(instance_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 0.0));
  EXPECT_DOUBLE_EQ(y[0], -1.0);
  EXPECT_DOUBLE_EQ(y[1], 1.0);
  Tensor xg = rnd({2, 3, 5}, DType::Float64, 71), w = rnd({3}, DType::Float64, 72), b = rnd({3}, DType::Float64, 73);
  for (Tensor* t : {&xg, &w, &b}) t->requires_grad_(true);
  auto r = autograd::gradcheck(
      [](const std::vector<Tensor>& in) { return instance_norm(in[0], Tensor(), Tensor(), in[1], in[2]); }, {xg, w, b});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(InstanceNorm, Layers) {
  Tensor x = rnd({2, 3, 4, 5}, DType::Float32, 74) * 3 + 1;
  nn::InstanceNorm2d plain(3);
  EXPECT_TRUE(plain.parameters().empty());  // PyTorch's defaults: no affine, no running statistics
  EXPECT_TRUE(plain.buffers().empty());
  EXPECT_TRUE(tensors_near(plain.forward(x), instance_norm(x), 0));
  // Unbatched (C, H, W) is the batched result's sample.
  EXPECT_TRUE(tensors_near(plain.forward(x.select(0, 1)), instance_norm(x).select(0, 1), 1e-6));

  nn::InstanceNorm1d tracked(4, 1e-5, 0.3, /*affine=*/true, /*track_running_stats=*/true);
  EXPECT_EQ(tracked.parameters().size(), 2u);
  EXPECT_EQ(tracked.state_dict().size(), 5u);  // weight, bias, running_mean, running_var, num_batches_tracked
  Tensor x1 = rnd({3, 4, 6}, DType::Float32, 75) + 2;
  Tensor rm = zeros({4}), rv = ones({4});
  Tensor expected = instance_norm(x1, rm, rv, tracked.weight, tracked.bias, true, 0.3, 1e-5);
  Tensor y = tracked.forward(x1);  // training: normalise per instance, update the running statistics
  EXPECT_TRUE(tensors_near(y, expected, 0));
  EXPECT_TRUE(tensors_near(tracked.running_mean, rm, 0));
  EXPECT_TRUE(tensors_near(tracked.running_var, rv, 0));
  EXPECT_GT(values(tracked.running_mean)[0], 0.5);  // moved towards the inputs' mean (about 2)
  tracked.eval();                                   // eval: normalise with the running statistics, which stay
  Tensor ye = tracked.forward(x1);
  EXPECT_TRUE(tensors_near(ye, instance_norm(x1, rm, rv, tracked.weight, tracked.bias, false), 0));
  EXPECT_TRUE(tensors_near(tracked.running_mean, rm, 0));
  EXPECT_EQ(tracked.extra_repr(), "4, eps=0.000010, momentum=0.300000, affine=True, track_running_stats=True");
}

TEST(InstanceNorm, Errors) {
  Tensor x = rnd({2, 3, 4}, DType::Float32, 76);
  EXPECT_WEFT_ERROR(instance_norm(rnd({2, 3}, DType::Float32, 1)),
                    "instance_norm: expected an input of shape (N, C, *) with at least one spatial dim, got shape "
                    "[2, 3]");
  EXPECT_WEFT_ERROR(instance_norm(rnd({2, 3, 1}, DType::Float32, 1)),
                    "instance_norm: expected more than 1 spatial element when training, got input shape [2, 3, 1]");
  EXPECT_WEFT_ERROR(instance_norm(x, zeros({4}), ones({4})),
                    "instance_norm: running_mean must have shape [3] (the input's channels), got [4]");
  EXPECT_WEFT_ERROR(instance_norm(x, zeros({3}), Tensor()),
                    "instance_norm: running_mean and running_var must both be given or both be undefined");
  EXPECT_WEFT_ERROR(instance_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), /*use_input_stats=*/false),
                    "instance_norm: expected running_mean and running_var to be defined when use_input_stats is false");
  nn::InstanceNorm1d layer(5, 1e-5, 0.1, true);
  EXPECT_WEFT_ERROR(layer.forward(x),
                    "InstanceNorm1d: input has 3 channels (shape [2, 3, 4]) but the layer was "
                    "built for 5");
  EXPECT_WEFT_ERROR(layer.forward(rnd({2, 5, 4, 4}, DType::Float32, 2)),
                    "InstanceNorm1d: expected a 2-D or 3-D input, got shape [2, 5, 4, 4]");
}

// ------------------------------------------------------------ pixel shuffle

TEST(PixelShuffle, GoldenAgainstPyTorch) {
  check_both("pixel_shuffle", [](const Tensor& x, const Tensor&, const Tensor&) { return pixel_shuffle(x, 2); });
  check_both("pixel_shuffle_5d", [](const Tensor& x, const Tensor&, const Tensor&) { return pixel_shuffle(x, 3); });
  check_both("pixel_unshuffle", [](const Tensor& x, const Tensor&, const Tensor&) { return pixel_unshuffle(x, 2); });
}

TEST(PixelShuffle, HandWorkedRoundTripLayersAndErrors) {
  // Four channels of one pixel become one channel of 2 x 2: channel k at (k / 2, k % 2).
  Tensor x = tensor({1.0f, 2.0f, 3.0f, 4.0f}, {1, 4, 1, 1});
  Tensor y = pixel_shuffle(x, 2);
  EXPECT_EQ(y.sizes(), (Shape{1, 1, 2, 2}));
  EXPECT_EQ(values(y), (std::vector<double>{1, 2, 3, 4}));
  Tensor z = rnd({2, 12, 3, 5}, DType::Float32, 81);
  EXPECT_TRUE(tensors_near(pixel_unshuffle(pixel_shuffle(z, 2), 2), z, 0));
  EXPECT_TRUE(tensors_near(nn::PixelShuffle(2).forward(z), pixel_shuffle(z, 2), 0));
  EXPECT_TRUE(tensors_near(nn::PixelUnshuffle(3).forward(z.reshape({2, 4, 9, 5}).narrow(3, 0, 3)),
                           pixel_unshuffle(z.reshape({2, 4, 9, 5}).narrow(3, 0, 3), 3), 0));
  EXPECT_WEFT_ERROR(pixel_shuffle(rnd({2, 6, 3, 3}, DType::Float32, 1), 2),
                    "pixel_shuffle: channels 6 of input shape [2, 6, 3, 3] are not divisible by upscale_factor^2 = 4");
  EXPECT_WEFT_ERROR(pixel_unshuffle(rnd({2, 6, 3, 4}, DType::Float32, 1), 2),
                    "pixel_unshuffle: height 3 and width 4 of input shape [2, 6, 3, 4] must be divisible by "
                    "downscale_factor 2");
  EXPECT_WEFT_ERROR(pixel_shuffle(rnd({4, 4}, DType::Float32, 1), 2),
                    "pixel_shuffle: expected an input of shape (*, C * r^2, H, W), got shape [4, 4]");
  EXPECT_WEFT_ERROR(pixel_shuffle(z, 0), "pixel_shuffle: upscale_factor must be positive, got 0");
}

// ------------------------------------------------------------ embedding padding_idx

TEST(EmbeddingPadding, GoldenAgainstPyTorch) {
  for (int64_t pad : {1, -4}) {  // -4 of 5 rows is row 1
    SCOPED_TRACE(pad);
    Tensor w = G("embedding_pad.w").clone();
    w.requires_grad_(true);
    Tensor out = embedding(G("embedding_pad.idx"), w, pad);
    EXPECT_TRUE(tensors_near(out, G("embedding_pad.out"), 0));
    out.backward(G("embedding_pad.go"));
    EXPECT_TRUE(tensors_near(w.grad(), G("embedding_pad.dw"), 1e-6));
    EXPECT_EQ(values(w.grad().select(0, 1)), std::vector<double>(3, 0.0));
  }
}

TEST(EmbeddingPadding, LayerAndErrors) {
  nn::Embedding e(6, 4, 2);
  EXPECT_EQ(e.padding_idx.value_or(-99), 2);
  EXPECT_EQ(values(e.weight.select(0, 2)), std::vector<double>(4, 0.0));  // the padding row starts at zero
  EXPECT_NE(values(e.weight.select(0, 1)), std::vector<double>(4, 0.0));
  Tensor idx = tensor<int64_t>({2, 0, 2}, {3});
  e.forward(idx).sum().backward();
  EXPECT_EQ(values(e.weight.grad().select(0, 2)), std::vector<double>(4, 0.0));
  EXPECT_EQ(values(e.weight.grad().select(0, 0)), std::vector<double>(4, 1.0));
  EXPECT_EQ(e.extra_repr(), "6, 4, padding_idx=2");
  EXPECT_EQ(nn::Embedding(6, 4, -1).padding_idx.value_or(-99), 5);
  EXPECT_WEFT_ERROR(nn::Embedding(6, 4, 6), "Embedding: padding_idx 6 must be within num_embeddings 6");
  EXPECT_WEFT_ERROR(embedding(idx, e.weight, -7), "embedding: padding_idx -7 must be within num_embeddings 6");
}

// ------------------------------------------------------------ channel dropout

TEST(ChannelDropout, WholeChannelsScaledAndSeeded) {
  manual_seed(5);
  Tensor x = ones({64, 32, 3, 4});
  Tensor y = dropout2d(x, 0.25);
  // Each (sample, channel) plane is all 0 or all 1 / 0.75.
  std::vector<double> v = values(y);
  int64_t dropped = 0;
  for (int64_t plane = 0; plane < 64 * 32; ++plane) {
    const double first = v[plane * 12];
    EXPECT_TRUE(first == 0.0 || std::abs(first - 1.0 / 0.75) < 1e-6) << first;
    for (int64_t k = 1; k < 12; ++k) ASSERT_EQ(v[plane * 12 + k], first) << "plane " << plane;
    dropped += first == 0.0;
  }
  // 2048 planes, p = 0.25: 512 expected, standard deviation sqrt(2048 * 0.25 * 0.75) = 19.6; 5 of them.
  EXPECT_NEAR(static_cast<double>(dropped), 512.0, 98.0);
  manual_seed(5);
  EXPECT_TRUE(tensors_near(dropout2d(x, 0.25), y, 0));
  // Unbatched (C, L): one draw per channel.
  std::vector<double> u = values(dropout1d(ones({16, 5}), 0.5));
  for (int64_t c = 0; c < 16; ++c)
    for (int64_t k = 1; k < 5; ++k) EXPECT_EQ(u[c * 5 + k], u[c * 5]);
  // The gradient is the same mask.
  Tensor xg = rnd({4, 6, 7}, DType::Float32, 91);
  xg.requires_grad_(true);
  Tensor yg = dropout1d(xg, 0.5);
  yg.sum().backward();
  std::vector<double> gv = values(xg.grad()), yv = values(yg), xv = values(xg);
  for (size_t i = 0; i < gv.size(); ++i) EXPECT_NEAR(yv[i], xv[i] * gv[i], 1e-6);
  EXPECT_TRUE(tensors_near(dropout2d(x, 0.25, /*training=*/false), x, 0));
  EXPECT_EQ(values(dropout2d(ones({2, 3, 2, 2}), 1.0)), std::vector<double>(24, 0.0));
}

TEST(ChannelDropout, LayersAndErrors) {
  nn::Dropout2d d(0.4);
  d.eval();
  Tensor x = rnd({2, 3, 4, 4}, DType::Float32, 92);
  EXPECT_TRUE(tensors_near(d.forward(x), x, 0));
  d.train();
  manual_seed(9);
  Tensor y = d.forward(x);
  manual_seed(9);
  EXPECT_TRUE(tensors_near(y, dropout2d(x, 0.4), 0));
  EXPECT_WEFT_ERROR(nn::Dropout1d(1.5), "Dropout1d: probability has to be between 0 and 1, but got 1.5");
  EXPECT_WEFT_ERROR(dropout2d(rnd({2, 3}, DType::Float32, 1), 0.5),
                    "dropout2d: expected a 3-D or 4-D input, got shape [2, 3]");
  EXPECT_WEFT_ERROR(dropout1d(x, 0.5), "dropout1d: expected a 2-D or 3-D input, got shape [2, 3, 4, 4]");
}

// ------------------------------------------------------------ Unflatten and padding layers

TEST(ShapeLayers, UnflattenAndPads) {
  Tensor x = rnd({2, 12, 5}, DType::Float32, 93);
  nn::Unflatten u(1, {3, -1});
  Tensor y = u.forward(x);
  EXPECT_EQ(y.sizes(), (Shape{2, 3, 4, 5}));
  EXPECT_TRUE(tensors_near(y, x.reshape({2, 3, 4, 5}), 0));
  EXPECT_EQ(nn::Unflatten(-1, {5, 1}).forward(x).sizes(), (Shape{2, 12, 5, 1}));
  EXPECT_WEFT_ERROR(nn::Unflatten(1, {5, 2}).forward(x),
                    "Unflatten: sizes [5, 2] don't multiply up to the size 12 of dim 1 of input shape [2, 12, 5]");
  EXPECT_WEFT_ERROR(nn::Unflatten(1, {-1, -1}), "Unflatten: only one size in [-1, -1] can be inferred (-1)");

  Tensor x2 = rnd({2, 3, 4, 5}, DType::Float32, 94);
  EXPECT_TRUE(tensors_near(nn::ZeroPad2d(1).forward(x2), pad(x2, {1, 1, 1, 1}), 0));
  EXPECT_TRUE(tensors_near(nn::ZeroPad1d({2, 0}).forward(x), pad(x, {2, 0}), 0));
  EXPECT_TRUE(tensors_near(nn::ConstantPad2d({1, 0, 2, 3}, 0.5).forward(x2), pad(x2, {1, 0, 2, 3}, 0.5), 0));
  EXPECT_TRUE(tensors_near(nn::ConstantPad1d(3, -1.0).forward(x), pad(x, {3, 3}, -1.0), 0));
  EXPECT_TRUE(tensors_near(nn::ReflectionPad2d({2, 1, 3, 0}).forward(x2), pad(x2, {2, 1, 3, 0}, PadMode::Reflect), 0));
  EXPECT_TRUE(tensors_near(nn::ReflectionPad1d(2).forward(x), pad(x, {2, 2}, PadMode::Reflect), 0));
  EXPECT_TRUE(tensors_near(nn::ReplicationPad2d(2).forward(x2), pad(x2, {2, 2, 2, 2}, PadMode::Replicate), 0));
  EXPECT_TRUE(tensors_near(nn::ReplicationPad1d({0, 4}).forward(x), pad(x, {0, 4}, PadMode::Replicate), 0));
  EXPECT_TRUE(tensors_near(nn::CircularPad2d(1).forward(x2), pad(x2, {1, 1, 1, 1}, PadMode::Circular), 0));
  EXPECT_TRUE(tensors_near(nn::CircularPad1d({1, 2}).forward(x), pad(x, {1, 2}, PadMode::Circular), 0));
  // Hand-worked: [1 2 3] reflected by 2 on the left is [3 2 1 2 3].
  EXPECT_EQ(values(nn::ReflectionPad1d({2, 0}).forward(tensor({1.0f, 2.0f, 3.0f}, {1, 3}))),
            (std::vector<double>{3, 2, 1, 2, 3}));
  EXPECT_EQ(nn::ConstantPad2d({1, 0, 2, 3}, 0.5).extra_repr(), "padding=(1, 0, 2, 3), value=0.500000");
  EXPECT_WEFT_ERROR(nn::ReflectionPad2d(1).forward(x2.reshape({120})),
                    "ReflectionPad2d: expected a 3-D or 4-D input, got shape [120]");
}

}  // namespace
}  // namespace weft
