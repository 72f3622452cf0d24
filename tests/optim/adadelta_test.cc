// Adadelta against PyTorch's golden values (tools/golden/make_optim_golden.py),
// a hand-worked first step, a state dict round trip, and its errors.
#include "optim/adadelta.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "tests/optim/golden.h"
#include "tests/optim/golden_cases.h"

namespace weft::optim {
namespace {

using cases::check_case;
using cases::check_round_trip;
using cases::maker;
using testing::values;

TEST(OptimGolden, Adadelta) {
  check_case("adadelta", maker<Adadelta>(AdadeltaOptions{}));
  // Ascending takes p1[2] from -0.111 down to -0.036 and -0.024, where one or two ulps of its earlier
  // values (7.5e-9 each) are 3e-7 of the value (the largest difference, relative to the value itself, is
  // 1.1e-6, at -0.0017 in p0).
  constexpr double kThroughZero = 1.5e-6;
  check_case(
      "adadelta_wd_max",
      maker<Adadelta>(AdadeltaOptions{.lr = 0.5, .rho = 0.8, .eps = 1e-4, .weight_decay = 0.05, .maximize = true}),
      nullptr, kThroughZero);
}

TEST(Adadelta, HandWorkedFirstStepRoundTripAndErrors) {
  // First step: v = (1 - rho) g^2, delta = sqrt(eps) / sqrt(v + eps) * g, p -= lr * delta.
  Tensor p = tensor<double>({1.0, -2.0}, {2});
  p.requires_grad_(true);
  Adadelta opt({p}, AdadeltaOptions{.lr = 2.0, .rho = 0.5, .eps = 0.25});
  p.set_grad(tensor<double>({1.0, -3.0}, {2}));
  opt.step();
  const std::vector<double> v = values(p);
  EXPECT_NEAR(v[0], 1.0 - 2.0 * std::sqrt(0.25) / std::sqrt(0.5 * 1 + 0.25) * 1.0, 1e-15);
  EXPECT_NEAR(v[1], -2.0 - 2.0 * std::sqrt(0.25) / std::sqrt(0.5 * 9 + 0.25) * -3.0, 1e-15);
  const std::vector<double> u = values(opt.state(p).at("acc_delta"));
  const double d0 = std::sqrt(0.25) / std::sqrt(0.75);
  EXPECT_NEAR(u[0], 0.5 * d0 * d0, 1e-15);
  check_round_trip("adadelta", maker<Adadelta>(AdadeltaOptions{.lr = 0.5, .weight_decay = 0.01}));
  Tensor a = tensor({1.0f}, {1});
  a.requires_grad_(true);
  EXPECT_WEFT_ERROR(Adadelta({a}, AdadeltaOptions{.rho = 1.5}), "Adadelta: Invalid rho value: 1.5");
  EXPECT_WEFT_ERROR(Adadelta({a}, AdadeltaOptions{.lr = -1}), "Adadelta: Invalid learning rate: -1");
  EXPECT_WEFT_ERROR(Adadelta({a}, AdadeltaOptions{.eps = -1}), "Adadelta: Invalid epsilon value: -1");
  EXPECT_WEFT_ERROR(Adadelta({a}, AdadeltaOptions{.weight_decay = -1}), "Adadelta: Invalid weight_decay value: -1");
}

}  // namespace
}  // namespace weft::optim
