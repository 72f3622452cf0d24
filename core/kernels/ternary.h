// Kernel tables of the in-place pointwise updates addcmul_, addcdiv_, lerp_
// (core/ops/ternary.cc), used by optimizers.
// Contract: all operands already have out's shape and dtype (any strides; out may alias a).
#pragma once

#include "core/dispatch.h"
#include "core/tensor.h"

namespace weft {

// addcmul_: out = a + value * t1 * t2; addcdiv_: out = a + value * t1 / t2;
// lerp_: out = a + value * (t1 - a), t2 unused (the signature is shared).
using TernaryKernel =
    KernelTable<void(const Tensor& out, const Tensor& a, const Tensor& t1, const Tensor& t2, const Scalar& value)>;

TernaryKernel& addcmul_table();
TernaryKernel& addcdiv_table();
TernaryKernel& lerp_table();

}  // namespace weft
