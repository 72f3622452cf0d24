// The engine: accumulation, retain_graph, freed-graph and in-place errors,
// explicit gradients, detach, no-grad mode, deep graphs, diamonds, grad().
#include "autograd/engine.h"

#include <vector>

#include "core/autograd_meta.h"
#include "tests/testing.h"

namespace weft {
namespace {

using testing::tensor_near;

Tensor leaf(std::initializer_list<float> v) { return tensor(v).requires_grad_(true); }

TEST(Engine, GradientsAccumulateAcrossBackwards) {
  Tensor x = leaf({1, 2});
  sum(x * 3.0).backward();
  EXPECT_TRUE(tensor_near(x.grad(), {3, 3}));
  sum(x * x).backward();
  EXPECT_TRUE(tensor_near(x.grad(), {5, 7}));
  x.zero_grad();
  EXPECT_FALSE(x.grad().defined());
}

TEST(Engine, RetainGraphAllowsSecondBackward) {
  Tensor x = leaf({2});
  Tensor y = sum(x * x);
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();
  EXPECT_TRUE(tensor_near(x.grad(), {8}));
}

TEST(Engine, SecondBackwardWithoutRetainGraphErrors) {
  Tensor x = leaf({2});
  Tensor y = sum(x * x);
  y.backward();
  EXPECT_WEFT_ERROR(y.backward(), "second time");
}

TEST(Engine, InPlaceChangeOfSavedTensorErrorsNamingNode) {
  Tensor x = leaf({1, 2});
  Tensor a = x * 2.0;
  Tensor b = a * a;  // MulBackward saves a
  Tensor one = ones({2});
  a.add_(one);
  EXPECT_WEFT_ERROR(sum(b).backward(), "MulBackward");
  Tensor c = x * 2.0;
  Tensor d = c * c;
  c.add_(one);
  EXPECT_WEFT_ERROR(sum(d).backward(), "modified by an in-place operation");
}

TEST(Engine, InPlaceOnNonLeafIsDifferentiated) {
  Tensor x = leaf({1, 2});
  Tensor a = x * 2.0;
  a.mul_(tensor({3.0f, 4.0f}));
  sum(a).backward();
  EXPECT_TRUE(tensor_near(x.grad(), {6, 8}));
}

TEST(Engine, NonScalarBackwardNeedsGradient) {
  Tensor x = leaf({1, 2});
  Tensor y = x * 2.0;
  EXPECT_WEFT_ERROR(y.backward(), "only for scalar outputs");
  EXPECT_WEFT_ERROR(y.backward(ones({3})), "does not match tensor shape");
}

TEST(Engine, ExplicitGradient) {
  Tensor x = leaf({1, 2, 3});
  Tensor y = x * x;
  y.backward(tensor({1.0f, 10.0f, 100.0f}));
  EXPECT_TRUE(tensor_near(x.grad(), {2, 40, 600}));
}

// AccumulateGrad adopts a fresh, unshared gradient buffer without copying it, and
// copies one that another tensor still refers to.
TEST(Engine, AccumulatedGradientNeverAliasesAnotherTensor) {
  Tensor x = leaf({1, 2, 3});
  Tensor g = tensor({1.0f, 10.0f, 100.0f});
  x.backward(g);  // the leaf's gradient is the caller's tensor
  g.add_(1.0);
  EXPECT_TRUE(tensor_near(x.grad(), {1, 10, 100}));
  Tensor seen;
  Tensor z = leaf({1, 2});
  z.register_hook([&](const Tensor& t) {
    seen = t;  // kept alive by the hook
    return Tensor();
  });
  sum(z * 3.0).backward();
  sum(z * 3.0).backward();  // accumulates in place into z.grad
  EXPECT_TRUE(tensor_near(z.grad(), {6, 6}));
  EXPECT_TRUE(tensor_near(seen, {3, 3}));
  Tensor w = leaf({1, 2});
  sum(w * 2.0).backward();  // a fresh result nothing else holds: adopted
  Tensor first = w.grad();
  sum(w * 2.0).backward();
  EXPECT_TRUE(tensor_near(w.grad(), {4, 4}));
  EXPECT_TRUE(first.is_same(w.grad()));
}

TEST(Engine, BackwardOnTensorWithoutGradErrors) {
  Tensor x = tensor({1.0f});
  EXPECT_WEFT_ERROR(sum(x).backward(), "does not require grad");
}

TEST(Engine, DetachCutsHistoryAndSharesStorage) {
  Tensor x = leaf({1, 2});
  Tensor y = x * 2.0;
  Tensor d = y.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.is_leaf());
  EXPECT_EQ(d.raw_data(), y.raw_data());
  Tensor z = sum(y * d);  // d is a constant: dz/dx = 2 * d = {4, 8}
  z.backward();
  EXPECT_TRUE(tensor_near(x.grad(), {4, 8}));
  // detach_ turns a non-leaf into a leaf in place
  Tensor w = x * 3.0;
  w.detach_();
  EXPECT_FALSE(w.requires_grad());
  EXPECT_TRUE(w.is_leaf());
}

TEST(Engine, NoGradGuardRecordsNothing) {
  Tensor x = leaf({1, 2});
  {
    NoGradGuard guard;
    EXPECT_FALSE(GradMode::is_enabled());
    Tensor y = x * 2.0;
    EXPECT_FALSE(y.requires_grad());
    EXPECT_EQ(y.grad_fn(), nullptr);
    {
      EnableGradGuard on;
      EXPECT_TRUE((x * 2.0).requires_grad());
    }
    EXPECT_FALSE(GradMode::is_enabled());
  }
  EXPECT_TRUE(GradMode::is_enabled());
  EXPECT_TRUE((x * 2.0).requires_grad());
}

TEST(Engine, DeepChainNeitherRecursesInBackwardNorInDestruction) {
  Tensor x = leaf({1});
  {
    Tensor y = x;
    for (int i = 0; i < 100000; ++i) y = y + 1.0;
    sum(y).backward();
    EXPECT_TRUE(tensor_near(x.grad(), {1}));
  }  // the 100k-node graph dies here
  {
    // never backpropagated (saved tensors still held) and destroyed
    Tensor y = x;
    for (int i = 0; i < 100000; ++i) y = y * 1.0;
  }
  SUCCEED();
}

TEST(Engine, DiamondGraphSumsBothPaths) {
  Tensor x = leaf({1, 2});
  Tensor a = x * 2.0;
  Tensor b = x * 3.0;
  Tensor c = a * b;  // 6 x^2
  sum(c).backward();
  EXPECT_TRUE(tensor_near(x.grad(), {12, 24}));
  // a node used twice by one consumer
  Tensor y = leaf({3});
  Tensor s = y * 1.0;
  sum(s * s).backward();
  EXPECT_TRUE(tensor_near(y.grad(), {6}));
}

TEST(Engine, GradApi) {
  Tensor x = leaf({1, 2});
  Tensor w = leaf({3, 4});
  Tensor y = sum(x * w);
  auto gs = autograd::grad({y}, {x, w}, {}, /*retain_graph=*/true);
  ASSERT_EQ(gs.size(), 2u);
  EXPECT_TRUE(tensor_near(gs[0], {3, 4}));
  EXPECT_TRUE(tensor_near(gs[1], {1, 2}));
  EXPECT_FALSE(x.grad().defined());  // grad() leaves .grad alone
  EXPECT_FALSE(w.grad().defined());
  // gradient w.r.t. a non-leaf
  Tensor h = x * 2.0;
  Tensor z = sum(h * h);
  auto gh = autograd::grad({z}, {h});
  EXPECT_TRUE(tensor_near(gh[0], {4, 8}));
  // unused inputs
  Tensor u = leaf({5});
  EXPECT_WEFT_ERROR(autograd::grad({y}, {u}, {}, true), "was not used");
  auto gu = autograd::grad({y}, {u}, {}, true, /*create_graph=*/false, /*allow_unused=*/true);
  EXPECT_FALSE(gu[0].defined());
  EXPECT_WEFT_ERROR(autograd::grad({y}, {tensor({1.0f})}), "does not require grad");
}

TEST(Engine, LeafInPlaceErrors) {
  Tensor x = leaf({1, 2});
  EXPECT_WEFT_ERROR(x.add_(ones({2})), "leaf tensor that requires grad");
  {
    NoGradGuard guard;
    x.add_(ones({2}));  // allowed without grad mode (optimizer updates)
  }
  EXPECT_TRUE(tensor_near(x, {2, 3}));
}

TEST(Engine, MultipleRoots) {
  Tensor x = leaf({1, 2});
  Tensor a = sum(x * 2.0);
  Tensor b = x * x;
  autograd::backward({a, b}, {Tensor(), tensor({1.0f, 1.0f})});
  EXPECT_TRUE(tensor_near(x.grad(), {4, 6}));
  EXPECT_WEFT_ERROR(autograd::backward({a, b}, {Tensor()}), "got 1 gradients for 2 tensors");
}

// Note [backward engine]: linking //autograd installs the engine behind
// Tensor::backward, and the one-root free function does the same work.
TEST(Engine, TensorBackwardRunsTheInstalledEngine) {
  EXPECT_NE(backward_engine(), nullptr);
  Tensor x = leaf({1, 2, 3});
  Tensor y = x * x;
  autograd::backward(y, tensor({1.0f, 1.0f, 2.0f}), /*retain_graph=*/true);
  EXPECT_TRUE(tensor_near(x.grad(), {2, 4, 12}));
  y.backward(tensor({1.0f, 0.0f, 0.0f}));
  EXPECT_TRUE(tensor_near(x.grad(), {4, 4, 12}));
  EXPECT_WEFT_ERROR(autograd::backward(y, ones({3})), "Trying to backward through the graph a second time");
  EXPECT_WEFT_ERROR(autograd::backward(y), "grad can be implicitly created only for scalar outputs");
  Tensor z = sum(x * 2.0);
  autograd::backward(z);
  EXPECT_TRUE(tensor_near(x.grad(), {6, 6, 14}));
}

}  // namespace
}  // namespace weft
