// Argument checks and the dtype rule that conv2d (core/ops/conv.cc) and the
// transposed convolutions (core/ops/conv_transpose.cc) share.
#pragma once

#include <array>
#include <string>

#include "core/kernels/conv.h"

namespace weft::detail {

inline std::string pair_str(std::array<int64_t, 2> a) {
  return "(" + std::to_string(a[0]) + ", " + std::to_string(a[1]) + ")";
}

// groups, stride and dilation positive, padding non-negative; errors name `op`.
inline void check_conv_args(const char* op, std::array<int64_t, 2> stride, std::array<int64_t, 2> padding,
                            std::array<int64_t, 2> dilation, int64_t groups) {
  WEFT_CHECK(groups >= 1, op, ": groups must be positive, got ", groups);
  WEFT_CHECK(stride[0] >= 1 && stride[1] >= 1, op, ": stride must be positive, got ", pair_str(stride));
  WEFT_CHECK(padding[0] >= 0 && padding[1] >= 0, op, ": padding must be non-negative, got ", pair_str(padding));
  WEFT_CHECK(dilation[0] >= 1 && dilation[1] >= 1, op, ": dilation must be positive, got ", pair_str(dilation));
}

// float16 / bfloat16 run natively where the device registers both of conv2d's
// tables for them (cuDNN), else in float32.
inline bool conv_in_float32(const Tensor& x) {
  return (x.dtype() == DType::Float16 || x.dtype() == DType::BFloat16) &&
         !(conv2d_table().has(x.device().type, x.dtype()) && conv2d_backward_table().has(x.device().type, x.dtype()));
}

}  // namespace weft::detail
