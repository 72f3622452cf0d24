// RAdam and Adamax against PyTorch's golden values (tools/golden/make_optim_golden.py),
// hand-worked first steps, state dict round trips, and their hyper-parameter errors.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "optim/adamax.h"
#include "optim/radam.h"
#include "tests/optim/golden.h"
#include "tests/optim/golden_cases.h"

namespace weft::optim {
namespace {

using cases::check_case;
using cases::check_round_trip;
using cases::maker;
using testing::values;

TEST(OptimGolden, RAdam) {
  // beta2 0.999 (and 0.9): rho_t passes 5 only at the sixth step, so steps 1-5 take the
  // un-adapted branch and step 6 the rectified adaptive one.
  check_case("radam", maker<RAdam>(RAdamOptions{.lr = 0.01}));
  check_case("radam_wd", maker<RAdam>(RAdamOptions{.lr = 0.02, .beta1 = 0.8, .beta2 = 0.9, .weight_decay = 0.05}));
  check_case("radam_decoupled",
             maker<RAdam>(RAdamOptions{.lr = 0.02, .beta2 = 0.9, .weight_decay = 0.1, .decoupled_weight_decay = true}));
}

TEST(OptimGolden, Adamax) {
  check_case("adamax", maker<Adamax>(AdamaxOptions{.lr = 0.02}));
  check_case("adamax_wd_max",
             maker<Adamax>(AdamaxOptions{
                 .lr = 0.01, .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-3, .weight_decay = 0.05, .maximize = true}));
}

TEST(RAdamAdamax, HandWorkedFirstSteps) {
  // RAdam's first step: rho_1 = 1 <= 5 and m / (1 - beta1) = g, so p -= lr * g.
  Tensor p = tensor<double>({1.0, -2.0, 0.5}, {3});
  p.requires_grad_(true);
  RAdam radam({p}, RAdamOptions{.lr = 0.1});
  p.set_grad(tensor<double>({0.5, -1.0, 2.0}, {3}));
  radam.step();
  EXPECT_EQ(values(p), (std::vector<double>{0.95, -1.9, 0.3}));
  // Adamax's first step: m = (1 - beta1) g, u = |g| + eps, so p -= lr * g / (|g| + eps).
  Tensor q = tensor<double>({1.0, -2.0, 0.5}, {3});
  q.requires_grad_(true);
  Adamax adamax({q}, AdamaxOptions{.lr = 0.1, .eps = 0.5});
  q.set_grad(tensor<double>({0.5, -1.0, 2.0}, {3}));
  adamax.step();
  const std::vector<double> v = values(q);
  EXPECT_NEAR(v[0], 1.0 - 0.1 * 0.5 / 1.0, 1e-15);
  EXPECT_NEAR(v[1], -2.0 + 0.1 * 1.0 / 1.5, 1e-15);
  EXPECT_NEAR(v[2], 0.5 - 0.1 * 2.0 / 2.5, 1e-15);
  EXPECT_EQ(adamax.state(q).size(), 3u);  // step, exp_avg, exp_inf
}

TEST(RAdamAdamax, StateDictRoundTripsContinueIdentically) {
  check_round_trip("radam", maker<RAdam>(RAdamOptions{.lr = 0.01, .beta2 = 0.9, .weight_decay = 0.02}));
  check_round_trip("adamax", maker<Adamax>(AdamaxOptions{.lr = 0.01, .weight_decay = 0.01}));
}

TEST(RAdamAdamax, BadHyperParameters) {
  Tensor a = tensor({1.0f}, {1});
  a.requires_grad_(true);
  EXPECT_WEFT_ERROR(RAdam({a}, RAdamOptions{.lr = -1}), "RAdam: Invalid learning rate: -1");
  EXPECT_WEFT_ERROR(RAdam({a}, RAdamOptions{.beta2 = 1.0}), "RAdam: Invalid beta parameter at index 1: 1");
  EXPECT_WEFT_ERROR(RAdam({ParamGroup({a}, {{"decoupled_weight_decay", 0.5}})}, RAdamOptions{}),
                    "RAdam: decoupled_weight_decay must be 0 or 1, got 0.5");
  EXPECT_WEFT_ERROR(Adamax({a}, AdamaxOptions{.eps = -1}), "Adamax: Invalid epsilon value: -1");
  EXPECT_WEFT_ERROR(Adamax({a}, AdamaxOptions{.beta1 = -0.1}), "Adamax: Invalid beta parameter at index 0: -0.1");
  EXPECT_WEFT_ERROR(Adamax({a}, AdamaxOptions{.weight_decay = -2}), "Adamax: Invalid weight_decay value: -2");
  EXPECT_WEFT_ERROR(Adamax({ParamGroup({a}, {{"maximize", 2.0}})}, AdamaxOptions{}),
                    "Adamax: maximize must be 0 or 1, got 2");
}

}  // namespace
}  // namespace weft::optim
