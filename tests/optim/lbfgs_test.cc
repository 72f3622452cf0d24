// LBFGS against torch.optim.LBFGS's trajectories
// (tests/optim/golden/lbfgs_golden.safetensors, from
// tools/golden/make_lbfgs_golden.py): the returned loss, the parameters and the
// evaluation and iteration counts after each step, with and without the
// strong-Wolfe line search, with a history that drops pairs and a max_eval cap.
// Then maximize, the state dict round trip, the early exit and the errors.
#include "optim/lbfgs.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/golden.h"
#include "tests/testing.h"

namespace weft {
namespace {

using testing::tensors_near;

const testing::Golden& golden() {
  static const testing::Golden g("tests/optim/golden/lbfgs_golden.safetensors");
  return g;
}
const Tensor& G(const std::string& key) { return golden()(key); }
constexpr int kSteps = 4;

Tensor rosenbrock(const Tensor& xy) {
  const Tensor x = xy.select(0, 0), y = xy.select(0, 1);
  return pow(1.0 - x, 2) + 100.0 * pow(y - x * x, 2);
}

struct LeastSquares {
  Tensor W = G("ls.W0").clone().requires_grad_(true), c = G("ls.c0").clone().requires_grad_(true);
  Tensor loss() const { return mean(pow(matmul(G("ls.X"), W.t()) + c - G("ls.Y"), 2)) + 0.1 * sum(pow(W, 4)); }
};

// Runs kSteps steps of `opt` on loss_fn and compares each with the golden case.
void check_trajectory(optim::LBFGS& opt, const std::string& c, const std::function<Tensor()>& loss_fn,
                      const std::map<std::string, Tensor>& params) {
  auto closure = [&] {
    opt.zero_grad();
    Tensor loss = loss_fn();
    loss.backward();
    return loss;
  };
  for (int s = 0; s < kSteps; ++s) {
    const std::string k = c + "." + std::to_string(s) + ".";
    SCOPED_TRACE(k);
    Tensor loss = opt.step(closure);
    EXPECT_TRUE(tensors_near(loss, G(k + "loss"), 1e-9));
    for (const auto& [name, p] : params) EXPECT_TRUE(tensors_near(p, G(k + name), 1e-9)) << name;
    EXPECT_EQ(opt.func_evals(), G(k + "func_evals").item<int64_t>());
    EXPECT_EQ(opt.n_iter(), G(k + "n_iter").item<int64_t>());
  }
}

TEST(LBFGS, RosenbrockWithStrongWolfeAgainstPyTorch) {
  Tensor xy = tensor(std::vector<double>{-1.2, 1.0}, {2}).requires_grad_(true);
  optim::LBFGS opt({xy}, {.lr = 1, .max_iter = 20, .line_search = optim::LineSearch::StrongWolfe});
  check_trajectory(opt, "rosen_wolfe", [&] { return rosenbrock(xy); }, {{"xy", xy}});
  // lr 10: the zoom phase's insufficient-progress rule
  Tensor xy10 = tensor(std::vector<double>{-1.2, 1.0}, {2}).requires_grad_(true);
  optim::LBFGS opt10({xy10}, {.lr = 10, .max_iter = 20, .line_search = optim::LineSearch::StrongWolfe});
  check_trajectory(opt10, "rosen_wolfe_lr10", [&] { return rosenbrock(xy10); }, {{"xy", xy10}});
}

TEST(LBFGS, ZoomMovesStepsOffTheBracketEndsAsPyTorch) {
  Tensor x = G("abs15.x0").clone().requires_grad_(true);
  optim::LBFGS opt({x}, {.lr = 30, .max_iter = 20, .line_search = optim::LineSearch::StrongWolfe});
  check_trajectory(opt, "abs15_wolfe_lr30",
                   [&] { return sum(pow(abs(x), 1.5)) + pow(x.select(0, 0) * x.select(0, 1), 2); }, {{"x", x}});
}

TEST(LBFGS, LeastSquaresFixedStepWithAShortHistoryAgainstPyTorch) {
  LeastSquares m;
  optim::LBFGS opt({m.W, m.c}, {.lr = 0.5, .max_iter = 5, .history_size = 3});
  check_trajectory(opt, "ls_fixed", [&] { return m.loss(); }, {{"W", m.W}, {"c", m.c}});
}

TEST(LBFGS, LeastSquaresStrongWolfeCappedByMaxEvalAgainstPyTorch) {
  LeastSquares m;
  optim::LBFGS opt(
      {m.W, m.c},
      {.lr = 1, .max_iter = 10, .max_eval = 12, .history_size = 2, .line_search = optim::LineSearch::StrongWolfe});
  check_trajectory(opt, "ls_wolfe_capped", [&] { return m.loss(); }, {{"W", m.W}, {"c", m.c}});
}

TEST(LBFGS, MaximizeAscendsTheNegatedObjectiveAlongTheSamePath) {
  Tensor a = tensor(std::vector<double>{-1.2, 1.0}, {2}).requires_grad_(true);
  Tensor b = a.detach().clone().requires_grad_(true);
  optim::LBFGS min_opt({a}, {.line_search = optim::LineSearch::StrongWolfe});
  optim::LBFGS max_opt({b}, {.line_search = optim::LineSearch::StrongWolfe, .maximize = true});
  for (int s = 0; s < 2; ++s) {
    Tensor la = min_opt.step([&] {
      min_opt.zero_grad();
      Tensor l = rosenbrock(a);
      l.backward();
      return l;
    });
    Tensor lb = max_opt.step([&] {
      max_opt.zero_grad();
      Tensor l = -rosenbrock(b);
      l.backward();
      return l;
    });
    EXPECT_TRUE(tensors_near(lb, -la, 1e-12));
    EXPECT_TRUE(tensors_near(b, a, 1e-12));
  }
  EXPECT_EQ(max_opt.func_evals(), min_opt.func_evals());
}

TEST(LBFGS, StateDictCarriesTheHistory) {
  LeastSquares m1, m2;
  const optim::LBFGSOptions o{.lr = 0.5, .max_iter = 5, .history_size = 3};
  optim::LBFGS a({m1.W, m1.c}, o), b({m2.W, m2.c}, o);
  auto closure_of = [](optim::LBFGS& opt, const LeastSquares& m) {
    return [&opt, &m] {
      opt.zero_grad();
      Tensor l = m.loss();
      l.backward();
      return l;
    };
  };
  a.step(closure_of(a, m1));
  const optim::OptimizerStateDict sd = a.state_dict();
  EXPECT_EQ(sd.at("lbfgs.old_dirs").sizes(), (Shape{3, 15}));
  EXPECT_EQ(sd.at("lbfgs.n_iter").item<int64_t>(), 5);
  {
    NoGradGuard ng;
    m2.W.copy_(m1.W);
    m2.c.copy_(m1.c);
  }
  b.load_state_dict(sd);
  a.step(closure_of(a, m1));
  b.step(closure_of(b, m2));
  EXPECT_TRUE(tensors_near(m2.W, m1.W, 0));
  EXPECT_EQ(b.func_evals(), a.func_evals());
  // Through the base class too (the Trainer's view), and refused when it does not fit.
  optim::Optimizer& base = b;
  base.load_state_dict(sd);
  optim::OptimizerStateDict bad = sd;
  bad["lbfgs.d"] = zeros({14}, {DType::Float64});
  EXPECT_WEFT_ERROR(b.load_state_dict(bad), "lbfgs.d must be [15] of float64");
  bad = sd;
  bad["lbfgs.extra"] = zeros({1});
  EXPECT_WEFT_ERROR(b.load_state_dict(bad), "unexpected key lbfgs.extra");
}

TEST(LBFGS, StopsAtOnceWhenTheGradientIsBelowTolerance) {
  Tensor xy = tensor(std::vector<double>{1.0, 1.0}, {2}).requires_grad_(true);  // the minimum
  optim::LBFGS opt({xy});
  int calls = 0;
  Tensor loss = opt.step([&] {
    ++calls;
    opt.zero_grad();
    Tensor l = rosenbrock(xy);
    l.backward();
    return l;
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(loss.item<double>(), 0.0);
  EXPECT_EQ(opt.n_iter(), 0);
  EXPECT_TRUE(testing::tensor_near(xy, {1.0, 1.0}, 0));
}

TEST(LBFGS, ErrorsNameWhatIsWrong) {
  Tensor w = zeros({3}, {DType::Float64}).requires_grad_(true);
  optim::LBFGS opt({w});
  EXPECT_WEFT_ERROR(opt.step(), "LBFGS: step() needs a closure");
  EXPECT_WEFT_ERROR(opt.step([] { return zeros({2}); }), "the closure must return the loss, one value; got [2]");
  opt.add_param_group(optim::ParamGroup({zeros({2}, {DType::Float64}).requires_grad_(true)}));
  EXPECT_WEFT_ERROR(opt.step([] { return zeros({}); }), "LBFGS doesn't support per-parameter options");
  Tensor f32 = zeros({2}).requires_grad_(true);
  EXPECT_WEFT_ERROR(optim::LBFGS({w, f32}), "share one dtype and device");
  EXPECT_WEFT_ERROR(optim::LBFGS({w}, {.history_size = 0}), "history_size must be a whole number of at least 1");
  EXPECT_WEFT_ERROR(optim::LBFGS({w}, {.lr = -1}), "LBFGS: Invalid learning rate: -1");
}

}  // namespace
}  // namespace weft
