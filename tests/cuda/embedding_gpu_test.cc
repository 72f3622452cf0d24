// CUDA embedding through the public op (core/nn_ops.h): forward (every registered
// dtype) and backward (floating dtypes, repeated indices so rows accumulate) against
// the CPU kernels, GPU-resident indices of several shapes, an out-of-range index on
// the GPU raising a weft::Error naming it, and float64 gradcheck with the op on the GPU.
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "core/nn_ops.h"
#include "tests/cuda/gpu_gradcheck.h"
#include "tests/cuda/gpu_testing.h"

namespace weft {
namespace {
using testing::kGPU;
using testing::matches_cpu;
using testing::rnd;

// int64 indices in [0, V) of shape `s` (LCG; repeats are likely when numel > V).
Tensor indices(const Shape& s, int64_t V, uint64_t seed) {
  std::vector<int64_t> v(numel_of(s));
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 99;
  for (auto& e : v) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    e = static_cast<int64_t>((x >> 33) % static_cast<uint64_t>(V));
  }
  return tensor(v, s);
}

TEST(CudaEmbedding, ForwardMatchesCpuAllDtypes) {
  WEFT_REQUIRE_GPU();
  for (DType dt :
       {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int64, DType::Int32, DType::UInt8}) {
    Tensor w = mul(rnd({11, 7}, DType::Float64, 1), scalar_tensor(50.0)).to(dt);
    if (dt == DType::UInt8)
      w = mul(add(rnd({11, 7}, DType::Float64, 1), scalar_tensor(1.0)), scalar_tensor(100.0)).to(dt);
    for (Shape s : {Shape{}, Shape{1}, Shape{5}, Shape{3, 4}, Shape{2, 3, 5}}) {
      Tensor i = indices(s, 11, 2);
      auto fn = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{embedding(in[0], in[1])}; };
      EXPECT_TRUE(matches_cpu(fn, {i, w}, 0)) << dt << " " << shape_str(s);
    }
  }
}

struct Case {
  int64_t V, D, n;
};
// n > V repeats rows; D = 513 is not a multiple of a warp; V = 1000 spreads the rows.
const Case kCases[] = {{5, 3, 40}, {1000, 64, 300}, {7, 1, 1}, {3, 513, 70}};

TEST(CudaEmbedding, BackwardMatchesCpu) {
  WEFT_REQUIRE_GPU();
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16})
    for (const Case& c : kCases) {
      const int64_t V = c.V, D = c.D, n = c.n;
      Tensor w = rnd({V, D}, dt, 3);
      Tensor i = indices({n}, V, 4);
      Tensor g = rnd({n, D}, dt, 5);
      auto fn = [](const std::vector<Tensor>& in) {
        Tensor ww = in[1].detach().requires_grad_(true);
        Tensor y = embedding(in[0], ww);
        y.backward(in[2]);
        return std::vector<Tensor>{y.detach(), ww.grad()};
      };
      // Atomic accumulation order differs from the CPU's sequential one (rounding only).
      const double tol = testing::tolerance(dt) * (dt == DType::Float32 ? 50 : 4);
      EXPECT_TRUE(matches_cpu(fn, {i, w, g}, tol)) << dt << " V " << V << " D " << D << " n " << n;
    }
  // 2-D indices: gradient rows accumulate across both index dims.
  Tensor w = rnd({6, 4}, DType::Float32, 6), i = indices({3, 5}, 6, 7), g = rnd({3, 5, 4}, DType::Float32, 8);
  auto fn2 = [](const std::vector<Tensor>& in) {
    Tensor ww = in[1].detach().requires_grad_(true);
    embedding(in[0], ww).backward(in[2]);
    return std::vector<Tensor>{ww.grad()};
  };
  EXPECT_TRUE(matches_cpu(fn2, {i, w, g}, 1e-5 * 50));
}

TEST(CudaEmbedding, OutOfRangeIndexOnGpuIsAnError) {
  WEFT_REQUIRE_GPU();
  Tensor w = rnd({4, 3}, DType::Float32, 9).to(kGPU);
  // Note [deferred index checks]: reported at the next synchronisation (here .cpu())
  EXPECT_WEFT_ERROR(embedding(tensor(std::vector<int64_t>{0, 4, 1}, {3}).to(kGPU), w).cpu(),
                    "embedding: index 4 is out of bounds");
  EXPECT_WEFT_ERROR(embedding(tensor(std::vector<int64_t>{-1}, {1, 1}).to(kGPU), w).cpu(),
                    "embedding: index -1 is out of bounds");
  Tensor later = embedding(tensor(std::vector<int64_t>{5}, {1}).to(kGPU), w);  // no synchronisation yet
  EXPECT_WEFT_ERROR(cuda::synchronize(0), "embedding: index 5 is out of bounds");
  (void)later;
  // still usable afterwards
  Tensor ok = tensor(std::vector<int64_t>{3, 0}, {2});
  EXPECT_TRUE(testing::tensors_near(embedding(ok.to(kGPU), w).cpu(), embedding(ok, w.cpu()), 0));
}

TEST(CudaEmbedding, GradcheckFloat64OnGpu) {
  WEFT_REQUIRE_GPU();
  Tensor i = indices({2, 4}, 5, 10).to(kGPU);
  auto r = testing::gpu_gradcheck([i](const std::vector<Tensor>& in) { return embedding(i, in[0]); },
                                  {rnd({5, 3}, DType::Float64, 11)});
  EXPECT_TRUE(r) << r.message;
}

}  // namespace
}  // namespace weft
