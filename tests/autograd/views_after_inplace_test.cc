// Note [views after an in-place op] (core/autograd_meta.h): a base and its
// views share one autograd history, as in PyTorch. An in-place op on a view
// becomes its root's history (CopySlices); a view taken before an in-place op
// on its root, or on another view of it, takes its part of the root's new
// history when next used (AsStridedBackward). The gradients below are worked
// out by hand; the compound programs are checked against finite differences.
#include <cmath>

#include "autograd/engine.h"
#include "autograd/gradcheck.h"
#include "core/autograd_meta.h"
#include "tests/testing.h"

namespace weft {
namespace {

using testing::tensor_near;

Tensor leaf(std::vector<double> v) { return tensor(v).requires_grad_(true); }
Tensor c(double v) { return scalar_tensor(v, {DType::Float64}); }

TEST(ViewsAfterInplace, AViewTakenBeforeSeesTheOp) {
  Tensor x = leaf({1, 2, 3});
  Tensor u = x * 1.0;
  Tensor v = u.narrow(0, 0, 2), t = u.transpose(0, 0);
  u.mul_(c(2.0));
  ASSERT_TRUE(v.grad_fn() != nullptr);
  EXPECT_EQ(v.grad_fn()->name(), "AsStridedBackward");
  EXPECT_TRUE(tensor_near(v, {2, 4}));
  // sum(v) + sum(exp(t)) = 2 x0 + 2 x1 + sum(exp(2 x))
  (sum(v) + sum(exp(t))).backward();
  EXPECT_TRUE(tensor_near(x.grad(), {2 + 2 * std::exp(2.0), 2 + 2 * std::exp(4.0), 2 * std::exp(6.0)}, 1e-9));
}

TEST(ViewsAfterInplace, AViewOfAViewTakenBeforeSeesTheOp) {
  Tensor x = leaf({1, 2, 3, 4});
  Tensor u = x * 1.0;
  Tensor v = u.view({2, 2});
  Tensor w = v.select(1, 1);  // u[1], u[3]
  u.add_(x);                  // u = 2 x
  sum(w * w).backward();      // 4 (x1^2 + x3^2)
  EXPECT_TRUE(tensor_near(x.grad(), {0, 16, 0, 32}));
}

TEST(ViewsAfterInplace, ABaseChangedThroughAViewCarriesTheOp) {
  Tensor w = leaf({10, 20});
  Tensor u = zeros({3}, {DType::Float64});
  Tensor v = u.narrow(0, 0, 2);
  EXPECT_FALSE(u.requires_grad());
  v.add_(w);
  EXPECT_TRUE(u.requires_grad());
  EXPECT_EQ(u.grad_fn()->name(), "CopySlices");
  EXPECT_TRUE(tensor_near(u, {10, 20, 0}));
  sum(u * u).backward();
  EXPECT_TRUE(tensor_near(w.grad(), {20, 40}));
}

TEST(ViewsAfterInplace, ABufferFilledRowByRowAndColumnByColumn) {
  // the pattern of a recurrent loop writing each step's output into a buffer
  Tensor x = leaf({1, 2});
  Tensor buf = zeros({3, 2}, {DType::Float64});
  for (int64_t i = 0; i < 3; ++i) {
    Tensor row = buf.select(0, i);
    row.copy_(x * static_cast<double>(i + 1));
  }
  EXPECT_TRUE(tensor_near(buf, {1, 2, 2, 4, 3, 6}));
  sum(buf * buf).backward();  // 14 (x0^2 + x1^2)
  EXPECT_TRUE(tensor_near(x.grad(), {28, 56}));

  Tensor y = leaf({1, 2, 3});
  Tensor cols = zeros({3, 2}, {DType::Float64});
  Tensor c0 = cols.select(1, 0), c1 = cols.select(1, 1);  // strided views
  c0.copy_(y);
  c1.copy_(exp(y));
  sum(cols * cols).backward();  // sum(y^2) + sum(exp(2 y))
  EXPECT_TRUE(tensor_near(y.grad(), {2 + 2 * std::exp(2.0), 4 + 2 * std::exp(4.0), 6 + 2 * std::exp(6.0)}, 1e-9));
}

TEST(ViewsAfterInplace, AnOpOnAViewOfANonLeafUsesItsSavedValues) {
  Tensor x = leaf({1, 2, 3}), y = leaf({5, 7});
  Tensor h = x * 2.0;
  Tensor head = h.narrow(0, 0, 1), tail = h.narrow(0, 1, 2);
  head.mul_(c(3.0));
  tail.mul_(y);  // h = [6 x0, 2 x1 y0, 2 x2 y1]
  EXPECT_TRUE(tensor_near(h, {6, 20, 42}));
  sum(h).backward();
  EXPECT_TRUE(tensor_near(x.grad(), {6, 10, 14}));
  EXPECT_TRUE(tensor_near(y.grad(), {4, 6}));
}

TEST(ViewsAfterInplace, RequiresGradAndGradFnFollowTheRoot) {
  Tensor x = leaf({3});
  Tensor base = zeros({2}, {DType::Float64});
  Tensor first = base.narrow(0, 0, 1), second = base.narrow(0, 1, 1);
  EXPECT_FALSE(second.requires_grad());
  first.copy_(x);
  EXPECT_TRUE(second.requires_grad());  // a part of a root that now requires grad
  EXPECT_EQ(second.grad_fn()->name(), "AsStridedBackward");
  sum(first * 2.0 + second * 5.0).backward();  // second holds no part of x
  EXPECT_TRUE(tensor_near(x.grad(), {2}));
}

TEST(ViewsAfterInplace, AStaleExpandedViewSumsItsRepeats) {
  Tensor x = leaf({1, 2});
  Tensor u = x * 1.0;
  Tensor e = u.unsqueeze(0).expand({3, 2});
  u.mul_(x);  // u = x^2
  Tensor weights = tensor(std::vector<double>{1, 2, 3, 4, 5, 6}, {3, 2});
  sum(e * weights).backward();  // (1 + 3 + 5) x0^2 + (2 + 4 + 6) x1^2
  EXPECT_TRUE(tensor_near(x.grad(), {18, 48}));
}

TEST(ViewsAfterInplace, CompoundProgramsMatchFiniteDifferences) {
  // in-place ops through transposed, strided and nested views, on a root that
  // needs grad and on one that does not, and views taken before them read after
  auto program = [](const std::vector<Tensor>& in) {
    const Tensor& x = in[0];  // [3, 4]
    const Tensor& y = in[1];  // [4]
    Tensor u = x * 1.0;
    Tensor ut = u.transpose(0, 1);                      // [4, 3]
    Tensor col = u.select(1, 2);                        // [3], strided
    col.mul_(tanh(x.select(1, 0)));                     // CopySlices on u
    Tensor block = ut.narrow(0, 0, 2).narrow(1, 1, 2);  // [2, 2], a view of a view
    block.add_(sin(y.narrow(0, 0, 2)).unsqueeze(1));
    Tensor every_other = u.view({12}).slice(0, 0, 12, 2);  // [6], step 2
    every_other.div_(add(exp(y.narrow(0, 3, 1)), c(1.0)));
    Tensor buf = zeros({2, 4}, x.options());
    Tensor bt = buf.transpose(0, 1);  // taken while buf needs no grad
    buf.select(0, 0).copy_(y);
    Tensor part = buf.select(0, 1).narrow(0, 1, 3);
    part.copy_(mul(u.select(0, 1).narrow(0, 0, 3), y.narrow(0, 1, 3)));
    part.mul_(col.narrow(0, 0, 1));
    return sum(u * u) + sum(exp(mul(ut, c(0.1)))) + sum(col * col) + sum(mul(bt, bt)) + sum(block);
  };
  Tensor x = testing::rnd({3, 4}, DType::Float64, 11).requires_grad_();
  Tensor y = testing::rnd({4}, DType::Float64, 12).requires_grad_();
  auto r = autograd::gradcheck(program, {x, y}, {.eps = 1e-6, .atol = 1e-6, .rtol = 1e-4});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(ViewsAfterInplace, NothingOutlivesItsTensors) {
  // a view holds its root; the root's CopySlices and the views' AsStridedBackward
  // hold geometry only, so dropping the tensors frees every node and tensor
  const int64_t tensors = TensorImpl::live_count(), nodes = Node::live_count();
  for (bool backward : {true, false}) {  // backward frees what the nodes hold; without it, nothing else may
    Tensor x = leaf({1, 2, 3, 4});
    Tensor u = x * 1.0;
    Tensor a = u.view({2, 2}), b = a.select(0, 1), e = u.unsqueeze(0).expand({2, 4});
    u.add_(x);
    b.add_(a.select(0, 0));  // an operand that is a view of the same root
    Tensor buf = zeros({2, 4}, {DType::Float64});
    buf.select(0, 0).copy_(e.select(0, 1));
    Tensor loss = sum(a * a + b.unsqueeze(0) + sum(e) + buf.narrow(0, 0, 1).view({2, 2}));
    if (backward) loss.backward();
    EXPECT_GT(Node::live_count(), nodes);
  }
  EXPECT_EQ(TensorImpl::live_count(), tensors);
  EXPECT_EQ(Node::live_count(), nodes);
}

TEST(ViewsAfterInplace, Refusals) {
  // a view of a leaf that requires grad
  Tensor p = leaf({1, 2});
  Tensor pv = p.narrow(0, 0, 1);
  EXPECT_WEFT_ERROR(pv.mul_(c(2.0)), "of a leaf tensor that requires grad");
  // a view made with grad mode off, written by an op that autograd records
  Tensor x = leaf({1, 2});
  Tensor h = x * 1.0;
  Tensor hv;
  {
    NoGradGuard g;
    hv = h.narrow(0, 0, 1);
  }
  EXPECT_WEFT_ERROR(hv.add_(x.narrow(0, 0, 1)), "made with grad mode off");
  EXPECT_TRUE(tensor_near(h, {1, 2}));  // refused before it wrote
  // an expanded view written by an op that autograd records
  Tensor z = zeros({2}, {DType::Float64});
  Tensor e = z.unsqueeze(0).expand({2, 2});
  EXPECT_WEFT_ERROR(e.add_(leaf({1, 2, 3, 4}).view({2, 2})), "share memory");
  EXPECT_TRUE(tensor_near(z, {0, 0}));
  EXPECT_TRUE(tensor_near(pv, {1}));
  // a value saved for backward and changed since, through its base
  Tensor x2 = leaf({1, 2, 3});
  Tensor u = x2 * 1.0;
  Tensor sq = u.narrow(0, 0, 2) * u.narrow(0, 0, 2);  // saves the view
  u.mul_(c(2.0));
  EXPECT_WEFT_ERROR(sum(sq).backward(), "modified by an in-place operation");
  // memory changed through a detached alias with autograd recording it
  Tensor x3 = leaf({1, 2});
  Tensor r = x3 * 1.0;
  Tensor d = r.detach();
  d.add_(x3);
  EXPECT_WEFT_ERROR(sum(r), "cannot be re-derived");
}

TEST(ViewsAfterInplace, WhatStaysAsItWas) {
  // an optimizer's step under NoGradGuard, with a view of the parameter kept across steps
  Tensor p = leaf({1, 2});
  Tensor pt = p.view({2, 1});
  {
    NoGradGuard g;
    p.sub_(ones({2}, {DType::Float64}));
  }
  sum(pt * pt).backward();
  EXPECT_TRUE(tensor_near(p.grad(), {0, 2}));
  // a detached alias and a clone taken before the in-place op
  Tensor x = leaf({1, 2});
  Tensor u = x * 1.0;
  Tensor d = u.detach(), cl = u.narrow(0, 0, 1).clone();
  u.add_(c(1.0));
  EXPECT_TRUE(tensor_near(d, {2, 3}));
  Tensor y = leaf({5, 7});
  sum(d * y + cl).backward();
  EXPECT_TRUE(tensor_near(y.grad(), {2, 3}));
  // a view made with grad mode off stays without history after its base changes
  Tensor h = x * 1.0;
  Tensor hv;
  {
    NoGradGuard g;
    hv = h.narrow(0, 0, 2);
  }
  h.mul_(x);
  EXPECT_FALSE(hv.requires_grad());
  EXPECT_TRUE(tensor_near(hv, {1, 4}));
  // and anything without grad mode
  Tensor v = u.narrow(0, 0, 1);
  u.mul_(c(2.0));
  NoGradGuard g;
  EXPECT_TRUE(tensor_near(v * 1.0, {4}));
}

}  // namespace
}  // namespace weft
