// Elementwise ops (unary, binary, comparisons, logical, where, in-place) checked
// against std:: math and hand-computed values, across dtypes, broadcasting and
// non-contiguous inputs.
#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include <gtest/gtest.h>

#include "core/cpu/vec_math.h"
#include "core/ops.h"
#include "core/parallel.h"
#include "tests/testing.h"

namespace weft {
namespace {
using testing::tensor_near;
using testing::tensors_near;
using testing::values;

const std::vector<DType> kFloatDTypes = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16};
const std::vector<DType> kIntDTypes = {DType::Int64, DType::Int32, DType::UInt8};

double tol_for(DType d) {
  switch (d) {
    case DType::Float64: return 1e-12;
    case DType::Float32: return 1e-6;
    case DType::Float16: return 2e-3;
    default: return 1.6e-2;  // bfloat16
  }
}

std::vector<double> map(const std::vector<double>& xs, const std::function<double(double)>& f) {
  std::vector<double> r;
  for (double x : xs) r.push_back(f(x));
  return r;
}

// Inputs as they are stored in dtype `d` (rounding included), so references
// are computed from the exact stored value.
std::vector<double> stored(const std::vector<double>& xs, DType d) { return values(tensor(xs).to(d)); }

double gelu_ref(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh_ref(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }
double sigmoid_ref(double x) { return 1.0 / (1.0 + std::exp(-x)); }

struct UnaryCase {
  std::string name;
  std::function<Tensor(const Tensor&)> op;
  std::function<double(double)> ref;
  std::vector<double> inputs;  // 6 values in the op's domain
};

std::vector<UnaryCase> float_unary_cases() {
  std::vector<double> any = {-2.5, -1.0, -0.25, 0.0, 0.75, 3.0};
  std::vector<double> pos = {0.1, 0.5, 1.0, 2.0, 4.5, 9.0};
  return {
      {"exp", [](const Tensor& t) { return exp(t); }, [](double x) { return std::exp(x); }, any},
      {"log", [](const Tensor& t) { return log(t); }, [](double x) { return std::log(x); }, pos},
      {"sqrt", [](const Tensor& t) { return sqrt(t); }, [](double x) { return std::sqrt(x); }, pos},
      {"rsqrt", [](const Tensor& t) { return rsqrt(t); }, [](double x) { return 1 / std::sqrt(x); }, pos},
      {"sigmoid", [](const Tensor& t) { return sigmoid(t); }, sigmoid_ref, any},
      {"tanh", [](const Tensor& t) { return tanh(t); }, [](double x) { return std::tanh(x); }, any},
      {"silu", [](const Tensor& t) { return silu(t); }, [](double x) { return x * sigmoid_ref(x); }, any},
      {"gelu", [](const Tensor& t) { return gelu(t); }, gelu_ref, any},
      {"gelu_tanh", [](const Tensor& t) { return gelu(t, GeluApproximation::Tanh); }, gelu_tanh_ref, any},
      {"abs", [](const Tensor& t) { return abs(t); }, [](double x) { return std::abs(x); }, any},
      {"relu", [](const Tensor& t) { return relu(t); }, [](double x) { return x > 0 ? x : 0.0; }, any},
      {"neg", [](const Tensor& t) { return neg(t); }, [](double x) { return -x; }, any},
      {"sign", [](const Tensor& t) { return sign(t); }, [](double x) { return double((x > 0) - (x < 0)); }, any},
  };
}

TEST(Unary, FloatOpsMatchStdEveryFloatDType) {
  for (const auto& c : float_unary_cases()) {
    for (DType d : kFloatDTypes) {
      Tensor x = tensor(c.inputs, {2, 3}).to(d);
      Tensor y = c.op(x);
      EXPECT_EQ(y.dtype(), d) << c.name;
      EXPECT_EQ(y.sizes(), (Shape{2, 3})) << c.name;
      std::vector<double> expect = map(stored(c.inputs, d), c.ref);
      EXPECT_TRUE(tensor_near(y, expect, tol_for(d))) << c.name << " " << d;
    }
  }
}

TEST(Unary, NonContiguousInputs) {
  for (const auto& c : float_unary_cases()) {
    Tensor base = tensor(c.inputs, {2, 3}).to(DType::Float64);
    Tensor t = base.t();  // (3, 2), strides (1, 3)
    ASSERT_FALSE(t.is_contiguous());
    Tensor y = c.op(t);
    EXPECT_EQ(y.sizes(), (Shape{3, 2}));
    const auto& in = c.inputs;
    std::vector<double> tin = {in[0], in[3], in[1], in[4], in[2], in[5]};
    EXPECT_TRUE(tensor_near(y, map(tin, c.ref), 1e-12)) << c.name;
    // strided slice: every other column
    Tensor s = tensor(std::vector<double>{in[0], 7, in[1], 7, in[2], 7}, {6}).slice(0, 0, 6, 2);
    EXPECT_TRUE(tensor_near(c.op(s), map({in[0], in[1], in[2]}, c.ref), 1e-12)) << c.name;
  }
}

TEST(Unary, LargeTensorUsesAllPathsConsistently) {
  // big enough to be split across threads; compare to a naive loop
  const int64_t n = 200003;
  Tensor x = mul(sub(div(arange(n, {DType::Float32}), wrapped_scalar(n, DType::Float32, kCPU)),
                     wrapped_scalar(0.5, DType::Float32, kCPU)),
                 wrapped_scalar(8.0, DType::Float32, kCPU));
  Tensor y = tanh(x);
  const float* px = x.data_ptr<float>();
  const float* py = y.data_ptr<float>();
  for (int64_t i = 0; i < n; i += 997) ASSERT_NEAR(py[i], std::tanh(px[i]), 1e-6) << i;
  Tensor g = gelu(x);
  const float* pg = g.data_ptr<float>();
  for (int64_t i = 0; i < n; i += 991) ASSERT_NEAR(pg[i], gelu_ref(px[i]), 1e-5) << i;
}

// The vectorisable float32 math behind exp/log/tanh/sigmoid/gelu/silu against
// libm in double, over a dense sweep and the special values.
TEST(VecMath, AccuracyAgainstLibm) {
  namespace vm = cpu::vmath;
  double worst_exp = 0, worst_tanh = 0, worst_erf = 0, worst_log = 0;
  for (double d = -103.0; d <= 88.7; d += 0.00123) {
    float x = static_cast<float>(d);
    double e = std::exp(static_cast<double>(x));
    // relative error; below FLT_MIN measured against FLT_MIN (subnormal spacing)
    worst_exp = std::max(worst_exp, std::abs(vm::exp(x) - e) / std::max(e, 1.17549435e-38));
    double t = std::tanh(static_cast<double>(x));
    worst_tanh = std::max(worst_tanh, std::abs(vm::tanh(x) - t) / std::max(std::abs(t), 1e-30));
    worst_erf = std::max(worst_erf, std::abs(vm::erf(x) - std::erf(static_cast<double>(x))));
    float lx = static_cast<float>(std::exp(d * 0.4));
    if (lx > 0 && std::isfinite(lx)) {
      double l = std::log(static_cast<double>(lx));
      worst_log = std::max(worst_log, std::abs(vm::log(lx) - l) / std::max(std::abs(l), 1.0));
    }
  }
  EXPECT_LT(worst_exp, 4e-7);
  EXPECT_LT(worst_tanh, 4e-7);
  EXPECT_LT(worst_erf, 3e-7);
  EXPECT_LT(worst_log, 2e-7);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(vm::exp(inf), inf);
  EXPECT_EQ(vm::exp(-inf), 0.0f);
  EXPECT_EQ(vm::exp(89.0f), inf);
  EXPECT_EQ(vm::exp(-104.0f), 0.0f);
  EXPECT_NEAR(vm::exp(-100.0f) / std::exp(-100.0f), 1.0, 1e-2);  // subnormal result
  EXPECT_TRUE(std::isnan(vm::exp(nan)));
  EXPECT_EQ(vm::tanh(inf), 1.0f);
  EXPECT_EQ(vm::tanh(-inf), -1.0f);
  EXPECT_TRUE(std::isnan(vm::tanh(nan)));
  EXPECT_FLOAT_EQ(vm::tanh(1e-5f), 1e-5f);
  EXPECT_EQ(vm::erf(inf), 1.0f);
  EXPECT_EQ(vm::erf(-inf), -1.0f);
  EXPECT_TRUE(std::isnan(vm::erf(nan)));
  EXPECT_EQ(vm::log(0.0f), -inf);
  EXPECT_EQ(vm::log(inf), inf);
  EXPECT_TRUE(std::isnan(vm::log(-1.0f)));
  EXPECT_TRUE(std::isnan(vm::log(nan)));
  EXPECT_EQ(vm::log(1.0f), 0.0f);
  EXPECT_NEAR(vm::log(1e-40f), std::log(1e-40), 1e-5);  // subnormal input
}

TEST(Unary, ResultsDoNotDependOnThreadCount) {
  const int64_t n = 100003;
  Tensor x = sub(mul(arange(n, {DType::Float32}), wrapped_scalar(1e-4, DType::Float32, kCPU)),
                 wrapped_scalar(5.0, DType::Float32, kCPU));
  Tensor s = x.slice(0, 0, n, 3);  // strided view
  auto run = [&] {
    return std::vector<Tensor>{gelu(x), tanh(x), sigmoid(s), maximum(x, s[7].reshape({1})), where(x > 0, x, s[0])};
  };
  int threads = get_num_threads();
  set_num_threads(1);
  auto one = run();
  set_num_threads(std::max(threads, 2));
  auto many = run();
  set_num_threads(threads);
  for (size_t i = 0; i < one.size(); ++i) EXPECT_EQ(values(one[i]), values(many[i])) << i;
}

TEST(Unary, GeluHandComputed) {
  Tensor x = tensor({-1.0f, 0.0f, 1.0f, 2.0f});
  EXPECT_TRUE(tensor_near(gelu(x), {-0.15865525, 0.0, 0.84134475, 1.95449974}, 1e-6));
  EXPECT_TRUE(tensor_near(gelu(x, GeluApproximation::Tanh), {-0.15880801, 0.0, 0.84119199, 1.95459769}, 1e-6));
  EXPECT_TRUE(tensor_near(silu(x), {-0.26894142, 0.0, 0.73105858, 1.76159416}, 1e-6));
}

TEST(Unary, IntegerInputsPromoteToFloat32ForFloatingOps) {
  for (DType d : kIntDTypes) {
    Tensor x = tensor(std::vector<double>{1, 4, 9}).to(d);
    Tensor e = exp(x);
    EXPECT_EQ(e.dtype(), DType::Float32) << d;
    EXPECT_TRUE(tensor_near(e, {std::exp(1.0), std::exp(4.0), std::exp(9.0)}, 1e-6));
    EXPECT_EQ(sqrt(x).dtype(), DType::Float32);
    EXPECT_TRUE(tensor_near(sqrt(x), {1, 2, 3}));
    EXPECT_TRUE(tensor_near(log(x), {0, std::log(4.0), std::log(9.0)}));
    EXPECT_TRUE(tensor_near(rsqrt(x), {1, 0.5, 1.0 / 3}));
    EXPECT_TRUE(tensor_near(sigmoid(x), {sigmoid_ref(1), sigmoid_ref(4), sigmoid_ref(9)}));
    EXPECT_TRUE(tensor_near(tanh(x), {std::tanh(1.0), std::tanh(4.0), std::tanh(9.0)}));
    EXPECT_EQ(gelu(x).dtype(), DType::Float32);
    EXPECT_EQ(silu(x).dtype(), DType::Float32);
  }
  Tensor b = tensor(std::vector<bool>{true, false});
  EXPECT_EQ(exp(b).dtype(), DType::Float32);
  EXPECT_TRUE(tensor_near(exp(b), {std::exp(1.0), 1.0}));
}

TEST(Unary, IntegerOpsKeepDType) {
  Tensor x = tensor(std::vector<int64_t>{-3, 0, 5, -1});
  EXPECT_EQ(abs(x).dtype(), DType::Int64);
  EXPECT_TRUE(tensor_near(abs(x), {3, 0, 5, 1}));
  EXPECT_TRUE(tensor_near(neg(x), {3, 0, -5, 1}));
  EXPECT_TRUE(tensor_near(relu(x), {0, 0, 5, 0}));
  EXPECT_TRUE(tensor_near(sign(x), {-1, 0, 1, -1}));
  EXPECT_EQ(relu(x).dtype(), DType::Int64);
  EXPECT_EQ(sign(x).dtype(), DType::Int64);
  Tensor x32 = x.to(DType::Int32);
  EXPECT_EQ(abs(x32).dtype(), DType::Int32);
  EXPECT_TRUE(tensor_near(abs(x32), {3, 0, 5, 1}));
  Tensor u = tensor(std::vector<uint8_t>{0, 7, 255});
  EXPECT_EQ(abs(u).dtype(), DType::UInt8);
  EXPECT_TRUE(tensor_near(abs(u), {0, 7, 255}));
  EXPECT_TRUE(tensor_near(sign(u), {0, 1, 1}));
  EXPECT_TRUE(tensor_near(relu(u), {0, 7, 255}));
  Tensor b = tensor(std::vector<bool>{true, false});
  EXPECT_EQ(sign(b).dtype(), DType::Bool);
  EXPECT_TRUE(tensor_near(sign(b), {1, 0}));
}

TEST(Unary, BadDTypes) {
  Tensor b = tensor(std::vector<bool>{true, false});
  EXPECT_WEFT_ERROR(relu(b), "relu");
  EXPECT_WEFT_ERROR(abs(b), "bool");
  EXPECT_WEFT_ERROR(neg(b), "neg");
  EXPECT_WEFT_ERROR(clamp(b, 0, 1), "clamp");
  EXPECT_WEFT_ERROR(exp(Tensor()), "undefined");
}

TEST(Unary, SpecialValues) {
  float inf = std::numeric_limits<float>::infinity();
  Tensor x = tensor({-inf, inf, 0.0f});
  EXPECT_TRUE(tensor_near(sigmoid(x), {0, 1, 0.5}));
  EXPECT_TRUE(tensor_near(exp(x), {0, inf, 1}));
  EXPECT_TRUE(tensor_near(tanh(x), {-1, 1, 0}));
  EXPECT_TRUE(std::isnan(values(log(tensor({-1.0f})))[0]));
  EXPECT_TRUE(tensor_near(log(tensor({0.0f})), {-inf}));
  float nan = std::numeric_limits<float>::quiet_NaN();
  for (auto op : {relu, exp, log, sqrt, sigmoid, tanh, silu, abs, neg})
    EXPECT_TRUE(std::isnan(values(op(tensor({nan})))[0]));
  EXPECT_TRUE(std::isnan(values(gelu(tensor({nan})))[0]));
}

TEST(Clamp, ValuesBoundsAndDTypes) {
  Tensor x = tensor({-3, -1, 0, 0.5, 2, 7}, {2, 3});
  EXPECT_TRUE(tensor_near(clamp(x, -1, 2), {-1, -1, 0, 0.5, 2, 2}));
  EXPECT_TRUE(tensor_near(clamp(x, 0.25, std::nullopt), {0.25, 0.25, 0.25, 0.5, 2, 7}));
  EXPECT_TRUE(tensor_near(clamp(x, std::nullopt, 0), {-3, -1, 0, 0, 0, 0}));
  EXPECT_TRUE(tensor_near(x.t().clamp(-1, 2), {-1, 0.5, -1, 2, 0, 2}));  // non-contiguous
  // min > max: everything becomes max (PyTorch's rule)
  EXPECT_TRUE(tensor_near(clamp(x, 3, 1), {1, 1, 1, 1, 1, 1}));
  for (DType d : kFloatDTypes) {
    Tensor y = clamp(x.to(d), -1.5, 1.5);
    EXPECT_EQ(y.dtype(), d);
    EXPECT_TRUE(tensor_near(y, {-1.5, -1, 0, 0.5, 1.5, 1.5}, tol_for(d)));
  }
  Tensor xi = tensor(std::vector<int64_t>{-5, 0, 5});
  EXPECT_EQ(clamp(xi, -2, 3).dtype(), DType::Int64);
  EXPECT_TRUE(tensor_near(clamp(xi, -2, 3), {-2, 0, 3}));
  EXPECT_TRUE(tensor_near(clamp(tensor(std::vector<uint8_t>{1, 100, 200}), 50, 150), {50, 100, 150}));
  EXPECT_EQ(clamp(xi, 0.5, std::nullopt).dtype(), DType::Float32);  // float bound promotes
  EXPECT_TRUE(tensor_near(clamp(xi, 0.5, std::nullopt), {0.5, 0.5, 5}));
  float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(values(clamp(tensor({nan}), 0, 1))[0]));
  EXPECT_WEFT_ERROR(clamp(x, std::nullopt, std::nullopt), "at least one of 'min' or 'max'");
}

TEST(Pow, TensorTensorBroadcastAndDTypes) {
  Tensor a = tensor({1, 2, 3, 4, 0.5, 9}, {2, 3});
  Tensor b = tensor({2, 0.5, -1}, {3});
  EXPECT_TRUE(tensor_near(pow(a, b), {1, std::sqrt(2.0), 1.0 / 3, 16, std::sqrt(0.5), 1.0 / 9}));
  EXPECT_TRUE(tensor_near(pow(a.t(), tensor({2, 3}, {2})), {1, 4 * 4 * 4, 4, 0.125, 9, 729}));
  for (DType d : kFloatDTypes) {
    Tensor r = pow(a.to(d), b.to(d));
    EXPECT_EQ(r.dtype(), d);
    std::vector<double> sa = stored({1, 2, 3, 4, 0.5, 9}, d), sb = stored({2, 0.5, -1}, d);
    std::vector<double> e;
    for (int i = 0; i < 6; ++i) e.push_back(std::pow(sa[i], sb[i % 3]));
    EXPECT_TRUE(tensor_near(r, e, tol_for(d))) << d;
  }
  Tensor ai = tensor(std::vector<int64_t>{2, -3, 5, 1, -1, 7});
  Tensor bi = tensor(std::vector<int64_t>{10, 3, 0, -2, -3, -1});
  Tensor ri = pow(ai, bi);
  EXPECT_EQ(ri.dtype(), DType::Int64);
  EXPECT_TRUE(tensor_near(ri, {1024, -27, 1, 1, -1, 0}));
  Tensor r32 = pow(ai.to(DType::Int32), tensor(std::vector<int32_t>{2}));
  EXPECT_EQ(r32.dtype(), DType::Int32);
  EXPECT_TRUE(tensor_near(r32, {4, 9, 25, 1, 1, 49}));
  // int ** float -> float
  Tensor mixed = pow(ai, tensor({0.5f}));
  EXPECT_EQ(mixed.dtype(), DType::Float32);
  EXPECT_NEAR(values(mixed)[0], std::sqrt(2.0), 1e-6);
  EXPECT_EQ(pow(tensor({2.0f}), tensor(std::vector<double>{3.0})).dtype(), DType::Float64);
  EXPECT_WEFT_ERROR(pow(a, tensor({1, 2}, {2})), "pow: shapes");
  EXPECT_WEFT_ERROR(pow(tensor(std::vector<bool>{true}), tensor(std::vector<bool>{true})), "pow");
}

TEST(Pow, ScalarExponent) {
  Tensor a = tensor({0.5, 1, 2, 3}, {4});
  EXPECT_TRUE(tensor_near(pow(a, 2), {0.25, 1, 4, 9}));
  EXPECT_TRUE(tensor_near(pow(a, 3), {0.125, 1, 8, 27}));
  EXPECT_TRUE(tensor_near(pow(a, 0.5), {std::sqrt(0.5), 1, std::sqrt(2.0), std::sqrt(3.0)}));
  EXPECT_TRUE(tensor_near(pow(a, -1), {2, 1, 0.5, 1.0 / 3}));
  EXPECT_TRUE(tensor_near(pow(a, 1), {0.5, 1, 2, 3}));
  EXPECT_TRUE(tensor_near(pow(a, 0), {1, 1, 1, 1}));
  EXPECT_TRUE(tensor_near(pow(a, 1.7), map({0.5, 1, 2, 3}, [](double x) { return std::pow(x, 1.7); })));
  EXPECT_TRUE(tensor_near(a.pow(2.0), {0.25, 1, 4, 9}));
  for (DType d : kFloatDTypes) {
    Tensor r = pow(a.to(d), 2.5);
    EXPECT_EQ(r.dtype(), d);
    EXPECT_TRUE(tensor_near(r, map({0.5, 1, 2, 3}, [](double x) { return std::pow(x, 2.5); }), tol_for(d)));
  }
  Tensor ai = tensor(std::vector<int32_t>{-2, 3, 4});
  EXPECT_EQ(pow(ai, 3).dtype(), DType::Int32);
  EXPECT_TRUE(tensor_near(pow(ai, 3), {-8, 27, 64}));
  EXPECT_EQ(pow(ai, 0.5).dtype(), DType::Float32);
  EXPECT_TRUE(tensor_near(pow(tensor(std::vector<uint8_t>{2, 3}), 2), {4, 9}));
  EXPECT_WEFT_ERROR(pow(ai, -1), "negative integer powers");
  // non-contiguous
  Tensor m = tensor({1, 2, 3, 4, 5, 6}, {2, 3}).t();
  EXPECT_TRUE(tensor_near(pow(m, 2), {1, 16, 4, 25, 9, 36}));
}

TEST(MinMax, BroadcastPromotionNaN) {
  Tensor a = tensor({1, 5, -2, 4, 0, 3}, {2, 3});
  Tensor b = tensor({2, 2, 2}, {3});
  EXPECT_TRUE(tensor_near(maximum(a, b), {2, 5, 2, 4, 2, 3}));
  EXPECT_TRUE(tensor_near(minimum(a, b), {1, 2, -2, 2, 0, 2}));
  EXPECT_TRUE(tensor_near(maximum(a.t(), tensor({0, 1}, {2})), {1, 4, 5, 1, 0, 3}));
  for (DType d : kFloatDTypes) {
    Tensor r = maximum(a.to(d), b.to(d));
    EXPECT_EQ(r.dtype(), d);
    EXPECT_TRUE(tensor_near(r, {2, 5, 2, 4, 2, 3}));
  }
  for (DType d : kIntDTypes) {
    Tensor r = minimum(tensor(std::vector<double>{1, 5, 3}).to(d), tensor(std::vector<double>{2, 2, 2}).to(d));
    EXPECT_EQ(r.dtype(), d);
    EXPECT_TRUE(tensor_near(r, {1, 2, 2}));
  }
  Tensor ti = tensor(std::vector<int32_t>{1, 7});
  EXPECT_EQ(maximum(ti, tensor({2.5f, 2.5f})).dtype(), DType::Float32);
  EXPECT_TRUE(tensor_near(maximum(ti, tensor({2.5f, 2.5f})), {2.5, 7}));
  EXPECT_EQ(maximum(ti, tensor(std::vector<int64_t>{0, 9})).dtype(), DType::Int64);
  Tensor tb = maximum(tensor(std::vector<bool>{true, false, false}), tensor(std::vector<bool>{false, false, true}));
  EXPECT_EQ(tb.dtype(), DType::Bool);
  EXPECT_TRUE(tensor_near(tb, {1, 0, 1}));
  float nan = std::numeric_limits<float>::quiet_NaN();
  auto mx = values(maximum(tensor({nan, 1.0f}), tensor({1.0f, nan})));
  EXPECT_TRUE(std::isnan(mx[0]) && std::isnan(mx[1]));
  auto mn = values(minimum(tensor({nan, 1.0f}), tensor({1.0f, nan})));
  EXPECT_TRUE(std::isnan(mn[0]) && std::isnan(mn[1]));
  EXPECT_WEFT_ERROR(maximum(a, tensor({1, 2}, {2})), "maximum: shapes [2, 3] and [2]");
  EXPECT_WEFT_ERROR(minimum(a, tensor({1, 2}, {2})), "minimum");
}

TEST(Compare, ValuesBroadcastOperators) {
  Tensor a = tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = tensor({2, 2, 7}, {3});
  struct C {
    Tensor r;
    std::vector<double> e;
  };
  std::vector<C> cases = {
      {eq(a, b), {0, 1, 0, 0, 0, 0}}, {ne(a, b), {1, 0, 1, 1, 1, 1}}, {lt(a, b), {1, 0, 1, 0, 0, 1}},
      {le(a, b), {1, 1, 1, 0, 0, 1}}, {gt(a, b), {0, 0, 0, 1, 1, 0}}, {ge(a, b), {0, 1, 0, 1, 1, 0}},
      {a == b, {0, 1, 0, 0, 0, 0}},   {a != b, {1, 0, 1, 1, 1, 1}},   {a < b, {1, 0, 1, 0, 0, 1}},
      {a <= b, {1, 1, 1, 0, 0, 1}},   {a > b, {0, 0, 0, 1, 1, 0}},    {a >= b, {0, 1, 0, 1, 1, 0}},
      {a == 3, {0, 0, 1, 0, 0, 0}},   {a < 3, {1, 1, 0, 0, 0, 0}},    {a > 3, {0, 0, 0, 1, 1, 1}},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(cases[i].r.dtype(), DType::Bool) << i;
    EXPECT_EQ(cases[i].r.sizes(), (Shape{2, 3})) << i;
    EXPECT_TRUE(tensor_near(cases[i].r, cases[i].e)) << i;
  }
  // non-contiguous: a.t() is (3, 2) = {1,4,2,5,3,6}
  EXPECT_TRUE(tensor_near(gt(a.t(), tensor({2, 4}, {2})), {0, 0, 0, 1, 1, 1}));
  // promotion: int tensor vs float scalar compares in float
  Tensor ai = tensor(std::vector<int64_t>{2, 3});
  EXPECT_TRUE(tensor_near(ai < 2.5, {1, 0}));
  EXPECT_TRUE(tensor_near(ai == 2.0, {1, 0}));
  EXPECT_TRUE(tensor_near(eq(ai, tensor({2.0f, 3.5f})), {1, 0}));
  for (DType d : {DType::Float16, DType::BFloat16, DType::Float64, DType::Int32, DType::UInt8, DType::Bool}) {
    Tensor x = tensor(std::vector<double>{0, 1, 1}).to(d), y = tensor(std::vector<double>{1, 1, 0}).to(d);
    EXPECT_TRUE(tensor_near(lt(x, y), {1, 0, 0})) << d;
    EXPECT_TRUE(tensor_near(eq(x, y), {0, 1, 0})) << d;
  }
  float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(tensor_near(eq(tensor({nan}), tensor({nan})), {0}));
  EXPECT_TRUE(tensor_near(ne(tensor({nan}), tensor({nan})), {1}));
  EXPECT_WEFT_ERROR(eq(a, tensor({1, 2}, {2})), "eq: shapes");
}

TEST(Logical, AnyDTypesNonzeroIsTrue) {
  Tensor a = tensor({0, 1, 2, 0});
  Tensor b = tensor(std::vector<int64_t>{0, 0, 3, 5});
  EXPECT_TRUE(tensor_near(logical_and(a, b), {0, 0, 1, 0}));
  EXPECT_TRUE(tensor_near(logical_or(a, b), {0, 1, 1, 1}));
  EXPECT_TRUE(tensor_near(logical_xor(a, b), {0, 1, 0, 1}));
  EXPECT_TRUE(tensor_near(logical_not(a), {1, 0, 0, 1}));
  EXPECT_EQ(logical_and(a, b).dtype(), DType::Bool);
  EXPECT_EQ(logical_not(b).dtype(), DType::Bool);
  for (DType d : {DType::Float16, DType::BFloat16, DType::Float64, DType::Int32, DType::UInt8, DType::Bool}) {
    Tensor x = tensor(std::vector<double>{0, 1, 1, 0}).to(d);
    EXPECT_TRUE(tensor_near(logical_not(x), {1, 0, 0, 1})) << d;
    EXPECT_TRUE(tensor_near(logical_and(x, tensor(std::vector<bool>{true, true, false, false})), {0, 1, 0, 0}));
  }
  float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(tensor_near(logical_not(tensor({nan, 0.0f})), {0, 1}));
  // broadcasting and strides
  Tensor m = tensor({0, 1, 1, 0, 1, 1}, {2, 3});
  EXPECT_TRUE(tensor_near(logical_or(m.t(), tensor({0, 0}, {2})), {0, 0, 1, 1, 1, 1}));
  EXPECT_WEFT_ERROR(logical_and(m, tensor({1, 1}, {2})), "logical_and");
}

TEST(Where, BroadcastPromotionAndErrors) {
  Tensor c = tensor(std::vector<bool>{true, false, true}, {3});
  Tensor a = tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = tensor({-1, -2}, {2, 1});
  Tensor r = where(c, a, b);
  EXPECT_EQ(r.sizes(), (Shape{2, 3}));
  EXPECT_TRUE(tensor_near(r, {1, -1, 3, 4, -2, 6}));
  // promotion: int64 with float32 -> float32; scalar operand
  Tensor ai = tensor(std::vector<int64_t>{10, 20, 30});
  Tensor rf = where(c, ai, tensor({0.5f, 0.5f, 0.5f}));
  EXPECT_EQ(rf.dtype(), DType::Float32);
  EXPECT_TRUE(tensor_near(rf, {10, 0.5, 30}));
  Tensor rs = where(c, ai, wrapped_scalar(0, DType::Int64, kCPU));
  EXPECT_EQ(rs.dtype(), DType::Int64);
  EXPECT_TRUE(tensor_near(rs, {10, 0, 30}));
  // non-contiguous condition and operands
  Tensor cm = gt(tensor({1, 0, 1, 0, 1, 0}, {2, 3}), tensor({0.5f}));
  EXPECT_TRUE(tensor_near(where(cm.t(), a.t(), zeros({3, 2})), {1, 0, 0, 5, 3, 0}));
  for (DType d : {DType::Float16, DType::BFloat16, DType::Float64, DType::Int32, DType::UInt8, DType::Bool}) {
    Tensor x = tensor(std::vector<double>{1, 1, 1}).to(d), y = tensor(std::vector<double>{0, 0, 0}).to(d);
    Tensor w = where(c, x, y);
    EXPECT_EQ(w.dtype(), d);
    EXPECT_TRUE(tensor_near(w, {1, 0, 1})) << d;
  }
  // the condition may be the largest operand
  Tensor cbig = gt(tensor({1, 0, 1, 0, 0, 1}, {2, 3}), tensor({0.5f}));
  Tensor rb = where(cbig, tensor({7, 8, 9}, {3}), wrapped_scalar(-1.0, DType::Float32, kCPU));
  EXPECT_EQ(rb.sizes(), (Shape{2, 3}));
  EXPECT_TRUE(tensor_near(rb, {7, -1, 9, -1, -1, 9}));
  EXPECT_WEFT_ERROR(where(tensor({1, 0, 1}), a, b), "where: expected a bool condition, got float32");
  EXPECT_WEFT_ERROR(where(tensor(std::vector<bool>{true, false}), a, b), "where: shapes");
}

TEST(InPlace, ValuesAndVersionBumps) {
  auto check = [](const char* name, const std::function<void(Tensor&)>& op, const std::vector<double>& in,
                  const std::vector<double>& expect) {
    Tensor x = tensor(in);
    uint64_t v = x.version();
    void* data = x.raw_data();
    op(x);
    EXPECT_EQ(x.version(), v + 1) << name;
    EXPECT_EQ(x.raw_data(), data) << name;
    EXPECT_TRUE(tensor_near(x, expect)) << name;
  };
  check("neg_", [](Tensor& x) { neg_(x); }, {1, -2}, {-1, 2});
  check("exp_", [](Tensor& x) { exp_(x); }, {0, 1}, {1, std::exp(1.0)});
  check("sqrt_", [](Tensor& x) { sqrt_(x); }, {4, 2}, {2, std::sqrt(2.0)});
  check("relu_", [](Tensor& x) { relu_(x); }, {-1, 2}, {0, 2});
  check("sigmoid_", [](Tensor& x) { sigmoid_(x); }, {0, 1}, {0.5, sigmoid_ref(1)});
  check("tanh_", [](Tensor& x) { tanh_(x); }, {0, 1}, {0, std::tanh(1.0)});
  check("clamp_", [](Tensor& x) { clamp_(x, -1, 1); }, {-3, 0.5}, {-1, 0.5});
  check("addcmul_", [](Tensor& x) { addcmul_(x, tensor({2, 3}), tensor({4, 5}), 0.5); }, {1, 1}, {5, 8.5});
  check("addcdiv_", [](Tensor& x) { addcdiv_(x, tensor({2, 3}), tensor({4, 6}), 2); }, {1, 1}, {2, 2});
  check("lerp_", [](Tensor& x) { lerp_(x, tensor({10, 20}), 0.25); }, {2, 4}, {4, 8});
}

TEST(InPlace, DTypesStridesAndBroadcast) {
  // in-place on a non-contiguous view writes through to the base
  Tensor base = tensor({-1, 2, -3, 4, -5, 6}, {2, 3});
  Tensor v = base.t();
  relu_(v);
  EXPECT_TRUE(tensor_near(base, {0, 2, 0, 4, 0, 6}));
  Tensor col = base.select(1, 1);  // {2, 0}
  exp_(col);
  EXPECT_TRUE(tensor_near(base, {0, std::exp(2.0), 0, 4, 1, 6}));
  for (DType d : kFloatDTypes) {
    Tensor x = tensor({0.25f, 1.0f, 4.0f}).to(d);
    sqrt_(x);
    EXPECT_EQ(x.dtype(), d);
    EXPECT_TRUE(tensor_near(x, {0.5, 1, 2}, tol_for(d)));
    Tensor y = tensor({1.0f, 2.0f, 3.0f}).to(d);
    addcmul_(y, tensor({1.0f, 1.0f, 1.0f}).to(d), scalar_tensor(2.0), 2);  // 0-dim float32 keeps d
    EXPECT_TRUE(tensor_near(y, {5, 6, 7}, tol_for(d)));
  }
  Tensor xi = tensor(std::vector<int64_t>{-3, 5});
  relu_(xi);
  EXPECT_TRUE(tensor_near(xi, {0, 5}));
  neg_(xi);
  EXPECT_TRUE(tensor_near(xi, {0, -5}));
  clamp_(xi, -2, std::nullopt);
  EXPECT_TRUE(tensor_near(xi, {0, -2}));
  addcmul_(xi, tensor(std::vector<int64_t>{2, 3}), tensor(std::vector<int32_t>{4}), 2);
  EXPECT_TRUE(tensor_near(xi, {16, 22}));
  // broadcasting the other operands over a
  Tensor m = zeros({2, 3});
  addcdiv_(m, tensor({1, 2, 3}, {3}), tensor({2, 4}, {2, 1}));
  EXPECT_TRUE(tensor_near(m, {0.5, 1, 1.5, 0.25, 0.5, 0.75}));
  Tensor l = zeros({2, 2});
  lerp_(l, tensor({4, 8}, {2}), 0.5);
  EXPECT_TRUE(tensor_near(l, {2, 4, 2, 4}));
}

TEST(InPlace, EveryFloatDType) {
  for (DType d : kFloatDTypes) {
    double tol = tol_for(d) * 2;
    auto make = [d] { return tensor({-1.5f, 0.25f, 2.0f}).to(d); };
    Tensor x = make();
    neg_(x);
    EXPECT_TRUE(tensor_near(x, {1.5, -0.25, -2}, tol)) << d;
    x = make();
    exp_(x);
    EXPECT_TRUE(tensor_near(x, {std::exp(-1.5), std::exp(0.25), std::exp(2.0)}, tol)) << d;
    x = make();
    relu_(x);
    EXPECT_TRUE(tensor_near(x, {0, 0.25, 2}, tol)) << d;
    x = make();
    sigmoid_(x);
    EXPECT_TRUE(tensor_near(x, {sigmoid_ref(-1.5), sigmoid_ref(0.25), sigmoid_ref(2)}, tol)) << d;
    x = make();
    tanh_(x);
    EXPECT_TRUE(tensor_near(x, {std::tanh(-1.5), std::tanh(0.25), std::tanh(2.0)}, tol)) << d;
    x = make();
    clamp_(x, 0, 1);
    EXPECT_TRUE(tensor_near(x, {0, 0.25, 1}, tol)) << d;
    x = make();
    addcdiv_(x, make(), tensor({2.0f, 2.0f, 2.0f}).to(d), 2);
    EXPECT_TRUE(tensor_near(x, {-3, 0.5, 4}, tol)) << d;
    x = make();
    lerp_(x, tensor({0.5f, 0.25f, 0.0f}).to(d), 0.5);
    EXPECT_TRUE(tensor_near(x, {-0.5, 0.25, 1}, tol)) << d;
    EXPECT_EQ(x.dtype(), d);
  }
}

TEST(InPlace, Errors) {
  Tensor xi = tensor(std::vector<int64_t>{1, 4});
  EXPECT_WEFT_ERROR(sqrt_(xi), "sqrt_: result type float32 can't be cast to the desired output type int64");
  EXPECT_WEFT_ERROR(exp_(xi), "exp_");
  EXPECT_WEFT_ERROR(sigmoid_(xi), "sigmoid_");
  EXPECT_WEFT_ERROR(tanh_(xi), "tanh_");
  EXPECT_WEFT_ERROR(clamp_(xi, 0.5, std::nullopt), "clamp_: result type float32 can't be cast");
  Tensor b = tensor(std::vector<bool>{true});
  EXPECT_WEFT_ERROR(neg_(b), "neg_");
  EXPECT_WEFT_ERROR(relu_(b), "relu_");
  EXPECT_WEFT_ERROR(addcdiv_(xi, xi, xi), "addcdiv_: integer division");
  EXPECT_WEFT_ERROR(lerp_(xi, xi, 0.5), "lerp_: expected a floating tensor");
  Tensor small = zeros({3});
  EXPECT_WEFT_ERROR(addcmul_(small, zeros({2, 3}), zeros({3})), "addcmul_: output with shape [3]");
  EXPECT_WEFT_ERROR(addcmul_(small, zeros({2}), zeros({3})), "addcmul_: shapes");
  EXPECT_WEFT_ERROR(addcmul_(xi, tensor({1.5f, 1.5f}), xi), "addcmul_: result type float32 can't be cast");
  EXPECT_WEFT_ERROR(lerp_(small, zeros({4}), 0.5), "lerp_");
  // a leaf that requires grad cannot be modified in place under grad mode
  Tensor leaf = zeros({2}).requires_grad_();
  EXPECT_WEFT_ERROR(exp_(leaf), "exp_: a leaf tensor that requires grad");
  EXPECT_WEFT_ERROR(clamp_(leaf, 0, 1), "clamp_: a leaf tensor");
  EXPECT_WEFT_ERROR(addcmul_(leaf, leaf, leaf), "addcmul_: a leaf tensor");
}

// Floating values to integer dtypes: truncated toward zero through int64, then
// wrapped to the width (a plain C++ cast leaves negative-to-unsigned undefined;
// PyTorch gives the same 254 for -2.0 as uint8). Contiguous and strided sources;
// the CUDA kernels are held to the same values by elementwise_gpu_test.
TEST(Cast, FloatToIntegerTruncatesThroughInt64AndWraps) {
  const std::vector<double> src = {-2.0, -1.5, 300.0, 255.9, 3.7, -0.5};
  const std::vector<double> as_u8 = {254, 255, 44, 255, 3, 0};
  const std::vector<double> as_i32 = {-2, -1, 300, 255, 3, 0};
  for (DType from : {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16}) {
    SCOPED_TRACE(dtype_name(from));
    // bfloat16 holds 255.9 as 256 and 3.7 as 3.703125; half 255.9 as 255.875
    std::vector<double> u8 = as_u8, i32 = as_i32;
    if (from == DType::BFloat16) u8[3] = 0, i32[3] = 256;
    Tensor x = tensor<double>(src, {6}).to(from);
    EXPECT_EQ(values(x.to(DType::UInt8).to(DType::Float64)), u8);
    EXPECT_EQ(values(x.to(DType::Int32).to(DType::Float64)), i32);
    EXPECT_EQ(values(x.to(DType::Int64).to(DType::Float64)), i32);
    // strided: every other element of a (6, 2) tensor's column
    Tensor wide = stack({x, x}, 1);  // (6, 2)
    EXPECT_EQ(values(wide.select(1, 1).to(DType::UInt8).to(DType::Float64)), u8);
  }
}

// A C++ number beside a float64 tensor keeps its double value (0.1 and 1.3 are
// not float32 numbers); beside float32 and integer tensors the dtypes stay
// PyTorch's (float32, and float32 for int64 * 1.5).
TEST(WrappedNumbers, KeepDoublePrecisionBesideFloat64) {
  Tensor d = tensor(std::vector<double>{1.0, 3.0}, {2}, {DType::Float64});
  EXPECT_EQ(values(d * 0.1), (std::vector<double>{0.1, 3.0 * 0.1}));
  EXPECT_EQ(values(d + 1.3), (std::vector<double>{1.0 + 1.3, 3.0 + 1.3}));
  EXPECT_EQ(values(d / 0.3), (std::vector<double>{1.0 / 0.3, 3.0 / 0.3}));
  EXPECT_EQ(values(1.3 - d), (std::vector<double>{1.3 - 1.0, 1.3 - 3.0}));
  EXPECT_EQ(values(d > 1.0000000001), (std::vector<double>{0, 1}));  // not rounded to 1.0f
  EXPECT_EQ((d * 0.1).dtype(), DType::Float64);
  Tensor f = tensor({1.0f, 3.0f}, {2});
  EXPECT_EQ((f * 0.1).dtype(), DType::Float32);
  EXPECT_EQ(values(f * 0.1), (std::vector<double>{0.1f, 3.0f * 0.1f}));
  Tensor i = tensor<int64_t>({2, 3}, {2}, {DType::Int64});
  EXPECT_EQ((i * 1.5).dtype(), DType::Float32);
  EXPECT_EQ((i * 2).dtype(), DType::Int64);
}

}  // namespace
}  // namespace weft
