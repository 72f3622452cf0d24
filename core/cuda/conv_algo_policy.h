// What the cuDNN convolution kernels (core/cuda/conv.cc) do with the heuristics'
// answer, free of CUDA so it is tested on any machine
// (tests/cuda/conv_algo_policy_test.cc).
//
// Contract:
// - first_usable(): index of the first candidate (heuristics order, best first)
//   whose status is `success`, -1 when none is.
// - plan_for(found, dtype): kNative when an algorithm was found; without one,
//   kFloat32 for float16/bfloat16 (the convolution is computed in float32 and
//   the result converted: cuDNN's legacy API often has no 16-bit NCHW algorithm
//   on a given GPU), kError for float32/float64 (nothing to fall back to).
// - note_float32_fallback() counts fallbacks (float32_fallbacks(), for tests and
//   diagnosis) and returns true the first time, so the caller prints one line.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace weft::cuda {

struct AlgoCandidate {
  int algo;
  int status;
  int math;
  size_t memory;
};

int first_usable(const AlgoCandidate* candidates, int n, int success);

enum class ConvPlan { kNative, kFloat32, kError };
ConvPlan plan_for(bool found, DType dtype);

bool note_float32_fallback();
int64_t float32_fallbacks();

}  // namespace weft::cuda
