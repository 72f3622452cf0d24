// CyclicLR, SequentialLR and ChainedScheduler against PyTorch's values (golden
// file from tools/golden/make_lr_scheduler_golden.py), the groups' initial_lr,
// state dict round trips across milestones, steps and loads that fail without
// changing anything, and the argument errors.
#include "optim/lr_scheduler_composite.h"

#include <cmath>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "optim/lr_scheduler.h"
#include "tests/optim/scheduler_cases.h"
#include "tests/testing.h"

namespace weft::optim {
namespace {

using namespace sched_testing;  // NOLINT(google-build-using-namespace)
using std::make_shared;

// ---- CyclicLR ----

TEST(CyclicLRGolden, TriangularWithSGDMomentum) {
  TwoGroups t(Kind::kSgdMomentum);
  CyclicLR s(*t.opt, {0.01, 0.002}, {0.1, 0.02}, {.step_size_up = 3});
  check_golden("cyclic_triangular_sgd", s, t, "momentum");
}

TEST(CyclicLRGolden, Triangular2WithALongerWayDown) {
  TwoGroups t;
  CyclicLR s(*t.opt, 0.001, 0.01,
             {.step_size_up = 2, .step_size_down = 4, .mode = CyclicMode::kTriangular2, .cycle_momentum = false});
  check_golden("cyclic_triangular2_down", s, t);
  EXPECT_TRUE(s.get_last_momentum().empty());
  EXPECT_EQ(t.option(0, "momentum"), 0.0);  // SGD's, left alone
}

TEST(CyclicLRGolden, ExpRangeWithAdamBeta1) {
  TwoGroups t(Kind::kAdam);
  CyclicLR s(*t.opt, 0.001, {0.006, 0.004},
             {.step_size_up = 4,
              .mode = CyclicMode::kExpRange,
              .gamma = 0.95,
              .base_momentum = 0.85,
              .max_momentum = {0.95, 0.9}});
  check_golden("cyclic_exp_range_adam", s, t, "beta1");
}

TEST(CyclicLRGolden, CustomScaleFunctions) {
  {
    TwoGroups t;
    CyclicLR s(*t.opt, 0.002, 0.02,
               {.step_size_up = 3,
                .step_size_down = 1,
                .scale_fn = [](double x) { return 1.0 / (1.0 + 0.1 * x); },
                .scale_mode = CyclicScaleMode::kIterations,
                .cycle_momentum = false});
    check_golden("cyclic_scale_fn_iterations", s, t);
  }
  {
    TwoGroups t;
    CyclicLR s(*t.opt, 0.002, 0.02,
               {.step_size_up = 2, .scale_fn = [](double c) { return std::pow(0.5, c); }, .cycle_momentum = false});
    check_golden("cyclic_scale_fn_cycle", s, t);
  }
  {
    TwoGroups t;
    CyclicLR s(*t.opt, 0.01, 0.05, {.step_size_up = 3, .step_size_down = 0, .cycle_momentum = false});
    check_golden("cyclic_down_zero", s, t);
  }
}

TEST(CyclicLR, HandComputedTriangle) {
  // base 0.1, max 0.5, up 2, down 2: 0.1, 0.3, 0.5, 0.3, 0.1, 0.3, ...; the
  // momentum the other way between 0.9 and 0.8.
  TwoGroups t(Kind::kSgdMomentum);
  CyclicLR s(*t.opt, 0.1, 0.5, {.step_size_up = 2});
  const double lrs[] = {0.1, 0.3, 0.5, 0.3, 0.1, 0.3, 0.5};
  const double moms[] = {0.9, 0.85, 0.8, 0.85, 0.9, 0.85, 0.8};
  for (int e = 0; e < 7; ++e) {
    if (e > 0) s.step();
    EXPECT_NEAR(t.lr(1), lrs[e], 1e-15) << e;
    EXPECT_NEAR(t.option(1, "momentum"), moms[e], 1e-15) << e;
  }
  EXPECT_EQ(s.base_lrs(), (std::vector<double>{0.1, 0.1}));
}

TEST(CyclicLR, Errors) {
  TwoGroups t;
  EXPECT_WEFT_ERROR(CyclicLR(*t.opt, 0.01, 0.1, {.step_size_up = 0}), "CyclicLR: step_size_up must be >= 1, got 0");
  EXPECT_WEFT_ERROR(CyclicLR(*t.opt, 0.01, 0.1, {.step_size_down = -2}), "step_size_down must be >= 0");
  EXPECT_WEFT_ERROR(CyclicLR(*t.opt, 0.01, 0.1, {.mode = static_cast<CyclicMode>(7)}),
                    "CyclicLR: mode is invalid and scale_fn is None");
  EXPECT_WEFT_ERROR(CyclicLR(*t.opt, {0.01, 0.02, 0.03}, 0.1),
                    "CyclicLR: base_lr must have the same length as optimizer.param_groups. base_lr has 3 values");
  EXPECT_WEFT_ERROR(CyclicLR(*t.opt, 0.01, {0.1}), "max_lr must have the same length");
  EXPECT_WEFT_ERROR(CyclicLR(*t.opt, 0.01, 0.1, {.base_momentum = {0.8}}), "base_momentum must have the same length");
  TwoGroups u(Kind::kLrOnly);
  EXPECT_WEFT_ERROR(CyclicLR(*u.opt, 0.01, 0.1),
                    "CyclicLR: optimizer must support momentum or beta1 with `cycle_momentum` option enabled");
  // Refused schedulers leave the lrs and the initial lrs alone.
  EXPECT_EQ(t.lr(0), 0.1);
  EXPECT_FALSE(t.opt->param_groups()[0].initial_lr.has_value());
  EXPECT_EQ(u.lr(1), 0.03);
}

// ---- the groups' initial_lr ----

TEST(LRScheduler, ASecondSchedulerStartsFromTheInitialLr) {
  TwoGroups t;
  StepLR a(*t.opt, 1, 0.5);
  a.step();
  EXPECT_EQ(t.lr(0), 0.05);
  EXPECT_EQ(t.opt->param_groups()[0].initial_lr, 0.1);
  ExponentialLR b(*t.opt, 0.9);  // PyTorch: base lrs from group["initial_lr"], not the current lrs
  EXPECT_EQ(b.base_lrs(), (std::vector<double>{0.1, 0.03}));
  EXPECT_EQ(t.lr(0), 0.05);  // its epoch 0 keeps the lrs it finds

  TwoGroups u;
  EXPECT_WEFT_ERROR(StepLR(*u.opt, 0), "step_size must be positive");
  ReduceLROnPlateau plateau(*u.opt);  // PyTorch's does not set initial_lr either
  EXPECT_FALSE(u.opt->param_groups()[1].initial_lr.has_value());
  u.opt->param_groups()[1].set_lr(0.02);
  LinearLR lin(*u.opt, 0.5);
  EXPECT_EQ(u.opt->param_groups()[1].initial_lr, 0.02);
  EXPECT_EQ(u.lr(1), 0.01);

  TwoGroups w(Kind::kSgdMomentum);
  OneCycleLR cycle(*w.opt, {1.0, 0.5}, 10);  // overwrites initial_lr with max_lr / div_factor
  EXPECT_EQ(w.opt->param_groups()[0].initial_lr, 1.0 / 25);
  EXPECT_EQ(w.opt->param_groups()[1].initial_lr, 0.5 / 25);
}

// ---- SequentialLR ----

TEST(SequentialLRGolden, ClosedFormsAtTheMilestones) {
  {
    TwoGroups t;
    auto c = make_shared<ConstantLR>(*t.opt, 0.1, 4);
    auto e = make_shared<ExponentialLR>(*t.opt, 0.9);
    SequentialLR s(*t.opt, {c, e}, {4});
    check_golden("seq_constant_exp", s, t);
    EXPECT_EQ(e->last_epoch(), 8);
    EXPECT_EQ(c->last_epoch(), 3);
  }
  {
    TwoGroups t;
    auto lin = make_shared<LinearLR>(*t.opt, 0.2, 1.0, 3);
    auto step = make_shared<StepLR>(*t.opt, 2, 0.5);
    auto cos = make_shared<CosineAnnealingLR>(*t.opt, 6, 1e-3);
    SequentialLR s(*t.opt, {lin, step, cos}, {3, 8});
    check_golden("seq_three", s, t);
    EXPECT_EQ(s.schedulers().size(), 3u);
    EXPECT_EQ(s.milestones(), (std::vector<int64_t>{3, 8}));
  }
  {
    TwoGroups t;
    auto multistep = make_shared<MultiStepLR>(*t.opt, std::vector<int64_t>{1, 2}, 0.5);
    auto mult = make_shared<MultiplicativeLR>(*t.opt, [](int64_t) { return 0.8; });
    auto lambda = make_shared<LambdaLR>(*t.opt, [](int64_t e) { return 1.0 / static_cast<double>(e + 1); });
    SequentialLR s(*t.opt, {multistep, mult, lambda}, {3, 6});
    check_golden("seq_multiplicative_lambda", s, t);
  }
  {
    TwoGroups t;
    auto e = make_shared<ExponentialLR>(*t.opt, 0.5);
    auto poly = make_shared<PolynomialLR>(*t.opt, 4, 2.0);
    SequentialLR s(*t.opt, {e, poly}, {0});  // the second from the start
    check_golden("seq_milestone_zero", s, t);
    EXPECT_EQ(e->last_epoch(), -1);
  }
}

TEST(SequentialLRGolden, OneCycleAndCyclicInASequence) {
  {
    // OneCycleLR's constructor sets initial_lr to max_lr / 25, which the
    // SequentialLR's reset then starts the LinearLR from (as PyTorch).
    TwoGroups t(Kind::kSgdMomentum);
    auto lin = make_shared<LinearLR>(*t.opt, 0.5, 1.0, 2);
    auto cycle = make_shared<OneCycleLR>(*t.opt, 0.5, 8);
    SequentialLR s(*t.opt, {lin, cycle}, {2});
    check_golden("seq_onecycle", s, t, "momentum");
  }
  {
    // CyclicLR made after another scheduler: its epoch 0 is computed from
    // initial_lr, then its base_lr is used (as PyTorch).
    TwoGroups t;
    auto restarts = make_shared<CosineAnnealingWarmRestarts>(*t.opt, 3);
    auto cyclic = make_shared<CyclicLR>(*t.opt, 0.01, 0.1, CyclicLROptions{.step_size_up = 2, .cycle_momentum = false});
    SequentialLR s(*t.opt, {restarts, cyclic}, {5});
    check_golden("seq_warm_restarts_cyclic", s, t);
  }
}

// ---- ChainedScheduler ----

TEST(ChainedSchedulerGolden, RecursiveFormsCompose) {
  {
    TwoGroups t;
    ChainedScheduler s({make_shared<ConstantLR>(*t.opt, 0.1, 2), make_shared<ExponentialLR>(*t.opt, 0.9)});
    check_golden("chain_constant_exp", s, t);
    EXPECT_EQ(&s.optimizer(), t.opt.get());
  }
  {
    TwoGroups t;
    auto step = make_shared<StepLR>(*t.opt, 3, 0.5);
    auto cos = make_shared<CosineAnnealingLR>(*t.opt, 5);
    ChainedScheduler s(*t.opt, {step, cos});
    check_golden("chain_step_cosine", s, t);
  }
  {
    TwoGroups t;
    auto lin = make_shared<LinearLR>(*t.opt, 0.5, 1.0, 2);
    auto e = make_shared<ExponentialLR>(*t.opt, 0.8);
    auto seq = make_shared<SequentialLR>(*t.opt, SchedulerList{lin, e}, std::vector<int64_t>{3});
    auto mult = make_shared<MultiplicativeLR>(*t.opt, [](int64_t) { return 0.95; });
    ChainedScheduler s({seq, mult});
    check_golden("chain_nested", s, t);
  }
}

// ---- state dicts ----

std::unique_ptr<SequentialLR> make_sequential(Optimizer& o) {
  auto lin = make_shared<LinearLR>(o, 0.25, 1.0, 4);
  auto cos = make_shared<CosineAnnealingLR>(o, 5, 0.001);
  auto mult = make_shared<MultiplicativeLR>(o, [](int64_t e) { return 1.0 - 0.01 * static_cast<double>(e); });
  return std::make_unique<SequentialLR>(o, SchedulerList{lin, cos, mult}, std::vector<int64_t>{4, 7});
}

std::unique_ptr<ChainedScheduler> make_chained(Optimizer& o) {
  auto step = make_shared<StepLR>(o, 2, 0.5);
  auto cyclic = make_shared<CyclicLR>(o, 0.01, 0.05, CyclicLROptions{.step_size_up = 3});
  return std::make_unique<ChainedScheduler>(SchedulerList{step, cyclic});
}

TEST(LRScheduler, CompositeStateDictRoundTrips) {
  round_trip(Kind::kSgd, make_sequential, plain_step, 2, 9);  // across both milestones
  round_trip(Kind::kSgd, make_sequential, plain_step, 5, 4);
  round_trip(Kind::kSgdMomentum, make_chained, plain_step, 4, 6, "momentum");
  round_trip(
      Kind::kAdam,
      [](Optimizer& o) {
        return std::make_unique<CyclicLR>(o, 0.001, 0.004,
                                          CyclicLROptions{.step_size_up = 2, .mode = CyclicMode::kTriangular2});
      },
      plain_step, 3, 7, "beta1");

  TwoGroups t;
  auto s = make_sequential(*t.opt);
  const SchedulerStateDict sd = s->state_dict();
  for (const char* key : {"last_epoch", "base_lrs", "last_lrs", "schedulers.0.last_epoch", "schedulers.1.base_lrs",
                          "schedulers.2.last_lrs"})
    EXPECT_EQ(sd.count(key), 1u) << key;
  EXPECT_EQ(sd.size(), 12u);
}

// ---- failures change nothing ----

TEST(LRScheduler, AFailedCompositeStepChangesNothing) {
  TwoGroups t(Kind::kSgdMomentum);
  auto e = make_shared<ExponentialLR>(*t.opt, 0.9);
  auto cycle = make_shared<OneCycleLR>(*t.opt, 0.5, 3);
  ChainedScheduler s({e, cycle});
  for (int i = 0; i < 3; ++i) s.step();  // step total_steps itself is allowed
  const std::vector<double> lrs = s.get_last_lr(), e_lrs = e->get_last_lr();
  const double momentum = t.option(0, "momentum");
  EXPECT_WEFT_ERROR(s.step(), "OneCycleLR: Tried to step 4 times");
  EXPECT_EQ(s.last_epoch(), 3);
  EXPECT_EQ(e->last_epoch(), 3);  // the ExponentialLR had stepped: it is put back
  EXPECT_EQ(e->get_last_lr(), e_lrs);
  EXPECT_EQ(cycle->last_epoch(), 3);
  EXPECT_EQ(t.lr(0), lrs[0]);
  EXPECT_EQ(t.lr(1), lrs[1]);
  EXPECT_EQ(t.option(0, "momentum"), momentum);

  // A restart that fails at a milestone (PyTorch: a division by zero).
  TwoGroups u;
  auto half = make_shared<ExponentialLR>(*u.opt, 0.5);
  auto flat = make_shared<LinearLR>(*u.opt, 0.5, 1.0, 0);
  SequentialLR q(*u.opt, {half, flat}, {2});
  q.step();
  EXPECT_WEFT_ERROR(q.step(), "LinearLR: restarting at epoch 0 with total_iters 0");
  EXPECT_EQ(q.last_epoch(), 1);
  EXPECT_EQ(flat->last_epoch(), -1);
  EXPECT_EQ(u.lr(0), 0.05);
}

TEST(LRScheduler, AFailedCompositeLoadChangesNothing) {
  TwoGroups t;
  auto s = make_sequential(*t.opt);
  for (int i = 0; i < 6; ++i) s->step();
  SchedulerStateDict later = s->state_dict();
  later["schedulers.2.base_lrs"] = tensor<double>({0.1}, {1});  // the last scheduler refuses its entries

  TwoGroups u;
  auto r = make_sequential(*u.opt);
  r->step();
  const SchedulerStateDict before = r->state_dict();
  EXPECT_WEFT_ERROR(r->load_state_dict(later), "'base_lrs' has shape [1]");
  const SchedulerStateDict after = r->state_dict();
  ASSERT_EQ(after.size(), before.size());
  for (const auto& [key, v] : before) EXPECT_TRUE(testing::tensors_near(after.at(key), v, 0.0)) << key;
  EXPECT_EQ(r->schedulers()[0]->last_epoch(), 1);  // loaded first, then put back
  EXPECT_EQ(u.lr(0), r->get_last_lr()[0]);

  SchedulerStateDict extra = s->state_dict();
  extra["schedulers.3.last_epoch"] = scalar_tensor(int64_t{0}, TensorOptions{DType::Int64});
  EXPECT_WEFT_ERROR(r->load_state_dict(extra), "unexpected key 'schedulers.3.last_epoch'");
}

// ---- errors ----

TEST(LRScheduler, CompositeErrors) {
  TwoGroups t, other;
  auto a = make_shared<ExponentialLR>(*t.opt, 0.9);
  auto b = make_shared<StepLR>(*t.opt, 2);
  EXPECT_WEFT_ERROR(SequentialLR(*t.opt, {}, {}), "SequentialLR expects at least one scheduler, but got no scheduler.");
  EXPECT_WEFT_ERROR(SequentialLR(*t.opt, {a, nullptr}, {2}), "SequentialLR: the scheduler at index 1 is null");
  auto plateau = make_shared<ReduceLROnPlateau>(*t.opt);
  EXPECT_WEFT_ERROR(SequentialLR(*t.opt, {a, plateau}, {2}),
                    "SequentialLR does not support `ReduceLROnPlateau` scheduler");
  auto foreign = make_shared<ExponentialLR>(*other.opt, 0.9);
  EXPECT_WEFT_ERROR(SequentialLR(*t.opt, {a, foreign}, {2}),
                    "SequentialLR expects all schedulers to belong to the same optimizer, but the scheduler at index 1 "
                    "was made on another optimizer");
  EXPECT_WEFT_ERROR(SequentialLR(*t.opt, {a, b}, {}),
                    "expects number of schedulers provided to be one more than the number of milestone points, but "
                    "got number of schedulers 2 and the number of milestones to be equal to 0");
  auto c = make_shared<ConstantLR>(*t.opt);
  EXPECT_WEFT_ERROR(SequentialLR(*t.opt, {a, b, c}, {3, 3}),
                    "SequentialLR: milestones must increase, but milestone 1 (3) is not after milestone 0 (3)");
  EXPECT_WEFT_ERROR(SequentialLR(*t.opt, {a, b}, {-1}), "SequentialLR: milestone 0 is -1");
  auto chain = make_shared<ChainedScheduler>(SchedulerList{a, b});
  EXPECT_WEFT_ERROR(SequentialLR(*t.opt, {chain, c}, {2}),
                    "SequentialLR: the scheduler at index 0 is itself a SequentialLR or ChainedScheduler");
  EXPECT_WEFT_ERROR(ChainedScheduler(SchedulerList{}), "ChainedScheduler expects at least one scheduler");
  EXPECT_WEFT_ERROR(ChainedScheduler(*other.opt, {a}),
                    "ChainedScheduler expects all schedulers to belong to the same optimizer, but the scheduler at "
                    "index 0 was made on another optimizer");
  EXPECT_WEFT_ERROR(ChainedScheduler({a, plateau}), "ChainedScheduler does not support `ReduceLROnPlateau`");
}

}  // namespace
}  // namespace weft::optim
