// gather/scatter_add/index_select/index_add/one_hot/masked_fill/tril/triu against
// hand-computed values; non-contiguous inputs, negative dims, gradchecks, errors.
#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "autograd/gradcheck.h"
#include "core/ops.h"
#include "tests/testing.h"

namespace weft {
namespace {
using testing::tensor_near;
using testing::values;

Tensor i64(std::vector<int64_t> v, Shape s = {}) { return tensor(v, s); }
Tensor f64(std::vector<double> v, Shape s = {}) { return tensor(v, s); }
Tensor boolt(std::vector<int64_t> v, Shape s = {}) { return tensor(v, s).to(DType::Bool); }
bool gc(const std::function<Tensor(const std::vector<Tensor>&)>& f, const std::vector<Tensor>& in) {
  auto r = autograd::gradcheck(f, in);
  if (!r.ok) ADD_FAILURE() << r.message;
  return r.ok;
}

TEST(Index, Gather) {
  Tensor a = tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor idx = i64({2, 0, 1, 1}, {2, 2});
  EXPECT_TRUE(tensor_near(gather(a, 1, idx), {3, 1, 5, 5}));
  EXPECT_TRUE(tensor_near(gather(a, -1, idx), {3, 1, 5, 5}));
  EXPECT_TRUE(tensor_near(gather(a, 0, i64({1, 0, 1}, {1, 3})), {4, 2, 6}));
  // non-contiguous input and int32 index
  Tensor at = a.t();  // [[1,4],[2,5],[3,6]]
  EXPECT_TRUE(tensor_near(gather(at, 1, i64({1, 0, 1}, {3, 1}).to(DType::Int32)), {4, 2, 6}));
  // non-contiguous index
  Tensor it = i64({0, 1, 1, 0}, {2, 2}).t();  // [[0,1],[1,0]]
  EXPECT_TRUE(tensor_near(gather(a, 1, it), {1, 2, 5, 4}));
  EXPECT_EQ(gather(a.to(DType::Int64), 1, idx).dtype(), DType::Int64);
  EXPECT_TRUE(tensor_near(gather(a.to(DType::BFloat16), 1, idx), {3, 1, 5, 5}));
}

TEST(Index, ScatterAdd) {
  Tensor z = zeros({2, 3});
  Tensor idx = i64({0, 0, 2, 1}, {2, 2});
  Tensor src = tensor({1, 2, 3, 4}, {2, 2});
  Tensor r = scatter_add(z, 1, idx, src);
  EXPECT_TRUE(tensor_near(r, {3, 0, 0, 0, 4, 3}));
  EXPECT_TRUE(tensor_near(z, {0, 0, 0, 0, 0, 0}));  // out of place
  Tensor r0 = scatter_add(ones({3, 2}), 0, i64({2, 0}, {1, 2}), tensor({5, 7}, {1, 2}));
  EXPECT_TRUE(tensor_near(r0, {1, 8, 1, 1, 6, 1}));
  // src larger than index: only the index's extent is used
  Tensor r2 = scatter_add(zeros({2}), 0, i64({1}), tensor({9, 100}));
  EXPECT_TRUE(tensor_near(r2, {0, 9}));
  EXPECT_TRUE(tensor_near(scatter_add(zeros({3}, {DType::Int64}), 0, i64({1, 1}), i64({2, 3})), {0, 5, 0}));
}

TEST(Index, IndexSelectAndAdd) {
  Tensor a = tensor({1, 2, 3, 4, 5, 6}, {3, 2});
  EXPECT_TRUE(tensor_near(index_select(a, 0, i64({2, 0, 2})), {5, 6, 1, 2, 5, 6}));
  EXPECT_TRUE(tensor_near(index_select(a, -1, i64({1})), {2, 4, 6}));
  EXPECT_EQ(index_select(a, 0, i64({2, 0, 2})).sizes(), (Shape{3, 2}));
  EXPECT_TRUE(tensor_near(index_select(a.t(), 1, i64({2, 1}).to(DType::Int32)), {5, 3, 6, 4}));
  Tensor r = index_add(zeros({3, 2}), 0, i64({0, 2, 0}), tensor({1, 2, 3, 4, 5, 6}, {3, 2}));
  EXPECT_TRUE(tensor_near(r, {6, 8, 0, 0, 3, 4}));
  Tensor r1 = index_add(ones({2, 3}), 1, i64({2, 2}), tensor({1, 2, 3, 4}, {2, 2}).t());
  // src (2,2) transposed = [[1,3],[2,4]] -> row0 col2 += 1+3, row1 col2 += 2+4
  EXPECT_TRUE(tensor_near(r1, {1, 1, 5, 1, 1, 7}));
  // wide rows exercise the column blocking
  Tensor big = index_add(zeros({2, 1500}), 0, i64({1, 1, 0}), ones({3, 1500}));
  auto v = values(big);
  EXPECT_EQ(v[0], 1);
  EXPECT_EQ(v[1499], 1);
  EXPECT_EQ(v[1500], 2);
  EXPECT_EQ(v[2999], 2);
}

TEST(Index, EmptyAndHalf) {
  Tensor a = tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor e = i64({}, {2, 0});
  EXPECT_EQ(gather(a, 1, e).sizes(), (Shape{2, 0}));
  EXPECT_TRUE(tensor_near(scatter_add(a, 1, e, zeros({2, 0})), {1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(index_select(a, 0, i64({}, {0})).sizes(), (Shape{0, 3}));
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    Tensor h = a.to(dt);
    EXPECT_TRUE(tensor_near(scatter_add(h, 1, i64({0, 0}, {1, 2}), tensor({0.5, 0.25}, {1, 2}).to(dt)),
                            {1.75, 2, 3, 4, 5, 6}, 1e-2));
    EXPECT_TRUE(tensor_near(index_add(h, 0, i64({1}), ones({1, 3}, {dt})), {1, 2, 3, 5, 6, 7}, 1e-2));
    EXPECT_TRUE(tensor_near(masked_fill(h, boolt({0, 1, 0}), -2), {1, -2, 3, 4, -2, 6}, 1e-2));
    EXPECT_TRUE(tensor_near(tril(h), {1, 0, 0, 4, 5, 0}, 1e-2));
    EXPECT_EQ(index_select(h, 1, i64({2})).dtype(), dt);
  }
}

TEST(Index, OneHot) {
  Tensor o = one_hot(i64({0, 2, 1}));
  EXPECT_EQ(o.dtype(), DType::Int64);
  EXPECT_EQ(o.sizes(), (Shape{3, 3}));
  EXPECT_EQ(values(o), (std::vector<double>{1, 0, 0, 0, 0, 1, 0, 1, 0}));
  Tensor o2 = one_hot(i64({1, 0}, {2, 1}), 4);
  EXPECT_EQ(o2.sizes(), (Shape{2, 1, 4}));
  EXPECT_EQ(values(o2), (std::vector<double>{0, 1, 0, 0, 1, 0, 0, 0}));
  EXPECT_WEFT_ERROR(one_hot(i64({0, 4}), 4), "index 4");
  EXPECT_WEFT_ERROR(one_hot(i64({-1}), 4), "index -1");
  EXPECT_WEFT_ERROR(one_hot(tensor({1.0f})), "int64");
}

TEST(Index, MaskedFill) {
  Tensor a = tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor m = boolt({1, 0, 1});  // broadcast over rows
  EXPECT_TRUE(tensor_near(masked_fill(a, m, -1), {-1, 2, -1, -1, 5, -1}));
  EXPECT_TRUE(tensor_near(a.t().masked_fill(boolt({0, 1}), 9.5), {1, 9.5, 2, 9.5, 3, 9.5}));
  Tensor b = a.clone();
  masked_fill_(b, boolt({0, 1, 0, 1, 0, 0}, {2, 3}), 0);
  EXPECT_TRUE(tensor_near(b, {1, 0, 3, 0, 5, 6}));
  Tensor c = a.clone();
  Tensor ct = c.t();  // in place through a non-contiguous view
  masked_fill_(ct, boolt({1, 0}), 7);
  EXPECT_TRUE(tensor_near(c, {7, 7, 7, 4, 5, 6}));
  EXPECT_TRUE(tensor_near(masked_fill(i64({1, 2}), boolt({0, 1}), 5), {1, 5}));
  EXPECT_WEFT_ERROR(masked_fill(a, tensor({1, 0, 1}), 0), "bool");
  EXPECT_WEFT_ERROR(masked_fill(a, boolt({1, 0}), 0), "masked_fill");
  EXPECT_WEFT_ERROR(masked_fill_(b, boolt({1, 0, 1, 1, 0, 1, 1, 0, 1, 1, 0, 1}, {2, 2, 3}), 0), "masked_fill_");
}

TEST(Index, TrilTriu) {
  Tensor a = arange(1, 13, 1, {DType::Float32}).view({3, 4});
  EXPECT_TRUE(tensor_near(tril(a), {1, 0, 0, 0, 5, 6, 0, 0, 9, 10, 11, 0}));
  EXPECT_TRUE(tensor_near(triu(a), {1, 2, 3, 4, 0, 6, 7, 8, 0, 0, 11, 12}));
  EXPECT_TRUE(tensor_near(tril(a, 1), {1, 2, 0, 0, 5, 6, 7, 0, 9, 10, 11, 12}));
  EXPECT_TRUE(tensor_near(triu(a, -1), {1, 2, 3, 4, 5, 6, 7, 8, 0, 10, 11, 12}));
  EXPECT_TRUE(tensor_near(tril(a, -5), std::vector<double>(12, 0.0)));
  EXPECT_TRUE(tensor_near(triu(a.t()), {1, 5, 9, 0, 6, 10, 0, 0, 11, 0, 0, 0}));
  Tensor b = ones({2, 2, 2}, {DType::Int64});
  EXPECT_EQ(values(triu(b, 1)), (std::vector<double>{0, 1, 0, 0, 0, 1, 0, 0}));
  EXPECT_WEFT_ERROR(tril(ones({3})), "tril");
}

TEST(Index, Gradchecks) {
  Tensor a = f64({1, 2, 3, 4, 5, 6}, {2, 3}).requires_grad_();
  Tensor idx = i64({2, 0, 0, 1, 1, 1}, {2, 3});
  gc([&](const std::vector<Tensor>& x) { return gather(x[0], 1, idx); }, {a});
  gc([&](const std::vector<Tensor>& x) { return gather(x[0].t(), -2, i64({1, 0}, {1, 2})); }, {a});
  Tensor src = f64({0.5, -1, 2, 3, 1, -2}, {2, 3}).requires_grad_();
  gc([&](const std::vector<Tensor>& x) { return scatter_add(x[0], 1, idx, x[1]); }, {a, src});
  Tensor src_big = f64({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4}).requires_grad_();
  gc([&](const std::vector<Tensor>& x) { return scatter_add(x[0], 1, idx, x[1]); }, {a, src_big});
  Tensor sel = i64({1, 0, 1});
  gc([&](const std::vector<Tensor>& x) { return index_select(x[0], 0, sel); }, {a});
  gc([&](const std::vector<Tensor>& x) { return index_select(x[0], -1, i64({2, 2, 0})); }, {a});
  Tensor s3 = f64({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3}).requires_grad_();
  gc([&](const std::vector<Tensor>& x) { return index_add(x[0], 0, sel, x[1]); }, {a, s3});
  Tensor m = boolt({1, 0, 0, 0, 1, 1}, {2, 3});
  gc([&](const std::vector<Tensor>& x) { return masked_fill(x[0], m, 3.0); }, {a});
  gc(
      [&](const std::vector<Tensor>& x) {
        return masked_fill(x[0], boolt({1, 0}, {2, 1}), 3.0);
      },
      {f64({1, 2, 3}, {3}).requires_grad_()});
  gc(
      [&](const std::vector<Tensor>& x) {
        Tensor y = x[0] * x[0];
        masked_fill_(y, m, 0.0);
        return y;
      },
      {a});
  Tensor sq = f64({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {2, 2, 3}).requires_grad_();
  gc([](const std::vector<Tensor>& x) { return tril(x[0], 0); }, {sq});
  gc([](const std::vector<Tensor>& x) { return triu(x[0], 1); }, {sq});
}

TEST(Index, GatherBackwardAccumulatesRepeats) {
  Tensor a = tensor({1, 2, 3}).requires_grad_();
  gather(a, 0, i64({2, 2, 0})).sum().backward();
  EXPECT_TRUE(tensor_near(a.grad(), {1, 0, 2}));
  Tensor w = zeros({4, 2}).requires_grad_();
  index_select(w, 0, i64({3, 3, 1})).sum().backward();
  EXPECT_TRUE(tensor_near(w.grad(), {0, 0, 1, 1, 0, 0, 2, 2}));
}

TEST(Index, Errors) {
  Tensor a = zeros({2, 3});
  EXPECT_WEFT_ERROR(gather(a, 1, i64({0, 3}, {1, 2})), "gather: index 3 is out of bounds for dimension 1 with size 3");
  EXPECT_WEFT_ERROR(gather(a, 1, i64({-1}, {1, 1})), "index -1");
  EXPECT_WEFT_ERROR(gather(a, 1, tensor({0.0f}, {1, 1})), "gather: index must be an int64 or int32");
  EXPECT_WEFT_ERROR(gather(a, 1, i64({0, 1, 2})), "dims");
  EXPECT_WEFT_ERROR(gather(a, 2, i64({0}, {1, 1})), "gather");
  EXPECT_WEFT_ERROR(gather(a, 1, i64({0, 0, 0, 0, 0, 0}, {3, 2})), "exceeds");
  EXPECT_WEFT_ERROR(scatter_add(a, 0, i64({2}, {1, 1}), ones({1, 1})), "scatter_add: index 2 is out of bounds");
  EXPECT_WEFT_ERROR(scatter_add(a, 0, i64({0}, {1, 1}), ones({1, 1}, {DType::Float64})), "dtype");
  EXPECT_WEFT_ERROR(scatter_add(a, 0, boolt({0}, {1, 1}), ones({1, 1})), "int64");
  EXPECT_WEFT_ERROR(index_select(a, 0, i64({0, 2})),
                    "index_select: index 2 is out of bounds for dimension 0 with size 2");
  EXPECT_WEFT_ERROR(index_select(a, 0, i64({0}, {1, 1})), "1-D");
  EXPECT_WEFT_ERROR(index_select(a, 0, tensor({0.0f})), "index_select: index must be an int64");
  EXPECT_WEFT_ERROR(index_add(a, 1, i64({5}), ones({2, 1})),
                    "index_add: index 5 is out of bounds for dimension 1 with size 3");
  EXPECT_WEFT_ERROR(index_add(a, 1, i64({0}), ones({2, 2})), "src shape [2, 2]");
}

}  // namespace
}  // namespace weft
