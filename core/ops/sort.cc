// sort, argsort and topk along a dim.
//
// Contract: the argsort kernel (core/kernels/sort.h) gives the positions; the
// values are gather()ed from the input with them, so their gradient is
// gather's (each value's gradient goes back to the position it came from).
// Ties keep their original order and NaN sorts above every number, as in
// PyTorch. A device without an argsort kernel sorts a host copy of the tensor
// and moves the positions back. topk returns its k values sorted.
#include "core/kernels/sort.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "core/dispatch.h"
#include "core/ops.h"
#include "core/parallel.h"

namespace weft {

ArgsortKernel& argsort_table() {
  static ArgsortKernel t("argsort");
  return t;
}

namespace {

template <typename T>
void cpu_argsort(const Tensor& out, const Tensor& self, bool descending) {
  const int64_t n = self.size(-1), k = out.size(-1), rows = n == 0 ? 0 : self.numel() / n;
  const T* in = self.data_ptr<T>();
  int64_t* pos = out.data_ptr<int64_t>();
  parallel_for(0, rows, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(n, 1)), [&](int64_t b, int64_t e) {
    std::vector<int64_t> order(static_cast<size_t>(n));
    for (int64_t r = b; r < e; ++r) {
      const T* row = in + r * n;
      // a before b: ordered by value (NaN above every number), ties by position
      auto before = [row, descending](int64_t i, int64_t j) {
        const auto x = static_cast<opmath_t<T>>(row[i]), y = static_cast<opmath_t<T>>(row[j]);
        const bool xn = x != x, yn = y != y;  // NaN (never for integers)
        const bool lt = (!xn && yn) || (!xn && !yn && x < y), gt = (xn && !yn) || (!xn && !yn && x > y);
        if (descending ? gt : lt) return true;
        if (descending ? lt : gt) return false;
        return i < j;
      };
      std::iota(order.begin(), order.end(), int64_t{0});
      if (k < n) std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
      else std::sort(order.begin(), order.end(), before);
      std::copy(order.begin(), order.begin() + k, pos + r * k);
    }
  });
}

WEFT_REGISTER_KERNEL(argsort_table(), DeviceType::CPU, kNumericTypes, cpu_argsort);

// The positions of the first k elements of each line along d, sorted: int64,
// shaped as `a` with size k along d.
Tensor sorted_positions(const Tensor& a, int64_t d, int64_t k, bool descending) {
  if (!argsort_table().has(a.device().type, a.dtype()) && !a.device().is_cpu())
    return sorted_positions(a.detach().to(kCPU), d, k, descending).to(a.device());
  Tensor rows = a.detach().transpose(d, -1).contiguous();  // (..., n)
  Shape out_shape = rows.sizes();
  out_shape.back() = k;
  Tensor pos = empty(out_shape, {DType::Int64, a.device()});
  if (pos.numel() > 0) argsort_table()(a.device(), a.dtype(), pos, rows, descending);
  return pos.transpose(d, -1).contiguous();
}

int64_t sort_dim(const char* op, const Tensor& a, int64_t dim) {
  WEFT_CHECK(a.defined(), op, ": undefined tensor");
  WEFT_CHECK(a.dtype() != DType::Bool, op, ": not supported for dtype bool");
  return wrap_dim(op, dim, std::max<int64_t>(a.dim(), 1));
}

}  // namespace

Tensor argsort(const Tensor& a, int64_t dim, bool descending) {
  const int64_t d = sort_dim("argsort", a, dim);
  if (a.dim() == 0) return zeros({}, {DType::Int64, a.device()});
  return sorted_positions(a, d, a.size(d), descending);
}

std::tuple<Tensor, Tensor> sort(const Tensor& a, int64_t dim, bool descending) {
  const int64_t d = sort_dim("sort", a, dim);
  if (a.dim() == 0) return {a.clone(), zeros({}, {DType::Int64, a.device()})};
  Tensor pos = sorted_positions(a, d, a.size(d), descending);
  return {gather(a, d, pos), pos};
}

std::tuple<Tensor, Tensor> topk(const Tensor& a, int64_t k, int64_t dim, bool largest) {
  const int64_t d = sort_dim("topk", a, dim);
  const int64_t n = a.dim() == 0 ? 1 : a.size(d);
  WEFT_CHECK(k >= 0 && k <= n, "topk: k = ", k, " is out of range for dimension ", d, " of size ", n, " (shape ",
             shape_str(a.sizes()), ")");
  if (a.dim() == 0) return {a.clone(), zeros({}, {DType::Int64, a.device()})};
  Tensor pos = sorted_positions(a, d, k, largest);
  return {gather(a, d, pos), pos};
}

}  // namespace weft
