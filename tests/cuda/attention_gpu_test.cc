// scaled_dot_product_attention on CUDA (cuBLAS GEMMs + the CUDA attn_softmax
// kernels) against the CPU: causal and not, L != S, odd sizes, forward and
// gradients of q, k, v, every float dtype, and float64 gradcheck through the GPU.
// Needs the attn_softmax CUDA kernels (kern_red); without them the op reports
// "has no kernel for cuda/...".
#include <gtest/gtest.h>

#include "autograd/gradcheck.h"
#include "core/nn_ops.h"
#include "core/ops.h"
#include "tests/cuda/gpu_testing.h"

namespace weft {
namespace {
using testing::kGPU;
using testing::matches_cpu;
using testing::rnd;

std::vector<Tensor> sdpa_fwd_bwd(const std::vector<Tensor>& in, bool causal) {
  Tensor q = in[0].detach().requires_grad_(), k = in[1].detach().requires_grad_(), v = in[2].detach().requires_grad_();
  Tensor y = scaled_dot_product_attention(q, k, v, causal);
  y.backward(rnd(y.sizes(), y.dtype(), 9).to(y.device()));
  return {y.detach(), q.grad(), k.grad(), v.grad()};
}

TEST(CudaAttention, MatchesCpu) {
  WEFT_REQUIRE_GPU();
  struct S {
    int64_t B, H, L, S_, D, Dv;
  };
  const S shapes[] = {{1, 1, 1, 1, 1, 1}, {2, 3, 7, 7, 8, 8}, {1, 2, 5, 9, 16, 4}, {2, 4, 127, 127, 64, 64}};
  for (DType dt : {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16})
    for (const S& s : shapes)
      for (bool causal : {false, true}) {
        std::vector<Tensor> in{rnd({s.B, s.H, s.L, s.D}, dt, 1), rnd({s.B, s.H, s.S_, s.D}, dt, 2),
                               rnd({s.B, s.H, s.S_, s.Dv}, dt, 3)};
        const double tol = dt == DType::Float32    ? 1e-4
                           : dt == DType::BFloat16 ? 5e-2
                           : dt == DType::Float16  ? 1e-2
                                                   : 1e-10;
        EXPECT_TRUE(matches_cpu([causal](const std::vector<Tensor>& v) { return sdpa_fwd_bwd(v, causal); }, in, tol))
            << dt << " L=" << s.L << " S=" << s.S_ << " causal=" << causal;
      }
}

TEST(CudaAttention, GradcheckFloat64OnGpu) {
  WEFT_REQUIRE_GPU();
  for (bool causal : {false, true}) {
    Tensor q = rnd({1, 2, 4, 3}, DType::Float64, 1).requires_grad_();
    Tensor k = rnd({1, 2, 5, 3}, DType::Float64, 2).requires_grad_();
    Tensor v = rnd({1, 2, 5, 2}, DType::Float64, 3).requires_grad_();
    auto r = autograd::gradcheck(
        [causal](const std::vector<Tensor>& in) {
          return scaled_dot_product_attention(in[0].to(kGPU), in[1].to(kGPU), in[2].to(kGPU), causal).cpu();
        },
        {q, k, v});
    EXPECT_TRUE(r) << "causal=" << causal << ": " << r.message;
  }
}

}  // namespace
}  // namespace weft
