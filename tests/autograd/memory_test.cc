// Leak checks: after many forward/backward iterations the number of live
// TensorImpls and graph Nodes returns to its baseline.
#include <vector>

#include "autograd/checkpoint.h"
#include "autograd/engine.h"
#include "autograd/function.h"
#include "core/autograd_meta.h"
#include "core/rng.h"
#include "tests/testing.h"

namespace weft {
namespace {

struct Square : autograd::Function<Square> {
  static Tensor forward(autograd::AutogradContext* ctx, const Tensor& a) {
    ctx->save_for_backward({a});
    return a * a;
  }
  static std::vector<Tensor> backward(autograd::AutogradContext* ctx, std::vector<Tensor> g) {
    return {g[0] * ctx->get_saved()[0] * 2.0};
  }
};

struct Model {
  Tensor w1, b1, w2;
  Model() {
    manual_seed(1);
    w1 = randn({8, 16}).requires_grad_(true);
    b1 = randn({16}).requires_grad_(true);
    w2 = randn({16}).requires_grad_(true);
  }
  // (8, 16) -> scalar, built from elementwise ops, views, reductions and dropout
  Tensor loss(const Tensor& x) const {
    Tensor h = dropout(x * w1 + b1, 0.1);              // (8, 16)
    Tensor t = h.transpose(0, 1).unsqueeze(0);         // (1, 16, 8)
    Tensor s = sum(t.squeeze(0) * t.squeeze(0), {1});  // (16)
    Tensor r = Square::apply(s.narrow(0, 2, 8));       // (8)
    return sum(r) / 100.0 + sum(s * w2) - sum(h.select(0, 3) / (b1 * b1 + 1.0));
  }
};

struct Counts {
  int64_t tensors, nodes;
};
Counts now() { return {TensorImpl::live_count(), Node::live_count()}; }

void expect_same(const Counts& a, const Counts& b) {
  EXPECT_EQ(a.tensors, b.tensors) << "TensorImpl leak";
  EXPECT_EQ(a.nodes, b.nodes) << "Node leak";
}

TEST(Memory, TrainingLoopReturnsToBaseline) {
  Model m;
  Tensor x = randn({8, 16});
  m.loss(x).backward();  // warm-up: .grad buffers now exist
  Counts base = now();
  for (int it = 0; it < 200; ++it) m.loss(x).backward();
  expect_same(now(), base);
  // the graph of a forward without backward is freed when the loss dies
  {
    Tensor l = m.loss(x);
    EXPECT_GT(Node::live_count(), base.nodes);
  }
  expect_same(now(), base);
}

TEST(Memory, RetainGraphAndRemovedHooks) {
  Model m;
  Tensor x = randn({8, 16});
  m.loss(x).backward();
  Counts base = now();
  for (int it = 0; it < 100; ++it) {
    Tensor l = m.loss(x);
    std::vector<RemovableHandle> hs;
    hs.push_back(m.w1.register_hook([](const Tensor& g) { return g * 0.5; }));
    hs.push_back(m.b1.register_post_accumulate_grad_hook([](const Tensor&) {}));
    hs.push_back(l.register_hook([](const Tensor& g) { return g; }));
    l.backward(Tensor(), /*retain_graph=*/true);
    l.backward();
    for (auto& h : hs) h.remove();
  }
  expect_same(now(), base);
}

TEST(Memory, CheckpointAndGradApi) {
  Model m;
  Tensor x = randn({8, 16}).requires_grad_(true);
  auto seg = [&](const std::vector<Tensor>& in) { return m.loss(in[0]); };
  autograd::checkpoint(autograd::CheckpointFn1(seg), {x}).backward();
  Counts base = now();
  for (int it = 0; it < 50; ++it) {
    autograd::checkpoint(autograd::CheckpointFn1(seg), {x}).backward();
    Tensor l = m.loss(x);
    auto g = autograd::grad({l}, {x, m.w1});
    EXPECT_EQ(g.size(), 2u);
  }
  expect_same(now(), base);
}

TEST(Memory, GraphDroppedWithoutBackward) {
  Tensor w = randn({4}).requires_grad_(true);
  Counts base = now();
  for (int it = 0; it < 100; ++it) {
    Tensor y = w;
    for (int k = 0; k < 20; ++k) y = y * w + 1.0;
  }
  expect_same(now(), base);
}

}  // namespace
}  // namespace weft
