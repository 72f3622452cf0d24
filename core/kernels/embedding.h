// Kernel tables of embedding (core/ops/embedding.cc): row gather and its scatter-add backward.
// Contract: all tensors contiguous; indices are int64 and already range-checked.
#pragma once

#include "core/dispatch.h"
#include "core/tensor.h"

namespace weft {

// out: (n, D), weight: (V, D), idx: (n) int64.
using EmbeddingKernel = KernelTable<void(const Tensor& out, const Tensor& weight, const Tensor& idx)>;
// grad_weight: (V, D) zero-initialised; g: (n, D); idx: (n). grad_weight[idx[i]] += g[i].
using EmbeddingBackwardKernel = KernelTable<void(const Tensor& grad_weight, const Tensor& g, const Tensor& idx)>;

EmbeddingKernel& embedding_table();
EmbeddingBackwardKernel& embedding_backward_table();

}  // namespace weft
