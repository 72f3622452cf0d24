// nn ops (batch_norm, layer_norm, embedding, losses, attention) against PyTorch's
// values (tests/nn/golden/nn_ops_golden.safetensors, from
// tools/golden/make_nn_golden.py), float64 gradchecks, naive reference loops,
// other dtypes, non-contiguous inputs and error messages.
#include "core/nn_ops.h"

#include <cmath>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "autograd/gradcheck.h"
#include "core/parallel.h"
#include "tests/golden.h"
#include "tests/testing.h"

namespace weft {
namespace {

using testing::tensor_near;
using testing::tensors_near;
using testing::values;

const Tensor& G(const std::string& key) {
  static const testing::Golden g("tests/nn/golden/nn_ops_golden.safetensors");
  return g(key);
}
Tensor P(const std::string& key, DType dt = DType::Float32) {
  Tensor t = G(key).to(dt).clone();
  t.requires_grad_(true);
  return t;
}
Tensor R64(const Shape& s, double scale = 1.0) { return randn(s, {DType::Float64}) * scale; }
Tensor leaf(Tensor t) {
  t.requires_grad_(true);
  return t;
}
void expect_gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn, const std::vector<Tensor>& in) {
  auto r = autograd::gradcheck(fn, in);
  EXPECT_TRUE(r.ok) << r.message;
}
constexpr double kTol = 2e-5;

// ------------------------------------------------------------------ batch norm
void check_bn_train(const std::string& c, DType dt, double tol) {
  SCOPED_TRACE(c);
  Tensor x = P(c + ".x", dt), w = P(c + ".w", dt), b = P(c + ".b", dt);
  Tensor rm = G(c + ".rm").to(dt).clone(), rv = G(c + ".rv").to(dt).clone();
  Tensor y = batch_norm(x, rm, rv, w, b, /*training=*/true, 0.1, 1e-5);
  EXPECT_TRUE(tensors_near(y, G(c + ".out"), tol));
  EXPECT_TRUE(tensors_near(rm, G(c + ".rm_after"), tol));
  EXPECT_TRUE(tensors_near(rv, G(c + ".rv_after"), tol));
  y.backward(G(c + ".go").to(dt));
  EXPECT_TRUE(tensors_near(x.grad(), G(c + ".dx"), tol));
  EXPECT_TRUE(tensors_near(w.grad(), G(c + ".dw"), tol));
  EXPECT_TRUE(tensors_near(b.grad(), G(c + ".db"), tol));
}

TEST(BatchNorm, GoldenTrain) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    check_bn_train("bn_train3d", dt, kTol);
    check_bn_train("bn_train2d", dt, kTol);
  }
}

TEST(BatchNorm, GoldenEval) {
  Tensor x = P("bn_eval.x"), w = P("bn_eval.w"), b = P("bn_eval.b");
  Tensor rm = G("bn_eval.rm").clone(), rv = G("bn_eval.rv").clone();
  Tensor y = batch_norm(x, rm, rv, w, b, /*training=*/false);
  EXPECT_TRUE(tensors_near(y, G("bn_eval.out"), kTol));
  EXPECT_TRUE(tensors_near(rm, G("bn_eval.rm"), 0));  // eval leaves running stats alone
  y.backward(G("bn_eval.go"));
  EXPECT_TRUE(tensors_near(x.grad(), G("bn_eval.dx"), kTol));
  EXPECT_TRUE(tensors_near(w.grad(), G("bn_eval.dw"), kTol));
  EXPECT_TRUE(tensors_near(b.grad(), G("bn_eval.db"), kTol));
}

TEST(BatchNorm, HalfAndBFloat16MatchFloat32) {
  Tensor x = G("bn_train3d.x"), w = G("bn_train3d.w"), b = G("bn_train3d.b");
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    Tensor y = batch_norm(x.to(dt), Tensor(), Tensor(), w.to(dt), b.to(dt), true);
    EXPECT_EQ(y.dtype(), dt);
    Tensor ref = batch_norm(x.to(dt).to(DType::Float32), Tensor(), Tensor(), w.to(dt).to(DType::Float32),
                            b.to(dt).to(DType::Float32), true);
    EXPECT_TRUE(tensors_near(y, ref, dt == DType::Float16 ? 2e-3 : 1e-2));
  }
}

TEST(BatchNorm, NoAffineNonContiguousMatchesNaive) {
  // x is a (N, C, L) view of a transposed buffer; no weight/bias, no running stats.
  Tensor base = R64({5, 4, 3});
  Tensor x = base.transpose(0, 2);  // (3, 4, 5), non-contiguous
  ASSERT_FALSE(x.is_contiguous());
  Tensor y = batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5);
  auto xv = values(x), yv = values(y);
  for (int64_t c = 0; c < 4; ++c) {
    double m = 0, v = 0;
    for (int64_t n = 0; n < 3; ++n)
      for (int64_t l = 0; l < 5; ++l) m += xv[(n * 4 + c) * 5 + l];
    m /= 15;
    for (int64_t n = 0; n < 3; ++n)
      for (int64_t l = 0; l < 5; ++l) v += std::pow(xv[(n * 4 + c) * 5 + l] - m, 2);
    v /= 15;
    for (int64_t n = 0; n < 3; ++n)
      for (int64_t l = 0; l < 5; ++l)
        EXPECT_NEAR(yv[(n * 4 + c) * 5 + l], (xv[(n * 4 + c) * 5 + l] - m) / std::sqrt(v + 1e-5), 1e-12);
  }
}

TEST(BatchNorm, Gradcheck) {
  Tensor x = leaf(R64({4, 3, 2})), w = leaf(R64({3})), b = leaf(R64({3}));
  expect_gradcheck(
      [](const std::vector<Tensor>& in) { return batch_norm(in[0], Tensor(), Tensor(), in[1], in[2], true); },
      {x, w, b});
  Tensor x2 = leaf(R64({5, 3})), rm = R64({3}), rv = R64({3}).mul(R64({3})) + 0.5;
  expect_gradcheck([&](const std::vector<Tensor>& in) { return batch_norm(in[0], rm, rv, in[1], in[2], false); },
                   {x2, w, b});
  // training without affine parameters, non-contiguous input
  Tensor x3 = leaf(R64({2, 3, 4}));
  expect_gradcheck(
      [](const std::vector<Tensor>& in) {
        return batch_norm(in[0].transpose(0, 2), Tensor(), Tensor(), Tensor(), Tensor(), true);
      },
      {x3});
}

TEST(BatchNorm, Errors) {
  Tensor x = zeros({4, 3});
  EXPECT_WEFT_ERROR(batch_norm(x, Tensor(), Tensor(), zeros({2}), Tensor(), true), "weight should have shape [3]");
  EXPECT_WEFT_ERROR(batch_norm(zeros({1, 3}), Tensor(), Tensor(), Tensor(), Tensor(), true),
                    "more than 1 value per channel");
  EXPECT_WEFT_ERROR(batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), false), "needs running_mean");
  EXPECT_WEFT_ERROR(batch_norm(zeros({4}), Tensor(), Tensor(), Tensor(), Tensor(), true), "(N, C)");
  EXPECT_WEFT_ERROR(batch_norm(zeros({4, 3}, {DType::Int64}), Tensor(), Tensor(), Tensor(), Tensor(), true),
                    "floating");
}

// ------------------------------------------------------------------ layer norm
TEST(LayerNorm, Golden) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    Tensor x = P("ln.x", dt), w = P("ln.w", dt), b = P("ln.b", dt);
    Tensor y = layer_norm(x, {3, 4}, w, b);
    EXPECT_TRUE(tensors_near(y, G("ln.out"), kTol));
    y.backward(G("ln.go").to(dt));
    EXPECT_TRUE(tensors_near(x.grad(), G("ln.dx"), kTol));
    EXPECT_TRUE(tensors_near(w.grad(), G("ln.dw"), kTol));
    EXPECT_TRUE(tensors_near(b.grad(), G("ln.db"), kTol));
  }
}

TEST(LayerNorm, NonContiguousAndHalf) {
  Tensor base = R64({6, 5});
  Tensor xt = base.t();  // (5, 6)
  Tensor y = layer_norm(xt, {6});
  Tensor yc = layer_norm(xt.contiguous(), {6});
  EXPECT_TRUE(tensors_near(y, yc, 1e-12));
  auto xv = values(xt), yv = values(y);
  for (int64_t r = 0; r < 5; ++r) {
    double m = 0, v = 0;
    for (int64_t i = 0; i < 6; ++i) m += xv[r * 6 + i] / 6;
    for (int64_t i = 0; i < 6; ++i) v += std::pow(xv[r * 6 + i] - m, 2) / 6;
    for (int64_t i = 0; i < 6; ++i) EXPECT_NEAR(yv[r * 6 + i], (xv[r * 6 + i] - m) / std::sqrt(v + 1e-5), 1e-12);
  }
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    Tensor xh = G("ln.x").to(dt);
    Tensor yh = layer_norm(xh, {3, 4}, G("ln.w").to(dt), G("ln.b").to(dt));
    EXPECT_EQ(yh.dtype(), dt);
    EXPECT_TRUE(tensors_near(yh, G("ln.out"), dt == DType::Float16 ? 5e-3 : 3e-2));
  }
}

TEST(LayerNorm, Gradcheck) {
  Tensor x = leaf(R64({3, 2, 4})), w = leaf(R64({2, 4})), b = leaf(R64({2, 4}));
  expect_gradcheck([](const std::vector<Tensor>& in) { return layer_norm(in[0], {2, 4}, in[1], in[2]); }, {x, w, b});
  Tensor x2 = leaf(R64({4, 5}));
  expect_gradcheck([](const std::vector<Tensor>& in) { return layer_norm(in[0].t(), {4}); }, {x2});
}

TEST(LayerNorm, Errors) {
  EXPECT_WEFT_ERROR(layer_norm(zeros({2, 3}), {4}), "does not match the trailing dims");
  EXPECT_WEFT_ERROR(layer_norm(zeros({2, 3}), {3}, zeros({4})), "weight should have shape [3]");
  EXPECT_WEFT_ERROR(layer_norm(zeros({2, 3}), {}), "at least one dim");
}

// ------------------------------------------------------------------ embedding
TEST(Embedding, ForwardBackward) {
  Tensor w = leaf(arange(0, 12, 1, {DType::Float32}).view({4, 3}).clone());
  Tensor idx = tensor<int64_t>({2, 0, 2, 3, 2, 1}, {2, 3});
  Tensor y = embedding(idx, w);
  ASSERT_EQ(y.sizes(), (Shape{2, 3, 3}));
  EXPECT_TRUE(tensor_near(y, {6, 7, 8, 0, 1, 2, 6, 7, 8, 9, 10, 11, 6, 7, 8, 3, 4, 5}));
  Tensor go = arange(0, 18, 1, {DType::Float32}).view({2, 3, 3});
  y.backward(go);
  // row 2 collects go rows 0, 2, 4; row 0 <- row 1; row 3 <- row 3; row 1 <- row 5
  EXPECT_TRUE(tensor_near(w.grad(), {3, 4, 5, 15, 16, 17, 0 + 6 + 12, 1 + 7 + 13, 2 + 8 + 14, 9, 10, 11}));
}

TEST(Embedding, LargeBackwardIsDeterministicAndMatchesNaive) {
  const int64_t V = 50, D = 40, n = 3000;
  Tensor w = leaf(zeros({V, D}));
  Tensor idx = randint(0, V, {n});
  Tensor go = randn({n, D});
  embedding(idx, w).backward(go);
  auto iv = values(idx), gv = values(go);
  std::vector<double> ref(V * D, 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t d = 0; d < D; ++d) ref[static_cast<int64_t>(iv[i]) * D + d] += gv[i * D + d];
  EXPECT_TRUE(tensor_near(w.grad(), ref, 1e-4));
  Tensor g1 = w.grad().clone();
  int nt = get_num_threads();
  set_num_threads(1);
  w.zero_grad();
  embedding(idx, w).backward(go);
  set_num_threads(nt);
  EXPECT_TRUE(equal(w.grad(), g1));
}

TEST(Embedding, DTypesAndGradcheck) {
  Tensor idx = tensor<int64_t>({1, 1, 0, 2});
  for (DType dt : {DType::Float16, DType::BFloat16, DType::Float64}) {
    Tensor w = leaf(arange(0, 6, 1, {dt}).view({3, 2}).clone());
    Tensor y = embedding(idx, w);
    EXPECT_TRUE(tensor_near(y, {2, 3, 2, 3, 0, 1, 4, 5}));
    y.backward(ones({4, 2}, {dt}));
    EXPECT_TRUE(tensor_near(w.grad(), {1, 1, 2, 2, 1, 1}));
  }
  Tensor w = leaf(R64({5, 3}));
  Tensor ix = tensor<int64_t>({4, 0, 4, 2, 2, 2}, {3, 2});
  expect_gradcheck([&](const std::vector<Tensor>& in) { return embedding(ix, in[0]); }, {w});
}

TEST(Embedding, Errors) {
  Tensor w = zeros({5, 2});
  EXPECT_WEFT_ERROR(embedding(tensor<int64_t>({0, 7}), w), "index 7 is out of range for num_embeddings 5");
  EXPECT_WEFT_ERROR(embedding(tensor<int64_t>({-1}), w), "index -1 is out of range");
  EXPECT_WEFT_ERROR(embedding(tensor<int32_t>({0}, {1}, {DType::Int32}), w), "int64");
  EXPECT_WEFT_ERROR(embedding(tensor<int64_t>({0}), zeros({5})), "2-D");
}

// ------------------------------------------------------------------ cross entropy / nll
struct CeCase {
  const char* name;
  Reduction red;
  int64_t ignore;
  double ls;
};

TEST(CrossEntropy, Golden) {
  const CeCase cases[] = {
      {"ce_mean", Reduction::Mean, -100, 0.0},    {"ce_sum", Reduction::Sum, -100, 0.0},
      {"ce_none", Reduction::None, -100, 0.0},    {"ce_ignore", Reduction::Mean, -100, 0.0},
      {"ce_ignore7", Reduction::Mean, 7, 0.0},    {"ce_ls_mean", Reduction::Mean, -100, 0.1},
      {"ce_ls_sum", Reduction::Sum, -100, 0.1},   {"ce_ls_none", Reduction::None, -100, 0.25},
      {"ce_nd_mean", Reduction::Mean, -100, 0.2}, {"ce_nd_none", Reduction::None, -100, 0.0},
  };
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (const CeCase& c : cases) {
      std::string k = c.name;
      SCOPED_TRACE(k);
      Tensor x = P(k + ".x", dt);
      Tensor out = cross_entropy(x, G(k + ".target"), c.red, c.ignore, c.ls);
      EXPECT_EQ(out.dtype(), dt);
      EXPECT_TRUE(tensors_near(out, G(k + ".out"), kTol));
      out.backward(G(k + ".go").to(dt));
      EXPECT_TRUE(tensors_near(x.grad(), G(k + ".dx"), kTol));
    }
  }
}

TEST(CrossEntropy, NonContiguousHalfAndThreads) {
  Tensor x = G("ce_mean.x");           // (5, 4)
  Tensor xt = x.t().contiguous().t();  // same values, column-major strides
  ASSERT_FALSE(xt.is_contiguous());
  EXPECT_TRUE(tensors_near(cross_entropy(xt, G("ce_mean.target")), G("ce_mean.out"), kTol));
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    Tensor out = cross_entropy(x.to(dt), G("ce_ls_mean.target"), Reduction::Mean, -100, 0.1);
    EXPECT_EQ(out.dtype(), dt);
    EXPECT_TRUE(tensors_near(out, G("ce_ls_mean.out"), 2e-2));
  }
  // the reduced loss does not depend on the thread count
  Tensor big = randn({4000, 33});
  Tensor tgt = randint(0, 33, {4000});
  Tensor a = cross_entropy(big, tgt, Reduction::Sum);
  int nt = get_num_threads();
  set_num_threads(1);
  Tensor b = cross_entropy(big, tgt, Reduction::Sum);
  set_num_threads(nt);
  EXPECT_TRUE(equal(a, b));
  // and it matches a naive double-precision reference
  auto xv = values(big), tv = values(tgt);
  double ref = 0;
  for (int64_t r = 0; r < 4000; ++r) {
    double m = -INFINITY, s = 0;
    for (int64_t c = 0; c < 33; ++c) m = std::max(m, xv[r * 33 + c]);
    for (int64_t c = 0; c < 33; ++c) s += std::exp(xv[r * 33 + c] - m);
    ref += m + std::log(s) - xv[r * 33 + static_cast<int64_t>(tv[r])];
  }
  EXPECT_NEAR(a.item<float>(), ref, 1e-5 * ref);
}

TEST(CrossEntropy, StableForHugeLogits) {
  Tensor x = leaf(tensor({1000.f, 0.f, -1000.f, 2000.f, 1990.f, 0.f}, {2, 3}));
  Tensor out = cross_entropy(x, tensor<int64_t>({0, 1}), Reduction::None);
  EXPECT_TRUE(tensor_near(out, {0.0, 10.0 + std::log1p(std::exp(-10.0))}, 1e-5));
  out.sum().backward();
  auto g = values(x.grad());
  for (double v : g) EXPECT_TRUE(std::isfinite(v));
}

TEST(CrossEntropy, Gradcheck) {
  Tensor x = leaf(R64({4, 5}));
  Tensor t = tensor<int64_t>({1, -100, 4, 0});
  for (double ls : {0.0, 0.3})
    for (Reduction red : {Reduction::Mean, Reduction::Sum, Reduction::None})
      expect_gradcheck([&](const std::vector<Tensor>& in) { return cross_entropy(in[0], t, red, -100, ls); }, {x});
  Tensor x3 = leaf(R64({2, 3, 2, 2}));
  Tensor t3 = tensor<int64_t>({0, 2, 1, 1, -100, 0, 2, 2}, {2, 2, 2});
  expect_gradcheck([&](const std::vector<Tensor>& in) { return cross_entropy(in[0], t3, Reduction::Mean, -100, 0.1); },
                   {x3});
  Tensor x1 = leaf(R64({4}));
  expect_gradcheck(
      [&](const std::vector<Tensor>& in) { return cross_entropy(in[0], scalar_tensor(2, {DType::Int64})); }, {x1});
}

TEST(CrossEntropy, Errors) {
  Tensor x = zeros({3, 4});
  EXPECT_WEFT_ERROR(cross_entropy(x, tensor<int64_t>({0, 4, 1})), "target 4 is out of bounds for 4 classes");
  EXPECT_WEFT_ERROR(cross_entropy(x, tensor<int64_t>({0, -1, 1})), "target -1 is out of bounds");
  EXPECT_WEFT_ERROR(cross_entropy(x, tensor<int64_t>({0, 1})), "expected target of shape [3]");
  EXPECT_WEFT_ERROR(cross_entropy(x, tensor({0.f, 1.f, 2.f})), "int64");
  EXPECT_WEFT_ERROR(cross_entropy(x, tensor<int64_t>({0, 1, 2}), Reduction::Mean, -100, 1.5), "label_smoothing");
  EXPECT_WEFT_ERROR(nll_loss(x, tensor<int64_t>({0, 9, 1})), "nll_loss: target 9 is out of bounds for 4 classes");
}

TEST(NllLoss, GoldenAndGradcheck) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    Tensor x = P("nll_mean.x", dt);
    Tensor out = nll_loss(x, G("nll_mean.target"));
    EXPECT_TRUE(tensors_near(out, G("nll_mean.out"), kTol));
    out.backward();
    EXPECT_TRUE(tensors_near(x.grad(), G("nll_mean.dx"), kTol));
    Tensor x2 = P("nll_sum.x", dt);
    Tensor out2 = nll_loss(x2, G("nll_sum.target"), Reduction::Sum);
    EXPECT_TRUE(tensors_near(out2, G("nll_sum.out"), kTol));
    out2.backward();
    EXPECT_TRUE(tensors_near(x2.grad(), G("nll_sum.dx"), kTol));
  }
  Tensor x = leaf(R64({3, 4, 2}));
  Tensor t = tensor<int64_t>({0, 3, 2, -100, 1, 1}, {3, 2});
  expect_gradcheck([&](const std::vector<Tensor>& in) { return nll_loss(in[0], t, Reduction::Mean); }, {x});
}

// ------------------------------------------------------------------ mse / bce
TEST(MseLoss, Golden) {
  const std::pair<const char*, Reduction> cases[] = {
      {"mse_mean", Reduction::Mean}, {"mse_sum", Reduction::Sum}, {"mse_none", Reduction::None}};
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (auto [name, red] : cases) {
      std::string k = name;
      SCOPED_TRACE(k);
      Tensor x = P(k + ".x", dt), y = P(k + ".y", dt);
      Tensor out = mse_loss(x, y, red);
      EXPECT_TRUE(tensors_near(out, G(k + ".out"), kTol));
      out.backward(G(k + ".go").to(dt));
      EXPECT_TRUE(tensors_near(x.grad(), G(k + ".dx"), kTol));
      EXPECT_TRUE(tensors_near(y.grad(), G(k + ".dy"), kTol));
    }
  }
}

TEST(MseLoss, ExpandedTargetHalfGradcheck) {
  Tensor a = tensor({1.f, 2.f, 3.f, 4.f}, {2, 2});
  Tensor b = expand(tensor({1.f, 0.f}, {2}), {2, 2});  // a row repeated: shapes must match
  EXPECT_TRUE(tensor_near(mse_loss(a, b, Reduction::None), {0, 4, 4, 16}));
  EXPECT_TRUE(tensor_near(mse_loss(a.to(DType::BFloat16), b.to(DType::BFloat16)), {6.0}, 1e-2));
  EXPECT_TRUE(tensor_near(mse_loss(a.to(DType::Float16), b.to(DType::Float16), Reduction::Sum), {24.0}, 1e-3));
  Tensor x = leaf(R64({3, 4})), y = leaf(R64({4}));
  for (Reduction red : {Reduction::Mean, Reduction::Sum, Reduction::None})
    expect_gradcheck(
        [&](const std::vector<Tensor>& in) {
          return mse_loss(in[0].t().t(), expand(in[1], {3, 4}), red);
        },
        {x, y});
  EXPECT_WEFT_ERROR(mse_loss(zeros({2, 3}), zeros({4})), "mse_loss");
  EXPECT_WEFT_ERROR(mse_loss(zeros({2}), zeros({2}, {DType::Int64})), "floating target");
}

TEST(BceWithLogits, Golden) {
  const std::pair<const char*, Reduction> cases[] = {
      {"bce_pw_mean", Reduction::Mean}, {"bce_sum", Reduction::Sum}, {"bce_pw_none", Reduction::None}};
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (auto [name, red] : cases) {
      std::string k = name;
      SCOPED_TRACE(k);
      Tensor x = P(k + ".x", dt), y = P(k + ".y", dt);
      Tensor pw = k.find("_pw") != std::string::npos ? G(k + ".pw").to(dt) : Tensor();
      Tensor out = binary_cross_entropy_with_logits(x, y, red, pw);
      EXPECT_TRUE(tensors_near(out, G(k + ".out"), kTol));
      out.backward(G(k + ".go").to(dt));
      EXPECT_TRUE(tensors_near(x.grad(), G(k + ".dx"), kTol));
      EXPECT_TRUE(tensors_near(y.grad(), G(k + ".dy"), kTol));
    }
  }
}

TEST(BceWithLogits, StableGradcheckErrors) {
  Tensor big = tensor({200.f, -200.f}, {2});
  EXPECT_TRUE(tensor_near(binary_cross_entropy_with_logits(big, tensor({1.f, 0.f}), Reduction::None), {0, 0}));
  EXPECT_TRUE(tensor_near(binary_cross_entropy_with_logits(big, tensor({0.f, 1.f}), Reduction::None), {200, 200}));
  Tensor x = leaf(R64({3, 4}, 3.0)), y = leaf(rand({3, 4}, {DType::Float64})),
         pw = leaf(rand({4}, {DType::Float64}) + 0.5);
  expect_gradcheck(
      [](const std::vector<Tensor>& in) {
        return binary_cross_entropy_with_logits(in[0], in[1], Reduction::Mean, in[2]);
      },
      {x, y, pw});
  expect_gradcheck(
      [](const std::vector<Tensor>& in) { return binary_cross_entropy_with_logits(in[0], in[1], Reduction::None); },
      {x, y});
  EXPECT_WEFT_ERROR(binary_cross_entropy_with_logits(zeros({2, 3}), zeros({3})), "must be the same as input size");
  EXPECT_WEFT_ERROR(binary_cross_entropy_with_logits(zeros({2, 3}), zeros({2, 3}), Reduction::Mean, zeros({2})),
                    "does not broadcast");
}

// ------------------------------------------------------------------ attention
TEST(Attention, Golden) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (auto [name, causal] : {std::pair<const char*, bool>{"sdpa_causal", true}, {"sdpa_full", false}}) {
      std::string k = name;
      SCOPED_TRACE(k);
      Tensor q = P(k + ".q", dt), kk = P(k + ".k", dt), v = P(k + ".v", dt);
      Tensor out = scaled_dot_product_attention(q, kk, v, causal);
      EXPECT_TRUE(tensors_near(out, G(k + ".out"), kTol));
      out.backward(G(k + ".go").to(dt));
      EXPECT_TRUE(tensors_near(q.grad(), G(k + ".dq"), kTol));
      EXPECT_TRUE(tensors_near(kk.grad(), G(k + ".dk"), kTol));
      EXPECT_TRUE(tensors_near(v.grad(), G(k + ".dv"), kTol));
    }
  }
}

TEST(Attention, CausalFirstRowCopiesFirstValueAndDropout) {
  Tensor q = randn({1, 2, 3, 4}), k = randn({1, 2, 3, 4}), v = randn({1, 2, 3, 4});
  Tensor out = scaled_dot_product_attention(q, k, v, true);
  // query 0 sees only key 0
  EXPECT_TRUE(tensors_near(out.select(2, 0), v.select(2, 0), 1e-6));
  // dropout is off in eval mode and drops everything at p = 1
  EXPECT_TRUE(tensors_near(scaled_dot_product_attention(q, k, v, true, 0.5, false), out, 0));
  EXPECT_TRUE(tensor_near(scaled_dot_product_attention(q, k, v, false, 1.0, true), std::vector<double>(24, 0.0)));
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    Tensor o = scaled_dot_product_attention(q.to(dt), k.to(dt), v.to(dt), true);
    EXPECT_EQ(o.dtype(), dt);
    EXPECT_TRUE(tensors_near(o, out, 3e-2));
  }
}

TEST(Attention, Gradcheck) {
  Tensor q = leaf(R64({1, 2, 3, 2})), k = leaf(R64({1, 2, 4, 2})), v = leaf(R64({1, 2, 4, 3}));
  for (bool causal : {true, false})
    expect_gradcheck(
        [causal](const std::vector<Tensor>& in) { return scaled_dot_product_attention(in[0], in[1], in[2], causal); },
        {q, k, v});
  // non-contiguous q (a transposed view)
  Tensor qt = leaf(R64({1, 2, 2, 3}));
  expect_gradcheck(
      [&](const std::vector<Tensor>& in) { return scaled_dot_product_attention(in[0].transpose(-2, -1), k, v, true); },
      {qt});
}

TEST(Attention, Errors) {
  EXPECT_WEFT_ERROR(scaled_dot_product_attention(zeros({1, 2, 3, 4}), zeros({1, 2, 3, 5}), zeros({1, 2, 3, 4})),
                    "incompatible shapes");
  EXPECT_WEFT_ERROR(
      scaled_dot_product_attention(zeros({1, 2, 3, 4}), zeros({1, 2, 3, 4}), zeros({1, 2, 3, 4}), false, 1.5),
      "dropout_p");
  EXPECT_WEFT_ERROR(
      scaled_dot_product_attention(zeros({1, 2, 3, 4}), zeros({1, 2, 3, 4}, {DType::Float64}), zeros({1, 2, 3, 4})),
      "same floating dtype");
}

}  // namespace
}  // namespace weft
