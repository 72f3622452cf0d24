// Kernel tables of comparisons, logical ops and where (core/ops/compare.cc).
// Contract: operands arrive expanded to out's shape; predicates and logical_not write
// bool, read operands in the registered (compute) dtype; where writes the registered dtype.
#pragma once

#include "core/dispatch.h"
#include "core/tensor.h"

namespace weft {

// out (bool) = f(a, b); a and b in the compute dtype the kernel is registered for.
using PredicateKernel = KernelTable<void(const Tensor& out, const Tensor& a, const Tensor& b)>;
// out (bool) = a == 0.
using NotKernel = KernelTable<void(const Tensor& out, const Tensor& a)>;
// out = cond ? a : b; cond bool, a, b and out of the registered dtype.
using WhereKernel = KernelTable<void(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b)>;

PredicateKernel& eq_table();
PredicateKernel& ne_table();
PredicateKernel& lt_table();
PredicateKernel& le_table();
PredicateKernel& gt_table();
PredicateKernel& ge_table();
PredicateKernel& logical_and_table();
PredicateKernel& logical_or_table();
PredicateKernel& logical_xor_table();
NotKernel& logical_not_table();
WhereKernel& where_table();

}  // namespace weft
