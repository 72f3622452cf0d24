// Convolution algorithm policy (core/cuda/conv_algo_policy.h).
#include "core/cuda/conv_algo_policy.h"

#include <atomic>

namespace weft::cuda {

namespace {
std::atomic<int64_t> g_fallbacks{0};
}

int first_usable(const AlgoCandidate* candidates, int n, int success) {
  for (int i = 0; i < n; ++i)
    if (candidates[i].status == success) return i;
  return -1;
}

ConvPlan plan_for(bool found, DType dtype) {
  if (found) return ConvPlan::kNative;
  return dtype == DType::Float16 || dtype == DType::BFloat16 ? ConvPlan::kFloat32 : ConvPlan::kError;
}

bool note_float32_fallback() { return g_fallbacks.fetch_add(1) == 0; }

int64_t float32_fallbacks() { return g_fallbacks.load(); }

}  // namespace weft::cuda
