// Kernel table of matmul (core/ops/matmul.cc): batched GEMM with broadcast batch dims.
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

// For kernels: storage offsets (in elements, relative to t's data pointer) of each
// batch matrix of `t` (batch dims 0..dim-3, row-major batch order).
std::vector<int64_t> batch_offsets(const Tensor& t);

}  // namespace weft
