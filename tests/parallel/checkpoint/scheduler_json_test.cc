// Note [scheduler JSON] (parallel/checkpoint/format.h): every LR scheduler's
// state_dict() through trainer_state.json's JSON and back, exactly, with its
// own entries (ReduceLROnPlateau's infinite "best" as a string, OneCycleLR's
// per-group lists); per-group lists given to another number of param groups
// when they repeat one value, refused by name otherwise; malformed states
// refused.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/ops.h"
#include "optim/lr_scheduler.h"
#include "optim/sgd.h"
#include "parallel/checkpoint/format.h"
#include "parallel/checkpoint/snapshot.h"
#include "tests/testing.h"

namespace weft::parallel::checkpoint {
namespace {

using nlohmann::json;
using RP = optim::ReduceLROnPlateauOptions;

// An SGD (momentum 0.9) over `groups` one-element param groups with lrs 0.1, 0.2, ...
struct Groups {
  std::vector<Tensor> params;
  std::unique_ptr<optim::SGD> opt;
  explicit Groups(int groups) {
    std::vector<optim::ParamGroup> g;
    for (int i = 0; i < groups; ++i) {
      params.push_back(zeros({1}).requires_grad_(true));
      g.emplace_back(std::vector<Tensor>{params.back()}, optim::OptionMap{{"lr", 0.1 * (i + 1)}});
    }
    opt = std::make_unique<optim::SGD>(g, optim::SGDOptions{.momentum = 0.9});
  }
};

// The JSON as trainer_state.json holds it: dumped and parsed again.
json through_text(const json& j) { return json::parse(j.dump(2)); }

TEST(SchedulerJson, PlateauRoundTripsWithInfiniteBest) {
  for (RP::Mode mode : {RP::Mode::kMin, RP::Mode::kMax}) {
    Groups a(2), b(2);
    optim::ReduceLROnPlateau s(*a.opt, {.mode = mode, .patience = 0});
    const json j = through_text(scheduler_to_json(s));
    EXPECT_EQ(j.at("best"), mode == RP::Mode::kMin ? "inf" : "-inf");
    EXPECT_EQ(j.at("num_bad_epochs"), 0);
    EXPECT_TRUE(j.at("num_bad_epochs").is_number_integer());
    EXPECT_TRUE(is_scheduler_state_json(j));
    optim::ReduceLROnPlateau r(*b.opt, {.mode = mode, .patience = 0});
    r.step(1.0);  // best 1: the load must replace it
    r.load_state_dict(scheduler_state_from_json(j, 2, "here"));
    EXPECT_EQ(r.best(), s.best());
    EXPECT_EQ(r.last_epoch(), 0);
    for (double m : {3.0, 2.0, 2.0, 5.0}) {
      s.step(m);
      r.step(m);
      EXPECT_EQ(r.get_last_lr(), s.get_last_lr());
    }
    // Mid-run, best finite: the counters come back too.
    const json mid = through_text(scheduler_to_json(s));
    EXPECT_TRUE(mid.at("best").is_number_float());
    Groups c(2);
    optim::ReduceLROnPlateau t(*c.opt, {.mode = mode, .patience = 0});
    t.load_state_dict(scheduler_state_from_json(mid, 2, "here"));
    EXPECT_EQ(t.best(), s.best());
    EXPECT_EQ(t.num_bad_epochs(), s.num_bad_epochs());
    EXPECT_EQ(t.cooldown_counter(), s.cooldown_counter());
    EXPECT_EQ(t.get_last_lr(), s.get_last_lr());
  }
}

TEST(SchedulerJson, NonFiniteValuesAndShapes) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const json j = through_text(
      scheduler_state_to_json({{"last_epoch", scalar_tensor(3, TensorOptions{DType::Int64})},
                               {"base_lrs", tensor<double>({0.1, -std::numeric_limits<double>::infinity()}, {2})},
                               {"last_lrs", tensor<double>({0.1, 0.2}, {2})},
                               {"x", scalar_tensor(nan, TensorOptions{DType::Float64})},
                               {"y", scalar_tensor(2.0, TensorOptions{DType::Float64})}}));
  EXPECT_EQ(j.at("x"), "nan");
  EXPECT_EQ(j.at("base_lrs")[1], "-inf");
  EXPECT_TRUE(j.at("y").is_number_float());  // 2.0 stays floating, loaded as float64
  const auto sd = scheduler_state_from_json(j, 2, "here");
  EXPECT_TRUE(std::isnan(sd.at("x").item<double>()));
  EXPECT_EQ(sd.at("y").dtype(), DType::Float64);
  EXPECT_EQ(sd.at("last_epoch").dtype(), DType::Int64);
  EXPECT_EQ(sd.at("base_lrs").select(0, 1).item<double>(), -std::numeric_limits<double>::infinity());
  EXPECT_WEFT_ERROR(scheduler_state_to_json({{"m", zeros({2, 2})}}),
                    "LR scheduler state 'm' has shape [2, 2], but only one value or one per param group");
}

TEST(SchedulerJson, OneCycleListsGoToAnotherNumberOfGroupsWhenTheyRepeatOneValue) {
  Groups two(2), one(1);
  optim::OneCycleLR s(*two.opt, 0.5, 12);
  for (int i = 0; i < 4; ++i) s.step();
  const json j = through_text(scheduler_to_json(s));
  for (const char* key : {"max_lrs", "min_lrs", "base_momentums", "max_momentums", "last_momentums"})
    EXPECT_EQ(j.at(key).size(), 2u) << key;
  optim::OneCycleLR r(*one.opt, 0.5, 12);
  r.load_state_dict(scheduler_state_from_json(j, 1, "here"));
  EXPECT_EQ(r.last_epoch(), 4);
  EXPECT_EQ(one.opt->param_groups()[0].get("momentum"), two.opt->param_groups()[0].get("momentum"));
  s.step();
  r.step();
  EXPECT_EQ(r.get_last_lr()[0], s.get_last_lr()[0]);

  Groups two_b(2);
  optim::OneCycleLR d(*two_b.opt, 0.5, 12, {.base_momentum = {0.8, 0.85}});
  EXPECT_WEFT_ERROR(scheduler_state_from_json(scheduler_to_json(d), 1, "ck"),
                    "ck: the LR schedule was saved with 2 parameter groups of different 'base_momentums' values, but "
                    "this optimizer has 1 groups");
  Groups two_c(2);
  optim::StepLR e(*two_c.opt, 2);  // lrs 0.1 and 0.2
  EXPECT_WEFT_ERROR(scheduler_state_from_json(scheduler_to_json(e), 1, "ck"),
                    "ck: the LR schedule was saved with 2 parameter groups of different learning rates");
}

TEST(SchedulerJson, MalformedStatesAreRefused) {
  const json good = {{"last_epoch", 1}, {"base_lrs", {0.1}}, {"last_lrs", {0.1}}};
  EXPECT_TRUE(is_scheduler_state_json(good));
  for (const auto& [what, bad] : std::vector<std::pair<std::string, json>>{
           {"no last_epoch", {{"base_lrs", {0.1}}, {"last_lrs", {0.1}}}},
           {"float last_epoch", {{"last_epoch", 1.5}, {"base_lrs", {0.1}}, {"last_lrs", {0.1}}}},
           {"lrs not a list", {{"last_epoch", 1}, {"base_lrs", 0.1}, {"last_lrs", {0.1}}}},
           {"a word", {{"last_epoch", 1}, {"base_lrs", {0.1}}, {"last_lrs", {0.1}}, {"best", "big"}}},
           {"an object", {{"last_epoch", 1}, {"base_lrs", {0.1}}, {"last_lrs", {0.1}}, {"best", {{"a", 1}}}}},
           {"a word in a list", {{"last_epoch", 1}, {"base_lrs", {0.1, "x"}}, {"last_lrs", {0.1}}}}}) {
    EXPECT_FALSE(is_scheduler_state_json(bad)) << what;
    EXPECT_WEFT_ERROR(scheduler_state_from_json(bad, 1, "ck"), "ck: the LR schedule's state is not one of a scheduler");
  }
}

}  // namespace
}  // namespace weft::parallel::checkpoint
