// The cuDNN operation graphs of fused attention (the lowerings used by
// core/cuda/attention_cudnn.cc), built on core/cuda/cudnn_graph.h.
//
// Contract:
// - native_forward / native_backward: one CUDNN_BACKEND_OPERATION_SDPA_FWD /
//   SDPA_BWD operation (headers and runtime cuDNN >= 9.13.1 / 9.17.0; built
//   against older headers they throw Unsupported). Up to cuDNN 9.20 these have
//   no mask attribute, so callers use them for non-causal attention only.
// - composite_forward / composite_backward: the flash-attention operation graph
//   that cuDNN's fused engines pattern-match, described node for node as
//   cudnn-frontend builds it (Note [sdpa graph] in core/cuda/sdpa_graph_spec.h,
//   cuDNN >= 9.0) and lowered by build_plan(). The causal mask's fill is bound at
//   kFill (sdpa_cudnn::mask_fill(cudnnGetVersion())).
// - Causal is top-left aligned (query i sees keys j <= i, PyTorch's is_causal),
//   which CMP_GE(row index, column index) states directly, for L != S as well; a
//   top-left causal row always keeps key 0, so no row is fully masked.
// - Tensors are bound by the Uid values of sdpa_graph_spec.h: Q, K, V (and dO)
//   with their own strides (Layout: stride(-1) == 1, every other stride a
//   positive multiple of 8 elements, base 16-byte aligned, what the tensor-core
//   engines need); O, stats, dQ, dK, dV packed. Scale, the mask fill (kFill) and
//   kOne are float32 scalars passed by value; kRowSum and kdQAccum are float32
//   device buffers the caller provides for the composite backward.
// - Each function returns a finalized plan for the given handle or throws
//   cudnn_graph::Unsupported.
#pragma once

#include <cudnn.h>

#include <cstdint>
#include <memory>

#include "core/cuda/cudnn_graph.h"
#include "core/cuda/sdpa_graph_spec.h"
#include "core/tensor.h"

namespace weft::cuda::sdpa_cudnn {

using cudnn_graph::Plan;

static_assert(kdQAccum < cudnn_graph::kFirstVirtualUid && kFirstVirtualUid == cudnn_graph::kFirstVirtualUid,
              "bound uids must stay below the virtual ones");

// False when cuDNN's tensor-core engines cannot address t: stride(-1) != 1, a zero
// stride, a stride that is not a multiple of 8 elements (16 bytes), or a base
// pointer not 16-byte aligned.
bool describe(const Tensor& t, Layout& l);
// describe(), else describe a packed copy (made on the current stream; t becomes the copy).
bool describe_or_copy(Tensor& t, Layout& l);

// Lowers a graph description (core/cuda/sdpa_graph_spec.h) onto the backend API
// with `io` as its I/O type and finalizes a plan on `h`.
std::shared_ptr<Plan> build_plan(const spec::Graph& graph, cudnnDataType_t io, cudnnHandle_t h);

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
