// The CPU's fused attention (core/cpu/flash_attention.cc, registered for float32
// in sdpa_fused_table): scaled_dot_product_attention in float32 takes the fused
// node, and its output and gradients match the unfused path computed in float64
// from the same values -- causal and not, L < S and L > S, sizes that are not
// multiples of the 64-row blocks or of 16 lanes, head dims above 64, Dv != D,
// q/k/v as strided views of one qkv tensor (as MultiheadAttention passes them),
// a non-contiguous output gradient. Also: the same answer as the unfused float32
// path, bitwise independence of the thread count, and the transformer block's
// gradients with and without the kernel. bfloat16 q, k, v (CPU autocast) take
// the same kernels widened: against float64 from the same bfloat16 values, and
// closer to it than the unfused bfloat16 path. Skipped where the CPU lacks AVX-512.
#include <algorithm>
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "core/autocast.h"
#include "core/autograd_meta.h"
#include "core/cpu/flash_attention.h"
#include "core/nn_ops.h"
#include "core/ops.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "nn/transformer.h"
#include "tests/testing.h"

namespace weft {
namespace {
using testing::rnd;
using testing::tensors_near;

struct Result {
  Tensor out, dq, dk, dv;
  std::string node;
};

Result run(const Tensor& q0, const Tensor& k0, const Tensor& v0, const Tensor& g, bool causal) {
  Tensor q = q0.detach().requires_grad_(), k = k0.detach().requires_grad_(), v = v0.detach().requires_grad_();
  Tensor y = scaled_dot_product_attention(q, k, v, causal);
  Result r{y.detach(), Tensor(), Tensor(), Tensor(), y.grad_fn() ? y.grad_fn()->name() : ""};
  y.backward(g);
  r.dq = q.grad(), r.dk = k.grad(), r.dv = v.grad();
  return r;
}

Tensor f64(const Tensor& t) { return t.to(DType::Float64); }

// Float32 flash results against a reference (float64 or the unfused float32
// path): outputs and dv to 2e-6, dq and dk (one more product deep) to 2e-5.
void expect_close(const Result& flash, const Result& ref) {
  EXPECT_TRUE(tensors_near(flash.out, ref.out, 2e-6));
  EXPECT_TRUE(tensors_near(flash.dq, ref.dq, 2e-5));
  EXPECT_TRUE(tensors_near(flash.dk, ref.dk, 2e-5));
  EXPECT_TRUE(tensors_near(flash.dv, ref.dv, 2e-6));
}

class FlashCpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cpu::flash_attention_available()) GTEST_SKIP() << "this CPU has no AVX-512F";
  }
  void TearDown() override { cpu::set_flash_attention_enabled(true); }
};

struct Case {
  int64_t B, H, L, S, D, Dv;
};

TEST_F(FlashCpu, MatchesTheFloat64UnfusedPath) {
  const Case cases[] = {{2, 3, 64, 64, 64, 64}, {1, 2, 130, 130, 64, 64}, {2, 1, 100, 37, 24, 40},
                        {1, 2, 37, 100, 72, 8}, {1, 1, 1, 1, 3, 5},       {1, 1, 200, 70, 16, 96},
                        {3, 2, 65, 129, 17, 33}};
  uint64_t seed = 1;
  for (const Case& c : cases)
    for (bool causal : {false, true}) {
      SCOPED_TRACE("B=" + std::to_string(c.B) + " H=" + std::to_string(c.H) + " L=" + std::to_string(c.L) +
                   " S=" + std::to_string(c.S) + " D=" + std::to_string(c.D) + " Dv=" + std::to_string(c.Dv) +
                   (causal ? " causal" : ""));
      Tensor q = rnd({c.B, c.H, c.L, c.D}, DType::Float32, seed++) * 2.0,
             k = rnd({c.B, c.H, c.S, c.D}, DType::Float32, seed++) * 2.0,
             v = rnd({c.B, c.H, c.S, c.Dv}, DType::Float32, seed++),
             g = rnd({c.B, c.H, c.L, c.Dv}, DType::Float32, seed++);
      Result flash = run(q, k, v, g, causal);
      EXPECT_EQ(flash.node, "ScaledDotProductAttentionBackward");
      Result ref = run(f64(q), f64(k), f64(v), f64(g), causal);
      EXPECT_NE(ref.node, "ScaledDotProductAttentionBackward");  // float64: unfused
      expect_close(flash, ref);
    }
}

TEST_F(FlashCpu, StridedViewsOfOneQkvTensorAndAStridedGradient) {
  const int64_t B = 2, T = 90, H = 3, D = 20, C = H * D;
  for (bool causal : {false, true}) {
    Tensor qkv = rnd({B, T, 3 * C}, DType::Float32, 40 + causal);
    std::vector<Tensor> parts = split(qkv, C, 2);
    auto heads = [&](const Tensor& t) { return t.reshape({B, T, H, D}).transpose(1, 2); };  // (B, H, T, D) views
    Tensor q = heads(parts[0]), k = heads(parts[1]), v = heads(parts[2]);
    ASSERT_FALSE(q.is_contiguous());
    Tensor g = rnd({B, T, H, D}, DType::Float32, 50).transpose(1, 2);  // (B, H, T, D), not contiguous
    Result flash = run(q, k, v, g, causal);
    EXPECT_EQ(flash.node, "ScaledDotProductAttentionBackward");
    Result ref = run(f64(q), f64(k), f64(v), f64(g), causal);
    expect_close(flash, ref);
  }
}

TEST_F(FlashCpu, AgreesWithTheUnfusedFloat32Path) {
  Tensor q = rnd({2, 2, 96, 32}, DType::Float32, 60), k = rnd({2, 2, 96, 32}, DType::Float32, 61),
         v = rnd({2, 2, 96, 32}, DType::Float32, 62), g = rnd({2, 2, 96, 32}, DType::Float32, 63);
  Result flash = run(q, k, v, g, true);
  cpu::set_flash_attention_enabled(false);
  Result plain = run(q, k, v, g, true);
  EXPECT_NE(plain.node, "ScaledDotProductAttentionBackward");
  expect_close(flash, plain);
}

TEST_F(FlashCpu, ResultDoesNotDependOnTheThreadCount) {
  Tensor q = rnd({3, 2, 70, 24}, DType::Float32, 70), k = rnd({3, 2, 70, 24}, DType::Float32, 71),
         v = rnd({3, 2, 70, 24}, DType::Float32, 72), g = rnd({3, 2, 70, 24}, DType::Float32, 73);
  const int prev = get_num_threads();
  set_num_threads(1);
  Result one = run(q, k, v, g, true);
  set_num_threads(std::max(2, prev));
  Result many = run(q, k, v, g, true);
  set_num_threads(prev);
  EXPECT_TRUE(tensors_near(one.out, many.out, 0));
  EXPECT_TRUE(tensors_near(one.dq, many.dq, 0));
  EXPECT_TRUE(tensors_near(one.dk, many.dk, 0));
  EXPECT_TRUE(tensors_near(one.dv, many.dv, 0));
}

// The kernels overwrite o, dq, dk and dv whatever they held (the backward stores
// the first product into each block rather than clearing first): outputs
// prefilled with NaN come out bit-equal to outputs prefilled with zeros, for a
// causal L < S whose last key blocks no query sees, and without the mask.
TEST_F(FlashCpu, KernelsOverwriteEveryOutputElement) {
  const int64_t B = 1, H = 2, L = 37, S = 150, D = 24, Dv = 40;
  Tensor q = rnd({B, H, L, D}, DType::Float32, 100), k = rnd({B, H, S, D}, DType::Float32, 101),
         v = rnd({B, H, S, Dv}, DType::Float32, 102), d_o = rnd({B, H, L, Dv}, DType::Float32, 103);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (bool causal : {true, false}) {
    cpu::FlashGeometry g;
    g.batch = B, g.heads = H, g.L = L, g.S = S, g.D = D, g.Dv = Dv;
    g.q_sb = H * L * D, g.q_sh = L * D, g.q_rs = D;
    g.k_sb = H * S * D, g.k_sh = S * D, g.k_rs = D;
    g.v_sb = H * S * Dv, g.v_sh = S * Dv, g.v_rs = Dv;
    g.o_sb = H * L * Dv, g.o_sh = L * Dv, g.o_rs = Dv;
    g.dq_sb = g.q_sb, g.dq_sh = g.q_sh, g.dq_rs = g.q_rs;
    g.dk_sb = g.k_sb, g.dk_sh = g.k_sh, g.dk_rs = g.k_rs;
    g.dv_sb = g.v_sb, g.dv_sh = g.v_sh, g.dv_rs = g.v_rs;
    g.scale = 0.2f, g.causal = causal;
    auto grads = [&](float fill) {
      Tensor o = full({B, H, L, Dv}, fill), lse = full({B * H, L}, fill);
      cpu::flash_attention_forward_f32(g, q.data_ptr<float>(), k.data_ptr<float>(), v.data_ptr<float>(),
                                       o.data_ptr<float>(), lse.data_ptr<float>());
      Tensor dq = full({B, H, L, D}, fill), dk = full({B, H, S, D}, fill), dv = full({B, H, S, Dv}, fill);
      cpu::flash_attention_backward_f32(g, q.data_ptr<float>(), k.data_ptr<float>(), v.data_ptr<float>(),
                                        o.data_ptr<float>(), lse.data_ptr<float>(), d_o.data_ptr<float>(), H * L * Dv,
                                        L * Dv, Dv, dq.data_ptr<float>(), dk.data_ptr<float>(), dv.data_ptr<float>());
      return std::vector<Tensor>{o, dq, dk, dv};
    };
    const std::vector<Tensor> clean = grads(0.0f), dirty = grads(nan);
    for (size_t i = 0; i < clean.size(); ++i) {
      const float* x = dirty[i].data_ptr<float>();
      EXPECT_EQ(std::count_if(x, x + dirty[i].numel(), [](float e) { return std::isnan(e); }), 0)
          << "output " << i << (causal ? " causal" : "");
      EXPECT_TRUE(tensors_near(dirty[i], clean[i], 0)) << "output " << i << (causal ? " causal" : "");
    }
    if (causal) {  // keys L.. are hidden from every query: zero gradients
      EXPECT_EQ(max(abs(clean[2].narrow(2, L, S - L))).item<float>(), 0.0f);
      EXPECT_EQ(max(abs(clean[3].narrow(2, L, S - L))).item<float>(), 0.0f);
    }
  }
}

TEST_F(FlashCpu, TransformerBlockGradientsMatchWithoutTheKernel) {
  auto grads = [](bool flash) {
    cpu::set_flash_attention_enabled(flash);
    manual_seed(5);
    nn::TransformerBlock block(48, 4);
    Tensor x = rnd({2, 40, 48}, DType::Float32, 80).requires_grad_();
    Tensor y = block(x);
    (y * y).sum().backward();
    std::vector<Tensor> out{y.detach(), x.grad()};
    for (auto& p : block.parameters()) out.push_back(p.grad());
    return out;
  };
  std::vector<Tensor> a = grads(true), b = grads(false);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(tensors_near(a[i], b[i], 2e-5)) << "tensor " << i;
}

// The output and the gradients come laid out (B, T, H, D): transpose(1, 2) of
// them is contiguous, so the reshape to (B, T, H * D) after attention, and the
// same steps back, are views.
TEST_F(FlashCpu, OutputAndGradientsAreLaidOutTokensThenHeads) {
  const int64_t B = 2, T = 33, H = 3, D = 16;
  Tensor qkv = rnd({B, T, 3 * H * D}, DType::Float32, 95).requires_grad_();
  std::vector<Tensor> parts = split(qkv, H * D, 2);
  auto heads = [&](const Tensor& t) { return t.reshape({B, T, H, D}).transpose(1, 2); };
  Tensor q = heads(parts[0]).detach().requires_grad_();
  Tensor dq;  // the gradient as the attention node hands it over
  q.register_hook([&](const Tensor& g) {
    dq = g;
    return g;
  });
  Tensor y = scaled_dot_product_attention(q, heads(parts[1]), heads(parts[2]), true);
  EXPECT_TRUE(y.transpose(1, 2).is_contiguous());
  y.transpose(1, 2).reshape({B, T, H * D}).sum().backward();
  ASSERT_TRUE(dq.defined());
  EXPECT_TRUE(dq.transpose(1, 2).is_contiguous());
  Result ref =
      run(f64(heads(parts[0])), f64(heads(parts[1])), f64(heads(parts[2])), ones({B, H, T, D}, DType::Float64), true);
  EXPECT_TRUE(tensors_near(y, ref.out, 2e-6));
  EXPECT_TRUE(tensors_near(q.grad(), ref.dq, 2e-5));
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  std::vector<double> x = testing::values(a), y = testing::values(b);
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

// bfloat16 inputs: every score, probability and sum in float32, the output and
// the gradients rounded to bfloat16 once (relative error 2^-9 each). So the
// output is within 2^-8 (relative, tensor_near's 1 + |x| scale) of float64 on
// the same bfloat16 values; the gradients also carry the rounded output (the
// backward's rowsum(do * o)) and the cancellation in dp - rowsum, so 1e-2.
TEST_F(FlashCpu, Bfloat16InputsTakeTheKernelsWidenedToFloat32) {
  const Case cases[] = {{2, 3, 64, 64, 64, 64}, {1, 2, 130, 130, 64, 64}, {2, 1, 100, 37, 24, 40}};
  uint64_t seed = 100;
  for (const Case& c : cases)
    for (bool causal : {false, true}) {
      SCOPED_TRACE("L=" + std::to_string(c.L) + " S=" + std::to_string(c.S) + (causal ? " causal" : ""));
      Tensor q = rnd({c.B, c.H, c.L, c.D}, DType::BFloat16, seed++) * 2.0,
             k = rnd({c.B, c.H, c.S, c.D}, DType::BFloat16, seed++) * 2.0,
             v = rnd({c.B, c.H, c.S, c.Dv}, DType::BFloat16, seed++),
             g = rnd({c.B, c.H, c.L, c.Dv}, DType::BFloat16, seed++);
      Result flash = run(q, k, v, g, causal);
      EXPECT_EQ(flash.node, "ScaledDotProductAttentionBackward");
      EXPECT_EQ(flash.out.dtype(), DType::BFloat16);
      EXPECT_EQ(flash.dq.dtype(), DType::BFloat16);
      Result ref = run(f64(q), f64(k), f64(v), f64(g), causal);
      EXPECT_TRUE(tensors_near(flash.out, ref.out, 1.0 / 256));
      EXPECT_TRUE(tensors_near(flash.dq, ref.dq, 1e-2));
      EXPECT_TRUE(tensors_near(flash.dk, ref.dk, 1e-2));
      EXPECT_TRUE(tensors_near(flash.dv, ref.dv, 1e-2));
      // the unfused bfloat16 path rounds the scores and probabilities too
      cpu::set_flash_attention_enabled(false);
      Result plain = run(q, k, v, g, causal);
      cpu::set_flash_attention_enabled(true);
      EXPECT_NE(plain.node, "ScaledDotProductAttentionBackward");
      EXPECT_LE(max_abs_diff(flash.out, ref.out), max_abs_diff(plain.out, ref.out));
    }
}

TEST_F(FlashCpu, AutocastSendsFloat32AttentionToTheBfloat16Kernel) {
  Tensor q = rnd({1, 2, 50, 16}, DType::Float32, 90), k = rnd({1, 2, 50, 16}, DType::Float32, 91),
         v = rnd({1, 2, 50, 16}, DType::Float32, 92);
  Tensor y;
  {
    AutocastGuard guard(DeviceType::CPU, DType::BFloat16);
    y = scaled_dot_product_attention(q.detach().requires_grad_(), k, v, true);
  }
  EXPECT_EQ(y.dtype(), DType::BFloat16);
  ASSERT_TRUE(y.grad_fn());
  EXPECT_EQ(y.grad_fn()->name(), "ScaledDotProductAttentionBackward");
  Result ref = run(f64(q.to(DType::BFloat16)), f64(k.to(DType::BFloat16)), f64(v.to(DType::BFloat16)),
                   rnd({1, 2, 50, 16}, DType::Float64, 93), true);
  EXPECT_TRUE(tensors_near(y, ref.out, 1.0 / 256));
}

}  // namespace
}  // namespace weft
