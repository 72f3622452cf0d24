// StepLR, CosineAnnealingLR and LinearWarmupCosine against PyTorch's values
// (golden file), hand-computed values, state dicts and argument errors.
#include "optim/lr_scheduler.h"

#include <cmath>
#include <memory>
#include <numbers>

#include <gtest/gtest.h>

#include "optim/sgd.h"
#include "tests/optim/golden.h"

namespace weft::optim {
namespace {

using testing::golden;

struct TwoGroups {
  Tensor a = zeros({1}), b = zeros({1});
  std::unique_ptr<SGD> opt;
  TwoGroups() {
    a.requires_grad_(true);
    b.requires_grad_(true);
    opt = std::make_unique<SGD>(
        std::vector<ParamGroup>{ParamGroup({a}, {{"lr", 0.1}}), ParamGroup({b}, {{"lr", 0.03}})}, SGDOptions{});
  }
};

// Compares get_last_lr() and the groups' lrs after construction and each step
// with rows of golden "sched.<name>.lr" (N + 1, 2), to 1e-12 relative.
void check_golden(const std::string& name, LRScheduler& s, Optimizer& opt) {
  SCOPED_TRACE(name);
  const Tensor& expected = golden("sched." + name + ".lr");
  for (int64_t k = 0; k < expected.size(0); ++k) {
    if (k > 0) s.step();
    EXPECT_EQ(s.last_epoch(), k);
    for (int g = 0; g < 2; ++g) {
      double e = expected.select(0, k).select(0, g).item<double>();
      EXPECT_NEAR(s.get_last_lr()[g], e, 1e-12 * e) << "epoch " << k << " group " << g;
      EXPECT_EQ(opt.param_groups()[g].lr(), s.get_last_lr()[g]);
    }
  }
}

TEST(LRSchedulerGolden, StepLR) {
  TwoGroups t;
  StepLR s(*t.opt, 3, 0.1);
  check_golden("step", s, *t.opt);
}

TEST(LRSchedulerGolden, CosineAnnealingPastTMax) {
  TwoGroups t;
  CosineAnnealingLR s(*t.opt, 10, 0.001);
  check_golden("cosine", s, *t.opt);  // 35 epochs: down, up again, down
}

TEST(LRSchedulerGolden, LinearWarmupCosine) {
  TwoGroups t;
  LinearWarmupCosine s(*t.opt, 5, 20, 0.1, 1e-4);
  check_golden("warmcos", s, *t.opt);
}

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

TEST(LRScheduler, StateDictRoundTrip) {
  TwoGroups t;
  CosineAnnealingLR s(*t.opt, 7, 0.01);
  for (int i = 0; i < 3; ++i) s.step();
  auto sd = s.state_dict();
  EXPECT_EQ(sd.at("last_epoch").item<int64_t>(), 3);
  std::vector<double> expected;
  for (int i = 0; i < 4; ++i) {
    s.step();
    expected.push_back(s.get_last_lr()[1]);
  }
  TwoGroups u;
  CosineAnnealingLR r(*u.opt, 7, 0.01);
  r.load_state_dict(sd);
  EXPECT_EQ(r.last_epoch(), 3);
  EXPECT_EQ(r.base_lrs(), (std::vector<double>{0.1, 0.03}));
  for (int i = 0; i < 4; ++i) {
    r.step();
    EXPECT_EQ(r.get_last_lr()[1], expected[i]);
    EXPECT_EQ(u.opt->param_groups()[1].lr(), expected[i]);
  }
}

TEST(LRScheduler, Errors) {
  TwoGroups t;
  EXPECT_WEFT_ERROR(StepLR(*t.opt, 0), "step_size must be positive");
  EXPECT_WEFT_ERROR(CosineAnnealingLR(*t.opt, 0), "T_max must be positive");
  EXPECT_WEFT_ERROR(LinearWarmupCosine(*t.opt, 5, 5), "must be greater than warmup_steps");
  EXPECT_WEFT_ERROR(LinearWarmupCosine(*t.opt, 2, 5, 0.0), "Starting multiplicative factor");
  StepLR s(*t.opt, 2);
  auto sd = s.state_dict();
  sd["base_lrs"] = tensor<double>({0.1}, {1});
  EXPECT_WEFT_ERROR(s.load_state_dict(sd), "2 param groups");
  sd = s.state_dict();
  sd.erase("last_epoch");
  EXPECT_WEFT_ERROR(s.load_state_dict(sd), "missing 'last_epoch'");
}

}  // namespace
}  // namespace weft::optim
