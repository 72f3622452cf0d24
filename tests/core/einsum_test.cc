// einsum against a brute-force evaluator (every assignment of every subscript,
// summed in float64), against matmul for the ellipsis forms, by finite
// differences, and its errors; diagonal as a view with hand-worked values.
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "autograd/gradcheck.h"
#include "core/ops.h"
#include "tests/testing.h"

namespace weft {
namespace {

using testing::rnd;
using testing::tensors_near;
using testing::values;

// Reference einsum for letters-only equations with an explicit output: loops
// over every assignment of every letter and sums the products.
Tensor brute_einsum(const std::string& eq, const std::vector<Tensor>& ops) {
  const size_t arrow = eq.find("->");
  std::vector<std::string> terms;
  std::string cur;
  for (char c : eq.substr(0, arrow)) {
    if (c == ',') {
      terms.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  terms.push_back(cur);
  const std::string out = eq.substr(arrow + 2);
  std::map<char, int64_t> size;
  for (size_t k = 0; k < ops.size(); ++k)
    for (size_t d = 0; d < terms[k].size(); ++d) size[terms[k][d]] = std::max(size[terms[k][d]], ops[k].size(d));
  std::vector<char> letters;
  for (auto& [c, n] : size) letters.push_back(c);
  std::vector<std::vector<double>> vals;
  for (const Tensor& t : ops) vals.push_back(values(t));
  Shape out_shape;
  for (char c : out) out_shape.push_back(size[c]);
  std::vector<double> res(numel_of(out_shape), 0.0);
  std::map<char, int64_t> at;
  for (char c : letters) at[c] = 0;
  while (true) {
    double p = 1;
    for (size_t k = 0; k < ops.size(); ++k) {
      int64_t idx = 0;
      for (size_t d = 0; d < terms[k].size(); ++d)
        idx = idx * ops[k].size(d) + (ops[k].size(d) == 1 ? 0 : at[terms[k][d]]);  // size 1 broadcasts
      p *= vals[k][idx];
    }
    int64_t oi = 0;
    for (char c : out) oi = oi * size[c] + at[c];
    res[oi] += p;
    size_t i = 0;
    for (; i < letters.size(); ++i) {
      if (++at[letters[i]] < size[letters[i]]) break;
      at[letters[i]] = 0;
    }
    if (i == letters.size()) break;
  }
  Tensor r = tensor(res, {static_cast<int64_t>(res.size())});
  return r.reshape(out_shape);
}

void expect_matches_brute(const std::string& eq, const std::vector<Tensor>& ops) {
  SCOPED_TRACE(eq);
  Tensor got = einsum(eq, ops);
  EXPECT_TRUE(tensors_near(got, brute_einsum(eq, ops), 1e-12));
}

TEST(Einsum, MatchesBruteForce) {
  Tensor a = rnd({3, 4}, DType::Float64, 1), b = rnd({4, 5}, DType::Float64, 2), c = rnd({5, 2}, DType::Float64, 3);
  Tensor sq = rnd({4, 4}, DType::Float64, 4), v = rnd({4}, DType::Float64, 5);
  Tensor q = rnd({2, 3, 4, 5}, DType::Float64, 6), k = rnd({2, 3, 6, 5}, DType::Float64, 7);
  Tensor t3 = rnd({4, 3, 2}, DType::Float64, 8), t4 = rnd({3, 4, 5}, DType::Float64, 9);
  Tensor dg = rnd({3, 3, 4}, DType::Float64, 10);
  expect_matches_brute("ij,jk->ik", {a, b});
  expect_matches_brute("ij,jk,kl->il", {a, b, c});  // three operands
  expect_matches_brute("ij->ji", {a});
  expect_matches_brute("ij->", {a});
  expect_matches_brute("ij->j", {a});
  expect_matches_brute("ii->i", {sq});  // diagonal
  expect_matches_brute("ii->", {sq});   // trace
  expect_matches_brute("i,j->ij", {v, rnd({3}, DType::Float64, 11)});
  expect_matches_brute("i,i->", {v, v});
  expect_matches_brute("bhqd,bhkd->bhqk", {q, k});  // attention scores
  expect_matches_brute("bhqd,bhkd->bqhk", {q, k});  // and a permuted output
  expect_matches_brute("kji,jkl->il", {t3, t4});    // two contracted letters in different orders
  expect_matches_brute("iij,jk->ki", {dg, rnd({4, 2}, DType::Float64, 12)});
  expect_matches_brute("ij,kl->ijkl", {a, c});                              // no shared letter
  expect_matches_brute("ij,ij->ij", {rnd({1, 4}, DType::Float64, 13), a});  // a size-1 dim broadcasts
  expect_matches_brute("ij,jk->ik", {rnd({3, 1}, DType::Float64, 14), b});  // and a contracted one
  expect_matches_brute("ij,jk,jl->", {a, b, rnd({4, 2}, DType::Float64, 15)});
}

TEST(Einsum, ImplicitOutputAndEllipsis) {
  Tensor a = rnd({3, 4}, DType::Float64, 1), b = rnd({4, 5}, DType::Float64, 2);
  // implicit: the letters that appear once, upper case before lower case
  EXPECT_TRUE(tensors_near(einsum("ij,jk", {a, b}), mm(a, b), 1e-12));
  EXPECT_TRUE(tensors_near(einsum("kj,ik", {b, a}), mm(a, b), 1e-12));  // -> ij
  EXPECT_TRUE(tensors_near(einsum("Ab,bc", {a, b}), mm(a, b), 1e-12));  // -> Ac
  EXPECT_TRUE(tensors_near(einsum("ii", {rnd({3, 3}, DType::Float64, 3)}),
                           sum(diagonal(rnd({3, 3}, DType::Float64, 3))), 1e-12));
  EXPECT_EQ(einsum("ij", {a}).sizes(), (Shape{3, 4}));
  // spaces are ignored
  EXPECT_TRUE(tensors_near(einsum(" i j , j k -> i k ", {a, b}), mm(a, b), 1e-12));
  // ellipsis: batched matmul with broadcasting, transposes, and summed ellipsis dims
  Tensor x = rnd({2, 3, 4, 5}, DType::Float64, 4), y = rnd({5, 6}, DType::Float64, 5);
  EXPECT_TRUE(tensors_near(einsum("...ij,...jk->...ik", {x, y}), matmul(x, y), 1e-12));
  Tensor z = rnd({3, 5, 6}, DType::Float64, 6);
  EXPECT_TRUE(tensors_near(einsum("...ij,...jk->...ik", {x, z}), matmul(x, z), 1e-12));
  EXPECT_TRUE(tensors_near(einsum("...ij->...ji", {x}), x.transpose(2, 3), 0));
  EXPECT_TRUE(tensors_near(einsum("...ij->ij", {x}), sum(x, {0, 1}), 1e-12));
  EXPECT_TRUE(tensors_near(einsum("b...,b->...", {x, rnd({2}, DType::Float64, 7)}),
                           sum(x * rnd({2}, DType::Float64, 7).view({2, 1, 1, 1}), {0}), 1e-12));
  EXPECT_TRUE(tensors_near(einsum("...", {x}), x, 0));
  // float32 and a non-contiguous operand
  Tensor af = rnd({4, 3}, DType::Float32, 8).transpose(0, 1), bf = b.to(DType::Float32);
  EXPECT_TRUE(tensors_near(einsum("ij,jk->ik", {af, bf}), mm(af, bf), 1e-6));
}

TEST(Einsum, Gradcheck) {
  auto check = [](const std::string& eq, std::vector<Tensor> in) {
    SCOPED_TRACE(eq);
    for (Tensor& t : in) t.requires_grad_(true);
    auto r = autograd::gradcheck([&eq](const std::vector<Tensor>& x) { return einsum(eq, x); }, in);
    EXPECT_TRUE(r.ok) << r.message;
  };
  check("bij,bjk->bik", {rnd({2, 3, 4}, DType::Float64, 1), rnd({2, 4, 2}, DType::Float64, 2)});
  check("iij,jk->ki", {rnd({3, 3, 2}, DType::Float64, 3), rnd({2, 4}, DType::Float64, 4)});
  check("ij,jk,kl->il",
        {rnd({2, 3}, DType::Float64, 5), rnd({3, 4}, DType::Float64, 6), rnd({4, 2}, DType::Float64, 7)});
  check("ij,ij->i", {rnd({1, 3}, DType::Float64, 8), rnd({2, 3}, DType::Float64, 9)});
}

TEST(Einsum, Errors) {
  Tensor a = rnd({3, 4}, DType::Float32), b = rnd({4, 5}, DType::Float32);
  EXPECT_WEFT_ERROR(einsum("ij,jk->ik", {a}), "has 2 operand subscripts but 1 operands were given");
  EXPECT_WEFT_ERROR(einsum("ijk,jk->ik", {a, b}), "operand 0 of shape [3, 4] has 2 dims but 'ijk' names 3");
  EXPECT_WEFT_ERROR(einsum("i1,jk->ik", {a, b}), "subscript '1' is not a letter");
  EXPECT_WEFT_ERROR(einsum("ij,jk->iz", {a, b}), "output subscript z appears in no operand");
  EXPECT_WEFT_ERROR(einsum("ij,jk->ii", {a, b}), "output subscript i appears more than once");
  EXPECT_WEFT_ERROR(einsum("ij,kj->ik", {a, b}), "subscript j has size 5 in operand 1 of shape [4, 5]");
  EXPECT_WEFT_ERROR(einsum("ii->i", {a}), "subscript i repeated in operand 0 of shape [3, 4]");
  EXPECT_WEFT_ERROR(einsum("i.j,jk->ik", {a, b}), "is not one \"...\"");
  EXPECT_WEFT_ERROR(einsum("...ijk->k", {a}), "has fewer dims than the 3 letters");
}

TEST(Diagonal, ValuesOffsetsAndViews) {
  Tensor x = arange(12, {DType::Float64}).view({3, 4});
  EXPECT_EQ(values(diagonal(x)), (std::vector<double>{0, 5, 10}));
  EXPECT_EQ(values(diagonal(x, 1)), (std::vector<double>{1, 6, 11}));
  EXPECT_EQ(values(diagonal(x, 2)), (std::vector<double>{2, 7}));
  EXPECT_EQ(values(diagonal(x, -1)), (std::vector<double>{4, 9}));
  EXPECT_EQ(diagonal(x, 5).numel(), 0);
  EXPECT_EQ(values(diagonal(x, 0, 1, 0)), (std::vector<double>{0, 5, 10}));
  Tensor y = arange(24, {DType::Float64}).view({2, 3, 4});
  Tensor d = diagonal(y, 0, 0, 2);  // (3, 2): y[i, j, i] for j, i
  EXPECT_EQ(d.sizes(), (Shape{3, 2}));
  EXPECT_EQ(values(d), (std::vector<double>{0, 13, 4, 17, 8, 21}));
  // a view: writing through it changes the base
  Tensor z = zeros({3, 3}, {DType::Float64});
  diagonal(z).fill_(7);
  EXPECT_EQ(values(z), (std::vector<double>{7, 0, 0, 0, 7, 0, 0, 0, 7}));
  Tensor w = rnd({3, 4, 2}, DType::Float64, 3).requires_grad_(true);
  auto r = autograd::gradcheck(
      [](const std::vector<Tensor>& in) { return diagonal(in[0], -1, 1, 0) * diagonal(in[0], 1, 0, 1); }, {w});
  EXPECT_TRUE(r.ok) << r.message;
  EXPECT_WEFT_ERROR(diagonal(x, 0, 1, 1), "dim1 and dim2 are both dim 1");
  EXPECT_WEFT_ERROR(diagonal(rnd({3}, DType::Float32)), "at least 2 dims");
}

}  // namespace
}  // namespace weft
