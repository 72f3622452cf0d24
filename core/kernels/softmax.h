// Kernel tables of softmax and log_softmax (core/ops/softmax.cc).
// Contract: ReduceArgs (core/kernels/reduce.h) over a contiguous (outer, r, inner)
// block, r the softmax dim; out has the input's layout; numerically stable (max-shifted).
#pragma once

#include "core/dispatch.h"
#include "core/kernels/reduce.h"

namespace weft {

ReduceTable& softmax_table();
ReduceTable& log_softmax_table();

}  // namespace weft
