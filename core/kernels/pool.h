// Kernel tables of 2-D pooling (core/ops/pool.cc): max_pool2d, avg_pool2d,
// adaptive_avg_pool2d, forward and backward, and the parameters they take.
// Contract: tensors are contiguous plane stacks (P = N * C); max indices are int64
// flat offsets (h * W + w) into each (H, W) plane; outputs (gx included) arrive
// uninitialised, so kernels write every element.
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "core/tensor.h"

namespace weft {

struct Pool2dParams {
  int64_t kH, kW, sH, sW, pH, pW, dH, dW;
  bool count_include_pad;
};

// x, out, indices, go, gx: contiguous (P, H, W) / (P, OH, OW) plane stacks (P = N * C).
using MaxPool2dKernel =
    KernelTable<void(const Tensor& out, const Tensor& indices, const Tensor& x, const Pool2dParams& p)>;
using MaxPool2dBackwardKernel = KernelTable<void(const Tensor& gx, const Tensor& go, const Tensor& indices)>;
using AvgPool2dKernel = KernelTable<void(const Tensor& out, const Tensor& x, const Pool2dParams& p)>;
using AvgPool2dBackwardKernel = KernelTable<void(const Tensor& gx, const Tensor& go, const Pool2dParams& p)>;
using AdaptivePool2dKernel = KernelTable<void(const Tensor& out, const Tensor& x)>;
using AdaptivePool2dBackwardKernel = KernelTable<void(const Tensor& gx, const Tensor& go)>;

// max_pool2d with 2x2 windows at stride 2, no padding or dilation (OH <= H / 2,
// OW <= W / 2), as front ends run it where a device has these tables: the
// output alone, no indices; the backward recomputes each window's first
// maximum from x (the forward's ordered selects, NaN winning) and writes all
// of gx: the gradient at the maximum, +0 elsewhere and past the last window.
using MaxPool2x2Kernel = KernelTable<void(const Tensor& out, const Tensor& x)>;
using MaxPool2x2BackwardKernel = KernelTable<void(const Tensor& gx, const Tensor& go, const Tensor& x)>;

MaxPool2dKernel& max_pool2d_table();
MaxPool2x2Kernel& max_pool2x2_table();
MaxPool2x2BackwardKernel& max_pool2x2_backward_table();
MaxPool2dBackwardKernel& max_pool2d_backward_table();
AvgPool2dKernel& avg_pool2d_table();
AvgPool2dBackwardKernel& avg_pool2d_backward_table();
AdaptivePool2dKernel& adaptive_avg_pool2d_table();
AdaptivePool2dBackwardKernel& adaptive_avg_pool2d_backward_table();

}  // namespace weft
