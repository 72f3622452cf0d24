// Kernel tables of copy_ and fill_ (core/ops/copy.cc).
// Contract: copy_ is registered per destination dtype and converts from any source
// dtype; src arrives expanded to dst's shape (any strides). Cross-device copies are
// dispatched on the non-CPU device, so that backend's kernel must handle host memory.
#pragma once

#include "core/dispatch.h"
#include "core/tensor.h"

namespace weft {

// dst and src have the same shape (src expanded); dtypes may differ (table keyed by dst's).
using CopyKernel = KernelTable<void(const Tensor& dst, const Tensor& src)>;
// Every element of dst (any strides) = value converted to dst's dtype.
using FillKernel = KernelTable<void(const Tensor& dst, const Scalar& value)>;

CopyKernel& copy_table();
FillKernel& fill_table();

}  // namespace weft
