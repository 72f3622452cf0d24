// Double backward through the library's own modules (Note [double backward]
// in core/autograd_meta.h): a gradient penalty (|dD/dx| - 1)^2, as WGAN-GP
// puts on a critic, differentiated with respect to every parameter of a
// transformer block (its attention splits the fused qkv projection), a GRU
// (its gates are chunks) and an LSTM (the fused cell), in float64 against
// central finite differences of the penalty.
#include <functional>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "autograd/gradcheck.h"
#include "core/rng.h"
#include "nn/rnn.h"
#include "nn/transformer.h"
#include "tests/testing.h"

namespace weft {
namespace {

// mean over rows of (|d(sum(D(x) * w))/dx_row| - 1)^2, x's rows along dim 0.
Tensor gradient_penalty(const std::function<Tensor(const Tensor&)>& critic, const Tensor& x0, const Tensor& w) {
  EnableGradGuard grad_mode;
  Tensor x = x0.detach().requires_grad_(true);
  Tensor g = autograd::grad({sum(critic(x) * w)}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
  std::vector<int64_t> rest;
  for (int64_t d = 1; d < g.dim(); ++d) rest.push_back(d);
  Tensor norm = sqrt(sum(g * g, rest) + 1e-12);
  return mean((norm - 1.0) * (norm - 1.0));
}

void check_penalty(nn::Module& m, const std::function<Tensor(const Tensor&)>& critic, const Tensor& x0) {
  const Tensor w = testing::rnd(critic(x0).sizes(), DType::Float64, 99);
  const int64_t before = Node::live_count();
  std::vector<Tensor> ps = m.parameters();
  // the penalty reaches every weight matrix (a bias added last can drop out
  // of dD/dx, so its derivative may be zero)
  std::vector<Tensor> gs = autograd::grad({gradient_penalty(critic, x0, w)}, ps, {}, std::nullopt, false, true);
  for (size_t i = 0; i < gs.size(); ++i) {
    if (ps[i].dim() < 2) continue;
    ASSERT_TRUE(gs[i].defined()) << "parameter " << i;
    EXPECT_GT(norm(gs[i]).item<double>(), 0.0) << "parameter " << i;
  }
  // gradcheck perturbs the module's parameters in place
  auto r = autograd::gradcheck([&](const std::vector<Tensor>&) { return gradient_penalty(critic, x0, w); }, ps,
                               {.eps = 1e-6, .atol = 1e-7, .rtol = 1e-5});
  EXPECT_TRUE(r.ok) << r.message;
  gs.clear();
  EXPECT_EQ(Node::live_count(), before);
}

TEST(ModuleDoubleBackward, TransformerBlock) {
  manual_seed(1);
  auto block = std::make_shared<nn::TransformerBlock>(4, 2);
  block->to(DType::Float64);
  const Tensor x0 = testing::rnd({2, 3, 4}, DType::Float64, 2);  // (B, T, C)
  check_penalty(
      *block, [&](const Tensor& x) { return (*block)(x); }, x0);
}

TEST(ModuleDoubleBackward, Gru) {
  manual_seed(3);
  auto gru = std::make_shared<nn::GRU>(3, 4, nn::GRUOptions{.batch_first = true});
  gru->to(DType::Float64);
  const Tensor x0 = testing::rnd({2, 4, 3}, DType::Float64, 4);  // (N, T, in)
  check_penalty(
      *gru, [&](const Tensor& x) { return gru->forward(x).output; }, x0);
}

TEST(ModuleDoubleBackward, Lstm) {
  manual_seed(5);
  auto lstm = std::make_shared<nn::LSTM>(3, 4, nn::LSTMOptions{.batch_first = true});
  lstm->to(DType::Float64);
  const Tensor x0 = testing::rnd({2, 4, 3}, DType::Float64, 6);  // (N, T, in)
  check_penalty(
      *lstm,
      [&](const Tensor& x) {
        nn::LSTMOutput o = lstm->forward(x);
        return o.output * 2.0 + o.c_n.transpose(0, 1);
      },
      x0);
}

}  // namespace
}  // namespace weft
