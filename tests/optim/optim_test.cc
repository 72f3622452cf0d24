// SGD / Adam / AdamW against PyTorch's golden values, plus parameter groups,
// zero_grad, skipped parameters, state dict round trips and error messages.
#include <cmath>
#include <memory>

#include <gtest/gtest.h>

#include "core/parallel.h"
#include "io/safetensors.h"
#include "optim/adam.h"
#include "optim/lr_scheduler.h"
#include "optim/sgd.h"
#include "tests/optim/golden.h"
#include "tests/optim/golden_cases.h"

namespace weft::optim {
namespace {

using testing::golden;
using testing::golden_param;
using testing::max_rel_diff;
using testing::tensor_near;
using testing::tensors_near;
using testing::values;

using cases::check_case;
using cases::check_round_trip;
using cases::K;
using cases::maker;

TEST(OptimGolden, SGD) {
  check_case("sgd_plain", maker<SGD>(SGDOptions{.lr = 0.1}));
  check_case("sgd_momentum", maker<SGD>(SGDOptions{.lr = 0.05, .momentum = 0.9}));
  check_case("sgd_damp_wd",
             maker<SGD>(SGDOptions{.lr = 0.05, .momentum = 0.9, .dampening = 0.3, .weight_decay = 0.01}));
  check_case("sgd_nesterov",
             maker<SGD>(SGDOptions{.lr = 0.05, .momentum = 0.8, .weight_decay = 0.02, .nesterov = true}));
}

TEST(OptimGolden, Adam) {
  check_case("adam", maker<Adam>(AdamOptions{.lr = 0.01}));
  check_case("adam_wd",
             maker<Adam>(AdamOptions{.lr = 0.02, .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-6, .weight_decay = 0.1}));
  AdamWOptions w;
  w.lr = 0.01;
  w.weight_decay = 0.05;
  check_case("adamw", maker<AdamW>(w));
}

TEST(OptimGolden, WithSchedulers) {
  check_case("sgd_steplr", maker<SGD>(SGDOptions{.lr = 0.1, .momentum = 0.9}),
             [](Optimizer& o) { return std::make_unique<StepLR>(o, 2, 0.5); });
  AdamWOptions w;
  w.lr = 0.02;
  w.weight_decay = 0.1;
  check_case("adamw_warmcos", maker<AdamW>(w),
             [](Optimizer& o) { return std::make_unique<LinearWarmupCosine>(o, 2, K, 0.25, 1e-3); });
}

// ---- float64 and large tensors against naive reference loops ----

// Reference Adam/AdamW step in double, written straight from the formulas.
void ref_adam(std::vector<double>& p, const std::vector<double>& g, std::vector<double>& m, std::vector<double>& v,
              int t, double lr, double b1, double b2, double eps, double wd, bool decoupled) {
  for (size_t i = 0; i < p.size(); ++i) {
    double gi = g[i];
    if (decoupled) p[i] *= 1 - lr * wd;
    else gi += wd * p[i];
    m[i] = b1 * m[i] + (1 - b1) * gi;
    v[i] = b2 * v[i] + (1 - b2) * gi * gi;
    double mhat = m[i] / (1 - std::pow(b1, t));
    double denom = std::sqrt(v[i]) / std::sqrt(1 - std::pow(b2, t)) + eps;
    p[i] -= lr * mhat / denom;
  }
}

void ref_sgd(std::vector<double>& p, const std::vector<double>& g, std::vector<double>& buf, int t, double lr,
             double mom, double damp, double wd, bool nesterov) {
  for (size_t i = 0; i < p.size(); ++i) {
    double d = g[i] + wd * p[i];
    if (mom != 0) {
      buf[i] = t == 1 ? d : mom * buf[i] + (1 - damp) * d;
      d = nesterov ? d + mom * buf[i] : buf[i];
    }
    p[i] -= lr * d;
  }
}

Tensor pattern(int64_t n, double a, double b, DType dt) {
  std::vector<double> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = std::sin(a * i + b);
  return tensor<double>(x, {n}).to(dt);
}

TEST(OptimReference, AdamAndAdamWFloat64LargeParallel) {
  const int64_t n = 100003;  // spans several parallel chunks
  for (bool decoupled : {false, true}) {
    Tensor p = pattern(n, 0.01, 0.3, DType::Float64);
    p.requires_grad_(true);
    std::vector<double> rp = values(p), rm(n, 0), rv(n, 0);
    AdamOptions o{.lr = 0.003, .beta1 = 0.85, .beta2 = 0.99, .eps = 1e-7, .weight_decay = 0.05};
    std::unique_ptr<Optimizer> opt;
    if (decoupled) {
      AdamWOptions w;
      static_cast<AdamOptions&>(w) = o;
      opt = std::make_unique<AdamW>(std::vector<Tensor>{p}, w);
    } else {
      opt = std::make_unique<Adam>(std::vector<Tensor>{p}, o);
    }
    for (int t = 1; t <= 4; ++t) {
      Tensor g = pattern(n, 0.013, 0.7 * t, DType::Float64);
      p.set_grad(g);
      opt->step();
      ref_adam(rp, values(g), rm, rv, t, 0.003, 0.85, 0.99, 1e-7, 0.05, decoupled);
    }
    EXPECT_TRUE(tensor_near(p, rp, 1e-12)) << "decoupled " << decoupled;
    EXPECT_EQ(opt->state(p).at("step").item<float>(), 4.0f);
    EXPECT_TRUE(tensor_near(opt->state(p).at("exp_avg"), rm, 1e-12));
    EXPECT_TRUE(tensor_near(opt->state(p).at("exp_avg_sq"), rv, 1e-12));
  }
}

TEST(OptimReference, SGDFloat64AndFloat32LargeParallel) {
  const int64_t n = 70001;
  for (DType dt : {DType::Float64, DType::Float32}) {
    Tensor p = pattern(n, 0.02, 0.1, dt);
    p.requires_grad_(true);
    std::vector<double> rp = values(p), rb(n, 0);
    SGD opt({p}, SGDOptions{.lr = 0.1, .momentum = 0.7, .weight_decay = 0.01, .nesterov = true});
    for (int t = 1; t <= 3; ++t) {
      Tensor g = pattern(n, 0.017, 0.4 * t, dt);
      p.set_grad(g);
      opt.step();
      ref_sgd(rp, values(g), rb, t, 0.1, 0.7, 0.0, 0.01, true);
    }
    EXPECT_TRUE(tensor_near(p, rp, dt == DType::Float64 ? 1e-12 : 2e-6)) << dt;
  }
}

TEST(OptimReference, ResultsDoNotDependOnThreadCount) {
  const int64_t n = 200000;
  auto run = [&](int threads) {
    int prev = get_num_threads();
    set_num_threads(threads);
    Tensor p = pattern(n, 0.01, 0.3, DType::Float32);
    p.requires_grad_(true);
    Adam opt({p}, AdamOptions{.lr = 0.01});
    for (int t = 1; t <= 3; ++t) {
      p.set_grad(pattern(n, 0.02, 0.5 * t, DType::Float32));
      opt.step();
    }
    set_num_threads(prev);
    return values(p);
  };
  EXPECT_EQ(run(1), run(get_num_threads() > 1 ? get_num_threads() : 2));
}

TEST(OptimReference, NonContiguousParameter) {
  // A leaf whose storage is transposed: (3, 4) with strides (1, 3).
  Tensor base = pattern(12, 0.5, 0.1, DType::Float32).view({4, 3});
  Tensor p = base.t().detach();
  ASSERT_FALSE(p.is_contiguous());
  p.requires_grad_(true);
  Tensor q = p.contiguous().detach();
  q.requires_grad_(true);
  Tensor g = pattern(12, 0.3, 0.2, DType::Float32).view({3, 4});
  SGD a({p}, SGDOptions{.lr = 0.1, .momentum = 0.9});
  SGD b({q}, SGDOptions{.lr = 0.1, .momentum = 0.9});
  for (int t = 0; t < 2; ++t) {
    p.set_grad(g.t().contiguous().t());  // non-contiguous gradient as well
    q.set_grad(g.clone());
    a.step();
    b.step();
  }
  EXPECT_EQ(values(p), values(q));
  EXPECT_EQ(p.strides(), (Shape{1, 3}));
}

// ---- parameter groups, zero_grad, skipping ----

TEST(Optimizer, ParamGroupsWithDifferentLr) {
  Tensor a = tensor({1.0f, 2.0f}, {2}), b = tensor({3.0f}, {1});
  a.requires_grad_(true);
  b.requires_grad_(true);
  SGD opt({ParamGroup({a}), ParamGroup({b}, {{"lr", 0.5}, {"weight_decay", 0.1}})}, SGDOptions{.lr = 0.1});
  ASSERT_EQ(opt.param_groups().size(), 2u);
  EXPECT_EQ(opt.param_groups()[0].lr(), 0.1);
  EXPECT_EQ(opt.param_groups()[1].lr(), 0.5);
  EXPECT_EQ(opt.param_groups()[1].weight_decay(), 0.1);
  EXPECT_EQ(opt.param_groups()[0].weight_decay(), 0.0);
  a.set_grad(tensor({1.0f, -1.0f}, {2}));
  b.set_grad(tensor({2.0f}, {1}));
  opt.step();
  EXPECT_TRUE(tensor_near(a, {0.9, 2.1}, 1e-7));
  EXPECT_TRUE(tensor_near(b, {3.0 - 0.5 * (2.0 + 0.1 * 3.0)}, 1e-7));
  // add_param_group later; defaults fill in.
  Tensor c = tensor({1.0f}, {1});
  c.requires_grad_(true);
  opt.add_param_group(ParamGroup({c}, {{"lr", 1.0}}));
  c.set_grad(tensor({0.25f}, {1}));
  opt.step();
  EXPECT_TRUE(tensor_near(c, {0.75}, 1e-7));
}

TEST(Optimizer, ZeroGrad) {
  Tensor a = tensor({1.0f, 2.0f}, {2});
  a.requires_grad_(true);
  SGD opt({a}, SGDOptions{.lr = 0.1});
  a.set_grad(tensor({1.0f, 1.0f}, {2}));
  Tensor g = a.grad();
  opt.zero_grad(/*set_to_none=*/false);
  ASSERT_TRUE(a.grad().defined());
  EXPECT_TRUE(a.grad().is_same(g));
  EXPECT_TRUE(tensor_near(a.grad(), {0, 0}, 0));
  opt.zero_grad();
  EXPECT_FALSE(a.grad().defined());
}

TEST(Optimizer, SkipsParametersWithoutGradAndBumpsVersion) {
  Tensor a = tensor({1.0f, 2.0f}, {2}), b = tensor({3.0f, 4.0f}, {2});
  a.requires_grad_(true);
  b.requires_grad_(true);
  Adam opt({a, b}, AdamOptions{.lr = 0.1});
  a.set_grad(tensor({1.0f, -1.0f}, {2}));
  uint64_t va = a.version(), vb = b.version();
  opt.step();
  EXPECT_TRUE(tensor_near(b, {3.0, 4.0}, 0));
  EXPECT_TRUE(opt.state(b).empty());
  EXPECT_EQ(opt.state(a).size(), 3u);
  EXPECT_GT(a.version(), va);
  EXPECT_EQ(b.version(), vb);
  // First Adam step moves each coordinate by ~lr * sign(g).
  EXPECT_TRUE(tensor_near(a, {0.9, 2.1}, 1e-6));
  // SGD with momentum: no buffer for a parameter without gradient.
  SGD sgd({b}, SGDOptions{.lr = 0.1, .momentum = 0.9});
  sgd.step();
  EXPECT_TRUE(sgd.state(b).empty());
}

TEST(Optimizer, StepDoesNotRecordAutograd) {
  Tensor a = tensor({1.0f}, {1});
  a.requires_grad_(true);
  SGD opt({a}, SGDOptions{.lr = 0.1});
  a.set_grad(tensor({1.0f}, {1}));
  opt.step();
  EXPECT_TRUE(a.is_leaf());
  EXPECT_TRUE(a.requires_grad());
}

// ---- state dicts ----

TEST(OptimizerStateDict, RoundTripContinuesIdentically) {
  check_round_trip("sgd", maker<SGD>(SGDOptions{.lr = 0.05, .momentum = 0.9, .dampening = 0.2}));
  check_round_trip("adam", maker<Adam>(AdamOptions{.lr = 0.01, .weight_decay = 0.01}));
  check_round_trip("adamw", maker<AdamW>(AdamWOptions{}));
}

TEST(OptimizerStateDict, Layout) {
  Tensor a = golden_param("init.p0"), b = golden_param("init.p1");
  Adam opt({ParamGroup({a}), ParamGroup({b}, {{"lr", 0.5}})}, AdamOptions{});
  b.set_grad(golden("grads.p1").select(0, 0).clone());
  opt.step();
  auto sd = opt.state_dict();
  EXPECT_FALSE(sd.count("state.0.exp_avg"));  // a had no gradient
  ASSERT_TRUE(sd.count("state.1.exp_avg"));
  EXPECT_EQ(sd.at("state.1.exp_avg").sizes(), b.sizes());
  EXPECT_EQ(sd.at("state.1.step").item<float>(), 1.0f);
  EXPECT_EQ(sd.at("param_groups.1.lr").dtype(), DType::Float64);
  EXPECT_EQ(sd.at("param_groups.1.lr").item<double>(), 0.5);
  EXPECT_EQ(sd.at("param_groups.0.beta2").item<double>(), 0.999);
  EXPECT_EQ(values(sd.at("param_groups.1.params")), std::vector<double>{1});
  // Hyper-parameters come back on load.
  Tensor c = golden_param("init.p0"), d = golden_param("init.p1");
  Adam other({ParamGroup({c}), ParamGroup({d})}, AdamOptions{.lr = 0.1});
  other.load_state_dict(sd);
  EXPECT_EQ(other.param_groups()[1].lr(), 0.5);
  EXPECT_EQ(other.param_groups()[0].lr(), 1e-3);
  EXPECT_TRUE(tensors_near(other.state(d).at("exp_avg"), opt.state(b).at("exp_avg"), 0));
  EXPECT_FALSE(other.state(d).at("exp_avg").is_same(opt.state(b).at("exp_avg")));
}

TEST(OptimizerStateDict, LoadErrors) {
  Tensor a = golden_param("init.p0"), b = golden_param("init.p1");
  SGD src({a, b}, SGDOptions{.lr = 0.1, .momentum = 0.9});
  a.set_grad(golden("grads.p0").select(0, 0).clone());
  b.set_grad(golden("grads.p1").select(0, 0).clone());
  src.step();
  const auto sd = src.state_dict();

  Tensor c = golden_param("init.p0");
  SGD one_param({c}, SGDOptions{.momentum = 0.9});
  EXPECT_WEFT_ERROR(one_param.load_state_dict(sd), "doesn't match the size of optimizer's group");

  Tensor d = golden_param("init.p0"), e = golden_param("init.p1");
  SGD two_groups({ParamGroup({d}), ParamGroup({e})}, SGDOptions{.momentum = 0.9});
  EXPECT_WEFT_ERROR(two_groups.load_state_dict(sd), "different number of parameter groups");

  Tensor f = golden_param("init.p1"), h = golden_param("init.p0");  // shapes swapped
  SGD swapped({f, h}, SGDOptions{.momentum = 0.9});
  EXPECT_WEFT_ERROR(swapped.load_state_dict(sd), "'state.0.momentum_buffer' has shape [3, 4] but parameter 0");

  Tensor i = golden_param("init.p0"), j = golden_param("init.p1");
  SGD ok({i, j}, SGDOptions{.momentum = 0.9});
  auto bad = sd;
  bad["state.0.exp_avg"] = zeros({3, 4});
  EXPECT_WEFT_ERROR(ok.load_state_dict(bad), "unexpected state entry 'state.0.exp_avg'");
  bad = sd;
  bad.erase("param_groups.0.momentum");
  EXPECT_WEFT_ERROR(ok.load_state_dict(bad), "missing hyper-parameter 'param_groups.0.momentum'");
  bad = sd;
  bad["param_groups.0.lr"] = scalar_tensor(-1.0, TensorOptions{DType::Float64});
  EXPECT_WEFT_ERROR(ok.load_state_dict(bad), "Invalid learning rate: -1");
  bad = sd;
  bad["state.7.momentum_buffer"] = zeros({3, 4});
  EXPECT_WEFT_ERROR(ok.load_state_dict(bad), "state for parameter 7");
  bad = sd;
  bad["junk"] = zeros({1});
  EXPECT_WEFT_ERROR(ok.load_state_dict(bad), "unexpected key 'junk'");
  // A failed load changes nothing.
  EXPECT_EQ(ok.param_groups()[0].lr(), 1e-3);
  EXPECT_TRUE(ok.state(i).empty());
  ok.load_state_dict(sd);
  EXPECT_EQ(ok.param_groups()[0].lr(), 0.1);
  EXPECT_TRUE(tensors_near(ok.state(i).at("momentum_buffer"), src.state(a).at("momentum_buffer"), 0));
}

// ---- bad hyper-parameters and parameters ----

TEST(OptimizerErrors, BadHyperParameters) {
  Tensor a = tensor({1.0f}, {1});
  a.requires_grad_(true);
  EXPECT_WEFT_ERROR(SGD({a}, SGDOptions{.lr = -0.1}), "Invalid learning rate: -0.1");
  EXPECT_WEFT_ERROR(SGD({a}, SGDOptions{.momentum = -0.5}), "Invalid momentum value: -0.5");
  EXPECT_WEFT_ERROR(SGD({a}, SGDOptions{.weight_decay = -1}), "Invalid weight_decay value: -1");
  EXPECT_WEFT_ERROR(SGD({a}, SGDOptions{.momentum = 0.9, .dampening = 0.1, .nesterov = true}),
                    "Nesterov momentum requires a momentum and zero dampening");
  EXPECT_WEFT_ERROR(SGD({a}, SGDOptions{.nesterov = true}), "Nesterov momentum requires a momentum");
  EXPECT_WEFT_ERROR(Adam({a}, AdamOptions{.lr = -1}), "Adam: Invalid learning rate: -1");
  EXPECT_WEFT_ERROR(Adam({a}, AdamOptions{.beta1 = 1.0}), "Invalid beta parameter at index 0: 1");
  EXPECT_WEFT_ERROR(Adam({a}, AdamOptions{.beta2 = -0.1}), "Invalid beta parameter at index 1: -0.1");
  EXPECT_WEFT_ERROR(Adam({a}, AdamOptions{.eps = -1e-8}), "Invalid epsilon value");
  AdamWOptions w;
  w.weight_decay = -0.01;
  EXPECT_WEFT_ERROR(AdamW({a}, w), "AdamW: Invalid weight_decay value: -0.01");
  EXPECT_WEFT_ERROR(SGD({ParamGroup({a}, {{"momentun", 0.9}})}, SGDOptions{}), "unknown hyper-parameter 'momentun'");
  EXPECT_WEFT_ERROR(SGD({ParamGroup({a}, {{"lr", -2.0}})}, SGDOptions{}), "Invalid learning rate: -2");
}

TEST(OptimizerErrors, BadParameters) {
  Tensor a = tensor({1.0f}, {1});
  a.requires_grad_(true);
  EXPECT_WEFT_ERROR(SGD(std::vector<Tensor>{}, SGDOptions{}), "empty parameter list");
  EXPECT_WEFT_ERROR(SGD({a, a}, SGDOptions{}), "appear in more than one parameter group");
  SGD opt({a}, SGDOptions{});
  EXPECT_WEFT_ERROR(opt.add_param_group(ParamGroup({a})), "appear in more than one parameter group");
  Tensor non_leaf = a * Scalar(2.0);
  ASSERT_FALSE(non_leaf.is_leaf());
  EXPECT_WEFT_ERROR(SGD({non_leaf}, SGDOptions{}), "can't optimize a non-leaf Tensor");
  Tensor ints = tensor<int64_t>({1, 2}, {2});
  EXPECT_WEFT_ERROR(SGD({ints}, SGDOptions{}), "floating-point");
  Tensor half = tensor({1.0f}, {1}).to(DType::Float16);
  half.requires_grad_(true);
  SGD h({half}, SGDOptions{});
  half.set_grad(tensor({1.0f}, {1}).to(DType::Float16));
  EXPECT_WEFT_ERROR(h.step(), "sgd_step has no kernel for cpu/float16");
}

}  // namespace
}  // namespace weft::optim
