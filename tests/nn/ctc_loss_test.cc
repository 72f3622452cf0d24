// ctc_loss and nn::CTCLoss against PyTorch's values and logit gradients
// (tests/nn/golden/ctc_golden.safetensors, from tools/golden/make_ctc_golden.py);
// the gradient with respect to log_probs against central differences, the
// second derivatives of its composite, and the errors.
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "autograd/gradcheck.h"
#include "core/nn_ops.h"
#include "core/rng.h"
#include "nn/loss.h"
#include "tests/golden.h"
#include "tests/testing.h"

namespace weft {
namespace {

using testing::tensors_near;

const testing::Golden& golden() {
  static const testing::Golden g("tests/nn/golden/ctc_golden.safetensors");
  return g;
}
const Tensor& G(const std::string& key) { return golden()(key); }

// Runs case c through log_softmax and ctc_loss; checks the loss and, where
// stored, the logits' gradient.
void check_case(const std::string& c, const CtcLossOptions& o, DType dt = DType::Float64, double tol = 1e-9) {
  SCOPED_TRACE(c + " in " + std::string(dtype_name(dt)));
  Tensor logits = G(c + ".logits").to(dt).clone().requires_grad_(true);
  Tensor out =
      ctc_loss(log_softmax(logits, -1), G(c + ".targets"), G(c + ".input_lengths"), G(c + ".target_lengths"), o);
  EXPECT_EQ(out.dtype(), dt);
  ASSERT_TRUE(tensors_near(out, G(c + ".out"), tol));
  if (!golden().has(c + ".dlogits")) return;
  sum(out * G(c + ".go").to(dt)).backward();
  EXPECT_TRUE(tensors_near(logits.grad(), G(c + ".dlogits"), tol));
}

TEST(CtcLoss, AgainstPyTorch) {
  check_case("padded_none", {.reduction = Reduction::None});
  check_case("padded_mean", {});
  check_case("padded_sum", {.reduction = Reduction::Sum});
  check_case("padded_mean", {}, DType::Float32, 2e-5);
  check_case("empty_target", {.reduction = Reduction::None});
  check_case("concat_blank_last", {.blank = 4, .reduction = Reduction::None});
  check_case("impossible_zero_inf", {.zero_infinity = true});
  check_case("unbatched", {.reduction = Reduction::Sum});
  // An alignment that cannot fit its input: an infinite loss, as PyTorch.
  Tensor lp = log_softmax(G("impossible.logits"), -1);
  Tensor out = ctc_loss(lp, G("impossible.targets"), G("impossible.input_lengths"), G("impossible.target_lengths"),
                        {.reduction = Reduction::None});
  EXPECT_TRUE(std::isinf(out.select(0, 0).item<double>()));
  EXPECT_TRUE(tensors_near(out.narrow(0, 1, 2), G("impossible.out").narrow(0, 1, 2), 1e-9));
}

TEST(CtcLoss, TheGradientIsTheDerivativeWithRespectToLogProbs) {
  // Not PyTorch's (which adds exp(log_probs), cancelled by log_softmax): the
  // derivative itself, against central differences, and its second derivatives
  // through the composite.
  manual_seed(31);
  const TensorOptions f64{DType::Float64};
  Tensor lp = log_softmax(randn({5, 2, 4}, f64), -1).detach().requires_grad_(true);
  const Tensor targets = tensor(std::vector<int64_t>{1, 1, 3, 2, 0, 0}, {2, 3});
  const Tensor il = tensor(std::vector<int64_t>{5, 4}, {2}), tl = tensor(std::vector<int64_t>{3, 1}, {2});
  auto f = [&](const std::vector<Tensor>& in) {
    return ctc_loss(in[0], targets, il, tl, {.reduction = Reduction::Sum});
  };
  const autograd::GradcheckResult r = autograd::gradcheck(f, {lp});
  EXPECT_TRUE(r.ok) << r.message;
  EXPECT_TRUE(testing::double_backward_check(f, {lp}, 1e-5, 1e-9));
  // frames past a sample's input length get no gradient
  Tensor loss = f({lp});
  loss.backward();
  EXPECT_TRUE(tensors_near(lp.grad().select(0, 4).select(0, 1), zeros({4}, f64), 0));
}

TEST(CtcLoss, ModuleEqualsTheFunction) {
  nn::CTCLoss loss({.blank = 4, .reduction = Reduction::Sum});
  const std::string c = "concat_blank_last";
  Tensor lp = log_softmax(G(c + ".logits"), -1);
  EXPECT_TRUE(tensors_near(loss(lp, G(c + ".targets"), G(c + ".input_lengths"), G(c + ".target_lengths")),
                           sum(G(c + ".out")), 1e-9));
}

TEST(CtcLoss, BadArgumentsAreRefusedByName) {
  const Tensor lp = log_softmax(randn({6, 2, 5}), -1);
  const Tensor tg = tensor(std::vector<int64_t>{1, 2, 3, 4}, {2, 2});
  const Tensor il = tensor(std::vector<int64_t>{6, 6}, {2}), tl = tensor(std::vector<int64_t>{2, 2}, {2});
  EXPECT_WEFT_ERROR(ctc_loss(lp, tg, tensor(std::vector<int64_t>{7, 6}, {2}), tl), "input_lengths[0] = 7");
  EXPECT_WEFT_ERROR(ctc_loss(lp, tg, il, tensor(std::vector<int64_t>{3, 2}, {2})),
                    "target_lengths[0] = 3 exceeds the padded targets' length 2");
  EXPECT_WEFT_ERROR(ctc_loss(lp, tensor(std::vector<int64_t>{1, 0, 3, 4}, {2, 2}), il, tl),
                    "target 0 of sample 0 must be a class in [0, C = 5) other than blank 0");
  EXPECT_WEFT_ERROR(ctc_loss(lp, tg, il, tl, {.blank = 5}), "blank 5 must be in [0, 5)");
  EXPECT_WEFT_ERROR(ctc_loss(lp, tg, tensor(std::vector<int64_t>{6}, {1}), tl),
                    "input_lengths must hold one value per sample (2)");
  EXPECT_WEFT_ERROR(ctc_loss(lp, tg.to(DType::Float32), il, tl), "targets must be int64 or int32");
}

}  // namespace
}  // namespace weft
