// cross_entropy and nll_loss with per-class weights against PyTorch's values
// (tests/nn/golden/class_weights_golden.safetensors, from
// tools/golden/make_class_weight_golden.py), against the unweighted op at
// hand-worked points, by finite differences, and their errors.
#include <cmath>
#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "autograd/gradcheck.h"
#include "core/nn_ops.h"
#include "tests/golden.h"
#include "tests/testing.h"

namespace weft {
namespace {

using testing::rnd;
using testing::tensors_near;
using testing::values;

const testing::Golden& golden() {
  static const testing::Golden g("tests/nn/golden/class_weights_golden.safetensors");
  return g;
}
const Tensor& G(const std::string& key) { return golden()(key); }

using Fn = std::function<Tensor(const Tensor& x, const Tensor& t, const Tensor& w)>;

// The golden case `c` in float32, float64 and bfloat16 (the last computed in
// float32 from bfloat16-rounded logits, so compared loosely).
void check_case(const std::string& c, const Fn& fn) {
  for (DType dt : {DType::Float32, DType::Float64, DType::BFloat16}) {
    SCOPED_TRACE(c + " in " + std::string(dtype_name(dt)));
    const double tol = dt == DType::BFloat16 ? 5e-2 : 2e-5;
    Tensor x = G(c + ".x").to(dt).clone().requires_grad_(true);
    Tensor out = fn(x, G(c + ".t"), G(c + ".w").to(dt));
    EXPECT_EQ(out.dtype(), dt);
    ASSERT_TRUE(tensors_near(out.to(DType::Float32), G(c + ".out"), tol));
    out.backward(G(c + ".go").to(dt));
    EXPECT_TRUE(tensors_near(x.grad().to(DType::Float32), G(c + ".dx"), tol));
  }
}

TEST(ClassWeights, GoldenAgainstPyTorch) {
  using R = Reduction;
  auto ce = [](R r, int64_t ignore = -100, double ls = 0.0) -> Fn {
    return [=](const Tensor& x, const Tensor& t, const Tensor& w) { return cross_entropy(x, t, r, ignore, ls, w); };
  };
  check_case("ce_mean", ce(R::Mean));
  check_case("ce_sum", ce(R::Sum));
  check_case("ce_none", ce(R::None));
  check_case("ce_ls_mean", ce(R::Mean, -100, 0.2));
  check_case("ce_ls_none", ce(R::None, -100, 0.3));
  check_case("ce_ls_sum", ce(R::Sum, -100, 0.1));
  check_case("ce4d_mean", ce(R::Mean, 1));
  check_case("ce4d_ls_mean", ce(R::Mean, -100, 0.25));
  check_case("ce1d_mean", ce(R::Mean));
  check_case("nll_mean", [](const Tensor& x, const Tensor& t, const Tensor& w) {
    return nll_loss(x, t, Reduction::Mean, -100, w);
  });
  check_case("nll_none", [](const Tensor& x, const Tensor& t, const Tensor& w) {
    return nll_loss(x, t, Reduction::None, -100, w);
  });
}

TEST(ClassWeights, AgreeWithTheUnweightedOp) {
  Tensor x = rnd({7, 4}, DType::Float64, 1) * 2.0;
  Tensor t = tensor<int64_t>({0, 3, 1, 1, 2, -100, 3}, {7});
  // All-ones weights: the unweighted loss, with or without smoothing.
  Tensor ones = full({4}, 1.0, {DType::Float64});
  for (double ls : {0.0, 0.4}) {
    EXPECT_TRUE(tensors_near(cross_entropy(x, t, Reduction::Mean, -100, ls, ones),
                             cross_entropy(x, t, Reduction::Mean, -100, ls), 1e-14));
    EXPECT_TRUE(tensors_near(cross_entropy(x, t, Reduction::None, -100, ls, ones),
                             cross_entropy(x, t, Reduction::None, -100, ls), 1e-14));
  }
  // Without smoothing, weights scale each position: sum_r w[t_r] l_r, and Mean divides by sum_r w[t_r].
  Tensor w = tensor<double>({0.5, 2.0, 1.5, 4.0}, {4});
  const std::vector<double> l = values(cross_entropy(x, t, Reduction::None));
  const std::vector<double> wv = values(w);
  const std::vector<int64_t> tv = {0, 3, 1, 1, 2, -100, 3};
  double num = 0, den = 0;
  for (size_t r = 0; r < tv.size(); ++r) {
    if (tv[r] == -100) continue;
    num += wv[tv[r]] * l[r];
    den += wv[tv[r]];
  }
  EXPECT_NEAR(cross_entropy(x, t, Reduction::Sum, -100, 0.0, w).item<double>(), num, 1e-12);
  EXPECT_NEAR(cross_entropy(x, t, Reduction::Mean, -100, 0.0, w).item<double>(), num / den, 1e-13);
  // A weight of 0 on every kept target: Mean is 0 / 0 = NaN, as PyTorch.
  Tensor zero_w = tensor<double>({0.0, 0.0, 0.0, 0.0}, {4});
  EXPECT_TRUE(std::isnan(cross_entropy(x, t, Reduction::Mean, -100, 0.0, zero_w).item<double>()));
}

TEST(ClassWeights, Gradcheck) {
  Tensor x = rnd({5, 4, 3}, DType::Float64, 2) * 1.5;
  x.requires_grad_(true);
  Tensor t = tensor<int64_t>({0, 3, 1, 2, 2, 0, 3, 1, -1, 1, 0, 2, 3, 3, 0}, {5, 3});
  Tensor w = tensor<double>({0.3, 1.7, 1.0, 2.5}, {4});
  for (double ls : {0.0, 0.35}) {
    auto r = autograd::gradcheck(
        [&](const std::vector<Tensor>& in) { return cross_entropy(in[0], t, Reduction::Mean, -1, ls, w); }, {x});
    EXPECT_TRUE(r.ok) << "label_smoothing " << ls << ": " << r.message;
  }
  Tensor lp = log_softmax(rnd({6, 4}, DType::Float64, 3), 1).detach();
  lp.requires_grad_(true);
  Tensor t2 = tensor<int64_t>({3, 0, 0, 2, 1, 3}, {6});
  auto r = autograd::gradcheck(
      [&](const std::vector<Tensor>& in) { return nll_loss(in[0], t2, Reduction::Sum, -100, w); }, {lp});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(ClassWeights, Errors) {
  Tensor x = rnd({3, 4}, DType::Float32, 4);
  Tensor t = tensor<int64_t>({0, 1, 3}, {3});
  EXPECT_WEFT_ERROR(cross_entropy(x, t, Reduction::Mean, -100, 0.0, full({3}, 1.0)),
                    "cross_entropy: weight tensor should be defined either for all 4 classes or no classes but got "
                    "weight tensor of shape: [3]");
  EXPECT_WEFT_ERROR(nll_loss(x, t, Reduction::Mean, -100, full({1, 4}, 1.0)),
                    "nll_loss: weight tensor should be defined either for all 4 classes");
  EXPECT_WEFT_ERROR(cross_entropy(x, t, Reduction::Mean, -100, 0.0, tensor<int64_t>({1, 1, 1, 1}, {4})),
                    "cross_entropy: expected a floating class weight, got dtype int64");
  // The target checks of the unweighted op still apply.
  EXPECT_WEFT_ERROR(cross_entropy(x, tensor<int64_t>({0, 4, 1}, {3}), Reduction::Mean, -100, 0.0, full({4}, 1.0)),
                    "cross_entropy: target 4 is out of bounds for 4 classes");
}

}  // namespace
}  // namespace weft
