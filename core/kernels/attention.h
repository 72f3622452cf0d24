// Kernel tables of scaled_dot_product_attention (core/ops/attention.cc): the fused
// scale + causal mask + softmax of each score row, and its backward.
// Contract: backends register per (device, dtype); the front end passes contiguous tensors.
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "core/tensor.h"

namespace weft {

// scores, y: (rows, S) contiguous with rows = batch * L; row r is query r % L.
// y = softmax(scale * scores) per row, keys j > r % L masked out when causal (a
// fully masked row gives zeros).
using AttnSoftmaxKernel =
    KernelTable<void(const Tensor& y, const Tensor& scores, int64_t L, double scale, bool causal)>;
// dx = scale * y * (g - sum(g * y)) per row; all (rows, S) contiguous.
using AttnSoftmaxBackwardKernel = KernelTable<void(const Tensor& dx, const Tensor& g, const Tensor& y, double scale)>;

AttnSoftmaxKernel& attn_softmax_table();
AttnSoftmaxBackwardKernel& attn_softmax_backward_table();

}  // namespace weft
