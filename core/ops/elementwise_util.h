// Shared front-end steps for elementwise ops: result dtype, broadcasting and
// input preparation, and the shape rule of the element-wise losses. Used by
// core/ops/binary.cc, unary.cc and the losses.
#pragma once

#include <array>
#include <functional>
#include <initializer_list>

#include "core/nn_ops.h"
#include "core/ops.h"

namespace weft::detail {

// PyTorch-style result type of a binary op: wrapped C++ numbers only raise the
// category (bool < integral < floating) of a tensor, never its width.
DType result_type(const Tensor& a, const Tensor& b);

// Checks devices match, broadcasts, converts both inputs to `compute` dtype and
// expands them to the common shape. Returns the shape.
Shape prepare_binary(const char* op, const Tensor& a, const Tensor& b, DType compute, Tensor& a_out, Tensor& b_out);

// Checks that `t` lives on `dev`; the error names the op and both devices.
void check_same_device(const char* op, const Tensor& a, const Tensor& b);

// A C++ number beside the tensor `like` (t * 0.1, t > 0.5), as a wrapped 0-dim
// tensor on like's device. A floating number beside a floating tensor takes the
// tensor's dtype, so float64 math keeps the number's double value (PyTorch's
// behaviour); otherwise the number's default dtype (float32, int64, bool).
Tensor wrap_scalar(const Scalar& s, const Tensor& like);

// The losses that compare input and target element by element (mse_loss,
// l1_loss, ...): both defined and of one shape; they do not broadcast.
void check_pointwise_loss(const char* op, const Tensor& input, const Tensor& target);
// A loss's per-element values as `reduction` asks: as they are, their mean or their sum.
Tensor apply_reduction(const Tensor& loss, Reduction reduction);

// Checks that every defined tensor of `ts` (undefined ones, e.g. an absent bias, and
// wrapped numbers are skipped) is on the device of the first defined one; the error
// names the op and both devices. Op front ends taking 2+ tensors call it first.
void check_devices(const char* op, std::initializer_list<std::reference_wrapper<const Tensor>> ts);

}  // namespace weft::detail
