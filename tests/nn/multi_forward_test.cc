// Multi-tensor forward (Note [multi-tensor forward] in nn/module.h): a module
// returning (activation, gate), a Sequential chaining tuples between children,
// gradients through both outputs against a hand-derived reference, the
// one-tensor bridge both ways, count errors naming the module, and hooks on
// both call forms.
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "nn/nn.h"
#include "tests/testing.h"

namespace weft::nn {
namespace {
using testing::tensor_near;
using testing::values;

// x -> (tanh(x), sigmoid(x)): an activation and a soft mask.
class Gate : public Module {
 public:
  Gate() : Module("Gate") {}
  Tensors forward_multi(const Tensors& in) override {
    WEFT_CHECK(in.size() == 1, "Gate takes one tensor");
    return {tanh(in[0]), sigmoid(in[0])};
  }
};

// (a, m) -> (a * m, m): applies the mask and passes it on.
class ApplyMask : public Module {
 public:
  ApplyMask() : Module("ApplyMask") {}
  Tensors forward_multi(const Tensors& in) override {
    WEFT_CHECK(in.size() == 2, "ApplyMask takes (activation, mask)");
    return {in[0] * in[1], in[1]};
  }
};

// Overrides only forward_multi, one tensor each way: callable as (*m)(x).
class Double : public Module {
 public:
  Double() : Module("Double") {}
  Tensors forward_multi(const Tensors& in) override { return {in.at(0) * 2.0}; }
};

class Neither : public Module {
 public:
  Neither() : Module("Neither") {}
};

TEST(MultiForward, SequentialChainsTuplesAndGradientsFlowThroughBoth) {
  // z = x W^T + b; a = tanh z; m = sigmoid z; y = a * m; L = sum(y) + 2 sum(m^2).
  auto lin = std::make_shared<Linear>(3, 2);
  Tensor W = testing::rnd({2, 3}, kFloat64, 1), bias = testing::rnd({2}, kFloat64, 2);
  lin->to(kFloat64);
  lin->load_state_dict({{"weight", W}, {"bias", bias}});
  auto seq = Sequential::of(lin, std::make_shared<Gate>(), std::make_shared<ApplyMask>());
  Tensor x = testing::rnd({4, 3}, kFloat64, 3).requires_grad_();
  Tensors out = (*seq)(Tensors{x});
  ASSERT_EQ(out.size(), 2u);
  Tensor L = out[0].sum() + 2.0 * (out[1] * out[1]).sum();
  L.backward();

  // Reference by hand: dL/dz = m (1 - a^2) + a m (1 - m) + 4 m * m (1 - m).
  auto xv = values(x), wv = values(W), bv = values(bias);
  std::vector<double> y(8), mm(8), dz(8), dW(6, 0.0), db(2, 0.0), dx(12, 0.0);
  for (int i = 0; i < 4; ++i)
    for (int o = 0; o < 2; ++o) {
      double z = bv[o];
      for (int k = 0; k < 3; ++k) z += xv[i * 3 + k] * wv[o * 3 + k];
      double a = std::tanh(z), m = 1.0 / (1.0 + std::exp(-z));
      y[i * 2 + o] = a * m;
      mm[i * 2 + o] = m;
      double g = m * (1 - a * a) + a * m * (1 - m) + 4 * m * m * (1 - m);
      dz[i * 2 + o] = g;
      db[o] += g;
      for (int k = 0; k < 3; ++k) {
        dW[o * 3 + k] += g * xv[i * 3 + k];
        dx[i * 3 + k] += g * wv[o * 3 + k];
      }
    }
  EXPECT_TRUE(tensor_near(out[0], y, 1e-12));
  EXPECT_TRUE(tensor_near(out[1], mm, 1e-12));
  EXPECT_TRUE(tensor_near(lin->weight.grad(), dW, 1e-12));
  EXPECT_TRUE(tensor_near(lin->bias.grad(), db, 1e-12));
  EXPECT_TRUE(tensor_near(x.grad(), dx, 1e-12));
}

TEST(MultiForward, OneTensorBridgeBothWays) {
  // A single-tensor Sequential gives the same through either call form.
  auto seq = Sequential::of(std::make_shared<Linear>(3, 3), std::make_shared<Tanh>());
  Tensor x = testing::rnd({2, 3}, kFloat32, 4);
  Tensors via_multi = (*seq)(Tensors{x});
  ASSERT_EQ(via_multi.size(), 1u);
  EXPECT_TRUE(equal(via_multi[0], (*seq)(x)));
  // forward_multi only, one in one out: (*m)(x) works, also inside a Sequential.
  auto d = std::make_shared<Double>();
  EXPECT_TRUE(tensor_near((*d)(tensor({1.0f, 2.0f})), {2, 4}));
  EXPECT_TRUE(tensor_near((*Sequential::of(d, d))(tensor({1.0f})), {4}));
  // A Sequential whose chain starts with one tensor and ends with one.
  auto round = Sequential::of(std::make_shared<Gate>(), std::make_shared<ApplyMask>());
  EXPECT_WEFT_ERROR((*round)(x), "Sequential: its last module returned 2 tensors");
}

TEST(MultiForward, CountErrorsNameTheModuleAndTheCount) {
  Linear lin(3, 3);
  Tensor x = testing::rnd({2, 3}, kFloat32, 5);
  EXPECT_WEFT_ERROR(lin(Tensors{x, x}), "Linear: forward_multi got 2 tensors, but Linear takes one tensor");
  EXPECT_WEFT_ERROR(lin(Tensors{}), "Linear: forward_multi got 0 tensors");
  Gate g;
  EXPECT_WEFT_ERROR(g(x), "Gate: forward_multi returned 2 tensors where forward(Tensor) returns one");
  Neither n;
  EXPECT_WEFT_ERROR(n(x), "Neither overrides neither forward(Tensor) nor forward_multi(Tensors)");
  EXPECT_WEFT_ERROR(n(Tensors{x}), "Neither overrides neither forward(Tensor) nor forward_multi(Tensors)");
  // Inside a Sequential the child's own error comes through.
  auto seq = Sequential::of(std::make_shared<Gate>(), std::make_shared<Linear>(3, 3));
  EXPECT_WEFT_ERROR((*seq)(Tensors{x}), "Linear: forward_multi got 2 tensors");
}

TEST(MultiForward, HooksRunOnBothCallFormsInRegistrationOrder) {
  auto gate = std::make_shared<Gate>();
  std::vector<std::string> log;
  auto h1 = gate->register_forward_pre_hook(
      [&](Module&, const Tensor& x) { log.push_back("pre1:" + std::to_string(x.numel())); });
  auto h2 = gate->register_forward_pre_hook_multi(
      [&](Module&, const Tensors& in) { log.push_back("pre*:" + std::to_string(in.size())); });
  auto h3 = gate->register_forward_hook_multi([&](Module&, const Tensors& in, const Tensors& out) {
    log.push_back("post*:" + std::to_string(in.size()) + "->" + std::to_string(out.size()));
  });
  auto h4 = gate->register_forward_hook([&](Module&, const Tensor& in, const Tensor& out) {
    // the single-tensor view: first input, first output (tanh)
    log.push_back("post1:" + std::to_string(in.numel()) + (equal(out, tanh(in)) ? ",tanh" : ",?"));
  });
  Tensor x = testing::rnd({3}, kFloat32, 6);
  (*gate)(Tensors{x});
  EXPECT_EQ(log, (std::vector<std::string>{"pre1:3", "pre*:1", "post*:1->2", "post1:3,tanh"}));
  log.clear();
  // Called from a Sequential: the child's hooks run once per call.
  auto seq = Sequential::of(gate, std::make_shared<ApplyMask>());
  std::vector<std::string> seq_log;
  auto hs = seq->register_forward_hook_multi([&](Module& m, const Tensors& in, const Tensors& out) {
    seq_log.push_back(m.type_name() + ":" + std::to_string(in.size()) + "->" + std::to_string(out.size()));
  });
  (*seq)(Tensors{x});
  EXPECT_EQ(log.size(), 4u);
  EXPECT_EQ(seq_log, (std::vector<std::string>{"Sequential:1->2"}));
  // The single-tensor call form runs the multi hooks too.
  log.clear();
  Linear lin(3, 3);
  auto hl = lin.register_forward_hook_multi([&](Module&, const Tensors& in, const Tensors& out) {
    log.push_back("lin:" + std::to_string(in.size()) + "->" + std::to_string(out.size()));
  });
  lin(x);
  EXPECT_EQ(log, (std::vector<std::string>{"lin:1->1"}));
  // Removal works for both kinds.
  log.clear();
  h1.remove();
  h3.remove();
  (*gate)(Tensors{x});
  EXPECT_EQ(log, (std::vector<std::string>{"pre*:1", "post1:3,tanh"}));
}

}  // namespace
}  // namespace weft::nn
