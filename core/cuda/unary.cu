// CUDA kernels for the unary elementwise tables (core/kernels/unary.h): forward
// ops, their fused gradients, clamp and clamp_backward.
//
// Contract: same dtypes and the same scalar formulas as the CPU kernels in
// core/ops/unary.cc (M = opmath type: float for Half/BFloat16), evaluated with
// cuda::elementwise on out's device and current stream; any strides, out may
// alias a. Transcendentals use the precise CUDA functions (expf, erff, ...), so
// floating results agree with the CPU to a few ulp; integer/bool ops are exact.
#include <limits>

#include "core/cuda/ew_math.cuh"
#include "core/cuda/loops.cuh"
#include "core/kernels/unary.h"

namespace weft::cuda {
namespace {

constexpr double kSqrt1_2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;  // 1 / sqrt(2 pi)
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kGeluCubic = 0.044715;
constexpr double kTwoOverSqrtPi = 1.12837916709551257390;  // erf'(0)

// WEFT_CUDA_UNARY(name, set, body): functor name##_fn computing `body` from x (of
// opmath type M) and its registration into name##_table() for the dtypes in set.
#define WEFT_CUDA_UNARY(name, set, ...)                                               \
  struct name##_fn {                                                                  \
    template <typename M>                                                             \
    __device__ __forceinline__ M operator()(M x) const {                              \
      __VA_ARGS__;                                                                    \
    }                                                                                 \
  };                                                                                  \
  template <typename T>                                                               \
  void cuda_##name(const Tensor& out, const Tensor& a) {                              \
    if constexpr (in_set(dtype_of<T>, set)) elementwise<T, T>(out, {a}, name##_fn{}); \
  }                                                                                   \
  WEFT_REGISTER_KERNEL(name##_table(), DeviceType::CUDA, set, cuda_##name);

// WEFT_CUDA_UNARY_GRAD(name, body): out = body(g, s) for name##_backward_table(),
// floating dtypes.
#define WEFT_CUDA_UNARY_GRAD(name, ...)                                                                     \
  struct name##_grad_fn {                                                                                   \
    template <typename M>                                                                                   \
    __device__ __forceinline__ M operator()(M g, M s) const {                                               \
      __VA_ARGS__;                                                                                          \
    }                                                                                                       \
  };                                                                                                        \
  template <typename T>                                                                                     \
  void cuda_##name##_backward(const Tensor& out, const Tensor& g, const Tensor& s) {                        \
    if constexpr (in_set(dtype_of<T>, kFloatingTypes)) elementwise<T, T, T>(out, {g, s}, name##_grad_fn{}); \
  }                                                                                                         \
  WEFT_REGISTER_KERNEL(name##_backward_table(), DeviceType::CUDA, kFloatingTypes, cuda_##name##_backward);

// ---- forward ----
WEFT_CUDA_UNARY(neg, kNumericTypes, return -x)
WEFT_CUDA_UNARY(exp, kFloatingTypes, return math_exp(x))
WEFT_CUDA_UNARY(log, kFloatingTypes, return math_log(x))
WEFT_CUDA_UNARY(sqrt, kFloatingTypes, return math_sqrt(x))
WEFT_CUDA_UNARY(rsqrt, kFloatingTypes, return M(1) / math_sqrt(x))
WEFT_CUDA_UNARY(abs, kNumericTypes, return abs_of(x))
WEFT_CUDA_UNARY(sign, kAllTypes, return sign_of(x))
WEFT_CUDA_UNARY(relu, kNumericTypes, return x < M(0) ? M(0) : x)  // NaN stays NaN
WEFT_CUDA_UNARY(sigmoid, kFloatingTypes, return M(1) / (M(1) + math_exp(-x)))
WEFT_CUDA_UNARY(tanh, kFloatingTypes, return math_tanh(x))
WEFT_CUDA_UNARY(silu, kFloatingTypes, return x / (M(1) + math_exp(-x)))
WEFT_CUDA_UNARY(gelu, kFloatingTypes, return M(0.5) * x * (M(1) + math_erf(x * M(kSqrt1_2))))
WEFT_CUDA_UNARY(gelu_tanh, kFloatingTypes,
                return M(0.5) * x * (M(1) + math_tanh(M(kSqrt2OverPi) * (x + M(kGeluCubic) * x * x * x))))
WEFT_CUDA_UNARY(sin, kFloatingTypes, return math_sin(x))
WEFT_CUDA_UNARY(cos, kFloatingTypes, return math_cos(x))
WEFT_CUDA_UNARY(erf, kFloatingTypes, return math_erf(x))
WEFT_CUDA_UNARY(log1p, kFloatingTypes, return math_log1p(x))
WEFT_CUDA_UNARY(expm1, kFloatingTypes, return math_expm1(x))
WEFT_CUDA_UNARY(reciprocal, kFloatingTypes, return M(1) / x)
WEFT_CUDA_UNARY(floor, kNumericTypes, return math_floor(x))  // integers: identity
WEFT_CUDA_UNARY(ceil, kNumericTypes, return math_ceil(x))
WEFT_CUDA_UNARY(round, kNumericTypes, return math_round_even(x))

// ---- gradients (s: saved input or output, see core/kernels/unary.h) ----
WEFT_CUDA_UNARY_GRAD(exp, return g * s)
WEFT_CUDA_UNARY_GRAD(log, return g / s)
WEFT_CUDA_UNARY_GRAD(sqrt, return g / (M(2) * s))
WEFT_CUDA_UNARY_GRAD(rsqrt, return M(-0.5) * g * s * s * s)
WEFT_CUDA_UNARY_GRAD(abs, return g * sign_of(s))
WEFT_CUDA_UNARY_GRAD(relu, return s <= M(0) ? M(0) : g)
WEFT_CUDA_UNARY_GRAD(sigmoid, return g * s * (M(1) - s))
WEFT_CUDA_UNARY_GRAD(tanh, return g * (M(1) - s * s))
WEFT_CUDA_UNARY_GRAD(silu, M sg = M(1) / (M(1) + math_exp(-s)); return g * sg * (M(1) + s * (M(1) - sg)))
WEFT_CUDA_UNARY_GRAD(gelu, M cdf = M(0.5) * (M(1) + math_erf(s * M(kSqrt1_2)));
                     M pdf = M(kInvSqrt2Pi) * math_exp(M(-0.5) * s * s); return g * (cdf + s * pdf))
WEFT_CUDA_UNARY_GRAD(gelu_tanh, M inner = M(kSqrt2OverPi) * (s + M(kGeluCubic) * s * s * s); M t = math_tanh(inner);
                     M dinner = M(kSqrt2OverPi) * (M(1) + M(3 * kGeluCubic) * s * s);
                     return g * (M(0.5) * (M(1) + t) + M(0.5) * s * (M(1) - t * t) * dinner))
WEFT_CUDA_UNARY_GRAD(sin, return g * math_cos(s))
WEFT_CUDA_UNARY_GRAD(cos, return -g * math_sin(s))
WEFT_CUDA_UNARY_GRAD(erf, return g * M(kTwoOverSqrtPi) * math_exp(-s * s))
WEFT_CUDA_UNARY_GRAD(log1p, return g / (M(1) + s))
WEFT_CUDA_UNARY_GRAD(expm1, return g * (s + M(1)))
WEFT_CUDA_UNARY_GRAD(reciprocal, return -g * s * s)

// ---- clamp ----
template <typename M>
M lower_bound(const Scalar& lo, bool has) {
  if (has) return lo.to<M>();
  if constexpr (std::numeric_limits<M>::has_infinity) return -std::numeric_limits<M>::infinity();
  else return std::numeric_limits<M>::lowest();
}
template <typename M>
M upper_bound(const Scalar& hi, bool has) {
  if (has) return hi.to<M>();
  if constexpr (std::numeric_limits<M>::has_infinity) return std::numeric_limits<M>::infinity();
  else return std::numeric_limits<M>::max();
}

// min(max(x, lo), hi): NaN stays NaN; lo > hi gives hi.
template <typename M>
struct ClampFn {
  M lo, hi;
  __device__ __forceinline__ M operator()(M x) const {
    M y = x < lo ? lo : x;
    return hi < y ? hi : y;
  }
};
template <typename M>
struct ClampGradFn {
  M lo, hi;
  __device__ __forceinline__ M operator()(M g, M x) const { return (x >= lo && x <= hi) ? g : M(0); }
};

template <typename T>
void cuda_clamp(const Tensor& out, const Tensor& a, const Scalar& lo, const Scalar& hi, bool has_lo, bool has_hi) {
  using M = opmath_t<T>;
  if constexpr (in_set(dtype_of<T>, kNumericTypes))
    elementwise<T, T>(out, {a}, ClampFn<M>{lower_bound<M>(lo, has_lo), upper_bound<M>(hi, has_hi)});
}
template <typename T>
void cuda_clamp_backward(const Tensor& out, const Tensor& g, const Tensor& x, const Scalar& lo, const Scalar& hi,
                         bool has_lo, bool has_hi) {
  using M = opmath_t<T>;
  if constexpr (in_set(dtype_of<T>, kFloatingTypes))
    elementwise<T, T, T>(out, {g, x}, ClampGradFn<M>{lower_bound<M>(lo, has_lo), upper_bound<M>(hi, has_hi)});
}
WEFT_REGISTER_KERNEL(clamp_table(), DeviceType::CUDA, kNumericTypes, cuda_clamp);
WEFT_REGISTER_KERNEL(clamp_backward_table(), DeviceType::CUDA, kFloatingTypes, cuda_clamp_backward);

}  // namespace
}  // namespace weft::cuda
