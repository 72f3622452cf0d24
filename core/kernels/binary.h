// Kernel tables of the binary elementwise ops (core/ops/binary.cc): add, mul, div,
// pow, maximum, minimum, pow with a scalar exponent, and the maximum/minimum gradients.
// Contract: operands arrive expanded to out's shape and converted to out's dtype (any strides).
#pragma once

#include "core/dispatch.h"
#include "core/tensor.h"

namespace weft {

// out = a op b (add: a + alpha * b; alpha is ignored by the other ops).
using BinaryKernel = KernelTable<void(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha)>;
// pow with a scalar exponent: out = a ^ e.
using PowScalarKernel = KernelTable<void(const Tensor& out, const Tensor& a, const Scalar& e)>;
// Gradient share of maximum/minimum for the first operand: out = g * w(a, b) with
// w = 1 where a wins, 1/2 on ties (PyTorch splits the gradient), 0 where b wins.
using MinMaxGradKernel = KernelTable<void(const Tensor& out, const Tensor& g, const Tensor& a, const Tensor& b)>;

BinaryKernel& add_table();
BinaryKernel& mul_table();
BinaryKernel& div_table();
BinaryKernel& pow_table();
BinaryKernel& maximum_table();
BinaryKernel& minimum_table();
PowScalarKernel& pow_scalar_table();
MinMaxGradKernel& maximum_backward_table();
MinMaxGradKernel& minimum_backward_table();

}  // namespace weft
