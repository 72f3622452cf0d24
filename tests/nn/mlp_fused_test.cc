// mlp_gelu_tanh (core/nn_ops.h, Note [fused mlp] in core/ops/matmul.cc): the
// transformer MLP with its tanh GELU inside the GEMMs. Its output and all five
// gradients against linear, gelu, linear composed in float64 on the same values,
// on every float32 GEMM path the CPU has (AVX-512 kernel with the GELU in its
// store, AVX2 kernel and Eigen with a GELU pass after) and on shapes whose rows,
// hidden width and K (in_features forward, out_features backward) cut the
// kernel's tiles and K blocks unevenly; parts of the inputs requiring grad; a
// second backward through the same graph with another gradient; bfloat16 (fused
// on the CPU) against float64; the float64 fallback; and TransformerBlock taking
// the fused op unless a forward hook must see the modules.
#include <cstdio>

#include <gtest/gtest.h>

#include "core/autocast.h"
#include "core/autograd_meta.h"
#include "core/cpu/gemm.h"
#include "core/nn_ops.h"
#include "core/ops.h"
#include "nn/transformer.h"
#include "tests/testing.h"

namespace weft {
namespace {
using testing::rnd;
using testing::tensors_near;

struct Grads {
  Tensor y, dx, dw1, db1, dw2, db2;
  std::string node;
};

// Runs f(x, w1, b1, w2, b2) and its backward from g; every input requires grad.
template <typename F>
Grads run(F f, const std::vector<Tensor>& in, const Tensor& g) {
  std::vector<Tensor> v;
  for (const Tensor& t : in) v.push_back(t.detach().requires_grad_());
  Tensor y = f(v[0], v[1], v[2], v[3], v[4]);
  Grads r{y.detach(), Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), y.grad_fn() ? y.grad_fn()->name() : ""};
  y.backward(g);
  r.dx = v[0].grad(), r.dw1 = v[1].grad(), r.db1 = v[2].grad(), r.dw2 = v[3].grad(), r.db2 = v[4].grad();
  return r;
}

Tensor composed(const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2, const Tensor& b2) {
  return linear(gelu(linear(x, w1, b1), GeluApproximation::Tanh), w2, b2);
}

std::vector<Tensor> inputs(const Shape& xs, int64_t hid, int64_t out, uint64_t seed) {
  const int64_t in = xs.back();
  return {rnd(xs, DType::Float32, seed), rnd({hid, in}, DType::Float32, seed + 1), rnd({hid}, DType::Float32, seed + 2),
          rnd({out, hid}, DType::Float32, seed + 3), rnd({out}, DType::Float32, seed + 4)};
}

std::vector<Tensor> f64(const std::vector<Tensor>& in) {
  std::vector<Tensor> r;
  for (const Tensor& t : in) r.push_back(t.to(DType::Float64));
  return r;
}

// float32 against float64, normwise: |a - ref| <= 4e-6 (1 + max |ref|) for every
// element. An element is a sum of up to ~450 products whose partial sums reach
// the tensor's largest values, so float32 rounding (2^-24 per step, growing with
// sqrt(steps)) is measured against that scale, not against a small element left
// after cancellation; a wrong GELU or a missing term is far outside it.
::testing::AssertionResult near(const Tensor& a, const Tensor& ref, double tol = 4e-6) {
  const double scale = 1.0 + max(abs(ref)).item<double>();
  const double diff = max(abs(sub(a.to(DType::Float64), ref.to(DType::Float64)))).item<double>();
  if (diff <= tol * scale) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "max |difference| " << diff << " > " << tol << " x " << scale;
}

void expect_close(const Grads& a, const Grads& ref, double tol = 4e-6) {
  EXPECT_TRUE(near(a.y, ref.y, tol)) << "y";
  EXPECT_TRUE(near(a.dx, ref.dx, tol)) << "dx";
  EXPECT_TRUE(near(a.dw1, ref.dw1, tol)) << "dw1";
  EXPECT_TRUE(near(a.db1, ref.db1, tol)) << "db1";
  EXPECT_TRUE(near(a.dw2, ref.dw2, tol)) << "dw2";
  EXPECT_TRUE(near(a.db2, ref.db2, tol)) << "db2";
}

class MlpFused : public ::testing::Test {
 protected:
  void TearDown() override {
    cpu::set_gemm_f32_avx512(true);
    cpu::set_gemm_f32_avx2(true);
  }
};

TEST_F(MlpFused, MatchesTheComposedOpsInFloat64OnEveryGemmPath) {
  struct Case {
    Shape x;
    int64_t hid, out;
  };
  // rows 21 / 50 / 1 (not multiples of the 12-row tiles), hidden 70 / 37 / 33
  // (masked last columns), K = 400 in forward and 450 in backward (two K
  // blocks); hidden 12 with 50 rows takes the AVX2 kernel's transposed narrow path
  const Case cases[] = {{{3, 7, 40}, 70, 450}, {{50, 400}, 37, 20}, {{1, 5}, 33, 3}, {{50, 30}, 12, 7}};
  struct Path {
    const char* name;
    bool avx512, avx2;
  };
  for (const Path& p : {Path{"avx512", true, true}, Path{"avx2", false, true}, Path{"eigen", false, false}}) {
    cpu::set_gemm_f32_avx512(p.avx512);
    cpu::set_gemm_f32_avx2(p.avx2);
    if (p.avx512 != cpu::gemm_f32_uses_avx512() || (!p.avx512 && p.avx2 != cpu::gemm_f32_uses_avx2())) {
      std::printf("this CPU has no %s GEMM path\n", p.name);
      continue;
    }
    for (const Case& c : cases) {
      const std::vector<Tensor> in = inputs(c.x, c.hid, c.out, 10 + c.hid);
      const Tensor g = rnd(
          [&] {
            Shape s = c.x;
            s.back() = c.out;
            return s;
          }(),
          DType::Float32, 5);
      Grads fused = run(mlp_gelu_tanh, in, g);
      EXPECT_EQ(fused.node, "MlpGeluBackward");
      Grads ref = run(composed, f64(in), g.to(DType::Float64));
      SCOPED_TRACE(std::string(p.name) + " " + shape_str(c.x));
      expect_close(fused, ref);
    }
  }
}

TEST_F(MlpFused, LargeActivationsSaturateLikeTheComposedOps) {
  // pre-activations of +-30 drive exp to 0 and to overflow: gelu -> x and -> -0
  std::vector<Tensor> in = inputs({16, 8}, 40, 6, 30);
  in[0] = mul(in[0], full({}, 40.0));
  const Tensor g = rnd({16, 6}, DType::Float32, 31);
  expect_close(run(mlp_gelu_tanh, in, g), run(composed, f64(in), g.to(DType::Float64)));
}

TEST_F(MlpFused, OnlySomeInputsRequireGrad) {
  const std::vector<Tensor> in = inputs({24, 16}, 48, 8, 40);
  const Tensor g = rnd({24, 8}, DType::Float32, 41);
  Grads ref = run(composed, f64(in), g.to(DType::Float64));
  // the input alone (the weight node is dropped; the input node computes dh itself)
  Tensor x = in[0].detach().requires_grad_();
  mlp_gelu_tanh(x, in[1], in[2], in[3], in[4]).backward(g);
  EXPECT_TRUE(near(x.grad(), ref.dx));
  // the first layer's weight alone
  Tensor w1 = in[1].detach().requires_grad_();
  mlp_gelu_tanh(in[0], w1, in[2], in[3], in[4]).backward(g);
  EXPECT_TRUE(near(w1.grad(), ref.dw1));
  // the second layer's bias alone
  Tensor b2 = in[4].detach().requires_grad_();
  mlp_gelu_tanh(in[0], in[1], in[2], in[3], b2).backward(g);
  EXPECT_TRUE(near(b2.grad(), ref.db2));
}

TEST_F(MlpFused, ASecondBackwardUsesItsOwnGradient) {
  const std::vector<Tensor> in = inputs({12, 10}, 20, 4, 50);
  const Tensor g1 = rnd({12, 4}, DType::Float32, 51), g2 = rnd({12, 4}, DType::Float32, 52);
  Tensor x = in[0].detach().requires_grad_(), w1 = in[1].detach().requires_grad_();
  Tensor y = mlp_gelu_tanh(x, w1, in[2], in[3], in[4]);
  y.backward(g1, /*retain_graph=*/true);
  x.zero_grad(), w1.zero_grad();
  y.backward(g2);
  Grads ref = run(composed, f64(in), g2.to(DType::Float64));
  EXPECT_TRUE(near(x.grad(), ref.dx));
  EXPECT_TRUE(near(w1.grad(), ref.dw1));
}

TEST_F(MlpFused, OtherDtypesComposeTheOps) {
  std::vector<Tensor> in = f64(inputs({6, 8}, 12, 5, 60));
  Tensor y = mlp_gelu_tanh(in[0], in[1], in[2].requires_grad_(), in[3], in[4]);
  EXPECT_NE(y.grad_fn()->name(), "MlpGeluBackward");
  EXPECT_TRUE(tensors_near(y, composed(in[0], in[1], in[2], in[3], in[4]), 0));
}

// bfloat16 (what autocast gives it) is fused on the CPU: its output and five
// gradients against the ops composed in float64 on the same bfloat16 values,
// normwise within 2^-6 (a few bfloat16 roundings, 2^-8 relative each, of h, a,
// y and dh, then sums over them), on the shapes of the float32 test; the
// composed bfloat16 ops meet the same bound. Under autocast (float32 inputs)
// the op is the fused one and its gradients reach the float32 leaves.
TEST_F(MlpFused, Bfloat16IsFusedAndMatchesFloat64) {
  struct Case {
    Shape x;
    int64_t hid, out;
  };
  for (const Case& c : {Case{{3, 7, 40}, 70, 450}, Case{{50, 400}, 37, 20}, Case{{1, 5}, 33, 3}}) {
    SCOPED_TRACE(shape_str(c.x));
    std::vector<Tensor> in = inputs(c.x, c.hid, c.out, 80 + c.hid);
    for (Tensor& t : in) t = t.to(DType::BFloat16);
    Shape gs = c.x;
    gs.back() = c.out;
    const Tensor g = rnd(gs, DType::Float32, 81).to(DType::BFloat16);
    const Grads ref = run(composed, f64(in), g.to(DType::Float64));
    for (bool fused_op : {true, false}) {
      const Grads r = fused_op ? run(mlp_gelu_tanh, in, g) : run(composed, in, g);
      if (fused_op) {
        EXPECT_EQ(r.node, "MlpGeluBackward");
      }
      EXPECT_EQ(r.y.dtype(), DType::BFloat16);
      SCOPED_TRACE(fused_op ? "fused" : "composed bfloat16 ops");
      expect_close(r, ref, 1.0 / 64);
    }
  }
  AutocastGuard amp(DeviceType::CPU, DType::BFloat16);
  std::vector<Tensor> f = inputs({6, 8}, 12, 5, 61);
  Tensor w1 = f[1].requires_grad_();
  Tensor z = mlp_gelu_tanh(f[0], w1, f[2], f[3], f[4]);
  EXPECT_EQ(z.dtype(), DType::BFloat16);
  EXPECT_EQ(z.grad_fn()->name(), "MlpGeluWeightBackward");  // only a weight requires grad
  z.to(DType::Float32).sum().backward();
  ASSERT_TRUE(w1.grad().defined());
  EXPECT_EQ(w1.grad().dtype(), DType::Float32);
}

TEST_F(MlpFused, TransformerBlockFusesUnlessAHookMustSeeTheModules) {
  nn::TransformerBlock block(32, 4);
  const Tensor x = rnd({2, 9, 32}, DType::Float32, 70);
  Tensor fused = block.mlp_forward(x.detach().requires_grad_());
  EXPECT_EQ(fused.grad_fn()->name(), "MlpGeluBackward");
  int calls = 0;
  auto handle = (*block.mlp)[1]->register_forward_hook([&](nn::Module&, const Tensor&, const Tensor&) { ++calls; });
  Tensor plain = block.mlp_forward(x.detach().requires_grad_());
  EXPECT_EQ(calls, 1);
  EXPECT_NE(plain.grad_fn()->name(), "MlpGeluBackward");
  EXPECT_TRUE(tensors_near(fused, plain, 1e-5));
}

}  // namespace
}  // namespace weft
