// Kernel tables of the indexing ops (core/ops/index.cc): gather, scatter_add,
// index_select, index_add, masked_fill, tril/triu.
// Contract: index tensors are int64 and already range-checked by the front end; out is
// written in place (scatter_add / index_add accumulate into a pre-filled out).
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "core/tensor.h"

namespace weft {

// gather/scatter_add: (out, self, index int64, src, dim)
using GatherKernel = KernelTable<void(const Tensor& out, const Tensor& self, const Tensor& index, int64_t dim)>;
using ScatterKernel = KernelTable<void(const Tensor& out, const Tensor& index, const Tensor& src, int64_t dim)>;
// index_select/index_add on contiguous (outer, n, inner) views
using IndexSelectKernel = KernelTable<void(const Tensor& out, const Tensor& self, const Tensor& index)>;
using IndexAddKernel = KernelTable<void(const Tensor& out, const Tensor& index, const Tensor& src)>;
// out = mask ? v : self; self and mask (bool) expanded to out's shape.
using MaskedFillKernel = KernelTable<void(const Tensor& out, const Tensor& self, const Tensor& mask, const Scalar& v)>;
// zeroes the part of contiguous (B, R, C) `out` outside the triangle
using TriKernel = KernelTable<void(const Tensor& out, int64_t diagonal, bool lower)>;

GatherKernel& gather_table();
ScatterKernel& scatter_add_table();
IndexSelectKernel& index_select_table();
IndexAddKernel& index_add_table();
MaskedFillKernel& masked_fill_table();
TriKernel& tri_table();

}  // namespace weft
