// Hooks: tensor hooks (leaf and non-leaf), post-accumulate-grad hooks,
// end-of-backward callbacks and retain_grad.
#include "core/hooks.h"

#include <string>
#include <vector>

#include "autograd/engine.h"
#include "core/autograd_meta.h"
#include "tests/testing.h"

namespace weft {
namespace {

using testing::tensor_near;
using testing::values;

Tensor leaf(std::initializer_list<float> v) { return tensor(v).requires_grad_(true); }

TEST(TensorHook, SeesGradientOfLeaf) {
  Tensor x = leaf({1, 2, 3});
  std::vector<double> seen;
  x.register_hook([&](const Tensor& g) {
    seen = values(g);
    return Tensor();
  });
  sum(x * x).backward();  // d/dx = 2x
  EXPECT_EQ(seen, (std::vector<double>{2, 4, 6}));
  EXPECT_TRUE(tensor_near(x.grad(), {2, 4, 6}));
}

TEST(TensorHook, ReplacesGradient) {
  Tensor x = leaf({1, 2});
  x.register_hook([](const Tensor& g) { return g * 10.0; });
  sum(x * 3.0).backward();
  EXPECT_TRUE(tensor_near(x.grad(), {30, 30}));
}

TEST(TensorHook, SeveralHooksRunInOrderAndChain) {
  Tensor x = leaf({1, 1});
  Tensor y = x * 2.0;  // non-leaf
  std::vector<std::string> order;
  std::vector<double> second_saw;
  int calls[3] = {0, 0, 0};
  y.register_hook([&](const Tensor& g) {
    order.push_back("a");
    ++calls[0];
    return g + 1.0;  // grad becomes 2
  });
  y.register_hook([&](const Tensor& g) {
    order.push_back("b");
    ++calls[1];
    second_saw = values(g);
    return Tensor();  // keep
  });
  y.register_hook([&](const Tensor& g) {
    order.push_back("c");
    ++calls[2];
    return g * 3.0;  // grad becomes 6
  });
  sum(y).backward();
  EXPECT_EQ(order, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(second_saw, (std::vector<double>{2, 2}));
  for (int c : calls) EXPECT_EQ(c, 1);
  EXPECT_TRUE(tensor_near(x.grad(), {12, 12}));  // 6 * dy/dx(2)
}

TEST(TensorHook, RemovedByHandle) {
  Tensor x = leaf({1});
  int calls = 0;
  RemovableHandle h = x.register_hook([&](const Tensor& g) {
    ++calls;
    return g * 0.0;
  });
  sum(x * 5.0).backward();
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(tensor_near(x.grad(), {0}));
  EXPECT_TRUE(h.active());
  h.remove();
  EXPECT_FALSE(h.active());
  h.remove();  // idempotent
  x.zero_grad();
  sum(x * 5.0).backward();
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(tensor_near(x.grad(), {5}));
}

TEST(TensorHook, HandleOutlivesTensor) {
  RemovableHandle h;
  {
    Tensor x = leaf({1});
    h = x.register_hook([](const Tensor&) { return Tensor(); });
  }
  h.remove();  // the list is gone: must be a no-op
  EXPECT_FALSE(h.active());
}

TEST(TensorHook, NonLeafSeesItsGradient) {
  Tensor x = leaf({1, 2});
  Tensor y = x * 3.0;
  std::vector<double> seen;
  y.register_hook([&](const Tensor& g) {
    seen = values(g);
    return Tensor();
  });
  sum(y * y).backward();  // d/dy = 2y = {6, 12}
  EXPECT_EQ(seen, (std::vector<double>{6, 12}));
  EXPECT_TRUE(tensor_near(x.grad(), {18, 36}));
  EXPECT_FALSE(y.grad().defined());  // not retained
}

// Note [tensor hooks before capture]: as PyTorch, a tensor's hooks run on its
// gradient before grad() returns it, a leaf's too, and a node that then runs
// for another input sees what they returned; no .grad is touched.
TEST(TensorHook, RunBeforeGradCapturesTheGradient) {
  Tensor x = leaf({1, 2});
  Tensor y = x * 3.0;  // {3, 6}
  int calls = 0;
  y.register_hook([&](const Tensor& g) {
    ++calls;
    return g * 2.0;
  });
  Tensor gy = autograd::grad({sum(y * y)}, {y})[0];  // 2 * 2y
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(tensor_near(gy, {12, 24}));
  std::vector<Tensor> gs = autograd::grad({sum(y * y)}, {y, x});
  EXPECT_EQ(calls, 2);  // once, though y's node also runs for x
  EXPECT_TRUE(tensor_near(gs[0], {12, 24}));
  EXPECT_TRUE(tensor_near(gs[1], {36, 72}));  // 3 * the hooked gradient
  x.register_hook([](const Tensor& g) { return g + 1.0; });
  EXPECT_TRUE(tensor_near(autograd::grad({sum(x * 5.0)}, {x})[0], {6, 6}));
  EXPECT_FALSE(x.grad().defined());
  EXPECT_FALSE(y.grad().defined());
}

TEST(TensorHook, HookOnTensorWithoutGradIsAnError) {
  Tensor x = tensor({1.0f});
  EXPECT_WEFT_ERROR(x.register_hook([](const Tensor& g) { return g; }), "does not require grad");
}

TEST(PostAccumulateHook, OncePerLeafPerBackwardWithFinalGrad) {
  Tensor x = leaf({1, 2});
  Tensor w = leaf({3});
  std::vector<std::vector<double>> seen;
  int w_calls = 0;
  x.register_post_accumulate_grad_hook([&](const Tensor& t) { seen.push_back(values(t.grad())); });
  w.register_post_accumulate_grad_hook([&](const Tensor&) { ++w_calls; });
  // x reaches the loss through three paths; its hook must run once, after all.
  Tensor loss = sum(x * x + x * w + x);
  loss.backward();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], (std::vector<double>{2 * 1 + 3 + 1, 2 * 2 + 3 + 1}));
  EXPECT_EQ(w_calls, 1);
  // second backward: accumulated value, one more call
  sum(x * 2.0).backward();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1], (std::vector<double>{8, 10}));
  EXPECT_EQ(w_calls, 1);
}

TEST(PostAccumulateHook, RemovableAndLeafOnly) {
  Tensor x = leaf({1});
  int calls = 0;
  auto h = x.register_post_accumulate_grad_hook([&](const Tensor&) { ++calls; });
  h.remove();
  sum(x * 2.0).backward();
  EXPECT_EQ(calls, 0);
  Tensor y = x * 2.0;
  EXPECT_WEFT_ERROR(y.register_post_accumulate_grad_hook([](const Tensor&) {}), "only leaf tensors");
}

TEST(QueueCallback, RunsOnceAfterAllGradients) {
  Tensor a = leaf({1, 2});
  Tensor b = leaf({3, 4});
  int callbacks = 0;
  std::vector<double> a_grad_at_cb, b_grad_at_cb;
  // queued from a hook on an early node: must still run after everything
  Tensor y = a * 2.0;
  y.register_hook([&](const Tensor& g) {
    EXPECT_TRUE(autograd::in_backward());
    autograd::queue_callback([&] {
      ++callbacks;
      a_grad_at_cb = values(a.grad());
      b_grad_at_cb = values(b.grad());
    });
    return g;
  });
  sum(y * b).backward();
  EXPECT_EQ(callbacks, 1);
  EXPECT_EQ(a_grad_at_cb, (std::vector<double>{6, 8}));
  EXPECT_EQ(b_grad_at_cb, (std::vector<double>{2, 4}));
  EXPECT_FALSE(autograd::in_backward());
  // a fresh backward does not re-run old callbacks
  sum(a * 1.0).backward();
  EXPECT_EQ(callbacks, 1);
}

TEST(QueueCallback, CallbacksRunInOrderAndMayQueueMore) {
  Tensor a = leaf({1});
  std::vector<int> order;
  a.register_post_accumulate_grad_hook([&](const Tensor&) {
    autograd::queue_callback([&] {
      order.push_back(1);
      autograd::queue_callback([&] { order.push_back(3); });
    });
    autograd::queue_callback([&] { order.push_back(2); });
  });
  sum(a * 2.0).backward();
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
}

TEST(QueueCallback, OutsideBackwardIsAnError) {
  EXPECT_WEFT_ERROR(autograd::queue_callback([] {}), "only be called while backward is running");
}

TEST(RetainGrad, KeepsNonLeafGrad) {
  Tensor x = leaf({1, 2});
  Tensor y = x * 3.0;
  Tensor z = y * y;
  y.retain_grad();
  sum(z).backward(Tensor(), /*retain_graph=*/true);
  EXPECT_TRUE(tensor_near(y.grad(), {6, 12}));
  EXPECT_FALSE(z.grad().defined());
  sum(z).backward();
  EXPECT_TRUE(tensor_near(y.grad(), {12, 24}));  // accumulates like a leaf
  EXPECT_TRUE(tensor_near(x.grad(), {36, 72}));
}

// As PyTorch 2.15 (checked by hand there): grad() keeps a retained gradient
// too, for one of its inputs and for a tensor on the way to one.
TEST(RetainGrad, KeptByGradForAnInputAndOnTheWay) {
  Tensor x = leaf({1, 2});
  Tensor y = x * 3.0;
  y.retain_grad();
  autograd::grad({sum(y * y)}, {y});
  EXPECT_TRUE(tensor_near(y.grad(), {6, 12}));
  Tensor y2 = x * 3.0;
  y2.retain_grad();
  Tensor z = y2 * 2.0;
  autograd::grad({sum(z * z)}, {x});
  EXPECT_TRUE(tensor_near(y2.grad(), {24, 48}));
  EXPECT_FALSE(x.grad().defined());
}

}  // namespace
}  // namespace weft
