// Helpers of the learning-rate scheduler tests: the golden file of
// tools/golden/make_lr_scheduler_golden.py, an optimizer with two param groups
// (the script's), the golden comparison and the state dict round trip.
#pragma once

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "optim/adam.h"
#include "optim/lr_scheduler.h"
#include "optim/sgd.h"
#include "tests/golden.h"

namespace weft::optim::sched_testing {

inline const testing::Golden& golden() {
  static const testing::Golden g("tests/optim/golden/lr_scheduler_golden.safetensors");
  return g;
}
inline double G(const std::string& key, int64_t row, int64_t col) {
  return golden()(key).select(0, row).select(0, col).item<double>();
}

// An optimizer with no option but lr (for OneCycleLR's cycle_momentum check).
class LrOnly : public Optimizer {
 public:
  explicit LrOnly(std::vector<ParamGroup> groups) : Optimizer("LrOnly", {{"lr", 1e-3}}) {
    init_groups(std::move(groups));
  }

 protected:
  void validate(const OptionMap&) const override {}
  void update(ParamGroup&) override {}
  std::vector<std::string> state_names() const override { return {}; }
};

// Two param groups with lrs 0.1 and 0.03 (the golden script's): SGD (momentum
// 0 or 0.9), Adam or LrOnly.
enum class Kind { kSgd, kSgdMomentum, kAdam, kLrOnly };
struct TwoGroups {
  Tensor a = zeros({1}), b = zeros({1});
  std::unique_ptr<Optimizer> opt;
  explicit TwoGroups(Kind kind = Kind::kSgd) {
    a.requires_grad_(true);
    b.requires_grad_(true);
    std::vector<ParamGroup> groups{ParamGroup({a}, {{"lr", 0.1}}), ParamGroup({b}, {{"lr", 0.03}})};
    switch (kind) {
      case Kind::kSgd: opt = std::make_unique<SGD>(groups, SGDOptions{}); break;
      case Kind::kSgdMomentum: opt = std::make_unique<SGD>(groups, SGDOptions{.momentum = 0.9}); break;
      case Kind::kAdam: opt = std::make_unique<Adam>(groups, AdamOptions{}); break;
      case Kind::kLrOnly: opt = std::make_unique<LrOnly>(groups); break;
    }
  }
  double lr(int g) const { return opt->param_groups()[g].lr(); }
  double option(int g, const char* key) const { return opt->param_groups()[g].get(key); }
};

inline void expect_rel(double actual, double expected, const std::string& what) {
  EXPECT_NEAR(actual, expected, 1e-12 * std::abs(expected)) << what;
}

// Compares get_last_lr() and the groups' lrs after construction and after each
// step with rows of golden "sched.<name>.lr" (N + 1, 2), to 1e-12 relative;
// OneCycleLR and CyclicLR cases (and composites ending in one) also their momentum option (`momentum_key`) with
// "sched.<name>.momentum", ReduceLROnPlateau cases (stepped with
// "sched.<name>.metric") best, num_bad_epochs and cooldown_counter with
// "sched.<name>.state".
inline void check_golden(const std::string& name, LRScheduler& s, const TwoGroups& t,
                         const char* momentum_key = nullptr) {
  SCOPED_TRACE(name);
  const std::string key = "sched." + name;
  auto* plateau = dynamic_cast<ReduceLROnPlateau*>(&s);
  auto* one_cycle = dynamic_cast<OneCycleLR*>(&s);
  auto* cyclic = dynamic_cast<CyclicLR*>(&s);
  const int64_t rows = golden()(key + ".lr").size(0);
  for (int64_t k = 0; k < rows; ++k) {
    const std::string at = "epoch " + std::to_string(k);
    if (k > 0 && plateau) plateau->step(golden()(key + ".metric").select(0, k - 1).item<double>());
    if (k > 0 && !plateau) s.step();
    EXPECT_EQ(s.last_epoch(), k);
    for (int g = 0; g < 2; ++g) {
      const std::string where = at + " group " + std::to_string(g);
      expect_rel(s.get_last_lr()[g], G(key + ".lr", k, g), where);
      EXPECT_EQ(t.lr(g), s.get_last_lr()[g]) << where;
      if (momentum_key) {
        expect_rel(t.option(g, momentum_key), G(key + ".momentum", k, g), where + " " + momentum_key);
        const std::vector<double>* last = one_cycle ? &one_cycle->get_last_momentum()
                                          : cyclic  ? &cyclic->get_last_momentum()
                                                    : nullptr;
        if (last && !last->empty()) {
          EXPECT_EQ((*last)[g], t.option(g, momentum_key)) << where;
        }
      }
    }
    if (plateau) {
      EXPECT_EQ(plateau->best(), G(key + ".state", k, 0)) << at;
      EXPECT_EQ(plateau->num_bad_epochs(), G(key + ".state", k, 1)) << at;
      EXPECT_EQ(plateau->cooldown_counter(), G(key + ".state", k, 2)) << at;
    }
  }
}

// Steps `a` k times, saves, steps it n more times recording everything; a
// fresh scheduler from `make` on a fresh optimizer loads the state and must
// reproduce those n steps exactly. `step` steps a scheduler (epoch i).
template <class Make, class Step>
void round_trip(Kind kind, Make make, Step step, int k, int n, const char* momentum_key = nullptr) {
  TwoGroups t(kind);
  auto a = make(*t.opt);
  for (int i = 1; i <= k; ++i) step(*a, i);
  const SchedulerStateDict sd = a->state_dict();
  std::vector<std::vector<double>> lrs, moms;
  for (int i = k + 1; i <= k + n; ++i) {
    step(*a, i);
    lrs.push_back(a->get_last_lr());
    if (momentum_key) moms.push_back({t.option(0, momentum_key), t.option(1, momentum_key)});
  }
  TwoGroups u(kind);
  auto b = make(*u.opt);
  b->load_state_dict(sd);
  EXPECT_EQ(b->last_epoch(), k);
  EXPECT_EQ(b->get_last_lr(), (std::vector<double>{sd.at("last_lrs").select(0, 0).item<double>(),
                                                   sd.at("last_lrs").select(0, 1).item<double>()}));
  EXPECT_EQ(u.lr(0), b->get_last_lr()[0]);
  for (int i = 0; i < n; ++i) {
    step(*b, k + 1 + i);
    EXPECT_EQ(b->get_last_lr(), lrs[i]) << "step " << k + 1 + i;
    EXPECT_EQ(u.lr(1), lrs[i][1]);
    if (momentum_key) {
      EXPECT_EQ(u.option(0, momentum_key), moms[i][0]) << "step " << k + 1 + i;
      EXPECT_EQ(u.option(1, momentum_key), moms[i][1]) << "step " << k + 1 + i;
    }
  }
}

inline void plain_step(LRScheduler& s, int) { s.step(); }

}  // namespace weft::optim::sched_testing
