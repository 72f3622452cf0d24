// sin, cos, erf, log1p, expm1, reciprocal, floor, ceil, round: values against
// <cmath> (float64 exactly, float32 within a few ulp, small-x accuracy of
// log1p/expm1 relative to the true value), round half to even and the sign of
// zero by hand, integer inputs (floor/ceil/round keep them, the others promote
// to float32, bool is an error), strided inputs, the Tensor methods, autograd
// values by hand and float64 gradchecks.
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "autograd/gradcheck.h"
#include "core/ops.h"
#include "tests/testing.h"

namespace weft {
namespace {
using testing::values;

using TensorFn = Tensor (*)(const Tensor&);
using DoubleFn = double (*)(double);

struct Op {
  const char* name;
  TensorFn op;
  DoubleFn ref;  // <cmath> in double
};

double ref_reciprocal(double x) { return 1.0 / x; }
double ref_sin(double x) { return std::sin(x); }
double ref_cos(double x) { return std::cos(x); }
double ref_erf(double x) { return std::erf(x); }
double ref_log1p(double x) { return std::log1p(x); }
double ref_expm1(double x) { return std::expm1(x); }
double ref_floor(double x) { return std::floor(x); }
double ref_ceil(double x) { return std::ceil(x); }

const std::vector<Op> kSmoothOps = {
    {"sin", [](const Tensor& t) { return sin(t); }, ref_sin},
    {"cos", [](const Tensor& t) { return cos(t); }, ref_cos},
    {"erf", [](const Tensor& t) { return erf(t); }, ref_erf},
    {"log1p", [](const Tensor& t) { return log1p(t); }, ref_log1p},
    {"expm1", [](const Tensor& t) { return expm1(t); }, ref_expm1},
    {"reciprocal", [](const Tensor& t) { return reciprocal(t); }, ref_reciprocal},
};

// Edge values and a spread (log1p's domain is x >= -1; -1 gives -inf).
std::vector<double> edge_values() {
  std::vector<double> v = {0.0,  -0.0, 0.5,    -0.5, 1.5,    2.5,   -2.5,   1.0,  -1.0, 1e-3, -1e-3,
                           1e-8, 1e-7, -1e-12, 3.0,  -0.999, 10.25, -17.75, 50.0, 80.0, 1e-30};
  for (int i = -40; i <= 40; ++i) v.push_back(0.37 * i);
  return v;
}

// |got - want| <= tol * |want| (relative), exact match for infinities, both NaN ok.
::testing::AssertionResult rel_close(const std::vector<double>& got, const std::vector<double>& want, double tol,
                                     const std::vector<double>& in) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "size " << got.size() << " != " << want.size();
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i]) && std::isnan(got[i])) continue;
    if (std::isinf(want[i]) && got[i] == want[i]) continue;
    if (!(std::abs(got[i] - want[i]) <= tol * std::abs(want[i])))
      return ::testing::AssertionFailure()
             << "x = " << in[i] << ": got " << got[i] << ", want " << want[i] << " (relative error "
             << std::abs(got[i] - want[i]) / std::abs(want[i]) << ")";
  }
  return ::testing::AssertionSuccess();
}

TEST(UnaryMath, Float64MatchesCmath) {
  std::vector<double> in = edge_values();
  Tensor x = tensor(in, {static_cast<int64_t>(in.size())});
  for (const Op& op : kSmoothOps) {
    Tensor y = op.op(x);
    EXPECT_EQ(y.dtype(), DType::Float64) << op.name;
    std::vector<double> want;
    for (double v : in) want.push_back(op.ref(v));
    EXPECT_TRUE(rel_close(values(y), want, 1e-14, in)) << op.name;
  }
  std::vector<double> want_floor, want_ceil;
  for (double v : in) want_floor.push_back(std::floor(v)), want_ceil.push_back(std::ceil(v));
  EXPECT_EQ(values(floor(x)), want_floor);
  EXPECT_EQ(values(ceil(x)), want_ceil);
}

TEST(UnaryMath, Float32WithinAFewUlpOfTheTrueValue) {
  // float inputs, reference <cmath> in double of the same float value
  std::vector<float> in;
  for (double v : edge_values()) in.push_back(static_cast<float>(v));
  for (int i = 0; i < 4003; ++i) in.push_back(-0.99f + 12.0f * static_cast<float>(i) / 4003.0f);  // vector path + tail
  std::vector<double> ind(in.begin(), in.end());
  Tensor x = tensor(in, {static_cast<int64_t>(in.size())});
  for (const Op& op : kSmoothOps) {
    Tensor y = op.op(x);
    EXPECT_EQ(y.dtype(), DType::Float32) << op.name;
    std::vector<double> want;
    for (float v : in) want.push_back(op.ref(static_cast<double>(v)));
    std::vector<double> got = values(y);
    if (std::string(op.name) == "erf" || std::string(op.name) == "sin" || std::string(op.name) == "cos") {
      // erf: absolute error < 2e-7 (core/cpu/vec_math.h); sin/cos near their zeros: absolute
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_NEAR(got[i], want[i], 4e-7 * (1.0 + std::abs(want[i]))) << op.name << "(" << in[i] << ")";
    } else {
      EXPECT_TRUE(rel_close(got, want, 5e-7, ind)) << op.name;  // ~4 ulp
    }
  }
}

TEST(UnaryMath, Log1pExpm1KeepRelativeAccuracyNearZero) {
  // log(1 + x) and exp(x) - 1 lose every digit here; the ops must not.
  const std::vector<double> tiny = {1e-3, -1e-3, 3e-5, -3e-5, 1e-7, -1e-7, 1e-10, -1e-10, 1e-20, -1e-20, 1e-38};
  for (DType dt : {DType::Float32, DType::Float64}) {
    Tensor x = tensor(tiny, {static_cast<int64_t>(tiny.size())}).to(dt);
    std::vector<double> in = values(x);  // the values actually stored
    std::vector<double> want_l, want_e;
    for (double v : in) want_l.push_back(std::log1p(v)), want_e.push_back(std::expm1(v));
    double tol = dt == DType::Float32 ? 4e-7 : 1e-15;
    EXPECT_TRUE(rel_close(values(log1p(x)), want_l, tol, in)) << dt;
    EXPECT_TRUE(rel_close(values(expm1(x)), want_e, tol, in)) << dt;
  }
  // -0 stays -0; log1p(-1) = -inf, below -1 NaN; expm1(-inf) = -1, expm1(inf) = inf
  for (DType dt : {DType::Float32, DType::Float64}) {
    Tensor l = log1p(tensor<double>({-0.0, -1.0, -2.0, INFINITY}, {4}).to(dt));
    std::vector<double> lv = values(l);
    EXPECT_TRUE(lv[0] == 0.0 && std::signbit(lv[0])) << dt;
    EXPECT_EQ(lv[1], -INFINITY) << dt;
    EXPECT_TRUE(std::isnan(lv[2])) << dt;
    EXPECT_EQ(lv[3], INFINITY) << dt;
    std::vector<double> ev = values(expm1(tensor<double>({-0.0, -INFINITY, INFINITY, -200.0}, {4}).to(dt)));
    EXPECT_TRUE(ev[0] == 0.0 && std::signbit(ev[0])) << dt;
    EXPECT_EQ(ev[1], -1.0) << dt;
    EXPECT_EQ(ev[2], INFINITY) << dt;
    EXPECT_EQ(ev[3], -1.0) << dt;
  }
}

TEST(UnaryMath, RoundIsHalfToEvenAndRoundingKeepsTheSignOfZero) {
  const std::vector<double> in = {-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 0.49999997, -3.7, 3.7, 1e20, -0.0, -0.4, 0.0};
  const std::vector<double> want_round = {-2, -2, -0.0, 0, 2, 2, 4, 0, -4, 4, 1e20, -0.0, -0.0, 0};
  const std::vector<double> want_floor = {-3, -2, -1, 0, 1, 2, 3, 0, -4, 3, 1e20, -0.0, -1, 0};
  const std::vector<double> want_ceil = {-2, -1, -0.0, 1, 2, 3, 4, 1, -3, 4, 1e20, -0.0, -0.0, 0};
  for (DType dt : {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16}) {
    Tensor x = tensor(in, {static_cast<int64_t>(in.size())}).to(dt);
    std::vector<double> xs = values(x);  // 16-bit types round some inputs first
    struct R {
      const char* name;
      TensorFn fn;
      const std::vector<double>& want;
    };
    for (const R& r : {R{"round", &round, want_round}, R{"floor", &floor, want_floor}, R{"ceil", &ceil, want_ceil}}) {
      const char* name = r.name;
      const std::vector<double>& want = r.want;
      Tensor y = r.fn(x);
      EXPECT_EQ(y.dtype(), dt) << name;
      std::vector<double> got = values(y);
      for (size_t i = 0; i < in.size(); ++i) {
        if (xs[i] != in[i]) continue;  // not representable in dt (0.49999997 and 1e20 in 16 bits)
        EXPECT_EQ(got[i], want[i]) << name << "(" << in[i] << ") " << dt;
        EXPECT_EQ(std::signbit(got[i]), std::signbit(want[i])) << name << "(" << in[i] << ") " << dt;
      }
    }
  }
  // infinities and NaN pass through
  Tensor s = tensor<double>({INFINITY, -INFINITY, NAN}, {3});
  for (TensorFn fn : {&round, &floor, &ceil}) {
    std::vector<double> got = values(fn(s.to(DType::Float32)));
    EXPECT_EQ(got[0], INFINITY);
    EXPECT_EQ(got[1], -INFINITY);
    EXPECT_TRUE(std::isnan(got[2]));
  }
}

TEST(UnaryMath, IntegerInputs) {
  for (DType dt : {DType::Int64, DType::Int32, DType::UInt8}) {
    Tensor x = tensor<double>({0, 3, 7, 250}, {4}).to(dt);
    for (TensorFn fn : {&floor, &ceil, &round}) {
      Tensor y = fn(x);
      EXPECT_EQ(y.dtype(), dt);
      EXPECT_EQ(values(y), values(x));
    }
  }
  Tensor i = tensor<int64_t>({-3, -1, 2, 4}, {4});
  EXPECT_EQ(values(round(i)), (std::vector<double>{-3, -1, 2, 4}));
  // the floating ops promote integers to float32
  Tensor r = reciprocal(i);
  EXPECT_EQ(r.dtype(), DType::Float32);
  EXPECT_TRUE(testing::tensor_near(r, {-1.0 / 3, -1, 0.5, 0.25}));
  for (const Op& op : kSmoothOps) {
    Tensor y = op.op(tensor<int32_t>({0, 1, 2}, {3}));
    EXPECT_EQ(y.dtype(), DType::Float32) << op.name;
    EXPECT_TRUE(testing::tensor_near(y, {op.ref(0), op.ref(1), op.ref(2)}, 1e-6)) << op.name;
  }
  Tensor b = tensor<double>({1, 0}, {2}).to(DType::Bool);
  EXPECT_WEFT_ERROR(floor(b), "floor: not supported for dtype bool");
  EXPECT_WEFT_ERROR(ceil(b), "ceil: not supported for dtype bool");
  EXPECT_WEFT_ERROR(round(b), "round: not supported for dtype bool");
}

TEST(UnaryMath, StridedInputsAndTensorMethods) {
  // (12, 10) float32/float64: transposed (non-contiguous) and a column slice with step 3
  for (DType dt : {DType::Float32, DType::Float64}) {
    Tensor m = mul(testing::rnd({12, 10}, DType::Float64, 5), scalar_tensor(4.0, {DType::Float64})).to(dt);
    const std::vector<Tensor> views = {m.t(), m.slice(1, 1, std::nullopt, 3), m.t().slice(0, 2, 9, 2)};
    std::vector<std::pair<const char*, TensorFn>> all;
    for (const Op& op : kSmoothOps) all.emplace_back(op.name, op.op);
    all.emplace_back("floor", &floor);
    all.emplace_back("ceil", &ceil);
    all.emplace_back("round", &round);
    for (const Tensor& v : views) {
      ASSERT_FALSE(v.is_contiguous());
      Tensor c = v.contiguous();
      for (auto& [name, fn] : all) {
        Tensor in = std::string(name) == "log1p" ? abs(v) : v;
        Tensor inc = std::string(name) == "log1p" ? abs(c) : c;
        Tensor y = fn(in);
        EXPECT_EQ(y.sizes(), v.sizes()) << name;
        EXPECT_EQ(values(y), values(fn(inc))) << name << " " << dt;  // same values as on a contiguous copy
      }
    }
    // the values of a strided view against <cmath> element by element
    Tensor v = m.t();
    std::vector<double> xs = values(v), got = values(sin(v));
    for (size_t i = 0; i < xs.size(); ++i) EXPECT_NEAR(got[i], std::sin(xs[i]), 1e-6) << i;
  }
  Tensor x = testing::rnd({7}, DType::Float64, 9);
  EXPECT_EQ(values(x.sin()), values(sin(x)));
  EXPECT_EQ(values(x.cos()), values(cos(x)));
  EXPECT_EQ(values(x.erf()), values(erf(x)));
  EXPECT_EQ(values(x.log1p()), values(log1p(x)));
  EXPECT_EQ(values(x.expm1()), values(expm1(x)));
  EXPECT_EQ(values(x.reciprocal()), values(reciprocal(x)));
  EXPECT_EQ(values(x.floor()), values(floor(x)));
  EXPECT_EQ(values(x.ceil()), values(ceil(x)));
  EXPECT_EQ(values(x.round()), values(round(x)));
}

TEST(UnaryMath, BackwardValuesByHand) {
  const std::vector<double> in = {-1.7, -0.6, -0.2, 0.3, 0.8, 2.4};
  struct G {
    const char* name;
    TensorFn op;
    std::function<double(double)> grad;
  };
  const double k = 2.0 / std::sqrt(M_PI);
  const std::vector<G> cases = {
      {"sin", [](const Tensor& t) { return sin(t); }, [](double v) { return std::cos(v); }},
      {"cos", [](const Tensor& t) { return cos(t); }, [](double v) { return -std::sin(v); }},
      {"erf", [](const Tensor& t) { return erf(t); }, [k](double v) { return k * std::exp(-v * v); }},
      {"log1p", [](const Tensor& t) { return log1p(t); }, [](double v) { return 1.0 / (1.0 + v); }},
      {"expm1", [](const Tensor& t) { return expm1(t); }, [](double v) { return std::exp(v); }},
      {"reciprocal", [](const Tensor& t) { return reciprocal(t); }, [](double v) { return -1.0 / (v * v); }},
      {"floor", [](const Tensor& t) { return floor(t); }, [](double) { return 0.0; }},
      {"ceil", [](const Tensor& t) { return ceil(t); }, [](double) { return 0.0; }},
      {"round", [](const Tensor& t) { return round(t); }, [](double) { return 0.0; }},
  };
  const std::vector<double> dy = {0.5, -1.0, 2.0, 1.5, -0.25, 3.0};
  for (DType dt : {DType::Float64, DType::Float32}) {
    for (const G& c : cases) {
      Tensor x = tensor(in, {6}).to(dt).requires_grad_();
      Tensor y = c.op(x);
      y.backward(tensor(dy, {6}).to(dt));
      ASSERT_TRUE(x.grad().defined()) << c.name;
      std::vector<double> want;
      for (size_t i = 0; i < in.size(); ++i) want.push_back(dy[i] * c.grad(in[i]));
      EXPECT_TRUE(testing::tensor_near(x.grad(), want, dt == DType::Float64 ? 1e-12 : 2e-6)) << c.name << " " << dt;
    }
  }
}

TEST(UnaryMath, GradcheckFloat64) {
  auto leaf = [](std::vector<double> v) { return tensor(v, {2, 3}).requires_grad_(); };
  // away from the poles (reciprocal at 0, log1p at -1) and the jumps of floor/ceil/round
  Tensor any = leaf({-0.8, -0.7, -0.2, 0.35, 0.9, 1.7});
  for (const Op& op : kSmoothOps) {
    TensorFn f = op.op;
    auto r = autograd::gradcheck([f](const std::vector<Tensor>& in) { return f(in[0]); }, {any});
    EXPECT_TRUE(r.ok) << op.name << ": " << r.message;
  }
  // through a transposed view, and composed (the chain rule through the new nodes)
  auto r = autograd::gradcheck(
      [](const std::vector<Tensor>& in) { return mul(sin(in[0].t()), expm1(reciprocal(in[0].t()))); }, {any});
  EXPECT_TRUE(r.ok) << r.message;
  for (TensorFn f : {&floor, &ceil, &round}) {
    auto rz = autograd::gradcheck([f](const std::vector<Tensor>& in) { return f(in[0]); }, {any});
    EXPECT_TRUE(rz.ok) << rz.message;
  }
}

}  // namespace
}  // namespace weft
