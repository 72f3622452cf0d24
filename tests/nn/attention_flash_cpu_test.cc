// The CPU's fused attention (core/cpu/flash_attention.cc, registered for float32
// in sdpa_fused_table): scaled_dot_product_attention in float32 takes the fused
// node, and its output and gradients match the unfused path computed in float64
// from the same values -- causal and not, L < S and L > S, sizes that are not
// multiples of the 64-row blocks or of 16 lanes, head dims above 64, Dv != D,
// q/k/v as strided views of one qkv tensor (as MultiheadAttention passes them),
// a non-contiguous output gradient. Also: the same answer as the unfused float32
// path, bitwise independence of the thread count, and the transformer block's
// gradients with and without the kernel. bfloat16 q, k, v (CPU autocast) take
// the kernels' bfloat16 entries: with float32 products bit for bit the float32
// kernels on the widened values with rounded outputs; with every kind of
// products (float32, pairs emulated, VDPBF16PS pairs) against float64 from the
// same bfloat16 values, and closer to it than the unfused bfloat16 path; the
// pair products independent of the thread count and VDPBF16PS bit for bit its
// emulation. Every test runs on each path the CPU has (AVX-512, AVX2 + FMA);
// the pair products need AVX-512 (AVX512-BF16 for VDPBF16PS).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <vector>

#include <gtest/gtest.h>

#include "core/autocast.h"
#include "core/autograd_meta.h"
#include "core/cpu/flash_attention.h"
#include "core/error.h"
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

// Every test once per path (cpu::FlashPath): AVX-512 and AVX2 + FMA, each
// where the CPU has it, so an AVX-512 machine tests both.
class FlashCpu : public ::testing::TestWithParam<cpu::FlashPath> {
 protected:
  void SetUp() override {
    if (!cpu::flash_path_available(GetParam()))
      GTEST_SKIP() << "this CPU cannot run the " << cpu::flash_path_name(GetParam()) << " path";
    cpu::set_flash_path(GetParam());
    ASSERT_TRUE(cpu::flash_attention_available());
  }
  void TearDown() override {
    cpu::set_flash_attention_enabled(true);
    cpu::set_flash_path(std::nullopt);
    cpu::set_flash_bf16_products(std::nullopt);
  }
};
INSTANTIATE_TEST_SUITE_P(Paths, FlashCpu, ::testing::Values(cpu::FlashPath::kAvx512, cpu::FlashPath::kAvx2),
                         [](const ::testing::TestParamInfo<cpu::FlashPath>& info) {
                           return std::string(cpu::flash_path_name(info.param));
                         });

struct Case {
  int64_t B, H, L, S, D, Dv;
};

TEST_P(FlashCpu, MatchesTheFloat64UnfusedPath) {
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

// Scores hundreds apart: most probabilities underflow to exactly 0 in float32
// (exp below -104 flushes) and the running maximum jumps between key blocks,
// so the rescaling factor exp(m_old - m_new) underflows too. q and k hold
// multiples of 1/8 and the scale is 1/sqrt(64) = 1/8, so every score is exact
// in float32 and the comparison measures the kernels, not the rounding of
// scores in the hundreds. The output keeps its usual bound; the gradients
// recompute p from the float32 logsumexp, itself in the hundreds here, whose
// ulp (2^-17 at 128-256) bounds p's relative error, hence 1e-4.
TEST_P(FlashCpu, WidelySpreadScoresMatchFloat64) {
  auto eighths = [](const Tensor& t) { return round(t * 8.0) / 8.0; };
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "full");
    Tensor q = eighths(rnd({2, 2, 150, 64}, DType::Float32, 30) * 30.0),
           k = eighths(rnd({2, 2, 150, 64}, DType::Float32, 31) * 3.0), v = rnd({2, 2, 150, 64}, DType::Float32, 32),
           g = rnd({2, 2, 150, 64}, DType::Float32, 33);
    Result flash = run(q, k, v, g, causal);
    EXPECT_EQ(flash.node, "ScaledDotProductAttentionBackward");
    Result ref = run(f64(q), f64(k), f64(v), f64(g), causal);
    EXPECT_TRUE(tensors_near(flash.out, ref.out, 2e-6));
    EXPECT_TRUE(tensors_near(flash.dq, ref.dq, 1e-4));
    EXPECT_TRUE(tensors_near(flash.dk, ref.dk, 1e-4));
    EXPECT_TRUE(tensors_near(flash.dv, ref.dv, 1e-4));
    // the spread is real: some scores of a row lie more than 104 below its maximum
    Tensor s = matmul(q.narrow(2, 0, 64), k.narrow(2, 0, 64).transpose(2, 3)) / 8.0;  // (2, 2, 64, 64)
    EXPECT_GT(max(amax(s, {3}) - amin(s, {3})).item<float>(), 104.0f);
  }
}

TEST_P(FlashCpu, StridedViewsOfOneQkvTensorAndAStridedGradient) {
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

// q, k, v split from one (B, T, 3C) tensor, as nn::MultiheadAttention does: the
// kernels write dq, dk, dv into one buffer laid out like that tensor, so the
// split's backward hands it on as a view (Note [split backward views]): the
// gradient reaching the (B, T, 3C) tensor is the very memory dq was written to.
// Its values match float64 through the unfused path (split, cat and all), in
// float32 and in bfloat16.
TEST_P(FlashCpu, SplitQkvGradientReachesTheQkvTensorWithoutACopy) {
  const int64_t B = 2, T = 90, H = 3, D = 20, C = H * D;
  for (DType dt : {DType::Float32, DType::BFloat16}) {
    SCOPED_TRACE(dt == DType::Float32 ? "float32" : "bfloat16");
    auto grad_of_qkv = [&](const Tensor& x0, const Tensor& g, const void** dq_mem, const void** qkv_mem) {
      Tensor x = x0.detach().requires_grad_();
      Tensor qkv = x * 1.0;  // a non-leaf: its hook sees the incoming gradient as is
      std::vector<Tensor> parts = split(qkv, C, 2);
      auto heads = [&](const Tensor& t) { return t.reshape({B, T, H, D}).transpose(1, 2); };
      if (dq_mem) {
        parts[0].register_hook([dq_mem](const Tensor& gq) {
          *dq_mem = gq.raw_data();
          return Tensor();
        });
        qkv.register_hook([qkv_mem](const Tensor& gx) {
          *qkv_mem = gx.raw_data();
          return Tensor();
        });
      }
      scaled_dot_product_attention(heads(parts[0]), heads(parts[1]), heads(parts[2]), true).backward(g);
      return x.grad();
    };
    Tensor x = rnd({B, T, 3 * C}, dt, 140), g = rnd({B, H, T, D}, dt, 141);
    const void *dq_mem = nullptr, *qkv_mem = nullptr;
    Tensor fused = grad_of_qkv(x, g, &dq_mem, &qkv_mem);
    ASSERT_NE(dq_mem, nullptr);
    EXPECT_EQ(dq_mem, qkv_mem);
    Tensor ref = grad_of_qkv(f64(x), f64(g), nullptr, nullptr);
    EXPECT_TRUE(tensors_near(fused, ref, dt == DType::Float32 ? 2e-5 : 1e-2));
  }
}

TEST_P(FlashCpu, AgreesWithTheUnfusedFloat32Path) {
  Tensor q = rnd({2, 2, 96, 32}, DType::Float32, 60), k = rnd({2, 2, 96, 32}, DType::Float32, 61),
         v = rnd({2, 2, 96, 32}, DType::Float32, 62), g = rnd({2, 2, 96, 32}, DType::Float32, 63);
  Result flash = run(q, k, v, g, true);
  cpu::set_flash_attention_enabled(false);
  Result plain = run(q, k, v, g, true);
  EXPECT_NE(plain.node, "ScaledDotProductAttentionBackward");
  expect_close(flash, plain);
}

TEST_P(FlashCpu, ResultDoesNotDependOnTheThreadCount) {
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
TEST_P(FlashCpu, KernelsOverwriteEveryOutputElement) {
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

TEST_P(FlashCpu, TransformerBlockGradientsMatchWithoutTheKernel) {
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

// The output comes laid out (B, T, H, D): transpose(1, 2) of it is contiguous,
// so the reshape to (B, T, H * D) after attention is a view. So are the same
// steps back on the gradients: dq here is laid out like q, a view of the
// (B, T, 3C) tensor (rows 3C apart), which reshapes without a copy too.
TEST_P(FlashCpu, OutputAndGradientsAreLaidOutTokensThenHeads) {
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
  EXPECT_EQ(dq.transpose(1, 2).reshape({B, T, H * D}).raw_data(), dq.raw_data());
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
// The bfloat16 products this CPU can run (cpu::FlashBf16Products): float32
// and emulated pairs on any AVX-512 CPU, VDPBF16PS pairs where it has them.
std::vector<cpu::FlashBf16Products> bf16_products() {
  std::vector<cpu::FlashBf16Products> out;
  for (auto p :
       {cpu::FlashBf16Products::kFloat32, cpu::FlashBf16Products::kPairsEmulated, cpu::FlashBf16Products::kPairs})
    if (cpu::flash_bf16_products_available(p)) out.push_back(p);
  return out;
}

// output is within 2^-8 (relative, tensor_near's 1 + |x| scale) of float64 on
// the same bfloat16 values; the gradients also carry the rounded output (the
// backward's rowsum(do * o)) and the cancellation in dp - rowsum, so 1e-2.
// With every kind of bfloat16 products: the pair ones round p and ds to
// bfloat16 too, which stays within these bounds. Sizes off the 64-row blocks
// and odd ones (an odd head dim, odd counts of queries and keys) take the pair
// layouts' zero padding.
TEST_P(FlashCpu, Bfloat16InputsMatchFloat64WithEveryKindOfProducts) {
  const Case cases[] = {
      {2, 3, 64, 64, 64, 64}, {1, 2, 130, 130, 64, 64}, {2, 1, 100, 37, 24, 40}, {1, 2, 71, 99, 23, 17}};
  uint64_t seed = 100;
  for (const Case& c : cases)
    for (bool causal : {false, true})
      for (cpu::FlashBf16Products products : bf16_products()) {
        cpu::set_flash_bf16_products(products);
        SCOPED_TRACE("L=" + std::to_string(c.L) + " S=" + std::to_string(c.S) + " D=" + std::to_string(c.D) +
                     (causal ? " causal, " : ", ") + cpu::flash_bf16_products_name(products) + " products");
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

// The bfloat16 entries of the kernels with float32 products against their
// definition: the float32 kernels run on the widened inputs, o rounded to bfloat16 (the backward reads
// the rounded o, as the autograd node saves it), the gradients rounded -- bit
// for bit, with the same statistics. Cases: q, k, v as strided views of one
// (B, T, 3C) tensor with outputs in the (B, T, H, X) layout and a strided output
// gradient; a causal L < S (keys no query sees) with Dv != D and sizes off the
// 16-lane and 64-row grids; L > S with head dims above 64. The bfloat16 outputs
// start as NaN, so an element a kernel does not write fails the comparison.
namespace flash_bf16 {

cpu::FlashGeometry geometry(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& dq,
                            const Tensor& dk, const Tensor& dv, bool causal) {
  cpu::FlashGeometry g;
  g.batch = q.size(0), g.heads = q.size(1), g.L = q.size(2), g.S = k.size(2), g.D = q.size(3), g.Dv = v.size(3);
  g.q_sb = q.stride(0), g.q_sh = q.stride(1), g.q_rs = q.stride(2);
  g.k_sb = k.stride(0), g.k_sh = k.stride(1), g.k_rs = k.stride(2);
  g.v_sb = v.stride(0), g.v_sh = v.stride(1), g.v_rs = v.stride(2);
  g.o_sb = o.stride(0), g.o_sh = o.stride(1), g.o_rs = o.stride(2);
  g.dq_sb = dq.stride(0), g.dq_sh = dq.stride(1), g.dq_rs = dq.stride(2);
  g.dk_sb = dk.stride(0), g.dk_sh = dk.stride(1), g.dk_rs = dk.stride(2);
  g.dv_sb = dv.stride(0), g.dv_sh = dv.stride(1), g.dv_rs = dv.stride(2);
  g.scale = 1.0f / std::sqrt(static_cast<float>(g.D)), g.causal = causal;
  return g;
}

// A (B, H, T, X) tensor laid out (B, T, H, X), filled with `fill`.
Tensor heads(int64_t B, int64_t H, int64_t T, int64_t X, DType dt, float fill) {
  return full({B, T, H, X}, fill, TensorOptions{dt}).transpose(1, 2);
}

const uint16_t* bits(const Tensor& t) { return reinterpret_cast<const uint16_t*>(t.data_ptr<BFloat16>()); }
uint16_t* out_bits(const Tensor& t) { return reinterpret_cast<uint16_t*>(t.data_ptr<BFloat16>()); }

::testing::AssertionResult same_bits(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes()) return ::testing::AssertionFailure() << "shapes differ";
  const Tensor x = a.contiguous(), y = b.contiguous();
  const uint16_t *px = bits(x), *py = bits(y);
  for (int64_t i = 0; i < x.numel(); ++i)
    if (px[i] != py[i]) {
      char msg[64];
      std::snprintf(msg, sizeof msg, ": bits 0x%04x against 0x%04x", unsigned{px[i]}, unsigned{py[i]});
      return ::testing::AssertionFailure() << "element " << i << msg;
    }
  return ::testing::AssertionSuccess();
}

struct BfCase {
  int64_t B, H, L, S, D, Dv;
  bool packed;  // q, k, v views of one (B, T, 3C) tensor (needs L == S, D == Dv)
};
struct BfInputs {
  Tensor q, k, v, d_o;  // bfloat16, (B, H, T, X); d_o strided
};
BfInputs make_inputs(const BfCase& c, uint64_t& seed) {
  const DType bf = DType::BFloat16;
  BfInputs in;
  if (c.packed) {
    Tensor qkv = rnd({c.B, c.L, 3 * c.H * c.D}, bf, seed++) * 2.0;
    std::vector<Tensor> parts = split(qkv, c.H * c.D, 2);
    auto view = [&](const Tensor& t) { return t.reshape({c.B, c.L, c.H, c.D}).transpose(1, 2); };
    in.q = view(parts[0]), in.k = view(parts[1]), in.v = view(parts[2]);
  } else {
    in.q = rnd({c.B, c.H, c.L, c.D}, bf, seed++) * 2.0, in.k = rnd({c.B, c.H, c.S, c.D}, bf, seed++) * 2.0;
    in.v = rnd({c.B, c.H, c.S, c.Dv}, bf, seed++);
  }
  in.d_o = rnd({c.B, c.L, c.H, c.Dv}, bf, seed++).transpose(1, 2);
  return in;
}
// The bfloat16 kernels forward then backward, their outputs prefilled with NaN
// (so an element a kernel does not write fails any comparison): {o, dq, dk, dv,
// lse}, each (B, H, T, X) laid out (B, T, H, X).
std::vector<Tensor> run_kernels(const BfCase& c, const BfInputs& in, bool causal) {
  const DType bf = DType::BFloat16;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor o = heads(c.B, c.H, c.L, c.Dv, bf, nan), lse = full({c.B * c.H, c.L}, nan);
  Tensor dq = heads(c.B, c.H, c.L, c.D, bf, nan), dk = heads(c.B, c.H, c.S, c.D, bf, nan),
         dv = heads(c.B, c.H, c.S, c.Dv, bf, nan);
  const cpu::FlashGeometry g = geometry(in.q, in.k, in.v, o, dq, dk, dv, causal);
  cpu::flash_attention_forward_bf16(g, bits(in.q), bits(in.k), bits(in.v), out_bits(o), lse.data_ptr<float>());
  cpu::flash_attention_backward_bf16(g, bits(in.q), bits(in.k), bits(in.v), bits(o), lse.data_ptr<float>(),
                                     bits(in.d_o), in.d_o.stride(0), in.d_o.stride(1), in.d_o.stride(2), out_bits(dq),
                                     out_bits(dk), out_bits(dv));
  return {o, dq, dk, dv, lse};
}

}  // namespace flash_bf16

TEST_P(FlashCpu, Bfloat16KernelsAreTheFloat32KernelsOnWidenedInputsRounded) {
  using namespace flash_bf16;
  cpu::set_flash_bf16_products(cpu::FlashBf16Products::kFloat32);
  const BfCase cases[] = {{2, 3, 90, 90, 20, 20, true}, {1, 2, 37, 150, 24, 40, false}, {2, 1, 130, 70, 80, 72, false}};
  uint64_t seed = 300;
  for (const BfCase& c : cases)
    for (bool causal : {false, true}) {
      SCOPED_TRACE("L=" + std::to_string(c.L) + " S=" + std::to_string(c.S) + (causal ? " causal" : ""));
      const DType bf = DType::BFloat16, f32 = DType::Float32;
      const BfInputs in = make_inputs(c, seed);
      const Tensor &q = in.q, &k = in.k, &v = in.v, &d_o = in.d_o;
      const std::vector<Tensor> out = run_kernels(c, in, causal);
      const Tensor &o = out[0], &dq = out[1], &dk = out[2], &dv = out[3], &lse = out[4];
      // the definition: float32 kernels on the widened values
      const Tensor qf = q.to(f32).contiguous(), kf = k.to(f32).contiguous(), vf = v.to(f32).contiguous(),
                   dof = d_o.to(f32).contiguous();
      Tensor of = heads(c.B, c.H, c.L, c.Dv, f32, 0.0f), lsef = full({c.B * c.H, c.L}, 0.0f);
      Tensor dqf = heads(c.B, c.H, c.L, c.D, f32, 0.0f), dkf = heads(c.B, c.H, c.S, c.D, f32, 0.0f),
             dvf = heads(c.B, c.H, c.S, c.Dv, f32, 0.0f);
      cpu::flash_attention_forward_f32(geometry(qf, kf, vf, of, dqf, dkf, dvf, causal), qf.data_ptr<float>(),
                                       kf.data_ptr<float>(), vf.data_ptr<float>(), of.data_ptr<float>(),
                                       lsef.data_ptr<float>());
      const Tensor o_rounded = of.to(bf), o_widened = o_rounded.to(f32).contiguous();
      cpu::flash_attention_backward_f32(geometry(qf, kf, vf, o_widened, dqf, dkf, dvf, causal), qf.data_ptr<float>(),
                                        kf.data_ptr<float>(), vf.data_ptr<float>(), o_widened.data_ptr<float>(),
                                        lsef.data_ptr<float>(), dof.data_ptr<float>(), dof.stride(0), dof.stride(1),
                                        dof.stride(2), dqf.data_ptr<float>(), dkf.data_ptr<float>(),
                                        dvf.data_ptr<float>());
      EXPECT_TRUE(tensors_near(lse, lsef, 0));
      EXPECT_TRUE(same_bits(o, o_rounded));
      EXPECT_TRUE(same_bits(dq, dqf.to(bf)));
      EXPECT_TRUE(same_bits(dk, dkf.to(bf)));
      EXPECT_TRUE(same_bits(dv, dvf.to(bf)));
      if (causal && c.S > c.L) {  // keys L.. are hidden from every query: zero gradients
        EXPECT_EQ(max(abs(dk.narrow(2, c.L, c.S - c.L).to(f32))).item<float>(), 0.0f);
      }
    }
}

// Pair products (Note [flash pair products]): the emulated pairs give the same
// bits on 1 and 3 threads, and VDPBF16PS (where the CPU has it) the same bits
// as the emulation -- the inputs and every p, ds are normal numbers here, where
// the two agree (VDPBF16PS flushes denormals). Strided q, k, v views of one
// tensor, a strided output gradient, causal and not, L < S and L > S, odd
// sizes (padded pairs) and head dims above 64; outputs prefilled with NaN.
TEST_P(FlashCpu, PairProductsIgnoreTheThreadCountAndMatchTheirEmulation) {
  if (!cpu::flash_bf16_products_available(cpu::FlashBf16Products::kPairsEmulated))
    GTEST_SKIP() << "the pair products need AVX-512F";
  using namespace flash_bf16;
  const BfCase cases[] = {{2, 3, 90, 90, 20, 20, true}, {1, 2, 37, 151, 23, 41, false}, {2, 1, 131, 70, 80, 72, false}};
  const bool native = cpu::flash_bf16_products_available(cpu::FlashBf16Products::kPairs);
  const int prev = get_num_threads();
  uint64_t seed = 500;
  for (const BfCase& c : cases)
    for (bool causal : {false, true}) {
      SCOPED_TRACE("L=" + std::to_string(c.L) + " S=" + std::to_string(c.S) + (causal ? " causal" : ""));
      const BfInputs in = make_inputs(c, seed);
      auto outputs = [&](cpu::FlashBf16Products products, int threads) {
        cpu::set_flash_bf16_products(products);
        set_num_threads(threads);
        std::vector<Tensor> out = run_kernels(c, in, causal);
        set_num_threads(prev);
        return out;
      };
      const std::vector<Tensor> one = outputs(cpu::FlashBf16Products::kPairsEmulated, 1);
      const std::vector<Tensor> three = outputs(cpu::FlashBf16Products::kPairsEmulated, 3);
      for (size_t i = 0; i < 4; ++i) EXPECT_TRUE(same_bits(one[i], three[i])) << "output " << i << ", 1 vs 3 threads";
      EXPECT_TRUE(tensors_near(one[4], three[4], 0));
      if (!native) continue;
      const std::vector<Tensor> hw = outputs(cpu::FlashBf16Products::kPairs, 2);
      for (size_t i = 0; i < 4; ++i) EXPECT_TRUE(same_bits(hw[i], one[i])) << "output " << i << ", VDPBF16PS";
      EXPECT_TRUE(tensors_near(hw[4], one[4], 0));
    }
  if (!native) {
    std::printf("this CPU has no AVX512-BF16: the VDPBF16PS pairs were not compared\n");
    EXPECT_THROW(cpu::set_flash_bf16_products(cpu::FlashBf16Products::kPairs), Error);
  }
}

TEST_P(FlashCpu, AutocastSendsFloat32AttentionToTheBfloat16Kernel) {
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
