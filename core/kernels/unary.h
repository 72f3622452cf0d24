// Kernel tables of the unary elementwise ops (core/ops/unary.cc): one forward table
// per op and one fused gradient table `<op>_backward` per differentiable op, plus clamp.
// Contract: out, a (and g, saved) have the same shape and dtype (any strides; out may alias a).
#pragma once

#include "core/dispatch.h"
#include "core/tensor.h"

namespace weft {

// out = f(a).
using UnaryKernel = KernelTable<void(const Tensor& out, const Tensor& a)>;
// out = dx from (dy, saved); saved is the op's input or output (fixed per op, see
// the comments on the CPU gradient kernels in core/ops/unary.cc).
using UnaryGradKernel = KernelTable<void(const Tensor& out, const Tensor& g, const Tensor& saved)>;
// out = min(max(a, lo), hi), each bound only when has_*; NaN stays NaN.
using ClampKernel =
    KernelTable<void(const Tensor& out, const Tensor& a, const Scalar& lo, const Scalar& hi, bool has_lo, bool has_hi)>;
// out = g where lo <= x <= hi, else 0.
using ClampGradKernel = KernelTable<void(const Tensor& out, const Tensor& g, const Tensor& x, const Scalar& lo,
                                         const Scalar& hi, bool has_lo, bool has_hi)>;

UnaryKernel& neg_table();
UnaryKernel& exp_table();
UnaryKernel& log_table();
UnaryKernel& sqrt_table();
UnaryKernel& rsqrt_table();
UnaryKernel& abs_table();
UnaryKernel& sign_table();
UnaryKernel& relu_table();
UnaryKernel& sigmoid_table();
UnaryKernel& tanh_table();
UnaryKernel& silu_table();
UnaryKernel& gelu_table();
UnaryKernel& gelu_tanh_table();
UnaryKernel& sin_table();
UnaryKernel& cos_table();
UnaryKernel& erf_table();
UnaryKernel& log1p_table();
UnaryKernel& expm1_table();
UnaryKernel& reciprocal_table();
UnaryKernel& floor_table();  // floor, ceil, round: identity on integers
UnaryKernel& ceil_table();
UnaryKernel& round_table();  // half to even

UnaryGradKernel& exp_backward_table();         // saved = exp(x)
UnaryGradKernel& log_backward_table();         // saved = x
UnaryGradKernel& sqrt_backward_table();        // saved = sqrt(x)
UnaryGradKernel& rsqrt_backward_table();       // saved = rsqrt(x)
UnaryGradKernel& abs_backward_table();         // saved = x
UnaryGradKernel& relu_backward_table();        // saved = relu(x)
UnaryGradKernel& sigmoid_backward_table();     // saved = sigmoid(x)
UnaryGradKernel& tanh_backward_table();        // saved = tanh(x)
UnaryGradKernel& silu_backward_table();        // saved = x
UnaryGradKernel& gelu_backward_table();        // saved = x
UnaryGradKernel& gelu_tanh_backward_table();   // saved = x
UnaryGradKernel& sin_backward_table();         // saved = x
UnaryGradKernel& cos_backward_table();         // saved = x
UnaryGradKernel& erf_backward_table();         // saved = x
UnaryGradKernel& log1p_backward_table();       // saved = x
UnaryGradKernel& expm1_backward_table();       // saved = expm1(x)
UnaryGradKernel& reciprocal_backward_table();  // saved = 1 / x

ClampKernel& clamp_table();
ClampGradKernel& clamp_backward_table();

}  // namespace weft
