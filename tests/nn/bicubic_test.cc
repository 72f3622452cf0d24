// interpolate's bicubic mode against PyTorch's values and gradients
// (tests/nn/golden/bicubic_golden.safetensors, from
// tools/golden/make_bicubic_golden.py), hand-worked properties of Keys' kernel,
// a float64 gradcheck, Upsample, and the errors.
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
  static const testing::Golden g("tests/nn/golden/bicubic_golden.safetensors");
  return g;
}

InterpolateOptions bicubic(std::vector<int64_t> size, std::vector<double> scale, bool align_corners) {
  InterpolateOptions o;
  o.size = std::move(size);
  o.scale_factor = std::move(scale);
  o.mode = InterpolateMode::Bicubic;
  o.align_corners = align_corners;
  return o;
}

TEST(Bicubic, GoldenAgainstPyTorch) {
  const std::vector<std::pair<std::string, InterpolateOptions>> cases = {
      {"up_size", bicubic({9, 11}, {}, false)},        {"up_size_ac", bicubic({9, 11}, {}, true)},
      {"up_scale", bicubic({}, {1.5}, false)},         {"down_size", bicubic({3, 4}, {}, false)},
      {"mixed_scale", bicubic({}, {1.3, 0.7}, false)}, {"one_row_ac", bicubic({1, 8}, {}, true)}};
  for (const auto& [name, opts] : cases) {
    testing::check_golden_both(
        golden(), name, [opts = opts](const Tensor& x, const Tensor&, const Tensor&) { return interpolate(x, opts); });
  }
}

TEST(Bicubic, KeysKernelProperties) {
  // The kernel's weights sum to 1, so a constant image stays constant (edges included, by clamping).
  Tensor c = full({1, 2, 4, 5}, 3.0, TensorOptions{DType::Float64});
  EXPECT_TRUE(tensors_near(interpolate(c, bicubic({7, 9}, {}, false)), full({1, 2, 7, 9}, 3.0), 1e-12));
  // Halving 8 -> 4 puts every source at l = 1/2, where Keys' weights (A = -0.75) are
  // W(1.5), W(0.5), W(0.5), W(1.5) = -3/32, 19/32, 19/32, -3/32 on sources 2o - 1 .. 2o + 2.
  Tensor r = tensor<double>({0, 1, 0, 0, 3, 0, 0, 0}, {1, 1, 1, 8});
  std::vector<double> y = values(interpolate(r, bicubic({1, 4}, {}, false)));
  EXPECT_DOUBLE_EQ(y[0], -3.0 / 32 * 0 + 19.0 / 32 * 0 + 19.0 / 32 * 1 - 3.0 / 32 * 0);  // source -1 clamped to 0
  EXPECT_DOUBLE_EQ(y[1], -3.0 / 32 * 1 + 19.0 / 32 * 0 + 19.0 / 32 * 0 - 3.0 / 32 * 3);
  EXPECT_DOUBLE_EQ(y[2], -3.0 / 32 * 0 + 19.0 / 32 * 3 + 19.0 / 32 * 0 - 3.0 / 32 * 0);
  // Same size: the identity (l = 0 gives weights 0, 1, 0, 0).
  Tensor x = rnd({2, 3, 4, 5}, DType::Float64, 101);
  EXPECT_TRUE(tensors_near(interpolate(x, bicubic({4, 5}, {}, false)), x, 1e-15));
}

TEST(Bicubic, GradcheckHalfAndErrors) {
  Tensor x = rnd({1, 2, 4, 3}, DType::Float64, 102);
  x.requires_grad_(true);
  auto r = autograd::gradcheck(
      [](const std::vector<Tensor>& in) {
        return interpolate(in[0], bicubic({6, 5}, {}, false));
      },
      {x});
  EXPECT_TRUE(r.ok) << r.message;
  Tensor f = rnd({2, 3, 5, 6}, DType::Float32, 103);
  Tensor half = interpolate(f.to(DType::BFloat16), bicubic({}, {2.0}, false));
  EXPECT_EQ(half.dtype(), DType::BFloat16);
  EXPECT_TRUE(tensors_near(
      half, interpolate(f.to(DType::BFloat16).to(DType::Float32), bicubic({}, {2.0}, false)).to(DType::BFloat16), 0));
  EXPECT_WEFT_ERROR(interpolate(rnd({2, 3, 5}, DType::Float32, 1), bicubic({7}, {}, false)),
                    "interpolate: mode bicubic expects a 4-D input (N, C, H, W), got shape [2, 3, 5]");
  EXPECT_WEFT_ERROR(interpolate(f.to(DType::Int64), bicubic({7, 7}, {}, false)),
                    "interpolate: mode bicubic expects a floating input, got int64");
}

}  // namespace
}  // namespace weft
