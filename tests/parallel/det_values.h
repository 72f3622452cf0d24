// Deterministic test values without the RNG (so ranks as threads, which
// share one generator, and processes get the same numbers), and the wall
// clock the fault drivers print.
#pragma once

#include <chrono>
#include <cmath>
#include <cstdint>

#include "core/autograd_meta.h"
#include "core/ops.h"

namespace weft::testing {

// t = scale * sin(0.731 i + 1.37 seed + 0.5) for element i. t: any shape.
inline void fill_det(Tensor t, double seed, double scale) {
  NoGradGuard ng;
  Tensor v = empty({t.numel()}, {DType::Float64});  // (numel,)
  double* p = v.data_ptr<double>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = scale * std::sin(0.731 * static_cast<double>(i) + 1.37 * seed + 0.5);
  t.copy_(v.to(t.dtype()).view(t.sizes()));
}

// Seconds since the epoch (what the fault drivers and scripts compare).
inline double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace weft::testing
