// Kernel tables of conv2d (core/ops/conv.cc) and the parameters they take.
// Contract: NCHW, all tensors contiguous; float16/bfloat16 are computed in float32 by
// the front end, so a backend needs only the dtypes it wants to run natively.
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "core/tensor.h"

namespace weft {

struct Conv2dParams {
  int64_t sH, sW, pH, pW, dH, dW, groups;
};

// out: contiguous (N, C_out, OH, OW); x: contiguous (N, C_in, H, W); w: contiguous
// (C_out, C_in/groups, kH, kW); b: contiguous (C_out) or undefined.
using Conv2dKernel =
    KernelTable<void(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p)>;
// gx / gw / gb: contiguous outputs (undefined when not needed); go: contiguous
// (N, C_out, OH, OW); x, w: as in the forward.
using Conv2dBackwardKernel = KernelTable<void(const Tensor& gx, const Tensor& gw, const Tensor& gb, const Tensor& go,
                                              const Tensor& x, const Tensor& w, const Conv2dParams& p)>;

Conv2dKernel& conv2d_table();
Conv2dBackwardKernel& conv2d_backward_table();

}  // namespace weft
