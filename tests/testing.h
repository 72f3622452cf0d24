// Test helpers: comparing tensors against hand-computed values, and asserting
// that an expression throws weft::Error whose message contains given text.
#pragma once

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "autograd/gradcheck.h"
#include "core/ops.h"

namespace weft::testing {

// Values of `t` (any dtype, any strides) as doubles in row-major order.
inline std::vector<double> values(const Tensor& t) {
  Tensor c = t.detach().cpu().to(DType::Float64).contiguous();
  const double* p = c.data_ptr<double>();
  return std::vector<double>(p, p + c.numel());
}

// Deterministic pseudo-random values in [-1, 1) (an LCG independent of weft's
// RNG, so reference tests don't depend on the code under test).
inline Tensor rnd(const Shape& s, DType dt = DType::Float64, uint64_t seed = 1) {
  std::vector<double> v(numel_of(s));
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 12345;
  for (auto& e : v) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    e = static_cast<double>((x >> 33) % 2000) / 1000.0 - 1.0;
  }
  return tensor(v, s).to(dt);
}

inline ::testing::AssertionResult tensor_near(const Tensor& t, const std::vector<double>& expected, double tol = 1e-6) {
  auto v = values(t);
  if (v.size() != expected.size())
    return ::testing::AssertionFailure() << "size " << v.size() << " != expected " << expected.size();
  for (size_t i = 0; i < v.size(); ++i) {
    double diff = std::abs(v[i] - expected[i]);
    bool both_nan = std::isnan(v[i]) && std::isnan(expected[i]);
    bool both_inf = std::isinf(v[i]) && v[i] == expected[i];
    if (!both_nan && !both_inf && !(diff <= tol * (1.0 + std::abs(expected[i]))))
      return ::testing::AssertionFailure()
             << "element " << i << ": " << v[i] << " != expected " << expected[i] << " (tensor " << t << ")";
  }
  return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult tensors_near(const Tensor& a, const Tensor& b, double tol = 1e-6) {
  if (a.sizes() != b.sizes())
    return ::testing::AssertionFailure() << "shape " << shape_str(a.sizes()) << " != " << shape_str(b.sizes());
  return tensor_near(a, values(b), tol);
}

// Double backward (Note [double backward] in core/autograd_meta.h), checked
// two ways: the first gradients of sum(f(in) * w) with respect to every input
// that requires grad, built with create_graph, equal the first-order ones
// (which may come from fused kernels) to `same_tol`; and
// autograd::gradgradcheck passes, all second derivatives against central
// differences of the first.
inline ::testing::AssertionResult double_backward_check(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                                                        const std::vector<Tensor>& in, double atol = 1e-6,
                                                        double same_tol = 1e-10) {
  std::vector<Tensor> detached, diff;
  for (const Tensor& t : in) {
    detached.push_back(t.detach());
    if (t.requires_grad()) diff.push_back(t);
  }
  const Tensor w = rnd(f(detached).sizes(), DType::Float64, 7);
  const std::vector<Tensor> plain = autograd::grad({sum(f(in) * w)}, diff, {}, std::nullopt, false, true);
  const std::vector<Tensor> built = autograd::grad({sum(f(in) * w)}, diff, {}, std::nullopt, true, true);
  for (size_t i = 0; i < diff.size(); ++i) {
    if (plain[i].defined() != built[i].defined())
      return ::testing::AssertionFailure() << "input " << i << ": the gradient with create_graph is "
                                           << (built[i].defined() ? "" : "un") << "defined, the first-order one not";
    if (!plain[i].defined()) continue;
    if (auto same = tensors_near(built[i], plain[i], same_tol); !same)
      return ::testing::AssertionFailure() << "input " << i
                                           << ": the first gradient with create_graph differs from the first-order "
                                              "one: "
                                           << same.message();
  }
  const autograd::GradcheckResult r = autograd::gradgradcheck(f, in, {.eps = 1e-6, .atol = atol, .rtol = 1e-5});
  if (!r.ok) return ::testing::AssertionFailure() << r.message;
  return ::testing::AssertionSuccess();
}

}  // namespace weft::testing

// EXPECT_WEFT_ERROR(stmt, "substring"): stmt throws weft::Error containing substring.
#define EXPECT_WEFT_ERROR(stmt, substr)                                                                        \
  do {                                                                                                         \
    bool thrown_ = false;                                                                                      \
    try {                                                                                                      \
      stmt;                                                                                                    \
    } catch (const ::weft::Error& e_) {                                                                        \
      thrown_ = true;                                                                                          \
      EXPECT_NE(std::string(e_.what()).find(substr), std::string::npos) << "error message was: " << e_.what(); \
    }                                                                                                          \
    EXPECT_TRUE(thrown_) << "expected weft::Error containing '" << substr << "' from: " #stmt;                 \
  } while (0)
