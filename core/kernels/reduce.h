// Kernel tables of the reductions in core/ops/reduce.cc (sum, prod, amax/amin,
// max/min along a dim, their backwards, and two non-differentiable helpers), plus
// the argument block every reduction table takes.
// Contract: a ReduceTable kernel reduces a contiguous (outer, r, inner) block along
// r (Note [reduction layout], core/ops/reduce_util.h); raw pointers are device pointers.
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "core/tensor.h"

namespace weft {

struct ReduceGeom {
  int64_t outer = 1, r = 1, inner = 1;
};

// Arguments every reduction kernel table takes (input dtype selects the kernel).
struct ReduceArgs {
  const void* in = nullptr;
  ReduceGeom g;
  void* out = nullptr;        // primary output
  void* out2 = nullptr;       // secondary output (indices), may be null
  double p = 0.0;             // op parameter (scale for sum/mean, p for norm)
  const void* aux = nullptr;  // op-specific extra input
};
using ReduceTable = KernelTable<void(const ReduceArgs&)>;

// out = sum * p (p is 1 for sum, 1 / r for mean); integers accumulate and write int64.
ReduceTable& sum_table();
ReduceTable& prod_table();
ReduceTable& amax_table();
ReduceTable& amin_table();
// out = values, out2 = int64 indices (first index wins ties; NaN is the extreme).
ReduceTable& max_dim_table();
ReduceTable& min_dim_table();
// Backward helpers, out = the (outer, r, inner) input gradient:
// max_backward: in = upstream gradient (outer, inner), aux = int64 indices along r;
// prod_backward: in = x (outer, r, inner), aux = upstream gradient (outer, inner).
ReduceTable& max_backward_table();
ReduceTable& prod_backward_table();

// Non-differentiable helpers used by backward formulas (same shapes, same dtype):
// out = exp(a); out = (a == b) ? 1 : 0.
using ReduceHelperUnaryKernel = KernelTable<void(const Tensor& out, const Tensor& a)>;
using ReduceHelperBinaryKernel = KernelTable<void(const Tensor& out, const Tensor& a, const Tensor& b)>;
ReduceHelperUnaryKernel& exp_nograd_table();
ReduceHelperBinaryKernel& eq_mask_table();

}  // namespace weft
