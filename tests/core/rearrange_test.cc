// flip, roll, repeat, tile, pad, unbind and cumsum (core/ops/rearrange.cc): values
// worked out by hand from PyTorch's definitions, gradients against finite
// differences on non-contiguous inputs, and the errors for bad arguments.
#include "autograd/gradcheck.h"
#include "core/ops.h"
#include "core/tensor_impl.h"
#include "tests/testing.h"

namespace weft {
namespace {

using testing::tensor_near;

Tensor iota(const Shape& s) { return arange(0, numel_of(s), {DType::Float64}).reshape(s); }

void expect_gradients(const std::function<Tensor(const Tensor&)>& f, const Shape& shape) {
  // f meets a transposed (non-contiguous) input, as ops do inside models
  Shape t = shape;
  std::swap(t.front(), t.back());
  const int64_t last = static_cast<int64_t>(shape.size()) - 1;
  Tensor x = testing::rnd(t, DType::Float64, 7).requires_grad_(true);
  auto r = autograd::gradcheck(
      [&](const std::vector<Tensor>& in) {
        Tensor y = f(in[0].transpose(0, last));
        return sum(mul(y, y));
      },
      {x}, {.eps = 1e-6, .atol = 1e-6, .rtol = 1e-4});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(Rearrange, Flip) {
  Tensor x = iota({2, 3});
  EXPECT_TRUE(tensor_near(flip(x, {1}), {2, 1, 0, 5, 4, 3}));
  EXPECT_TRUE(tensor_near(flip(x, {0, -1}), {5, 4, 3, 2, 1, 0}));
  Tensor same = flip(x, {});
  EXPECT_TRUE(tensor_near(same, {0, 1, 2, 3, 4, 5}));
  EXPECT_NE(same.impl()->storage(), x.impl()->storage());  // a new tensor, as in PyTorch
  expect_gradients([](const Tensor& t) { return flip(t, {0, 2}); }, {2, 3, 4});
  EXPECT_WEFT_ERROR(flip(x, {2}), "flip");
  EXPECT_WEFT_ERROR(flip(x, {1, -1}), "appears more than once");
}

TEST(Rearrange, Roll) {
  Tensor x = iota({2, 3});
  EXPECT_TRUE(tensor_near(roll(x, {1}, {1}), {2, 0, 1, 5, 3, 4}));
  EXPECT_TRUE(tensor_near(roll(x, {-1}, {1}), {1, 2, 0, 4, 5, 3}));
  EXPECT_TRUE(tensor_near(roll(x, {4}, {1}), {2, 0, 1, 5, 3, 4}));  // shifts wrap around
  EXPECT_TRUE(tensor_near(roll(x, {1, 1}, {0, 1}), {5, 3, 4, 2, 0, 1}));
  EXPECT_TRUE(tensor_near(roll(x, {2}), {4, 5, 0, 1, 2, 3}));  // without dims: the flattened tensor
  EXPECT_EQ(roll(x, {2}).sizes(), (Shape{2, 3}));
  EXPECT_TRUE(tensor_near(roll(x, {3}, {1}), {0, 1, 2, 3, 4, 5}));
  expect_gradients([](const Tensor& t) { return roll(t, {1, -2}, {0, 2}); }, {2, 3, 4});
  EXPECT_WEFT_ERROR(roll(x, {1, 2}, {0}), "2 shifts for 1 dims");
  EXPECT_WEFT_ERROR(roll(x, {1, 2}), "expected one shift");
  EXPECT_WEFT_ERROR(roll(x, {1}, {3}), "roll");
}

TEST(Rearrange, RepeatAndTile) {
  Tensor x = tensor(std::vector<double>{1, 2, 3});
  EXPECT_TRUE(tensor_near(repeat(x, {2}), {1, 2, 3, 1, 2, 3}));
  Tensor r = repeat(x, {2, 2});  // a leading dim for the extra count
  EXPECT_EQ(r.sizes(), (Shape{2, 6}));
  EXPECT_TRUE(tensor_near(r, {1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3}));
  Tensor m = iota({2, 2});
  EXPECT_TRUE(tensor_near(repeat(m, {2, 1}), {0, 1, 2, 3, 0, 1, 2, 3}));
  EXPECT_TRUE(tensor_near(repeat(m, {1, 2}), {0, 1, 0, 1, 2, 3, 2, 3}));
  EXPECT_EQ(repeat(m, {0, 3}).sizes(), (Shape{0, 6}));
  Tensor copy = repeat(m, {1, 1});
  EXPECT_NE(copy.impl()->storage(), m.impl()->storage());            // a new tensor even when every count is 1
  EXPECT_TRUE(tensor_near(tile(m, {2}), {0, 1, 0, 1, 2, 3, 2, 3}));  // short counts: leading 1s
  EXPECT_EQ(tile(x, {2, 1}).sizes(), (Shape{2, 3}));
  expect_gradients([](const Tensor& t) { return repeat(t, {2, 1, 3}); }, {2, 3, 2});
  expect_gradients([](const Tensor& t) { return tile(t, {3}); }, {2, 3});
  EXPECT_WEFT_ERROR(repeat(m, {2}), "1 repeat counts for a tensor of 2 dims");
  EXPECT_WEFT_ERROR(repeat(m, {2, -1}), "repeat count -1 at position 1 is negative");
  EXPECT_WEFT_ERROR(repeat(m, {int64_t{1} << 62, 4}), "more elements than an int64 counts");
}

TEST(Rearrange, Pad) {
  Tensor m = iota({2, 2});
  Tensor p = pad(m, {1, 0});  // the last dim: one before, none after
  EXPECT_EQ(p.sizes(), (Shape{2, 3}));
  EXPECT_TRUE(tensor_near(p, {0, 0, 1, 0, 2, 3}));
  Tensor q = pad(m, {0, 1, 1, 0}, 9);  // last dim (0, 1), then dim 0 (1, 0)
  EXPECT_TRUE(tensor_near(q, {9, 9, 9, 0, 1, 9, 2, 3, 9}));
  Tensor c = pad(iota({4}), {-1, 2});  // negative amounts crop
  EXPECT_TRUE(tensor_near(c, {1, 2, 3, 0, 0}));
  EXPECT_TRUE(tensor_near(pad(iota({4}), {-2, -2}), {}));
  Tensor i = pad(tensor(std::vector<int64_t>{5, 6}), {1, 1}, -1);
  EXPECT_EQ(i.dtype(), DType::Int64);
  EXPECT_TRUE(tensor_near(i, {-1, 5, 6, -1}));
  expect_gradients([](const Tensor& t) { return pad(t, {1, 2, -1, 1}, 0.5); }, {2, 3, 4});
  EXPECT_WEFT_ERROR(pad(m, {1}), "even length");
  EXPECT_WEFT_ERROR(pad(m, {1, 1, 1, 1, 1, 1}), "pad 3 dims, but the tensor has 2");
  EXPECT_WEFT_ERROR(pad(m, {-2, -1}), "would have negative size -1");
}

TEST(Rearrange, Unbind) {
  Tensor x = iota({2, 3});
  std::vector<Tensor> cols = unbind(x, 1);
  ASSERT_EQ(cols.size(), 3u);
  EXPECT_TRUE(tensor_near(cols[2], {2, 5}));
  EXPECT_EQ(cols[0].impl()->storage(), x.impl()->storage());  // views, as in PyTorch
  expect_gradients([](const Tensor& t) { return stack(unbind(t, -1), 0); }, {2, 3});
  EXPECT_WEFT_ERROR(unbind(scalar_tensor(1.0), 0), "0-dim");
}

// Note [cumsum by blocks]: against a running sum in float64 written out here,
// on lengths below, at and across the block size and over two levels of blocks.
TEST(Rearrange, Cumsum) {
  for (int64_t n : {1, 5, 64, 65, 200, 4097, 5000}) {
    Tensor x = testing::rnd({3, n}, DType::Float64, static_cast<uint64_t>(n));
    Tensor got = cumsum(x, 1);
    ASSERT_EQ(got.sizes(), x.sizes());
    std::vector<double> v = testing::values(x), want(v.size());
    for (int64_t r = 0; r < 3; ++r) {
      double run = 0;
      for (int64_t j = 0; j < n; ++j) want[r * n + j] = run += v[r * n + j];
    }
    EXPECT_TRUE(tensor_near(got, want, 1e-9)) << "n=" << n;
    // float32 along dim 0 of the transpose: the same sums, to float32 rounding
    Tensor f = cumsum(x.to(DType::Float32).t(), 0);
    EXPECT_TRUE(tensor_near(f.t(), want, 1e-3)) << "n=" << n;
  }
  EXPECT_TRUE(tensor_near(cumsum(iota({2, 3}), 0), {0, 1, 2, 3, 5, 7}));
  EXPECT_TRUE(tensor_near(cumsum(iota({2, 3}), -1), {0, 1, 3, 3, 7, 12}));
  EXPECT_EQ(cumsum(zeros({2, 0}), 1).sizes(), (Shape{2, 0}));
  EXPECT_TRUE(tensor_near(cumsum(scalar_tensor(2.5), 0), {2.5}));
  expect_gradients([](const Tensor& t) { return cumsum(t, 1); }, {2, 3, 4});
  expect_gradients([](const Tensor& t) { return cumsum(t, 0); }, {130, 2});
  EXPECT_WEFT_ERROR(cumsum(tensor(std::vector<int64_t>{1, 2}), 0), "cumsum: supports floating dtypes, got int64");
  EXPECT_WEFT_ERROR(cumsum(iota({2, 3}), 2), "cumsum");
}

TEST(Rearrange, TensorMethods) {
  Tensor x = iota({2, 3});
  EXPECT_TRUE(tensor_near(x.flip({1}), {2, 1, 0, 5, 4, 3}));
  EXPECT_TRUE(tensor_near(x.roll({1}, {1}), {2, 0, 1, 5, 3, 4}));
  EXPECT_EQ(x.repeat({2, 2}).sizes(), (Shape{4, 6}));
  EXPECT_EQ(x.tile({2}).sizes(), (Shape{2, 6}));
  EXPECT_EQ(x.unbind(1).size(), 3u);
  EXPECT_TRUE(tensor_near(x.cumsum(1), {0, 1, 3, 3, 7, 12}));
  EXPECT_TRUE(tensor_near(std::get<0>(x.sort(1, true)), {2, 1, 0, 5, 4, 3}));
  EXPECT_TRUE(tensor_near(x.argsort(0, true).to(DType::Float64), {1, 1, 1, 0, 0, 0}));
  EXPECT_TRUE(tensor_near(std::get<0>(x.topk(1)), {2, 5}));
}

}  // namespace
}  // namespace weft
