// Statistical and comparison reductions: var, std, logsumexp, norm, allclose,
// equal. (Part of the reductions in core/ops.h; the engine is in reduce_util.h.)
//
// Contract: var/std/norm need floating inputs; logsumexp promotes integers to
// float32 like PyTorch. var uses divisor max(0, N - correction) (0 gives inf/nan
// like PyTorch). logsumexp shifts by the max (infinite maxima shift by 0), so it
// never overflows. norm(p): p = 0 counts non-zeros, p = +-inf is max/min |x|.
#include "core/kernels/reduce_stats.h"

#include <cmath>
#include <memory>

#include "core/autograd_meta.h"
#include "core/cpu/loops.h"
#include "core/ops/elementwise_util.h"
#include "core/ops/reduce_util.h"

namespace weft {

ReduceTable& logsumexp_table() {
  static ReduceTable t("logsumexp");
  return t;
}
ReduceTable& norm_table() {
  static ReduceTable t("norm");
  return t;
}
NormBackwardKernel& norm_backward_table() {
  static NormBackwardKernel t("norm_backward");
  return t;
}
AbsEqKernel& abs_eq_table() {
  static AbsEqKernel t("norm_backward mask");
  return t;
}
StdSqrtKernel& std_sqrt_table() {
  static StdSqrtKernel t("std sqrt");
  return t;
}

using namespace reduce_detail;

namespace {

// ---- logsumexp ----
template <typename T>
struct LseOp {
  using M = opmath_t<T>;
  T* out;
  const M* shift;  // per output
  double identity() const { return 0.0; }
  double step(double a, T x, int64_t, int64_t o) const {
    return a + static_cast<double>(exp_m<M>(static_cast<M>(x) - shift[o]));
  }
  double merge(double a, double b) const { return a + b; }
  void write(int64_t o, double a) const { out[o] = static_cast<T>(static_cast<M>(std::log(a) + shift[o])); }
};
template <typename T>
struct MaxForLse {
  using M = opmath_t<T>;
  M* out;
  M identity() const { return -std::numeric_limits<M>::infinity(); }
  M step(M a, T x, int64_t, int64_t) const {
    M v = static_cast<M>(x);
    return v > a ? v : a;
  }
  M merge(M a, M b) const { return b > a ? b : a; }
  void write(int64_t o, M a) const { out[o] = std::isinf(a) ? M(0) : a; }
};
template <typename T>
void cpu_logsumexp(const ReduceArgs& a) {
  using M = opmath_t<T>;
  const T* in = static_cast<const T*>(a.in);
  std::unique_ptr<M[]> shift(new M[a.g.outer * a.g.inner]);
  run_reduce(in, a.g, MaxForLse<T>{shift.get()});
  run_reduce(in, a.g, LseOp<T>{static_cast<T*>(a.out), shift.get()});
}

// ---- norm ----
enum NormKind { kZero = 0, kOne, kTwo, kInf, kNegInf, kGeneral, kMask };
template <typename T, int Kind>
struct NormOp {
  using M = opmath_t<T>;
  T* out;
  double p;
  double identity() const { return Kind == kNegInf ? std::numeric_limits<double>::infinity() : 0.0; }
  double step(double a, T x, int64_t, int64_t) const {
    double v = std::abs(static_cast<double>(static_cast<M>(x)));
    if constexpr (Kind == kZero) return a + (v != 0.0 ? 1.0 : 0.0);
    else if constexpr (Kind == kOne) return a + v;
    else if constexpr (Kind == kTwo) return a + v * v;
    else if constexpr (Kind == kInf) return v > a || v != v ? v : a;
    else if constexpr (Kind == kNegInf) return v < a || v != v ? v : a;
    else return a + std::pow(v, p);
  }
  double merge(double a, double b) const {
    if constexpr (Kind == kInf) return b > a || b != b ? b : a;
    else if constexpr (Kind == kNegInf) return b < a || b != b ? b : a;
    else return a + b;
  }
  void write(int64_t o, double a) const {
    double r = a;
    if constexpr (Kind == kTwo) r = std::sqrt(a);
    else if constexpr (Kind == kGeneral) r = std::pow(a, 1.0 / p);
    out[o] = static_cast<T>(static_cast<M>(r));
  }
};
int norm_kind(double p) {
  if (p == 0) return kZero;
  if (p == 1) return kOne;
  if (p == 2) return kTwo;
  if (std::isinf(p)) return p > 0 ? kInf : kNegInf;
  return kGeneral;
}
template <typename T>
void cpu_norm(const ReduceArgs& a) {
  const T* in = static_cast<const T*>(a.in);
  T* out = static_cast<T*>(a.out);
  switch (norm_kind(a.p)) {
    case kZero: run_reduce(in, a.g, NormOp<T, kZero>{out, a.p}); break;
    case kOne: run_reduce(in, a.g, NormOp<T, kOne>{out, a.p}); break;
    case kTwo: run_reduce(in, a.g, NormOp<T, kTwo>{out, a.p}); break;
    case kInf: run_reduce(in, a.g, NormOp<T, kInf>{out, a.p}); break;
    case kNegInf: run_reduce(in, a.g, NormOp<T, kNegInf>{out, a.p}); break;
    default: run_reduce(in, a.g, NormOp<T, kGeneral>{out, a.p}); break;
  }
}
// d norm / dx times g, elementwise over x with the norm n and g broadcast to x.
// kind kInf/kNegInf gives g*sign(x) at the extremum (caller divides by the tie
// count); kMask gives 1 where |x| == n.
template <typename T>
void cpu_norm_backward(const Tensor& gi, const Tensor& x, const Tensor& n, const Tensor& g, double p) {
  using M = opmath_t<T>;
  const int kind = std::isinf(p) ? kInf : norm_kind(p);
  if constexpr (!std::is_floating_point_v<M>) return;
  else {
    auto sgn = [](M v) { return v > M(0) ? M(1) : (v < M(0) ? M(-1) : M(0)); };
    cpu::elementwise<T, T, T, T>(gi, {x, n, g}, [=](M xv, M nv, M gv) -> M {
      if (p != p) return M(0);
      switch (kind) {
        case kZero: return M(0);
        case kOne: return gv * sgn(xv);
        case kTwo: return nv == M(0) ? M(0) : gv * xv / nv;
        case kInf: return std::abs(xv) == nv ? gv * sgn(xv) : M(0);
        default:
          return nv == M(0) ? M(0)
                            : static_cast<M>(gv * sgn(xv) * std::pow(std::abs(static_cast<double>(xv)), p - 1) /
                                             std::pow(static_cast<double>(nv), p - 1));
      }
    });
  }
}
template <typename T>
void cpu_abs_eq_mask(const Tensor& out, const Tensor& x, const Tensor& n) {
  using M = opmath_t<T>;
  cpu::elementwise<T, T, T>(out, {x, n}, [](M xv, M nv) { return std::abs(xv) == nv ? M(1) : M(0); });
}
template <typename T>
void cpu_sqrt(const Tensor& out, const Tensor& a) {
  using M = opmath_t<T>;
  cpu::elementwise<T, T>(out, {a}, [](M x) { return std::sqrt(x); });
}

WEFT_REGISTER_KERNEL(logsumexp_table(), DeviceType::CPU, kFloatingTypes, cpu_logsumexp);
WEFT_REGISTER_KERNEL(norm_table(), DeviceType::CPU, kFloatingTypes, cpu_norm);
WEFT_REGISTER_KERNEL(norm_backward_table(), DeviceType::CPU, kFloatingTypes, cpu_norm_backward);
WEFT_REGISTER_KERNEL(abs_eq_table(), DeviceType::CPU, kFloatingTypes, cpu_abs_eq_mask);
WEFT_REGISTER_KERNEL(std_sqrt_table(), DeviceType::CPU, kFloatingTypes, cpu_sqrt);

// sqrt with backward g / (2 sqrt(x)); used by std.
Tensor sqrt_for_std(const Tensor& v) {
  Tensor out = empty(v.sizes(), v.options());
  std_sqrt_table()(v.device(), v.dtype(), out, v.detach());
  if (any_requires_grad({v})) {
    SavedTensor so = SavedTensor::output(out);
    record_differentiable("StdBackward", {v}, {out}, [so](const std::vector<Tensor>& g) {
      Tensor o = so.get("StdBackward");
      return std::vector<Tensor>{div(g[0], mul(o, wrapped_scalar(2.0, o.dtype(), o.device())))};
    });
  }
  return out;
}

ReduceArgs plan_args(const ReducePlan& p, void* out, double param) {
  ReduceArgs a;
  a.in = p.in.raw_data();
  a.g = p.g;
  a.out = out;
  a.p = param;
  return a;
}

}  // namespace

Tensor var(const Tensor& a, const std::vector<int64_t>& dims, int64_t correction, bool keepdim) {
  WEFT_CHECK(is_floating(a.dtype()), "var: input dtype ", a.dtype(),
             " is not floating point; var and std need a floating input");
  std::vector<int64_t> w = wrap_dims("var", dims, a.dim());
  int64_t n = 1;
  for (int64_t d : w) n *= a.size(d);
  Tensor mu = mean(a, w, true);
  Tensor dev = sub(a, mu);
  Tensor ss = sum(mul(dev, dev), w, keepdim);
  // Note [var's corrected two-pass]: mu is rounded to a's dtype, so every
  // deviation carries the same bias b (up to half an ulp of the mean), which
  // adds n b^2 to the sum of squares: for float32 data of mean 1e4 and spread
  // 0.01 a relative error of 2e-3. Subtracting (sum of deviations)^2 / n
  // removes it exactly (the corrected two-pass algorithm of Chan, Golub and
  // LeVeque), and the deviations themselves are exact (Sterbenz), so the
  // variance keeps float32's precision (PyTorch's, which keeps the mean in
  // double); the gradient is unchanged, the correction's being zero.
  Tensor sd = sum(dev, w, keepdim);
  ss = sub(ss, div(mul(sd, sd), wrapped_scalar(static_cast<double>(std::max<int64_t>(n, 1)), sd.dtype(), sd.device())));
  double divisor = std::max<double>(0.0, static_cast<double>(n - correction));
  return div(ss, wrapped_scalar(divisor, ss.dtype(), ss.device()));
}

Tensor std(const Tensor& a, const std::vector<int64_t>& dims, int64_t correction, bool keepdim) {
  WEFT_CHECK(is_floating(a.dtype()), "std: input dtype ", a.dtype(),
             " is not floating point; var and std need a floating input");
  return sqrt_for_std(var(a, dims, correction, keepdim));
}

Tensor logsumexp(const Tensor& a_in, const std::vector<int64_t>& dims, bool keepdim) {
  Tensor a = is_floating(a_in.dtype()) ? a_in : a_in.to(DType::Float32);
  ReducePlan p = make_plan("logsumexp", a, dims, keepdim);
  Tensor raw = empty({p.out_numel()}, a.options());
  logsumexp_table()(a.device(), a.dtype(), plan_args(p, raw.raw_data(), 0.0));
  Tensor out = p.finish(raw);
  if (any_requires_grad({a})) {
    SavedTensor sx(a), so = SavedTensor::output(out);
    Shape keep = p.keep_shape;
    record_differentiable("LogsumexpBackward", {a}, {out}, [sx, so, keep](const std::vector<Tensor>& g) {
      Tensor x = sx.get("LogsumexpBackward");
      Tensor d = sub(x, so.get("LogsumexpBackward").reshape(keep));
      // exp recorded when the backward builds a graph (Note [double backward])
      Tensor e = GradMode::is_enabled() ? exp(d) : exp_nograd(d);
      return std::vector<Tensor>{mul(e, g[0].reshape(keep))};
    });
  }
  return out;
}

Tensor norm(const Tensor& a, double pv, const std::vector<int64_t>& dims, bool keepdim) {
  WEFT_CHECK(is_floating(a.dtype()), "norm: input dtype ", a.dtype(),
             " is not floating point; norm needs a floating input");
  ReducePlan p = make_plan("norm", a, dims, keepdim);
  WEFT_CHECK(p.g.r > 0 || p.out_numel() == 0 || (pv >= 0 && !std::isinf(pv)), "norm: cannot take the ", pv,
             "-norm over a zero-size dimension (input shape ", shape_str(a.sizes()), ")");
  Tensor raw = empty({p.out_numel()}, a.options());
  norm_table()(a.device(), a.dtype(), plan_args(p, raw.raw_data(), pv));
  Tensor out = p.finish(raw);
  if (any_requires_grad({a})) {
    SavedTensor sx(a), so(out);
    Shape keep = p.keep_shape;
    std::vector<int64_t> rdims = p.dims;
    FunctionNode::Backward backward = [sx, so, keep, pv, rdims](const std::vector<Tensor>& g) {
      Tensor x = sx.get("NormBackward");
      Tensor n = expand(so.get("NormBackward").reshape(keep), x.sizes());
      Tensor ge = expand(g[0].reshape(keep), x.sizes());
      Tensor gi = empty(x.sizes(), x.options());
      norm_backward_table()(x.device(), x.dtype(), gi, x, n, ge, pv);
      if (std::isinf(pv)) {
        Tensor mask = empty(x.sizes(), x.options());
        abs_eq_table()(x.device(), x.dtype(), mask, x, n);
        Tensor count = rdims.empty() ? ones(keep, x.options()) : sum(mask, rdims, true);
        gi = div(gi, count);
      }
      return std::vector<Tensor>{gi};
    };
    // Note [composite double backward]: (sum |x|^p)^(1/p); the largest
    // (smallest) |x| for p = inf (-inf), ties sharing as the kernel's; the
    // count of nonzeros, piecewise constant, for p = 0
    record_function(
        "NormBackward", {a}, {out}, std::move(backward), [pv, rdims, keepdim](const std::vector<Tensor>& in) {
          const Tensor& x = in[0];
          if (std::isinf(pv))
            return std::vector<Tensor>{pv > 0 ? amax(abs(x), rdims, keepdim) : amin(abs(x), rdims, keepdim)};
          if (pv == 0.0) return std::vector<Tensor>{sum(ne(x, zeros_like(x)).to(x.dtype()), rdims, keepdim)};
          const Tensor s = sum(pv == 2.0 ? x * x : pow(abs(x), pv), rdims, keepdim);
          return std::vector<Tensor>{pv == 2.0 ? sqrt(s) : pow(s, 1.0 / pv)};
        });
  }
  return out;
}

namespace {
// Both tensors broadcast to a common shape and converted to double / int64.
template <typename F>
bool all_pairs(const char* op, const Tensor& a, const Tensor& b, bool as_int, const F& f) {
  Shape s = broadcast_shapes(op, a.sizes(), b.sizes());
  DType dt = as_int ? DType::Int64 : DType::Float64;
  Tensor x = expand(a.detach().to(dt), s).contiguous(), y = expand(b.detach().to(dt), s).contiguous();
  const int64_t n = x.numel();
  if (as_int) {
    const int64_t *px = x.data_ptr<int64_t>(), *py = y.data_ptr<int64_t>();
    for (int64_t i = 0; i < n; ++i)
      if (!f(static_cast<double>(px[i]), static_cast<double>(py[i]), px[i] == py[i])) return false;
  } else {
    const double *px = x.data_ptr<double>(), *py = y.data_ptr<double>();
    for (int64_t i = 0; i < n; ++i)
      if (!f(px[i], py[i], px[i] == py[i])) return false;
  }
  return true;
}
}  // namespace

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol) {
  detail::check_devices("allclose", {a, b});
  WEFT_CHECK(a.device() == b.device(), "allclose: tensors on different devices");
  return all_pairs("allclose", a, b, false, [rtol, atol](double x, double y, bool same) {
    if (same) return true;  // equal values, including equal infinities
    if (std::isnan(x) || std::isnan(y) || std::isinf(x) || std::isinf(y)) return false;
    return std::abs(x - y) <= atol + rtol * std::abs(y);
  });
}

bool equal(const Tensor& a, const Tensor& b) {
  detail::check_devices("equal", {a, b});
  WEFT_CHECK(a.device() == b.device(), "equal: tensors on different devices");
  if (a.sizes() != b.sizes()) return false;
  DType dt = promote_types(a.dtype(), b.dtype());
  return all_pairs("equal", a, b, !is_floating(dt), [](double, double, bool same) { return same; });
}

}  // namespace weft
