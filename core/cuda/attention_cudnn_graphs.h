// The cuDNN operation graphs of fused attention (the lowerings used by
// core/cuda/attention_cudnn.cc), built on core/cuda/cudnn_graph.h.
//
// Contract:
// - native_forward / native_backward: one CUDNN_BACKEND_OPERATION_SDPA_FWD /
//   SDPA_BWD operation (headers and runtime cuDNN >= 9.13.1 / 9.17.0; built
//   against older headers they throw Unsupported). Up to cuDNN 9.20 these have
//   no mask attribute, so callers use them for non-causal attention only.
// - composite_forward / composite_backward: the flash-attention operation graph
//   that cuDNN's fused engines pattern-match (the graph cudnn-frontend builds for
//   its SDPA nodes; cuDNN >= 9.0). Forward: S = (Q K^T) * scale [causal:
//   causal_mask], M = max_j S, E = exp(S - M), Z = sum_j E, stats = M + log Z,
//   P = E / Z, O = P V. Backward: rowsum = sum_j (dO * O), P = exp(S - stats)
//   [same mask], dV = P^T dO, dS = P * (dO V^T - rowsum) * scale, dK = dS^T Q,
//   dQ = dS K through a float32 accumulator (kdQAccum, then converted).
// - Causal is top-left aligned (query i sees keys j <= i, PyTorch's is_causal),
//   which CMP_GE(row index, column index) states directly, for L != S as well; a
//   top-left causal row always keeps key 0, so no row is fully masked.
// - Tensors are bound by the Uid values below: Q, K, V (and dO) with their own
//   strides (Layout: stride(-1) == 1, every other stride a positive multiple of 8
//   elements, base 16-byte aligned, what the tensor-core engines need); O, stats,
//   dQ, dK, dV packed. Scale, the mask fill (kFill, the lowest float) and kOne are
//   float32 scalars passed by value; kRowSum and kdQAccum are float32 device
//   buffers the caller provides for the composite backward.
// - Each function returns a finalized plan for the given handle or throws
//   cudnn_graph::Unsupported.
#pragma once

#include <cudnn.h>

#include <cstdint>
#include <memory>

#include "core/cuda/cudnn_graph.h"
#include "core/tensor.h"

namespace weft::cuda::sdpa_cudnn {

using cudnn_graph::Dims;
using cudnn_graph::Plan;

// Unique ids of the tensors bound in variant packs.
enum Uid : int64_t {
  kQ = 1,
  kK = 2,
  kV = 3,
  kO = 4,
  kStats = 5,
  kScale = 6,
  kFill = 7,
  kdO = 8,
  kdQ = 9,
  kdK = 10,
  kdV = 11,
  kOne = 12,
  kRowSum = 13,
  kdQAccum = 14,
};
static_assert(kdQAccum < cudnn_graph::kFirstVirtualUid, "bound uids must stay below the virtual ones");

// Batch, heads, query length, key length, head dims of q/k and of v.
struct Shapes {
  int64_t B, H, L, S, D, Dv;
  Dims scores() const { return {B, H, L, S}; }
  Dims rows() const { return {B, H, L, 1}; }
};

// A 4-d tensor as cuDNN addresses it: dims, and strides made positive (a size-1 dim
// gets the stride a packed layout would give it; its value is never used).
struct Layout {
  Dims dims{}, strides{};
};

// False when cuDNN's tensor-core engines cannot address t: stride(-1) != 1, a zero
// stride, a stride that is not a multiple of 8 elements (16 bytes), or a base
// pointer not 16-byte aligned.
bool describe(const Tensor& t, Layout& l);
// describe(), else describe a packed copy (made on the current stream; t becomes the copy).
bool describe_or_copy(Tensor& t, Layout& l);
Layout contiguous_layout(const Dims& dims);

// The top-left causal mask of scores s (B, H, L, S): keeps s[i][j] where i >= j,
// the value bound to kFill elsewhere (the graph cudnn-frontend builds for causal_mask).
cudnn_graph::DescP causal_mask(cudnn_graph::GraphBuilder& g, const cudnn_graph::DescP& s, const Dims& dims,
                               const Dims& strides);

std::shared_ptr<Plan> native_forward(cudnnHandle_t h, cudnnDataType_t io, const Shapes& s, const Layout& q,
                                     const Layout& k, const Layout& v, const Layout& o);
std::shared_ptr<Plan> native_backward(cudnnHandle_t h, cudnnDataType_t io, const Shapes& s, const Layout& q,
                                      const Layout& k, const Layout& v, const Layout& o, const Layout& d_o);
std::shared_ptr<Plan> composite_forward(cudnnHandle_t h, cudnnDataType_t io, const Shapes& s, const Layout& q,
                                        const Layout& k, const Layout& v, const Layout& o, bool causal);
std::shared_ptr<Plan> composite_backward(cudnnHandle_t h, cudnnDataType_t io, const Shapes& s, const Layout& q,
                                         const Layout& k, const Layout& v, const Layout& o, const Layout& d_o,
                                         bool causal);

}  // namespace weft::cuda::sdpa_cudnn
