// The learning-rate schedulers against PyTorch's values (golden file from
// tools/golden/make_lr_scheduler_golden.py: lrs, OneCycleLR's cycled
// momentum, ReduceLROnPlateau's counters), hand-computed values, state dict
// round trips mid-schedule and every argument error.
#include "optim/lr_scheduler.h"

#include <cmath>
#include <limits>
#include <memory>
#include <numbers>

#include <gtest/gtest.h>

#include "optim/adam.h"
#include "optim/sgd.h"
#include "tests/optim/scheduler_cases.h"
#include "tests/testing.h"

namespace weft::optim {
namespace {

using namespace sched_testing;  // NOLINT(google-build-using-namespace)
using RP = ReduceLROnPlateauOptions;
constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(LRSchedulerGolden, StepLR) {
  TwoGroups t;
  StepLR s(*t.opt, 3, 0.1);
  check_golden("step", s, t);
}

TEST(LRSchedulerGolden, CosineAnnealingPastTMax) {
  TwoGroups t;
  CosineAnnealingLR s(*t.opt, 10, 0.001);
  check_golden("cosine", s, t);  // 35 epochs: down, up again, down
}

TEST(LRSchedulerGolden, LinearWarmupCosine) {
  TwoGroups t;
  LinearWarmupCosine s(*t.opt, 5, 20, 0.1, 1e-4);
  check_golden("warmcos", s, t);
}

TEST(LRSchedulerGolden, CosineAnnealingWarmRestarts) {
  TwoGroups t;
  CosineAnnealingWarmRestarts s(*t.opt, 4, 1, 0.002);
  check_golden("warm_restarts", s, t);  // 13 epochs: restarts at 4, 8 and 12
  TwoGroups u;
  CosineAnnealingWarmRestarts m(*u.opt, 3, 2, 0.001);
  check_golden("warm_restarts_mult", m, u);  // cycles of 3, 6 and 12: restarts at 3, 9 and 21
}

TEST(LRSchedulerGolden, PolynomialLR) {
  TwoGroups t;
  PolynomialLR s(*t.opt, 6, 2.0);
  check_golden("polynomial", s, t);  // 9 epochs: constant after total_iters
  TwoGroups u;
  PolynomialLR d(*u.opt);  // total_iters 5, power 1: linear to 0
  check_golden("polynomial_default", d, u);
  TwoGroups w;
  PolynomialLR q(*w.opt, 10, 0.5);
  check_golden("polynomial_sqrt", q, w);
}

TEST(LRSchedulerGolden, MultiStepLR) {
  TwoGroups t;
  MultiStepLR s(*t.opt, {2, 5, 5, 9}, 0.5);  // 5 twice: gamma ** 2 there
  check_golden("multistep", s, t);
  TwoGroups u;
  MultiStepLR zero(*u.opt, {3, 0});  // milestone 0 applies at construction; gamma 0.1 by default
  check_golden("multistep_zero", zero, u);
}

TEST(LRSchedulerGolden, ExponentialLR) {
  TwoGroups t;
  ExponentialLR s(*t.opt, 0.9);
  check_golden("exponential", s, t);
}

TEST(LRSchedulerGolden, LinearLR) {
  TwoGroups t;
  LinearLR s(*t.opt, 0.25, 0.9, 6);
  check_golden("linear", s, t);
  TwoGroups u;
  LinearLR defaults(*u.opt);
  check_golden("linear_default", defaults, u);
  TwoGroups w;
  LinearLR down(*w.opt, 1.0, 0.0, 4);
  check_golden("linear_down", down, w);
}

TEST(LRSchedulerGolden, ConstantLR) {
  TwoGroups t;
  ConstantLR s(*t.opt, 0.5, 4);
  check_golden("constant", s, t);
  TwoGroups u;
  ConstantLR defaults(*u.opt);
  check_golden("constant_default", defaults, u);
}

TEST(LRSchedulerGolden, LambdaLR) {
  TwoGroups t;
  LambdaLR s(*t.opt, [](int64_t e) { return std::pow(0.95, static_cast<double>(e)); });
  check_golden("lambda", s, t);
  TwoGroups u;
  LambdaLR per_group(*u.opt, std::vector<LRLambda>{[](int64_t e) { return 1.0 / static_cast<double>(e + 1); },
                                                   [](int64_t e) { return 0.5 * static_cast<double>(e) + 1.0; }});
  check_golden("lambda_per_group", per_group, u);
}

TEST(LRSchedulerGolden, MultiplicativeLR) {
  TwoGroups t;
  MultiplicativeLR s(*t.opt, [](int64_t) { return 0.9; });
  check_golden("multiplicative", s, t);
  TwoGroups u;
  MultiplicativeLR per_group(*u.opt,
                             std::vector<LRLambda>{[](int64_t) { return 0.9; },
                                                   [](int64_t e) { return 1.0 - 0.01 * static_cast<double>(e); }});
  check_golden("multiplicative_per_group", per_group, u);
}

TEST(LRSchedulerGolden, OneCycleLRWithSGDMomentum) {
  TwoGroups t(Kind::kSgdMomentum);
  OneCycleLR s(*t.opt, {1.0, 0.3}, 20);  // stepped to total_steps itself, as PyTorch allows
  check_golden("onecycle_cos_sgd", s, t, "momentum");
  TwoGroups u(Kind::kSgdMomentum);
  OneCycleLR linear(
      *u.opt, 0.5, 17,
      {.pct_start = 0.25, .anneal_strategy = AnnealStrategy::kLinear, .div_factor = 10, .final_div_factor = 100});
  check_golden("onecycle_linear_sgd", linear, u, "momentum");
  TwoGroups w(Kind::kSgdMomentum);
  OneCycleLR fixed(*w.opt, 0.4, 10, {.cycle_momentum = false});
  check_golden("onecycle_no_momentum", fixed, w, "momentum");  // stays 0.9
  EXPECT_TRUE(fixed.get_last_momentum().empty());
}

TEST(LRSchedulerGolden, OneCycleLRThreePhaseWithAdamBeta1) {
  TwoGroups t(Kind::kAdam);
  OneCycleLR s(*t.opt, {0.01, 0.004}, 24, {.base_momentum = 0.8, .max_momentum = 0.9, .three_phase = true});
  check_golden("onecycle_three_phase_adam", s, t, "beta1");
  EXPECT_EQ(t.option(0, "beta2"), 0.999);  // beta2 untouched
  TwoGroups u(Kind::kAdam);
  OneCycleLR linear(*u.opt, 0.02, 15,
                    {.pct_start = 0.4,
                     .anneal_strategy = AnnealStrategy::kLinear,
                     .base_momentum = {0.85, 0.8},
                     .max_momentum = {0.95, 0.9},
                     .three_phase = true});
  check_golden("onecycle_three_phase_linear_adam", linear, u, "beta1");
}

TEST(LRSchedulerGolden, ReduceLROnPlateau) {
  {
    TwoGroups t;
    ReduceLROnPlateau s(*t.opt, {.factor = 0.5, .patience = 2, .threshold = 0.1});
    check_golden("plateau_min_rel", s, t);
  }
  {
    TwoGroups t;
    ReduceLROnPlateau s(*t.opt, {.factor = 0.3,
                                 .patience = 1,
                                 .threshold = 0.05,
                                 .threshold_mode = RP::ThresholdMode::kAbs,
                                 .cooldown = 2,
                                 .min_lr = {0.01, 0.005}});
    check_golden("plateau_min_abs_cooldown", s, t);
  }
  {
    TwoGroups t;
    ReduceLROnPlateau s(*t.opt,
                        {.mode = RP::Mode::kMax, .factor = 0.7, .patience = 0, .threshold = 0.01, .min_lr = 0.02});
    check_golden("plateau_max_rel", s, t);
  }
  {
    TwoGroups t;
    ReduceLROnPlateau s(*t.opt, {.mode = RP::Mode::kMax,
                                 .factor = 0.5,
                                 .patience = 1,
                                 .threshold = 0.0,
                                 .threshold_mode = RP::ThresholdMode::kAbs,
                                 .cooldown = 1,
                                 .eps = 0.01});
    check_golden("plateau_max_abs_eps", s, t);
  }
  {
    TwoGroups t;
    ReduceLROnPlateau s(*t.opt);
    check_golden("plateau_default", s, t);
  }
}

// ---- hand-computed values ----

TEST(LRScheduler, HandComputedValues) {
  TwoGroups t;
  LinearWarmupCosine s(*t.opt, 4, 12, 0.2, 0.0);
  EXPECT_NEAR(s.get_last_lr()[0], 0.02, 1e-15);
  for (int e = 1; e <= 4; ++e) {
    s.step();
    EXPECT_NEAR(s.get_last_lr()[0], 0.1 * (0.2 + 0.8 * e / 4.0), 1e-15) << e;
  }
  for (int e = 5; e <= 12; ++e) {
    s.step();
    double c = 0.1 * (1 + std::cos(std::numbers::pi * (e - 4) / 8.0)) / 2;
    EXPECT_NEAR(s.get_last_lr()[0], c, 1e-15) << e;
  }
  TwoGroups u;
  StepLR st(*u.opt, 2, 0.5);
  for (int e = 1; e <= 5; ++e) st.step();
  EXPECT_NEAR(st.get_last_lr()[1], 0.03 * 0.25, 1e-16);
  TwoGroups w;
  LinearWarmupCosine nowarm(*w.opt, 0, 4, 0.5, 0.0);
  EXPECT_EQ(nowarm.get_last_lr()[0], 0.1);
  nowarm.step();
  nowarm.step();
  EXPECT_NEAR(nowarm.get_last_lr()[0], 0.05, 1e-15);
}

TEST(LRScheduler, HandComputedEpochSchedules) {
  {  // MultiStepLR: a repeated milestone counts twice
    TwoGroups t;
    MultiStepLR s(*t.opt, {4, 2, 2}, 0.5);
    const double expected[] = {0.1, 0.1, 0.025, 0.025, 0.0125, 0.0125};
    for (int e = 0; e < 6; ++e) {
      if (e > 0) s.step();
      EXPECT_NEAR(s.get_last_lr()[0], expected[e], 1e-16) << e;
    }
  }
  {  // ExponentialLR: base * gamma^e
    TwoGroups t;
    ExponentialLR s(*t.opt, 0.5);
    for (int e = 1; e <= 4; ++e) s.step();
    EXPECT_NEAR(s.get_last_lr()[1], 0.03 / 16, 1e-17);
  }
  {  // LinearLR: base * (start + (end - start) * min(e, T) / T)
    TwoGroups t;
    LinearLR s(*t.opt, 0.5, 1.0, 4);
    for (int e = 0; e <= 6; ++e) {
      if (e > 0) s.step();
      EXPECT_NEAR(s.get_last_lr()[0], 0.1 * (0.5 + 0.5 * std::min(e, 4) / 4.0), 1e-15) << e;
    }
  }
  {  // ConstantLR: base * factor before total_iters, base from then on
    TwoGroups t;
    ConstantLR s(*t.opt, 0.25, 3);
    for (int e = 0; e <= 5; ++e) {
      if (e > 0) s.step();
      EXPECT_NEAR(s.get_last_lr()[1], e < 3 ? 0.0075 : 0.03, 1e-16) << e;
    }
  }
  {  // LambdaLR: base * f(e); MultiplicativeLR: the product of f(1..e)
    TwoGroups t, u;
    LambdaLR l(*t.opt, [](int64_t e) { return 1.0 / static_cast<double>(1 + e * e); });
    MultiplicativeLR m(*u.opt, [](int64_t e) { return static_cast<double>(e); });
    for (int e = 1; e <= 3; ++e) {
      l.step();
      m.step();
    }
    EXPECT_NEAR(l.get_last_lr()[0], 0.1 / 10, 1e-16);
    EXPECT_NEAR(m.get_last_lr()[0], 0.1 * 6, 1e-15);  // 1 * 2 * 3
  }
}

TEST(LRScheduler, HandComputedOneCycle) {
  // Linear, two phases, total 10, pct_start 0.3: the lr rises over steps 0..2
  // (end step 0.3 * 10 - 1 = 2) from max/25 to max, then falls over 2..9 to
  // max/25/1e4; the momentum the other way between 0.95 and 0.85.
  TwoGroups t(Kind::kSgd);
  OneCycleLR s(*t.opt, 1.0, 10, {.anneal_strategy = AnnealStrategy::kLinear});
  const double initial = 1.0 / 25, min = initial / 1e4;
  EXPECT_EQ(s.base_lrs(), (std::vector<double>{initial, initial}));
  for (int e = 0; e <= 10; ++e) {
    if (e > 0) s.step();
    const double pct = e <= 2 ? e / 2.0 : (e - 2) / 7.0;
    const double lr = e <= 2 ? initial + (1.0 - initial) * pct : 1.0 + (min - 1.0) * pct;
    const double m = e <= 2 ? 0.95 - 0.1 * pct : 0.85 + 0.1 * pct;
    EXPECT_NEAR(s.get_last_lr()[1], lr, 1e-14) << e;
    EXPECT_NEAR(t.option(1, "momentum"), m, 1e-14) << e;
  }
  // Cosine: the same end points; halfway through the rise, the mean of both.
  TwoGroups u(Kind::kAdam);
  OneCycleLR c(*u.opt, 2.0, 21, {.pct_start = 0.4});  // phase 1 ends at step 7.4
  EXPECT_NEAR(c.get_last_lr()[0], 2.0 / 25, 1e-15);
  EXPECT_NEAR(u.option(0, "beta1"), 0.95, 1e-15);
  for (int e = 1; e <= 20; ++e) c.step();  // step 20 = total_steps - 1: the min lr
  EXPECT_NEAR(c.get_last_lr()[0], 2.0 / 25 / 1e4, 1e-18);
  EXPECT_NEAR(u.option(0, "beta1"), 0.95, 1e-15);
}

TEST(LRScheduler, HandComputedPlateau) {
  TwoGroups t;
  ReduceLROnPlateau s(*t.opt, {.factor = 0.5, .patience = 1, .cooldown = 1, .min_lr = 0.03});
  EXPECT_EQ(s.last_epoch(), 0);
  EXPECT_EQ(s.get_last_lr(), (std::vector<double>{0.1, 0.03}));
  EXPECT_EQ(s.best(), kInf);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  s.step(nan);  // NaN is not better than +inf: a bad epoch
  EXPECT_EQ(s.best(), kInf);
  EXPECT_EQ(s.num_bad_epochs(), 1);
  s.step(1.0);  // better
  EXPECT_EQ(s.best(), 1.0);
  EXPECT_EQ(s.num_bad_epochs(), 0);
  s.step(1.0);  // within the 1e-4 relative threshold: bad
  EXPECT_EQ(s.get_last_lr()[0], 0.1);
  s.step(nan);  // 2 bad > patience 1: halve; group 1 is at its floor 0.03 and stays
  EXPECT_EQ(s.get_last_lr(), (std::vector<double>{0.05, 0.03}));
  EXPECT_EQ(s.cooldown_counter(), 1);
  s.step(2.0);  // bad but in cooldown: not counted
  EXPECT_EQ(s.num_bad_epochs(), 0);
  EXPECT_EQ(s.cooldown_counter(), 0);
  s.step(2.0);
  s.step(2.0);
  EXPECT_EQ(s.get_last_lr(), (std::vector<double>{0.03, 0.03}));  // 0.025 floored at 0.03
  EXPECT_EQ(s.last_epoch(), 7);
  EXPECT_EQ(t.lr(0), 0.03);
}

// ---- state dicts ----

TEST(LRScheduler, StateDictRoundTrip) {
  round_trip(
      Kind::kSgd, [](Optimizer& o) { return std::make_unique<CosineAnnealingLR>(o, 7, 0.01); }, plain_step, 3, 4);
  round_trip(
      Kind::kSgd,
      [](Optimizer& o) {
        return std::make_unique<MultiStepLR>(o, std::vector<int64_t>{2, 4, 4});
      },
      plain_step, 3, 3);
  round_trip(
      Kind::kSgd, [](Optimizer& o) { return std::make_unique<LinearLR>(o, 0.2, 0.7, 6); }, plain_step, 2, 6);
  round_trip(
      Kind::kSgd, [](Optimizer& o) { return std::make_unique<ConstantLR>(o, 0.4, 3); }, plain_step, 1, 4);
  round_trip(
      Kind::kSgd,
      [](Optimizer& o) { return std::make_unique<MultiplicativeLR>(o, [](int64_t e) { return 1.0 / (1.0 + e); }); },
      plain_step, 2, 3);
}

TEST(LRScheduler, WarmRestartsAndPolynomialHandComputedAndRoundTrip) {
  // T_0 = 2, T_mult = 3: cycles of 2 and 6 epochs, restarts at epochs 2 and 8.
  TwoGroups t;
  CosineAnnealingWarmRestarts s(*t.opt, 2, 3);
  const double pi = std::acos(-1.0);
  const std::vector<std::pair<int, int>> cur_and_len = {{0, 2}, {1, 2}, {0, 6}, {1, 6},  {2, 6},
                                                        {3, 6}, {4, 6}, {5, 6}, {0, 18}, {1, 18}};
  for (size_t e = 0; e < cur_and_len.size(); ++e) {
    if (e > 0) s.step();
    const auto [cur, len] = cur_and_len[e];
    expect_rel(t.lr(0), 0.1 * (1 + std::cos(pi * cur / len)) / 2, "epoch " + std::to_string(e));
  }
  // (1 - e / 4) ** 3 times the base lr, then constant at 0.
  TwoGroups u;
  PolynomialLR p(*u.opt, 4, 3.0);
  for (int e = 0; e <= 6; ++e) {
    if (e > 0) p.step();
    const double f = e <= 4 ? std::pow(1.0 - e / 4.0, 3.0) : 0.0;
    EXPECT_NEAR(u.lr(1), 0.03 * f, 1e-15) << "epoch " << e;
  }
  round_trip(
      Kind::kSgd, [](Optimizer& o) { return std::make_unique<CosineAnnealingWarmRestarts>(o, 3, 2, 0.01); }, plain_step,
      5, 8);
  round_trip(
      Kind::kSgd, [](Optimizer& o) { return std::make_unique<PolynomialLR>(o, 8, 1.5); }, plain_step, 3, 7);
  EXPECT_WEFT_ERROR(CosineAnnealingWarmRestarts(*t.opt, 0),
                    "CosineAnnealingWarmRestarts: Expected positive integer T_0, but got 0");
  EXPECT_WEFT_ERROR(CosineAnnealingWarmRestarts(*t.opt, 4, 0),
                    "CosineAnnealingWarmRestarts: Expected integer T_mult >= 1, but got 0");
  EXPECT_WEFT_ERROR(PolynomialLR(*u.opt, -1), "PolynomialLR: total_iters must be >= 0, got -1");
}

TEST(LRScheduler, OneCycleStateDictRoundTripRestoresTheMomentum) {
  auto make = [](Optimizer& o) {
    return std::make_unique<OneCycleLR>(o, PerGroup{0.5, 0.2}, 16, OneCycleLROptions{.three_phase = true});
  };
  round_trip(Kind::kSgdMomentum, make, plain_step, 5, 11, "momentum");  // to total_steps
  round_trip(Kind::kAdam, make, plain_step, 9, 4, "beta1");
  // The saved state holds PyTorch's per-group values; loading restores them
  // and the last momentum at once (a fresh optimizer's beta1 is replaced).
  TwoGroups t(Kind::kAdam);
  OneCycleLR a(*t.opt, {0.5, 0.2}, 16);
  for (int i = 0; i < 6; ++i) a.step();
  SchedulerStateDict sd = a.state_dict();
  EXPECT_EQ(sd.at("max_lrs").select(0, 1).item<double>(), 0.2);
  EXPECT_EQ(sd.at("base_lrs").select(0, 1).item<double>(), 0.2 / 25);
  EXPECT_EQ(sd.at("min_lrs").select(0, 1).item<double>(), 0.2 / 25 / 1e4);
  EXPECT_EQ(sd.at("base_momentums").select(0, 0).item<double>(), 0.85);
  EXPECT_EQ(sd.at("max_momentums").select(0, 0).item<double>(), 0.95);
  TwoGroups u(Kind::kAdam);
  OneCycleLR b(*u.opt, 0.9, 16);  // another max_lr: the loaded one wins, as PyTorch's groups
  b.load_state_dict(sd);
  EXPECT_EQ(u.option(1, "beta1"), t.option(1, "beta1"));
  EXPECT_EQ(b.get_last_momentum(), a.get_last_momentum());
  a.step();
  b.step();
  EXPECT_EQ(b.get_last_lr(), a.get_last_lr());
  // Without cycle_momentum the momentum keys are unexpected.
  TwoGroups w(Kind::kAdam);
  OneCycleLR c(*w.opt, 0.5, 16, {.cycle_momentum = false});
  EXPECT_WEFT_ERROR(c.load_state_dict(sd), "unexpected key 'base_momentums'");
  EXPECT_EQ(c.state_dict().count("last_momentums"), 0u);
}

TEST(LRScheduler, PlateauStateDictRoundTrip) {
  const double metrics[] = {1.0, 0.9, 0.95, 0.97, 0.9, 0.99, 0.85, 0.86, 0.87, 0.88, 0.89, 0.9, 0.8, 0.81};
  auto make = [](Optimizer& o) {
    return std::make_unique<ReduceLROnPlateau>(o, RP{.factor = 0.5, .patience = 1, .cooldown = 2});
  };
  auto step = [&](ReduceLROnPlateau& s, int i) { s.step(metrics[i - 1]); };
  for (int k : {0, 3, 5, 8}) round_trip(Kind::kSgd, make, step, k, 14 - k);
  // The counters travel in the state dict.
  TwoGroups t;
  auto s = make(*t.opt);
  for (int i = 1; i <= 5; ++i) step(*s, i);
  const SchedulerStateDict sd = s->state_dict();
  EXPECT_EQ(sd.at("best").item<double>(), 0.9);
  EXPECT_EQ(sd.at("cooldown_counter").item<int64_t>(), s->cooldown_counter());
  EXPECT_EQ(sd.at("num_bad_epochs").item<int64_t>(), s->num_bad_epochs());
  TwoGroups u;
  ReduceLROnPlateau fresh(*u.opt);
  EXPECT_EQ(fresh.state_dict().at("best").item<double>(), kInf);
}

// ---- errors ----

TEST(LRScheduler, Errors) {
  TwoGroups t;
  EXPECT_WEFT_ERROR(StepLR(*t.opt, 0), "step_size must be positive, got 0");
  EXPECT_WEFT_ERROR(CosineAnnealingLR(*t.opt, 0), "T_max must be positive, got 0");
  EXPECT_WEFT_ERROR(LinearWarmupCosine(*t.opt, 5, 5), "total_steps (5) must be greater than warmup_steps (5)");
  EXPECT_WEFT_ERROR(LinearWarmupCosine(*t.opt, 2, 5, 0.0), "Starting multiplicative factor");
  EXPECT_WEFT_ERROR(LinearLR(*t.opt, 0.0),
                    "LinearLR: Starting multiplicative factor expected to be greater than 0 and less or equal to 1, "
                    "got 0");
  EXPECT_WEFT_ERROR(LinearLR(*t.opt, 1.5), "got 1.5");
  EXPECT_WEFT_ERROR(LinearLR(*t.opt, 0.5, -0.25),
                    "LinearLR: Ending multiplicative factor expected to be between 0 and 1, got -0.25");
  EXPECT_WEFT_ERROR(LinearLR(*t.opt, 0.5, 1.25), "got 1.25");
  EXPECT_WEFT_ERROR(ConstantLR(*t.opt, 1.5),
                    "ConstantLR: Constant multiplicative factor expected to be between 0 and 1, got 1.5");
  EXPECT_WEFT_ERROR(ConstantLR(*t.opt, -0.5), "got -0.5");
  EXPECT_EQ(t.lr(0), 0.1);  // a refused scheduler leaves the lrs alone
  LRLambda f = [](int64_t) { return 1.0; };
  EXPECT_WEFT_ERROR(LambdaLR(*t.opt, std::vector<LRLambda>{f, f, f}), "LambdaLR: Expected 2 lr_lambdas, but got 3");
  EXPECT_WEFT_ERROR(MultiplicativeLR(*t.opt, std::vector<LRLambda>{f}),
                    "MultiplicativeLR: Expected 2 lr_lambdas, but got 1");
  EXPECT_WEFT_ERROR(LambdaLR(*t.opt, LRLambda{}), "LambdaLR: lr_lambda should be a function, but got an empty");
  EXPECT_WEFT_ERROR(MultiplicativeLR(*t.opt, std::vector<LRLambda>{f, LRLambda{}}),
                    "lr_lambda should be a function, but got an empty std::function (param group 1)");

  // The base's load checks.
  StepLR s(*t.opt, 2);
  auto sd = s.state_dict();
  sd["base_lrs"] = tensor<double>({0.1}, {1});
  EXPECT_WEFT_ERROR(s.load_state_dict(sd), "'base_lrs' has shape [1]");
  sd = s.state_dict();
  sd.erase("last_epoch");
  EXPECT_WEFT_ERROR(s.load_state_dict(sd), "missing 'last_epoch'");
  sd = s.state_dict();
  sd["best"] = scalar_tensor(1.0, TensorOptions{DType::Float64});
  EXPECT_WEFT_ERROR(s.load_state_dict(sd), "unexpected key 'best'");
  sd = s.state_dict();
  sd["last_epoch"] = scalar_tensor(2.5, TensorOptions{DType::Float64});
  EXPECT_WEFT_ERROR(s.load_state_dict(sd), "last_epoch must be one integer");
}

TEST(LRScheduler, ConstantFactorZeroCannotBeUndone) {
  TwoGroups t;
  ConstantLR s(*t.opt, 0.0, 2);
  s.step();
  EXPECT_EQ(s.get_last_lr()[0], 0.0);
  EXPECT_WEFT_ERROR(s.step(), "factor 0 cannot be undone at epoch total_iters (2)");
  EXPECT_EQ(s.last_epoch(), 1);  // the failed step changed nothing
}

TEST(LRScheduler, OneCycleErrors) {
  TwoGroups t(Kind::kSgdMomentum);
  EXPECT_WEFT_ERROR(OneCycleLR(*t.opt, 0.1, 0), "OneCycleLR: Expected positive integer total_steps, but got 0");
  EXPECT_WEFT_ERROR(OneCycleLR(*t.opt, 0.1, 10, {.pct_start = 1.5}),
                    "OneCycleLR: Expected float between 0 and 1 pct_start, but got 1.5");
  EXPECT_WEFT_ERROR(OneCycleLR(*t.opt, 0.1, 10, {.pct_start = -0.1}), "but got -0.1");
  EXPECT_WEFT_ERROR(OneCycleLR(*t.opt, {0.1, 0.2, 0.3}, 10),
                    "OneCycleLR: max_lr must have the same length as optimizer.param_groups. max_lr has 3 values, "
                    "param_groups has 2.");
  EXPECT_WEFT_ERROR(OneCycleLR(*t.opt, 0.1, 10, {.base_momentum = {0.8}}),
                    "base_momentum has 1 values, param_groups has 2");
  EXPECT_WEFT_ERROR(OneCycleLR(*t.opt, 0.1, 10, {.max_momentum = {0.9, 0.9, 0.9}}),
                    "max_momentum has 3 values, param_groups has 2");
  EXPECT_WEFT_ERROR(OneCycleLR(*t.opt, 0.1, 10, {.div_factor = 0}), "div_factor must be positive");
  EXPECT_WEFT_ERROR(OneCycleLR(*t.opt, 0.1, 10, {.final_div_factor = -2}),
                    "final_div_factor must be positive (the min lr is the initial lr / final_div_factor), got -2");
  // pct_start * total_steps == 1: phase 1 runs from step 0 to step 0 (PyTorch: ZeroDivisionError).
  EXPECT_WEFT_ERROR(OneCycleLR(*t.opt, 0.1, 10, {.pct_start = 0.1}),
                    "step 0 falls in phase 1 of 2, which has no length");
  EXPECT_EQ(t.option(0, "momentum"), 0.9);  // refused before anything changed
  EXPECT_EQ(t.lr(1), 0.03);

  TwoGroups plain(Kind::kLrOnly);
  EXPECT_WEFT_ERROR(OneCycleLR(*plain.opt, 0.1, 10),
                    "OneCycleLR: optimizer must support momentum or beta1 with `cycle_momentum` option enabled "
                    "(LrOnly has neither");
  OneCycleLR no_momentum(*plain.opt, 0.1, 10, {.cycle_momentum = false});  // fine without cycling

  // Stepping past total_steps; the failed step changes nothing.
  OneCycleLR s(*t.opt, 0.1, 4);
  for (int i = 0; i < 4; ++i) s.step();
  const std::vector<double> last = s.get_last_lr();
  EXPECT_WEFT_ERROR(s.step(), "OneCycleLR: Tried to step 5 times. The specified number of total steps is 4");
  EXPECT_EQ(s.last_epoch(), 4);
  EXPECT_EQ(s.get_last_lr(), last);
  EXPECT_EQ(t.lr(0), last[0]);

  auto sd = s.state_dict();
  sd["max_lrs"] = tensor<double>({0.1, 0.1, 0.1}, {3});
  EXPECT_WEFT_ERROR(s.load_state_dict(sd), "'max_lrs' has shape [3]");
  sd = s.state_dict();
  sd.erase("last_momentums");
  EXPECT_WEFT_ERROR(s.load_state_dict(sd), "missing 'last_momentums'");
}

TEST(LRScheduler, PlateauErrors) {
  TwoGroups t;
  EXPECT_WEFT_ERROR(ReduceLROnPlateau(*t.opt, {.factor = 1.0}), "ReduceLROnPlateau: Factor should be < 1.0, got 1");
  EXPECT_WEFT_ERROR(ReduceLROnPlateau(*t.opt, {.min_lr = {0.1, 0.2, 0.3}}),
                    "ReduceLROnPlateau: expected 2 min_lrs, got 3");
  EXPECT_WEFT_ERROR(ReduceLROnPlateau(*t.opt, {.patience = -1}), "patience must be >= 0, got -1");
  EXPECT_WEFT_ERROR(ReduceLROnPlateau(*t.opt, {.cooldown = -3}), "cooldown must be >= 0, got -3");
  ReduceLROnPlateau s(*t.opt);
  EXPECT_WEFT_ERROR(s.step(), "ReduceLROnPlateau.step: needs the metric it watches; call step(metric)");
  LRScheduler& base = s;
  EXPECT_WEFT_ERROR(base.step(), "needs the metric");
  EXPECT_EQ(s.last_epoch(), 0);
  auto sd = s.state_dict();
  sd.erase("best");
  EXPECT_WEFT_ERROR(s.load_state_dict(sd), "missing 'best'");
  sd = s.state_dict();
  sd["num_bad_epochs"] = scalar_tensor(int64_t{-1}, TensorOptions{DType::Int64});
  EXPECT_WEFT_ERROR(s.load_state_dict(sd), "num_bad_epochs must be one integer >= 0");
  sd = s.state_dict();
  sd["best"] = tensor<double>({1.0, 2.0}, {2});
  EXPECT_WEFT_ERROR(s.load_state_dict(sd), "best must be one floating-point value, got shape [2]");
  EXPECT_EQ(s.best(), kInf);  // refused loads changed nothing
}

}  // namespace
}  // namespace weft::optim
