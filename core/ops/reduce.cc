// Reductions. (Foundation skeleton: sum; the rest follow the same pattern.)
#include <algorithm>

#include "core/autograd_meta.h"
#include "core/dispatch.h"
#include "core/ops.h"
#include "core/parallel.h"

namespace weft {

using ReduceKernel = KernelTable<void(const Tensor& out, const Tensor& in_rows)>;

ReduceKernel& sum_table() {
  static ReduceKernel t("sum");
  return t;
}

namespace {

// in_rows: contiguous (outer, inner); out: contiguous (outer).
template <typename T>
void cpu_sum_rows(const Tensor& out, const Tensor& in) {
  using Acc = std::conditional_t<std::is_integral_v<T> || std::is_same_v<T, bool>, int64_t,
                                 std::conditional_t<std::is_same_v<T, double>, double, float>>;
  const int64_t outer = in.size(0), inner = in.size(1);
  const T* src = in.data_ptr<T>();
  T* dst = out.data_ptr<T>();
  parallel_for(0, outer, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(inner, 1)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const T* p = src + r * inner;
      Acc acc = 0;
      for (int64_t i = 0; i < inner; ++i) acc += static_cast<Acc>(static_cast<opmath_t<T>>(p[i]));
      dst[r] = static_cast<T>(acc);
    }
  });
}
WEFT_REGISTER_KERNEL(sum_table(), DeviceType::CPU, kNumericTypes, cpu_sum_rows);

}  // namespace

Tensor sum(const Tensor& a, const std::vector<int64_t>& dims_in, bool keepdim, std::optional<DType> dtype) {
  std::vector<int64_t> dims = wrap_dims("sum", dims_in, a.dim());
  DType out_dtype = dtype.value_or(is_integral(a.dtype(), true) ? DType::Int64 : a.dtype());
  Tensor x = a.detach().to(out_dtype);
  // move reduced dims last, make rows
  std::vector<int64_t> perm, keep_shape, out_shape;
  std::vector<bool> red(a.dim(), false);
  for (int64_t d : dims) red[d] = true;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < a.dim(); ++d)
    if (!red[d]) { perm.push_back(d); outer *= a.size(d); out_shape.push_back(a.size(d)); keep_shape.push_back(a.size(d)); }
    else { keep_shape.push_back(1); }
  for (int64_t d : dims) { perm.push_back(d); inner *= a.size(d); }
  Tensor rows = permute(x, perm).contiguous().view({outer, inner});
  Tensor out = empty({outer}, {out_dtype, a.device()});
  sum_table()(a.device(), out_dtype, out, rows);
  out = out.view(keepdim ? keep_shape : out_shape);
  Shape in = a.sizes();
  record_function("SumBackward", {a}, {out}, [in, keep_shape](const std::vector<Tensor>& g) {
    return std::vector<Tensor>{expand(g[0].reshape(keep_shape), in).contiguous()};
  });
  return out;
}

}  // namespace weft
