// Reductions (core/ops/reduce.cc, reduce_stats.cc) against hand-computed values
// and naive reference loops written here; gradchecks for the differentiable ones.
#include <cmath>
#include <functional>
#include <limits>

#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "autograd/gradcheck.h"
#include "core/ops.h"
#include "core/parallel.h"
#include "tests/testing.h"

namespace weft {
namespace {
using testing::tensor_near;
using testing::tensors_near;
using testing::values;

// Deterministic values k * scale with k in [lo, hi].
std::vector<double> lcg(int64_t n, uint64_t seed, int lo = -16, int hi = 16, double scale = 0.25) {
  std::vector<double> v(n);
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (auto& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = (lo + static_cast<int>((s >> 33) % static_cast<uint64_t>(hi - lo + 1))) * scale;
  }
  return v;
}

// Naive reduction of row-major `v` (shape s) over `dims` (empty = all).
std::vector<double> naive(const std::vector<double>& v, const Shape& s, std::vector<int64_t> dims,
                          const std::function<double(double, double)>& f, double init) {
  const int64_t nd = s.size();
  if (dims.empty())
    for (int64_t d = 0; d < nd; ++d) dims.push_back(d);
  for (auto& d : dims)
    if (d < 0) d += nd;
  std::vector<bool> red(nd, false);
  for (auto d : dims) red[d] = true;
  int64_t nout = 1;
  for (int64_t d = 0; d < nd; ++d)
    if (!red[d]) nout *= s[d];
  std::vector<double> out(nout, init);
  for (int64_t flat = 0; flat < static_cast<int64_t>(v.size()); ++flat) {
    int64_t rem = flat, o = 0, mul = 1;
    for (int64_t d = nd - 1; d >= 0; --d) {
      int64_t i = rem % s[d];
      rem /= s[d];
      if (!red[d]) {
        o += i * mul;
        mul *= s[d];
      }
    }
    out[o] = f(out[o], v[flat]);
  }
  return out;
}
const auto kAdd = [](double a, double b) { return a + b; };
const auto kMax = [](double a, double b) { return std::max(a, b); };
const auto kMin = [](double a, double b) { return std::min(a, b); };

Tensor f64(const std::vector<double>& v, const Shape& s) { return tensor(v, s).requires_grad_(); }

void expect_gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn, const std::vector<Tensor>& in) {
  auto r = autograd::gradcheck(fn, in);
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(Reduce, SumHandValues) {
  Tensor a = tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_TRUE(tensor_near(sum(a), {21}));
  EXPECT_EQ(sum(a).dim(), 0);
  EXPECT_TRUE(tensor_near(sum(a, {0}), {5, 7, 9}));
  EXPECT_TRUE(tensor_near(sum(a, {1}), {6, 15}));
  Tensor k = sum(a, {-1}, true);
  EXPECT_EQ(k.sizes(), (Shape{2, 1}));
  EXPECT_TRUE(tensor_near(k, {6, 15}));
  EXPECT_TRUE(tensor_near(sum(a, {0, 1}, true), {21}));
  EXPECT_EQ(sum(a, {0, 1}, true).sizes(), (Shape{1, 1}));
}

TEST(Reduce, SumEveryDimComboAndDtypeMatchesNaive) {
  Shape s{3, 4, 5};
  std::vector<std::vector<int64_t>> combos{{}, {0}, {1}, {2}, {-1}, {0, 1}, {0, 2}, {1, 2}, {2, 0}, {0, 1, 2}};
  for (DType dt : {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16, DType::Int64, DType::Int32,
                   DType::UInt8, DType::Bool}) {
    auto v = dt == DType::UInt8  ? lcg(60, 3, 0, 40, 1.0)
             : dt == DType::Bool ? lcg(60, 3, 0, 1, 1.0)
             : is_integral(dt)   ? lcg(60, 3, -40, 40, 1.0)
                                 : lcg(60, 3);
    Tensor a = tensor(v, s, {dt});
    for (auto& dims : combos) {
      for (bool keep : {false, true}) {
        Tensor r = sum(a, dims, keep);
        EXPECT_EQ(r.dtype(), is_integral(dt, true) ? DType::Int64 : dt);
        auto ref = naive(v, s, dims, kAdd, 0.0);
        EXPECT_TRUE(tensor_near(r, ref,
                                dt == DType::BFloat16  ? 1e-2
                                : dt == DType::Float16 ? 1e-3
                                                       : 1e-6))
            << dt << " dims " << shape_str(dims);
        if (keep) {
          EXPECT_EQ(r.dim(), 3);
        }
      }
    }
  }
}

TEST(Reduce, SumNonContiguousInputs) {
  auto v = lcg(120, 5);
  Tensor base = tensor(v, {4, 5, 6});
  Tensor t = base.permute({2, 0, 1});  // (6, 4, 5), transposed strides
  Tensor tc = t.contiguous();
  auto tv = values(tc);
  for (std::vector<int64_t> dims : std::vector<std::vector<int64_t>>{{0}, {1}, {2}, {0, 2}, {1, 2}, {}}) {
    EXPECT_TRUE(tensor_near(sum(t, dims), naive(tv, {6, 4, 5}, dims, kAdd, 0.0))) << shape_str(dims);
    EXPECT_TRUE(tensor_near(amax(t, dims), naive(tv, {6, 4, 5}, dims, kMax, -1e300))) << shape_str(dims);
  }
  Tensor sl = base.slice(2, 1, 6, 2);  // (4, 5, 3) step 2
  auto sv = values(sl);
  EXPECT_TRUE(tensor_near(sum(sl, {2}), naive(sv, {4, 5, 3}, {2}, kAdd, 0.0)));
  EXPECT_TRUE(tensor_near(sum(sl, {0}), naive(sv, {4, 5, 3}, {0}, kAdd, 0.0)));
  Tensor ex = tensor({1, 2, 3}, {3, 1}).expand({3, 4});  // stride-0 dim
  EXPECT_TRUE(tensor_near(sum(ex, {1}), {4, 8, 12}));
  EXPECT_TRUE(tensor_near(sum(ex, {0}), {6, 6, 6, 6}));
}

TEST(Reduce, LargeSumsAreAccurateAndThreadCountIndependent) {
  // Rows longer than one chunk, a long column reduction, and a full sum.
  const int64_t n = 100003;
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = 0.1 + (i % 7) * 0.01;
  double exact = 0;
  for (double x : v) exact += static_cast<float>(x);
  Tensor a = tensor(v, {n}, {DType::Float32});
  EXPECT_NEAR(sum(a).item<double>(), exact, exact * 1e-7);
  Tensor rows = tensor(v, {1, n}, {DType::Float32}).expand({3, n}).contiguous();
  EXPECT_TRUE(tensor_near(sum(rows, {1}), {exact, exact, exact}, 1e-7));
  Tensor cols = tensor(v, {n, 1}, {DType::Float32}).expand({n, 3}).contiguous();
  EXPECT_TRUE(tensor_near(sum(cols, {0}), {exact, exact, exact}, 1e-7));
  Tensor big = tensor(lcg(300 * 2000, 9), {300, 2000});
  int prev = get_num_threads();
  std::vector<Tensor> r1, r2;
  set_num_threads(1);
  for (auto d : {0, 1}) r1.push_back(sum(big, {d}));
  r1.push_back(sum(cols, {0}));
  r1.push_back(sum(a));
  set_num_threads(2);
  for (auto d : {0, 1}) r2.push_back(sum(big, {d}));
  r2.push_back(sum(cols, {0}));
  r2.push_back(sum(a));
  set_num_threads(prev);
  for (size_t i = 0; i < r1.size(); ++i) EXPECT_TRUE(equal(r1[i], r2[i])) << i;
}

TEST(Reduce, SumDtypeArgEmptyAndBackward) {
  Tensor b = tensor(std::vector<bool>{true, false, true, true});
  EXPECT_EQ(sum(b).dtype(), DType::Int64);
  EXPECT_EQ(sum(b).item<int64_t>(), 3);
  Tensor i = tensor(std::vector<int64_t>{1, 2, 3});
  Tensor f = sum(i, {}, false, DType::Float64);
  EXPECT_EQ(f.dtype(), DType::Float64);
  EXPECT_DOUBLE_EQ(f.item<double>(), 6.0);
  Tensor s32 = sum(tensor({1.5f, 2.5f, 7.0f}, {3, 1}), {0}, false, DType::Int32);  // converts first
  EXPECT_EQ(s32.dtype(), DType::Int32);
  EXPECT_EQ(s32.item<int64_t>(), 10);
  Tensor e = zeros({0, 3});
  EXPECT_TRUE(tensor_near(sum(e, {0}), {0, 0, 0}));
  EXPECT_EQ(sum(e, {1}).sizes(), (Shape{0}));
  EXPECT_TRUE(tensor_near(sum(e), {0}));
  Tensor s = scalar_tensor(4.0);
  EXPECT_TRUE(tensor_near(sum(s), {4}));
  expect_gradcheck([](auto& x) { return sum(x[0], {1}); }, {f64(lcg(24, 1), {2, 3, 4})});
  expect_gradcheck([](auto& x) { return sum(x[0], {0, 2}, true); }, {f64(lcg(24, 1), {2, 3, 4})});
  expect_gradcheck([](auto& x) { return sum(x[0]); }, {f64(lcg(24, 1), {2, 3, 4})});
}

TEST(Reduce, Mean) {
  Tensor a = tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_TRUE(tensor_near(mean(a), {3.5}));
  EXPECT_TRUE(tensor_near(mean(a, {0}), {2.5, 3.5, 4.5}));
  EXPECT_TRUE(tensor_near(mean(a, {-1}, true), {2, 5}));
  EXPECT_TRUE(tensor_near(mean(a.t(), {0}), {2, 5}));
  EXPECT_TRUE(tensor_near(mean(a.to(DType::BFloat16), {1}), {2, 5}, 1e-2));
  EXPECT_TRUE(tensor_near(mean(a.to(DType::Float16), {1}), {2, 5}, 1e-3));
  EXPECT_WEFT_ERROR(mean(tensor(std::vector<int64_t>{1, 2})), "mean");
  EXPECT_WEFT_ERROR(mean(tensor(std::vector<int64_t>{1, 2})), "floating");
  expect_gradcheck([](auto& x) { return mean(x[0], {0, 2}); }, {f64(lcg(24, 2), {2, 3, 4})});
  expect_gradcheck([](auto& x) { return mean(x[0]); }, {f64(lcg(6, 2), {2, 3})});
}

TEST(Reduce, Prod) {
  Tensor a = tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_TRUE(tensor_near(prod(a, 1), {6, 120}));
  EXPECT_TRUE(tensor_near(prod(a, 0, true), {4, 10, 18}));
  EXPECT_EQ(prod(a, 0, true).sizes(), (Shape{1, 3}));
  EXPECT_TRUE(tensor_near(prod(a.t(), -1), {4, 10, 18}));
  Tensor ai = tensor(std::vector<int32_t>{2, 3, 4}, {3});
  EXPECT_EQ(prod(ai, 0).dtype(), DType::Int64);
  EXPECT_EQ(prod(ai, 0).item<int64_t>(), 24);
  auto v = lcg(24, 4);
  v[3] = 0;           // one zero in a slice
  v[13] = v[17] = 0;  // two zeros in another
  for (int64_t d : {0, 1, 2}) expect_gradcheck([d](auto& x) { return prod(x[0], d); }, {f64(v, {2, 3, 4})});
  Tensor z = f64({2, 0, 3}, {3});
  prod(z, 0).backward();
  EXPECT_TRUE(tensor_near(z.grad(), {0, 6, 0}));
}

TEST(Reduce, AmaxAminMultiDimAndTieGradient) {
  Shape s{3, 4, 5};
  for (DType dt :
       {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16, DType::Int64, DType::Int32, DType::UInt8}) {
    auto v0 = dt == DType::UInt8 ? lcg(60, 7, 0, 60, 1.0) : is_integral(dt) ? lcg(60, 7, -30, 30, 1.0) : lcg(60, 7);
    Tensor a = tensor(v0, s, {dt});
    auto v = values(a);
    for (std::vector<int64_t> dims : std::vector<std::vector<int64_t>>{{}, {0}, {2}, {0, 2}, {-2, -1}}) {
      EXPECT_TRUE(tensor_near(amax(a, dims), naive(v, s, dims, kMax, -1e300))) << dt;
      EXPECT_TRUE(tensor_near(amin(a, dims, true), naive(v, s, dims, kMin, 1e300))) << dt;
      EXPECT_EQ(amax(a, dims).dtype(), dt);
    }
  }
  Tensor x = f64({1, 3, 3, 2}, {4});
  amax(x).backward();
  EXPECT_TRUE(tensor_near(x.grad(), {0, 0.5, 0.5, 0}));
  Tensor y = f64({1, 1, 5, 0}, {2, 2});
  amin(y, {1}).sum().backward();
  EXPECT_TRUE(tensor_near(y.grad(), {0.5, 0.5, 0, 1}));
  expect_gradcheck([](auto& x) { return amax(x[0], {0, 2}); }, {f64(lcg(24, 11, -1000, 1000, 0.001), {2, 3, 4})});
  expect_gradcheck([](auto& x) { return amin(x[0], {1}, true); }, {f64(lcg(24, 12, -1000, 1000, 0.001), {2, 3, 4})});
  Tensor n = tensor({1, NAN, 3});
  EXPECT_TRUE(std::isnan(amax(n).item<double>()));
}

TEST(Reduce, MaxMinDimValuesIndicesTies) {
  Tensor a = tensor({3, 1, 3, 0, 2, 2, 5, 5}, {2, 4});
  auto [v, i] = max(a, 1);
  EXPECT_TRUE(tensor_near(v, {3, 5}));
  EXPECT_EQ(i.dtype(), DType::Int64);
  EXPECT_TRUE(tensor_near(i, {0, 2}));  // first index wins ties
  auto [v0, i0] = max(a, 0, true);
  EXPECT_EQ(v0.sizes(), (Shape{1, 4}));
  EXPECT_TRUE(tensor_near(v0, {3, 2, 5, 5}));
  EXPECT_TRUE(tensor_near(i0, {0, 1, 1, 1}));
  auto [mv, mi] = min(a, -1);
  EXPECT_TRUE(tensor_near(mv, {0, 2}));
  EXPECT_TRUE(tensor_near(mi, {3, 0}));
  // non-contiguous, every dtype, against a naive loop along dim 0 of a transposed view
  for (DType dt :
       {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16, DType::Int64, DType::Int32, DType::UInt8}) {
    auto vals = lcg(35, 13, 0, 6, 1.0);         // many ties
    Tensor t = tensor(vals, {5, 7}, {dt}).t();  // (7, 5)
    auto [tv, ti] = max(t, 1);
    auto [nv, ni] = min(t, 1);
    for (int64_t r = 0; r < 7; ++r) {
      double best = -1, worst = 1e9;
      int64_t bi = -1, wi = -1;
      for (int64_t c = 0; c < 5; ++c) {
        double x = vals[c * 7 + r];
        if (x > best) {
          best = x;
          bi = c;
        }
        if (x < worst) {
          worst = x;
          wi = c;
        }
      }
      EXPECT_EQ(values(tv)[r], best) << dt;
      EXPECT_EQ(values(ti)[r], bi) << dt;
      EXPECT_EQ(values(nv)[r], worst) << dt;
      EXPECT_EQ(values(ni)[r], wi) << dt;
    }
  }
  // long rows (chunked path) with the max in the last chunk, tied
  std::vector<double> lv(50000, 1.0);
  lv[40000] = 7;
  lv[45000] = 7;
  EXPECT_EQ(std::get<1>(max(tensor(lv), 0)).item<int64_t>(), 40000);
  EXPECT_EQ(argmax(tensor(lv)).item<int64_t>(), 40000);
  // gradient goes to the index
  Tensor g = f64({1, 4, 4, 2, 9, 3}, {2, 3});
  std::get<0>(max(g, 1)).sum().backward();
  EXPECT_TRUE(tensor_near(g.grad(), {0, 1, 0, 0, 1, 0}));
  expect_gradcheck([](auto& x) { return std::get<0>(max(x[0], 1)); },
                   {f64(lcg(24, 21, -1000, 1000, 0.001), {2, 3, 4})});
  expect_gradcheck([](auto& x) { return std::get<0>(min(x[0], 0, true)); },
                   {f64(lcg(24, 22, -1000, 1000, 0.001), {2, 3, 4})});
}

TEST(Reduce, MaxMinAllAndArgmax) {
  Tensor a = tensor({3, 9, 1, 9, 0, 2}, {2, 3});
  EXPECT_EQ(max(a).item<double>(), 9);
  EXPECT_EQ(min(a).item<double>(), 0);
  EXPECT_EQ(max(a).dim(), 0);
  EXPECT_EQ(argmax(a).item<int64_t>(), 1);  // flat index, first of the tie
  EXPECT_EQ(argmin(a).item<int64_t>(), 4);
  EXPECT_EQ(argmax(a, std::nullopt, true).sizes(), (Shape{1, 1}));
  EXPECT_TRUE(tensor_near(argmax(a, 0), {1, 0, 1}));
  EXPECT_TRUE(tensor_near(argmin(a, 1, true), {2, 1}));
  EXPECT_EQ(argmin(a, 1, true).sizes(), (Shape{2, 1}));
  EXPECT_TRUE(tensor_near(argmax(a.t(), 1), {1, 0, 1}));
  EXPECT_EQ(argmin(a.t()).item<int64_t>(), 3);  // flat index into the transposed (3, 2) view: 3 9 9 0 1 2
  EXPECT_EQ(argmax(a.t()).item<int64_t>(), 1);
  Tensor x = f64({1, 5, 5, 2}, {2, 2});
  max(x).backward();
  EXPECT_TRUE(tensor_near(x.grad(), {0, 0.5, 0.5, 0}));
  expect_gradcheck([](auto& x) { return min(x[0]); }, {f64(lcg(12, 31, -1000, 1000, 0.001), {3, 4})});
  Tensor s = scalar_tensor(2.0);
  EXPECT_EQ(argmax(s).item<int64_t>(), 0);
  EXPECT_EQ(std::get<1>(max(s, 0)).item<int64_t>(), 0);
}

TEST(Reduce, VarStd) {
  Tensor a = tensor({1, 2, 3, 4});
  EXPECT_TRUE(tensor_near(var(a), {5.0 / 3.0}));
  EXPECT_TRUE(tensor_near(var(a, {}, 0), {1.25}));
  EXPECT_TRUE(tensor_near(std(a), {std::sqrt(5.0 / 3.0)}));
  Tensor m = tensor({1, 2, 3, 4, 6, 8}, {2, 3});
  EXPECT_TRUE(tensor_near(var(m, {1}), {1, 4}));
  EXPECT_TRUE(tensor_near(std(m, {0}, 1, true), {std::sqrt(4.5), std::sqrt(8.0), std::sqrt(12.5)}));
  EXPECT_EQ(std(m, {0}, 1, true).sizes(), (Shape{1, 3}));
  EXPECT_TRUE(tensor_near(var(m.t(), {0}), {1, 4}));
  EXPECT_TRUE(tensor_near(var(m.to(DType::Float64), {0, 1}, 0), {values(var(m, {}, 0))[0]}));
  EXPECT_TRUE(std::isinf(var(tensor({1.0f}), {}, 1).item<double>()) || std::isnan(var(tensor({1.0f})).item<double>()));
  EXPECT_WEFT_ERROR(var(tensor(std::vector<int64_t>{1, 2})), "floating");
  expect_gradcheck([](auto& x) { return var(x[0], {1}); }, {f64(lcg(24, 41), {2, 3, 4})});
  expect_gradcheck([](auto& x) { return std(x[0], {0, 2}, 0); }, {f64(lcg(24, 42), {2, 3, 4})});
  expect_gradcheck([](auto& x) { return std(x[0]); }, {f64(lcg(24, 43), {2, 3, 4})});
}

// Note [var's corrected two-pass]: float32 data of mean 1e4 and spread 0.01
// keeps its variance to float32's precision (the float32 mean's rounding alone
// would add about 2e-3 of it), along every dim and in the gradient.
TEST(Reduce, VarOfALargeMeanKeepsItsPrecision) {
  std::vector<float> v(64 * 64);
  uint64_t s = 7;
  for (auto& e : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    e = 10000.0f + 0.01f * (static_cast<float>((s >> 40) % 2001) / 1000.0f - 1.0f);
  }
  // float64 references over the same float32 values: all of them, and each row of 64
  auto ref_var = [&](size_t b, size_t n) {
    double m = 0, ss = 0;
    for (size_t i = b; i < b + n; ++i) m += v[i];
    m /= static_cast<double>(n);
    for (size_t i = b; i < b + n; ++i) ss += (v[i] - m) * (v[i] - m);
    return ss / static_cast<double>(n - 1);
  };
  Tensor t = tensor(v).requires_grad_();
  const double all = ref_var(0, v.size());
  EXPECT_NEAR(var(t).item<double>(), all, 1e-6 * all);
  std::vector<double> rows;
  for (size_t r = 0; r < 64; ++r) rows.push_back(ref_var(64 * r, 64));
  EXPECT_TRUE(tensor_near(var(t.reshape({64, 64}), {1}), rows, 1e-5));
  EXPECT_NEAR(std(t).item<double>(), std::sqrt(all), 1e-6 * std::sqrt(all));
  // d var / d x_i = 2 (x_i - mean) / (n - 1)
  var(t).backward();
  double m = 0;
  for (float e : v) m += e;
  m /= static_cast<double>(v.size());
  std::vector<double> g;
  for (float e : v) g.push_back(2.0 * (e - m) / static_cast<double>(v.size() - 1));
  const double gmax = *std::max_element(g.begin(), g.end());
  EXPECT_TRUE(tensor_near(t.grad(), g, 1e-4 * gmax));
}

TEST(Reduce, Logsumexp) {
  Shape s{3, 4, 5};
  auto v = lcg(60, 51);
  Tensor a = tensor(v, s);
  for (std::vector<int64_t> dims : std::vector<std::vector<int64_t>>{{0}, {2}, {1, 2}, {}}) {
    auto mx = naive(v, s, dims, kMax, -1e300);
    auto se = naive(v, s, dims, kAdd, 0.0);  // placeholder shape
    // reference: log(sum(exp(x)))
    std::vector<double> ev(v.size());
    for (size_t i = 0; i < v.size(); ++i) ev[i] = std::exp(v[i]);
    se = naive(ev, s, dims, kAdd, 0.0);
    for (auto& x : se) x = std::log(x);
    EXPECT_TRUE(tensor_near(logsumexp(a, dims), se, 1e-5));
    EXPECT_TRUE(tensor_near(logsumexp(a.to(DType::Float64), dims, true), se, 1e-12));
    (void)mx;
  }
  Tensor big = tensor({1000, 1000, -INFINITY});
  EXPECT_TRUE(tensor_near(logsumexp(big, {0}), {1000 + std::log(2.0)}));
  Tensor ninf = tensor({-INFINITY, -INFINITY});
  EXPECT_TRUE(std::isinf(logsumexp(ninf, {0}).item<double>()));
  EXPECT_TRUE(tensor_near(logsumexp(tensor(std::vector<int64_t>{0, 0}), {0}), {std::log(2.0)}));
  EXPECT_TRUE(tensor_near(logsumexp(a.to(DType::BFloat16), {1}), values(logsumexp(a, {1})), 2e-2));
  expect_gradcheck([](auto& x) { return logsumexp(x[0], {1}); }, {f64(lcg(24, 52), {2, 3, 4})});
  expect_gradcheck([](auto& x) { return logsumexp(x[0], {0, 2}, true); }, {f64(lcg(24, 53), {2, 3, 4})});
}

TEST(Reduce, Norm) {
  Tensor a = tensor({3, -4, 0, 1, 2, -2}, {2, 3});
  EXPECT_TRUE(tensor_near(norm(a), {std::sqrt(34.0)}));
  EXPECT_TRUE(tensor_near(norm(a, 2, {1}), {5, 3}));
  EXPECT_TRUE(tensor_near(norm(a, 1, {1}), {7, 5}));
  EXPECT_TRUE(tensor_near(norm(a, INFINITY, {1}), {4, 2}));
  EXPECT_TRUE(tensor_near(norm(a, -INFINITY, {1}), {0, 1}));
  EXPECT_TRUE(tensor_near(norm(a, 0, {1}), {2, 3}));
  EXPECT_TRUE(tensor_near(norm(a, 3, {0}, true), {std::cbrt(28.0), std::cbrt(72.0), std::cbrt(8.0)}));
  EXPECT_TRUE(tensor_near(norm(a.t(), 2, {0}), {5, 3}));
  EXPECT_TRUE(tensor_near(norm(a.to(DType::Float16), 2, {1}), {5, 3}, 1e-3));
  EXPECT_WEFT_ERROR(norm(tensor(std::vector<int64_t>{1, 2})), "norm");
  auto v = lcg(24, 61, -1000, 1000, 0.001);
  for (double p : {2.0, 1.0, 3.0, 1.5, static_cast<double>(INFINITY)})
    expect_gradcheck([p](auto& x) { return norm(x[0], p, {1}); }, {f64(v, {2, 3, 4})});
  expect_gradcheck([](auto& x) { return norm(x[0]); }, {f64(v, {2, 3, 4})});
  Tensor t = f64({3, -3, 1}, {3});
  norm(t, INFINITY).backward();
  EXPECT_TRUE(tensor_near(t.grad(), {0.5, -0.5, 0}));
}

TEST(Reduce, AllcloseEqual) {
  Tensor a = tensor({1, 2, 3});
  EXPECT_TRUE(allclose(a, tensor({1, 2, 3.00001f})));
  EXPECT_FALSE(allclose(a, tensor({1, 2, 3.1f})));
  EXPECT_TRUE(allclose(a, tensor({1, 2, 3.1f}), 0.1));
  EXPECT_TRUE(allclose(tensor({INFINITY}), tensor({INFINITY})));
  EXPECT_FALSE(allclose(tensor({NAN}), tensor({NAN})));
  EXPECT_TRUE(allclose(tensor({2, 2}), tensor({2})));  // broadcasts
  EXPECT_TRUE(equal(a, tensor({1, 2, 3})));
  EXPECT_FALSE(equal(a, tensor({1, 2, 3.00001f})));
  EXPECT_FALSE(equal(a, tensor({1, 2, 3}, {3, 1})));
  EXPECT_TRUE(equal(a.view({3, 1}).t(), tensor({1, 2, 3}, {1, 3})));
  EXPECT_TRUE(equal(tensor(std::vector<int64_t>{1, 2}), tensor(std::vector<int64_t>{1, 2})));
  EXPECT_FALSE(equal(tensor({NAN}), tensor({NAN})));
}

TEST(Reduce, Errors) {
  Tensor a = zeros({2, 3});
  EXPECT_WEFT_ERROR(sum(a, {2}), "out of range");
  EXPECT_WEFT_ERROR(sum(a, {-3}), "sum");
  EXPECT_WEFT_ERROR(sum(a, {1, -1}), "more than once");
  EXPECT_WEFT_ERROR(amax(a, {0, 0}), "amax");
  EXPECT_WEFT_ERROR(max(a, 5), "max");
  EXPECT_WEFT_ERROR(argmax(a, 2), "argmax");
  EXPECT_WEFT_ERROR(prod(a, 2), "prod");
  EXPECT_WEFT_ERROR(mean(zeros({2}, {DType::Int32})), "mean");
  EXPECT_WEFT_ERROR(sum(a, {0}).item<float>(), "item()");
  EXPECT_WEFT_ERROR(max(zeros({0})), "empty");
  EXPECT_WEFT_ERROR(amax(zeros({0, 2}), {0}), "zero-size");
  EXPECT_WEFT_ERROR(max(zeros({2, 0}), 1), "zero-size");
  EXPECT_WEFT_ERROR(logsumexp(a, {3}), "logsumexp");
  EXPECT_WEFT_ERROR(std(zeros({2}, {DType::Int64})), "std");
}

}  // namespace
}  // namespace weft
