// cat/stack/split/chunk against hand-computed values; dtype promotion,
// non-contiguous inputs, negative dims, gradchecks and shape errors.
#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "autograd/gradcheck.h"
#include "core/ops.h"
#include "tests/testing.h"

namespace weft {
namespace {
using testing::tensor_near;
using testing::values;

Tensor f64(std::vector<double> v, Shape s = {}) { return tensor(v, s); }
bool gc(const std::function<Tensor(const std::vector<Tensor>&)>& f, const std::vector<Tensor>& in) {
  auto r = autograd::gradcheck(f, in);
  if (!r.ok) ADD_FAILURE() << r.message;
  return r.ok;
}

TEST(Join, Cat) {
  Tensor a = tensor({1, 2, 3, 4}, {2, 2}), b = tensor({5, 6}, {1, 2});
  Tensor c = cat({a, b});
  EXPECT_EQ(c.sizes(), (Shape{3, 2}));
  EXPECT_TRUE(tensor_near(c, {1, 2, 3, 4, 5, 6}));
  Tensor d = cat({a, b.t()}, -1);  // (2, 3); b.t() is non-contiguous (2, 1)
  EXPECT_TRUE(tensor_near(d, {1, 2, 5, 3, 4, 6}));
  EXPECT_TRUE(tensor_near(cat({a.t(), a}, 1), {1, 3, 1, 2, 2, 4, 3, 4}));
  EXPECT_TRUE(tensor_near(cat({a, zeros({0, 2}), b}), {1, 2, 3, 4, 5, 6}));
  // mixed dtypes promote
  Tensor m = cat({tensor(std::vector<int64_t>{1, 2}), tensor({0.5f})});
  EXPECT_EQ(m.dtype(), DType::Float32);
  EXPECT_TRUE(tensor_near(m, {1, 2, 0.5}));
  Tensor m2 = cat({tensor({1.0f}), f64({2.5})});
  EXPECT_EQ(m2.dtype(), DType::Float64);
  EXPECT_EQ(cat({tensor(std::vector<int64_t>{1}), tensor(std::vector<int32_t>{2})}).dtype(), DType::Int64);
}

// Note [cat of legacy empties]: a 1-D tensor of shape [0] is left out, as in
// PyTorch (the empty start of a tensor grown by cat in a loop).
TEST(Join, CatLeavesOutLegacyEmpties) {
  Tensor a = tensor({1, 2, 3, 4}, {2, 2}), b = tensor({5, 6}, {1, 2});
  Tensor acc = empty({0});
  acc = cat({acc, a});
  EXPECT_EQ(acc.sizes(), (Shape{2, 2}));
  acc = cat({acc, empty({0}), b}, 0);
  EXPECT_EQ(acc.sizes(), (Shape{3, 2}));
  EXPECT_TRUE(tensor_near(acc, {1, 2, 3, 4, 5, 6}));
  EXPECT_TRUE(tensor_near(cat({a, empty({0})}, 1), {1, 2, 3, 4}));
  EXPECT_EQ(cat({empty({0}), empty({0})}).sizes(), (Shape{0}));
  // promotion still counts them (float32 from the empty, as PyTorch's result_type)
  EXPECT_EQ(cat({empty({0}), tensor(std::vector<int64_t>{1, 2}, {1, 2})}).dtype(), DType::Float32);
  // a 2-D empty is not one: its other sizes must match
  EXPECT_WEFT_ERROR(cat({a, zeros({0, 3})}), "cat: tensor 1 has shape [0, 3] but tensor 0 has shape [2, 2]");
  // gradients: the empty's is empty, the others' their slices
  Tensor x = tensor({1.0, 2.0}, {1, 2}), e = zeros({0}, {DType::Float64});
  x.requires_grad_(true);
  e.requires_grad_(true);
  sum(mul(cat({e, x, x}), tensor({1.0, 2.0, 3.0, 4.0}, {2, 2}))).backward();
  EXPECT_TRUE(tensor_near(x.grad(), {4, 6}));
  EXPECT_EQ(e.grad().sizes(), (Shape{0}));
}

TEST(Join, Stack) {
  Tensor a = tensor({1, 2, 3}), b = tensor({4, 5, 6});
  Tensor s0 = stack({a, b});
  EXPECT_EQ(s0.sizes(), (Shape{2, 3}));
  EXPECT_TRUE(tensor_near(s0, {1, 2, 3, 4, 5, 6}));
  Tensor s1 = stack({a, b}, -1);
  EXPECT_EQ(s1.sizes(), (Shape{3, 2}));
  EXPECT_TRUE(tensor_near(s1, {1, 4, 2, 5, 3, 6}));
  Tensor m = tensor({1, 2, 3, 4}, {2, 2});
  EXPECT_TRUE(tensor_near(stack({m, m.t()}, 1), {1, 2, 1, 3, 3, 4, 2, 4}));
}

TEST(Join, SplitAndChunk) {
  Tensor a = arange(10, {DType::Float32}).view({5, 2});
  auto p = split(a, 2);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[2].sizes(), (Shape{1, 2}));
  EXPECT_TRUE(tensor_near(p[1], {4, 5, 6, 7}));
  auto q = split(a, std::vector<int64_t>{1, 0, 4});
  ASSERT_EQ(q.size(), 3u);
  EXPECT_EQ(q[1].sizes(), (Shape{0, 2}));
  EXPECT_TRUE(tensor_near(q[2], {2, 3, 4, 5, 6, 7, 8, 9}));
  auto r = split(a, 1, -1);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_TRUE(tensor_near(r[1], {1, 3, 5, 7, 9}));
  // views share storage
  EXPECT_EQ(r[1].raw_data(), static_cast<char*>(a.raw_data()) + sizeof(float));
  // torch.chunk: 5 rows in 3 chunks -> 2, 2, 1; 5 rows in 4 chunks -> 2, 2, 1 (three chunks)
  auto c = chunk(a, 3);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[2].size(0), 1);
  auto c4 = chunk(a, 4);
  ASSERT_EQ(c4.size(), 3u);
  auto c6 = chunk(a, 6);
  ASSERT_EQ(c6.size(), 5u);
  auto ct = chunk(a.t(), 2, 1);  // non-contiguous input
  ASSERT_EQ(ct.size(), 2u);
  EXPECT_TRUE(tensor_near(ct[1], {6, 8, 7, 9}));
}

TEST(Join, Gradchecks) {
  Tensor a = f64({1, 2, 3, 4}, {2, 2}).requires_grad_();
  Tensor b = f64({5, 6}, {1, 2}).requires_grad_();
  gc([](const std::vector<Tensor>& x) { return cat({x[0], x[1]}, 0) * cat({x[0], x[1]}, 0); }, {a, b});
  gc([](const std::vector<Tensor>& x) { return cat({x[0].t(), x[1].t()}, -1); }, {a, b});
  Tensor c = f64({7, 8}, {2}).requires_grad_();
  gc(
      [](const std::vector<Tensor>& x) {
        return stack({x[0], x[1] * x[1]}, 1);
      },
      {c, f64({1, -2}, {2}).requires_grad_()});
  gc(
      [](const std::vector<Tensor>& x) {
        auto p = split(x[0], 1, 1);
        return p[0] * p[1];
      },
      {a});
  gc(
      [](const std::vector<Tensor>& x) {
        auto p = chunk(x[0], 2, 0);
        return p[1] - p[0] * p[0];
      },
      {a});
  gc(
      [](const std::vector<Tensor>& x) {
        auto p = split(x[0], std::vector<int64_t>{1, 1}, -1);
        return cat({p[1], p[0]}, 0);
      },
      {a});
}

TEST(Join, SplitPiecesShareOneNodeWhoseBackwardIsACat) {
  Tensor a = f64({1, 2, 3, 4, 5, 6, 7}, {7}).requires_grad_();
  auto p = split(a, std::vector<int64_t>{2, 0, 3, 2});
  for (auto& t : p) {
    ASSERT_TRUE(t.grad_fn() != nullptr);
    EXPECT_EQ(t.grad_fn()->name(), "SplitBackward");
    EXPECT_EQ(t.grad_fn().get(), p[0].grad_fn().get());
  }
  // pieces 0 and 3 used, twice for piece 3; piece 2 unused: its slice of the gradient is 0
  (p[0] * f64({10, 20}, {2}) + p[3] * p[3] * 0.5 + p[3]).sum().backward();
  EXPECT_TRUE(tensor_near(a.grad(), {10, 20, 0, 0, 0, 7, 8}, 0));
  Tensor b = f64({1, 2, 3, 4, 5, 6}, {2, 3}).requires_grad_();
  auto q = chunk(b, 3, 1);
  (q[2] * 3.0).sum().backward();
  EXPECT_TRUE(tensor_near(b.grad(), {0, 0, 3, 0, 0, 3}, 0));
}

// Note [split backward views]: gradients of the pieces that lie side by side
// in one buffer, in order, come back joined as a view of that buffer; in any
// other arrangement (swapped, from different buffers) they are copied by cat.
// Hooks on the pieces hand the split's backward views of a prepared buffer.
TEST(Join, SplitBackwardJoinsAdjacentGradientsWithoutACopy) {
  Tensor buf = f64({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {2, 6});
  Tensor other = f64({-1, -2, -3, -4, -5, -6}, {2, 3});
  struct Arrangement {
    Tensor g0, g1;
    bool view;
    std::vector<double> expected;
  };
  const Arrangement cases[] = {
      {narrow(buf, 1, 0, 3), narrow(buf, 1, 3, 3), true, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}},
      {narrow(buf, 1, 3, 3), narrow(buf, 1, 0, 3), false, {4, 5, 6, 1, 2, 3, 10, 11, 12, 7, 8, 9}},
      {narrow(buf, 1, 0, 3), other, false, {1, 2, 3, -1, -2, -3, 7, 8, 9, -4, -5, -6}},
  };
  for (const Arrangement& c : cases) {
    Tensor x = f64({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, {2, 6}).requires_grad_();
    Tensor y = x * 1.0;  // a non-leaf whose incoming gradient the hook sees as is
    std::vector<Tensor> p = split(y, 3, 1);
    p[0].register_hook([&](const Tensor&) { return c.g0; });
    p[1].register_hook([&](const Tensor&) { return c.g1; });
    const void* seen = nullptr;
    y.register_hook([&](const Tensor& g) {
      seen = g.raw_data();
      return Tensor();
    });
    (p[0].sum() + p[1].sum()).backward();
    EXPECT_EQ(seen == buf.raw_data(), c.view);
    EXPECT_TRUE(tensor_near(x.grad(), c.expected, 0));
  }
}

TEST(Join, CatBackwardConvertsDtype) {
  Tensor a = tensor({1, 2}).requires_grad_();  // float32
  Tensor b = f64({3}).requires_grad_();        // float64
  Tensor c = cat({a, b});
  EXPECT_EQ(c.dtype(), DType::Float64);
  (c * f64({1, 2, 3})).sum().backward();
  EXPECT_EQ(a.grad().dtype(), DType::Float32);
  EXPECT_TRUE(tensor_near(a.grad(), {1, 2}));
  EXPECT_TRUE(tensor_near(b.grad(), {3}));
}

TEST(Join, Errors) {
  EXPECT_WEFT_ERROR(cat({zeros({2, 3}), zeros({2, 4})}, 0),
                    "cat: tensor 1 has shape [2, 4] but tensor 0 has shape [2, 3]");
  EXPECT_WEFT_ERROR(cat({zeros({2, 3}), zeros({2, 3}), zeros({3})}, 0), "tensor 2 has shape [3]");
  EXPECT_WEFT_ERROR(cat({zeros({2})}, 1), "cat");
  EXPECT_WEFT_ERROR(cat({}), "non-empty");
  EXPECT_WEFT_ERROR(stack({zeros({2}), zeros({3})}), "stack: tensor 1 has shape [3] but tensor 0 has shape [2]");
  EXPECT_WEFT_ERROR(stack({zeros({2})}, 2), "stack");
  EXPECT_WEFT_ERROR(split(zeros({4}), 0), "split_size");
  EXPECT_WEFT_ERROR(split(zeros({4}), std::vector<int64_t>{1, 2}), "sum to 3");
  EXPECT_WEFT_ERROR(chunk(zeros({4}), 0), "chunks");
}

}  // namespace
}  // namespace weft
