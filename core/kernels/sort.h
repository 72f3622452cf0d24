// Kernel table of the sorting ops (core/ops/sort.cc): sort, argsort, topk.
// Contract: `self` is contiguous (rows, n), sorted along its last dim; `out` is a
// contiguous int64 (rows, k) that receives, per row, the positions of the row's
// first k elements in ascending (or descending) order. Ties keep their original
// order (stable), and NaN sorts above every number, as in PyTorch.
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "core/tensor.h"

namespace weft {

using ArgsortKernel = KernelTable<void(const Tensor& out, const Tensor& self, bool descending)>;

ArgsortKernel& argsort_table();

}  // namespace weft
