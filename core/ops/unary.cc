// Unary elementwise ops: neg, exp, log, sqrt, rsqrt, abs, sign, relu, gelu,
// silu, sigmoid, tanh, sin, cos, erf, log1p, expm1, reciprocal, floor, ceil,
// round, clamp, and the in-place forms neg_, exp_, sqrt_, relu_, sigmoid_,
// tanh_, clamp_ (logical_not lives in compare.cc).
//
// Contract: each op owns one forward kernel table and (when differentiable) one
// fused gradient kernel table `<op>_backward` computing dx = f(dy, saved) where
// `saved` is the op's input or output (which one is fixed per op). Floating ops
// (exp, log, sin, reciprocal, ...) promote integral/bool inputs to float32 like
// PyTorch; abs, neg, relu, sign, clamp, floor, ceil and round keep the input
// dtype (floor/ceil/round of an integer is the integer; bool is an error naming
// the op). round is half to even (torch.round); floor, ceil, round and sign
// have zero gradient. Half/BFloat16 compute in float; float
// exp/log/tanh/erf/log1p/expm1 and floor/ceil/round come from
// core/cpu/vec_math.h so the loops vectorise (sin and cos are libm's).
// The fused gradient kernels record no graph. When a backward builds one
// (create_graph, Note [double backward] in core/autograd_meta.h), the ops with a
// composed form (exp, log, sqrt, rsqrt, abs, relu, sigmoid, tanh, silu, gelu,
// sin, cos, erf, log1p, expm1, reciprocal, neg) use it instead: the same
// derivative written with recorded ops on the saved tensor with its history.
// The others (the in-place forms, clamp) refuse a second backward, naming the
// node.
#include "core/kernels/unary.h"

#include <cmath>
#include <limits>
#include <memory>

#include "core/autograd_meta.h"
#include "core/cpu/loops.h"
#include "core/cpu/vec_math.h"
#include "core/dispatch.h"
#include "core/ops.h"
#include "core/ops/elementwise_util.h"

namespace weft {

// WEFT_UNARY_KERNEL(name, dtypes, body): defines name_table() and registers a CPU
// kernel computing `body` from `x` (of type M = opmath_t<T>) for every dtype in
// the set. WEFT_UNARY_GRAD_KERNEL(name, dtypes, body) does the same for the fused
// gradient kernel name_backward_table(), with `g` the incoming gradient and `s`
// the saved input/output.
#define WEFT_UNARY_KERNEL(name, set, ...)                                                                    \
  UnaryKernel& name##_table() {                                                                              \
    static UnaryKernel t(#name);                                                                             \
    return t;                                                                                                \
  }                                                                                                          \
  namespace {                                                                                                \
  template <typename T>                                                                                      \
  void cpu_##name(const Tensor& out, const Tensor& a) {                                                      \
    using M = opmath_t<T>;                                                                                   \
    if constexpr (in_set(dtype_of<T>, set)) cpu::elementwise<T, T>(out, {a}, [](M x) -> M { __VA_ARGS__; }); \
  }                                                                                                          \
  WEFT_REGISTER_KERNEL(name##_table(), DeviceType::CPU, set, cpu_##name);                                    \
  }

#define WEFT_UNARY_GRAD_KERNEL(name, set, ...)                                                \
  UnaryGradKernel& name##_backward_table() {                                                  \
    static UnaryGradKernel t(#name "_backward");                                              \
    return t;                                                                                 \
  }                                                                                           \
  namespace {                                                                                 \
  template <typename T>                                                                       \
  void cpu_##name##_backward(const Tensor& out, const Tensor& gt, const Tensor& st) {         \
    using M = opmath_t<T>;                                                                    \
    if constexpr (in_set(dtype_of<T>, set))                                                   \
      cpu::elementwise<T, T, T>(out, {gt, st}, [](M g, M s) -> M { __VA_ARGS__; });           \
  }                                                                                           \
  WEFT_REGISTER_KERNEL(name##_backward_table(), DeviceType::CPU, set, cpu_##name##_backward); \
  }

namespace vmath = cpu::vmath;

namespace {
template <typename M>
inline M sign_of(M x) {
  if constexpr (std::is_same_v<M, bool>) return x;
  else if constexpr (std::is_unsigned_v<M>) return M(x > M(0));
  else return M((M(0) < x) - (x < M(0)));
}
template <typename M>
inline M abs_of(M x) {
  if constexpr (std::is_unsigned_v<M> || std::is_same_v<M, bool>) return x;
  else return x < M(0) ? M(-x) : x;
}
constexpr double kSqrt1_2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;     // 1 / sqrt(2 pi)
constexpr double kTwoOverSqrtPi = 1.12837916709551257390;  // erf'(0)
}  // namespace

// ---- forward kernels ----
WEFT_UNARY_KERNEL(neg, kNumericTypes, return -x)
WEFT_UNARY_KERNEL(exp, kFloatingTypes, return vmath::exp(x))
WEFT_UNARY_KERNEL(log, kFloatingTypes, return vmath::log(x))
WEFT_UNARY_KERNEL(sqrt, kFloatingTypes, return std::sqrt(x))
WEFT_UNARY_KERNEL(rsqrt, kFloatingTypes, return M(1) / std::sqrt(x))
WEFT_UNARY_KERNEL(abs, kNumericTypes, return abs_of(x))
WEFT_UNARY_KERNEL(sign, kAllTypes, return sign_of(x))
WEFT_UNARY_KERNEL(relu, kNumericTypes, return x < M(0) ? M(0) : x)  // NaN stays NaN
WEFT_UNARY_KERNEL(sigmoid, kFloatingTypes, return M(1) / (M(1) + vmath::exp(-x)))
WEFT_UNARY_KERNEL(tanh, kFloatingTypes, return vmath::tanh(x))
WEFT_UNARY_KERNEL(silu, kFloatingTypes, return x / (M(1) + vmath::exp(-x)))
WEFT_UNARY_KERNEL(gelu, kFloatingTypes, return M(0.5) * x * (M(1) + vmath::erf(x * M(kSqrt1_2))))
WEFT_UNARY_KERNEL(gelu_tanh, kFloatingTypes, return vmath::gelu_tanh(x))  // core/cpu/vec_math.h
WEFT_UNARY_KERNEL(sin, kFloatingTypes, return std::sin(x))
WEFT_UNARY_KERNEL(cos, kFloatingTypes, return std::cos(x))
WEFT_UNARY_KERNEL(erf, kFloatingTypes, return vmath::erf(x))
WEFT_UNARY_KERNEL(log1p, kFloatingTypes, return vmath::log1p(x))
WEFT_UNARY_KERNEL(expm1, kFloatingTypes, return vmath::expm1(x))
WEFT_UNARY_KERNEL(reciprocal, kFloatingTypes, return M(1) / x)
// integers are already whole: identity
WEFT_UNARY_KERNEL(floor, kNumericTypes, if constexpr (std::is_integral_v<M>) return x; else return vmath::floor(x))
WEFT_UNARY_KERNEL(ceil, kNumericTypes, if constexpr (std::is_integral_v<M>) return x; else return vmath::ceil(x))
WEFT_UNARY_KERNEL(round, kNumericTypes, if constexpr (std::is_integral_v<M>) return x; else return vmath::round(x))

// ---- gradient kernels (s: o = saved output, i = saved input) ----
WEFT_UNARY_GRAD_KERNEL(exp, kFloatingTypes, return g * s)                      // s = exp(x)
WEFT_UNARY_GRAD_KERNEL(log, kFloatingTypes, return g / s)                      // s = x
WEFT_UNARY_GRAD_KERNEL(sqrt, kFloatingTypes, return g / (M(2) * s))            // s = sqrt(x)
WEFT_UNARY_GRAD_KERNEL(rsqrt, kFloatingTypes, return M(-0.5) * g * s * s * s)  // s = x^-1/2
WEFT_UNARY_GRAD_KERNEL(abs, kFloatingTypes, return g * sign_of(s))             // s = x; abs'(0) = 0
WEFT_UNARY_GRAD_KERNEL(relu, kFloatingTypes, return s <= M(0) ? M(0) : g)      // s = relu(x); relu'(0) = 0
WEFT_UNARY_GRAD_KERNEL(sigmoid, kFloatingTypes, return g * s * (M(1) - s))     // s = sigmoid(x)
WEFT_UNARY_GRAD_KERNEL(tanh, kFloatingTypes, return g * (M(1) - s * s))        // s = tanh(x)
WEFT_UNARY_GRAD_KERNEL(silu, kFloatingTypes, M sg = M(1) / (M(1) + vmath::exp(-s));
                       return g * sg * (M(1) + s * (M(1) - sg)))  // s = x
WEFT_UNARY_GRAD_KERNEL(gelu, kFloatingTypes, M cdf = M(0.5) * (M(1) + vmath::erf(s * M(kSqrt1_2)));
                       M pdf = M(kInvSqrt2Pi) * vmath::exp(M(-0.5) * s * s); return g * (cdf + s * pdf))  // s = x
WEFT_UNARY_GRAD_KERNEL(gelu_tanh, kFloatingTypes, return g * vmath::gelu_tanh_grad(s))                    // s = x
WEFT_UNARY_GRAD_KERNEL(sin, kFloatingTypes, return g * std::cos(s))                                       // s = x
WEFT_UNARY_GRAD_KERNEL(cos, kFloatingTypes, return -g * std::sin(s))                                      // s = x
WEFT_UNARY_GRAD_KERNEL(erf, kFloatingTypes, return g * M(kTwoOverSqrtPi) * vmath::exp(-s * s))            // s = x
WEFT_UNARY_GRAD_KERNEL(log1p, kFloatingTypes, return g / (M(1) + s))                                      // s = x
WEFT_UNARY_GRAD_KERNEL(expm1, kFloatingTypes, return g * (s + M(1)))   // s = expm1(x)
WEFT_UNARY_GRAD_KERNEL(reciprocal, kFloatingTypes, return -g * s * s)  // s = 1/x

// ---- clamp ----
ClampKernel& clamp_table() {
  static ClampKernel t("clamp");
  return t;
}
ClampGradKernel& clamp_backward_table() {
  static ClampGradKernel t("clamp_backward");
  return t;
}
namespace {
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
// min(max(x, lo), hi): NaN inputs stay NaN; lo > hi gives hi (PyTorch's rule).
template <typename T>
void cpu_clamp(const Tensor& out, const Tensor& a, const Scalar& lo_s, const Scalar& hi_s, bool has_lo, bool has_hi) {
  using M = opmath_t<T>;
  M lo = lower_bound<M>(lo_s, has_lo), hi = upper_bound<M>(hi_s, has_hi);
  cpu::elementwise<T, T>(out, {a}, [lo, hi](M x) -> M {
    M y = x < lo ? lo : x;
    return hi < y ? hi : y;
  });
}
// PyTorch's rule: the gradient passes where lo <= x <= hi.
template <typename T>
void cpu_clamp_backward(const Tensor& out, const Tensor& g, const Tensor& x, const Scalar& lo_s, const Scalar& hi_s,
                        bool has_lo, bool has_hi) {
  using M = opmath_t<T>;
  M lo = lower_bound<M>(lo_s, has_lo), hi = upper_bound<M>(hi_s, has_hi);
  cpu::elementwise<T, T, T>(out, {g, x}, [lo, hi](M gv, M xv) -> M { return (xv >= lo && xv <= hi) ? gv : M(0); });
}
WEFT_REGISTER_KERNEL(clamp_table(), DeviceType::CPU, kNumericTypes, cpu_clamp);
WEFT_REGISTER_KERNEL(clamp_backward_table(), DeviceType::CPU, kFloatingTypes, cpu_clamp_backward);
}  // namespace

// ---- front ends ----
namespace {

enum class Out { Keep, Float };  // result dtype: the input's, or float32 for integral inputs

DType unary_dtype(DType in, Out mode) { return mode == Out::Float && !is_floating(in) ? DType::Float32 : in; }

Tensor unary_forward(UnaryKernel& k, const char* op, const Tensor& a, Out mode) {
  WEFT_CHECK(a.defined(), op, ": undefined tensor argument");
  DType dt = unary_dtype(a.dtype(), mode);
  WEFT_CHECK(k.has(a.device().type, dt), op, ": not supported for dtype ", a.dtype());
  Tensor x = a.dtype() == dt ? a.detach() : a.detach().to(dt);
  Tensor out = empty(a.sizes(), {dt, a.device()});
  k(a.device(), dt, out, x);
  return out;
}

// dx = grad_kernel(dy, saved) with dy converted to saved's dtype.
Tensor apply_grad(UnaryGradKernel& k, const Tensor& g, const Tensor& saved) {
  Tensor out = empty(saved.sizes(), saved.options());
  k(saved.device(), saved.dtype(), out, g.to(saved.dtype()), saved);
  return out;
}

enum class Save { Input, Output };

// dx from dy (g, in the saved tensor's dtype) and the saved input or output
// `s`, composed of recorded ops: the fused kernel's formula, differentiable.
using Composed = Tensor (*)(const Tensor& g, const Tensor& s);

// Records `name` with a fused gradient kernel on `a` -> `out`; a backward
// that builds a graph uses `composed` instead (Note [double backward]).
void record_unary(const char* name, UnaryGradKernel& k, const Tensor& a, const Tensor& out, Save which,
                  Composed composed) {
  if (!any_requires_grad({a})) return;
  SavedTensor s = which == Save::Input ? SavedTensor(a) : SavedTensor::output(out);
  record_differentiable(name, {a}, {out}, [name, &k, s, composed](const std::vector<Tensor>& g) {
    Tensor saved = s.get(name);
    if (GradMode::is_enabled()) return std::vector<Tensor>{composed(g[0].to(saved.dtype()), saved)};
    return std::vector<Tensor>{apply_grad(k, g[0], saved)};
  });
}

Tensor unary_op(UnaryKernel& k, UnaryGradKernel& gk, const char* op, const char* node, const Tensor& a, Out mode,
                Save which, Composed composed) {
  Tensor out = unary_forward(k, op, a, mode);
  record_unary(node, gk, a, out, which, composed);
  return out;
}

// The composed derivatives (Composed): x is the saved input, y the saved output.
Tensor d_exp(const Tensor& g, const Tensor& y) { return g * y; }
Tensor d_log(const Tensor& g, const Tensor& x) { return g / x; }
Tensor d_sqrt(const Tensor& g, const Tensor& y) { return g / (y * 2.0); }
Tensor d_rsqrt(const Tensor& g, const Tensor& y) { return g * (y * y * y) * -0.5; }
Tensor d_abs(const Tensor& g, const Tensor& x) { return g * sign(x); }
Tensor d_relu(const Tensor& g, const Tensor& y) { return g * gt(y, zeros_like(y)).to(y.dtype()); }
Tensor d_sigmoid(const Tensor& g, const Tensor& y) { return g * (y * (1.0 - y)); }
Tensor d_tanh(const Tensor& g, const Tensor& y) { return g * (1.0 - y * y); }
Tensor d_silu(const Tensor& g, const Tensor& x) {
  Tensor s = sigmoid(x);
  return g * (s * (1.0 + x * (1.0 - s)));
}
Tensor d_sin(const Tensor& g, const Tensor& x) { return g * cos(x); }
Tensor d_cos(const Tensor& g, const Tensor& x) { return -(g * sin(x)); }
Tensor d_erf(const Tensor& g, const Tensor& x) { return g * (exp(-(x * x)) * 1.1283791670955126); }  // 2 / sqrt(pi)
Tensor d_log1p(const Tensor& g, const Tensor& x) { return g / (x + 1.0); }
Tensor d_expm1(const Tensor& g, const Tensor& y) { return g * (y + 1.0); }
Tensor d_reciprocal(const Tensor& g, const Tensor& y) { return -(g * (y * y)); }
Tensor d_gelu(const Tensor& g, const Tensor& x) {  // Phi(x) + x phi(x)
  Tensor cdf = (erf(x * 0.70710678118654752) + 1.0) * 0.5;
  Tensor pdf = exp(x * x * -0.5) * 0.39894228040143268;  // 1 / sqrt(2 pi)
  return g * (cdf + x * pdf);
}
Tensor d_gelu_tanh(const Tensor& g, const Tensor& x) {  // y = x (1 + tanh(u)) / 2, u = k (x + c x^3)
  const double k = 0.79788456080286536, c = 0.044715;   // sqrt(2 / pi)
  Tensor t = tanh((x + x * x * x * c) * k);
  return g * ((t + 1.0) * 0.5 + x * (1.0 - t * t) * (x * x * (3 * c) + 1.0) * (0.5 * k));
}

// In-place unary op on `a` (which keeps its dtype). When the gradient needs the
// output, it is saved after the version bump; when it needs the input, a copy
// of the old value is saved, with its history. `gk` and `composed` are null
// for neg_, whose gradient is -g.
Tensor& unary_inplace(UnaryKernel& k, UnaryGradKernel* gk, const char* op, const char* node, Tensor& a, Out mode,
                      Save which, Composed composed) {
  WEFT_CHECK(a.defined(), op, ": undefined tensor argument");
  WEFT_CHECK(mode == Out::Keep || is_floating(a.dtype()), op,
             ": result type float32 can't be cast to the desired "
             "output type ",
             a.dtype());
  WEFT_CHECK(k.has(a.device().type, a.dtype()), op, ": not supported for dtype ", a.dtype());
  check_inplace(op, a);
  bool need = any_requires_grad({a});
  auto saved = std::make_shared<SavedTensor>();
  if (need && gk && which == Save::Input) *saved = SavedTensor::copy_of(a);
  k(a.device(), a.dtype(), a, a);
  // a backward that builds a graph uses `composed` (Note [double backward])
  record_inplace(
      node, a, {},
      [node, gk, saved, composed](const std::vector<Tensor>& g) {
        if (!gk) return std::vector<Tensor>{neg(g[0])};  // neg_
        Tensor s = saved->get(node);
        if (GradMode::is_enabled()) return std::vector<Tensor>{composed(g[0].to(s.dtype()), s)};
        return std::vector<Tensor>{apply_grad(*gk, g[0], s)};
      },
      /*differentiable=*/true);
  if (need && gk && which == Save::Output) *saved = SavedTensor::output(a);
  return a;
}

}  // namespace

Tensor neg(const Tensor& a) {
  Tensor out = unary_forward(neg_table(), "neg", a, Out::Keep);
  record_differentiable("NegBackward", {a}, {out},
                        [](const std::vector<Tensor>& g) { return std::vector<Tensor>{neg(g[0])}; });
  return out;
}

Tensor exp(const Tensor& a) {
  return unary_op(exp_table(), exp_backward_table(), "exp", "ExpBackward", a, Out::Float, Save::Output, d_exp);
}
Tensor log(const Tensor& a) {
  return unary_op(log_table(), log_backward_table(), "log", "LogBackward", a, Out::Float, Save::Input, d_log);
}
Tensor sqrt(const Tensor& a) {
  return unary_op(sqrt_table(), sqrt_backward_table(), "sqrt", "SqrtBackward", a, Out::Float, Save::Output, d_sqrt);
}
Tensor rsqrt(const Tensor& a) {
  return unary_op(rsqrt_table(), rsqrt_backward_table(), "rsqrt", "RsqrtBackward", a, Out::Float, Save::Output,
                  d_rsqrt);
}
Tensor abs(const Tensor& a) {
  return unary_op(abs_table(), abs_backward_table(), "abs", "AbsBackward", a, Out::Keep, Save::Input, d_abs);
}
Tensor relu(const Tensor& a) {
  return unary_op(relu_table(), relu_backward_table(), "relu", "ReluBackward", a, Out::Keep, Save::Output, d_relu);
}
Tensor sigmoid(const Tensor& a) {
  return unary_op(sigmoid_table(), sigmoid_backward_table(), "sigmoid", "SigmoidBackward", a, Out::Float, Save::Output,
                  d_sigmoid);
}
Tensor tanh(const Tensor& a) {
  return unary_op(tanh_table(), tanh_backward_table(), "tanh", "TanhBackward", a, Out::Float, Save::Output, d_tanh);
}
Tensor silu(const Tensor& a) {
  return unary_op(silu_table(), silu_backward_table(), "silu", "SiluBackward", a, Out::Float, Save::Input, d_silu);
}
Tensor gelu(const Tensor& a, GeluApproximation approximate) {
  if (approximate == GeluApproximation::Tanh)
    return unary_op(gelu_tanh_table(), gelu_tanh_backward_table(), "gelu", "GeluBackward", a, Out::Float, Save::Input,
                    d_gelu_tanh);
  return unary_op(gelu_table(), gelu_backward_table(), "gelu", "GeluBackward", a, Out::Float, Save::Input, d_gelu);
}

Tensor sin(const Tensor& a) {
  return unary_op(sin_table(), sin_backward_table(), "sin", "SinBackward", a, Out::Float, Save::Input, d_sin);
}
Tensor cos(const Tensor& a) {
  return unary_op(cos_table(), cos_backward_table(), "cos", "CosBackward", a, Out::Float, Save::Input, d_cos);
}
Tensor erf(const Tensor& a) {
  return unary_op(erf_table(), erf_backward_table(), "erf", "ErfBackward", a, Out::Float, Save::Input, d_erf);
}
Tensor log1p(const Tensor& a) {
  return unary_op(log1p_table(), log1p_backward_table(), "log1p", "Log1pBackward", a, Out::Float, Save::Input, d_log1p);
}
Tensor expm1(const Tensor& a) {
  return unary_op(expm1_table(), expm1_backward_table(), "expm1", "Expm1Backward", a, Out::Float, Save::Output,
                  d_expm1);
}
Tensor reciprocal(const Tensor& a) {
  return unary_op(reciprocal_table(), reciprocal_backward_table(), "reciprocal", "ReciprocalBackward", a, Out::Float,
                  Save::Output, d_reciprocal);
}

namespace {
// sign, floor, ceil, round: piecewise constant, so the gradient is zero.
Tensor zero_grad_op(UnaryKernel& k, const char* op, const char* node, const Tensor& a) {
  Tensor out = unary_forward(k, op, a, Out::Keep);
  record_differentiable(node, {a}, {out},
                        [](const std::vector<Tensor>& g) { return std::vector<Tensor>{zeros_like(g[0])}; });
  return out;
}
}  // namespace

Tensor sign(const Tensor& a) { return zero_grad_op(sign_table(), "sign", "SignBackward", a); }
Tensor floor(const Tensor& a) { return zero_grad_op(floor_table(), "floor", "FloorBackward", a); }
Tensor ceil(const Tensor& a) { return zero_grad_op(ceil_table(), "ceil", "CeilBackward", a); }
Tensor round(const Tensor& a) { return zero_grad_op(round_table(), "round", "RoundBackward", a); }

namespace {
// Result dtype of clamp: PyTorch's result_type of the tensor and the bounds.
DType clamp_dtype(const Tensor& a, const std::optional<Scalar>& lo, const std::optional<Scalar>& hi) {
  bool float_bound = (lo && lo->is_floating()) || (hi && hi->is_floating());
  return float_bound && !is_floating(a.dtype()) ? DType::Float32 : a.dtype();
}
// clamp's gradient: g where lo <= x <= hi. The kernel, or in a backward that
// builds a graph the same rule from recorded ops (Note [double backward]).
Tensor clamp_grad(const Tensor& g, const Tensor& x, const Scalar& l, const Scalar& h, bool hl, bool hh) {
  Tensor gx = g.to(x.dtype());
  if (GradMode::is_enabled()) {
    Tensor pass = ones(x.sizes(), {DType::Bool, x.device()});
    if (hl) pass = logical_and(pass, ge(x, scalar_tensor(l, x.options())));
    if (hh) pass = logical_and(pass, le(x, scalar_tensor(h, x.options())));
    return where(pass, gx, zeros_like(gx));
  }
  Tensor r = empty(x.sizes(), x.options());
  clamp_backward_table()(x.device(), x.dtype(), r, gx, x, l, h, hl, hh);
  return r;
}
void check_clamp_args(const char* op, const Tensor& a, const std::optional<Scalar>& lo,
                      const std::optional<Scalar>& hi) {
  WEFT_CHECK(a.defined(), op, ": undefined tensor argument");
  WEFT_CHECK(lo.has_value() || hi.has_value(), op, ": at least one of 'min' or 'max' must be given");
  WEFT_CHECK(a.dtype() != DType::Bool, op, ": not supported for dtype bool");
}
}  // namespace

Tensor clamp(const Tensor& a, std::optional<Scalar> lo, std::optional<Scalar> hi) {
  check_clamp_args("clamp", a, lo, hi);
  DType dt = clamp_dtype(a, lo, hi);
  Tensor x = a.detach().to(dt);
  Tensor out = empty(a.sizes(), {dt, a.device()});
  Scalar l = lo.value_or(Scalar(0)), h = hi.value_or(Scalar(0));
  bool hl = lo.has_value(), hh = hi.has_value();
  clamp_table()(a.device(), dt, out, x, l, h, hl, hh);
  if (any_requires_grad({a})) {
    SavedTensor s(a);
    record_differentiable("ClampBackward", {a}, {out}, [s, l, h, hl, hh](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{clamp_grad(g[0], s.get("ClampBackward"), l, h, hl, hh)};
    });
  }
  return out;
}

Tensor& clamp_(Tensor& a, std::optional<Scalar> lo, std::optional<Scalar> hi) {
  check_clamp_args("clamp_", a, lo, hi);
  DType dt = clamp_dtype(a, lo, hi);
  WEFT_CHECK(dt == a.dtype(), "clamp_: result type ", dt, " can't be cast to the desired output type ", a.dtype());
  check_inplace("clamp_", a);
  bool need = any_requires_grad({a});
  SavedTensor old = need ? SavedTensor::copy_of(a) : SavedTensor();
  Scalar l = lo.value_or(Scalar(0)), h = hi.value_or(Scalar(0));
  bool hl = lo.has_value(), hh = hi.has_value();
  clamp_table()(a.device(), a.dtype(), a, a, l, h, hl, hh);
  record_inplace(
      "ClampBackward", a, {},
      [old, l, h, hl, hh](const std::vector<Tensor>& g) {
        return std::vector<Tensor>{clamp_grad(g[0], old.get("ClampBackward"), l, h, hl, hh)};
      },
      /*differentiable=*/true);
  return a;
}

Tensor& neg_(Tensor& a) {
  WEFT_CHECK(!a.defined() || a.dtype() != DType::Bool, "neg_: not supported for dtype bool");
  return unary_inplace(neg_table(), nullptr, "neg_", "NegBackward", a, Out::Keep, Save::Output, nullptr);
}
Tensor& exp_(Tensor& a) {
  return unary_inplace(exp_table(), &exp_backward_table(), "exp_", "ExpBackward", a, Out::Float, Save::Output, d_exp);
}
Tensor& sqrt_(Tensor& a) {
  return unary_inplace(sqrt_table(), &sqrt_backward_table(), "sqrt_", "SqrtBackward", a, Out::Float, Save::Output,
                       d_sqrt);
}
Tensor& relu_(Tensor& a) {
  return unary_inplace(relu_table(), &relu_backward_table(), "relu_", "ReluBackward", a, Out::Keep, Save::Output,
                       d_relu);
}
Tensor& sigmoid_(Tensor& a) {
  return unary_inplace(sigmoid_table(), &sigmoid_backward_table(), "sigmoid_", "SigmoidBackward", a, Out::Float,
                       Save::Output, d_sigmoid);
}
Tensor& tanh_(Tensor& a) {
  return unary_inplace(tanh_table(), &tanh_backward_table(), "tanh_", "TanhBackward", a, Out::Float, Save::Output,
                       d_tanh);
}

}  // namespace weft
