// Kernel tables of the statistical reductions in core/ops/reduce_stats.cc
// (logsumexp, norm, norm's backward, and helpers of std / norm backward).
// Contract: ReduceTable kernels follow ReduceArgs (core/kernels/reduce.h); the
// tensor helpers take same-shape tensors of one floating dtype.
#pragma once

#include "core/dispatch.h"
#include "core/kernels/reduce.h"
#include "core/tensor.h"

namespace weft {

// out = logsumexp along r (ReduceArgs; shifts by the max).
ReduceTable& logsumexp_table();
// out = p-norm along r, p = ReduceArgs::p (0 counts non-zeros, +-inf is max/min |x|).
ReduceTable& norm_table();

// gi = d norm / dx * g: x and gi full shape, n (the norm) and g expanded to it.
using NormBackwardKernel =
    KernelTable<void(const Tensor& gi, const Tensor& x, const Tensor& n, const Tensor& g, double p)>;
// out = (|x| == n) ? 1 : 0 (the max/min-|x| mask of the infinite norms' backward).
using AbsEqKernel = KernelTable<void(const Tensor& out, const Tensor& x, const Tensor& n)>;
// out = sqrt(a), not differentiable (std's front end records its own backward).
using StdSqrtKernel = KernelTable<void(const Tensor& out, const Tensor& a)>;

NormBackwardKernel& norm_backward_table();
AbsEqKernel& abs_eq_table();
StdSqrtKernel& std_sqrt_table();

}  // namespace weft
