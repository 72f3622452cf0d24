// Kernel tables of the fused LSTM cell (core/ops/rnn_cell.cc), forward and
// backward. Optional: lstm_cell uses them where both are registered for the
// device and dtype, and otherwise composes the element-wise ops.
// Contract: all tensors contiguous, of one dtype; N rows, H hidden units.
#pragma once

#include "core/dispatch.h"
#include "core/tensor.h"

namespace weft {

// xg, hg: (N, 4H) gate pre-activations in PyTorch's order i, f, g, o (their
// sum is used); c: (N, H). Writes h2, c2: (N, H); acts: (N, 4H) the activated
// gates sigmoid(i), sigmoid(f), tanh(g), sigmoid(o); tc: (N, H) tanh(c2).
using LstmCellKernel = KernelTable<void(const Tensor& xg, const Tensor& hg, const Tensor& c, const Tensor& h2,
                                        const Tensor& c2, const Tensor& acts, const Tensor& tc)>;
// dh2, dc2: (N, H) upstream gradients; acts, c, tc as saved by the forward.
// Writes dgates: (N, 4H), the gradient of the pre-activations (both xg's and
// hg's), and dc: (N, H).
using LstmCellBackwardKernel =
    KernelTable<void(const Tensor& dh2, const Tensor& dc2, const Tensor& acts, const Tensor& c, const Tensor& tc,
                     const Tensor& dgates, const Tensor& dc)>;

LstmCellKernel& lstm_cell_table();
LstmCellBackwardKernel& lstm_cell_backward_table();

}  // namespace weft
