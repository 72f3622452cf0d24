// Unary elementwise ops. (Foundation skeleton: neg; the rest follow the same pattern.)
#include "core/autograd_meta.h"
#include "core/cpu/loops.h"
#include "core/dispatch.h"
#include "core/ops.h"

namespace weft {

using UnaryKernel = KernelTable<void(const Tensor& out, const Tensor& a)>;

UnaryKernel& neg_table() {
  static UnaryKernel t("neg");
  return t;
}

namespace {
template <typename T>
void cpu_neg(const Tensor& out, const Tensor& a) {
  cpu::elementwise<T, T>(out, {a}, [](opmath_t<T> x) { return -x; });
}
WEFT_REGISTER_KERNEL(neg_table(), DeviceType::CPU, kNumericTypes, cpu_neg);
}  // namespace

Tensor neg(const Tensor& a) {
  Tensor out = empty(a.sizes(), a.options());
  neg_table()(a.device(), a.dtype(), out, a);
  record_function("NegBackward", {a}, {out}, [](const std::vector<Tensor>& g) {
    return std::vector<Tensor>{neg(g[0])};
  });
  return out;
}

}  // namespace weft
