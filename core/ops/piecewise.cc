// Piecewise activations (leaky_relu, softplus, elu) and value predicates
// (isnan, isinf, isfinite, nan_to_num, any, all), composed of comparisons,
// where and reductions, with PyTorch's semantics.
//
// Contract: the activations take floating tensors and differentiate through
// where (PyTorch's gradient at each kink). The predicates give bool tensors
// and no gradient; on integer tensors isnan and isinf are false and isfinite
// true everywhere. any / all treat nonzero (NaN included) as true, reduce over
// `dims` (all dims when empty) and give false / true for no elements.
// nan_to_num's gradient passes where the input is finite.
#include <cfloat>
#include <cmath>
#include <limits>

#include "core/ops.h"

namespace weft {
namespace {

// The largest finite value of a floating dtype.
double largest_finite(DType dt) {
  switch (dt) {
    case DType::Float64: return DBL_MAX;
    case DType::Float16: return 65504.0;
    case DType::BFloat16: return 3.3895313892515355e38;
    default: return FLT_MAX;
  }
}

}  // namespace

Tensor leaky_relu(const Tensor& a, double negative_slope) {
  WEFT_CHECK(a.defined(), "leaky_relu: undefined tensor argument");
  WEFT_CHECK(is_floating(a.dtype()), "leaky_relu: expected a floating dtype, got ", a.dtype());
  // (the gradient at 0 is negative_slope, as in PyTorch)
  return where(a > 0, a, a * negative_slope);
}

Tensor softplus(const Tensor& x, double beta, double threshold) {
  WEFT_CHECK(x.defined() && is_floating(x.dtype()), "softplus: expected a floating input");
  WEFT_CHECK(beta != 0, "softplus: beta must not be 0");
  // log(1 + exp(beta x)) / beta, and x itself where beta x > threshold
  Tensor bx = x * beta;
  // (clamp, not minimum: at bx == threshold the soft branch keeps its whole gradient)
  Tensor soft = log1p(exp(clamp(bx, std::nullopt, threshold))) / beta;
  return where(bx > threshold, x, soft);
}

Tensor elu(const Tensor& x, double alpha) {
  WEFT_CHECK(x.defined() && is_floating(x.dtype()), "elu: expected a floating input");
  // alpha (exp(x) - 1) at and below 0 (exp of the negative part only, so large x cannot
  // overflow; clamp keeps the whole gradient alpha at 0, where minimum would halve it)
  return where(x > 0, x, expm1(clamp(x, std::nullopt, 0.0)) * alpha);
}

Tensor isnan(const Tensor& a) {
  WEFT_CHECK(a.defined(), "isnan: undefined tensor argument");
  if (!is_floating(a.dtype())) return zeros(a.sizes(), {DType::Bool, a.device()});
  return ne(a.detach(), a.detach());  // NaN is the one value unequal to itself
}

Tensor isinf(const Tensor& a) {
  WEFT_CHECK(a.defined(), "isinf: undefined tensor argument");
  if (!is_floating(a.dtype())) return zeros(a.sizes(), {DType::Bool, a.device()});
  return abs(a.detach()) == std::numeric_limits<double>::infinity();
}

Tensor isfinite(const Tensor& a) {
  WEFT_CHECK(a.defined(), "isfinite: undefined tensor argument");
  if (!is_floating(a.dtype())) return ones(a.sizes(), {DType::Bool, a.device()});
  return logical_not(logical_or(isnan(a), isinf(a)));
}

Tensor nan_to_num(const Tensor& a, double nan, std::optional<double> posinf, std::optional<double> neginf) {
  WEFT_CHECK(a.defined(), "nan_to_num: undefined tensor argument");
  if (!is_floating(a.dtype())) return a.clone();
  // the dtype's largest and lowest finite values by default
  const double hi = posinf ? *posinf : largest_finite(a.dtype()), lo = neginf ? *neginf : -largest_finite(a.dtype());
  Tensor d = a.detach();
  Tensor is_nan = isnan(d), finite = logical_not(logical_or(is_nan, isinf(d)));
  Tensor r = where(is_nan, full_like(a, nan), where(d > 0, full_like(a, hi), full_like(a, lo)));
  return where(finite, a, r);  // the gradient passes where a is finite
}

Tensor any(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  WEFT_CHECK(a.defined(), "any: undefined tensor argument");
  return sum(ne(a.detach(), zeros({}, {a.dtype(), a.device()})), dims, keepdim) > 0;
}

Tensor all(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  WEFT_CHECK(a.defined(), "all: undefined tensor argument");
  return sum(eq(a.detach(), zeros({}, {a.dtype(), a.device()})), dims, keepdim) == 0;
}

}  // namespace weft
