// The nn tests' golden-case check: an op run on a case's stored inputs, its
// output and every gradient compared with PyTorch's. The files come from
// tools/golden/golden_util.py's record(): "<case>.x", ".w", ".b" (inputs, the
// last two optional), ".go" (the upstream gradient), ".out", ".dx", ".dw", ".db".
#pragma once

#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "core/autograd_meta.h"
#include "tests/golden.h"
#include "tests/testing.h"

namespace weft::testing {

using GoldenFn = std::function<Tensor(const Tensor& x, const Tensor& w, const Tensor& b)>;

// Runs fn on case c's inputs (in dtype dt) and checks the output and every
// gradient against PyTorch's to `tol`.
inline void check_golden_case(const Golden& g, const std::string& c, const GoldenFn& fn, DType dt = DType::Float32,
                              double tol = 2e-5) {
  SCOPED_TRACE(c + " in " + std::string(dtype_name(dt)));
  auto leaf = [&](const std::string& key) {
    if (!g.has(key)) return Tensor();
    Tensor t = g(key).to(dt).clone();
    t.requires_grad_(true);
    return t;
  };
  Tensor x = leaf(c + ".x"), w = leaf(c + ".w"), b = leaf(c + ".b");
  Tensor y = fn(x, w, b);
  EXPECT_EQ(y.dtype(), dt);
  ASSERT_TRUE(tensors_near(y, g(c + ".out"), tol));
  y.backward(g(c + ".go").to(dt));
  EXPECT_TRUE(tensors_near(x.grad(), g(c + ".dx"), tol));
  if (w.defined()) {
    EXPECT_TRUE(tensors_near(w.grad(), g(c + ".dw"), tol));
  }
  if (b.defined()) {
    EXPECT_TRUE(tensors_near(b.grad(), g(c + ".db"), tol));
  }
}

// The case in float32 and in float64.
inline void check_golden_both(const Golden& g, const std::string& c, const GoldenFn& fn) {
  check_golden_case(g, c, fn, DType::Float32);
  check_golden_case(g, c, fn, DType::Float64);
}

}  // namespace weft::testing
