// Kernel tables of batch_norm and layer_norm (core/ops/norm.cc), forward and backward.
// Contract: all tensors contiguous; statistics are in the stat dtype (float64 for
// float64 input, else float32); w / b are undefined when the op has no affine part.
#pragma once

#include "core/dispatch.h"
#include "core/tensor.h"

namespace weft {

// ---- batch norm: x (N, C, S) contiguous; mean, var, invstd: (C) stat dtype, var biased.
using BnStatsKernel = KernelTable<void(const Tensor& x, const Tensor& mean, const Tensor& var)>;
// y = (x - mean) * invstd * w + b with invstd = 1 / sqrt(var + eps) written to `invstd`.
using BnForwardKernel = KernelTable<void(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b,
                                         const Tensor& mean, const Tensor& var, double eps, const Tensor& invstd)>;
// Any of dx, dw, db may be undefined (not needed).
using BnBackwardKernel =
    KernelTable<void(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& g, const Tensor& x,
                     const Tensor& w, const Tensor& mean, const Tensor& invstd, bool training)>;

// ---- layer norm: x (R, K) contiguous; y same; mean, rstd: (R) stat dtype.
using LnForwardKernel = KernelTable<void(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b, double eps,
                                         const Tensor& mean, const Tensor& rstd)>;
using LnBackwardKernel = KernelTable<void(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& g,
                                          const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd)>;

BnStatsKernel& bn_stats_table();
BnForwardKernel& bn_forward_table();
BnBackwardKernel& bn_backward_table();
LnForwardKernel& ln_forward_table();
LnBackwardKernel& ln_backward_table();

}  // namespace weft
