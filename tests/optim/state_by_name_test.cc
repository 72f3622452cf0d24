// Optimizer state keyed by parameter name (Note [optimizer state by name]):
// a model trained unsplit, saved by name through safetensors, re-split into two
// stages with an optimizer each, continues bitwise like the unsplit run; the
// layout; lookups by identity; errors naming the parameter.
#include <algorithm>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "core/rng.h"
#include "io/safetensors.h"
#include "nn/nn.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "tests/testing.h"

namespace weft::optim {
namespace {

using testing::values;

std::string tmp_path(const std::string& name) {
  const char* d = std::getenv("TEST_TMPDIR");
  return std::string(d ? d : "/tmp") + "/" + name;
}

// emb (4 -> 8), h = [Linear, Tanh, Linear, Tanh, Linear, Tanh], head (8 -> 2).
std::shared_ptr<nn::Sequential> make_model() {
  auto h = std::make_shared<nn::Sequential>();
  for (int i = 0; i < 3; ++i) {
    h->push_back(std::make_shared<nn::Linear>(8, 8));
    h->push_back(std::make_shared<nn::Tanh>());
  }
  return nn::Sequential::of_named(
      {{"emb", std::make_shared<nn::Linear>(4, 8)}, {"h", h}, {"head", std::make_shared<nn::Linear>(8, 2)}});
}

std::shared_ptr<nn::Sequential> h_of(const std::shared_ptr<nn::Sequential>& m) {
  return std::static_pointer_cast<nn::Sequential>((*m)[1]);
}

// Two groups by name, as a GPT recipe does: weights decay, biases do not.
std::vector<ParamGroup> groups_of(const NamedParameters& named) {
  NamedParameters decay, no_decay;
  for (const auto& [n, p] : named) (p.dim() >= 2 ? decay : no_decay).emplace_back(n, p);
  return {ParamGroup(decay, {{"weight_decay", 0.05}}), ParamGroup(no_decay, {{"weight_decay", 0.0}})};
}

using MakeOpt = std::function<std::unique_ptr<Optimizer>(const NamedParameters&)>;

// One step: loss = sum((stages...(x) - target)^2) on batch k, backward, every optimizer steps.
void train_step(const std::vector<std::shared_ptr<nn::Module>>& stages,
                const std::vector<std::unique_ptr<Optimizer>*>& opts, int k) {
  Tensor x = testing::rnd({5, 4}, kFloat32, 100 + k), target = testing::rnd({5, 2}, kFloat32, 200 + k);
  Tensor y = x;
  for (auto& s : stages) y = (*s)(y);
  Tensor d = y - target;
  (d * d).sum().backward();
  for (auto* o : opts) (*o)->step();
  for (auto* o : opts) (*o)->zero_grad();
}

void check_resplit(const std::string& what, const MakeOpt& make) {
  SCOPED_TRACE(what);
  constexpr int N = 4, M = 4;
  // ---- unsplit: N steps, change the lr (a schedule would), save by name, M more ----
  manual_seed(5);
  auto whole = make_model();
  auto opt = make(whole->named_parameters());
  for (int k = 0; k < N; ++k) train_step({whole}, {&opt}, k);
  for (auto& g : opt->param_groups()) g.set_lr(g.lr() * 0.5);
  const std::string model_path = tmp_path(what + "_model.safetensors");
  const std::string optim_path = tmp_path(what + "_optim.safetensors");
  io::save_safetensors(model_path, whole->state_dict());
  io::save_safetensors(optim_path, opt->state_dict_by_name());
  for (int k = N; k < N + M; ++k) train_step({whole}, {&opt}, k);

  // ---- re-split: a fresh model from the file, two stages, an optimizer each ----
  manual_seed(6);  // other initial weights: everything must come from the files
  auto model = make_model();
  model->load_state_dict(io::load_safetensors(model_path).tensors);
  auto h = h_of(model);
  auto stage0 = nn::Sequential::of_named({{"emb", (*model)[0]}, {"h", h->slice(0, 3)}});
  auto stage1 = nn::Sequential::of_named({{"h", h->slice(3, 6)}, {"head", (*model)[2]}});
  auto opt0 = make(stage0->named_parameters()), opt1 = make(stage1->named_parameters());
  const OptimizerStateDict saved = io::load_safetensors(optim_path).tensors;
  std::vector<std::string> unused0 = opt0->load_state_dict_by_name(saved);
  std::vector<std::string> unused1 = opt1->load_state_dict_by_name(saved);
  // Each stage takes exactly its parameters' entries; together they take all.
  std::vector<std::string> all;
  for (const auto& [k, v] : saved) all.push_back(k);
  std::vector<std::string> taken0, taken1;
  std::set_difference(all.begin(), all.end(), unused0.begin(), unused0.end(), std::back_inserter(taken0));
  std::set_difference(all.begin(), all.end(), unused1.begin(), unused1.end(), std::back_inserter(taken1));
  EXPECT_EQ(taken0, unused1);
  EXPECT_EQ(taken1, unused0);
  EXPECT_FALSE(taken0.empty());
  EXPECT_FALSE(taken1.empty());
  EXPECT_EQ(opt0->param_groups()[0].lr(), opt->param_groups()[0].lr());  // the saved (halved) lr came back
  for (int k = N; k < N + M; ++k) train_step({stage0, stage1}, {&opt0, &opt1}, k);

  // ---- bitwise the same parameters and optimizer state ----
  auto want = whole->named_parameters(), got = model->named_parameters();
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].first, want[i].first);
    EXPECT_EQ(values(got[i].second), values(want[i].second)) << want[i].first;
  }
  OptimizerStateDict merged = opt0->state_dict_by_name(), more = opt1->state_dict_by_name();
  merged.insert(more.begin(), more.end());
  OptimizerStateDict ref = opt->state_dict_by_name();
  ASSERT_EQ(merged.size(), ref.size());
  for (const auto& [k, v] : ref) {
    ASSERT_TRUE(merged.count(k)) << k;
    EXPECT_EQ(values(merged.at(k)), values(v)) << k;
  }
}

TEST(OptimizerStateByName, ResplitContinuesBitwiseAdam) {
  check_resplit("adam", [](const NamedParameters& named) {
    return std::make_unique<Adam>(groups_of(named), AdamOptions{.lr = 0.01});
  });
}

TEST(OptimizerStateByName, ResplitContinuesBitwiseAdamW) {
  check_resplit("adamw",
                [](const NamedParameters& named) { return std::make_unique<AdamW>(groups_of(named), AdamWOptions{}); });
}

TEST(OptimizerStateByName, ResplitContinuesBitwiseSGDMomentum) {
  check_resplit("sgd", [](const NamedParameters& named) {
    return std::make_unique<SGD>(groups_of(named), SGDOptions{.lr = 0.02, .momentum = 0.9, .nesterov = true});
  });
}

// A loaded state is the optimizer's own copy: training does not write into the
// state dict it came from (the step count used to alias it), so two optimizers
// loaded from one dict (ranks as threads) advance independently.
TEST(OptimizerStateByName, LoadingCopiesTheState) {
  for (const MakeOpt& make :
       std::vector<MakeOpt>{[](const NamedParameters& n) { return std::make_unique<AdamW>(n, AdamWOptions{}); },
                            [](const NamedParameters& n) {
                              return std::make_unique<SGD>(n, SGDOptions{0.1, 0.9});
                            }}) {
    auto m = make_model();
    std::unique_ptr<Optimizer> opt = make(m->named_parameters());
    train_step({m}, {&opt}, 0);
    const OptimizerStateDict sd = opt->state_dict_by_name();
    std::map<std::string, Tensor> before;
    for (const auto& [k, t] : sd) before[k] = t.clone();
    auto a = make_model(), b = make_model();
    a->load_state_dict(m->state_dict());
    b->load_state_dict(m->state_dict());
    std::unique_ptr<Optimizer> oa = make(a->named_parameters()), ob = make(b->named_parameters());
    oa->load_state_dict_by_name(sd);
    ob->load_state_dict_by_name(sd);
    train_step({a}, {&oa}, 1);
    train_step({b}, {&ob}, 1);
    for (const auto& [k, t] : sd) EXPECT_TRUE(testing::tensors_near(t, before.at(k), 0)) << k << " changed";
    // Both continued from the same state: equal states.
    const OptimizerStateDict sa = oa->state_dict_by_name(), sb = ob->state_dict_by_name();
    for (const auto& [k, t] : sa) EXPECT_TRUE(testing::tensors_near(t, sb.at(k), 0)) << k;
    if (oa->name() == "AdamW") {
      EXPECT_EQ(sa.at("state.head.weight.step").item<float>(), 2.0f);
    }
  }
}

TEST(OptimizerStateByName, LayoutAndNames) {
  manual_seed(7);
  auto model = make_model();
  Adam opt(model->named_parameters(), AdamOptions{.lr = 0.003});
  EXPECT_EQ(opt.param_names()[0], "emb.weight");
  EXPECT_EQ(opt.param_names().back(), "head.bias");
  // Only head has a gradient: only head gets state; every parameter gets options.
  Tensor y = (*(*model)[2])(testing::rnd({3, 8}, kFloat32, 1)).sum();
  y.backward();
  opt.step();
  OptimizerStateDict sd = opt.state_dict_by_name();
  EXPECT_FALSE(sd.count("state.emb.weight.exp_avg"));
  ASSERT_TRUE(sd.count("state.head.weight.exp_avg"));
  EXPECT_EQ(sd.at("state.head.weight.exp_avg").sizes(), (Shape{2, 8}));
  EXPECT_EQ(sd.at("state.head.weight.step").item<float>(), 1.0f);
  EXPECT_TRUE(sd.at("state.head.weight.exp_avg").is_same(opt.state((*model)[2]->parameters()[0]).at("exp_avg")));
  EXPECT_EQ(sd.at("options.h.4.bias.lr").dtype(), DType::Float64);
  EXPECT_EQ(sd.at("options.h.4.bias.lr").item<double>(), 0.003);
  EXPECT_EQ(sd.at("options.emb.weight.beta2").item<double>(), 0.999);
  const size_t n_params = model->named_parameters().size();
  EXPECT_EQ(sd.size(), n_params * 7 + 2 * 3);  // 7 options each; head.weight and head.bias have 3 states
  // An optimizer built from plain parameters is given the names.
  Adam plain(model->parameters(), AdamOptions{.lr = 0.003});
  EXPECT_WEFT_ERROR(plain.state_dict_by_name(), "parameter group 0 has no parameter names");
  plain.load_state_dict(opt.state_dict());
  OptimizerStateDict by_identity = plain.state_dict_by_name(model->named_parameters());
  ASSERT_EQ(by_identity.size(), sd.size());
  for (const auto& [k, v] : sd) EXPECT_EQ(values(by_identity.at(k)), values(v)) << k;
  EXPECT_WEFT_ERROR(plain.state_dict_by_name((*model)[0]->named_parameters()), "is not among the 2 names given");
  // And loads with them.
  Adam again(model->parameters(), AdamOptions{});
  EXPECT_TRUE(again.load_state_dict_by_name(sd, model->named_parameters()).empty());
  EXPECT_EQ(again.param_groups()[0].lr(), 0.003);
  EXPECT_EQ(values(again.state((*model)[2]->parameters()[0]).at("exp_avg")),
            values(sd.at("state.head.weight.exp_avg")));
}

TEST(OptimizerStateByName, ErrorsNameTheParameter) {
  manual_seed(8);
  auto model = make_model();
  SGD src(model->named_parameters(), SGDOptions{.lr = 0.1, .momentum = 0.9});
  train_step({model}, {}, 0);
  for (auto& [n, p] : model->named_parameters()) p.set_grad(ones_like(p));
  src.step();
  const OptimizerStateDict sd = src.state_dict_by_name();

  SGD dst(model->named_parameters(), SGDOptions{.momentum = 0.9});
  auto bad = sd;
  bad["state.h.2.weight.momentum_buffer"] = zeros({8, 4});
  EXPECT_WEFT_ERROR(dst.load_state_dict_by_name(bad),
                    "'state.h.2.weight.momentum_buffer' has shape [8, 4] but parameter 'h.2.weight' has shape [8, 8]");
  bad = sd;
  bad["state.h.2.weight.exp_avg"] = zeros({8, 8});
  EXPECT_WEFT_ERROR(dst.load_state_dict_by_name(bad), "unexpected state entry 'state.h.2.weight.exp_avg' for SGD");
  bad = sd;
  bad.erase("options.h.0.bias.momentum");
  EXPECT_WEFT_ERROR(dst.load_state_dict_by_name(bad), "missing hyper-parameter 'options.h.0.bias.momentum'");
  bad = sd;
  bad["options.h.0.bias.lr"] = scalar_tensor(0.25, kFloat64);
  EXPECT_WEFT_ERROR(dst.load_state_dict_by_name(bad), "were saved with different lr (0.10000000000000001 and 0.25)");
  EXPECT_WEFT_ERROR(dst.load_state_dict_by_name(bad), "share group 0");
  bad = sd;
  bad["options.h.0.bias.colour"] = scalar_tensor(1.0, kFloat64);
  EXPECT_WEFT_ERROR(dst.load_state_dict_by_name(bad), "unknown hyper-parameter 'options.h.0.bias.colour'");
  bad = sd;
  bad["state.nodot"] = zeros({1});
  EXPECT_WEFT_ERROR(dst.load_state_dict_by_name(bad), "unexpected key 'state.nodot'");
  EXPECT_WEFT_ERROR(dst.load_state_dict_by_name(src.state_dict()), "load it with load_state_dict");
  // A parameter the dict does not know (another model's names).
  auto other = nn::Sequential::of_named({{"decoder", std::make_shared<nn::Linear>(8, 8)}});
  SGD foreign(other->named_parameters(), SGDOptions{.momentum = 0.9});
  EXPECT_WEFT_ERROR(foreign.load_state_dict_by_name(sd), "no entry for parameter 'decoder.weight'");
  // A failed load changes nothing; a good one takes the state.
  EXPECT_EQ(dst.param_groups()[0].lr(), 1e-3);
  EXPECT_TRUE(dst.state(model->parameters()[0]).empty());
  EXPECT_TRUE(dst.load_state_dict_by_name(sd).empty());
  EXPECT_EQ(dst.param_groups()[0].lr(), 0.1);
  EXPECT_FALSE(dst.state(model->parameters()[0]).empty());
  // Names must be unique and one per parameter.
  Tensor a = ones({2}).requires_grad_(), b = ones({2}).requires_grad_();
  EXPECT_WEFT_ERROR(SGD(NamedParameters{{"w", a}, {"w", b}}, SGDOptions{}),
                    "parameter name 'w' appears more than once");
  ParamGroup g({a});
  g.param_names = {"x", "y"};
  EXPECT_WEFT_ERROR(SGD(std::vector<ParamGroup>{g}, SGDOptions{}), "the group has 1 parameters but 2 parameter names");
}

}  // namespace
}  // namespace weft::optim
