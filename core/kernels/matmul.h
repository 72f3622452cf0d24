// Kernel tables of matmul (core/ops/matmul.cc): batched GEMM with broadcast batch
// dims, and addmm (one GEMM plus a row-broadcast bias, for linear).
// Contract: the front end has resolved 1-D operands and broadcasting; the kernel
// writes every element of out (no accumulation).
#pragma once

#include <cstdint>
#include <vector>

#include "core/dispatch.h"
#include "core/tensor.h"

namespace weft {

// out: contiguous (batch..., M, N); a: (batch..., M, K); b: (batch..., K, N);
// a and b any strides (broadcast batch dims have stride 0).
using MatmulKernel = KernelTable<void(const Tensor& out, const Tensor& a, const Tensor& b)>;

MatmulKernel& matmul_table();

// addmm: out (M, N) = bias (N, broadcast over the rows) + a (M, K) @ b (K, N), the
// bias fused into the product (linear's forward on one GEMM). out contiguous;
// a and b 2-D, any strides; bias 1-D, any stride; same dtype and device. Optional:
// linear looks it up only where the device registers it (`has`) and otherwise
// runs matmul then adds the bias. The CPU registers float32 and float64 (the
// GEMM's column bias, core/cpu/gemm.h) and bfloat16 (the bias summed in float32
// before the one rounding, core/cpu/gemm_bf16.h).
using AddmmKernel = KernelTable<void(const Tensor& out, const Tensor& bias, const Tensor& a, const Tensor& b)>;

AddmmKernel& addmm_table();

// The transformer MLP's first linear with its tanh GELU fused (Note [gemm
// epilogue] in core/cpu/gemm.h), both optional like addmm (mlp_gelu_tanh looks
// them up with `has` and otherwise composes linear and gelu). The CPU registers
// float32 and bfloat16 (float32 sums; pre, act and out rounded as stored, act
// the GELU of the rounded pre).
//   addmm_gelu_tanh:          pre (M, N) = bias + a (M, K) @ b (K, N) and
//                             act (M, N) = gelu_tanh(pre); pre and act contiguous.
//   mm_gelu_tanh_backward:    out (M, N) = (a (M, K) @ b (K, N)) * gelu_tanh'(pre),
//                             pre (M, N) the saved pre-activation; out and pre contiguous.
// a and b 2-D with any strides; bias 1-D; one dtype and device.
using AddmmGeluKernel =
    KernelTable<void(const Tensor& pre, const Tensor& act, const Tensor& bias, const Tensor& a, const Tensor& b)>;
using MmGeluBackwardKernel = KernelTable<void(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& pre)>;

AddmmGeluKernel& addmm_gelu_tanh_table();
MmGeluBackwardKernel& mm_gelu_tanh_backward_table();

// mm_row_sums: out (M, N) = a (M, K) @ b (K, N) and sums (M) = a summed over K:
// a linear's weight and bias gradients in one pass over the output gradient g
// (a = g^T). Optional like addmm (linear and mlp_gelu_tanh look it up with
// `has`, else matmul and a sum); the CPU registers float32 (cpu::gemm_row_sums).
// out and sums contiguous; a and b 2-D with any strides.
using MmRowSumsKernel = KernelTable<void(const Tensor& out, const Tensor& sums, const Tensor& a, const Tensor& b)>;

MmRowSumsKernel& mm_row_sums_table();

// For kernels: storage offsets (in elements, relative to t's data pointer) of each
// batch matrix of `t` (batch dims 0..dim-3, row-major batch order).
std::vector<int64_t> batch_offsets(const Tensor& t);

}  // namespace weft
