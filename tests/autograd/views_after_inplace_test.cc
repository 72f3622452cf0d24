// Note [views after an in-place op] (core/autograd_meta.h): a view taken before
// an in-place op that autograd recorded on its base, or a base changed in place
// through a view, would give a gradient that misses the op; using one in grad
// mode is an error. What stays allowed: views taken after the op, in-place ops
// under NoGradGuard (an optimizer's step, with views of the parameters kept
// across steps), detached aliases, clones, and everything without grad mode.
#include "autograd/engine.h"
#include "core/autograd_meta.h"
#include "tests/testing.h"

namespace weft {
namespace {

using testing::tensor_near;

Tensor leaf(std::vector<double> v) { return tensor(v).requires_grad_(true); }
const char* kStale = "shares memory with a tensor that an in-place op changed, with autograd recording it";

TEST(ViewsAfterInplace, AViewTakenBeforeIsRefused) {
  Tensor x = leaf({1, 2, 3});
  Tensor u = x * 1.0;
  Tensor v = u.narrow(0, 0, 2), t = u.transpose(0, 0);
  u.mul_(scalar_tensor(2.0));
  EXPECT_WEFT_ERROR(sum(v), kStale);
  EXPECT_WEFT_ERROR(exp(t), "(a view)");
  EXPECT_WEFT_ERROR(v.narrow(0, 0, 1), kStale);  // nor a view of it
  EXPECT_WEFT_ERROR(v.mul_(scalar_tensor(2.0)), kStale);
  // the base itself carries the op: its gradient is right
  sum(u).backward();
  EXPECT_TRUE(tensor_near(x.grad(), {2, 2, 2}));
}

TEST(ViewsAfterInplace, AViewTakenAfterGetsTheRightGradient) {
  Tensor x = leaf({1, 2, 3});
  Tensor u = x * 1.0;
  u.mul_(scalar_tensor(3.0));
  Tensor v = u.narrow(0, 1, 2);
  sum(exp(v)).backward();
  EXPECT_TRUE(tensor_near(x.grad(), {0, 3 * std::exp(6.0), 3 * std::exp(9.0)}, 1e-12));
}

TEST(ViewsAfterInplace, ABaseChangedThroughAViewIsRefused) {
  Tensor w = leaf({10, 20});
  Tensor u = zeros({3}, {DType::Float64});
  Tensor v = u.narrow(0, 0, 2);
  v.add_(w);  // v now carries w's history; u's values changed too
  EXPECT_WEFT_ERROR(sum(u), "(not a view)");
  sum(v * v).backward();
  EXPECT_TRUE(tensor_near(w.grad(), {20, 40}));
}

TEST(ViewsAfterInplace, WhatStaysAllowed) {
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
  Tensor d = u.detach(), c = u.narrow(0, 0, 1).clone();
  u.add_(scalar_tensor(1.0));
  EXPECT_TRUE(tensor_near(d, {2, 3}));
  Tensor y = leaf({5, 7});
  sum(d * y + c).backward();
  EXPECT_TRUE(tensor_near(y.grad(), {2, 3}));
  // and anything without grad mode
  Tensor v = u.narrow(0, 0, 1);
  u.mul_(scalar_tensor(2.0));
  NoGradGuard g;
  EXPECT_TRUE(tensor_near(v * 1.0, {4}));
}

}  // namespace
}  // namespace weft
