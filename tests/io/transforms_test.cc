// Image transforms against hand-computed values; determinism of random ones.
#include "io/transforms.h"

#include <set>

#include <gtest/gtest.h>

#include "core/ops.h"
#include "tests/testing.h"

namespace weft::io {
namespace {

using weft::testing::tensor_near;
using weft::testing::values;

TEST(Normalize, PerChannel) {
  Tensor x = tensor({1, 2, 3, 4, 10, 20, 30, 40}, {2, 2, 2});  // [C=2, 2, 2]
  Generator g(0);
  Tensor y = Normalize({1.0, 10.0}, {2.0, 5.0})(x, g);
  EXPECT_TRUE(tensor_near(y, {0, 0.5, 1, 1.5, 0, 2, 4, 6}));
  // Batch form [N, C, H, W] and a single mean/std for all channels, float64.
  Tensor xb = x.to(DType::Float64).view({1, 2, 2, 2});
  Tensor yb = normalize(xb, {1.0}, {0.5});
  EXPECT_EQ(yb.dtype(), DType::Float64);
  EXPECT_TRUE(tensor_near(yb, {0, 2, 4, 6, 18, 38, 58, 78}));
  // Non-contiguous input: channels-last storage viewed as [C, H, W].
  Tensor hwc = tensor({1, 10, 2, 20, 3, 30, 4, 40}, {2, 2, 2}).permute({2, 0, 1});
  ASSERT_FALSE(hwc.is_contiguous());
  EXPECT_TRUE(tensor_near(normalize(hwc, {1.0, 10.0}, {2.0, 5.0}), {0, 0.5, 1, 1.5, 0, 2, 4, 6}));
  // The input is untouched.
  EXPECT_TRUE(tensor_near(x, {1, 2, 3, 4, 10, 20, 30, 40}));
}

TEST(Normalize, Errors) {
  EXPECT_WEFT_ERROR(normalize(zeros({3, 2, 2}), {0.0, 0.0}, {1.0, 1.0}), "2 means for an image with 3 channels");
  EXPECT_WEFT_ERROR(normalize(zeros({2, 2}), {0.0}, {1.0}), "expected an image");
  EXPECT_WEFT_ERROR(normalize(zeros({1, 2, 2}, {DType::UInt8}), {0.0}, {1.0}), "float32 or float64");
  EXPECT_WEFT_ERROR(Normalize({0.0}, {0.0}), "non-zero");
}

TEST(CropPadded, HandComputed) {
  // x [1, 3, 3] = 1..9
  Tensor x = tensor({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 3, 3});
  // padded by 1 -> 5x5; window at (0, 0) of 3x3: row0 zeros, then [0 1 2], [0 4 5]
  EXPECT_TRUE(tensor_near(crop_padded(x, 0, 0, 3, 3, 1), {0, 0, 0, 0, 1, 2, 0, 4, 5}));
  // window at (2, 1) of 3x2: padded rows 2..4 cols 1..2: [4 5], [7 8], [0 0]
  EXPECT_TRUE(tensor_near(crop_padded(x, 2, 1, 3, 2, 1), {4, 5, 7, 8, 0, 0}));
  // no padding: a plain crop
  EXPECT_TRUE(tensor_near(crop_padded(x, 1, 1, 2, 2, 0), {5, 6, 8, 9}));
  // window entirely in the padding except one corner: (0, 0) 1x1 with padding 1 -> 0
  EXPECT_TRUE(tensor_near(crop_padded(x, 0, 0, 1, 1, 1), {0}));
  // two channels, uint8
  Tensor x2 = arange(0, 8, 1, {DType::UInt8}).view({2, 2, 2});
  Tensor c2 = crop_padded(x2, 1, 1, 2, 2, 1);
  EXPECT_EQ(c2.dtype(), DType::UInt8);
  EXPECT_TRUE(tensor_near(c2, {0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_TRUE(tensor_near(crop_padded(x2, 2, 2, 2, 2, 1), {3, 0, 0, 0, 7, 0, 0, 0}));
  EXPECT_WEFT_ERROR(crop_padded(x, 0, 0, 6, 3, 1), "does not fit");
  EXPECT_WEFT_ERROR(crop_padded(x, 3, 0, 3, 3, 1), "outside the padded image");
}

TEST(HorizontalFlip, HandComputed) {
  Tensor x = tensor({1, 2, 3, 4, 5, 6}, {1, 2, 3});
  EXPECT_TRUE(tensor_near(horizontal_flip(x), {3, 2, 1, 6, 5, 4}));
  Tensor xt = tensor({1, 2, 3, 4, 5, 6}, {3, 2}).t();  // [2, 3] non-contiguous: [[1,3,5],[2,4,6]]
  EXPECT_TRUE(tensor_near(horizontal_flip(xt), {5, 3, 1, 6, 4, 2}));
}

TEST(RandomHorizontalFlip, ProbabilityEndsAndFrequency) {
  Tensor x = tensor({1, 2, 3}, {1, 1, 3});
  Generator g(5);
  EXPECT_TRUE(tensor_near(RandomHorizontalFlip(1.0)(x, g), {3, 2, 1}));
  EXPECT_TRUE(tensor_near(RandomHorizontalFlip(0.0)(x, g), {1, 2, 3}));
  RandomHorizontalFlip half(0.5);
  int flipped = 0;
  for (int i = 0; i < 2000; ++i) flipped += values(half(x, g))[0] == 3.0;
  EXPECT_GT(flipped, 900);
  EXPECT_LT(flipped, 1100);
  // The decision follows the documented draw: flip iff uniform_float(v0) < p.
  Generator a(77), b(77);
  PhiloxReader r(b.reserve(1));
  bool expect_flip = uniform_float(r.value(0)) < 0.3f;
  EXPECT_EQ(values(RandomHorizontalFlip(0.3)(x, a))[0] == 3.0, expect_flip);
  EXPECT_WEFT_ERROR(RandomHorizontalFlip(1.5), "p must be in [0, 1]");
}

TEST(RandomCrop, DeterministicAndMatchesDocumentedDraw) {
  Tensor x = arange(0, 2 * 5 * 5, 1, {DType::Float32}).view({2, 5, 5});
  RandomCrop crop(4, 2);
  Generator g1(123), g2(123), ref(123);
  Tensor a = crop(x, g1), b = crop(x, g2);
  EXPECT_EQ(a.sizes(), (Shape{2, 4, 4}));
  EXPECT_EQ(values(a), values(b));
  PhiloxReader r(ref.reserve(2));
  int64_t top = r.value(0) % (5 + 4 - 4 + 1), left = r.value(1) % (5 + 4 - 4 + 1);
  EXPECT_EQ(values(a), values(crop_padded(x, top, left, 4, 4, 2)));
  // Over many draws every offset 0..5 shows up (the window moves).
  std::set<double> corners;
  Generator g(9);
  RandomCrop nopad(3, 0);
  for (int i = 0; i < 200; ++i) corners.insert(values(nopad(x, g))[0]);
  EXPECT_EQ(corners.size(), 9u);  // top, left in {0, 1, 2}
  EXPECT_WEFT_ERROR(RandomCrop(10, 1)(x, g), "does not fit");
}

TEST(Compose, AppliesInOrderOnData) {
  Tensor x = tensor({1, 2, 3, 4}, {1, 2, 2});
  Compose c{{RandomHorizontalFlip(1.0), Normalize({1.0}, {2.0})}};
  Generator g(0);
  EXPECT_TRUE(tensor_near(c(x, g), {0.5, 0, 1.5, 1}));
  ExampleTransform t = on_data(c);
  Example e = t(Example{x, scalar_tensor(int64_t{3}, {DType::Int64})}, g);
  EXPECT_TRUE(tensor_near(e.data, {0.5, 0, 1.5, 1}));
  EXPECT_EQ(e.target.item<int64_t>(), 3);
}

}  // namespace
}  // namespace weft::io
