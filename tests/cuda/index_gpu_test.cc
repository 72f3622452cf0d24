// CUDA gather / scatter_add / index_select / index_add / masked_fill / tril / triu
// against the CPU (indices stay on the CPU, as the front ends require), gradcheck of
// gather, and the device-side range check of a GPU-resident index (table call).
#include <gtest/gtest.h>

#include "autograd/gradcheck.h"
#include "core/kernels/index.h"
#include "tests/cuda/gpu_testing.h"

namespace weft {
namespace {
using testing::kGPU;
using testing::rnd;
using testing::tensors_near;

Tensor idx_tensor(const Shape& s, int64_t bound, uint64_t seed) {
  Tensor r = add(rnd(s, DType::Float64, seed), scalar_tensor(1.0));
  return mul(r, scalar_tensor(0.5 * bound - 1e-9)).to(DType::Int64);  // [0, bound)
}

TEST(CudaIndex, MatchesCpu) {
  WEFT_REQUIRE_GPU();
  for (DType dt :
       {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int64, DType::Int32, DType::UInt8}) {
    Tensor a = (rnd({6, 7, 5}, DType::Float64, 1) * 10).to(dt), ga = a.to(kGPU);
    Tensor ig = idx_tensor({6, 4, 5}, 7, 2);
    EXPECT_TRUE(tensors_near(gather(ga, 1, ig).cpu(), gather(a, 1, ig), 0)) << dt;
    EXPECT_TRUE(tensors_near(gather(ga.transpose(0, 2), 2, idx_tensor({5, 7, 3}, 6, 3)).cpu(),
                             gather(a.transpose(0, 2), 2, idx_tensor({5, 7, 3}, 6, 3)), 0));
    Tensor src = (rnd({6, 4, 5}, DType::Float64, 4) * 10).to(dt);
    double tol = testing::tolerance(dt) * 10;
    EXPECT_TRUE(tensors_near(scatter_add(ga, 1, ig, src.to(kGPU)).cpu(), scatter_add(a, 1, ig, src), tol)) << dt;
    Tensor i1 = idx_tensor({9}, 7, 5);
    EXPECT_TRUE(tensors_near(index_select(ga, 1, i1).cpu(), index_select(a, 1, i1), 0)) << dt;
    Tensor s2 = (rnd({6, 9, 5}, DType::Float64, 6) * 10).to(dt);
    EXPECT_TRUE(tensors_near(index_add(ga, 1, i1, s2.to(kGPU)).cpu(), index_add(a, 1, i1, s2), tol)) << dt;
    Tensor m = gt(rnd({7, 5}, DType::Float64, 7), scalar_tensor(0.0));
    EXPECT_TRUE(tensors_near(masked_fill(ga, m.to(kGPU), 3).cpu(), masked_fill(a, m, 3), 0)) << dt;
    for (int64_t dg : {-2, 0, 3}) {
      EXPECT_TRUE(tensors_near(tril(ga, dg).cpu(), tril(a, dg), 0));
      EXPECT_TRUE(tensors_near(triu(ga, dg).cpu(), triu(a, dg), 0));
    }
  }
}

TEST(CudaIndex, BadGpuIndexIsAnErrorNotACrash) {
  WEFT_REQUIRE_GPU();
  Tensor self = rnd({3, 4}, DType::Float32, 1).to(kGPU);
  Tensor out = testing::poisoned_empty({3, 2}, DType::Float32);
  Tensor bad = tensor(std::vector<double>{0, 1, 2, 9, 1, 1}, {3, 2}).to(DType::Int64).to(kGPU);
  EXPECT_WEFT_ERROR(gather_table()(kGPU, DType::Float32, out, self, bad, 1), "index 9 is out of bounds");
  EXPECT_WEFT_ERROR(gather(self, 1, tensor(std::vector<double>{0, 5}, {1, 2}).to(DType::Int64)), "index 5");
}

TEST(CudaIndex, GatherGradcheckFloat64OnGpu) {
  WEFT_REQUIRE_GPU();
  Tensor x = rnd({4, 5}, DType::Float64, 3).to(kGPU).requires_grad_(true);
  Tensor i = idx_tensor({4, 3}, 5, 8);
  auto r = autograd::gradcheck([i](const std::vector<Tensor>& in) { return gather(in[0], 1, i); }, {x});
  EXPECT_TRUE(r) << r.message;
}

}  // namespace
}  // namespace weft
