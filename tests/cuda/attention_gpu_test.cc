// scaled_dot_product_attention on CUDA against the CPU: the unfused path (cuBLAS
// GEMMs + the CUDA attn_softmax kernels) for every float dtype, causal and not,
// L != S, odd sizes, forward and gradients of q, k, v, and float64 gradcheck
// through the GPU; and the fused cuDNN path (float16/bfloat16,
// core/cuda/attention_cudnn.cc): forward and q/k/v gradients against the float32
// CPU reference on the same (rounded) inputs, causal and not, L == S and L != S,
// D = 64 and 128, batch and heads > 1, strided (B, T, H, D)-transposed inputs, with
// the fused counters proving the path ran (asserted on sm_90+ with cuDNN >= 9.17),
// plus the cases that must not or cannot use it (head dim 7, dropout in training,
// float32, a declining backward) and still give the right result.
#include <cuda_runtime_api.h>

#include <cmath>

#include <gtest/gtest.h>

#include "autograd/gradcheck.h"
#include "core/cuda/attention_cudnn.h"
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

// ---- fused (cuDNN) path ----------------------------------------------------------

// Where the fused path must run: Hopper or newer with cuDNN >= 9.17 (native SDPA
// forward and backward operations for non-causal, the composite graph for causal).
bool fused_expected() {
  int major = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) != cudaSuccess) return false;
  return major >= 9 && cuda::cudnn_runtime_version() >= 91700;
}

// Output and q, k, v gradients of attention on the inputs' device; g is the output gradient.
std::vector<Tensor> attention_grads(const Tensor& q0, const Tensor& k0, const Tensor& v0, const Tensor& g, bool causal,
                                    double dropout_p = 0.0, bool training = true) {
  Tensor q = q0.detach().requires_grad_(), k = k0.detach().requires_grad_(), v = v0.detach().requires_grad_();
  Tensor y = scaled_dot_product_attention(q, k, v, causal, dropout_p, training);
  y.backward(g);
  return {y.detach(), q.grad(), k.grad(), v.grad()};
}

// ||got - want|| / ||want|| over all elements (got on any device, any float dtype).
double rel_error(const Tensor& got, const Tensor& want) {
  std::vector<double> a = testing::values(got.cpu().to(DType::Float64)), b = testing::values(want.to(DType::Float64));
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) num += (a[i] - b[i]) * (a[i] - b[i]), den += b[i] * b[i];
  return std::sqrt(num / std::max(den, 1e-30));
}

// Fused result (GPU, dtype dt) vs the float32 CPU reference computed from the same
// dt-rounded inputs: every element within tol * (1 + |want|) and the whole tensor
// within rel of the reference in norm.
::testing::AssertionResult matches_reference(const std::vector<Tensor>& got, const std::vector<Tensor>& want,
                                             DType dt) {
  const double tol = dt == DType::BFloat16 ? 5e-2 : 1e-2, rel = dt == DType::BFloat16 ? 2e-2 : 5e-3;
  const char* names[] = {"output", "dq", "dk", "dv"};
  for (size_t i = 0; i < want.size(); ++i) {
    if (!got[i].defined()) return ::testing::AssertionFailure() << names[i] << " undefined";
    if (got[i].dtype() != dt || !got[i].device().is_cuda())
      return ::testing::AssertionFailure() << names[i] << " is " << got[i].dtype() << " on " << got[i].device();
    auto r = testing::tensors_near(got[i].cpu().to(DType::Float32), want[i], tol);
    if (!r) return ::testing::AssertionFailure() << names[i] << ": " << r.message();
    const double e = rel_error(got[i], want[i]);
    if (!(e <= rel)) return ::testing::AssertionFailure() << names[i] << ": relative error " << e << " > " << rel;
  }
  return ::testing::AssertionSuccess();
}

struct FusedShape {
  int64_t B, H, L, S, D;
};

TEST(CudaAttentionFused, MatchesFloat32CpuReference) {
  WEFT_REQUIRE_GPU();
  const bool expect = fused_expected();
  const FusedShape shapes[] = {
      {2, 3, 128, 128, 64},                       // L == S
      {2, 2, 96, 160, 64},                        // L < S
      {2, 2, 160, 96, 128},                       // L > S
      {1, 4, 256, 256, 128}, {3, 2, 77, 77, 64},  // not a multiple of the tile sizes
  };
  for (DType dt : {DType::BFloat16, DType::Float16})
    for (const FusedShape& s : shapes)
      for (bool causal : {false, true}) {
        const uint64_t seed = static_cast<uint64_t>(s.L * 7 + s.D + (causal ? 1 : 0));
        // inputs rounded to dt once, so both sides see the same values
        Tensor q = testing::rnd({s.B, s.H, s.L, s.D}, dt, seed), k = testing::rnd({s.B, s.H, s.S, s.D}, dt, seed + 1),
               v = testing::rnd({s.B, s.H, s.S, s.D}, dt, seed + 2),
               g = testing::rnd({s.B, s.H, s.L, s.D}, dt, seed + 3);
        std::vector<Tensor> want = attention_grads(q.to(DType::Float32), k.to(DType::Float32), v.to(DType::Float32),
                                                   g.to(DType::Float32), causal);
        const int64_t f0 = cuda::sdpa_fused_forward_calls(), b0 = cuda::sdpa_fused_backward_calls();
        std::vector<Tensor> got = attention_grads(q.to(kGPU), k.to(kGPU), v.to(kGPU), g.to(kGPU), causal);
        const std::string where = std::string(dtype_name(dt)) + " B=" + std::to_string(s.B) +
                                  " H=" + std::to_string(s.H) + " L=" + std::to_string(s.L) +
                                  " S=" + std::to_string(s.S) + " D=" + std::to_string(s.D) +
                                  " causal=" + std::to_string(causal);
        if (expect) {
          EXPECT_EQ(cuda::sdpa_fused_forward_calls(), f0 + 1) << where << ": " << cuda::sdpa_fused_last_decline();
          EXPECT_EQ(cuda::sdpa_fused_backward_calls(), b0 + 1) << where << ": " << cuda::sdpa_fused_last_decline();
        }
        EXPECT_TRUE(matches_reference(got, want, dt)) << where;
      }
  if (!expect)
    std::cout << "fused path not asserted (needs sm_90+ and cuDNN >= 9.17; cuDNN " << cuda::cudnn_runtime_version()
              << "); last decline: " << cuda::sdpa_fused_last_decline() << "\n";
}

// q, k, v as the transformer makes them: (B, T, H, D) transposed to (B, H, T, D),
// strides (T*H*D, D, H*D, 1), passed to cuDNN without copies.
TEST(CudaAttentionFused, StridedHeadsLayout) {
  WEFT_REQUIRE_GPU();
  const int64_t B = 2, T = 128, H = 4, D = 64;
  for (bool causal : {false, true}) {
    std::vector<Tensor> base;
    for (uint64_t i = 0; i < 3; ++i) base.push_back(testing::rnd({B, T, H, D}, DType::BFloat16, 40 + i));
    Tensor g = testing::rnd({B, H, T, D}, DType::BFloat16, 44);
    std::vector<Tensor> want =
        attention_grads(base[0].to(DType::Float32).transpose(1, 2), base[1].to(DType::Float32).transpose(1, 2),
                        base[2].to(DType::Float32).transpose(1, 2), g.to(DType::Float32), causal);
    Tensor q = base[0].to(kGPU).transpose(1, 2), k = base[1].to(kGPU).transpose(1, 2),
           v = base[2].to(kGPU).transpose(1, 2);
    ASSERT_FALSE(q.is_contiguous());
    const int64_t f0 = cuda::sdpa_fused_forward_calls();
    std::vector<Tensor> got = attention_grads(q, k, v, g.to(kGPU), causal);
    if (fused_expected()) {
      EXPECT_EQ(cuda::sdpa_fused_forward_calls(), f0 + 1)
          << "causal=" << causal << ": " << cuda::sdpa_fused_last_decline();
    }
    EXPECT_TRUE(matches_reference(got, want, DType::BFloat16)) << "causal=" << causal;
  }
}

// Head dim 7: cuDNN cannot run it, the kernel declines and the unfused path answers.
TEST(CudaAttentionFused, DeclinedHeadDimFallsBack) {
  WEFT_REQUIRE_GPU();
  for (bool causal : {false, true}) {
    Tensor q = testing::rnd({2, 3, 9, 7}, DType::BFloat16, 5), k = testing::rnd({2, 3, 11, 7}, DType::BFloat16, 6),
           v = testing::rnd({2, 3, 11, 7}, DType::BFloat16, 7), g = testing::rnd({2, 3, 9, 7}, DType::BFloat16, 8);
    std::vector<Tensor> want =
        attention_grads(q.to(DType::Float32), k.to(DType::Float32), v.to(DType::Float32), g.to(DType::Float32), causal);
    const int64_t f0 = cuda::sdpa_fused_forward_calls(), b0 = cuda::sdpa_fused_backward_calls();
    std::vector<Tensor> got = attention_grads(q.to(kGPU), k.to(kGPU), v.to(kGPU), g.to(kGPU), causal);
    EXPECT_EQ(cuda::sdpa_fused_forward_calls(), f0);
    EXPECT_EQ(cuda::sdpa_fused_backward_calls(), b0);
    EXPECT_NE(cuda::sdpa_fused_last_decline().find("head dims D=7"), std::string::npos)
        << cuda::sdpa_fused_last_decline();
    EXPECT_TRUE(matches_reference(got, want, DType::BFloat16)) << "causal=" << causal;
  }
}

// The fused forward ran but the fused backward declines (disabled in between): the
// node recomputes the gradient with the unfused math.
TEST(CudaAttentionFused, DecliningBackwardStillGivesTheGradient) {
  WEFT_REQUIRE_GPU();
  if (!fused_expected()) GTEST_SKIP() << "fused path not available here";
  for (bool causal : {false, true}) {
    Tensor q0 = testing::rnd({2, 2, 64, 64}, DType::Float16, 11), k0 = testing::rnd({2, 2, 80, 64}, DType::Float16, 12),
           v0 = testing::rnd({2, 2, 80, 64}, DType::Float16, 13), g = testing::rnd({2, 2, 64, 64}, DType::Float16, 14);
    std::vector<Tensor> want = attention_grads(q0.to(DType::Float32), k0.to(DType::Float32), v0.to(DType::Float32),
                                               g.to(DType::Float32), causal);
    Tensor q = q0.to(kGPU).requires_grad_(), k = k0.to(kGPU).requires_grad_(), v = v0.to(kGPU).requires_grad_();
    const int64_t f0 = cuda::sdpa_fused_forward_calls(), b0 = cuda::sdpa_fused_backward_calls();
    Tensor y = scaled_dot_product_attention(q, k, v, causal);
    EXPECT_EQ(cuda::sdpa_fused_forward_calls(), f0 + 1) << cuda::sdpa_fused_last_decline();
    cuda::set_sdpa_fused_enabled(false);
    y.backward(g.to(kGPU));
    cuda::set_sdpa_fused_enabled(true);
    EXPECT_EQ(cuda::sdpa_fused_backward_calls(), b0);
    EXPECT_TRUE(matches_reference({y.detach(), q.grad(), k.grad(), v.grad()}, want, DType::Float16))
        << "causal=" << causal;
  }
}

// Dropout in training and float32 take the unfused path; dropout outside training
// (inactive) takes the fused one.
TEST(CudaAttentionFused, OnlyWhereItApplies) {
  WEFT_REQUIRE_GPU();
  Tensor q = testing::rnd({1, 2, 64, 64}, DType::BFloat16, 21).to(kGPU);
  int64_t f0 = cuda::sdpa_fused_forward_calls();
  Tensor y = scaled_dot_product_attention(q, q, q, true, 0.5, /*training=*/true);
  EXPECT_EQ(cuda::sdpa_fused_forward_calls(), f0) << "dropout in training must not use the fused path";
  y = scaled_dot_product_attention(q.to(DType::Float32), q.to(DType::Float32), q.to(DType::Float32), true);
  EXPECT_EQ(cuda::sdpa_fused_forward_calls(), f0) << "float32 has no fused kernel";
  Tensor inactive = scaled_dot_product_attention(q, q, q, true, 0.5, /*training=*/false);
  if (fused_expected()) {
    EXPECT_EQ(cuda::sdpa_fused_forward_calls(), f0 + 1) << cuda::sdpa_fused_last_decline();
  }
  Tensor qf = q.to(DType::Float32).cpu();
  EXPECT_TRUE(
      testing::tensors_near(inactive.cpu().to(DType::Float32), scaled_dot_product_attention(qf, qf, qf, true), 5e-2));
}

}  // namespace
}  // namespace weft
