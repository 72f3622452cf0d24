// Kernel tables of the losses (core/ops/loss.cc): cross_entropy / nll_loss, mse_loss,
// binary_cross_entropy_with_logits, forward and backward.
// Contract: all tensors contiguous; forwards give per-row / per-element losses (and
// a double total for the pointwise losses) that the front end reduces itself.
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "core/tensor.h"

namespace weft {

// x: (R, C) contiguous; target: (R) int64; loss: (R) float64 (0 where ignored);
// lse: (R) stat dtype (float64 for float64 input, else float32). log_probs=true
// means x already holds log-probabilities (nll_loss).
using ClassLossKernel = KernelTable<void(const Tensor& x, const Tensor& target, int64_t ignore_index, double smoothing,
                                         bool log_probs, const Tensor& loss, const Tensor& lse)>;
// dx: (R, C); g: (R) or (1) float64 upstream gradient per row, multiplied by `scale`.
using ClassLossBackwardKernel =
    KernelTable<void(const Tensor& dx, const Tensor& x, const Tensor& target, int64_t ignore_index, double smoothing,
                     bool log_probs, const Tensor& lse, const Tensor& g, double scale)>;

// mse: loss_i = (x_i - y_i)^2. bce: loss_i = (1 - y) x + lw * softplus(-x), lw = 1 + (pw - 1) y.
// out (n) T when reduction is None (else undefined); `total` receives the double sum.
using PointLossKernel =
    KernelTable<void(const Tensor& out, const Tensor& x, const Tensor& y, const Tensor& pw, double& total)>;
// dx, dy, dpw (each (n) T or undefined); g (n) or (1) T upstream gradient, times `scale`.
using PointLossBackwardKernel = KernelTable<void(const Tensor& dx, const Tensor& dy, const Tensor& dpw, const Tensor& x,
                                                 const Tensor& y, const Tensor& pw, const Tensor& g, double scale)>;

ClassLossKernel& class_loss_table();
ClassLossBackwardKernel& class_loss_backward_table();
PointLossKernel& mse_table();
PointLossBackwardKernel& mse_backward_table();
PointLossKernel& bce_table();
PointLossBackwardKernel& bce_backward_table();

}  // namespace weft
