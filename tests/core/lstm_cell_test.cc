// lstm_cell (core/ops/rnn_cell.cc): the fused CPU kernels against the
// composition of element-wise ops they replace (values and every gradient),
// float64 finite differences, the dtypes that fall back to the composition,
// and its errors. nn::LSTM's PyTorch golden tests (tests/nn:rnn_test) run
// through it as well.
#include <vector>

#include <gtest/gtest.h>

#include "autograd/gradcheck.h"
#include "core/nn_ops.h"
#include "core/ops.h"
#include "tests/testing.h"

namespace weft {
namespace {

using testing::rnd;
using testing::tensors_near;

// The reference: the element-wise ops, as nn::LSTM composed them before.
std::pair<Tensor, Tensor> composed(const Tensor& xg, const Tensor& hg, const Tensor& c) {
  std::vector<Tensor> g = chunk(xg + hg, 4, 1);
  Tensor c2 = sigmoid(g[1]) * c + sigmoid(g[0]) * weft::tanh(g[2]);
  return {sigmoid(g[3]) * weft::tanh(c2), c2};
}

struct Grads {
  Tensor h2, c2, dxg, dhg, dc;
};

template <typename F>
Grads run(F cell, DType dt, int64_t N, int64_t H, bool use_c2) {
  Tensor xg = (rnd({N, 4 * H}, dt, 1) * 3.0).detach(), hg = (rnd({N, 4 * H}, dt, 2) * 2.0).detach();
  Tensor c = (rnd({N, H}, dt, 3) * 2.0).detach();
  for (Tensor* t : {&xg, &hg, &c}) t->requires_grad_(true);
  auto [h2, c2] = cell(xg, hg, c);
  Tensor loss = sum(h2 * rnd({N, H}, dt, 4));
  if (use_c2) loss = loss + sum(c2 * rnd({N, H}, dt, 5));
  loss.backward();
  return {h2.detach(), c2.detach(), xg.grad(), hg.grad(), c.grad()};
}

TEST(LstmCell, FusedEqualsTheComposition) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    const double tol = dt == DType::Float32 ? 2e-6 : 1e-13;
    for (auto [N, H] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {3, 5}, {64, 128}, {300, 37}}) {
      for (bool use_c2 : {true, false}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " N=" + std::to_string(N) + " H=" + std::to_string(H) +
                     (use_c2 ? " h2 and c2" : " h2 only"));
        const Grads f = run(lstm_cell, dt, N, H, use_c2), r = run(composed, dt, N, H, use_c2);
        EXPECT_TRUE(tensors_near(f.h2, r.h2, tol));
        EXPECT_TRUE(tensors_near(f.c2, r.c2, tol));
        EXPECT_TRUE(tensors_near(f.dxg, r.dxg, tol));
        EXPECT_TRUE(tensors_near(f.dhg, r.dhg, tol));
        EXPECT_TRUE(tensors_near(f.dc, r.dc, tol));
        EXPECT_TRUE(tensors_near(f.dxg, f.dhg, 0));  // the gates' gradient goes to both
      }
    }
  }
}

TEST(LstmCell, Gradcheck) {
  Tensor xg = rnd({3, 8}, DType::Float64, 6) * 2.0, hg = rnd({3, 8}, DType::Float64, 7);
  Tensor c = rnd({3, 2}, DType::Float64, 8) * 1.5;
  Tensor w = rnd({3, 2}, DType::Float64, 9);
  for (Tensor* t : {&xg, &hg, &c}) t->requires_grad_(true);
  auto r = autograd::gradcheck(
      [&](const std::vector<Tensor>& in) {
        auto [h2, c2] = lstm_cell(in[0], in[1], in[2]);
        return sum(h2 * w) + sum(c2 * c2);
      },
      {xg, hg, c});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(LstmCell, OtherDtypesAndNonContiguousInputsRun) {
  // bfloat16 has no fused kernel: the composition runs, in bfloat16.
  Tensor xg = rnd({4, 12}, DType::Float32, 1), hg = rnd({4, 12}, DType::Float32, 2), c = rnd({4, 3}, DType::Float32, 3);
  auto [h16, c16] = lstm_cell(xg.to(DType::BFloat16), hg.to(DType::BFloat16), c.to(DType::BFloat16));
  EXPECT_EQ(h16.dtype(), DType::BFloat16);
  auto [h32, c32] = lstm_cell(xg, hg, c);
  EXPECT_TRUE(tensors_near(h16.to(DType::Float32), h32, 2e-2));
  EXPECT_TRUE(tensors_near(c16.to(DType::Float32), c32, 2e-2));
  // Transposed storage: the same values as contiguous inputs.
  Tensor xt = xg.t().contiguous().t(), ht = hg.t().contiguous().t();
  ASSERT_FALSE(xt.is_contiguous());
  auto [h2, c2] = lstm_cell(xt, ht, c);
  EXPECT_TRUE(tensors_near(h2, h32, 0));
  EXPECT_TRUE(tensors_near(c2, c32, 0));
}

TEST(LstmCell, Errors) {
  Tensor xg = rnd({2, 8}, DType::Float32, 1), c = rnd({2, 2}, DType::Float32, 2);
  EXPECT_WEFT_ERROR(lstm_cell(xg, rnd({2, 6}, DType::Float32, 3), c),
                    "lstm_cell: expected xg and hg of shape [2, 8] for c of shape [2, 2], got [2, 8] and [2, 6]");
  EXPECT_WEFT_ERROR(lstm_cell(xg, xg, rnd({2}, DType::Float32, 4)), "lstm_cell: expected c of shape (N, H), got [2]");
  EXPECT_WEFT_ERROR(lstm_cell(xg, xg.to(DType::Float64), c),
                    "lstm_cell: xg, hg and c must have one dtype, got float32, float64 and float32");
}

}  // namespace
}  // namespace weft
