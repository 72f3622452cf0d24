// Double backward (Note [double backward] in core/autograd_meta.h) through
// in-place ops, on plain tensors and on views of a base (CopySlices, and a
// view used after its base changed: AsStridedBackward), and through the ops
// whose backward only recently became differentiable: split/chunk, the
// extremum reductions, prod (with zeros), tril/triu, the piecewise-constant
// ops and autocast's casts; custom Functions that declare a differentiable
// backward. Each is checked against central differences of the first
// gradient (gradgradcheck), after the first gradient built as a graph is
// checked against the first-order one.
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/function.h"
#include "autograd/gradcheck.h"
#include "core/autocast.h"
#include "core/autograd_meta.h"
#include "core/nn_ops.h"
#include "tests/testing.h"

namespace weft {
namespace {

using F = std::function<Tensor(const Tensor&)>;

// The second derivatives of f in x: testing::double_backward_check.
::testing::AssertionResult gradgradcheck(const F& f, const Tensor& x) {
  return testing::double_backward_check([&](const std::vector<Tensor>& in) { return f(in[0]); }, {x}, 1e-6, 1e-12);
}

void check_all(const std::vector<std::pair<const char*, F>>& cases, const Tensor& x) {
  for (const auto& [name, f] : cases) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(gradgradcheck(f, x));
  }
}

TEST(InplaceDoubleBackward, OnPlainTensors) {
  Tensor x = testing::rnd({2, 3}, DType::Float64, 3).requires_grad_(true);
  const Tensor c = testing::rnd({2, 3}, DType::Float64, 4);
  const std::vector<std::pair<const char*, F>> cases = {
      {"add_ with alpha",
       [](const Tensor& v) {
         Tensor y = v * v;
         y.add_(sin(v), 2.0);
         return y * v;
       }},
      {"sub_",
       [](const Tensor& v) {
         Tensor y = exp(v) * 1.0;
         y.sub_(v * v * v);
         return y * v;
       }},
      {"mul_",
       [](const Tensor& v) {
         Tensor y = exp(v) * 1.0;
         y.mul_(v * v);
         return y;
       }},
      {"mul_ broadcast",
       [](const Tensor& v) {
         Tensor y = v * 1.5;
         y.mul_(sum(v * v, {0}));
         return y * v;
       }},
      {"div_",
       [](const Tensor& v) {
         Tensor y = v * v + 1.0;
         y.div_(cos(v) + 2.0);
         return y * v;
       }},
      {"mul_ on a tensor without history",
       [](const Tensor& v) {
         Tensor y = ones({2, 3}, v.options()) * 2.0;
         y.mul_(sin(v));
         return y * v;
       }},
      {"addcmul_",
       [](const Tensor& v) {
         Tensor y = v * 1.0;
         addcmul_(y, v, sin(v), 0.5);
         return y * y;
       }},
      {"addcdiv_",
       [](const Tensor& v) {
         Tensor y = sin(v);
         addcdiv_(y, v * v, exp(v), 1.5);
         return y * v;
       }},
      {"lerp_",
       [](const Tensor& v) {
         Tensor y = v * v;
         lerp_(y, sin(v), 0.3);
         return y * v;
       }},
      {"clamp_",
       [](const Tensor& v) {
         Tensor y = v * v * v;
         clamp_(y, -0.5, 0.5);
         return y * v;
       }},
      {"tanh_",
       [](const Tensor& v) {
         Tensor y = v * 1.5;
         tanh_(y);
         return y * v;
       }},
      {"sigmoid_",
       [](const Tensor& v) {
         Tensor y = v * 1.5;
         sigmoid_(y);
         return y * v;
       }},
      {"exp_",
       [](const Tensor& v) {
         Tensor y = v * 0.5;
         exp_(y);
         return y * v;
       }},
      {"sqrt_",
       [](const Tensor& v) {
         Tensor y = v * v + 1.0;
         sqrt_(y);
         return y * v;
       }},
      {"relu_",
       [](const Tensor& v) {
         Tensor y = v * v - 0.3;
         relu_(y);
         return y * v;
       }},
      {"neg_",
       [](const Tensor& v) {
         Tensor y = v * v;
         neg_(y);
         return y * v;
       }},
      {"masked_fill_",
       [&](const Tensor& v) {
         Tensor y = v * v;
         masked_fill_(y, gt(c, zeros_like(c)), 0.5);
         return y * v;
       }},
      {"copy_",
       [](const Tensor& v) {
         Tensor y = exp(v) * 1.0;
         y.copy_(v * v);
         return y * v;
       }},
      {"fill_",
       [](const Tensor& v) {
         Tensor y = exp(v) * 1.0;
         y.fill_(2.0);
         return y * v + v * v * v;
       }},
      {"a chain of in-place ops",
       [](const Tensor& v) {
         Tensor y = v * 2.0;
         y.mul_(v).add_(sin(v));
         tanh_(y);
         return y * exp(v);
       }},
  };
  check_all(cases, x);
}

TEST(InplaceDoubleBackward, OnViews) {
  Tensor x = testing::rnd({3, 4}, DType::Float64, 5).requires_grad_(true);
  const std::vector<std::pair<const char*, F>> cases = {
      {"mul_ on a row",
       [](const Tensor& v) {
         Tensor y = v * 1.0;
         Tensor row = select(y, 0, 1);
         row.mul_(sin(select(v, 0, 0)));
         return y * y;
       }},
      {"tanh_ on columns (the result saved)",
       [](const Tensor& v) {
         Tensor y = exp(v * 0.5) * 1.0;
         Tensor cols = narrow(y, 1, 1, 2);
         tanh_(cols);
         return y * v;
       }},
      {"copy_ into a column",
       [](const Tensor& v) {
         Tensor y = v * v;
         Tensor col = select(y, 1, 0);
         col.copy_(sin(select(v, 1, 2)));
         return y * v;
       }},
      {"strided view, add_ then clamp_",
       [](const Tensor& v) {
         Tensor y = v * 2.0;
         Tensor part = slice(y, 1, 0, 4, 2);
         part.add_(slice(v, 1, 1, 4, 2) * narrow(v, 1, 0, 2));
         clamp_(part, -1.0, 1.0);
         return y * v;
       }},
      {"a view used after its base changed",
       [](const Tensor& v) {
         Tensor y = v * 1.0;
         Tensor view = narrow(y, 1, 0, 2);
         y.mul_(v);
         return view * view * view;
       }},
      {"relu_ on a row, then the whole",
       [](const Tensor& v) {
         Tensor y = v - 0.2;
         Tensor row = select(y, 0, 0);
         relu_(row);
         return y * y * v;
       }},
  };
  check_all(cases, x);
}

TEST(InplaceDoubleBackward, ThirdOrderThroughAnInPlaceOp) {
  // y = x^2, then y *= x: x^3 in place; d3/dx3 sum = 6
  Tensor x = tensor(std::vector<double>{0.5, -1.5, 2.0}).requires_grad_(true);
  Tensor y = x * x;
  Tensor view = narrow(y, 0, 0, 3);
  view.mul_(x);
  Tensor g1 = autograd::grad({sum(y)}, {x}, {}, std::nullopt, true)[0];
  EXPECT_TRUE(testing::tensor_near(g1, {0.75, 6.75, 12.0}, 1e-12));
  Tensor g2 = autograd::grad({sum(g1)}, {x}, {}, std::nullopt, true)[0];
  EXPECT_TRUE(testing::tensor_near(g2, {3.0, -9.0, 12.0}, 1e-12));
  Tensor g3 = autograd::grad({sum(g2)}, {x})[0];
  EXPECT_TRUE(testing::tensor_near(g3, {6.0, 6.0, 6.0}, 1e-12));
}

TEST(InplaceDoubleBackward, SplitReductionsAndPiecewiseOps) {
  Tensor x = testing::rnd({2, 3}, DType::Float64, 8).requires_grad_(true);
  const std::vector<std::pair<const char*, F>> cases = {
      {"split",
       [](const Tensor& v) {
         auto p = split(v, 2, 1);
         return p[0] * exp(p[1]);
       }},
      {"chunk with a piece unused",
       [](const Tensor& v) {
         auto p = chunk(v * v, 3, 1);
         return p[0] * sin(p[2]);
       }},
      {"split_with_sizes-like narrow then cat",
       [](const Tensor& v) {
         auto p = split(v, 1, 0);
         return cat({p[1] * p[1], p[0] * p[1]}, 0);
       }},
      {"amax", [](const Tensor& v) { return amax(sin(v) * v, {1}) * sum(v); }},
      {"amin keepdim", [](const Tensor& v) { return amin(v * v * v, {0}, true) * v; }},
      {"max over all", [](const Tensor& v) { return max(v * v) * v; }},
      {"max(dim)", [](const Tensor& v) { return std::get<0>(max(v * v, 1)) * sum(v * v); }},
      {"min(dim) keepdim", [](const Tensor& v) { return std::get<0>(min(exp(v), 0, true)) * v; }},
      {"prod", [](const Tensor& v) { return prod(v * v + v, 1); }},
      {"prod keepdim", [](const Tensor& v) { return prod(sin(v), 0, true) * v; }},
      {"tril", [](const Tensor& v) { return tril(v * v) * v; }},
      {"triu with an offset", [](const Tensor& v) { return triu(exp(v), 1) * v; }},
      {"inf-norm", [](const Tensor& v) { return norm(v * v * v, INFINITY, {1}) * sum(v); }},
      {"-inf-norm keepdim", [](const Tensor& v) { return norm(sin(v) + 2.0, -INFINITY, {0}, true) * v; }},
      {"0-norm", [](const Tensor& v) { return norm(v, 0.0) * v * v; }},
      {"floor and sign", [](const Tensor& v) { return (floor(v * 3.0) + sign(v)) * v * v; }},
  };
  check_all(cases, x);
}

TEST(InplaceDoubleBackward, ProdWithZeros) {
  // zeros in the reduced dim: the gradient is the product of the others, and
  // the second derivative the product of all but two
  Tensor x = tensor(std::vector<double>{0.0, 2.0, 3.0, 0.0, 0.0, 5.0}, {2, 3}).requires_grad_(true);
  EXPECT_TRUE(gradgradcheck([](const Tensor& v) { return prod(v, 1); }, x));
  Tensor g = autograd::grad({sum(prod(x, 1))}, {x}, {}, std::nullopt, true)[0];
  EXPECT_TRUE(testing::tensor_near(g, {6.0, 0.0, 0.0, 0.0, 0.0, 0.0}, 1e-12));
  // by hand, row 0: g = (x1 x2, x0 x2, x0 x1); sum(g) derivative = (x1 + x2, x0 + x2, x0 + x1) = (5, 3, 2)
  // row 1: g = (x4 x5, x3 x5, x3 x4); derivative = (x4 + x5, x3 + x5, x3 + x4) = (5, 5, 0)
  Tensor gg = autograd::grad({sum(g)}, {x})[0];
  EXPECT_TRUE(testing::tensor_near(gg, {5.0, 3.0, 2.0, 5.0, 5.0, 0.0}, 1e-12));
}

// x^3 with a backward written from its saved input and output.
struct Cube : autograd::Function<Cube> {
  static constexpr bool differentiable_backward = true;
  static const char* name() { return "CubeBackward"; }
  static Tensor forward(autograd::AutogradContext* ctx, const Tensor& x) {
    Tensor y = x * x * x;
    ctx->save_for_backward({x, y});
    return y;
  }
  static std::vector<Tensor> backward(autograd::AutogradContext* ctx, std::vector<Tensor> g) {
    auto s = ctx->get_saved();
    return {g[0] * s[1] / s[0] * 3.0};  // 3 y / x = 3 x^2, through the saved output
  }
};

// The same without the declaration: its gradient refuses a second backward.
struct CubeOnce : autograd::Function<CubeOnce> {
  static const char* name() { return "CubeOnceBackward"; }
  static Tensor forward(autograd::AutogradContext* ctx, const Tensor& x) {
    ctx->save_for_backward({x});
    return x * x * x;
  }
  static std::vector<Tensor> backward(autograd::AutogradContext* ctx, std::vector<Tensor> g) {
    Tensor x = ctx->get_saved()[0];
    return {g[0] * x * x * 3.0};
  }
};

TEST(InplaceDoubleBackward, CustomFunctionThatDeclaresADifferentiableBackward) {
  Tensor x = tensor(std::vector<double>{0.5, -1.5, 2.0}).requires_grad_(true);
  Tensor g1 = autograd::grad({sum(Cube::apply(x * 1.0))}, {x}, {}, std::nullopt, true)[0];
  EXPECT_TRUE(testing::tensor_near(g1, {0.75, 6.75, 12.0}, 1e-12));
  Tensor g2 = autograd::grad({sum(g1)}, {x})[0];  // 6 x
  EXPECT_TRUE(testing::tensor_near(g2, {3.0, -9.0, 12.0}, 1e-12));
  EXPECT_TRUE(gradgradcheck([](const Tensor& v) { return Cube::apply(sin(v)) * v; },
                            testing::rnd({2, 3}, DType::Float64, 9).requires_grad_(true)));

  Tensor h = autograd::grad({sum(CubeOnce::apply(x))}, {x}, {}, std::nullopt, true)[0];
  EXPECT_TRUE(testing::tensor_near(h, {0.75, 6.75, 12.0}, 1e-12));
  EXPECT_WEFT_ERROR(autograd::grad({sum(h)}, {x}), "CubeOnceBackward cannot be differentiated twice");
  EXPECT_WEFT_ERROR(autograd::grad({sum(h)}, {x}), "differentiable_backward = true");
}

// A Function that declares a differentiable backward but detaches inside it:
// the first derivative is right, the second is zero, and gradgradcheck fails.
struct CubeDetached : autograd::Function<CubeDetached> {
  static constexpr bool differentiable_backward = true;
  static Tensor forward(autograd::AutogradContext* ctx, const Tensor& x) {
    ctx->save_for_backward({x});
    return x * x * x;
  }
  static std::vector<Tensor> backward(autograd::AutogradContext* ctx, std::vector<Tensor> g) {
    Tensor x = ctx->get_saved()[0].detach();
    return {g[0] * x * x * 3.0};
  }
};

TEST(InplaceDoubleBackward, GradgradcheckCatchesAWrongSecondDerivative) {
  Tensor x = testing::rnd({2, 3}, DType::Float64, 12).requires_grad_(true);
  EXPECT_TRUE(autograd::gradcheck([](const std::vector<Tensor>& in) { return CubeDetached::apply(in[0]); }, {x}));
  auto r = autograd::gradgradcheck([](const std::vector<Tensor>& in) { return CubeDetached::apply(in[0]); }, {x});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("mismatch for differentiable input 0"), std::string::npos) << r.message;
  EXPECT_TRUE(autograd::gradgradcheck([](const std::vector<Tensor>& in) { return Cube::apply(in[0]); }, {x}));
}

TEST(InplaceDoubleBackward, AutocastCastsDifferentiateTwice) {
  // bfloat16 matmuls under CPU autocast: the casts' backward differentiates,
  // so the Hessian-vector product runs; it agrees with float64 to bfloat16's
  // precision (8-bit mantissa, a few roundings: 3e-2 of the norm).
  const Tensor x64 = testing::rnd({4, 8}, DType::Float64, 10), w64 = testing::rnd({8, 5}, DType::Float64, 11);
  auto hvp = [&](DType dt, bool autocast) {
    Tensor x = x64.to(dt).requires_grad_(true), w = w64.to(dt);
    std::optional<AutocastGuard> guard;
    if (autocast) guard.emplace(DeviceType::CPU, DType::BFloat16);
    Tensor y = tanh(matmul(x, w).to(dt));
    Tensor g = autograd::grad({sum(y * y)}, {x}, {}, std::nullopt, true)[0];
    return autograd::grad({sum(g * g)}, {x})[0].to(DType::Float64);
  };
  Tensor want = hvp(DType::Float64, false), got = hvp(DType::Float32, true);
  const double rel = norm(got - want).item<double>() / norm(want).item<double>();
  EXPECT_LT(rel, 3e-2);
  EXPECT_GT(norm(want).item<double>(), 1.0);
}

}  // namespace
}  // namespace weft
