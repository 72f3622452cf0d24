// The "maximize" option of every optimizer (PyTorch's maximize=True): PyTorch's
// golden values for each optimizer (tools/golden/make_optim_golden.py), a
// hand-worked SGD step, groups that differ, the gradient left untouched, state
// dicts written before the option existed, and bad values.
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "optim/adagrad.h"
#include "optim/adam.h"
#include "optim/rmsprop.h"
#include "optim/sgd.h"
#include "tests/optim/golden.h"
#include "tests/optim/golden_cases.h"

namespace weft::optim {
namespace {

using cases::check_case;
using cases::check_round_trip;
using cases::K;
using cases::maker;
using testing::golden;
using testing::golden_param;
using testing::max_rel_diff;
using testing::values;

TEST(OptimGolden, Maximize) {
  check_case("sgd_maximize",
             maker<SGD>(SGDOptions{.lr = 0.05, .momentum = 0.9, .weight_decay = 0.01, .maximize = true}));
  check_case("adam_maximize", maker<Adam>(AdamOptions{.lr = 0.01, .weight_decay = 0.05, .maximize = true}));
  AdamWOptions w;
  w.lr = 0.01;
  w.weight_decay = 0.05;
  w.amsgrad = true;
  w.maximize = true;
  check_case("adamw_maximize", maker<AdamW>(w));
  // Ascending carries some of p1's elements close to zero (Adagrad: p1[2] -0.2 -> -0.105 -> -0.016; RMSprop:
  // p1[3] 0.0995 -> 0.0020): a one-ulp rounding difference from PyTorch at -0.105 (7.5e-9) is 4.7e-7 of the
  // 0.01 floor at -0.016, 4 ulp there.
  constexpr double kThroughZero = 1e-6;
  check_case("rmsprop_maximize",
             maker<RMSprop>(
                 RMSpropOptions{.lr = 0.01, .weight_decay = 0.02, .momentum = 0.5, .centered = true, .maximize = true}),
             nullptr, kThroughZero);
  check_case("adagrad_maximize", maker<Adagrad>(AdagradOptions{.lr = 0.1, .weight_decay = 0.02, .maximize = true}),
             nullptr, kThroughZero);
}

TEST(OptimMaximize, PlainSGDStepsUpTheGradient) {
  Tensor p = tensor({1.0f, -2.0f, 0.5f}, {3});
  p.requires_grad_(true);
  SGD opt({p}, SGDOptions{.lr = 0.25, .maximize = true});
  p.set_grad(tensor({2.0f, 4.0f, -1.0f}, {3}));
  opt.step();
  EXPECT_EQ(values(p), (std::vector<double>{1.5, -1.0, 0.25}));  // p + lr * g
  // The gradient itself is not negated: the update reads a negated copy.
  EXPECT_EQ(values(p.grad()), (std::vector<double>{2.0, 4.0, -1.0}));
}

// One group ascends, the other descends: each follows its own golden run.
TEST(OptimMaximize, PerGroup) {
  Tensor p0 = golden_param("init.p0"), p1 = golden_param("init.p1");
  Adam opt({ParamGroup({p0}), ParamGroup({p1}, {{"maximize", 0.0}, {"weight_decay", 0.0}})},
           AdamOptions{.lr = 0.01, .weight_decay = 0.05, .maximize = true});
  for (int k = 0; k < K; ++k) {
    const Tensor g0 = golden("grads.p0").select(0, k).clone();
    p0.set_grad(g0);
    p1.set_grad(golden("grads.p1").select(0, k).clone());
    opt.step();
    EXPECT_LE(max_rel_diff(p0, golden("opt.adam_maximize.p0").select(0, k + 1)), 3e-7) << "step " << k;
    EXPECT_LE(max_rel_diff(p1, golden("opt.adam.p1").select(0, k + 1)), 3e-7) << "step " << k;
    EXPECT_EQ(values(p0.grad()), values(g0));
  }
}

TEST(OptimMaximize, StateDictRoundTripContinuesIdentically) {
  check_round_trip("sgd_maximize", maker<SGD>(SGDOptions{.lr = 0.05, .momentum = 0.9, .maximize = true}));
  check_round_trip("rmsprop_maximize", maker<RMSprop>(RMSpropOptions{.lr = 0.01, .maximize = true}));
}

TEST(OptimMaximize, SavedAndLoaded) {
  Tensor a = golden_param("init.p0");
  Adagrad opt({a}, AdagradOptions{.lr = 0.1, .maximize = true});
  a.set_grad(golden("grads.p0").select(0, 0).clone());
  opt.step();
  OptimizerStateDict sd = opt.state_dict();
  EXPECT_EQ(sd.at("param_groups.0.maximize").item<double>(), 1.0);
  EXPECT_EQ(opt.state_dict_by_name(NamedParameters{{"w", a}}).at("options.w.maximize").item<double>(), 1.0);

  // Loading restores the saved value, whatever the new optimizer's default.
  Tensor b = golden_param("init.p0");
  Adagrad loaded({b}, AdagradOptions{.lr = 0.1});
  loaded.load_state_dict(sd);
  EXPECT_EQ(loaded.param_groups()[0].get("maximize"), 1.0);

  // A dict written before maximize existed loads as maximize off, positional or by name.
  OptimizerStateDict old = sd;
  old.erase("param_groups.0.maximize");
  Adagrad from_old({b}, AdagradOptions{.lr = 0.1, .maximize = true});
  from_old.load_state_dict(old);
  EXPECT_EQ(from_old.param_groups()[0].get("maximize"), 0.0);
  OptimizerStateDict by_name = opt.state_dict_by_name(NamedParameters{{"w", a}});
  by_name.erase("options.w.maximize");
  from_old.param_groups()[0].options["maximize"] = 1.0;
  from_old.load_state_dict_by_name(by_name, NamedParameters{{"w", b}});
  EXPECT_EQ(from_old.param_groups()[0].get("maximize"), 0.0);

  OptimizerStateDict bad = sd;
  bad["param_groups.0.maximize"] = scalar_tensor(2.0, TensorOptions{DType::Float64});
  EXPECT_WEFT_ERROR(loaded.load_state_dict(bad), "Adagrad: maximize must be 0 or 1, got 2");
  EXPECT_EQ(loaded.param_groups()[0].get("maximize"), 1.0);  // unchanged by the failed load
}

TEST(OptimMaximize, BadValuesNameTheOptimizer) {
  Tensor a = tensor({1.0f}, {1});
  a.requires_grad_(true);
  EXPECT_WEFT_ERROR(SGD({ParamGroup({a}, {{"maximize", 0.5}})}, SGDOptions{}), "SGD: maximize must be 0 or 1, got 0.5");
  EXPECT_WEFT_ERROR(Adam({ParamGroup({a}, {{"maximize", -1.0}})}, AdamOptions{}),
                    "Adam: maximize must be 0 or 1, got -1");
  EXPECT_WEFT_ERROR(AdamW({ParamGroup({a}, {{"maximize", 2.0}})}, AdamWOptions{}),
                    "AdamW: maximize must be 0 or 1, got 2");
  EXPECT_WEFT_ERROR(RMSprop({ParamGroup({a}, {{"maximize", 3.0}})}, RMSpropOptions{}),
                    "RMSprop: maximize must be 0 or 1, got 3");
  SGD ok({a}, SGDOptions{});
  EXPECT_WEFT_ERROR(ok.add_param_group(ParamGroup({tensor({1.0f}, {1}).requires_grad_(true)}, {{"maximize", 7.0}})),
                    "SGD: maximize must be 0 or 1, got 7");
}

}  // namespace
}  // namespace weft::optim
