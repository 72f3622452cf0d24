// A child module kept as a plain member is not registered, so the model's
// parameters() is empty: SGD and Adam refuse it with an error that says how to
// register children and tensors. Registered children give the optimizer their
// parameters, and a step moves them.
#include <memory>

#include <gtest/gtest.h>

#include "nn/layers.h"
#include "nn/module.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "tests/testing.h"

namespace weft::optim {
namespace {

// The mistake: fc is a member but never passed to register_module.
struct UnregisteredNet : nn::Module {
  UnregisteredNet() : nn::Module("UnregisteredNet"), fc(std::make_shared<nn::Linear>(3, 2)) {}
  Tensor forward(const Tensor& x) override { return fc->forward(x); }
  std::shared_ptr<nn::Linear> fc;
};

struct RegisteredNet : nn::Module {
  RegisteredNet() : nn::Module("RegisteredNet") { fc = register_module("fc", std::make_shared<nn::Linear>(3, 2)); }
  Tensor forward(const Tensor& x) override { return fc->forward(x); }
  std::shared_ptr<nn::Linear> fc;
};

TEST(UnregisteredModule, OptimizersNameTheRegistrationFunctions) {
  UnregisteredNet net;
  ASSERT_TRUE(net.parameters().empty());
  EXPECT_WEFT_ERROR(SGD(net.parameters(), SGDOptions{.lr = 0.1}), "SGD: optimizer got an empty parameter list");
  EXPECT_WEFT_ERROR(SGD(net.parameters(), SGDOptions{.lr = 0.1}), "register_module(\"name\", child)");
  EXPECT_WEFT_ERROR(SGD(net.parameters(), SGDOptions{.lr = 0.1}), "register_parameter");
  EXPECT_WEFT_ERROR(SGD(net.parameters(), SGDOptions{.lr = 0.1}), "no registered parameters");
  EXPECT_WEFT_ERROR(Adam(net.parameters(), AdamOptions{}), "Adam: optimizer got an empty parameter list");
  EXPECT_WEFT_ERROR(Adam(net.parameters(), AdamOptions{}), "register_module(\"name\", child)");
  // the named form and an empty group list say the same
  EXPECT_WEFT_ERROR(SGD(net.named_parameters(), SGDOptions{}), "register_module");
  EXPECT_WEFT_ERROR(Adam(std::vector<ParamGroup>{}, AdamOptions{}), "register_module");
}

TEST(UnregisteredModule, RegisteredChildTrains) {
  RegisteredNet net;
  auto params = net.parameters();
  ASSERT_EQ(params.size(), 2u);  // fc.weight, fc.bias
  SGD opt(params, SGDOptions{.lr = 0.5});
  Tensor w0 = net.fc->weight.detach().clone(), b0 = net.fc->bias.detach().clone();
  Tensor x = tensor<double>({1, 2, 3}, {1, 3}).to(DType::Float32);
  opt.zero_grad();
  sum(net.forward(x)).backward();
  opt.step();
  // d sum(W x + b) / dW = 1 x^T per row, / db = 1: w <- w - 0.5 x, b <- b - 0.5
  std::vector<double> want_w, want_b;
  std::vector<double> w = testing::values(w0), b = testing::values(b0);
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 3; ++c) want_w.push_back(w[r * 3 + c] - 0.5 * (c + 1));
  for (int r = 0; r < 2; ++r) want_b.push_back(b[r] - 0.5);
  EXPECT_TRUE(testing::tensor_near(net.fc->weight, want_w, 1e-6));
  EXPECT_TRUE(testing::tensor_near(net.fc->bias, want_b, 1e-6));
  Adam adam(net.parameters(), AdamOptions{});
  EXPECT_EQ(adam.param_groups().size(), 1u);
}

}  // namespace
}  // namespace weft::optim
