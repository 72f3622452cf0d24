// Double backward (Note [double backward] in core/autograd_meta.h): gradients
// computed with create_graph are differentiated again. Checked against hand-
// worked derivatives and against central finite differences of the first
// gradient (gradgradcheck); ops whose backward cannot build a graph refuse a
// second backward by name instead of giving a wrong zero.
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/gradcheck.h"
#include "core/autograd_meta.h"
#include "core/nn_ops.h"
#include "tests/testing.h"

namespace weft {
namespace {

using testing::tensor_near;
using testing::values;

Tensor leaf64(std::vector<double> v) { return tensor(v).requires_grad_(true); }

// The second derivatives of f in x: testing::double_backward_check.
::testing::AssertionResult gradgradcheck(const std::function<Tensor(const Tensor&)>& f, const Tensor& x) {
  return testing::double_backward_check([&](const std::vector<Tensor>& in) { return f(in[0]); }, {x}, 1e-6, 1e-12);
}

TEST(DoubleBackward, PowersByHand) {
  Tensor x = leaf64({0.5, -1.5, 2.0});
  for (bool use_pow : {false, true}) {
    Tensor y = sum(use_pow ? pow(x, 3) : x * x * x);
    Tensor g1 = autograd::grad({y}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];  // 3 x^2
    EXPECT_TRUE(tensor_near(g1, {0.75, 6.75, 12.0}, 1e-12));
    ASSERT_TRUE(g1.requires_grad());
    Tensor g2 = autograd::grad({sum(g1)}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];  // 6 x
    EXPECT_TRUE(tensor_near(g2, {3.0, -9.0, 12.0}, 1e-12));
    Tensor g3 = autograd::grad({sum(g2)}, {x})[0];  // 6
    EXPECT_TRUE(tensor_near(g3, {6.0, 6.0, 6.0}, 1e-12));
    EXPECT_FALSE(g3.requires_grad());
  }
}

TEST(DoubleBackward, UnarySecondDerivativesByHand) {
  const std::vector<double> xs = {0.3, 0.7, 1.9};
  struct Case {
    const char* name;
    std::function<Tensor(const Tensor&)> f;
    std::function<double(double)> d2;  // f''(x)
  };
  const double pi = 3.14159265358979323846;
  auto sig = [](double x) { return 1 / (1 + std::exp(-x)); };
  const std::vector<Case> cases = {
      {"exp", [](const Tensor& x) { return exp(x); }, [](double x) { return std::exp(x); }},
      {"log", [](const Tensor& x) { return log(x); }, [](double x) { return -1 / (x * x); }},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, [](double x) { return -0.25 * std::pow(x, -1.5); }},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, [](double x) { return 0.75 * std::pow(x, -2.5); }},
      {"tanh", [](const Tensor& x) { return tanh(x); },
       [](double x) { return -2 * std::tanh(x) * (1 - std::tanh(x) * std::tanh(x)); }},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); },
       [&](double x) { return sig(x) * (1 - sig(x)) * (1 - 2 * sig(x)); }},
      {"silu", [](const Tensor& x) { return silu(x); },
       [&](double x) { return sig(x) * (1 - sig(x)) * (2 + x * (1 - 2 * sig(x))); }},
      {"sin", [](const Tensor& x) { return sin(x); }, [](double x) { return -std::sin(x); }},
      {"cos", [](const Tensor& x) { return cos(x); }, [](double x) { return -std::cos(x); }},
      {"erf", [](const Tensor& x) { return erf(x); },
       [&](double x) { return -4 * x / std::sqrt(pi) * std::exp(-x * x); }},
      {"log1p", [](const Tensor& x) { return log1p(x); }, [](double x) { return -1 / ((1 + x) * (1 + x)); }},
      {"expm1", [](const Tensor& x) { return expm1(x); }, [](double x) { return std::exp(x); }},
      {"reciprocal", [](const Tensor& x) { return reciprocal(x); }, [](double x) { return 2 / (x * x * x); }},
      {"abs", [](const Tensor& x) { return abs(x) * x; }, [](double) { return 2.0; }},    // x|x|, x > 0
      {"relu", [](const Tensor& x) { return relu(x) * x; }, [](double) { return 2.0; }},  // x^2 for x > 0
      {"neg", [](const Tensor& x) { return -(x * x); }, [](double) { return -2.0; }},
      {"div", [](const Tensor& x) { return 1.0 / x; }, [](double x) { return 2 / (x * x * x); }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Tensor x = tensor(xs).requires_grad_(true);
    Tensor g1 = autograd::grad({sum(c.f(x))}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
    Tensor g2 = autograd::grad({sum(g1)}, {x})[0];
    std::vector<double> want;
    for (double v : xs) want.push_back(c.d2(v));
    EXPECT_TRUE(tensor_near(g2, want, 1e-12));
  }
}

TEST(DoubleBackward, GradGradCheckOnComposedOps) {
  Tensor x = testing::rnd({2, 3}, DType::Float64, 3).requires_grad_(true);
  Tensor w = testing::rnd({3, 4}, DType::Float64, 4);
  const std::vector<std::pair<const char*, std::function<Tensor(const Tensor&)>>> cases = {
      {"matmul tanh", [&](const Tensor& v) { return tanh(matmul(v, w)); }},
      {"matmul with x on the right",
       [&](const Tensor& v) { return sigmoid(matmul(transpose(w, 0, 1), transpose(exp(v), 0, 1))); }},
      {"linear with bias", [&](const Tensor& v) { return tanh(linear(v, transpose(w, 0, 1), sum(w, {0}))) * sum(v); }},
      {"views and reductions",
       [&](const Tensor& v) { return mean(sin(reshape(transpose(v, 0, 1), {6})) * expand(sum(v * v), {6})); }},
      {"broadcast add and pow", [&](const Tensor& v) { return pow(v + sum(v, {0}, true), 2.5 - 0.5) / (1.0 + v * v); }},
  };
  for (const auto& [name, f] : cases) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(gradgradcheck(f, x));
  }
}

// A small network u(x) differentiated twice with respect to its input, and a
// loss on u'' differentiated with respect to the weights: a physics-informed
// network's residual.
struct Mlp {
  Tensor w1, b1, w2, b2, w3;
  Tensor operator()(const Tensor& x) const {  // x (n, 1) -> (n, 1)
    Tensor h = tanh(linear(x, w1, b1));       // (n, 8)
    h = tanh(linear(h, w2, b2));              // (n, 8)
    return linear(h, w3);                     // (n, 1)
  }
  std::vector<Tensor> params() const { return {w1, b1, w2, b2, w3}; }
};

Mlp make_mlp() {
  auto p = [](Shape s, uint64_t seed) { return testing::rnd(s, DType::Float64, seed).requires_grad_(true); };
  return {p({8, 1}, 11), p({8}, 12), p({8, 8}, 13), p({8}, 14), p({1, 8}, 15)};
}

// u'(x) for every row of x, built as a graph when create_graph.
Tensor du_dx(const Mlp& m, const Tensor& x, bool create_graph) {
  Tensor u = m(x);
  return autograd::grad({sum(u)}, {x}, {}, std::nullopt, create_graph)[0];
}

TEST(DoubleBackward, NetworkDerivativesInALossMatchFiniteDifferences) {
  Mlp m = make_mlp();
  Tensor x = tensor(std::vector<double>{-0.8, 0.1, 0.9}, {3, 1}).requires_grad_(true);
  Tensor d1 = du_dx(m, x, true);
  Tensor d2 = autograd::grad({sum(d1)}, {x}, {}, std::nullopt, true)[0];  // u''(x), (3, 1)
  // u'' against central differences of u' (first-order gradients only)
  const double h = 1e-5;
  auto d1_at = [&](double shift) {
    Tensor xs = (x.detach() + shift).requires_grad_(true);
    return values(du_dx(m, xs, false));
  };
  std::vector<double> fd;
  auto hi = d1_at(h), lo = d1_at(-h);
  for (size_t i = 0; i < hi.size(); ++i) fd.push_back((hi[i] - lo[i]) / (2 * h));
  EXPECT_TRUE(tensor_near(d2, fd, 1e-7));
  // the residual's gradient with respect to every weight, against gradcheck
  auto r = autograd::gradcheck(
      [&](const std::vector<Tensor>& ps) {
        EnableGradGuard grad_mode;
        Mlp mm{ps[0], ps[1], ps[2], ps[3], ps[4]};
        Tensor xs = x.detach().requires_grad_(true);
        Tensor g1 = du_dx(mm, xs, true);
        Tensor g2 = autograd::grad({sum(g1)}, {xs}, {}, std::nullopt, true)[0];
        return mean((g2 + g1 * 0.5) * (g2 + g1 * 0.5));
      },
      m.params(), {.eps = 1e-6, .atol = 1e-7, .rtol = 1e-5});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(DoubleBackward, GradientPenaltyThroughBackwardCreateGraph) {
  Mlp m = make_mlp();
  // penalty (|dD/dx| - 1)^2 on a batch, backpropagated into the weights with
  // Tensor::backward; .grad is set on the weights (first order of the penalty)
  auto penalty = [&](const std::vector<Tensor>& ps) {
    EnableGradGuard grad_mode;
    Mlp mm{ps[0], ps[1], ps[2], ps[3], ps[4]};
    Tensor xs = tensor(std::vector<double>{-0.5, 0.25, 1.5, 2.0}, {4, 1}).requires_grad_(true);
    Tensor g = autograd::grad({sum(mm(xs))}, {xs}, {}, std::nullopt, true)[0];
    Tensor norm = sqrt(sum(g * g, {1}) + 1e-12);
    return mean((norm - 1.0) * (norm - 1.0));
  };
  Tensor p = penalty(m.params());
  p.backward();
  auto r = autograd::gradcheck(penalty, m.params(), {.eps = 1e-6, .atol = 1e-8, .rtol = 1e-5});
  EXPECT_TRUE(r.ok) << r.message;
  // .grad from backward() equals grad() on a fresh graph
  std::vector<Tensor> want = autograd::grad({penalty(m.params())}, m.params());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(testing::tensors_near(m.params()[i].grad(), want[i], 1e-12));
}

TEST(DoubleBackward, BackwardWithCreateGraphKeepsHistoryInGrad) {
  Tensor x = leaf64({1.0, -2.0});
  sum(x * x * x).backward(Tensor(), std::nullopt, /*create_graph=*/true);
  ASSERT_TRUE(x.grad().requires_grad());
  EXPECT_TRUE(tensor_near(x.grad(), {3.0, 12.0}, 1e-12));
  Tensor gg = autograd::grad({sum(x.grad())}, {x})[0];  // 6 x
  EXPECT_TRUE(tensor_near(gg, {6.0, -12.0}, 1e-12));
  // without create_graph .grad has no history, as before
  Tensor z = leaf64({1.0, -2.0});
  sum(z * z * z).backward();
  EXPECT_FALSE(z.grad().requires_grad());
}

TEST(DoubleBackward, RetainGraphDefaultsToCreateGraph) {
  Tensor x = leaf64({0.5, 1.5});
  Tensor y = sum(exp(x) * x);
  autograd::grad({y}, {x}, {}, std::nullopt, /*create_graph=*/true);
  EXPECT_NO_THROW(autograd::grad({y}, {x}));  // kept by the first call
  EXPECT_WEFT_ERROR(autograd::grad({y}, {x}), "a second time");
}

TEST(DoubleBackward, GradOutputsWithHistoryAreDifferentiated) {
  // a vector-Jacobian product v^T J with v depending on x: d/dx sum(v * 2x) = 2v + 2x dv/dx
  Tensor x = leaf64({1.0, 3.0});
  Tensor v = x * x;
  Tensor g = autograd::grad({x * x}, {x}, {v}, std::nullopt, true)[0];  // v * 2x = 2x^3
  EXPECT_TRUE(tensor_near(g, {2.0, 54.0}, 1e-12));
  Tensor gg = autograd::grad({sum(g)}, {x})[0];  // 6x^2
  EXPECT_TRUE(tensor_near(gg, {6.0, 54.0}, 1e-12));
}

TEST(DoubleBackward, MoreComposedOpsGradGradCheck) {
  Tensor x = testing::rnd({2, 3}, DType::Float64, 5).requires_grad_(true);
  Tensor c = testing::rnd({2, 3}, DType::Float64, 6);
  const std::vector<std::pair<const char*, std::function<Tensor(const Tensor&)>>> cases = {
      {"softmax", [&](const Tensor& v) { return softmax(v * v, 1) * c; }},
      {"log_softmax", [&](const Tensor& v) { return log_softmax(v * 2.0, 0) * c; }},
      {"where", [&](const Tensor& v) { return where(gt(c, zeros_like(c)), v * v * v, sin(v)); }},
      {"pow of two tensors", [&](const Tensor& v) { return pow(exp(v), v * c); }},
      {"cat",
       [&](const Tensor& v) {
         return cat({v * v, exp(v)}, 1) * cat({c, c}, 1);
       }},
      {"maximum", [&](const Tensor& v) { return maximum(v * v, c) * v; }},
      {"minimum", [&](const Tensor& v) { return minimum(v * v * v, c) * v; }},
      {"gelu", [&](const Tensor& v) { return gelu(v * 1.5) * v; }},
      {"gelu tanh", [&](const Tensor& v) { return gelu(v * 1.5, GeluApproximation::Tanh) * v; }},
      {"mse_loss mean", [&](const Tensor& v) { return mse_loss(tanh(v), c) * sum(v); }},
      {"mse_loss sum, target with history", [&](const Tensor& v) { return mse_loss(c, v * v, Reduction::Sum); }},
      {"mse_loss none", [&](const Tensor& v) { return mse_loss(v * v, c, Reduction::None) * v; }},
  };
  for (const auto& [name, f] : cases) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(gradgradcheck(f, x));
  }
}

TEST(DoubleBackward, MaximumTiesAndMseByHand) {
  // maximum(x, 1) at a tie gives half of g to each side, as the first-order kernel
  Tensor x = leaf64({1.0, 2.0, 0.5});
  Tensor g = autograd::grad({sum(maximum(x * x, ones_like(x)))}, {x}, {}, std::nullopt, true)[0];
  EXPECT_TRUE(tensor_near(g, {1.0, 4.0, 0.0}, 1e-12));  // 2x * (1/2), 2x, 0
  EXPECT_TRUE(tensor_near(autograd::grad({sum(g)}, {x})[0], {1.0, 2.0, 0.0}, 1e-12));
  // mse_loss(x, t) mean over n: g = 2 (x - t) / n, g' = 2 / n
  Tensor t = tensor(std::vector<double>{0.0, 1.0, 1.0});
  Tensor gm = autograd::grad({mse_loss(x * x, t)}, {x}, {}, std::nullopt, true)[0];  // 4 x (x^2 - t) / 3
  EXPECT_TRUE(tensor_near(gm, {4.0 / 3, 8.0 * 3 / 3, 2.0 * -0.75 / 3}, 1e-12));
  // d/dx of 4 x (x^2 - t) / 3 = (12 x^2 - 4 t) / 3
  EXPECT_TRUE(tensor_near(autograd::grad({sum(gm)}, {x})[0], {4.0, 44.0 / 3, -1.0 / 3}, 1e-12));
}

TEST(DoubleBackward, FirstOrderGradientsStayWithoutHistory) {
  Tensor x = leaf64({0.5, 2.0});
  Tensor g = autograd::grad({sum(tanh(x) * x)}, {x})[0];
  EXPECT_FALSE(g.requires_grad());
  EXPECT_EQ(g.grad_fn(), nullptr);
}

TEST(DoubleBackward, NoNodeOutlivesTheGraphs) {
  const int64_t before = Node::live_count();
  {
    Mlp m = make_mlp();
    Tensor x = tensor(std::vector<double>{0.2, 0.4}, {2, 1}).requires_grad_(true);
    Tensor d1 = du_dx(m, x, true);
    Tensor d2 = autograd::grad({sum(d1)}, {x}, {}, std::nullopt, true)[0];
    Tensor loss = mean(d2 * d2) + mean(maximum(d1, d2));
    loss.backward();
    // .grad with history is a graph that x holds and that holds x, as in
    // PyTorch: the cycle is broken by clearing the gradient
    sum(exp(x)).backward(Tensor(), std::nullopt, true);
    EXPECT_TRUE(x.grad().requires_grad());
    x.zero_grad();
    for (const Tensor& p : m.params()) p.zero_grad();
  }
  EXPECT_EQ(Node::live_count(), before);
}

}  // namespace
}  // namespace weft
