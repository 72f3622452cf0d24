// The convolution algorithm policy (core/cuda/conv_algo_policy.h): no algorithm
// from cuDNN's heuristics means float32 for 16-bit types, an error otherwise.
#include "core/cuda/conv_algo_policy.h"

#include <gtest/gtest.h>

namespace weft::cuda {
namespace {

constexpr int kOk = 0, kNotSupported = 9;

TEST(ConvAlgoPolicy, FirstCandidateThatSucceeds) {
  AlgoCandidate c[] = {{6, kNotSupported, 1, 0}, {1, kOk, 1, 1024}, {0, kOk, 0, 0}};
  EXPECT_EQ(first_usable(c, 3, kOk), 1);
  EXPECT_EQ(first_usable(c, 1, kOk), -1);
  EXPECT_EQ(first_usable(c, 0, kOk), -1);
}

TEST(ConvAlgoPolicy, NoAlgorithmFallsBackToFloat32For16BitTypes) {
  EXPECT_EQ(plan_for(true, DType::BFloat16), ConvPlan::kNative);
  EXPECT_EQ(plan_for(false, DType::BFloat16), ConvPlan::kFloat32);
  EXPECT_EQ(plan_for(false, DType::Float16), ConvPlan::kFloat32);
  EXPECT_EQ(plan_for(false, DType::Float32), ConvPlan::kError);
  EXPECT_EQ(plan_for(false, DType::Float64), ConvPlan::kError);
}

TEST(ConvAlgoPolicy, FallbacksAreCountedAndReportedOnce) {
  const int64_t before = float32_fallbacks();
  const bool first = note_float32_fallback();
  EXPECT_EQ(first, before == 0);
  EXPECT_FALSE(note_float32_fallback());
  EXPECT_EQ(float32_fallbacks(), before + 2);
}

}  // namespace
}  // namespace weft::cuda
