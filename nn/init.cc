// torch.nn.init's initialisers (contract in nn/init.h).
#include "nn/init.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <vector>

#include "core/autograd_meta.h"

namespace weft::nn::init {

double calculate_gain(Nonlinearity nl, double param) {
  switch (nl) {
    case Nonlinearity::Linear:
    case Nonlinearity::Sigmoid: return 1.0;
    case Nonlinearity::Tanh: return 5.0 / 3.0;
    case Nonlinearity::ReLU: return std::sqrt(2.0);
    case Nonlinearity::LeakyReLU: return std::sqrt(2.0 / (1.0 + param * param));
  }
  return 1.0;
}

std::pair<int64_t, int64_t> fans(const Tensor& t) {
  WEFT_CHECK(t.dim() >= 2,
             "init: fan in and fan out can not be computed for a tensor with fewer than 2 dims "
             "(shape ",
             shape_str(t.sizes()), ")");
  int64_t receptive = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

Tensor& uniform_(Tensor& t, double low, double high) {
  NoGradGuard ng;
  return weft::uniform_(t, low, high);
}
Tensor& normal_(Tensor& t, double mean, double std) {
  NoGradGuard ng;
  return weft::normal_(t, mean, std);
}
Tensor& constant_(Tensor& t, double value) {
  NoGradGuard ng;
  return t.fill_(value);
}
Tensor& zeros_(Tensor& t) { return constant_(t, 0.0); }
Tensor& ones_(Tensor& t) { return constant_(t, 1.0); }

Tensor& xavier_uniform_(Tensor& t, double gain) {
  auto [fi, fo] = fans(t);
  double a = gain * std::sqrt(6.0 / static_cast<double>(fi + fo));
  return init::uniform_(t, -a, a);
}
Tensor& xavier_normal_(Tensor& t, double gain) {
  auto [fi, fo] = fans(t);
  return init::normal_(t, 0.0, gain * std::sqrt(2.0 / static_cast<double>(fi + fo)));
}

namespace {
double kaiming_std(const Tensor& t, double a, FanMode mode, Nonlinearity nl) {
  auto [fi, fo] = fans(t);
  int64_t fan = mode == FanMode::FanIn ? fi : fo;
  WEFT_CHECK(fan > 0, "init: kaiming init of a tensor with zero elements (shape ", shape_str(t.sizes()), ")");
  return calculate_gain(nl, a) / std::sqrt(static_cast<double>(fan));
}
}  // namespace

Tensor& kaiming_uniform_(Tensor& t, double a, FanMode mode, Nonlinearity nl) {
  double bound = std::sqrt(3.0) * kaiming_std(t, a, mode, nl);
  return init::uniform_(t, -bound, bound);
}
Tensor& kaiming_normal_(Tensor& t, double a, FanMode mode, Nonlinearity nl) {
  return init::normal_(t, 0.0, kaiming_std(t, a, mode, nl));
}

namespace {

// The inverse of erf on [-1, 1]: Winitzki's closed-form estimate (relative
// error ~2e-3), then Newton steps on erf(x) - y, each squaring the error.
double erfinv(double y) {
  if (y <= -1.0) return y == -1.0 ? -std::numeric_limits<double>::infinity() : std::nan("");
  if (y >= 1.0) return y == 1.0 ? std::numeric_limits<double>::infinity() : std::nan("");
  constexpr double ka = 0.147;
  constexpr double kTwoOverSqrtPi = 2.0 * std::numbers::inv_sqrtpi;  // erf'(0)
  const double ln = std::log((1.0 - y) * (1.0 + y));                 // log(1 - y^2), accurate near |y| = 1
  const double t = 2.0 / (std::numbers::pi * ka) + ln / 2.0;
  double x = std::copysign(std::sqrt(std::sqrt(t * t - ln / ka) - t), y);
  for (int i = 0; i < 4; ++i) {
    const double step = (std::erf(x) - y) / (kTwoOverSqrtPi * std::exp(-x * x));
    if (!std::isfinite(step)) break;
    x -= step;
  }
  return x;
}

double norm_cdf(double x) { return (1.0 + std::erf(x / std::numbers::sqrt2)) / 2.0; }

}  // namespace

Tensor& trunc_normal_(Tensor& t, double mean, double std, double a, double b) {
  WEFT_CHECK(t.is_floating_point(), "trunc_normal_: expected a floating tensor, got dtype ", t.dtype());
  WEFT_CHECK(std > 0, "trunc_normal_: std must be positive, got ", std);
  WEFT_CHECK(a < b, "trunc_normal_: the lower bound a (", a, ") must be below the upper bound b (", b, ")");
  NoGradGuard ng;
  const double lo = 2.0 * norm_cdf((a - mean) / std) - 1.0, hi = 2.0 * norm_cdf((b - mean) / std) - 1.0;
  Tensor u = empty(t.sizes(), TensorOptions{DType::Float64, kCPU});  // (t.shape)
  weft::uniform_(u, lo, hi);
  double* p = u.data_ptr<double>();
  const double scale = std * std::numbers::sqrt2;
  for (int64_t i = 0; i < u.numel(); ++i) p[i] = std::clamp(mean + scale * erfinv(p[i]), a, b);
  t.copy_(u);
  return clamp_(t, a, b);  // again in t's dtype, as PyTorch clamps
}

Tensor& orthogonal_(Tensor& t, double gain) {
  WEFT_CHECK(t.dim() >= 2, "orthogonal_: Only tensors with 2 or more dimensions are supported, got shape ",
             shape_str(t.sizes()));
  WEFT_CHECK(t.is_floating_point(), "orthogonal_: expected a floating tensor, got dtype ", t.dtype());
  if (t.numel() == 0) return t;
  NoGradGuard ng;
  const int64_t rows = t.size(0), cols = t.numel() / rows;
  const bool wide = rows < cols;
  const int64_t m = wide ? cols : rows, n = wide ? rows : cols;  // A is m x n, m >= n
  Tensor g = empty({rows, cols}, TensorOptions{DType::Float64, kCPU});
  weft::normal_(g, 0.0, 1.0);
  // Columns of A (the wide case's rows of g) orthonormalised in order by
  // Gram-Schmidt with a second pass: Q of A = QR with R's diagonal positive.
  std::vector<std::vector<double>> q(n, std::vector<double>(m));
  const double* gp = g.data_ptr<double>();
  for (int64_t j = 0; j < n; ++j) {
    std::vector<double>& v = q[j];
    for (int64_t i = 0; i < m; ++i) v[i] = wide ? gp[j * cols + i] : gp[i * cols + j];
    for (int pass = 0; pass < 2; ++pass) {
      for (int64_t k = 0; k < j; ++k) {
        double dot = 0;
        for (int64_t i = 0; i < m; ++i) dot += q[k][i] * v[i];
        for (int64_t i = 0; i < m; ++i) v[i] -= dot * q[k][i];
      }
    }
    double norm = 0;
    for (double x : v) norm += x * x;
    norm = std::sqrt(norm);
    WEFT_CHECK(norm > 0, "orthogonal_: the random matrix was rank-deficient (shape ", shape_str(t.sizes()), ")");
    for (double& x : v) x /= norm;
  }
  Tensor out = empty({rows, cols}, TensorOptions{DType::Float64, kCPU});  // (rows, cols)
  double* op = out.data_ptr<double>();
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < m; ++i) (wide ? op[j * cols + i] : op[i * cols + j]) = gain * q[j][i];
  t.copy_(out.view(t.sizes()));
  return t;
}

}  // namespace weft::nn::init
