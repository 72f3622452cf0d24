// Kernel tables of scaled_dot_product_attention (core/ops/attention.cc): the fused
// scale + causal mask + softmax of each score row and its backward (every backend),
// and the whole fused attention forward/backward (backends that have one: CUDA
// float16/bfloat16 through cuDNN; the CPU float32, flash kernels).
// Contract: backends register per (device, dtype); the front end passes contiguous
// tensors to the softmax tables and stride(-1) == 1 tensors to the fused ones.
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

// Fused attention forward: o = softmax(scale * q k^T [causal: keys j > query i
// masked, top-left aligned]) v and the softmax statistics the backward needs.
// q (B, H, L, D), k (B, H, S, D), v (B, H, S, Dv): any strides with stride(-1) == 1;
// o (B, H, L, Dv), q's dtype, as the caller allocates it: contiguous, except on the
// CPU, whose kernels take any strides with stride(-1) == 1 and are given a (B, L, H,
// Dv) memory layout (core/ops/attention.cc); stats (B, H, L, 1) float32 contiguous, the
// natural-log logsumexp of each scaled, masked score row. Returns false, having
// written nothing the caller may use, when the backend cannot run this
// configuration (the caller falls back to the unfused path); true when o and stats
// hold the result.
using SdpaFusedKernel = KernelTable<bool(const Tensor& o, const Tensor& stats, const Tensor& q, const Tensor& k,
                                         const Tensor& v, double scale, bool causal)>;
// Fused attention backward: dq, dk, dv (shapes and dtype of q, k, v; laid out as o is)
// from d_o (B, H, L, Dv, stride(-1) == 1) and the forward's q, k, v, o, stats.
// Returns false (outputs unusable) when the backend cannot run it.
using SdpaFusedBackwardKernel = KernelTable<bool(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                                                 const Tensor& d_o, const Tensor& q, const Tensor& k, const Tensor& v,
                                                 const Tensor& o, const Tensor& stats, double scale, bool causal)>;

AttnSoftmaxKernel& attn_softmax_table();
AttnSoftmaxBackwardKernel& attn_softmax_backward_table();
SdpaFusedKernel& sdpa_fused_table();
SdpaFusedBackwardKernel& sdpa_fused_backward_table();

}  // namespace weft
