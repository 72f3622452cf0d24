// Binary elementwise ops with broadcasting: add, sub, mul, div (+ in-place forms
// and operators). Each op: one kernel table, one CPU kernel, one backward.
#include "core/autograd_meta.h"
#include "core/cpu/loops.h"
#include "core/dispatch.h"
#include "core/ops.h"
#include "core/ops/elementwise_util.h"

namespace weft {

using BinaryKernel = KernelTable<void(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha)>;

#define WEFT_BINARY_TABLE(name) \
  BinaryKernel& name##_table() {  \
    static BinaryKernel t(#name); \
    return t;                     \
  }
WEFT_BINARY_TABLE(add)
WEFT_BINARY_TABLE(mul)
WEFT_BINARY_TABLE(div)

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
  check_inplace(op, a);
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
  record_function("AddBackward", {a, b}, {out}, [sa, sb, alpha](const std::vector<Tensor>& g) {
    Tensor gb = alpha.to<double>() == 1.0 ? g[0] : mul(g[0], wrapped_scalar(alpha, g[0].dtype(), g[0].device()));
    return std::vector<Tensor>{sum_to(g[0], sa), sum_to(gb, sb)};
  });
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  return add(a, b, Scalar(-alpha.to_double()));
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = binary_op(mul_table(), "mul", a, b, 1, detail::result_type(a, b));
  if (any_requires_grad({a, b})) {
    SavedTensor save_a = b.requires_grad() ? SavedTensor(a) : SavedTensor();
    SavedTensor save_b = a.requires_grad() ? SavedTensor(b) : SavedTensor();
    Shape za = a.sizes(), zb = b.sizes();
    record_function("MulBackward", {a, b}, {out}, [save_a, save_b, za, zb](const std::vector<Tensor>& g) {
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
    record_function("DivBackward", {a, b}, {out}, [save_a, save_b, za, zb](const std::vector<Tensor>& g) {
      Tensor bv = save_b.get("DivBackward");
      Tensor ga = sum_to(div(g[0], bv), za);
      Tensor gb = sum_to(neg(div(mul(g[0], save_a.get("DivBackward")), mul(bv, bv))), zb);
      return std::vector<Tensor>{ga, gb};
    });
  }
  return out;
}

Tensor& add_(Tensor& a, const Tensor& b, const Scalar& alpha) {
  binary_inplace(add_table(), "add_", a, b, alpha);
  Shape sb = b.sizes();
  record_inplace("AddBackward", a, {b}, [sb, alpha](const std::vector<Tensor>& g) {
    Tensor gb = alpha.to<double>() == 1.0 ? g[0] : mul(g[0], wrapped_scalar(alpha, g[0].dtype(), g[0].device()));
    return std::vector<Tensor>{g[0], sum_to(gb, sb)};
  });
  return a;
}

Tensor& sub_(Tensor& a, const Tensor& b, const Scalar& alpha) { return add_(a, b, Scalar(-alpha.to_double())); }

Tensor& mul_(Tensor& a, const Tensor& b) {
  bool need = any_requires_grad({a, b});
  SavedTensor old_a = need ? SavedTensor(a.clone().detach()) : SavedTensor();
  SavedTensor save_b = need ? SavedTensor(b) : SavedTensor();
  binary_inplace(mul_table(), "mul_", a, b, 1);
  Shape sb = b.sizes();
  record_inplace("MulBackward", a, {b}, [old_a, save_b, sb](const std::vector<Tensor>& g) {
    return std::vector<Tensor>{mul(g[0], save_b.get("MulBackward")),
                               sum_to(mul(g[0], old_a.get("MulBackward")), sb)};
  });
  return a;
}

Tensor& div_(Tensor& a, const Tensor& b) {
  WEFT_CHECK(is_floating(a.dtype()), "div_: in-place true division needs a floating tensor, got ", a.dtype());
  bool need = any_requires_grad({a, b});
  SavedTensor old_a = need ? SavedTensor(a.clone().detach()) : SavedTensor();
  SavedTensor save_b = need ? SavedTensor(b) : SavedTensor();
  binary_inplace(div_table(), "div_", a, b, 1);
  Shape sb = b.sizes();
  record_inplace("DivBackward", a, {b}, [old_a, save_b, sb](const std::vector<Tensor>& g) {
    Tensor bv = save_b.get("DivBackward");
    return std::vector<Tensor>{div(g[0], bv),
                               sum_to(neg(div(mul(g[0], old_a.get("DivBackward")), mul(bv, bv))), sb)};
  });
  return a;
}

// ---- operators ----
namespace {
Tensor wrap(const Scalar& s, const Tensor& like) { return wrapped_scalar(s, s.default_dtype(), like.device()); }
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
