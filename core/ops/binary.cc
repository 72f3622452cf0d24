// Binary elementwise ops with broadcasting: add, sub, mul, div, pow, maximum,
// minimum (+ in-place forms and operators). Each op: one kernel table, one CPU
// kernel, one backward. Inputs are promoted to the PyTorch result type (div and
// pow with a floating scalar exponent give float32 for integral inputs).
#include "core/kernels/binary.h"

#include <cmath>

#include "core/autograd_meta.h"
#include "core/cpu/loops.h"
#include "core/dispatch.h"
#include "core/ops.h"
#include "core/ops/elementwise_util.h"

namespace weft {

#define WEFT_BINARY_TABLE(name)   \
  BinaryKernel& name##_table() {  \
    static BinaryKernel t(#name); \
    return t;                     \
  }
WEFT_BINARY_TABLE(add)
WEFT_BINARY_TABLE(mul)
WEFT_BINARY_TABLE(div)
WEFT_BINARY_TABLE(pow)
WEFT_BINARY_TABLE(maximum)
WEFT_BINARY_TABLE(minimum)

PowScalarKernel& pow_scalar_table() {
  static PowScalarKernel t("pow");
  return t;
}
MinMaxGradKernel& maximum_backward_table() {
  static MinMaxGradKernel t("maximum_backward");
  return t;
}
MinMaxGradKernel& minimum_backward_table() {
  static MinMaxGradKernel t("minimum_backward");
  return t;
}

namespace {

template <typename T>
void cpu_add(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha) {
  using M = opmath_t<T>;
  if constexpr (std::is_same_v<T, bool>) {
    cpu::elementwise<T, T, T>(out, {a, b}, [](bool x, bool y) { return x || y; });
  } else {
    M al = alpha.to<M>();
    if (al == M(1)) cpu::elementwise<T, T, T>(out, {a, b}, [](M x, M y) { return x + y; });
    else cpu::elementwise<T, T, T>(out, {a, b}, [al](M x, M y) { return x + al * y; });
  }
}
template <typename T>
void cpu_mul(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar&) {
  using M = opmath_t<T>;
  if constexpr (std::is_same_v<T, bool>) cpu::elementwise<T, T, T>(out, {a, b}, [](bool x, bool y) { return x && y; });
  else cpu::elementwise<T, T, T>(out, {a, b}, [](M x, M y) { return x * y; });
}
template <typename T>
void cpu_div(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar&) {
  using M = opmath_t<T>;
  cpu::elementwise<T, T, T>(out, {a, b}, [](M x, M y) { return x / y; });
}

// Integer power by squaring; negative exponents follow PyTorch (1, -1 -> +-1, else 0).
template <typename M>
inline M int_pow(M base, M e) {
  if constexpr (std::is_signed_v<M>) {
    if (e < 0) {
      if (base == 1) return 1;
      if (base == -1) return (e & 1) ? -1 : 1;
      return 0;
    }
  }
  M r = 1;
  while (e) {
    if (e & 1) r = static_cast<M>(r * base);
    base = static_cast<M>(base * base);
    e = static_cast<M>(e >> 1);
  }
  return r;
}
template <typename T>
void cpu_pow(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar&) {
  using M = opmath_t<T>;
  if constexpr (std::is_integral_v<M>) cpu::elementwise<T, T, T>(out, {a, b}, [](M x, M y) { return int_pow(x, y); });
  else cpu::elementwise<T, T, T>(out, {a, b}, [](M x, M y) { return std::pow(x, y); });
}
template <typename T>
void cpu_pow_scalar(const Tensor& out, const Tensor& a, const Scalar& es) {
  using M = opmath_t<T>;
  if constexpr (std::is_integral_v<M>) {
    M e = es.to<M>();
    cpu::elementwise<T, T>(out, {a}, [e](M x) { return int_pow(x, e); });
  } else {
    M e = es.to<M>();
    // common exponents get exact, vectorisable forms
    if (e == M(2)) cpu::elementwise<T, T>(out, {a}, [](M x) { return x * x; });
    else if (e == M(3)) cpu::elementwise<T, T>(out, {a}, [](M x) { return x * x * x; });
    else if (e == M(1)) cpu::elementwise<T, T>(out, {a}, [](M x) { return x; });
    else if (e == M(0.5)) cpu::elementwise<T, T>(out, {a}, [](M x) { return std::sqrt(x); });
    else if (e == M(-1)) cpu::elementwise<T, T>(out, {a}, [](M x) { return M(1) / x; });
    else cpu::elementwise<T, T>(out, {a}, [e](M x) { return std::pow(x, e); });
  }
}
// NaN propagates (like PyTorch's maximum/minimum).
template <typename M>
inline bool is_nan_v(M x) {
  if constexpr (std::is_floating_point_v<M>) return x != x;
  else return false;
}
template <typename T>
void cpu_maximum(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar&) {
  using M = opmath_t<T>;
  cpu::elementwise<T, T, T>(out, {a, b}, [](M x, M y) { return is_nan_v(x) ? x : is_nan_v(y) ? y : (x > y ? x : y); });
}
template <typename T>
void cpu_minimum(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar&) {
  using M = opmath_t<T>;
  cpu::elementwise<T, T, T>(out, {a, b}, [](M x, M y) { return is_nan_v(x) ? x : is_nan_v(y) ? y : (x < y ? x : y); });
}
template <typename T>
void cpu_maximum_backward(const Tensor& out, const Tensor& g, const Tensor& a, const Tensor& b) {
  using M = opmath_t<T>;
  cpu::elementwise<T, T, T, T>(out, {g, a, b}, [](M gv, M x, M y) { return x > y ? gv : x == y ? gv * M(0.5) : M(0); });
}
template <typename T>
void cpu_minimum_backward(const Tensor& out, const Tensor& g, const Tensor& a, const Tensor& b) {
  using M = opmath_t<T>;
  cpu::elementwise<T, T, T, T>(out, {g, a, b}, [](M gv, M x, M y) { return x < y ? gv : x == y ? gv * M(0.5) : M(0); });
}

WEFT_REGISTER_KERNEL(pow_table(), DeviceType::CPU, kNumericTypes, cpu_pow);
WEFT_REGISTER_KERNEL(pow_scalar_table(), DeviceType::CPU, kNumericTypes, cpu_pow_scalar);
WEFT_REGISTER_KERNEL(maximum_table(), DeviceType::CPU, kAllTypes, cpu_maximum);
WEFT_REGISTER_KERNEL(minimum_table(), DeviceType::CPU, kAllTypes, cpu_minimum);
WEFT_REGISTER_KERNEL(maximum_backward_table(), DeviceType::CPU, kFloatingTypes, cpu_maximum_backward);
WEFT_REGISTER_KERNEL(minimum_backward_table(), DeviceType::CPU, kFloatingTypes, cpu_minimum_backward);
WEFT_REGISTER_KERNEL(add_table(), DeviceType::CPU, kAllTypes, cpu_add);
WEFT_REGISTER_KERNEL(mul_table(), DeviceType::CPU, kAllTypes, cpu_mul);
WEFT_REGISTER_KERNEL(div_table(), DeviceType::CPU, kFloatingTypes, cpu_div);

// Runs `table` out-of-place with broadcasting and dtype promotion.
Tensor binary_op(BinaryKernel& table, const char* op, const Tensor& a, const Tensor& b, const Scalar& alpha,
                 DType compute) {
  Tensor ea, eb;
  Shape shape = detail::prepare_binary(op, a, b, compute, ea, eb);
  Tensor out = empty(shape, {compute, ea.device()});
  table(out.device(), compute, out, ea, eb, alpha);
  return out;
}

// Runs `table` writing into `a` (which must already have the broadcast shape).
void binary_inplace(BinaryKernel& table, const char* op, Tensor& a, const Tensor& b, const Scalar& alpha) {
  check_inplace(op, a, {b});
  DType rt = detail::result_type(a, b);
  WEFT_CHECK(promote_types(rt, a.dtype()) == a.dtype(), op, ": result type ", rt,
             " can't be cast to the desired output type ", a.dtype());
  Shape shape = broadcast_shapes(op, a.sizes(), b.sizes());
  WEFT_CHECK(shape == a.sizes(), op, ": output with shape ", shape_str(a.sizes()),
             " doesn't match the broadcast shape ", shape_str(shape));
  Tensor ea, eb;
  detail::prepare_binary(op, a, b, a.dtype(), ea, eb);
  table(a.device(), a.dtype(), a, ea, eb, alpha);
}

DType div_type(const Tensor& a, const Tensor& b) {
  DType t = detail::result_type(a, b);
  return is_floating(t) ? t : DType::Float32;
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  Tensor out = binary_op(add_table(), "add", a, b, alpha, detail::result_type(a, b));
  Shape sa = a.sizes(), sb = b.sizes();
  record_differentiable("AddBackward", {a, b}, {out}, [sa, sb, alpha](const std::vector<Tensor>& g) {
    Tensor gb = alpha.to<double>() == 1.0 ? g[0] : mul(g[0], wrapped_scalar(alpha, g[0].dtype(), g[0].device()));
    return std::vector<Tensor>{sum_to(g[0], sa), sum_to(gb, sb)};
  });
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha) { return add(a, b, Scalar(-alpha.to_double())); }

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = binary_op(mul_table(), "mul", a, b, 1, detail::result_type(a, b));
  if (any_requires_grad({a, b})) {
    SavedTensor save_a = b.requires_grad() ? SavedTensor(a) : SavedTensor();
    SavedTensor save_b = a.requires_grad() ? SavedTensor(b) : SavedTensor();
    Shape za = a.sizes(), zb = b.sizes();
    record_differentiable("MulBackward", {a, b}, {out}, [save_a, save_b, za, zb](const std::vector<Tensor>& g) {
      Tensor ga, gb;
      if (save_b.defined()) ga = sum_to(mul(g[0], save_b.get("MulBackward")), za);
      if (save_a.defined()) gb = sum_to(mul(g[0], save_a.get("MulBackward")), zb);
      return std::vector<Tensor>{ga, gb};
    });
  }
  return out;
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = binary_op(div_table(), "div", a, b, 1, div_type(a, b));
  if (any_requires_grad({a, b})) {
    SavedTensor save_a(a), save_b(b);
    Shape za = a.sizes(), zb = b.sizes();
    record_differentiable("DivBackward", {a, b}, {out}, [save_a, save_b, za, zb](const std::vector<Tensor>& g) {
      Tensor bv = save_b.get("DivBackward");
      Tensor ga = sum_to(div(g[0], bv), za);
      Tensor gb = sum_to(neg(div(mul(g[0], save_a.get("DivBackward")), mul(bv, bv))), zb);
      return std::vector<Tensor>{ga, gb};
    });
  }
  return out;
}

Tensor pow(const Tensor& a, const Tensor& b) {
  DType dt = detail::result_type(a, b);
  WEFT_CHECK(dt != DType::Bool, "pow: not supported for dtype bool");
  Tensor out = binary_op(pow_table(), "pow", a, b, 1, dt);
  if (any_requires_grad({a, b})) {
    SavedTensor save_a(a), save_b(b), save_out = SavedTensor::output(out);
    Shape za = a.sizes(), zb = b.sizes();
    DType ta = a.dtype(), tb = b.dtype();
    bool need_a = a.requires_grad(), need_b = b.requires_grad();
    record_differentiable("PowBackward", {a, b}, {out}, [=](const std::vector<Tensor>& g) {
      Tensor av = save_a.get("PowBackward"), bv = save_b.get("PowBackward");
      Tensor ga, gb;
      // d/da = b * a^(b-1);  d/db = a^b * log(a), taken as 0 where a == 0 and b >= 0
      if (need_a) ga = sum_to(mul(g[0], mul(bv, pow(av, bv - 1))), za).to(ta);
      if (need_b) {
        Tensor zero = wrapped_scalar(0, DType::Float32, g[0].device());
        Tensor d = mul(save_out.get("PowBackward"), log(av));
        d = where(logical_and(eq(av, zero), ge(bv, zero)), zero, d);
        gb = sum_to(mul(g[0], d), zb).to(tb);
      }
      return std::vector<Tensor>{ga, gb};
    });
  }
  return out;
}

Tensor pow(const Tensor& a, const Scalar& e) {
  WEFT_CHECK(a.defined(), "pow: undefined tensor argument");
  WEFT_CHECK(a.dtype() != DType::Bool, "pow: not supported for dtype bool");
  DType dt = e.is_floating() && !is_floating(a.dtype()) ? DType::Float32 : a.dtype();
  WEFT_CHECK(is_floating(dt) || e.to_int() >= 0, "pow: integers to negative integer powers are not allowed (",
             a.dtype(), " tensor, exponent ", e, ")");
  Tensor x = a.detach().to(dt);
  Tensor out = empty(a.sizes(), {dt, a.device()});
  pow_scalar_table()(a.device(), dt, out, x, e);
  if (any_requires_grad({a})) {
    SavedTensor save_a(a);
    record_differentiable("PowBackward", {a}, {out}, [save_a, e](const std::vector<Tensor>& g) {
      Tensor av = save_a.get("PowBackward");
      double ed = e.to_double();
      if (ed == 0.0) return std::vector<Tensor>{zeros_like(av)};
      Tensor d = ed == 1.0 ? g[0] : mul(g[0], pow(av, Scalar(ed - 1.0)));
      if (ed != 1.0) d = mul(d, wrapped_scalar(ed, DType::Float64, d.device()));
      return std::vector<Tensor>{d.to(av.dtype())};
    });
  }
  return out;
}

namespace {
// maximum/minimum front end: `table` picks the winner, `grad` its gradient
// share; `wins` (gt or lt) the same share as recorded ops, for a backward that
// builds a graph (Note [double backward]): all of g to the winner, half to each
// on a tie, none to a NaN's rival, as the kernels.
using Compare = Tensor (*)(const Tensor&, const Tensor&);
Tensor min_max(BinaryKernel& table, MinMaxGradKernel& grad, Compare wins, const char* op, const char* node,
               const Tensor& a, const Tensor& b) {
  DType dt = detail::result_type(a, b);
  Tensor out = binary_op(table, op, a, b, 1, dt);
  if (any_requires_grad({a, b})) {
    SavedTensor save_a(a), save_b(b);
    Shape za = a.sizes(), zb = b.sizes();
    DType ta = a.dtype(), tb = b.dtype();
    record_differentiable(node, {a, b}, {out}, [=, &grad](const std::vector<Tensor>& g) {
      if (GradMode::is_enabled()) {
        Tensor av = save_a.get(node), bv = save_b.get(node), gg = g[0].to(dt);
        Tensor tie = eq(av, bv).to(dt) * 0.5;
        Tensor ga = gg * (wins(av, bv).to(dt) + tie), gb = gg * (wins(bv, av).to(dt) + tie);
        return std::vector<Tensor>{sum_to(ga, za).to(ta), sum_to(gb, zb).to(tb)};
      }
      Tensor ea, eb;
      Shape shape = detail::prepare_binary(node, save_a.get(node), save_b.get(node), dt, ea, eb);
      Tensor gg = g[0].to(dt);
      Tensor ga = empty(shape, {dt, gg.device()}), gb = empty(shape, {dt, gg.device()});
      grad(gg.device(), dt, ga, gg, ea, eb);
      grad(gg.device(), dt, gb, gg, eb, ea);
      return std::vector<Tensor>{sum_to(ga, za).to(ta), sum_to(gb, zb).to(tb)};
    });
  }
  return out;
}
}  // namespace

Tensor maximum(const Tensor& a, const Tensor& b) {
  return min_max(maximum_table(), maximum_backward_table(), gt, "maximum", "MaximumBackward", a, b);
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  return min_max(minimum_table(), minimum_backward_table(), lt, "minimum", "MinimumBackward", a, b);
}

Tensor& add_(Tensor& a, const Tensor& b, const Scalar& alpha) {
  binary_inplace(add_table(), "add_", a, b, alpha);
  Shape sb = b.sizes();
  record_inplace(
      "AddBackward", a, {b},
      [sb, alpha](const std::vector<Tensor>& g) {
        Tensor gb = alpha.to<double>() == 1.0 ? g[0] : mul(g[0], wrapped_scalar(alpha, g[0].dtype(), g[0].device()));
        return std::vector<Tensor>{g[0], sum_to(gb, sb)};
      },
      /*differentiable=*/true);
  return a;
}

Tensor& sub_(Tensor& a, const Tensor& b, const Scalar& alpha) { return add_(a, b, Scalar(-alpha.to_double())); }

Tensor& mul_(Tensor& a, const Tensor& b) {
  bool need = any_requires_grad({a, b});
  SavedTensor old_a = need ? SavedTensor::copy_of(a) : SavedTensor();
  SavedTensor save_b = need ? SavedTensor(b) : SavedTensor();
  binary_inplace(mul_table(), "mul_", a, b, 1);
  Shape sb = b.sizes();
  record_inplace(
      "MulBackward", a, {b},
      [old_a, save_b, sb](const std::vector<Tensor>& g) {
        return std::vector<Tensor>{mul(g[0], save_b.get("MulBackward")),
                                   sum_to(mul(g[0], old_a.get("MulBackward")), sb)};
      },
      /*differentiable=*/true);
  return a;
}

Tensor& div_(Tensor& a, const Tensor& b) {
  WEFT_CHECK(is_floating(a.dtype()), "div_: in-place true division needs a floating tensor, got ", a.dtype());
  bool need = any_requires_grad({a, b});
  SavedTensor old_a = need ? SavedTensor::copy_of(a) : SavedTensor();
  SavedTensor save_b = need ? SavedTensor(b) : SavedTensor();
  binary_inplace(div_table(), "div_", a, b, 1);
  Shape sb = b.sizes();
  record_inplace(
      "DivBackward", a, {b},
      [old_a, save_b, sb](const std::vector<Tensor>& g) {
        Tensor bv = save_b.get("DivBackward");
        return std::vector<Tensor>{div(g[0], bv),
                                   sum_to(neg(div(mul(g[0], old_a.get("DivBackward")), mul(bv, bv))), sb)};
      },
      /*differentiable=*/true);
  return a;
}

// ---- operators ----
namespace {
Tensor wrap(const Scalar& s, const Tensor& like) { return detail::wrap_scalar(s, like); }
}  // namespace
Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& a) { return neg(a); }
Tensor operator+(const Tensor& a, const Scalar& b) { return add(a, wrap(b, a)); }
Tensor operator-(const Tensor& a, const Scalar& b) { return sub(a, wrap(b, a)); }
Tensor operator*(const Tensor& a, const Scalar& b) { return mul(a, wrap(b, a)); }
Tensor operator/(const Tensor& a, const Scalar& b) { return div(a, wrap(b, a)); }
Tensor operator+(const Scalar& a, const Tensor& b) { return add(wrap(a, b), b); }
Tensor operator-(const Scalar& a, const Tensor& b) { return sub(wrap(a, b), b); }
Tensor operator*(const Scalar& a, const Tensor& b) { return mul(wrap(a, b), b); }
Tensor operator/(const Scalar& a, const Tensor& b) { return div(wrap(a, b), b); }

}  // namespace weft
