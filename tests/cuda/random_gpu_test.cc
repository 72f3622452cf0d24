// CUDA random kernels (core/cuda/random.cu) against the CPU kernels: for the
// same (seed, offset), rand/uniform_/randint/bernoulli/dropout give identical
// numbers on both devices (compared exactly), randn/normal_ agree to the ulp
// differences of the CUDA and host log/cos. Odd sizes exercise partial Philox
// blocks; offsets are advanced by earlier draws of odd lengths. Skips without a GPU.
#include <functional>
#include <vector>

#include <gtest/gtest.h>

#include "core/ops.h"
#include "core/rng.h"
#include "tests/cuda/gpu_testing.h"

namespace weft {
namespace {
using testing::kGPU;
using testing::tensors_near;

const std::vector<DType> kFloat = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16};
const std::vector<Shape> kShapes = {{1}, {3}, {4097}, {3, 5, 7}, {70001}};

// Runs draw(device) after seeding with `seed` and drawing `skip` float32 values
// first (so the draw starts at a nonzero offset), on the CPU and on the GPU.
std::pair<Tensor, Tensor> both(uint64_t seed, int64_t skip, const std::function<Tensor(Device)>& draw) {
  manual_seed(seed);
  if (skip) rand({skip});
  Tensor want = draw(kCPU);
  auto after_cpu = get_rng_state();
  manual_seed(seed);
  if (skip) rand({skip});
  Tensor got = draw(kGPU);
  EXPECT_EQ(get_rng_state(), after_cpu) << "the GPU draw must advance the generator like the CPU draw";
  EXPECT_TRUE(got.device().is_cuda());
  return {got.cpu(), want};
}

TEST(CudaRandom, UniformIsBitwiseEqualToCpu) {
  WEFT_REQUIRE_GPU();
  for (DType dt : kFloat)
    for (const Shape& s : kShapes)
      for (uint64_t seed : {0ull, 42ull, 0x123456789abcdefull})
        for (int64_t skip : {0, 5}) {
          auto [got, want] = both(seed, skip, [&](Device d) { return rand(s, {dt, d}); });
          EXPECT_TRUE(tensors_near(got, want, 0)) << dt << " " << shape_str(s) << " seed " << seed;
          auto [g2, w2] = both(seed, skip, [&](Device d) {
            Tensor t = empty(s, {dt, d});
            uniform_(t, -3.7, 5.3);
            return t;
          });
          EXPECT_TRUE(tensors_near(g2, w2, 0)) << "uniform_(-3.7, 5.3) " << dt << " " << shape_str(s);
        }
  // non-contiguous destination (drawn densely, then copied)
  auto [got, want] = both(7, 3, [](Device d) {
    Tensor t = zeros({40, 30}, {DType::Float32, d});
    Tensor v = t.t();
    uniform_(v, 0.0, 2.0);
    return t;
  });
  EXPECT_TRUE(tensors_near(got, want, 0));
}

TEST(CudaRandom, NormalMatchesCpu) {
  WEFT_REQUIRE_GPU();
  for (DType dt : kFloat)
    for (const Shape& s : kShapes)
      for (uint64_t seed : {1ull, 99ull}) {
        // float32: log/cos of CUDA and glibc may differ by an ulp or two
        double tol = dt == DType::Float32 ? 2e-6 : dt == DType::Float64 ? 1e-13 : testing::tolerance(dt);
        auto [got, want] = both(seed, 3, [&](Device d) { return randn(s, {dt, d}); });
        EXPECT_TRUE(tensors_near(got, want, tol)) << dt << " " << shape_str(s);
        auto [g2, w2] = both(seed, 0, [&](Device d) {
          Tensor t = empty(s, {dt, d});
          normal_(t, 1.5, 0.25);
          return t;
        });
        EXPECT_TRUE(tensors_near(g2, w2, tol)) << "normal_(1.5, 0.25) " << dt << " " << shape_str(s);
      }
}

TEST(CudaRandom, RandintIsEqualToCpu) {
  WEFT_REQUIRE_GPU();
  for (DType dt :
       {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int64, DType::Int32, DType::UInt8})
    for (const Shape& s : kShapes) {
      auto [got, want] = both(5, 1, [&](Device d) { return randint(0, 200, s, {dt, d}); });
      EXPECT_TRUE(tensors_near(got, want, 0)) << dt << " " << shape_str(s);
      if (dt == DType::UInt8) continue;
      auto [g2, w2] = both(6, 0, [&](Device d) { return randint(-7, 3, s, {dt, d}); });
      EXPECT_TRUE(tensors_near(g2, w2, 0)) << dt << " " << shape_str(s);
    }
  auto [got, want] = both(8, 2, [](Device d) {
    return randint(-(int64_t{1} << 40), int64_t{1} << 41, {1001}, {DType::Int64, d});
  });
  EXPECT_TRUE(tensors_near(got, want, 0));
}

TEST(CudaRandom, BernoulliAndDropoutMasksAreEqualToCpu) {
  WEFT_REQUIRE_GPU();
  for (DType dt : kFloat)
    for (const Shape& s : kShapes) {
      manual_seed(11);
      Tensor p = rand(s, {dt, kCPU});
      auto [got, want] = both(12, 1, [&](Device d) { return bernoulli(p.to(d)); });
      EXPECT_TRUE(tensors_near(got, want, 0)) << "bernoulli " << dt << " " << shape_str(s);
      for (double prob : {0.1, 0.5, 0.9}) {
        Tensor x = ones(s, {dt, kCPU});
        auto [g2, w2] = both(13, 5, [&](Device d) { return dropout(x.to(d), prob, true); });
        EXPECT_TRUE(tensors_near(g2, w2, 0)) << "dropout p=" << prob << " " << dt << " " << shape_str(s);
      }
    }
  // the mask really is random: about half the elements dropped
  manual_seed(3);
  Tensor m = dropout(ones({10000}, {DType::Float32, kGPU}), 0.5, true).cpu();
  double kept = sum(ne(m, zeros({}, {DType::Float32}))).to(DType::Float64).item<double>();
  EXPECT_GT(kept, 4700);
  EXPECT_LT(kept, 5300);
}

}  // namespace
}  // namespace weft
