// CUDA matmul (cuBLAS, core/cuda/matmul.cc) against the CPU kernel: every
// transpose combination, odd shapes (1, 7, 127, 1000), batched, broadcast and
// non-uniform batch strides, every float dtype, TF32 on/off, k = 0, poisoned
// outputs through matmul's fresh output, gradcheck in float64 through the GPU.
#include <gtest/gtest.h>

#include "autograd/gradcheck.h"
#include "core/cuda/blas.h"
#include "core/nn_ops.h"
#include "core/ops.h"
#include "tests/cuda/gpu_testing.h"

namespace weft {
namespace {
using testing::kGPU;
using testing::matches_cpu;
using testing::rnd;
using testing::tolerance;

constexpr DType kDtypes[] = {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16};

double tol_for(DType dt, int64_t K) {
  // float32 sums of K products: rounding grows with K
  if (dt == DType::Float32) return K > 200 ? 1e-4 : 2e-5;
  return tolerance(dt);
}

// a (M, K) stored transposed when ta; b (K, N) stored transposed when tb.
Tensor op_input(int64_t r, int64_t c, bool t, DType dt, uint64_t seed) {
  return t ? rnd({c, r}, dt, seed) : rnd({r, c}, dt, seed);
}

TEST(CudaMatmul, TransposeCombosOddShapesEveryDtype) {
  WEFT_REQUIRE_GPU();
  const int64_t shapes[][3] = {{1, 1, 1},      {1, 7, 1},      {7, 1, 7},     {7, 127, 3},
                               {127, 7, 1000}, {1000, 127, 1}, {64, 1000, 65}};
  for (DType dt : kDtypes)
    for (auto& s : shapes)
      for (int ta = 0; ta < 2; ++ta)
        for (int tb = 0; tb < 2; ++tb) {
          const int64_t M = s[0], K = s[1], N = s[2];
          Tensor a = op_input(M, K, ta, dt, 1 + M), b = op_input(K, N, tb, dt, 2 + N);
          auto fn = [ta, tb](const std::vector<Tensor>& in) {
            Tensor x = ta ? transpose(in[0], 0, 1) : in[0];
            Tensor y = tb ? transpose(in[1], 0, 1) : in[1];
            return std::vector<Tensor>{matmul(x, y)};
          };
          EXPECT_TRUE(matches_cpu(fn, {a, b}, tol_for(dt, K)))
              << dt << " M=" << M << " K=" << K << " N=" << N << " ta=" << ta << " tb=" << tb;
        }
}

TEST(CudaMatmul, BatchedBroadcastAndStridedBatches) {
  WEFT_REQUIRE_GPU();
  for (DType dt : kDtypes) {
    // plain batched, transposed batched, broadcast batch dims (stride 0), vector operands
    EXPECT_TRUE(matches_cpu([](const std::vector<Tensor>& in) { return std::vector<Tensor>{bmm(in[0], in[1])}; },
                            {rnd({5, 7, 9}, dt, 1), rnd({5, 9, 3}, dt, 2)}, tol_for(dt, 9)))
        << dt;
    EXPECT_TRUE(matches_cpu(
        [](const std::vector<Tensor>& in) {
          return std::vector<Tensor>{matmul(transpose(in[0], -2, -1), transpose(in[1], -2, -1))};
        },
        {rnd({2, 3, 9, 7}, dt, 3), rnd({2, 3, 5, 9}, dt, 4)}, tol_for(dt, 9)))
        << dt;
    // (2, 1, M, K) @ (1, 4, K, N): batch offsets not a single stride -> copied operands
    EXPECT_TRUE(matches_cpu([](const std::vector<Tensor>& in) { return std::vector<Tensor>{matmul(in[0], in[1])}; },
                            {rnd({2, 1, 7, 11}, dt, 5), rnd({1, 4, 11, 6}, dt, 6)}, tol_for(dt, 11)))
        << dt;
    // (3, M, K) @ (3 broadcast from 1, K, N): uniform stride 0 for b
    EXPECT_TRUE(matches_cpu([](const std::vector<Tensor>& in) { return std::vector<Tensor>{matmul(in[0], in[1])}; },
                            {rnd({3, 7, 11}, dt, 7), rnd({1, 11, 6}, dt, 8)}, tol_for(dt, 11)))
        << dt;
    // batch dims sliced (non-contiguous batches with a uniform stride), 1-D operands
    EXPECT_TRUE(matches_cpu(
        [](const std::vector<Tensor>& in) {
          Tensor a = slice(in[0], 0, 0, 6, 2);
          return std::vector<Tensor>{matmul(a, in[1]), matmul(in[2], in[1]), matmul(in[1], in[3])};
        },
        {rnd({6, 5, 8}, dt, 9), rnd({3, 8, 4}, dt, 10), rnd({8}, dt, 11), rnd({4}, dt, 12)}, tol_for(dt, 8)))
        << dt;
    EXPECT_TRUE(matches_cpu([](const std::vector<Tensor>& in) { return std::vector<Tensor>{matmul(in[0], in[1])}; },
                            {rnd({2, 3, 5, 8}, dt, 13), rnd({8}, dt, 14)}, tol_for(dt, 8)))
        << dt;
  }
}

TEST(CudaMatmul, LinearAndEmptyInnerDim) {
  WEFT_REQUIRE_GPU();
  for (DType dt : kDtypes) {
    EXPECT_TRUE(
        matches_cpu([](const std::vector<Tensor>& in) { return std::vector<Tensor>{linear(in[0], in[1], in[2])}; },
                    {rnd({4, 6, 33}, dt, 1), rnd({17, 33}, dt, 2), rnd({17}, dt, 3)}, tol_for(dt, 33)))
        << dt;
    Tensor z = matmul(empty({3, 0}, {dt, kGPU}), empty({0, 4}, {dt, kGPU}));
    EXPECT_TRUE(testing::tensors_near(z.cpu(), zeros({3, 4}, {dt}), 0)) << dt;
  }
}

TEST(CudaMatmul, TF32IsOptIn) {
  WEFT_REQUIRE_GPU();
  EXPECT_FALSE(cuda::allow_tf32());
  Tensor a = rnd({64, 300}, DType::Float32, 1), b = rnd({300, 48}, DType::Float32, 2);
  auto fn = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{matmul(in[0], in[1])}; };
  EXPECT_TRUE(matches_cpu(fn, {a, b}, 1e-4));
  cuda::set_allow_tf32(true);
  EXPECT_TRUE(matches_cpu(fn, {a, b}, 2e-2));  // 10-bit mantissa inputs
  cuda::set_allow_tf32(false);
  EXPECT_TRUE(matches_cpu(fn, {a, b}, 1e-4));
}

TEST(CudaMatmul, GradcheckFloat64OnGpu) {
  WEFT_REQUIRE_GPU();
  Tensor a = rnd({2, 3, 4}, DType::Float64, 1).requires_grad_();
  Tensor b = rnd({1, 4, 5}, DType::Float64, 2).requires_grad_();
  auto r = autograd::gradcheck(
      [](const std::vector<Tensor>& in) {
        return matmul(in[0].to(kGPU), transpose(in[1].to(kGPU), -2, -1).transpose(-2, -1)).cpu();
      },
      {a, b});
  EXPECT_TRUE(r) << r.message;
  Tensor x = rnd({3, 6}, DType::Float64, 3).requires_grad_();
  Tensor w = rnd({4, 6}, DType::Float64, 4).requires_grad_();
  Tensor bias = rnd({4}, DType::Float64, 5).requires_grad_();
  auto r2 = autograd::gradcheck(
      [](const std::vector<Tensor>& in) { return linear(in[0].to(kGPU), in[1].to(kGPU), in[2].to(kGPU)).cpu(); },
      {x, w, bias});
  EXPECT_TRUE(r2) << r2.message;
}

}  // namespace
}  // namespace weft
