// hardtanh, relu6, hardsigmoid, hardswish, mish, selu, celu, logsigmoid,
// softsign, glu and prelu against PyTorch's values and gradients, kinks
// included (tests/nn/golden/activations_golden.safetensors, from
// tools/golden/make_activations_golden.py), float64 gradchecks away from the
// kinks, the layers over them, and the error messages.
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "autograd/gradcheck.h"
#include "core/nn_ops.h"
#include "nn/nn.h"
#include "tests/golden.h"
#include "tests/nn/golden_case.h"
#include "tests/testing.h"

namespace weft {
namespace {

using testing::rnd;
using testing::tensors_near;
using testing::values;

const testing::Golden& golden() {
  static const testing::Golden g("tests/nn/golden/activations_golden.safetensors");
  return g;
}
void check_both(const std::string& c, const testing::GoldenFn& fn) { testing::check_golden_both(golden(), c, fn); }
testing::GoldenFn unary(Tensor (*f)(const Tensor&)) {
  return [f](const Tensor& x, const Tensor&, const Tensor&) { return f(x); };
}

TEST(Activations, GoldenAgainstPyTorch) {
  check_both("hardtanh", [](const Tensor& x, const Tensor&, const Tensor&) { return hardtanh(x); });
  check_both("hardtanh_range", [](const Tensor& x, const Tensor&, const Tensor&) { return hardtanh(x, -2.0, 3.0); });
  check_both("relu6", unary(relu6));
  check_both("hardsigmoid", unary(hardsigmoid));
  check_both("hardswish", unary(hardswish));
  check_both("mish", unary(mish));
  check_both("selu", unary(selu));
  check_both("celu", [](const Tensor& x, const Tensor&, const Tensor&) { return celu(x, 1.5); });
  check_both("logsigmoid", unary(logsigmoid));
  check_both("softsign", unary(softsign));
  check_both("glu_last", [](const Tensor& x, const Tensor&, const Tensor&) { return glu(x); });
  check_both("glu_dim0", [](const Tensor& x, const Tensor&, const Tensor&) { return glu(x, 0); });
  auto pr = [](const Tensor& x, const Tensor& w, const Tensor&) { return prelu(x, w); };
  check_both("prelu_one", pr);
  check_both("prelu_channels", pr);
  check_both("prelu_1d", pr);
}

TEST(Activations, HandWorkedKinks) {
  // The gradients at the kinks, worked out from PyTorch's backward formulas.
  Tensor x = tensor<double>({-3.0, -1.0, 0.0, 1.0, 3.0, 6.0}, {6});
  auto grad_of = [&](Tensor (*f)(const Tensor&)) {
    Tensor xl = x.clone();
    xl.requires_grad_(true);
    f(xl).sum().backward();
    return values(xl.grad());
  };
  EXPECT_EQ(grad_of([](const Tensor& t) { return hardtanh(t); }), (std::vector<double>{0, 0, 1, 0, 0, 0}));
  EXPECT_EQ(grad_of(relu6), (std::vector<double>{0, 0, 0, 1, 1, 0}));
  EXPECT_EQ(grad_of(hardsigmoid), (std::vector<double>{0, 1.0 / 6, 1.0 / 6, 1.0 / 6, 0, 0}));
  auto expect_near = [](const std::vector<double>& got, const std::vector<double>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-15) << "element " << i;
  };
  expect_near(grad_of(hardswish), {0, 1.0 / 6, 0.5, 5.0 / 6, 1, 1});  // x / 3 + 1/2 inside
  expect_near(values(hardswish(x)), {0, -1.0 / 3, 0, 4.0 / 6, 3, 6});
}

TEST(Activations, FarOutValuesStayFinite) {
  Tensor x = tensor<float>({-200.0f, -90.0f, 90.0f, 200.0f}, {4});
  for (const Tensor& y : {logsigmoid(x), mish(x), selu(x), celu(x, 0.5), softsign(x)}) {
    for (double v : values(y)) EXPECT_TRUE(std::isfinite(v));
  }
  std::vector<double> ls = values(logsigmoid(x));
  EXPECT_FLOAT_EQ(ls[0], -200.0f);  // log(sigmoid(x)) -> x for very negative x
  EXPECT_FLOAT_EQ(ls[3], 0.0f);
}

TEST(Activations, Gradcheck) {
  // Away from the kinks, where the functions are smooth: values in [-0.9995, 0.9995], off rnd's grid of
  // thousandths so none is 0, and 2.5 x those.
  Tensor x = testing::rnd({3, 5}, DType::Float64, 61) + 0.0005;
  Tensor wide = x * 2.5;
  for (auto f : {mish, selu, logsigmoid, softsign, relu6}) {
    Tensor in = wide.clone();
    in.requires_grad_(true);
    auto r = autograd::gradcheck([f](const std::vector<Tensor>& v) { return f(v[0]); }, {in});
    EXPECT_TRUE(r.ok) << r.message;
  }
  Tensor in = x.clone();
  in.requires_grad_(true);
  auto r = autograd::gradcheck(
      [](const std::vector<Tensor>& v) { return hardswish(v[0] * 2) + hardsigmoid(v[0]) + celu(v[0], 0.7); }, {in});
  EXPECT_TRUE(r.ok) << r.message;
  Tensor g = testing::rnd({2, 4, 3}, DType::Float64, 62) + 0.0005, w = testing::rnd({4}, DType::Float64, 63);
  g.requires_grad_(true);
  w.requires_grad_(true);
  auto r2 =
      autograd::gradcheck([](const std::vector<Tensor>& v) { return prelu(v[0], v[1]) + glu(v[0], 1).sum(); }, {g, w});
  EXPECT_TRUE(r2.ok) << r2.message;
}

TEST(Activations, Layers) {
  Tensor x = rnd({2, 4, 6}, DType::Float32, 64) * 5;
  EXPECT_TRUE(tensors_near(nn::Hardtanh(-0.5, 2.0).forward(x), hardtanh(x, -0.5, 2.0), 0));
  EXPECT_TRUE(tensors_near(nn::ReLU6().forward(x), relu6(x), 0));
  EXPECT_TRUE(tensors_near(nn::Hardsigmoid().forward(x), hardsigmoid(x), 0));
  EXPECT_TRUE(tensors_near(nn::Hardswish().forward(x), hardswish(x), 0));
  EXPECT_TRUE(tensors_near(nn::Mish().forward(x), mish(x), 0));
  EXPECT_TRUE(tensors_near(nn::SELU().forward(x), selu(x), 0));
  EXPECT_TRUE(tensors_near(nn::CELU(2.0).forward(x), celu(x, 2.0), 0));
  EXPECT_TRUE(tensors_near(nn::LogSigmoid().forward(x), logsigmoid(x), 0));
  EXPECT_TRUE(tensors_near(nn::Softsign().forward(x), softsign(x), 0));
  EXPECT_TRUE(tensors_near(nn::GLU(1).forward(x), glu(x, 1), 0));
  nn::PReLU one;
  EXPECT_EQ(values(one.weight), (std::vector<double>{0.25}));  // PyTorch's init
  EXPECT_EQ(one.parameters().size(), 1u);
  nn::PReLU per_channel(4, 0.1);
  EXPECT_EQ(per_channel.weight.sizes(), (Shape{4}));
  EXPECT_TRUE(tensors_near(per_channel.forward(x), prelu(x, full({4}, 0.1f)), 0));
  EXPECT_EQ(per_channel.state_dict().size(), 1u);  // "weight", as PyTorch's
  EXPECT_WEFT_ERROR(nn::PReLU(0), "PReLU: num_parameters must be positive, got 0");
}

TEST(Activations, Errors) {
  Tensor x = rnd({2, 5}, DType::Float32, 65);
  EXPECT_WEFT_ERROR(hardtanh(x, 1.0, -1.0), "hardtanh: min_val 1 is greater than max_val -1");
  EXPECT_WEFT_ERROR(glu(x, 1), "glu: halving dimension must be even, but dimension 1 of shape [2, 5] is size 5");
  EXPECT_WEFT_ERROR(glu(x, 2), "glu: dim 2 is out of range for an input of shape [2, 5]");
  EXPECT_WEFT_ERROR(prelu(x, full({3}, 0.25f)),
                    "prelu: weight has 3 parameters but the input of shape [2, 5] has 5 channels (dim 1)");
  EXPECT_WEFT_ERROR(prelu(x, full({5, 1}, 0.25f)), "prelu: weight must be 0-dim or 1-D, got shape [5, 1]");
  EXPECT_WEFT_ERROR(celu(x, 0.0), "celu: alpha must not be 0");
  EXPECT_WEFT_ERROR(mish(x.to(DType::Int64)), "mish: expected a floating dtype, got int64");
}

}  // namespace
}  // namespace weft
