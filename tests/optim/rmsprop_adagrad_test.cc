// RMSprop, Adagrad and Adam/AdamW's AMSGrad against PyTorch's golden values
// (tools/golden/make_optim_golden.py), against float64 reference loops written
// from the formulas, hand-worked first steps, state dict round trips and
// layouts, and their hyper-parameter errors.
#include <cmath>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "core/parallel.h"
#include "optim/adagrad.h"
#include "optim/adam.h"
#include "optim/rmsprop.h"
#include "tests/optim/golden.h"
#include "tests/optim/golden_cases.h"

namespace weft::optim {
namespace {

using cases::check_case;
using cases::check_round_trip;
using cases::maker;
using testing::golden;
using testing::golden_param;
using testing::tensor_near;
using testing::values;

TEST(OptimGolden, AdamAmsgrad) {
  check_case("adam_amsgrad",
             maker<Adam>(AdamOptions{.lr = 0.02, .beta1 = 0.8, .beta2 = 0.9, .weight_decay = 0.05, .amsgrad = true}));
  AdamWOptions w;
  w.lr = 0.01;
  w.weight_decay = 0.1;
  w.amsgrad = true;
  check_case("adamw_amsgrad", maker<AdamW>(w));
}

TEST(OptimGolden, RMSprop) {
  check_case("rmsprop", maker<RMSprop>(RMSpropOptions{.lr = 0.01}));
  check_case("rmsprop_wd_mom", maker<RMSprop>(RMSpropOptions{
                                   .lr = 0.005, .alpha = 0.9, .eps = 1e-6, .weight_decay = 0.05, .momentum = 0.8}));
  check_case("rmsprop_centered",
             maker<RMSprop>(RMSpropOptions{.lr = 0.002, .alpha = 0.95, .momentum = 0.5, .centered = true}));
  // alpha 0.3: the grad_avg lerp's weight 0.7 takes ATen's other formula
  check_case("rmsprop_small_alpha", maker<RMSprop>(RMSpropOptions{.lr = 0.01, .alpha = 0.3, .centered = true}));
}

TEST(OptimGolden, Adagrad) {
  check_case("adagrad", maker<Adagrad>(AdagradOptions{.lr = 0.1}));
  check_case("adagrad_decay",
             maker<Adagrad>(AdagradOptions{
                 .lr = 0.2, .lr_decay = 0.1, .weight_decay = 0.02, .initial_accumulator_value = 0.5, .eps = 1e-6}));
}

// ---- float64 reference loops, straight from the formulas ----

Tensor pattern(int64_t n, double a, double b, DType dt) {
  std::vector<double> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = std::sin(a * i + b);
  return tensor<double>(x, {n}).to(dt);
}

struct RefRMSprop {
  double lr, alpha, eps, wd, mom;
  bool centered;
  std::vector<double> v, ga, buf;
  void step(std::vector<double>& p, const std::vector<double>& g) {
    if (v.empty()) v.assign(p.size(), 0), ga.assign(p.size(), 0), buf.assign(p.size(), 0);
    for (size_t i = 0; i < p.size(); ++i) {
      const double gi = g[i] + wd * p[i];
      v[i] = alpha * v[i] + (1 - alpha) * gi * gi;
      double var = v[i];
      if (centered) {
        ga[i] = alpha * ga[i] + (1 - alpha) * gi;
        var -= ga[i] * ga[i];
      }
      const double avg = std::sqrt(var) + eps;
      if (mom != 0) {
        buf[i] = mom * buf[i] + gi / avg;
        p[i] -= lr * buf[i];
      } else {
        p[i] -= lr * gi / avg;
      }
    }
  }
};

TEST(OptimReference, RMSpropFloat64LargeParallel) {
  const int64_t n = 100003;  // spans several parallel chunks
  for (bool centered : {false, true}) {
    for (double mom : {0.0, 0.7}) {
      Tensor p = pattern(n, 0.01, 0.3, DType::Float64);
      p.requires_grad_(true);
      std::vector<double> rp = values(p);
      RefRMSprop ref{0.003, 0.9, 1e-7, 0.05, mom, centered, {}, {}, {}};
      RMSprop opt(
          {p},
          RMSpropOptions{
              .lr = 0.003, .alpha = 0.9, .eps = 1e-7, .weight_decay = 0.05, .momentum = mom, .centered = centered});
      for (int t = 1; t <= 4; ++t) {
        Tensor g = pattern(n, 0.013, 0.7 * t, DType::Float64);
        p.set_grad(g);
        opt.step();
        ref.step(rp, values(g));
      }
      SCOPED_TRACE(std::string("centered ") + (centered ? "1" : "0") + " momentum " + std::to_string(mom));
      EXPECT_TRUE(tensor_near(p, rp, 1e-12));
      const ParamState& st = opt.state(p);
      EXPECT_EQ(st.at("step").item<float>(), 4.0f);
      EXPECT_TRUE(tensor_near(st.at("square_avg"), ref.v, 1e-12));
      EXPECT_EQ(st.count("grad_avg"), centered ? 1u : 0u);
      EXPECT_EQ(st.count("momentum_buffer"), mom != 0 ? 1u : 0u);
      if (centered) {
        EXPECT_TRUE(tensor_near(st.at("grad_avg"), ref.ga, 1e-12));
      }
      if (mom != 0) {
        EXPECT_TRUE(tensor_near(st.at("momentum_buffer"), ref.buf, 1e-12));
      }
    }
  }
}

TEST(OptimReference, AdagradFloat64LargeParallel) {
  const int64_t n = 100003;
  const double lr = 0.05, lr_decay = 0.2, wd = 0.01, init = 0.3, eps = 1e-9;
  Tensor p = pattern(n, 0.02, 0.1, DType::Float64);
  p.requires_grad_(true);
  std::vector<double> rp = values(p), sum(n, init);
  Adagrad opt({p},
              AdagradOptions{
                  .lr = lr, .lr_decay = lr_decay, .weight_decay = wd, .initial_accumulator_value = init, .eps = eps});
  for (int t = 1; t <= 4; ++t) {
    Tensor g = pattern(n, 0.017, 0.4 * t, DType::Float64);
    p.set_grad(g);
    opt.step();
    const std::vector<double> gv = values(g);
    const double clr = lr / (1 + (t - 1) * lr_decay);
    for (int64_t i = 0; i < n; ++i) {
      const double gi = gv[i] + wd * rp[i];
      sum[i] += gi * gi;
      rp[i] -= clr * gi / (std::sqrt(sum[i]) + eps);
    }
  }
  EXPECT_TRUE(tensor_near(p, rp, 1e-12));
  EXPECT_TRUE(tensor_near(opt.state(p).at("sum"), sum, 1e-12));
  EXPECT_EQ(opt.state(p).at("step").item<float>(), 4.0f);
}

TEST(OptimReference, AmsgradKeepsTheLargestSecondMoment) {
  const int64_t n = 50001;
  Tensor p = pattern(n, 0.01, 0.3, DType::Float64);
  p.requires_grad_(true);
  std::vector<double> rp = values(p), m(n, 0), v(n, 0), vmax(n, 0);
  const double lr = 0.01, b1 = 0.9, b2 = 0.5, eps = 1e-8;  // beta2 0.5: v forgets the large gradients fast
  Adam opt({p}, AdamOptions{.lr = lr, .beta1 = b1, .beta2 = b2, .eps = eps, .amsgrad = true});
  for (int t = 1; t <= 5; ++t) {
    // Large gradients, then small ones: v shrinks while vmax holds its peak.
    Tensor g = pattern(n, 0.013, 0.7 * t, DType::Float64) * (t <= 2 ? 3.0 : 0.1);
    p.set_grad(g);
    opt.step();
    const std::vector<double> gv = values(g);
    for (int64_t i = 0; i < n; ++i) {
      m[i] = b1 * m[i] + (1 - b1) * gv[i];
      v[i] = b2 * v[i] + (1 - b2) * gv[i] * gv[i];
      vmax[i] = std::max(vmax[i], v[i]);
      const double denom = std::sqrt(vmax[i]) / std::sqrt(1 - std::pow(b2, t)) + eps;
      rp[i] -= lr / (1 - std::pow(b1, t)) * m[i] / denom;
    }
  }
  EXPECT_TRUE(tensor_near(p, rp, 1e-12));
  EXPECT_TRUE(tensor_near(opt.state(p).at("max_exp_avg_sq"), vmax, 1e-12));
  EXPECT_TRUE(tensor_near(opt.state(p).at("exp_avg_sq"), v, 1e-12));
  // The maximum really differs from the current second moment here.
  EXPECT_GT(values(opt.state(p).at("max_exp_avg_sq"))[7], 2 * v[7]);
}

TEST(OptimReference, NewOptimizersDoNotDependOnThreadCount) {
  const int64_t n = 200000;
  auto run = [&](int threads, auto make) {
    const int prev = get_num_threads();
    set_num_threads(threads);
    Tensor p = pattern(n, 0.01, 0.3, DType::Float32);
    p.requires_grad_(true);
    auto opt = make(p);
    for (int t = 1; t <= 3; ++t) {
      p.set_grad(pattern(n, 0.02, 0.5 * t, DType::Float32));
      opt->step();
    }
    set_num_threads(prev);
    return values(p);
  };
  const int many = get_num_threads() > 1 ? get_num_threads() : 2;
  auto rms = [](Tensor p) {
    return std::make_unique<RMSprop>(std::vector<Tensor>{p},
                                     RMSpropOptions{.lr = 0.01, .momentum = 0.9, .centered = true});
  };
  auto ada = [](Tensor p) { return std::make_unique<Adagrad>(std::vector<Tensor>{p}, AdagradOptions{.lr = 0.1}); };
  EXPECT_EQ(run(1, rms), run(many, rms));
  EXPECT_EQ(run(1, ada), run(many, ada));
}

// ---- hand-worked first steps ----

TEST(OptimHand, FirstSteps) {
  // Adagrad: sum = g^2, so the first step is lr * g / (|g| + eps): lr times the sign for |g| >> eps.
  Tensor a = tensor<double>({1.0, -2.0}, {2});
  a.requires_grad_(true);
  Adagrad ada({a}, AdagradOptions{.lr = 0.5, .initial_accumulator_value = 0.0});
  a.set_grad(tensor<double>({4.0, -0.25}, {2}));
  ada.step();
  EXPECT_NEAR(values(a)[0], 1.0 - 0.5 * 4.0 / (4.0 + 1e-10), 1e-15);
  EXPECT_NEAR(values(a)[1], -2.0 + 0.5 * 0.25 / (0.25 + 1e-10), 1e-15);
  // initial_accumulator_value 1 with g = 1: 1 - lr / (sqrt(2) + eps)
  Tensor b = tensor<double>({1.0}, {1});
  b.requires_grad_(true);
  Adagrad ada1({b}, AdagradOptions{.lr = 0.5, .initial_accumulator_value = 1.0});
  b.set_grad(tensor<double>({1.0}, {1}));
  ada1.step();
  EXPECT_NEAR(values(b)[0], 1.0 - 0.5 / (std::sqrt(2.0) + 1e-10), 1e-15);
  EXPECT_EQ(values(ada1.state(b).at("sum"))[0], 2.0);

  // RMSprop, alpha 0.75: v = 0.25 g^2, avg = 0.5 |g| + eps; p -= lr * g / avg = 2 lr sign(g).
  Tensor c = tensor<double>({3.0}, {1});
  c.requires_grad_(true);
  RMSprop rms({c}, RMSpropOptions{.lr = 0.1, .alpha = 0.75, .eps = 0.0});
  c.set_grad(tensor<double>({-8.0}, {1}));
  rms.step();
  EXPECT_EQ(values(c)[0], 3.2);
  EXPECT_EQ(values(rms.state(c).at("square_avg"))[0], 16.0);
  // Centered: ga = 0.25 g, v - ga^2 = 0.25 g^2 - 0.0625 g^2 = 0.1875 g^2.
  Tensor d = tensor<double>({3.0}, {1});
  d.requires_grad_(true);
  RMSprop rmsc({d}, RMSpropOptions{.lr = 0.1, .alpha = 0.75, .eps = 0.0, .centered = true});
  d.set_grad(tensor<double>({-8.0}, {1}));
  rmsc.step();
  EXPECT_NEAR(values(d)[0], 3.0 + 0.1 / std::sqrt(0.1875), 1e-15);
  EXPECT_EQ(values(rmsc.state(d).at("grad_avg"))[0], -2.0);
}

// ---- state dicts ----

TEST(OptimizerStateDict, NewOptimizersRoundTripContinueIdentically) {
  check_round_trip("rmsprop", maker<RMSprop>(RMSpropOptions{
                                  .lr = 0.01, .alpha = 0.9, .weight_decay = 0.01, .momentum = 0.5, .centered = true}));
  check_round_trip("adagrad",
                   maker<Adagrad>(AdagradOptions{.lr = 0.1, .lr_decay = 0.05, .initial_accumulator_value = 0.2}));
  check_round_trip("adam_amsgrad", maker<Adam>(AdamOptions{.lr = 0.01, .amsgrad = true}));
}

TEST(OptimizerStateDict, AmsgradOptionAndState) {
  Tensor a = golden_param("init.p0");
  Adam opt({a}, AdamOptions{.lr = 0.01});
  a.set_grad(golden("grads.p0").select(0, 0).clone());
  opt.step();
  auto sd = opt.state_dict();
  EXPECT_EQ(sd.at("param_groups.0.amsgrad").item<double>(), 0.0);
  EXPECT_FALSE(sd.count("state.0.max_exp_avg_sq"));

  // A dict written before amsgrad existed loads, as amsgrad off.
  auto old = sd;
  old.erase("param_groups.0.amsgrad");
  Tensor b = golden_param("init.p0");
  Adam loaded({b}, AdamOptions{.lr = 0.01, .amsgrad = true});
  loaded.load_state_dict(old);
  EXPECT_EQ(loaded.param_groups()[0].get("amsgrad"), 0.0);
  auto by_name = loaded.state_dict_by_name(NamedParameters{{"w", b}});
  by_name.erase("options.w.amsgrad");
  loaded.load_state_dict_by_name(by_name, NamedParameters{{"w", b}});
  EXPECT_EQ(loaded.param_groups()[0].get("amsgrad"), 0.0);

  // Turning amsgrad on after the first step: its state is missing, and the error says so.
  loaded.param_groups()[0].options["amsgrad"] = 1.0;
  b.set_grad(golden("grads.p0").select(0, 1).clone());
  EXPECT_WEFT_ERROR(loaded.step(), "Adam.step: parameter of shape [3, 4] has state but no 'max_exp_avg_sq'");

  auto bad = sd;
  bad["param_groups.0.amsgrad"] = scalar_tensor(2.0, TensorOptions{DType::Float64});
  EXPECT_WEFT_ERROR(loaded.load_state_dict(bad), "Adam: amsgrad must be 0 or 1, got 2");
  // Other hyper-parameters stay required.
  bad = sd;
  bad.erase("param_groups.0.beta1");
  EXPECT_WEFT_ERROR(loaded.load_state_dict(bad), "missing hyper-parameter 'param_groups.0.beta1'");
}

TEST(OptimizerStateDict, RMSpropAndAdagradLayouts) {
  Tensor a = golden_param("init.p0"), b = golden_param("init.p1");
  RMSprop rms({ParamGroup({a}), ParamGroup({b}, {{"momentum", 0.9}, {"centered", 1.0}})}, RMSpropOptions{});
  a.set_grad(golden("grads.p0").select(0, 0).clone());
  b.set_grad(golden("grads.p1").select(0, 0).clone());
  rms.step();
  auto sd = rms.state_dict();
  EXPECT_TRUE(sd.count("state.0.square_avg"));
  EXPECT_FALSE(sd.count("state.0.momentum_buffer"));
  EXPECT_FALSE(sd.count("state.0.grad_avg"));
  EXPECT_TRUE(sd.count("state.1.momentum_buffer"));
  EXPECT_TRUE(sd.count("state.1.grad_avg"));
  EXPECT_EQ(sd.at("state.1.step").item<float>(), 1.0f);
  EXPECT_EQ(sd.at("param_groups.0.alpha").item<double>(), 0.99);
  EXPECT_EQ(sd.at("param_groups.1.centered").item<double>(), 1.0);

  Tensor c = golden_param("init.p1");
  Adagrad ada({c}, AdagradOptions{.initial_accumulator_value = 0.25});
  EXPECT_TRUE(ada.state(c).empty());  // created on the first update
  c.set_grad(golden("grads.p1").select(0, 0).clone());
  ada.step();
  const std::vector<double> g = values(golden("grads.p1").select(0, 0));
  const std::vector<double> sum = values(ada.state(c).at("sum"));
  for (size_t i = 0; i < g.size(); ++i) EXPECT_FLOAT_EQ(sum[i], 0.25 + g[i] * g[i]);
  EXPECT_EQ(ada.state_dict().at("param_groups.0.initial_accumulator_value").item<double>(), 0.25);
}

// ---- errors ----

TEST(OptimizerErrors, NewOptimizersBadHyperParameters) {
  Tensor a = tensor({1.0f}, {1});
  a.requires_grad_(true);
  EXPECT_WEFT_ERROR(RMSprop({a}, RMSpropOptions{.lr = -1}), "RMSprop: Invalid learning rate: -1");
  EXPECT_WEFT_ERROR(RMSprop({a}, RMSpropOptions{.alpha = -0.5}), "RMSprop: Invalid alpha value: -0.5");
  EXPECT_WEFT_ERROR(RMSprop({a}, RMSpropOptions{.eps = -1e-8}), "RMSprop: Invalid epsilon value: -1e-08");
  EXPECT_WEFT_ERROR(RMSprop({a}, RMSpropOptions{.weight_decay = -2}), "RMSprop: Invalid weight_decay value: -2");
  EXPECT_WEFT_ERROR(RMSprop({a}, RMSpropOptions{.momentum = -0.1}), "RMSprop: Invalid momentum value: -0.1");
  EXPECT_WEFT_ERROR(RMSprop({ParamGroup({a}, {{"centered", 0.5}})}, RMSpropOptions{}),
                    "RMSprop: centered must be 0 or 1, got 0.5");
  EXPECT_WEFT_ERROR(Adagrad({a}, AdagradOptions{.lr = -0.1}), "Adagrad: Invalid learning rate: -0.1");
  EXPECT_WEFT_ERROR(Adagrad({a}, AdagradOptions{.lr_decay = -1}), "Adagrad: Invalid lr_decay value: -1");
  EXPECT_WEFT_ERROR(Adagrad({a}, AdagradOptions{.weight_decay = -1}), "Adagrad: Invalid weight_decay value: -1");
  EXPECT_WEFT_ERROR(Adagrad({a}, AdagradOptions{.initial_accumulator_value = -3}),
                    "Adagrad: Invalid initial_accumulator_value value: -3");
  EXPECT_WEFT_ERROR(Adagrad({a}, AdagradOptions{.eps = -1}), "Adagrad: Invalid epsilon value: -1");
  EXPECT_WEFT_ERROR(Adam({ParamGroup({a}, {{"amsgrad", 3.0}})}, AdamOptions{}), "Adam: amsgrad must be 0 or 1, got 3");
  EXPECT_WEFT_ERROR(RMSprop({ParamGroup({a}, {{"beta1", 0.9}})}, RMSpropOptions{}), "unknown hyper-parameter 'beta1'");
  // float16 parameters: no kernel, and the error names the table.
  Tensor half = tensor({1.0f}, {1}).to(DType::Float16);
  half.requires_grad_(true);
  RMSprop h({half}, RMSpropOptions{});
  half.set_grad(tensor({1.0f}, {1}).to(DType::Float16));
  EXPECT_WEFT_ERROR(h.step(), "rmsprop_step has no kernel for cpu/float16");
}

}  // namespace
}  // namespace weft::optim
