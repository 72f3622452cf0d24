// Branch-free float32 transcendental functions that the compiler can vectorise
// inside cpu::elementwise loops (libm's expf/tanhf/erff are opaque calls and
// keep a loop scalar). double arguments forward to <cmath>.
//
// Contract: vmath::exp/tanh/erf/log(float) match <cmath> to a few ulp (exp, log,
// tanh: relative error < 4e-7; erf: absolute error < 2e-7 (|x| < 0.5: Taylor series)); infinities and NaN
// propagate like <cmath>. Coefficients are the classic Cephes minimax
// polynomials (exp, log, tanh) and Abramowitz & Stegun 7.1.26 refined (erf).
// log1p/expm1(float) stay accurate near 0 (within 3 ulp of the correctly rounded
// value everywhere; -0 stays -0). floor/ceil/round (float and double) are exact,
// built on std::nearbyint, which vectorises where std::floor/std::ceil do not
// (they need -fno-trapping-math); round is half to even in the default rounding
// mode (torch.round), and -0, infinities and NaN pass through like <cmath>.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace weft::cpu::vmath {

inline double exp(double x) { return std::exp(x); }
inline double tanh(double x) { return std::tanh(x); }
inline double erf(double x) { return std::erf(x); }
inline double log(double x) { return std::log(x); }
inline double log1p(double x) { return std::log1p(x); }
inline double expm1(double x) { return std::expm1(x); }

inline float exp(float x) {
  constexpr float kHi = 88.7228391f, kLo = -103.972076f;
  float xc = x > kHi ? kHi : (x < kLo ? kLo : x);
  // x = n ln2 + r, |r| <= ln2 / 2, ln2 split in two for an exact n ln2
  // round to nearest with the 1.5 * 2^23 trick (std::floor does not vectorise
  // without -fno-trapping-math)
  constexpr float kRound = 12582912.0f;
  float n = (xc * 1.44269504088896341f + kRound) - kRound;
  float r = xc - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float y = p * r * r + r + 1.0f;
  // y * 2^n as y * 2^n1 * 2^n2 so that the subnormal and top ranges stay exact
  int32_t ni = static_cast<int32_t>(n);
  int32_t n1 = ni >> 1, n2 = ni - n1;  // floor(n / 2) and the rest, both in [-75, 64]
  float s1 = std::bit_cast<float>((n1 + 127) << 23);
  float s2 = std::bit_cast<float>((n2 + 127) << 23);
  float res = y * s1 * s2;
  res = x < kLo ? 0.0f : res;
  res = x > kHi ? std::numeric_limits<float>::infinity() : res;
  return x != x ? x : res;
}

inline float tanh(float x) {
  float ax = x < 0 ? -x : x;
  // small |x|: odd polynomial (no cancellation); else 1 - 2 / (exp(2|x|) + 1)
  float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  float small = p * z * x + x;
  float e = exp(2.0f * (ax > 44.0f ? 44.0f : ax));  // exp(88) is still finite
  float big = 1.0f - 2.0f / (e + 1.0f);
  big = x < 0 ? -big : big;
  return ax < 0.625f ? small : big;  // NaN: ax < 0.625 false, big is NaN
}

inline float erf(float x) {
  // erf(x) = 1 - t P(t) exp(-x^2), t = 1 / (1 + p|x|) (A&S 7.1.26), odd in x
  float ax = x < 0 ? -x : x;
  float t = 1.0f / (1.0f + 0.3275911f * ax);
  float p = 1.061405429f;
  p = p * t - 1.453152027f;
  p = p * t + 1.421413741f;
  p = p * t - 0.284496736f;
  p = p * t + 0.254829592f;
  float r = 1.0f - p * t * exp(-ax * ax);
  // near 0 use the Taylor series (A&S has a large relative error there)
  float z = x * x;
  float taylor = -8.5483304e-4f;
  taylor = taylor * z + 5.2239776e-3f;
  taylor = taylor * z - 2.68661706e-2f;
  taylor = taylor * z + 1.12837917e-1f;
  taylor = taylor * z - 3.76126389e-1f;
  taylor = (taylor * z + 1.12837917f) * x;
  float res = x < 0 ? -r : r;
  return ax < 0.5f ? taylor : res;
}

inline float log(float x) {
  // Arithmetic is never conditional here: with -ftrapping-math (the default)
  // the vectoriser only if-converts selects of values already computed.
  // subnormals: scale into the normal range first
  float mult = x < 1.17549435e-38f ? 8388608.0f : 1.0f;        // 2^23 or 1
  int32_t shift = (std::bit_cast<int32_t>(mult) >> 23) - 127;  // 23 or 0
  int32_t bits = std::bit_cast<int32_t>(x * mult);
  // x = m 2^e with m in [sqrt(1/2), sqrt(2)); log x = log m + e ln2
  float e = static_cast<float>(((bits >> 23) & 0xff) - 126 - shift);
  float m = std::bit_cast<float>((bits & 0x007fffff) | 0x3f000000);  // [0.5, 1)
  bool lo = m < 0.707106781186547524f;
  e = e - (lo ? 1.0f : 0.0f);
  m = m + (lo ? m : 0.0f) - 1.0f;
  float z = m * m;
  float p = 7.0376836292e-2f;
  p = p * m - 1.1514610310e-1f;
  p = p * m + 1.1676998740e-1f;
  p = p * m - 1.2420140846e-1f;
  p = p * m + 1.4249322787e-1f;
  p = p * m - 1.6668057665e-1f;
  p = p * m + 2.0000714765e-1f;
  p = p * m - 2.4999993993e-1f;
  p = p * m + 3.3333331174e-1f;
  float y = p * m * z;
  y += -2.12194440e-4f * e;
  y += -0.5f * z;
  float res = m + y + 0.693359375f * e;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  res = x == kInf ? kInf : res;
  res = x == 0.0f ? -kInf : res;
  res = ((x < 0.0f) | (x != x)) ? std::numeric_limits<float>::quiet_NaN() : res;
  return res;
}

// log(1 + x) = log(u) * x / (u - 1) with u = 1 + x rounded (Goldberg): the
// rounding of u cancels, so small x keep their relative accuracy.
inline float log1p(float x) {
  float u = 1.0f + x, d = u - 1.0f;
  float r = log(u) * (x / d);
  r = d == 0.0f ? x : r;  // |x| below half an ulp of 1 (and +-0)
  return x == std::numeric_limits<float>::infinity() ? x : r;
}

// |x| < 0.5: the Taylor series to x^8 (truncation < 1e-8 relative); else exp(x) - 1,
// where the cancellation costs at most a factor e^0.5 / (e^0.5 - 1) = 2.5 in relative error.
inline float expm1(float x) {
  float p = 1.0f / 40320;
  p = p * x + 1.0f / 5040;
  p = p * x + 1.0f / 720;
  p = p * x + 1.0f / 120;
  p = p * x + 1.0f / 24;
  p = p * x + 1.0f / 6;
  p = p * x + 0.5f;
  float small = p * x * x + x;
  small = x == 0.0f ? x : small;  // keeps -0
  float big = exp(x) - 1.0f;
  float ax = x < 0 ? -x : x;
  return ax < 0.5f ? small : big;  // NaN: big is NaN
}

// round half to even; floor and ceil from it by one compare (see the file comment).
template <typename M>
inline M round(M x) {
  return std::nearbyint(x);
}
template <typename M>
inline M floor(M x) {
  M r = std::nearbyint(x);
  return r - (r > x ? M(1) : M(0));  // floor(-0.4) = -0 - 1 = -1; -0 stays -0
}
template <typename M>
inline M ceil(M x) {
  return -floor(-x);  // keeps the sign of zero: ceil(-0.6) = -0
}

// The tanh-approximated GELU (PyTorch's approximate="tanh") as
// 0.5 x (1 + tanh(u)) = x sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3): one exp
// and one division per element, and no cancellation in 1 + tanh(u) for x << 0.
// gelu_tanh_grad(x) = d/dx = sg (1 + 2 x (1 - sg) du/dx) with sg = sigmoid(2u).
// Shared by the unary kernels (core/ops/unary.cc) and the GEMM epilogue
// (core/cpu/gemm.h), whose AVX-512 form uses the same constants.
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kGeluCubic = 0.044715;
template <typename M>
inline M gelu_tanh(M x) {
  return x / (M(1) + exp(M(-2 * kSqrt2OverPi) * (x + M(kGeluCubic) * x * x * x)));
}
template <typename M>
inline M gelu_tanh_grad(M x) {
  const M sg = M(1) / (M(1) + exp(M(-2 * kSqrt2OverPi) * (x + M(kGeluCubic) * x * x * x)));
  const M dinner = M(kSqrt2OverPi) * (M(1) + M(3 * kGeluCubic) * x * x);
  return sg * (M(1) + M(2) * x * (M(1) - sg) * dinner);
}

}  // namespace weft::cpu::vmath
