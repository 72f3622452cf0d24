#include "nn/module.h"

#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "core/rng.h"
#include "nn/nn.h"
#include "tests/testing.h"

namespace weft::nn {
namespace {
using weft::testing::tensor_near;

// y = x * scale + shift (elementwise), with a buffer counting calls.
class Affine : public Module {
 public:
  explicit Affine(int64_t n) : Module("Affine") {
    scale = register_parameter("scale", ones({n}));
    shift = register_parameter("shift", zeros({n}));
    calls = register_buffer("calls", zeros({}, {DType::Int64}));
  }
  Tensor forward(const Tensor& x) override {
    NoGradGuard ng;
    calls.add_(1);
    EnableGradGuard eg;
    return x * scale + shift;
  }
  Tensor scale, shift, calls;
};

class Net : public Module {
 public:
  Net() : Module("Net") {
    a = register_module("a", std::make_shared<Affine>(3));
    inner = register_module("inner", std::make_shared<Sequential>());
    inner->push_back(std::make_shared<Affine>(3));
    inner->push_back(std::make_shared<ReLU>());
    inner->push_back(std::make_shared<Affine>(3));
  }
  Tensor forward(const Tensor& x) override { return (*inner)((*a)(x)); }
  std::shared_ptr<Affine> a;
  std::shared_ptr<Sequential> inner;
};

TEST(Module, NamesInRegistrationOrder) {
  auto net = std::make_shared<Net>();
  std::vector<std::string> names;
  for (auto& [n, p] : net->named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"a.scale", "a.shift", "inner.0.scale", "inner.0.shift", "inner.2.scale",
                                             "inner.2.shift"}));
  std::vector<std::string> bufs;
  for (auto& [n, b] : net->named_buffers()) bufs.push_back(n);
  EXPECT_EQ(bufs, (std::vector<std::string>{"a.calls", "inner.0.calls", "inner.2.calls"}));
  std::vector<std::string> mods;
  for (auto& [n, m] : net->named_modules()) mods.push_back(n);
  EXPECT_EQ(mods, (std::vector<std::string>{"", "a", "inner", "inner.0", "inner.1", "inner.2"}));
  EXPECT_EQ(net->num_parameters(), 18);
  EXPECT_EQ(net->state_dict().keys(),
            (std::vector<std::string>{"a.scale", "a.shift", "a.calls", "inner.0.scale", "inner.0.shift",
                                      "inner.0.calls", "inner.2.scale", "inner.2.shift", "inner.2.calls"}));
}

TEST(Module, RegistrationErrors) {
  Affine m(2);
  EXPECT_WEFT_ERROR(m.register_parameter("scale", ones({2})), "already registered");
  EXPECT_WEFT_ERROR(m.register_parameter("a.b", ones({2})), "contain no '.'");
  Tensor x = ones({2}).requires_grad_();
  EXPECT_WEFT_ERROR(m.register_parameter("y", x * 2), "leaf");
  Sequential s;
  s.push_back(std::make_shared<ReLU>());
  EXPECT_WEFT_ERROR(s[3], "out of range");
  EXPECT_EQ(s[-1]->type_name(), "ReLU");
}

TEST(Module, StateDictRoundTripAndErrors) {
  auto a = std::make_shared<Net>();
  auto b = std::make_shared<Net>();
  {
    NoGradGuard ng;
    a->a->scale.copy_(tensor({1, 2, 3}));
    a->inner->named_parameters();
  }
  Tensor handle = b->a->scale;  // the layer's handle must follow the load
  b->load_state_dict(a->state_dict());
  EXPECT_TRUE(tensor_near(handle, {1, 2, 3}));
  EXPECT_TRUE(handle.requires_grad());

  StateDict sd = a->state_dict();
  StateDict missing;
  for (auto& [k, v] : sd)
    if (k != "a.shift") missing.insert(k, v);
  missing.insert("extra.weight", ones({1}));
  EXPECT_WEFT_ERROR(b->load_state_dict(missing), "missing keys: 'a.shift'");
  EXPECT_WEFT_ERROR(b->load_state_dict(missing), "unexpected keys: 'extra.weight'");
  auto res = b->load_state_dict(missing, /*strict=*/false);
  EXPECT_EQ(res.missing_keys, std::vector<std::string>{"a.shift"});
  EXPECT_EQ(res.unexpected_keys, std::vector<std::string>{"extra.weight"});
  StateDict bad = a->state_dict();
  bad.insert("inner.0.scale", ones({4}));
  EXPECT_WEFT_ERROR(b->load_state_dict(bad, false), "'inner.0.scale': checkpoint shape [4] vs model shape [3]");
}

TEST(Module, TrainEvalZeroGradApply) {
  auto net = std::make_shared<Net>();
  net->eval();
  for (auto& [n, m] : net->named_modules()) EXPECT_FALSE(m->is_training()) << n;
  net->train();
  EXPECT_TRUE(net->inner->operator[](1)->is_training());
  Tensor y = (*net)(tensor({1, -2, 3})).sum();
  y.backward();
  EXPECT_TRUE(net->a->scale.grad().defined());
  net->zero_grad(/*set_to_none=*/false);
  EXPECT_TRUE(tensor_near(net->a->scale.grad(), {0, 0, 0}));
  net->zero_grad();
  EXPECT_FALSE(net->a->scale.grad().defined());
  int count = 0;
  net->apply([&](Module&) { ++count; });
  EXPECT_EQ(count, 6);
  EXPECT_TRUE(tensor_near(net->a->calls, {1}));
}

TEST(Module, ForwardHooksRunInOrderAndRemove) {
  Affine m(2);
  std::vector<std::string> log;
  auto h1 =
      m.register_forward_pre_hook([&](Module&, const Tensor& x) { log.push_back("pre" + std::to_string(x.numel())); });
  auto h2 = m.register_forward_hook(
      [&](Module&, const Tensor&, const Tensor& out) { log.push_back("post" + std::to_string(out.numel())); });
  m(ones({2}));
  h1.remove();
  m(ones({2}));
  h2.remove();
  m(ones({2}));
  EXPECT_EQ(log, (std::vector<std::string>{"pre2", "post2", "post2"}));
}

TEST(Module, ToDtypeKeepsHandles) {
  Affine m(2);
  Tensor handle = m.scale;
  m.to(DType::Float64);
  EXPECT_EQ(handle.dtype(), DType::Float64);
  EXPECT_EQ(m.calls.dtype(), DType::Int64);  // integer buffers are not converted
  EXPECT_TRUE(tensor_near(handle, {1, 1}));
}

TEST(Init, PyTorchDefaultBoundsForLinearAndConv) {
  manual_seed(0);
  Linear lin(400, 30);
  double bound = 1.0 / std::sqrt(400.0);
  auto w = weft::testing::values(lin.weight);
  double lo = *std::min_element(w.begin(), w.end()), hi = *std::max_element(w.begin(), w.end());
  EXPECT_GE(lo, -bound);
  EXPECT_LE(hi, bound);
  EXPECT_LT(lo, -0.9 * bound);  // 12000 uniform draws reach close to both ends
  EXPECT_GT(hi, 0.9 * bound);
  Conv2d conv(3, 8, 5);
  double cb = 1.0 / std::sqrt(3.0 * 25.0);
  auto c = weft::testing::values(conv.weight);
  EXPECT_LE(*std::max_element(c.begin(), c.end()), cb);
  EXPECT_GE(*std::min_element(c.begin(), c.end()), -cb);
  BatchNorm2d bn(4);
  EXPECT_TRUE(tensor_near(bn.weight, {1, 1, 1, 1}));
  EXPECT_TRUE(tensor_near(bn.running_var, {1, 1, 1, 1}));
  EXPECT_WEFT_ERROR(nn::init::fans(ones({3})), "fewer than 2 dims");
}

}  // namespace
}  // namespace weft::nn
