// View ops: storage sharing (writes go through), shapes and strides, reshape's
// view-or-copy choice, errors, negative dims and gradients.
#include <vector>

#include "autograd/gradcheck.h"
#include "core/autograd_meta.h"
#include "core/rng.h"
#include "tests/testing.h"

namespace weft {
namespace {

using testing::tensor_near;
using testing::values;

// 0..n-1 as float32 with the given shape
Tensor iota(const Shape& s) { return arange(0, numel_of(s), 1, {DType::Float32}).view(s); }

// Writes `v` through view `t` and returns the base's values.
void write_through(Tensor t, double v) {
  NoGradGuard g;
  fill_(t, v);
}

TEST(Views, ViewSharesStorageAndWritesThrough) {
  Tensor a = iota({2, 6});
  Tensor v = a.view({3, 4});
  EXPECT_EQ(v.sizes(), (Shape{3, 4}));
  EXPECT_EQ(v.strides(), (Shape{4, 1}));
  EXPECT_EQ(v.raw_data(), a.raw_data());
  write_through(v.select(0, 1), -1);  // elements 4..7
  EXPECT_TRUE(tensor_near(a, {0, 1, 2, 3, -1, -1, -1, -1, 8, 9, 10, 11}));
  EXPECT_EQ(a.view({-1}).sizes(), (Shape{12}));
  EXPECT_EQ(a.view({4, -1}).sizes(), (Shape{4, 3}));
  EXPECT_WEFT_ERROR(a.view({5, -1}), "is invalid for input of size 12");
  EXPECT_WEFT_ERROR(a.view({-1, -1}), "only one dimension can be inferred");
}

TEST(Views, ViewOnNonViewableErrors) {
  Tensor a = iota({3, 4}).t();  // (4, 3) strides (1, 4)
  EXPECT_FALSE(a.is_contiguous());
  EXPECT_WEFT_ERROR(a.view({12}), "use reshape()");
  // but splitting a dim of a transposed tensor is viewable
  Tensor b = a.view({2, 2, 3});
  EXPECT_EQ(b.strides(), (Shape{2, 1, 4}));
}

TEST(Views, ReshapeViewsWhenPossibleElseCopies) {
  Tensor a = iota({3, 4});
  Tensor r = a.reshape({4, 3});
  EXPECT_EQ(r.raw_data(), a.raw_data());  // view
  Tensor t = a.t();
  Tensor c = t.reshape({12});  // needs a copy
  EXPECT_NE(c.raw_data(), a.raw_data());
  EXPECT_TRUE(tensor_near(c, {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  write_through(c, 0);
  EXPECT_TRUE(tensor_near(a.select(0, 0), {0, 1, 2, 3}));  // copy: base untouched
  EXPECT_TRUE(tensor_near(a.select(0, 2), {8, 9, 10, 11}));
}

TEST(Views, TransposePermuteAndT) {
  Tensor a = iota({2, 3, 4});
  Tensor t = a.transpose(0, -1);  // (4, 3, 2)
  EXPECT_EQ(t.sizes(), (Shape{4, 3, 2}));
  EXPECT_EQ(t.strides(), (Shape{1, 4, 12}));
  Tensor p = a.permute({2, 0, 1});  // (4, 2, 3)
  EXPECT_EQ(p.sizes(), (Shape{4, 2, 3}));
  EXPECT_EQ(p.strides(), (Shape{1, 12, 4}));
  Tensor pn = a.permute({-1, 0, -2});
  EXPECT_EQ(pn.strides(), p.strides());
  // element [k][i][j] of p is a[i][j][k]
  EXPECT_EQ(p.select(0, 3).select(0, 1).select(0, 2).item<float>(), 1 * 12 + 2 * 4 + 3);
  write_through(p.select(0, 0), 100);  // all a[..][..][0]
  auto v = values(a);
  for (int i = 0; i < 24; ++i) EXPECT_EQ(v[i], i % 4 == 0 ? 100.0 : i);
  Tensor m = iota({2, 3});
  EXPECT_EQ(m.t().sizes(), (Shape{3, 2}));
  EXPECT_WEFT_ERROR(a.permute({0, 1}), "permute: got 2 dims");
  EXPECT_WEFT_ERROR(a.permute({0, 1, 1}), "appears more than once");
  EXPECT_WEFT_ERROR(a.transpose(0, 3), "transpose: dim 3 out of range");
}

TEST(Views, SliceNarrowSelect) {
  Tensor a = iota({4, 5});
  Tensor s = a.slice(1, 1, 5, 2);  // columns 1, 3
  EXPECT_EQ(s.sizes(), (Shape{4, 2}));
  EXPECT_EQ(s.strides(), (Shape{5, 2}));
  EXPECT_EQ(s.storage_offset(), 1);
  EXPECT_TRUE(tensor_near(s.select(0, 1), {6, 8}));
  Tensor neg = a.slice(-1, -2, std::nullopt);  // last two columns
  EXPECT_TRUE(tensor_near(neg.select(0, 0), {3, 4}));
  Tensor clamped = a.slice(0, 2, 100);
  EXPECT_EQ(clamped.sizes(), (Shape{2, 5}));
  Tensor n = a.narrow(0, 1, 2);
  EXPECT_EQ(n.sizes(), (Shape{2, 5}));
  EXPECT_EQ(n.storage_offset(), 5);
  Tensor r = a.select(-1, -1);  // last column
  EXPECT_TRUE(tensor_near(r, {4, 9, 14, 19}));
  EXPECT_EQ(r.strides(), (Shape{5}));
  write_through(s, -7);
  EXPECT_TRUE(tensor_near(a.select(0, 0), {0, -7, 2, -7, 4}));
  EXPECT_WEFT_ERROR(a.select(0, 4), "select: index 4 out of range");
  EXPECT_WEFT_ERROR(a.select(2, 0), "out of range");
  EXPECT_WEFT_ERROR(a.narrow(1, 3, 3), "exceeds dimension");
  EXPECT_WEFT_ERROR(a.slice(0, 0, 2, 0), "step must be positive");
  EXPECT_WEFT_ERROR(scalar_tensor(1.0).select(0, 0), "0-dim");
}

TEST(Views, ExpandAndErrors) {
  Tensor a = tensor({1.0f, 2.0f, 3.0f}).view({3, 1});
  Tensor e = a.expand({2, 3, 4});
  EXPECT_EQ(e.sizes(), (Shape{2, 3, 4}));
  EXPECT_EQ(e.strides(), (Shape{0, 1, 0}));
  EXPECT_EQ(e.raw_data(), a.raw_data());
  EXPECT_TRUE(tensor_near(e.select(0, 1).select(0, 2), {3, 3, 3, 3}));
  Tensor k = a.expand({-1, 5});
  EXPECT_EQ(k.sizes(), (Shape{3, 5}));
  EXPECT_WEFT_ERROR(a.expand({4, 4}), "must match the existing size 3");
  EXPECT_WEFT_ERROR(a.expand({3}), "must be at least the tensor's dims");
  EXPECT_WEFT_ERROR(a.expand({-1, 3, 1}), "-1 is not allowed in a new leading dim");
}

TEST(Views, SqueezeUnsqueezeFlatten) {
  Tensor a = iota({2, 1, 3, 1});
  EXPECT_EQ(a.squeeze().sizes(), (Shape{2, 3}));
  EXPECT_EQ(a.squeeze(1).sizes(), (Shape{2, 3, 1}));
  EXPECT_EQ(a.squeeze(-1).sizes(), (Shape{2, 1, 3}));
  EXPECT_EQ(a.squeeze(0).sizes(), a.sizes());  // size 2: unchanged
  EXPECT_EQ(a.squeeze().raw_data(), a.raw_data());
  Tensor b = iota({2, 3});
  EXPECT_EQ(b.unsqueeze(0).sizes(), (Shape{1, 2, 3}));
  EXPECT_EQ(b.unsqueeze(-1).sizes(), (Shape{2, 3, 1}));
  EXPECT_EQ(b.unsqueeze(1).strides(), (Shape{3, 3, 1}));
  EXPECT_WEFT_ERROR(b.unsqueeze(3), "unsqueeze: dim 3 out of range");
  Tensor c = iota({2, 3, 4});
  EXPECT_EQ(c.flatten().sizes(), (Shape{24}));
  EXPECT_EQ(c.flatten(1).sizes(), (Shape{2, 12}));
  EXPECT_EQ(c.flatten(0, -2).sizes(), (Shape{6, 4}));
  EXPECT_EQ(c.flatten(1).raw_data(), c.raw_data());
  EXPECT_WEFT_ERROR(c.flatten(2, 1), "must not come after");
}

TEST(Views, NonContiguousInputsToViews) {
  Tensor a = iota({4, 6}).slice(1, 0, 6, 2);  // (4, 3) strides (6, 2)
  Tensor t = a.t();                           // (3, 4) strides (2, 6)
  Tensor u = t.unsqueeze(0).expand({2, 3, 4});
  EXPECT_TRUE(tensor_near(u.select(0, 1).select(1, 2), {12, 14, 16}));
  Tensor r = t.reshape({12});  // copy
  EXPECT_TRUE(tensor_near(r, {0, 6, 12, 18, 2, 8, 14, 20, 4, 10, 16, 22}));
}

TEST(Views, SharedVersionCounter) {
  Tensor a = iota({4});
  Tensor v = a.slice(0, 1, 3);
  uint64_t before = a.version();
  v.add_(ones({2}));
  EXPECT_EQ(a.version(), before + 1);
  EXPECT_TRUE(tensor_near(a, {0, 2, 3, 3}));
}

// Gradchecks: each view composed with a multiply so every element matters.
TEST(Views, Gradchecks) {
  manual_seed(3);
  Tensor x = randn({2, 3, 4}, {DType::Float64, kCPU, true});
  using Fn = std::function<Tensor(const Tensor&)>;
  std::vector<std::pair<const char*, Fn>> cases = {
      {"view",
       [](const Tensor& t) {
         return t.view({6, 4});
       }},
      {"reshape_copy", [](const Tensor& t) { return t.transpose(0, 2).reshape({-1}); }},
      {"flatten", [](const Tensor& t) { return t.flatten(1); }},
      {"transpose", [](const Tensor& t) { return t.transpose(-1, 0); }},
      {"permute",
       [](const Tensor& t) {
         return t.permute({1, 2, 0});
       }},
      {"slice", [](const Tensor& t) { return t.slice(2, 1, 4, 2); }},
      {"narrow", [](const Tensor& t) { return t.narrow(1, 1, 2); }},
      {"select", [](const Tensor& t) { return t.select(-2, 1); }},
      {"expand",
       [](const Tensor& t) {
         return t.unsqueeze(1).expand({2, 5, 3, 4});
       }},
      {"squeeze", [](const Tensor& t) { return t.narrow(1, 0, 1).squeeze(1); }},
      {"unsqueeze", [](const Tensor& t) { return t.unsqueeze(-1); }},
  };
  for (auto& [name, f] : cases) {
    auto r = autograd::gradcheck(
        [f = f](const std::vector<Tensor>& in) {
          Tensor y = f(in[0]);
          return y * y;
        },
        {x});
    EXPECT_TRUE(r) << name << ": " << r.message;
  }
}

TEST(Views, GradientOfOverlappingViewsAccumulates) {
  Tensor x = tensor({1.0f, 2.0f, 3.0f}).requires_grad_(true);
  Tensor y = sum(x.slice(0, 0, 2) * 2.0) + sum(x.slice(0, 1, 3) * 3.0) + sum(x.unsqueeze(0).expand({4, 3}));
  y.backward();
  EXPECT_TRUE(tensor_near(x.grad(), {2 + 4, 2 + 3 + 4, 3 + 4}));
}

}  // namespace
}  // namespace weft
