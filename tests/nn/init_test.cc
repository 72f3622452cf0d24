// nn::init::trunc_normal_ against the truncated normal's analytic moments and
// CDF (200,000 draws), and nn::init::orthogonal_ against the QR decomposition
// it stands for: Q^T Q = I, R = Q^T A upper triangular with a positive
// diagonal for the same standard-normal A, gain, shapes, and the errors.
#include "nn/init.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include <gtest/gtest.h>

#include "core/rng.h"
#include "tests/testing.h"

namespace weft {
namespace {

using testing::values;

double phi(double x) { return std::exp(-x * x / 2) / std::sqrt(2 * std::numbers::pi); }
double Phi(double x) { return (1 + std::erf(x / std::numbers::sqrt2)) / 2; }

// The moments and CDF of normal(mean, sd) truncated to [a, b].
struct Truncated {
  double mean, sd, a, b;
  double alpha() const { return (a - mean) / sd; }
  double beta() const { return (b - mean) / sd; }
  double z() const { return Phi(beta()) - Phi(alpha()); }
  double mu() const { return mean + sd * (phi(alpha()) - phi(beta())) / z(); }
  double var() const {
    const double r = (phi(alpha()) - phi(beta())) / z();
    return sd * sd * (1 + (alpha() * phi(alpha()) - beta() * phi(beta())) / z() - r * r);
  }
  double cdf(double x) const { return (Phi((x - mean) / sd) - Phi(alpha())) / z(); }
};

void check_truncated(const Truncated& tn, DType dt) {
  SCOPED_TRACE(std::string(dtype_name(dt)));
  constexpr int64_t n = 200000;
  Tensor t = empty({400, n / 400}, {dt});
  nn::init::trunc_normal_(t, tn.mean, tn.sd, tn.a, tn.b);
  std::vector<double> v = values(t);
  double s = 0, s2 = 0;
  for (double x : v) {
    ASSERT_GE(x, tn.a);
    ASSERT_LE(x, tn.b);
    s += x;
  }
  const double m = s / n;
  for (double x : v) s2 += (x - m) * (x - m);
  const double var = s2 / (n - 1);
  // Standard errors: sd / sqrt(n) for the mean, about var * sqrt(2 / n) for the variance; 5 of them.
  EXPECT_NEAR(m, tn.mu(), 5 * std::sqrt(tn.var() / n));
  EXPECT_NEAR(var, tn.var(), 5 * tn.var() * std::sqrt(2.0 / n));
  // Kolmogorov-Smirnov distance to the analytic CDF (its 99.9% point for n draws is 1.95 / sqrt(n)).
  std::sort(v.begin(), v.end());
  double ks = 0;
  for (int64_t i = 0; i < n; i += 97) {
    const double f = tn.cdf(v[i]);
    ks = std::max({ks, std::abs(f - static_cast<double>(i) / n), std::abs(f - static_cast<double>(i + 1) / n)});
  }
  EXPECT_LT(ks, 1.95 / std::sqrt(static_cast<double>(n)));
}

TEST(TruncNormal, MatchesTheTruncatedDistribution) {
  manual_seed(123);
  check_truncated({0.0, 1.0, -2.0, 2.0}, DType::Float32);     // PyTorch's defaults
  check_truncated({1.0, 0.5, 0.0, 1.2}, DType::Float64);      // asymmetric, the mean near the top
  check_truncated({0.0, 0.02, -0.04, 0.04}, DType::Float32);  // GPT-style: std 0.02 cut at 2 std
  check_truncated({-3.0, 1.0, 0.0, 5.0}, DType::Float64);     // only the far tail: every draw past 3 sd
}

TEST(TruncNormal, SeededAndErrors) {
  Tensor a = empty({5, 7}), b = empty({5, 7});
  manual_seed(7);
  nn::init::trunc_normal_(a, 0.0, 0.02);
  manual_seed(7);
  nn::init::trunc_normal_(b, 0.0, 0.02);
  EXPECT_EQ(values(a), values(b));
  EXPECT_WEFT_ERROR(nn::init::trunc_normal_(a, 0.0, 0.0), "trunc_normal_: std must be positive, got 0");
  EXPECT_WEFT_ERROR(nn::init::trunc_normal_(a, 0.0, 1.0, 1.0, -1.0),
                    "trunc_normal_: the lower bound a (1) must be below the upper bound b (-1)");
  Tensor i = zeros({3}, {DType::Int64});
  EXPECT_WEFT_ERROR(nn::init::trunc_normal_(i), "trunc_normal_: expected a floating tensor, got dtype int64");
}

// W (rows x cols, float64) has orthonormal columns (tall) or rows (wide), times gain.
void expect_semi_orthogonal(const Tensor& w, double gain, double tol) {
  const bool wide = w.size(0) < w.size(1);
  Tensor g = wide ? mm(w, w.t()) : mm(w.t(), w);
  const int64_t n = g.size(0);
  std::vector<double> gv = values(g);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) EXPECT_NEAR(gv[i * n + j], i == j ? gain * gain : 0.0, tol) << i << "," << j;
}

TEST(Orthogonal, IsTheQOfTheQRDecompositionWithAPositiveDiagonal) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{6, 3}, {3, 7}, {5, 5}}) {
    SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(cols));
    Tensor w = empty({rows, cols}, {DType::Float64});
    manual_seed(11);
    nn::init::orthogonal_(w);
    expect_semi_orthogonal(w, 1.0, 1e-12);
    // The same draws as orthogonal_'s: A (rows x cols) standard normal, in float64.
    manual_seed(11);
    Tensor a = empty({rows, cols}, {DType::Float64});
    normal_(a);
    // Tall: A = Q R with R = Q^T A upper triangular, positive diagonal. Wide: A^T = Q R with Q = W^T.
    const bool wide = rows < cols;
    Tensor q = wide ? w.t() : w, aa = wide ? a.t() : a;
    Tensor r = mm(q.t(), aa);  // (n, n)
    const int64_t n = r.size(0);
    std::vector<double> rv = values(r);
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_GT(rv[i * n + i], 0.0) << "diagonal " << i;
      for (int64_t j = 0; j < i; ++j) EXPECT_NEAR(rv[i * n + j], 0.0, 1e-12) << "below the diagonal " << i << "," << j;
    }
    EXPECT_TRUE(testing::tensors_near(mm(q, r), aa, 1e-12));
  }
}

TEST(Orthogonal, GainConvWeightsFloat32AndErrors) {
  Tensor conv = empty({8, 3, 2, 2});  // viewed as (8, 12): orthonormal rows
  nn::init::orthogonal_(conv, 2.0);
  expect_semi_orthogonal(conv.reshape({8, 12}).to(DType::Float64), 2.0, 1e-5);
  Tensor tall = empty({40, 6});
  nn::init::orthogonal_(tall, 0.5);
  expect_semi_orthogonal(tall.to(DType::Float64), 0.5, 1e-6);
  Tensor empty_w = empty({0, 4});
  EXPECT_EQ(&nn::init::orthogonal_(empty_w), &empty_w);
  Tensor v = empty({4});
  EXPECT_WEFT_ERROR(nn::init::orthogonal_(v),
                    "orthogonal_: Only tensors with 2 or more dimensions are supported, got shape [4]");
}

}  // namespace
}  // namespace weft
