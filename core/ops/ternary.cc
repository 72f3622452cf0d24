// In-place pointwise updates with several operands, used by optimizers:
// addcmul_ (a += v * t1 * t2), addcdiv_ (a += v * t1 / t2), lerp_ (a += w * (end - a)).
//
// Contract: the other operands broadcast to `a`'s shape (never the reverse) and
// their result type must be castable to a's dtype; `a` keeps its dtype. Each op
// bumps a's version counter and is autograd-aware (check_inplace/record_inplace).
#include "core/kernels/ternary.h"

#include "core/autograd_meta.h"
#include "core/cpu/loops.h"
#include "core/dispatch.h"
#include "core/ops.h"
#include "core/ops/elementwise_util.h"

namespace weft {

TernaryKernel& addcmul_table() {
  static TernaryKernel t("addcmul_");
  return t;
}
TernaryKernel& addcdiv_table() {
  static TernaryKernel t("addcdiv_");
  return t;
}
TernaryKernel& lerp_table() {
  static TernaryKernel t("lerp_");
  return t;
}

namespace {
template <typename T>
void cpu_addcmul(const Tensor& out, const Tensor& a, const Tensor& t1, const Tensor& t2, const Scalar& value) {
  using M = opmath_t<T>;
  M v = value.to<M>();
  cpu::elementwise<T, T, T, T>(out, {a, t1, t2}, [v](M x, M y, M z) -> M { return x + v * y * z; });
}
template <typename T>
void cpu_addcdiv(const Tensor& out, const Tensor& a, const Tensor& t1, const Tensor& t2, const Scalar& value) {
  using M = opmath_t<T>;
  M v = value.to<M>();
  cpu::elementwise<T, T, T, T>(out, {a, t1, t2}, [v](M x, M y, M z) -> M { return x + v * y / z; });
}
// t2 is unused (lerp has one other operand; the table signature is shared).
template <typename T>
void cpu_lerp(const Tensor& out, const Tensor& a, const Tensor& end, const Tensor&, const Scalar& weight) {
  using M = opmath_t<T>;
  M w = weight.to<M>();
  cpu::elementwise<T, T, T>(out, {a, end}, [w](M x, M e) -> M { return x + w * (e - x); });
}
WEFT_REGISTER_KERNEL(addcmul_table(), DeviceType::CPU, kNumericTypes, cpu_addcmul);
WEFT_REGISTER_KERNEL(addcdiv_table(), DeviceType::CPU, kFloatingTypes, cpu_addcdiv);
WEFT_REGISTER_KERNEL(lerp_table(), DeviceType::CPU, kFloatingTypes, cpu_lerp);

// Checks `other` can update `a` in place and returns it converted to a's dtype
// and expanded to a's shape.
Tensor prepare_operand(const char* op, const Tensor& a, const Tensor& other) {
  WEFT_CHECK(other.defined(), op, ": undefined tensor argument");
  detail::check_same_device(op, a, other);
  DType rt = detail::result_type(a, other);
  WEFT_CHECK(promote_types(rt, a.dtype()) == a.dtype(), op, ": result type ", rt,
             " can't be cast to the desired output type ", a.dtype());
  Shape shape = broadcast_shapes(op, a.sizes(), other.sizes());
  WEFT_CHECK(shape == a.sizes(), op, ": output with shape ", shape_str(a.sizes()),
             " doesn't match the broadcast shape ", shape_str(shape));
  NoGradGuard ng;
  return expand(other.detach().to(a.dtype()).to(a.device()), a.sizes());
}

Tensor scaled(const Tensor& t, const Scalar& v) {
  return v.to_double() == 1.0 ? t : mul(t, wrapped_scalar(v, DType::Float64, t.device()));
}

// addcmul_/addcdiv_ front end; `divide` selects addcdiv_.
Tensor& addc(TernaryKernel& k, const char* op, const char* node, bool divide, Tensor& a, const Tensor& t1,
             const Tensor& t2, const Scalar& value) {
  WEFT_CHECK(a.defined(), op, ": undefined tensor argument");
  WEFT_CHECK(!divide || is_floating(a.dtype()), op, ": integer division is not supported; got ", a.dtype());
  WEFT_CHECK(a.dtype() != DType::Bool, op, ": not supported for dtype bool");
  check_inplace(op, a, {t1, t2});
  Tensor e1 = prepare_operand(op, a, t1), e2 = prepare_operand(op, a, t2);
  bool need = any_requires_grad({a, t1, t2});
  SavedTensor s1 = need ? SavedTensor(t1) : SavedTensor(), s2 = need ? SavedTensor(t2) : SavedTensor();
  k(a.device(), a.dtype(), a, a, e1, e2, value);
  Shape z1 = t1.sizes(), z2 = t2.sizes();
  DType d1 = t1.dtype(), d2 = t2.dtype();
  record_inplace(
      node, a, {t1, t2},
      [=](const std::vector<Tensor>& g) {
        Tensor v1 = s1.get(node), v2 = s2.get(node);
        Tensor gv = scaled(g[0], value);
        Tensor g1, g2;
        if (divide) {
          g1 = div(gv, v2);                         // d/dt1 = v / t2
          g2 = neg(div(mul(gv, v1), mul(v2, v2)));  // d/dt2 = -v t1 / t2^2
        } else {
          g1 = mul(gv, v2);
          g2 = mul(gv, v1);
        }
        return std::vector<Tensor>{g[0], sum_to(g1, z1).to(d1), sum_to(g2, z2).to(d2)};
      },
      /*differentiable=*/true);
  return a;
}
}  // namespace

Tensor& addcmul_(Tensor& a, const Tensor& t1, const Tensor& t2, const Scalar& value) {
  return addc(addcmul_table(), "addcmul_", "AddcmulBackward", false, a, t1, t2, value);
}
Tensor& addcdiv_(Tensor& a, const Tensor& t1, const Tensor& t2, const Scalar& value) {
  return addc(addcdiv_table(), "addcdiv_", "AddcdivBackward", true, a, t1, t2, value);
}

Tensor& lerp_(Tensor& a, const Tensor& end, const Scalar& weight) {
  WEFT_CHECK(a.defined(), "lerp_: undefined tensor argument");
  WEFT_CHECK(is_floating(a.dtype()), "lerp_: expected a floating tensor, got ", a.dtype());
  check_inplace("lerp_", a, {end});
  Tensor e = prepare_operand("lerp_", a, end);
  lerp_table()(a.device(), a.dtype(), a, a, e, e, weight);
  Shape ze = end.sizes();
  DType de = end.dtype();
  double w = weight.to_double();
  record_inplace(
      "LerpBackward", a, {end},
      [ze, de, w](const std::vector<Tensor>& g) {
        // d/da = 1 - w, d/dend = w
        return std::vector<Tensor>{scaled(g[0], Scalar(1.0 - w)), sum_to(scaled(g[0], Scalar(w)), ze).to(de)};
      },
      /*differentiable=*/true);
  return a;
}

}  // namespace weft
