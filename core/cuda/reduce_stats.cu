// CUDA kernels of core/kernels/reduce_stats.h: logsumexp, norm, norm_backward and
// the abs-eq / sqrt helpers.
//
// Contract (matches core/ops/reduce_stats.cc): logsumexp runs two reductions over
// the (outer, r, inner) block: the max (NaN ignored; an infinite max shifts by 0),
// then log(sum exp(x - shift)) + shift with the sum in double. norm(p) accumulates
// |x| in double: p = 0 counts non-zeros, 1 sums, 2 sqrt of the sum of squares, +-inf
// the max / min |x| (NaN wins), otherwise (sum |x|^p)^(1/p). The tensor helpers are
// elementwise kernels (core/cuda/loops.cuh) on same-shape operands.
#include <cmath>

#include "core/cuda/allocator.h"
#include "core/cuda/red_reduce.cuh"
#include "core/kernels/reduce_stats.h"

namespace weft::cuda {
namespace {
using namespace red;

template <typename T>
struct MaxForLse {
  using M = opmath_t<T>;
  using Acc = M;
  M* out;
  __device__ Acc identity() const { return neg_inf<M>(); }
  __device__ Acc step(Acc a, M v, int64_t, int64_t) const { return v > a ? v : a; }
  __device__ Acc merge(Acc a, Acc b) const { return b > a ? b : a; }
  __device__ void write(int64_t o, Acc a) const { out[o] = dinf(a) ? M(0) : a; }
};
template <typename T>
struct LseOp {
  using M = opmath_t<T>;
  using Acc = double;
  T* out;
  const M* shift;
  __device__ Acc identity() const { return 0.0; }
  __device__ Acc step(Acc a, M x, int64_t, int64_t o) const { return a + static_cast<double>(dexp(x - shift[o])); }
  __device__ Acc merge(Acc a, Acc b) const { return a + b; }
  __device__ void write(int64_t o, Acc a) const { store<T>(out + o, static_cast<M>(::log(a) + shift[o])); }
};

Device out_device(const void* p) { return Device(DeviceType::CUDA, device_of_pointer(p, "CUDA reduction")); }

template <typename T>
void cuda_logsumexp(const ReduceArgs& a) {
  using M = opmath_t<T>;
  const int64_t n = a.g.outer * a.g.inner;
  if (n == 0) return;
  Device dev = out_device(a.out);
  Tensor shift = empty({n}, {std::is_same_v<M, double> ? DType::Float64 : DType::Float32, dev});
  const T* in = static_cast<const T*>(a.in);
  run_reduce(in, a.g, MaxForLse<T>{static_cast<M*>(shift.raw_data())}, dev);
  run_reduce(in, a.g, LseOp<T>{static_cast<T*>(a.out), static_cast<const M*>(shift.raw_data())}, dev);
}

enum NormKind { kZero = 0, kOne, kTwo, kInf, kNegInf, kGeneral };
int norm_kind(double p) {
  if (p == 0) return kZero;
  if (p == 1) return kOne;
  if (p == 2) return kTwo;
  if (std::isinf(p)) return p > 0 ? kInf : kNegInf;
  return kGeneral;
}

template <typename T, int Kind>
struct NormOp {
  using M = opmath_t<T>;
  using Acc = double;
  T* out;
  double p;
  double ident;
  __device__ Acc identity() const { return ident; }
  __device__ Acc step(Acc a, M x, int64_t, int64_t) const {
    const double v = ::fabs(static_cast<double>(x));
    if constexpr (Kind == kZero) return a + (v != 0.0 ? 1.0 : 0.0);
    else if constexpr (Kind == kOne) return a + v;
    else if constexpr (Kind == kTwo) return a + v * v;
    else if constexpr (Kind == kInf) return v > a || v != v ? v : a;
    else if constexpr (Kind == kNegInf) return v < a || v != v ? v : a;
    else return a + ::pow(v, p);
  }
  __device__ Acc merge(Acc a, Acc b) const {
    if constexpr (Kind == kInf) return b > a || b != b ? b : a;
    else if constexpr (Kind == kNegInf) return b < a || b != b ? b : a;
    else return a + b;
  }
  __device__ void write(int64_t o, Acc a) const {
    double r = a;
    if constexpr (Kind == kTwo) r = ::sqrt(a);
    else if constexpr (Kind == kGeneral) r = ::pow(a, 1.0 / p);
    store<T>(out + o, static_cast<M>(r));
  }
};

template <typename T, int Kind>
void norm_with(const ReduceArgs& a, Device dev) {
  const double ident = Kind == kNegInf ? std::numeric_limits<double>::infinity() : 0.0;
  run_reduce(static_cast<const T*>(a.in), a.g, NormOp<T, Kind>{static_cast<T*>(a.out), a.p, ident}, dev);
}

template <typename T>
void cuda_norm(const ReduceArgs& a) {
  if (a.g.outer * a.g.inner == 0) return;
  Device dev = out_device(a.out);
  switch (norm_kind(a.p)) {
    case kZero: norm_with<T, kZero>(a, dev); break;
    case kOne: norm_with<T, kOne>(a, dev); break;
    case kTwo: norm_with<T, kTwo>(a, dev); break;
    case kInf: norm_with<T, kInf>(a, dev); break;
    case kNegInf: norm_with<T, kNegInf>(a, dev); break;
    default: norm_with<T, kGeneral>(a, dev); break;
  }
}

template <typename M>
__device__ __forceinline__ M sgn(M v) {
  return v > M(0) ? M(1) : (v < M(0) ? M(-1) : M(0));
}
template <typename M>
struct NormBackwardF {
  double p;
  int kind;
  __device__ M operator()(M xv, M nv, M gv) const {
    if (p != p) return M(0);
    switch (kind) {
      case kZero: return M(0);
      case kOne: return gv * sgn(xv);
      case kTwo: return nv == M(0) ? M(0) : gv * xv / nv;
      case kInf: return dabs(xv) == nv ? gv * sgn(xv) : M(0);
      default:
        return nv == M(0) ? M(0)
                          : static_cast<M>(gv * sgn(xv) * ::pow(::fabs(static_cast<double>(xv)), p - 1) /
                                           ::pow(static_cast<double>(nv), p - 1));
    }
  }
};
template <typename T>
void cuda_norm_backward(const Tensor& gi, const Tensor& x, const Tensor& n, const Tensor& g, double p) {
  using M = opmath_t<T>;
  const int kind = std::isinf(p) ? kInf : norm_kind(p);
  elementwise<T, T, T, T>(gi, {x, n, g}, NormBackwardF<M>{p, kind});
}

template <typename M>
struct AbsEqF {
  __device__ M operator()(M xv, M nv) const { return dabs(xv) == nv ? M(1) : M(0); }
};
template <typename T>
void cuda_abs_eq(const Tensor& out, const Tensor& x, const Tensor& n) {
  elementwise<T, T, T>(out, {x, n}, AbsEqF<opmath_t<T>>{});
}

template <typename M>
struct SqrtF {
  __device__ M operator()(M x) const { return static_cast<M>(::sqrt(x)); }
};
template <typename T>
void cuda_std_sqrt(const Tensor& out, const Tensor& a) {
  elementwise<T, T>(out, {a}, SqrtF<opmath_t<T>>{});
}

WEFT_RED_REGISTER_FLOATING(logsumexp_table(), cuda_logsumexp);
WEFT_RED_REGISTER_FLOATING(norm_table(), cuda_norm);
WEFT_RED_REGISTER_FLOATING(norm_backward_table(), cuda_norm_backward);
WEFT_RED_REGISTER_FLOATING(abs_eq_table(), cuda_abs_eq);
WEFT_RED_REGISTER_FLOATING(std_sqrt_table(), cuda_std_sqrt);

}  // namespace
}  // namespace weft::cuda
