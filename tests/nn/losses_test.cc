// l1_loss, smooth_l1_loss, huber_loss, kl_div, binary_cross_entropy,
// cosine_similarity, normalize, softplus and elu against PyTorch's values
// (tests/nn/golden/losses_golden.safetensors, from
// tools/golden/make_losses_golden.py), by finite differences, at hand-worked
// points, and their errors.
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "autograd/gradcheck.h"
#include "core/nn_ops.h"
#include "nn/layers.h"
#include "tests/golden.h"
#include "tests/testing.h"

namespace weft {
namespace {

using testing::rnd;
using testing::tensor_near;
using testing::tensors_near;
using testing::values;

const testing::Golden& golden() {
  static const testing::Golden g("tests/nn/golden/losses_golden.safetensors");
  return g;
}
const Tensor& G(const std::string& key) { return golden()(key); }
bool has(const std::string& key) { return golden().has(key); }

using Fn = std::function<Tensor(const Tensor& x, const Tensor& y, const Tensor& w)>;

void check_case(const std::string& c, const Fn& fn) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    SCOPED_TRACE(c + " in " + std::string(dtype_name(dt)));
    Tensor x = G(c + ".x").to(dt).clone().requires_grad_(true);
    Tensor y = has(c + ".y") ? G(c + ".y").to(dt).clone().requires_grad_(has(c + ".dy")) : Tensor();
    Tensor w = has(c + ".w") ? G(c + ".w").to(dt) : Tensor();
    Tensor out = fn(x, y, w);
    EXPECT_EQ(out.dtype(), dt);
    ASSERT_TRUE(tensors_near(out, G(c + ".out"), 2e-5));
    out.backward(G(c + ".go").to(dt));
    EXPECT_TRUE(tensors_near(x.grad(), G(c + ".dx"), 2e-5));
    if (has(c + ".dy")) {
      EXPECT_TRUE(tensors_near(y.grad(), G(c + ".dy"), 2e-5));
    }
  }
}

TEST(Losses, GoldenAgainstPyTorch) {
  using R = Reduction;
  check_case("l1_mean", [](const Tensor& x, const Tensor& y, const Tensor&) { return l1_loss(x, y); });
  check_case("l1_none", [](const Tensor& x, const Tensor& y, const Tensor&) { return l1_loss(x, y, R::None); });
  check_case("sl1_b05_sum",
             [](const Tensor& x, const Tensor& y, const Tensor&) { return smooth_l1_loss(x, y, R::Sum, 0.5); });
  check_case("sl1_b0",
             [](const Tensor& x, const Tensor& y, const Tensor&) { return smooth_l1_loss(x, y, R::Mean, 0); });
  check_case("huber_d07_none",
             [](const Tensor& x, const Tensor& y, const Tensor&) { return huber_loss(x, y, R::None, 0.7); });
  check_case("huber_mean", [](const Tensor& x, const Tensor& y, const Tensor&) { return huber_loss(x, y); });
  check_case("kl_batchmean",
             [](const Tensor& x, const Tensor& y, const Tensor&) { return kl_div(x, y, KlDivReduction::BatchMean); });
  check_case("kl_none",
             [](const Tensor& x, const Tensor& y, const Tensor&) { return kl_div(x, y, KlDivReduction::None); });
  check_case("kl_logt_sum",
             [](const Tensor& x, const Tensor& y, const Tensor&) { return kl_div(x, y, KlDivReduction::Sum, true); });
  check_case("bce_mean", [](const Tensor& x, const Tensor& y, const Tensor&) { return binary_cross_entropy(x, y); });
  check_case("bce_w_none",
             [](const Tensor& x, const Tensor& y, const Tensor& w) { return binary_cross_entropy(x, y, R::None, w); });
  check_case("cos_dim1", [](const Tensor& x, const Tensor& y, const Tensor&) { return cosine_similarity(x, y, 1); });
  check_case("cos_dimm1", [](const Tensor& x, const Tensor& y, const Tensor&) { return cosine_similarity(x, y, -1); });
  check_case("normalize_p2", [](const Tensor& x, const Tensor&, const Tensor&) { return normalize(x, 2.0, 1); });
  check_case("normalize_p1", [](const Tensor& x, const Tensor&, const Tensor&) { return normalize(x, 1.0, -1); });
  check_case("softplus", [](const Tensor& x, const Tensor&, const Tensor&) { return softplus(x); });
  check_case("softplus_b2_t5", [](const Tensor& x, const Tensor&, const Tensor&) { return softplus(x, 2.0, 5.0); });
  check_case("elu", [](const Tensor& x, const Tensor&, const Tensor&) { return elu(x, 1.3); });
}

TEST(Losses, HandWorkedPoints) {
  Tensor x = tensor({0.0f, 1.0f, 3.0f}, {3}), y = tensor({0.5f, 1.0f, 1.0f}, {3});
  // |d| = 0.5, 0, 2: smooth_l1 (beta 1) 0.125, 0, 1.5; huber (delta 1) 0.125, 0, 1.5; delta 0.25: 0.0938, 0, 0.4688
  EXPECT_TRUE(tensor_near(smooth_l1_loss(x, y, Reduction::None), {0.125, 0, 1.5}, 1e-7));
  EXPECT_TRUE(tensor_near(huber_loss(x, y, Reduction::None, 0.25), {0.09375, 0, 0.46875}, 1e-7));
  EXPECT_TRUE(tensor_near(l1_loss(x, y, Reduction::Sum), {2.5}, 1e-7));
  // binary_cross_entropy at exactly 0 and 1: the logs clamp at -100
  Tensor p = tensor({0.0f, 1.0f, 0.5f}, {3}), t = tensor({1.0f, 0.0f, 1.0f}, {3});
  EXPECT_TRUE(tensor_near(binary_cross_entropy(p, t, Reduction::None), {100, 100, std::log(2.0)}, 1e-6));
  // kl_div is 0 for equal distributions
  Tensor q = softmax(rnd({2, 5}, DType::Float64, 3), 1);
  EXPECT_NEAR(values(kl_div(log(q), q, KlDivReduction::Sum))[0], 0.0, 1e-15);
  // cosine of parallel and orthogonal vectors; a zero vector gives 0, not NaN
  Tensor u = tensor({1.0f, 2.0f, 0.0f, 0.0f, 0.0f, 0.0f}, {2, 3}),
         v = tensor({2.0f, 4.0f, 0.0f, 0.0f, 3.0f, 0.0f}, {2, 3});
  EXPECT_TRUE(tensor_near(cosine_similarity(u, v), {1, 0}, 1e-7));
  EXPECT_TRUE(tensor_near(normalize(tensor({3.0f, 4.0f}, {1, 2})), {0.6, 0.8}, 1e-7));
  // elu and softplus far out: no overflow, no NaN
  Tensor big = tensor({-100.0f, 100.0f}, {2});
  EXPECT_TRUE(tensor_near(elu(big), {-1, 100}, 1e-7));
  EXPECT_TRUE(tensor_near(softplus(big), {0, 100}, 1e-7));
  // gradients at the kinks, as PyTorch's: elu's at 0 is alpha, softplus's at
  // beta x == threshold the soft branch's (sigmoid(20))
  Tensor k = tensor(std::vector<double>{0.0, 20.0}, {2}, {DType::Float64}).requires_grad_(true);
  sum(elu(k, 1.3)).backward();
  EXPECT_TRUE(tensor_near(k.grad(), {1.3, 1.0}, 1e-15));
  Tensor k2 = tensor(std::vector<double>{0.0, 20.0}, {2}, {DType::Float64}).requires_grad_(true);
  sum(softplus(k2)).backward();
  EXPECT_TRUE(tensor_near(k2.grad(), {0.5, 1.0 / (1.0 + std::exp(-20.0))}, 1e-15));
}

TEST(Losses, Gradcheck) {
  auto check = [](const std::function<Tensor(const std::vector<Tensor>&)>& fn, std::vector<Tensor> in) {
    for (Tensor& t : in) t.requires_grad_(true);
    auto r = autograd::gradcheck(fn, in);
    EXPECT_TRUE(r.ok) << r.message;
  };
  Tensor a = rnd({3, 4}, DType::Float64, 1), b = rnd({3, 4}, DType::Float64, 2) * 2.0;
  check([](const std::vector<Tensor>& in) { return huber_loss(in[0], in[1], Reduction::Mean, 0.6); }, {a, b});
  check([](const std::vector<Tensor>& in) { return smooth_l1_loss(in[0], in[1], Reduction::Sum, 0.4); }, {a, b});
  check(
      [](const std::vector<Tensor>& in) { return cosine_similarity(in[0].transpose(0, 1), in[1].transpose(0, 1), 0); },
      {a, b});
  check([](const std::vector<Tensor>& in) { return normalize(in[0], 3.0, 0); }, {a});
  Tensor p = sigmoid(rnd({3, 4}, DType::Float64, 3) * 3.0), t = rnd({3, 4}, DType::Float64, 4) * 0.5 + 0.5;
  check([](const std::vector<Tensor>& in) { return binary_cross_entropy(in[0], in[1]); }, {p, t});
  Tensor lp = log_softmax(rnd({3, 4}, DType::Float64, 5), 1), q = softmax(rnd({3, 4}, DType::Float64, 6), 1);
  check([](const std::vector<Tensor>& in) { return kl_div(in[0], in[1], KlDivReduction::BatchMean); }, {lp, q});
  check([](const std::vector<Tensor>& in) { return softplus(in[0], 1.5, 2.0) + elu(in[0], 0.7); },
        {rnd({3, 4}, DType::Float64, 7) * 3.0});
}

TEST(Losses, ActivationLayers) {
  Tensor x = rnd({3, 4}, DType::Float32, 9) * 30.0;
  EXPECT_TRUE(tensors_near(nn::Softplus(2.0, 5.0).forward(x), softplus(x, 2.0, 5.0), 0));
  EXPECT_TRUE(tensors_near(nn::ELU(0.5).forward(x), elu(x, 0.5), 0));
  EXPECT_TRUE(tensors_near(nn::ELU().forward(x), elu(x, 1.0), 0));
}

TEST(Losses, Errors) {
  Tensor a = rnd({3, 4}, DType::Float32), b = rnd({4, 3}, DType::Float32);
  EXPECT_WEFT_ERROR(l1_loss(a, b), "l1_loss: input shape [3, 4] and target shape [4, 3] differ");
  EXPECT_WEFT_ERROR(huber_loss(a, a, Reduction::Mean, 0), "huber_loss: delta must be positive, got 0");
  EXPECT_WEFT_ERROR(smooth_l1_loss(a, a, Reduction::Mean, -1), "smooth_l1_loss: beta must be non-negative");
  EXPECT_WEFT_ERROR(binary_cross_entropy(a, a.abs()), "every element of the input must be a probability in [0, 1]");
  EXPECT_WEFT_ERROR(kl_div(a, a.to(DType::Int64)), "kl_div: expected floating input and target");
  EXPECT_WEFT_ERROR(softplus(a, 0), "softplus: beta must not be 0");
}

}  // namespace
}  // namespace weft
