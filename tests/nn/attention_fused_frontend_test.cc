// The fused path of scaled_dot_product_attention (core/ops/attention.cc) without a
// GPU: fake float64 CPU kernels are registered into sdpa_fused_table /
// sdpa_fused_backward_table for the duration of each test (the CPU registers float32 only),
// so the front end's routing and autograd wiring run here: the forward uses the
// kernel when dropout is inactive and falls back silently when it declines; the
// node "ScaledDotProductAttentionBackward" calls the fused backward, and when that
// declines recomputes the gradient with the unfused math (checked against the
// unfused path and by gradcheck, causal and not, L != S, Dv != D).
#include <limits>

#include <gtest/gtest.h>

#include "autograd/gradcheck.h"
#include "core/autograd_meta.h"
#include "core/kernels/attention.h"
#include "core/nn_ops.h"
#include "core/ops.h"
#include "tests/testing.h"

namespace weft {
namespace {
using testing::rnd;
using testing::tensors_near;

int g_fwd_calls = 0, g_bwd_calls = 0;
bool g_fwd_accepts = true, g_bwd_accepts = false;
double g_seen_scale = 0;

// Plain-ops attention in float64: p = softmax(scale * q k^T, masked), o = p v,
// lse = logsumexp of the masked scaled scores. No recording.
void reference(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal, Tensor& o, Tensor& lse,
               Tensor& p) {
  NoGradGuard no_grad;
  const int64_t L = q.size(2), S = k.size(2);
  Tensor s = matmul(q, transpose(k, -2, -1)) * scale;  // (B, H, L, S)
  if (causal)
    s = masked_fill(s, logical_not(tril(ones({L, S}, {DType::Bool}))), -std::numeric_limits<double>::infinity());
  lse = logsumexp(s, {-1}, true);  // (B, H, L, 1)
  p = exp(s - lse);
  o = matmul(p, v);
}

bool fake_fused(const Tensor& o, const Tensor& stats, const Tensor& q, const Tensor& k, const Tensor& v, double scale,
                bool causal) {
  ++g_fwd_calls;
  g_seen_scale = scale;
  if (!g_fwd_accepts) return false;
  EXPECT_EQ(o.dim(), 4);
  EXPECT_TRUE(o.transpose(1, 2).is_contiguous() && stats.is_contiguous());  // the CPU's (B, L, H, Dv) layout
  EXPECT_EQ(stats.dtype(), DType::Float32);
  EXPECT_EQ(q.stride(-1), 1);
  Tensor ro, lse, p;
  reference(q, k, v, scale, causal, ro, lse, p);
  Tensor oo = o, st = stats;
  copy_(oo, ro);
  copy_(st, lse);
  return true;
}

// The analytic gradient (dS = P * (dP - rowsum(dO * O)) * scale), when it accepts.
bool fake_fused_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& d_o, const Tensor& q,
                         const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& stats, double scale,
                         bool causal) {
  ++g_bwd_calls;
  if (!g_bwd_accepts) return false;
  EXPECT_EQ(stats.dtype(), DType::Float32);
  NoGradGuard no_grad;
  Tensor ro, lse, p;
  reference(q, k, v, scale, causal, ro, lse, p);
  Tensor rowsum = sum(d_o * o, {-1}, true);
  Tensor ds = p * (matmul(d_o, transpose(v, -2, -1)) - rowsum) * scale;
  Tensor a = dq, b = dk, c = dv;
  copy_(a, matmul(ds, k));
  copy_(b, matmul(transpose(ds, -2, -1), q));
  copy_(c, matmul(transpose(p, -2, -1), d_o));
  return true;
}

// Registers the fakes for (CPU, Float64) for one test and removes them after.
class FusedFrontEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    sdpa_fused_table().set(DeviceType::CPU, DType::Float64, &fake_fused);
    sdpa_fused_backward_table().set(DeviceType::CPU, DType::Float64, &fake_fused_backward);
    g_fwd_calls = g_bwd_calls = 0;
    g_fwd_accepts = true;
    g_bwd_accepts = false;
  }
  void TearDown() override {
    sdpa_fused_table().set(DeviceType::CPU, DType::Float64, nullptr);
    sdpa_fused_backward_table().set(DeviceType::CPU, DType::Float64, nullptr);
  }
};

struct Result {
  Tensor out, dq, dk, dv;
  std::string node;
};

Result run(const Tensor& q0, const Tensor& k0, const Tensor& v0, const Tensor& g, bool causal, double dropout_p = 0.0,
           bool training = true) {
  Tensor q = q0.detach().requires_grad_(), k = k0.detach().requires_grad_(), v = v0.detach().requires_grad_();
  Tensor y = scaled_dot_product_attention(q, k, v, causal, dropout_p, training);
  Result r{y.detach(), Tensor(), Tensor(), Tensor(), y.grad_fn() ? y.grad_fn()->name() : ""};
  y.backward(g);
  r.dq = q.grad(), r.dk = k.grad(), r.dv = v.grad();
  return r;
}

// The unfused path's answer (fakes removed).
Result unfused(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, bool causal) {
  auto fwd = sdpa_fused_table().lookup(kCPU, DType::Float64);
  sdpa_fused_table().set(DeviceType::CPU, DType::Float64, nullptr);
  Result r = run(q, k, v, g, causal);
  sdpa_fused_table().set(DeviceType::CPU, DType::Float64, fwd);
  return r;
}

void expect_same(const Result& a, const Result& b, double tol) {
  EXPECT_TRUE(tensors_near(a.out, b.out, tol));
  EXPECT_TRUE(tensors_near(a.dq, b.dq, tol));
  EXPECT_TRUE(tensors_near(a.dk, b.dk, tol));
  EXPECT_TRUE(tensors_near(a.dv, b.dv, tol));
}

TEST_F(FusedFrontEnd, UsesTheFusedNodeAndItsBackward) {
  g_bwd_accepts = true;
  for (bool causal : {false, true}) {
    Tensor q = rnd({2, 3, 5, 4}, DType::Float64, 1), k = rnd({2, 3, 7, 4}, DType::Float64, 2),
           v = rnd({2, 3, 7, 6}, DType::Float64, 3), g = rnd({2, 3, 5, 6}, DType::Float64, 4);
    g_fwd_calls = g_bwd_calls = 0;
    Result fused = run(q, k, v, g, causal);
    EXPECT_EQ(g_fwd_calls, 1);
    EXPECT_EQ(g_bwd_calls, 1);
    EXPECT_EQ(fused.node, "ScaledDotProductAttentionBackward");
    EXPECT_DOUBLE_EQ(g_seen_scale, 0.5);  // 1 / sqrt(D = 4)
    // the fake backward recomputes P itself (it does not read the float32 stats): compare tightly
    expect_same(fused, unfused(q, k, v, g, causal), 1e-10);
  }
}

TEST_F(FusedFrontEnd, DecliningBackwardRecomputesWithUnfusedMath) {
  for (bool causal : {false, true})
    for (auto [L, S] : {std::pair<int64_t, int64_t>{5, 7}, {7, 5}, {6, 6}}) {
      Tensor q = rnd({2, 2, L, 4}, DType::Float64, 5), k = rnd({2, 2, S, 4}, DType::Float64, 6),
             v = rnd({2, 2, S, 3}, DType::Float64, 7), g = rnd({2, 2, L, 3}, DType::Float64, 8);
      g_bwd_calls = 0;
      Result fused = run(q, k, v, g, causal);
      EXPECT_EQ(g_bwd_calls, 1);  // asked, declined
      expect_same(fused, unfused(q, k, v, g, causal), 1e-10);
    }
}

TEST_F(FusedFrontEnd, GradcheckThroughTheFusedNode) {
  for (bool accepts : {false, true})
    for (bool causal : {false, true}) {
      g_bwd_accepts = accepts;
      Tensor q = rnd({1, 2, 3, 2}, DType::Float64, 9).requires_grad_(),
             k = rnd({1, 2, 4, 2}, DType::Float64, 10).requires_grad_(),
             v = rnd({1, 2, 4, 3}, DType::Float64, 11).requires_grad_();
      // the fake forward's stats are float32: finite differences only see the output
      auto r = autograd::gradcheck(
          [causal](const std::vector<Tensor>& in) { return scaled_dot_product_attention(in[0], in[1], in[2], causal); },
          {q, k, v});
      EXPECT_TRUE(r) << "backward accepts=" << accepts << " causal=" << causal << ": " << r.message;
    }
}

TEST_F(FusedFrontEnd, DecliningForwardFallsBackSilently) {
  g_fwd_accepts = false;
  Tensor q = rnd({1, 2, 4, 4}, DType::Float64, 12), g = rnd({1, 2, 4, 4}, DType::Float64, 13);
  Result r = run(q, q, q, g, true);
  EXPECT_EQ(g_fwd_calls, 1);
  EXPECT_EQ(g_bwd_calls, 0);
  EXPECT_NE(r.node, "ScaledDotProductAttentionBackward");
  expect_same(r, unfused(q, q, q, g, true), 1e-12);
}

TEST_F(FusedFrontEnd, NotUsedWithActiveDropoutOrOtherRanks) {
  Tensor q = rnd({1, 2, 4, 4}, DType::Float64, 14);
  scaled_dot_product_attention(q, q, q, true, 0.25, /*training=*/true);
  EXPECT_EQ(g_fwd_calls, 0);
  scaled_dot_product_attention(q, q, q, true, 0.25, /*training=*/false);  // dropout inactive
  EXPECT_EQ(g_fwd_calls, 1);
  Tensor q3 = rnd({2, 4, 4}, DType::Float64, 15);  // 3-d: the unfused path
  scaled_dot_product_attention(q3, q3, q3, false);
  EXPECT_EQ(g_fwd_calls, 1);
  // no gradient needed: no node
  Tensor y = scaled_dot_product_attention(q, q, q, false);
  EXPECT_EQ(g_fwd_calls, 2);
  EXPECT_FALSE(y.requires_grad());
}

}  // namespace
}  // namespace weft
