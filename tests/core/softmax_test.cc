// softmax / log_softmax (core/ops/softmax.cc) against a naive double-precision
// reference, stability cases, non-contiguous inputs, every floating dtype, and
// gradchecks.
#include <cmath>

#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "autograd/gradcheck.h"
#include "core/ops.h"
#include "core/parallel.h"
#include "tests/testing.h"

namespace weft {
namespace {
using testing::tensor_near;
using testing::values;

std::vector<double> lcg(int64_t n, uint64_t seed, double scale = 0.37) {
  std::vector<double> v(n);
  uint64_t s = seed * 2862933555777941757ull + 3037000493ull;
  for (auto& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = (static_cast<int>((s >> 33) % 41) - 20) * scale;
  }
  return v;
}

// Naive softmax of row-major v (shape s) along dim d.
std::vector<double> naive_softmax(const std::vector<double>& v, const Shape& s, int64_t d, bool log) {
  int64_t outer = 1, inner = 1, r = s[d];
  for (int64_t i = 0; i < static_cast<int64_t>(s.size()); ++i) {
    if (i < d) outer *= s[i];
    if (i > d) inner *= s[i];
  }
  std::vector<double> out(v.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      double mx = -INFINITY, sum = 0;
      for (int64_t k = 0; k < r; ++k) mx = std::max(mx, v[(o * r + k) * inner + j]);
      for (int64_t k = 0; k < r; ++k) sum += std::exp(v[(o * r + k) * inner + j] - mx);
      for (int64_t k = 0; k < r; ++k) {
        double x = v[(o * r + k) * inner + j];
        out[(o * r + k) * inner + j] = log ? x - mx - std::log(sum) : std::exp(x - mx) / sum;
      }
    }
  return out;
}

TEST(Softmax, HandValues) {
  Tensor a = tensor({0, std::log(3.0f), 1, 1}, {2, 2});
  EXPECT_TRUE(tensor_near(softmax(a, 1), {0.25, 0.75, 0.5, 0.5}));
  EXPECT_TRUE(tensor_near(log_softmax(a, -1), {std::log(0.25), std::log(0.75), std::log(0.5), std::log(0.5)}));
  EXPECT_TRUE(tensor_near(a.softmax(0), {1 / (1 + std::exp(1.0)), 3 / (3 + std::exp(1.0)),
                                         std::exp(1.0) / (1 + std::exp(1.0)), std::exp(1.0) / (3 + std::exp(1.0))}));
}

TEST(Softmax, EveryDimDtypeMatchesNaive) {
  Shape s{3, 4, 37};  // 37: exercises vector body and tail
  auto v = lcg(3 * 4 * 37, 1);
  for (DType dt : {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16}) {
    Tensor a = tensor(v, s, {dt});
    auto vr = values(a);  // rounded inputs
    double tol = dt == DType::BFloat16 ? 1e-2 : dt == DType::Float16 ? 2e-3 : dt == DType::Float32 ? 2e-6 : 1e-12;
    for (int64_t d : {0, 1, 2, -1}) {
      int64_t dd = d < 0 ? d + 3 : d;
      Tensor y = softmax(a, d);
      EXPECT_EQ(y.dtype(), dt);
      EXPECT_EQ(y.sizes(), s);
      EXPECT_TRUE(tensor_near(y, naive_softmax(vr, s, dd, false), tol)) << dt << " dim " << d;
      EXPECT_TRUE(tensor_near(log_softmax(a, d), naive_softmax(vr, s, dd, true), tol)) << dt << " dim " << d;
    }
  }
}

TEST(Softmax, NonContiguousInputs) {
  auto v = lcg(5 * 6, 2);
  Tensor base = tensor(v, {5, 6});
  Tensor t = base.t();  // (6, 5)
  auto tv = values(t);
  EXPECT_TRUE(tensor_near(softmax(t, 1), naive_softmax(tv, {6, 5}, 1, false), 2e-6));
  EXPECT_TRUE(tensor_near(log_softmax(t, 0), naive_softmax(tv, {6, 5}, 0, true), 2e-6));
  Tensor sl = base.slice(1, 0, 6, 2);  // (5, 3)
  EXPECT_TRUE(tensor_near(softmax(sl, 1), naive_softmax(values(sl), {5, 3}, 1, false), 2e-6));
}

TEST(Softmax, NumericallyStable) {
  Tensor a = tensor({1000, 1001, -1000, 1e30f}, {1, 4});
  auto y = values(softmax(a, 1));
  EXPECT_NEAR(y[0], 0, 1e-12);
  EXPECT_NEAR(y[3], 1, 1e-7);
  Tensor b = tensor({1000, 1001});
  EXPECT_TRUE(tensor_near(softmax(b, 0), {1 / (1 + std::exp(1.0)), std::exp(1.0) / (1 + std::exp(1.0))}, 1e-6));
  EXPECT_TRUE(tensor_near(log_softmax(b, 0), {-std::log1p(std::exp(1.0)), 1 - std::log1p(std::exp(1.0))}, 1e-6));
  Tensor m = tensor({0, -INFINITY, 0, -INFINITY}, {1, 4});  // masked entries get 0
  EXPECT_TRUE(tensor_near(softmax(m, 1), {0.5, 0, 0.5, 0}));
  EXPECT_TRUE(tensor_near(softmax(m.t(), 0), {0.5, 0, 0.5, 0}));
  auto lm = values(log_softmax(m, 1));
  EXPECT_NEAR(lm[0], -std::log(2.0), 1e-6);
  EXPECT_TRUE(std::isinf(lm[1]) && lm[1] < 0);
}

TEST(Softmax, LargeRowsSumToOneAndThreadIndependent) {
  auto v = lcg(64 * 4099, 3, 0.05);
  Tensor a = tensor(v, {64, 4099});
  Tensor y = softmax(a, 1);
  EXPECT_TRUE(tensor_near(sum(y, {1}), std::vector<double>(64, 1.0), 1e-5));
  auto ref = naive_softmax(v, {64, 4099}, 1, false);
  EXPECT_TRUE(tensor_near(y, ref, 1e-5));
  int prev = get_num_threads();
  set_num_threads(1);
  Tensor y1 = softmax(a, 1), z1 = softmax(a, 0);
  set_num_threads(2);
  Tensor y2 = softmax(a, 1), z2 = softmax(a, 0);
  set_num_threads(prev);
  EXPECT_TRUE(equal(y1, y2));
  EXPECT_TRUE(equal(z1, z2));
}

TEST(Softmax, Gradcheck) {
  for (int64_t d : {0, 1, 2, -1}) {
    Tensor x = tensor(lcg(24, 10 + d), {2, 3, 4}).to(DType::Float64).requires_grad_();
    auto r = autograd::gradcheck([d](const std::vector<Tensor>& in) { return softmax(in[0], d); }, {x});
    EXPECT_TRUE(r.ok) << r.message;
    auto r2 = autograd::gradcheck([d](const std::vector<Tensor>& in) { return log_softmax(in[0], d); }, {x});
    EXPECT_TRUE(r2.ok) << r2.message;
  }
  Tensor x = tensor({1, 2, 3}).requires_grad_();
  (softmax(x, 0) * tensor({1, 0, 0})).sum().backward();
  // d softmax_0 / dx_j = y0 (delta_0j - y_j)
  auto y = values(softmax(tensor({1, 2, 3}), 0));
  EXPECT_TRUE(tensor_near(x.grad(), {y[0] * (1 - y[0]), -y[0] * y[1], -y[0] * y[2]}, 1e-6));
}

TEST(Softmax, Errors) {
  EXPECT_WEFT_ERROR(softmax(zeros({2, 3}), 2), "softmax");
  EXPECT_WEFT_ERROR(log_softmax(zeros({2, 3}), -3), "log_softmax");
  EXPECT_WEFT_ERROR(softmax(zeros({2}, {DType::Int64}), 0), "floating");
  Tensor e = softmax(zeros({0, 3}), 1);
  EXPECT_EQ(e.sizes(), (Shape{0, 3}));
}

}  // namespace
}  // namespace weft
