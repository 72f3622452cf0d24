// CUDA elementwise kernels (core/cuda/{unary,binary,compare,ternary}.cu) against
// the CPU kernels: every op on random inputs for every registered dtype, odd
// sizes, non-contiguous and broadcast operands, NaN propagation, in-place forms,
// poisoned (non-contiguous) outputs through the kernel tables, and float64
// gradcheck through GPU ops. Skips without a GPU.
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "autograd/gradcheck.h"
#include "core/kernels/binary.h"
#include "core/kernels/compare.h"
#include "core/kernels/ternary.h"
#include "core/kernels/unary.h"
#include "core/ops.h"
#include "tests/cuda/gpu_testing.h"

namespace weft {
namespace {
using testing::kGPU;
using testing::matches_cpu;
using testing::rnd;
using testing::tensors_near;
using Fn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

const std::vector<DType> kFloat = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16};
const std::vector<DType> kNumeric = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16,
                                     DType::Int64,   DType::Int32,   DType::UInt8};
const std::vector<DType> kAll = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16,
                                 DType::Int64,   DType::Int32,   DType::UInt8,   DType::Bool};

enum class Domain { Any, Positive };

// Random values of dtype dt: floats in [-scale, scale) (or (0.1, scale + 0.1] when
// Positive), integers in [-scale, scale] (non-negative for uint8), bool ~50/50.
Tensor input(const Shape& s, DType dt, uint64_t seed, double scale = 3.0, Domain d = Domain::Any) {
  Tensor x = rnd(s, DType::Float64, seed);
  if (dt == DType::Bool) return gt(x, zeros({}, {DType::Float64}));
  x = x * scale;
  if (d == Domain::Positive || dt == DType::UInt8) x = abs(x) + 0.1;
  if (!is_floating(dt)) x = x.to(DType::Int64).to(DType::Float64);  // truncate toward 0 first
  return x.to(dt);
}

// Shapes covering size 1, odd sizes, the vectorised path (multiple of 4) and its tail.
const std::vector<Shape> kShapes = {{1}, {7}, {4096}, {1003}, {3, 5, 7}};

// Views applied inside the op so CPU and GPU both see non-contiguous operands.
const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> kViews = {
    {"contiguous", [](const Tensor& t) { return t; }},
    {"transposed", [](const Tensor& t) { return t.t(); }},
    {"sliced", [](const Tensor& t) { return t.slice(1, 1, std::nullopt, 2); }},
};

// Runs fn(x) on CPU and GPU for every dtype, shape and view.
void check_unary(const char* name, const std::function<Tensor(const Tensor&)>& fn, const std::vector<DType>& dtypes,
                 Domain d = Domain::Any, double scale = 3.0) {
  uint64_t seed = 10;
  for (DType dt : dtypes) {
    for (const Shape& s : kShapes) {
      Tensor x = input(s, dt, ++seed, scale, d);
      EXPECT_TRUE(matches_cpu([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{fn(in[0])}; }, {x}))
          << name << " " << dt << " " << shape_str(s);
    }
    Tensor m = input({37, 46}, dt, ++seed, scale, d);
    for (auto& [vname, view] : kViews)
      EXPECT_TRUE(matches_cpu([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{fn(view(in[0]))}; }, {m}))
          << name << " " << dt << " " << vname;
  }
}

TEST(CudaUnary, ForwardMatchesCpu) {
  WEFT_REQUIRE_GPU();
  check_unary(
      "neg", [](const Tensor& x) { return neg(x); }, kNumeric);
  check_unary(
      "abs", [](const Tensor& x) { return abs(x); }, kNumeric);
  check_unary(
      "sign", [](const Tensor& x) { return sign(x); }, kAll);
  check_unary(
      "relu", [](const Tensor& x) { return relu(x); }, kNumeric);
  check_unary(
      "exp", [](const Tensor& x) { return exp(x); }, kFloat);
  check_unary(
      "log", [](const Tensor& x) { return log(x); }, kFloat, Domain::Positive);
  check_unary(
      "sqrt", [](const Tensor& x) { return sqrt(x); }, kFloat, Domain::Positive);
  check_unary(
      "rsqrt", [](const Tensor& x) { return rsqrt(x); }, kFloat, Domain::Positive);
  check_unary(
      "sigmoid", [](const Tensor& x) { return sigmoid(x); }, kFloat, Domain::Any, 8.0);
  check_unary(
      "tanh", [](const Tensor& x) { return tanh(x); }, kFloat);
  check_unary(
      "silu", [](const Tensor& x) { return silu(x); }, kFloat, Domain::Any, 8.0);
  check_unary(
      "gelu", [](const Tensor& x) { return gelu(x); }, kFloat);
  check_unary(
      "gelu_tanh", [](const Tensor& x) { return gelu(x, GeluApproximation::Tanh); }, kFloat);
  check_unary(
      "sin", [](const Tensor& x) { return sin(x); }, kFloat, Domain::Any, 8.0);
  check_unary(
      "cos", [](const Tensor& x) { return cos(x); }, kFloat, Domain::Any, 8.0);
  check_unary(
      "erf", [](const Tensor& x) { return erf(x); }, kFloat);
  check_unary(
      "log1p", [](const Tensor& x) { return log1p(x); }, kFloat, Domain::Positive);
  check_unary(
      "log1p(small)", [](const Tensor& x) { return log1p(x); }, kFloat, Domain::Any, 1e-4);
  check_unary(
      "expm1", [](const Tensor& x) { return expm1(x); }, kFloat);
  check_unary(
      "expm1(small)", [](const Tensor& x) { return expm1(x); }, kFloat, Domain::Any, 1e-4);
  check_unary(
      "reciprocal", [](const Tensor& x) { return reciprocal(x); }, kFloat, Domain::Positive);
  // floor, ceil, round keep the dtype (integers unchanged); inputs scaled to hit .5 ties
  check_unary(
      "floor", [](const Tensor& x) { return floor(x); }, kNumeric, Domain::Any, 5.0);
  check_unary(
      "ceil", [](const Tensor& x) { return ceil(x); }, kNumeric, Domain::Any, 5.0);
  check_unary(
      "round", [](const Tensor& x) { return round(x); }, kNumeric, Domain::Any, 5.0);
  Tensor ties = tensor<double>({-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, -0.0, -0.4}, {8});
  for (DType dt : kFloat)
    EXPECT_TRUE(
        matches_cpu([](const std::vector<Tensor>& in) { return std::vector<Tensor>{round(in[0])}; }, {ties.to(dt)}))
        << "round ties " << dt;
  // integral inputs of the floating ops promote to float32 on both devices
  check_unary("exp(int)", [](const Tensor& x) { return exp(x); }, {DType::Int32, DType::Int64});
  check_unary("sin(int)", [](const Tensor& x) { return sin(x); }, {DType::Int32, DType::Int64});
  check_unary(
      "reciprocal(int)", [](const Tensor& x) { return reciprocal(x); }, {DType::Int32, DType::Int64}, Domain::Positive);
}

TEST(CudaUnary, ClampWithOptionalBounds) {
  WEFT_REQUIRE_GPU();
  check_unary(
      "clamp(lo,hi)", [](const Tensor& x) { return clamp(x, Scalar(-1), Scalar(2)); }, kNumeric);
  check_unary(
      "clamp(lo)", [](const Tensor& x) { return clamp(x, Scalar(1), std::nullopt); }, kNumeric);
  check_unary(
      "clamp(hi)", [](const Tensor& x) { return clamp(x, std::nullopt, Scalar(0.5)); }, kFloat);
  check_unary(
      "clamp(lo>hi)", [](const Tensor& x) { return clamp(x, Scalar(2), Scalar(1)); }, kNumeric);
  // NaN stays NaN
  Tensor x = tensor<double>({NAN, -5, 0.5, 5}, {4});
  Tensor got = clamp(x.to(kGPU), Scalar(-1), Scalar(1)).cpu();
  EXPECT_TRUE(std::isnan(testing::values(got)[0]));
  EXPECT_TRUE(tensors_near(got.slice(0, 1, std::nullopt), tensor<double>({-1, 0.5, 1}, {3}), 0));
}

TEST(CudaUnary, GradientKernelsMatchCpu) {
  WEFT_REQUIRE_GPU();
  struct G {
    const char* name;
    UnaryGradKernel& (*table)();
    Domain d;
  };
  const std::vector<G> grads = {
      {"exp", exp_backward_table, Domain::Any},
      {"log", log_backward_table, Domain::Positive},
      {"sqrt", sqrt_backward_table, Domain::Positive},
      {"rsqrt", rsqrt_backward_table, Domain::Positive},
      {"abs", abs_backward_table, Domain::Any},
      {"relu", relu_backward_table, Domain::Any},
      {"sigmoid", sigmoid_backward_table, Domain::Any},
      {"tanh", tanh_backward_table, Domain::Any},
      {"silu", silu_backward_table, Domain::Any},
      {"gelu", gelu_backward_table, Domain::Any},
      {"gelu_tanh", gelu_tanh_backward_table, Domain::Any},
      {"sin", sin_backward_table, Domain::Any},
      {"cos", cos_backward_table, Domain::Any},
      {"erf", erf_backward_table, Domain::Any},
      {"log1p", log1p_backward_table, Domain::Positive},
      {"expm1", expm1_backward_table, Domain::Any},
      {"reciprocal", reciprocal_backward_table, Domain::Positive},
  };
  uint64_t seed = 100;
  for (const G& gk : grads) {
    for (DType dt : kFloat) {
      Tensor g = input({33, 41}, dt, ++seed), s = input({33, 41}, dt, ++seed, 3.0, gk.d);
      // transposed operands, poisoned transposed output
      auto run = [&](const std::vector<Tensor>& in) {
        Tensor out = empty({41, 33}, {dt, in[0].device()});
        if (out.device().is_cuda()) testing::poison(out);
        gk.table()(in[0].device(), dt, out.t(), in[0], in[1]);
        return std::vector<Tensor>{out};
      };
      EXPECT_TRUE(matches_cpu(run, {g, s})) << gk.name << "_backward " << dt;
    }
  }
  for (DType dt : kFloat) {
    Tensor g = input({1001}, dt, ++seed), x = input({1001}, dt, ++seed);
    auto run = [&](const std::vector<Tensor>& in) {
      Tensor out = empty({1001}, {dt, in[0].device()});
      if (out.device().is_cuda()) testing::poison(out);
      clamp_backward_table()(in[0].device(), dt, out, in[0], in[1], Scalar(-0.5), Scalar(1.0), true, true);
      Tensor out2 = empty({1001}, {dt, in[0].device()});
      clamp_backward_table()(in[0].device(), dt, out2, in[0], in[1], Scalar(0), Scalar(0), false, true);
      return std::vector<Tensor>{out, out2};
    };
    EXPECT_TRUE(matches_cpu(run, {g, x})) << "clamp_backward " << dt;
  }
}

TEST(CudaUnary, InPlaceForms) {
  WEFT_REQUIRE_GPU();
  for (DType dt : kFloat) {
    Tensor x = input({19, 23}, dt, 7, 2.0, Domain::Positive);
    auto run = [&](const std::vector<Tensor>& in) {
      std::vector<Tensor> outs;
      for (int k = 0; k < 7; ++k) {
        Tensor c = in[0].clone();
        Tensor v = c.t();  // in place on a non-contiguous view
        switch (k) {
          case 0: neg_(v); break;
          case 1: exp_(v); break;
          case 2: sqrt_(v); break;
          case 3: relu_(v); break;
          case 4: sigmoid_(v); break;
          case 5: tanh_(v); break;
          case 6: clamp_(v, Scalar(0.5), Scalar(1.5)); break;
        }
        outs.push_back(c);
      }
      return outs;
    };
    EXPECT_TRUE(matches_cpu(run, {x})) << dt;
  }
}

// ---- binary ----
using BinaryFn = std::function<Tensor(const Tensor&, const Tensor&)>;

void check_binary(const char* name, const BinaryFn& fn, const std::vector<DType>& dtypes, Domain da = Domain::Any,
                  Domain db = Domain::Any, double sa = 3.0, double sb = 3.0) {
  uint64_t seed = 1000;
  for (DType dt : dtypes) {
    auto run = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{fn(in[0], in[1])}; };
    for (const Shape& s : kShapes) {
      Tensor a = input(s, dt, ++seed, sa, da), b = input(s, dt, ++seed, sb, db);
      EXPECT_TRUE(matches_cpu(run, {a, b})) << name << " " << dt << " " << shape_str(s);
    }
    // broadcasting: {5,1,7} with {6,1}; a scalar-shaped operand; transposed with sliced
    Tensor a = input({5, 1, 7}, dt, ++seed, sa, da), b = input({6, 1}, dt, ++seed, sb, db);
    EXPECT_TRUE(matches_cpu(run, {a, b})) << name << " broadcast " << dt;
    Tensor c = input({}, dt, ++seed, sa, da), d = input({4, 9}, dt, ++seed, sb, db);
    EXPECT_TRUE(matches_cpu(run, {c, d})) << name << " 0-dim " << dt;
    Tensor m = input({40, 30}, dt, ++seed, sa, da), n = input({30, 80}, dt, ++seed, sb, db);
    EXPECT_TRUE(matches_cpu(
        [&](const std::vector<Tensor>& in) {
          return std::vector<Tensor>{fn(in[0].t(), in[1].slice(1, 0, std::nullopt, 2))};
        },
        {m, n}))
        << name << " strided " << dt;
  }
}

TEST(CudaBinary, ArithmeticMatchesCpu) {
  WEFT_REQUIRE_GPU();
  check_binary(
      "add", [](const Tensor& a, const Tensor& b) { return add(a, b); }, kAll);
  check_binary(
      "add(alpha)", [](const Tensor& a, const Tensor& b) { return add(a, b, Scalar(2)); }, kNumeric);
  check_binary(
      "sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); }, kNumeric);
  check_binary(
      "mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); }, kAll);
  check_binary(
      "div", [](const Tensor& a, const Tensor& b) { return div(a, b); }, kFloat, Domain::Any, Domain::Positive);
  check_binary(
      "div(int)", [](const Tensor& a, const Tensor& b) { return div(a, b); }, {DType::Int32}, Domain::Any,
      Domain::Positive);
  check_binary(
      "maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }, kAll);
  check_binary(
      "minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }, kAll);
}

TEST(CudaBinary, PowMatchesCpu) {
  WEFT_REQUIRE_GPU();
  check_binary(
      "pow(float)", [](const Tensor& a, const Tensor& b) { return pow(a, b); }, kFloat, Domain::Positive, Domain::Any,
      3.0, 2.0);
  // integer pow: small bases and exponents 0..4 (exact, wrapping like the CPU)
  check_binary(
      "pow(int)", [](const Tensor& a, const Tensor& b) { return pow(a, abs(b)); },
      {DType::Int64, DType::Int32, DType::UInt8}, Domain::Any, Domain::Any, 5.0, 4.0);
  // negative integer exponents: 1 -> 1, -1 -> +-1, others -> 0
  Tensor base = tensor<int64_t>({1, -1, -1, 2, 0, -3, 7}, {7});
  Tensor e = tensor<int64_t>({-3, -3, -2, -1, 2, 3, 0}, {7});
  EXPECT_TRUE(tensors_near(pow(base.to(kGPU), e.to(kGPU)).cpu(), pow(base, e), 0));
  // scalar exponents, including the special-cased ones
  for (double ex : {2.0, 3.0, 1.0, 0.5, -1.0, 1.7, -2.5})
    check_unary(
        "pow(scalar)", [ex](const Tensor& x) { return pow(x, Scalar(ex)); }, kFloat, Domain::Positive);
  for (int64_t ex : {0, 1, 2, 3, 5})
    check_unary("pow(int scalar)", [ex](const Tensor& x) { return pow(x, Scalar(ex)); },
                {DType::Int64, DType::Int32, DType::UInt8});
}

TEST(CudaBinary, MaximumMinimumPropagateNaN) {
  WEFT_REQUIRE_GPU();
  for (DType dt : kFloat) {
    Tensor a = tensor<double>({NAN, 1, NAN, -2, 3, 0}, {6}).to(dt);
    Tensor b = tensor<double>({1, NAN, NAN, -2, -4, 0}, {6}).to(dt);
    for (bool mx : {true, false}) {
      Tensor got = (mx ? maximum(a.to(kGPU), b.to(kGPU)) : minimum(a.to(kGPU), b.to(kGPU))).cpu();
      auto v = testing::values(got);
      EXPECT_TRUE(std::isnan(v[0]) && std::isnan(v[1]) && std::isnan(v[2])) << dt;
      EXPECT_EQ(v[3], -2);
      EXPECT_EQ(v[4], mx ? 3 : -4);
      EXPECT_TRUE(tensors_near(got, mx ? maximum(a, b) : minimum(a, b), 0));
    }
  }
}

TEST(CudaBinary, MinMaxGradientSplitsTies) {
  WEFT_REQUIRE_GPU();
  for (DType dt : kFloat) {
    // values in {-1, 0, 1} so ties are frequent
    Tensor g = input({17, 31}, dt, 3), a = input({17, 31}, dt, 4, 1.5).to(DType::Int64).to(dt),
           b = input({17, 31}, dt, 5, 1.5).to(DType::Int64).to(dt);
    for (auto* table : {&maximum_backward_table, &minimum_backward_table}) {
      auto run = [&](const std::vector<Tensor>& in) {
        Tensor out = empty({31, 17}, {dt, in[0].device()});
        if (out.device().is_cuda()) testing::poison(out);
        (*table)()(in[0].device(), dt, out.t(), in[0], in[1], in[2].t().t());
        return std::vector<Tensor>{out};
      };
      EXPECT_TRUE(matches_cpu(run, {g, a, b})) << dt;
    }
  }
}

TEST(CudaBinary, InPlaceForms) {
  WEFT_REQUIRE_GPU();
  for (DType dt : kFloat) {
    Tensor a = input({12, 20}, dt, 21), b = input({20}, dt, 22, 2.0, Domain::Positive);
    auto run = [&](const std::vector<Tensor>& in) {
      std::vector<Tensor> outs;
      for (int k = 0; k < 4; ++k) {
        Tensor c = in[0].clone();
        Tensor v = c.slice(0, 0, std::nullopt, 2);  // non-contiguous destination
        switch (k) {
          case 0: add_(v, in[1], Scalar(0.5)); break;
          case 1: sub_(v, in[1]); break;
          case 2: mul_(v, in[1]); break;
          case 3: div_(v, in[1]); break;
        }
        outs.push_back(c);
      }
      return outs;
    };
    EXPECT_TRUE(matches_cpu(run, {a, b})) << dt;
  }
}

// Kernel tables called directly with poisoned non-contiguous outputs: every
// element must be written.
TEST(CudaBinary, PoisonedStridedOutputsAreFullyWritten) {
  WEFT_REQUIRE_GPU();
  for (DType dt : kAll) {
    Tensor a = input({70001, 2}, dt, 31), b = input({70001, 2}, dt, 32);
    for (BinaryKernel* table : {&add_table(), &mul_table(), &maximum_table(), &minimum_table()}) {
      auto run = [&](const std::vector<Tensor>& in) {
        Tensor out = empty({2, 70001}, {dt, in[0].device()});
        if (out.device().is_cuda()) testing::poison(out);
        (*table)(in[0].device(), dt, out.t(), in[0], in[1], Scalar(1));
        return std::vector<Tensor>{out};
      };
      EXPECT_TRUE(matches_cpu(run, {a, b})) << table->name() << " " << dt;
    }
  }
}

// ---- compare / logical / where ----
TEST(CudaCompare, PredicatesMatchCpu) {
  WEFT_REQUIRE_GPU();
  using P = Tensor (*)(const Tensor&, const Tensor&);
  const std::vector<std::pair<const char*, P>> preds = {{"eq", eq},
                                                        {"ne", ne},
                                                        {"lt", lt},
                                                        {"le", le},
                                                        {"gt", gt},
                                                        {"ge", ge},
                                                        {"logical_and", logical_and},
                                                        {"logical_or", logical_or},
                                                        {"logical_xor", logical_xor}};
  for (auto& [name, p] : preds) {
    // small integer-valued inputs so equalities happen
    check_binary(name, p, kAll, Domain::Any, Domain::Any, 1.5, 1.5);
  }
  check_unary(
      "logical_not", [](const Tensor& x) { return logical_not(x); }, kAll, Domain::Any, 1.5);
  // NaN compares unequal and is truthy
  Tensor n = tensor<double>({NAN, 0, 1}, {3}), z = tensor<double>({NAN, 0, 2}, {3});
  EXPECT_TRUE(tensors_near(eq(n.to(kGPU), z.to(kGPU)).cpu(), tensor<double>({0, 1, 0}, {3}), 0));
  EXPECT_TRUE(tensors_near(ne(n.to(kGPU), z.to(kGPU)).cpu(), tensor<double>({1, 0, 1}, {3}), 0));
  EXPECT_TRUE(tensors_near(logical_and(n.to(kGPU), z.to(kGPU)).cpu(), tensor<double>({1, 0, 1}, {3}), 0));
}

TEST(CudaCompare, WhereBroadcastsAllOperands) {
  WEFT_REQUIRE_GPU();
  for (DType dt : kAll) {
    Tensor c = input({4, 1, 9}, DType::Bool, 41), a = input({5, 1}, dt, 42), b = input({9}, dt, 43);
    EXPECT_TRUE(matches_cpu(
        [](const std::vector<Tensor>& in) { return std::vector<Tensor>{where(in[0], in[1], in[2])}; }, {c, a, b}))
        << dt;
    Tensor cc = input({30, 20}, DType::Bool, 44), aa = input({20, 30}, dt, 45), bb = input({30, 40}, dt, 46);
    EXPECT_TRUE(matches_cpu(
        [](const std::vector<Tensor>& in) {
          return std::vector<Tensor>{where(in[0], in[1].t(), in[2].slice(1, 0, std::nullopt, 2))};
        },
        {cc, aa, bb}))
        << dt;
  }
}

// ---- ternary ----
TEST(CudaTernary, AddcmulAddcdivLerpMatchCpu) {
  WEFT_REQUIRE_GPU();
  for (DType dt : kNumeric) {
    Tensor a = input({21, 13}, dt, 51), t1 = input({13}, dt, 52), t2 = input({21, 1}, dt, 53, 2.0, Domain::Positive);
    EXPECT_TRUE(matches_cpu(
        [](const std::vector<Tensor>& in) {
          Tensor c = in[0].clone();
          Tensor v = c.t();
          addcmul_(v, in[1].reshape({13, 1}), in[2].reshape({1, 21}), Scalar(2));
          return std::vector<Tensor>{c};
        },
        {a, t1, t2}))
        << "addcmul_ " << dt;
    if (!is_floating(dt)) continue;
    EXPECT_TRUE(matches_cpu(
        [](const std::vector<Tensor>& in) {
          Tensor c = in[0].clone();
          addcdiv_(c, in[1], in[2], Scalar(-0.5));
          Tensor d = in[0].clone();
          Tensor v = d.slice(0, 0, std::nullopt, 3);
          lerp_(v, in[1], Scalar(0.25));
          return std::vector<Tensor>{c, d};
        },
        {a, t1, t2}))
        << "addcdiv_/lerp_ " << dt;
  }
}

// ---- gradcheck through GPU ops (float64 CPU leaves moved to the GPU inside fn) ----
TEST(CudaElementwise, GradcheckFloat64) {
  WEFT_REQUIRE_GPU();
  using autograd::gradcheck;
  auto leaf = [](const Shape& s, uint64_t seed, bool positive = false) {
    Tensor x = rnd(s, DType::Float64, seed);
    if (positive) x = abs(x) + 0.5;
    return x.detach().requires_grad_(true);
  };
  auto g1 = [](Tensor (*f)(const Tensor&)) {
    return [f](const std::vector<Tensor>& in) { return f(in[0].to(kGPU)).cpu(); };
  };
  for (auto f :
       {+[](const Tensor& x) { return exp(x); }, +[](const Tensor& x) { return tanh(x); },
        +[](const Tensor& x) { return sigmoid(x); }, +[](const Tensor& x) { return silu(x); },
        +[](const Tensor& x) { return gelu(x); }, +[](const Tensor& x) { return gelu(x, GeluApproximation::Tanh); },
        +[](const Tensor& x) { return clamp(x, Scalar(-0.5005), Scalar(0.5005)); },
        +[](const Tensor& x) { return sin(x); }, +[](const Tensor& x) { return cos(x); },
        +[](const Tensor& x) { return erf(x); }, +[](const Tensor& x) { return expm1(x); }}) {
    auto r = gradcheck(g1(f), {leaf({3, 4}, 1)});
    EXPECT_TRUE(r) << r.message;
  }
  for (auto f : {+[](const Tensor& x) { return log(x); }, +[](const Tensor& x) { return sqrt(x); },
                 +[](const Tensor& x) { return rsqrt(x); }, +[](const Tensor& x) { return log1p(x); },
                 +[](const Tensor& x) { return reciprocal(x); }}) {
    auto r = gradcheck(g1(f), {leaf({5}, 2, true)});
    EXPECT_TRUE(r) << r.message;
  }
  auto bin = [](const std::vector<Tensor>& in) {
    Tensor a = in[0].to(kGPU), b = in[1].to(kGPU);
    return add(mul(maximum(a, b), div(a, b)), pow(a, b)).cpu();
  };
  auto r = gradcheck(bin, {leaf({2, 3}, 3, true), leaf({3}, 4, true)});
  EXPECT_TRUE(r) << r.message;
  auto wh = [](const std::vector<Tensor>& in) {
    Tensor a = in[0].to(kGPU), b = in[1].to(kGPU);
    return where(gt(a, b), minimum(a, b), mul(a, b)).cpu();
  };
  r = gradcheck(wh, {leaf({4, 3}, 5), leaf({4, 3}, 6)});
  EXPECT_TRUE(r) << r.message;
}

// The inner-contiguous vector path (core/cuda/loops.cuh inner_vec_kernel) and
// its fallbacks, for each element size it serves: a bias broadcast over rows,
// casts both ways, a permuted copy whose last dim stays innermost, in-place
// adds; then sizes and addresses it must refuse (odd inner size, an offset view).
TEST(CudaElementwise, InnerContiguousVectorPathMatchesCpu) {
  WEFT_REQUIRE_GPU();
  for (DType dt : {DType::BFloat16, DType::Float16, DType::Float32, DType::Float64, DType::Int64, DType::Int32,
                   DType::UInt8, DType::Bool}) {
    SCOPED_TRACE(dtype_name(dt));
    for (int64_t inner : {64, 72, 63}) {  // multiples of 8 and 4, then a size no vector width divides
      Tensor x = input({6, 5, inner}, dt, 1), bias = input({inner}, dt, 2);
      Tensor xf = input({6, 5, inner}, DType::Float32, 3);
      EXPECT_TRUE(
          matches_cpu([](const std::vector<Tensor>& in) { return std::vector<Tensor>{add(in[0], in[1])}; }, {x, bias}))
          << "bias add, inner " << inner;
      EXPECT_TRUE(matches_cpu([dt](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0].to(dt)}; }, {xf}))
          << "cast from float32, inner " << inner;
      EXPECT_TRUE(
          matches_cpu([](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0].to(DType::Float32)}; }, {x}))
          << "cast to float32, inner " << inner;
      EXPECT_TRUE(matches_cpu(
          [](const std::vector<Tensor>& in) {
            return std::vector<Tensor>{in[0].permute({1, 0, 2}).contiguous()};
          },
          {x}))
          << "permuted copy, inner " << inner;
      // An offset view: its rows start one element in, so no aligned vector fits.
      EXPECT_TRUE(matches_cpu(
          [](const std::vector<Tensor>& in) {
            return std::vector<Tensor>{
                add(in[0].narrow(2, 1, in[0].size(2) - 1), in[1].narrow(0, 1, in[1].size(0) - 1))};
          },
          {x, bias}))
          << "offset views, inner " << inner;
      if (dt != DType::Bool) {
        EXPECT_TRUE(matches_cpu(
            [](const std::vector<Tensor>& in) {
              Tensor y = in[0].clone();
              y.add_(in[1]);
              return std::vector<Tensor>{y};
            },
            {x, bias}))
            << "in-place add, inner " << inner;
      }
    }
  }
}

}  // namespace
}  // namespace weft
