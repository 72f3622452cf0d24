// CUDA gather / scatter_add / index_select / index_add / masked_fill / tril / triu /
// one_hot against the CPU (indices on the GPU, as PyTorch requires; a CPU index
// with a GPU input is a device error), gradcheck of gather, and the device-side
// range check of a GPU-resident index (table call and front ends).
#include <gtest/gtest.h>

#include "core/kernels/index.h"
#include "tests/cuda/gpu_gradcheck.h"
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
    EXPECT_TRUE(tensors_near(gather(ga, 1, ig.to(kGPU)).cpu(), gather(a, 1, ig), 0)) << dt;
    EXPECT_TRUE(tensors_near(gather(ga.transpose(0, 2), 2, idx_tensor({5, 7, 3}, 6, 3).to(kGPU)).cpu(),
                             gather(a.transpose(0, 2), 2, idx_tensor({5, 7, 3}, 6, 3)), 0));
    Tensor src = (rnd({6, 4, 5}, DType::Float64, 4) * 10).to(dt);
    double tol = testing::tolerance(dt) * 10;
    EXPECT_TRUE(tensors_near(scatter_add(ga, 1, ig.to(kGPU), src.to(kGPU)).cpu(), scatter_add(a, 1, ig, src), tol))
        << dt;
    Tensor i1 = idx_tensor({9}, 7, 5);
    EXPECT_TRUE(tensors_near(index_select(ga, 1, i1.to(kGPU)).cpu(), index_select(a, 1, i1), 0)) << dt;
    Tensor s2 = (rnd({6, 9, 5}, DType::Float64, 6) * 10).to(dt);
    EXPECT_TRUE(
        tensors_near(index_add(ga, 1, i1.to(DType::Int32).to(kGPU), s2.to(kGPU)).cpu(), index_add(a, 1, i1, s2), tol))
        << dt;
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
  // Note [deferred index checks]: reported at the next synchronisation (here .cpu())
  EXPECT_WEFT_ERROR((gather_table()(kGPU, DType::Float32, out, self, bad, 1), out.cpu()), "index 9 is out of bounds");
  // a CPU index with a GPU input is rejected (PyTorch's rule), before any range check
  EXPECT_WEFT_ERROR(gather(self, 1, tensor(std::vector<double>{0, 5}, {1, 2}).to(DType::Int64)),
                    "gather: expected all tensors on the same device");
  // GPU-resident indices through the front ends: checked on the device.
  Tensor bad_gpu = tensor(std::vector<double>{0, 5}, {1, 2}).to(DType::Int64).to(kGPU);
  EXPECT_WEFT_ERROR(gather(self, 1, bad_gpu).cpu(), "gather: index 5 is out of bounds");
  EXPECT_WEFT_ERROR(index_select(self, 1, tensor(std::vector<double>{-1}, {1}).to(DType::Int64).to(kGPU)).cpu(),
                    "index_select: index -1 is out of bounds");
  // the first bad index of several unsynchronised ops is the one reported
  Tensor a = gather(self, 1, bad_gpu);
  Tensor b = index_select(self, 1, tensor(std::vector<double>{7}, {1}).to(DType::Int64).to(kGPU));
  EXPECT_WEFT_ERROR(b.cpu(), "gather: index 5 is out of bounds");
  (void)a;
  // and the log is clear afterwards
  Tensor ok = tensor(std::vector<double>{1, 0, 3}, {3, 1}).to(DType::Int64);
  EXPECT_TRUE(tensors_near(gather(self, 1, ok.to(kGPU)).cpu(), gather(self.cpu(), 1, ok), 0));
}

TEST(CudaIndex, OneHotOnGpuMatchesCpu) {
  WEFT_REQUIRE_GPU();
  Tensor i = idx_tensor({4, 5}, 6, 9);
  for (int64_t nc : {int64_t(-1), int64_t(6), int64_t(9)}) {
    Tensor got = one_hot(i.to(kGPU), nc);
    EXPECT_TRUE(got.device().is_cuda());
    EXPECT_EQ(got.dtype(), DType::Int64);
    EXPECT_TRUE(tensors_near(got.cpu(), one_hot(i, nc), 0)) << nc;
  }
  EXPECT_TRUE(tensors_near(one_hot(i.to(DType::Int32).to(kGPU), 6).cpu(), one_hot(i, 6), 0));
  Tensor bad = tensor(std::vector<double>{0, 3, 7}, {3}).to(DType::Int64).to(kGPU);
  EXPECT_WEFT_ERROR(one_hot(bad, 5), "one_hot: index 7 is out of bounds for num_classes 5");
  Tensor neg = tensor(std::vector<double>{0, -2}, {2}).to(DType::Int64).to(kGPU);
  EXPECT_WEFT_ERROR(one_hot(neg, 5), "one_hot: index -2 is out of bounds for num_classes 5");
  EXPECT_EQ(one_hot(empty({0}, {DType::Int64, kGPU}), 4).sizes(), (Shape{0, 4}));
}

TEST(CudaIndex, GatherGradcheckFloat64OnGpu) {
  WEFT_REQUIRE_GPU();
  Tensor x = rnd({4, 5}, DType::Float64, 3);
  Tensor i = idx_tensor({4, 3}, 5, 8).to(kGPU);
  auto r = testing::gpu_gradcheck([i](const std::vector<Tensor>& in) { return gather(in[0], 1, i); }, {x});
  EXPECT_TRUE(r) << r.message;
}

}  // namespace
}  // namespace weft
