// Comparisons (eq, ne, lt, le, gt, ge), logical ops (and, or, xor, not), where,
// and the comparison operators.
//
// Contract: comparisons and logical ops broadcast, compare in the PyTorch result
// type of their inputs (any dtype) and give bool; they are not differentiable.
// Logical ops treat nonzero as true. where(cond, a, b) needs a bool condition,
// broadcasts all three, promotes a and b to their result type, and passes the
// gradient to a where cond holds and to b elsewhere.
#include "core/kernels/compare.h"

#include "core/autograd_meta.h"
#include "core/cpu/loops.h"
#include "core/dispatch.h"
#include "core/ops.h"
#include "core/ops/elementwise_util.h"

namespace weft {

// WEFT_PREDICATE_KERNEL(name, expr): table name_table() and a CPU kernel for all
// dtypes computing bool `expr` from x, y (opmath values).
#define WEFT_PREDICATE_KERNEL(name, ...)                                                     \
  PredicateKernel& name##_table() {                                                          \
    static PredicateKernel t(#name);                                                         \
    return t;                                                                                \
  }                                                                                          \
  namespace {                                                                                \
  template <typename T>                                                                      \
  void cpu_##name(const Tensor& out, const Tensor& a, const Tensor& b) {                     \
    using M = opmath_t<T>;                                                                   \
    cpu::elementwise<bool, T, T>(out, {a, b}, [](M x, M y) -> bool { return __VA_ARGS__; }); \
  }                                                                                          \
  WEFT_REGISTER_KERNEL(name##_table(), DeviceType::CPU, kAllTypes, cpu_##name);              \
  }

WEFT_PREDICATE_KERNEL(eq, x == y)
WEFT_PREDICATE_KERNEL(ne, x != y)
WEFT_PREDICATE_KERNEL(lt, x < y)
WEFT_PREDICATE_KERNEL(le, x <= y)
WEFT_PREDICATE_KERNEL(gt, x > y)
WEFT_PREDICATE_KERNEL(ge, x >= y)
WEFT_PREDICATE_KERNEL(logical_and, (x != M(0)) && (y != M(0)))
WEFT_PREDICATE_KERNEL(logical_or, (x != M(0)) || (y != M(0)))
WEFT_PREDICATE_KERNEL(logical_xor, (x != M(0)) != (y != M(0)))

NotKernel& logical_not_table() {
  static NotKernel t("logical_not");
  return t;
}
WhereKernel& where_table() {
  static WhereKernel t("where");
  return t;
}

namespace {
template <typename T>
void cpu_logical_not(const Tensor& out, const Tensor& a) {
  using M = opmath_t<T>;
  cpu::elementwise<bool, T>(out, {a}, [](M x) -> bool { return x == M(0); });
}
template <typename T>
void cpu_where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  using M = opmath_t<T>;
  cpu::elementwise<T, bool, T, T>(out, {cond, a, b}, [](bool c, M x, M y) -> M { return c ? x : y; });
}
WEFT_REGISTER_KERNEL(logical_not_table(), DeviceType::CPU, kAllTypes, cpu_logical_not);
WEFT_REGISTER_KERNEL(where_table(), DeviceType::CPU, kAllTypes, cpu_where);

Tensor predicate(PredicateKernel& k, const char* op, const Tensor& a, const Tensor& b) {
  WEFT_CHECK(a.defined() && b.defined(), op, ": undefined tensor argument");
  DType compute = detail::result_type(a, b);
  Tensor ea, eb;
  Shape shape = detail::prepare_binary(op, a, b, compute, ea, eb);
  Tensor out = empty(shape, {DType::Bool, ea.device()});
  k(out.device(), compute, out, ea, eb);
  return out;
}
}  // namespace

Tensor eq(const Tensor& a, const Tensor& b) { return predicate(eq_table(), "eq", a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return predicate(ne_table(), "ne", a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return predicate(lt_table(), "lt", a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return predicate(le_table(), "le", a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return predicate(gt_table(), "gt", a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return predicate(ge_table(), "ge", a, b); }
Tensor logical_and(const Tensor& a, const Tensor& b) { return predicate(logical_and_table(), "logical_and", a, b); }
Tensor logical_or(const Tensor& a, const Tensor& b) { return predicate(logical_or_table(), "logical_or", a, b); }
Tensor logical_xor(const Tensor& a, const Tensor& b) { return predicate(logical_xor_table(), "logical_xor", a, b); }

Tensor logical_not(const Tensor& a) {
  WEFT_CHECK(a.defined(), "logical_not: undefined tensor argument");
  Tensor out = empty(a.sizes(), {DType::Bool, a.device()});
  logical_not_table()(a.device(), a.dtype(), out, a.detach());
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  detail::check_devices("where", {cond, a, b});
  WEFT_CHECK(cond.defined() && a.defined() && b.defined(), "where: undefined tensor argument");
  WEFT_CHECK(cond.dtype() == DType::Bool, "where: expected a bool condition, got ", cond.dtype(), " (shape ",
             shape_str(cond.sizes()), ")");
  detail::check_same_device("where", cond, a);
  DType dt = detail::result_type(a, b);
  Tensor ea, eb;
  Shape ab = detail::prepare_binary("where", a, b, dt, ea, eb);
  Shape shape = broadcast_shapes("where", cond.sizes(), ab);
  Tensor ec = expand(cond.detach(), shape);
  ea = expand(ea, shape);
  eb = expand(eb, shape);
  Tensor out = empty(shape, {dt, ea.device()});
  where_table()(out.device(), dt, out, ec, ea, eb);
  if (any_requires_grad({a, b})) {
    SavedTensor save_c(cond);
    Shape za = a.sizes(), zb = b.sizes();
    DType ta = a.dtype(), tb = b.dtype();
    bool need_a = a.requires_grad(), need_b = b.requires_grad();
    record_differentiable("WhereBackward", {a, b}, {out}, [=](const std::vector<Tensor>& g) {
      Tensor c = save_c.get("WhereBackward");
      Tensor zero = wrapped_scalar(0, g[0].dtype(), g[0].device());
      Tensor ga, gb;
      if (need_a) ga = sum_to(where(c, g[0], zero), za).to(ta);
      if (need_b) gb = sum_to(where(c, zero, g[0]), zb).to(tb);
      return std::vector<Tensor>{ga, gb};
    });
  }
  return out;
}

// ---- operators ----
namespace {
Tensor wrap(const Scalar& s, const Tensor& like) { return detail::wrap_scalar(s, like); }
}  // namespace
Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
Tensor operator==(const Tensor& a, const Scalar& b) { return eq(a, wrap(b, a)); }
Tensor operator<(const Tensor& a, const Scalar& b) { return lt(a, wrap(b, a)); }
Tensor operator>(const Tensor& a, const Scalar& b) { return gt(a, wrap(b, a)); }

}  // namespace weft
