// Custom autograd functions (autograd/function.h).
#include "autograd/function.h"

#include <any>
#include <vector>

#include "autograd/engine.h"
#include "autograd/gradcheck.h"
#include "tests/testing.h"

namespace weft {
namespace {

using autograd::AutogradContext;
using autograd::Function;
using testing::tensor_near;

// y = a * b * s  (s a double, stored in saved_data)
struct ScaledMul : Function<ScaledMul> {
  static const char* name() { return "ScaledMulBackward"; }
  static Tensor forward(AutogradContext* ctx, const Tensor& a, const Tensor& b, double s) {
    EXPECT_FALSE(GradMode::is_enabled());  // forward runs without recording
    ctx->save_for_backward({a, b});
    ctx->saved_data["s"] = s;
    return a * b * s;
  }
  static std::vector<Tensor> backward(AutogradContext* ctx, std::vector<Tensor> g) {
    auto saved = ctx->get_saved();
    double s = std::any_cast<double>(ctx->saved_data["s"]);
    Tensor ga = ctx->needs_input_grad(0) ? g[0] * saved[1] * s : Tensor();
    Tensor gb = ctx->needs_input_grad(1) ? g[0] * saved[0] * s : Tensor();
    return {ga, gb, Tensor()};  // one per argument, the double's slot undefined
  }
};

// Two outputs: (a + b, a * b); backward returns one gradient per Tensor input.
struct SumAndProduct : Function<SumAndProduct> {
  static std::vector<Tensor> forward(AutogradContext* ctx, const Tensor& a, const Tensor& b) {
    ctx->save_for_backward({a, b});
    return {a + b, a * b};
  }
  static std::vector<Tensor> backward(AutogradContext* ctx, std::vector<Tensor> g) {
    auto s = ctx->get_saved();
    return {g[0] + g[1] * s[1], g[0] + g[1] * s[0]};
  }
};

TEST(CustomFunction, ValuesAndGradients) {
  Tensor a = tensor({1.0f, 2.0f}).requires_grad_(true);
  Tensor b = tensor({3.0f, 4.0f}).requires_grad_(true);
  Tensor y = ScaledMul::apply(a, b, 2.0);
  EXPECT_TRUE(tensor_near(y, {6, 16}));
  ASSERT_NE(y.grad_fn(), nullptr);
  EXPECT_EQ(y.grad_fn()->name(), "ScaledMulBackward");
  sum(y * y).backward();  // d/da = 2y * 2b, d/db = 2y * 2a
  EXPECT_TRUE(tensor_near(a.grad(), {2 * 6 * 2 * 3, 2 * 16 * 2 * 4}));
  EXPECT_TRUE(tensor_near(b.grad(), {2 * 6 * 2 * 1, 2 * 16 * 2 * 2}));
}

TEST(CustomFunction, NoGraphWithoutGradInputs) {
  Tensor a = tensor({1.0f}), b = tensor({2.0f});
  Tensor y = ScaledMul::apply(a, b, 3.0);
  EXPECT_FALSE(y.requires_grad());
  EXPECT_TRUE(tensor_near(y, {6}));
  Tensor c = tensor({1.0f}).requires_grad_(true);
  NoGradGuard guard;
  EXPECT_FALSE(ScaledMul::apply(c, b, 3.0).requires_grad());
}

TEST(CustomFunction, OnlySomeInputsRequireGrad) {
  Tensor a = tensor({1.0f, 2.0f}).requires_grad_(true);
  Tensor b = tensor({3.0f, 4.0f});
  sum(ScaledMul::apply(a, b, 1.0)).backward();
  EXPECT_TRUE(tensor_near(a.grad(), {3, 4}));
  EXPECT_FALSE(b.grad().defined());
}

TEST(CustomFunction, MultipleOutputs) {
  Tensor a = tensor({1.0f, 2.0f}).requires_grad_(true);
  Tensor b = tensor({3.0f, 5.0f}).requires_grad_(true);
  auto outs = SumAndProduct::apply(a, b);
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_TRUE(tensor_near(outs[0], {4, 7}));
  EXPECT_TRUE(tensor_near(outs[1], {3, 10}));
  EXPECT_EQ(outs[0].output_nr(), 0);
  EXPECT_EQ(outs[1].output_nr(), 1);
  // loss = sum(2 * s + p): only s used through one path, p through another
  sum(outs[0] * 2.0 + outs[1]).backward();
  EXPECT_TRUE(tensor_near(a.grad(), {2 + 3, 2 + 5}));
  EXPECT_TRUE(tensor_near(b.grad(), {2 + 1, 2 + 2}));
  // an unused output gets zeros in backward
  a.zero_grad();
  b.zero_grad();
  auto o2 = SumAndProduct::apply(a, b);
  sum(o2[1]).backward();
  EXPECT_TRUE(tensor_near(a.grad(), {3, 5}));
}

TEST(CustomFunction, Gradcheck) {
  Tensor a = randn({3, 2}, {DType::Float64, kCPU, true});
  Tensor b = randn({3, 2}, {DType::Float64, kCPU, true});
  auto r =
      autograd::gradcheck([](const std::vector<Tensor>& in) { return ScaledMul::apply(in[0], in[1], 1.5); }, {a, b});
  EXPECT_TRUE(r) << r.message;
  auto r2 = autograd::gradcheck(
      [](const std::vector<Tensor>& in) {
        auto o = SumAndProduct::apply(in[0], in[1]);
        return o[0] * o[1];
      },
      {a, b});
  EXPECT_TRUE(r2) << r2.message;
}

TEST(CustomFunction, SavedTensorVersionCheck) {
  Tensor a = tensor({1.0f, 2.0f}).requires_grad_(true);
  Tensor b = tensor({3.0f, 4.0f});  // saved, then modified in place
  Tensor y = ScaledMul::apply(a, b, 1.0);
  b.add_(ones({2}));
  EXPECT_WEFT_ERROR(sum(y).backward(), "ScaledMulBackward: a tensor saved for backward");
}

TEST(CustomFunction, SecondBackwardAndRetainGraph) {
  Tensor a = tensor({1.0f}).requires_grad_(true);
  Tensor b = tensor({2.0f}).requires_grad_(true);
  Tensor y = sum(ScaledMul::apply(a, b, 1.0));
  y.backward(Tensor(), true);
  y.backward();
  EXPECT_TRUE(tensor_near(a.grad(), {4}));
  EXPECT_WEFT_ERROR(y.backward(), "second time");
}

struct WrongCount : Function<WrongCount> {
  static Tensor forward(AutogradContext*, const Tensor& a) { return a * 2.0; }
  static std::vector<Tensor> backward(AutogradContext*, std::vector<Tensor> g) { return {g[0], g[0], g[0]}; }
};

TEST(CustomFunction, WrongNumberOfGradientsErrors) {
  Tensor a = tensor({1.0f}).requires_grad_(true);
  EXPECT_WEFT_ERROR(sum(WrongCount::apply(a)).backward(), "backward returned 3 gradients, expected 1");
}

// Returns its input unchanged plus a non-differentiable integer-like mask.
struct IdentityWithMask : Function<IdentityWithMask> {
  static std::vector<Tensor> forward(AutogradContext* ctx, const Tensor& a) {
    Tensor mask = a * 0.0;
    ctx->mark_non_differentiable({mask});
    return {a, mask};
  }
  static std::vector<Tensor> backward(AutogradContext*, std::vector<Tensor> g) { return {g[0] * 3.0}; }
};

TEST(CustomFunction, IdentityOutputAndNonDifferentiable) {
  Tensor a = tensor({1.0f, 2.0f}).requires_grad_(true);
  auto outs = IdentityWithMask::apply(a);
  EXPECT_TRUE(a.is_leaf());  // the input keeps its own (leaf) identity
  EXPECT_FALSE(outs[0].is_leaf());
  EXPECT_EQ(outs[0].raw_data(), a.raw_data());
  EXPECT_FALSE(outs[1].requires_grad());
  sum(outs[0]).backward();
  EXPECT_TRUE(tensor_near(a.grad(), {3, 3}));
}

// A vector<Tensor> argument contributes each element as an input.
struct SumAll : Function<SumAll> {
  static Tensor forward(AutogradContext* ctx, const std::vector<Tensor>& xs, double scale) {
    ctx->saved_data["n"] = static_cast<int64_t>(xs.size());
    Tensor acc = xs[0] * scale;
    for (size_t i = 1; i < xs.size(); ++i) acc = acc + xs[i] * scale;
    ctx->saved_data["scale"] = scale;
    return acc;
  }
  static std::vector<Tensor> backward(AutogradContext* ctx, std::vector<Tensor> g) {
    int64_t n = std::any_cast<int64_t>(ctx->saved_data["n"]);
    double s = std::any_cast<double>(ctx->saved_data["scale"]);
    return std::vector<Tensor>(n, g[0] * s);
  }
};

TEST(CustomFunction, VectorOfTensorsArgument) {
  Tensor a = tensor({1.0f}).requires_grad_(true);
  Tensor b = tensor({2.0f}).requires_grad_(true);
  Tensor c = tensor({3.0f}).requires_grad_(true);
  Tensor y = SumAll::apply(std::vector<Tensor>{a, b, c}, 2.0);
  EXPECT_TRUE(tensor_near(y, {12}));
  sum(y).backward();
  for (const Tensor& t : {a, b, c}) EXPECT_TRUE(tensor_near(t.grad(), {2}));
}

}  // namespace
}  // namespace weft
