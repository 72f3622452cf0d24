// Kernel tables of the random ops (core/ops/random.cc): uniform_, normal_, randint,
// dropout_mask, bernoulli. PhiloxState comes from core/rng.h.
// Contract: element i draws the values at counter offset i * K of `s` (Note [philox
// counter layout], core/rng.h), so every backend gives the same numbers for one state.
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "core/rng.h"
#include "core/tensor.h"

namespace weft {

// Kernel signatures: outputs are contiguous and freshly allocated (or checked contiguous).
// uniform_: U[a, b); normal_: N(mean a, std b); dropout_mask: out = u < a ? b : 0 with
// a = keep probability, b = 1 / keep.
using RandomFillKernel = KernelTable<void(const Tensor& out, PhiloxState s, double a, double b)>;
using RandintKernel = KernelTable<void(const Tensor& out, PhiloxState s, int64_t low, int64_t high)>;
using BernoulliKernel = KernelTable<void(const Tensor& out, const Tensor& p, PhiloxState s)>;

RandomFillKernel& uniform__table();
RandomFillKernel& normal__table();
RandintKernel& randint_table();
RandomFillKernel& dropout_mask_table();
BernoulliKernel& bernoulli_table();

}  // namespace weft
