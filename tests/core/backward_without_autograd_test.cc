// Tensor::backward links in a binary that depends only on //core (this target's
// deps: //core and gtest, no //autograd): core declares and defines it and reaches
// the engine through the hook //autograd installs (Note [backward engine] in
// core/autograd_meta.h). Without the engine, calling it is a clear error.
#include <string>

#include <gtest/gtest.h>

#include "core/autograd_meta.h"
#include "core/ops.h"

namespace weft {
namespace {

TEST(BackwardWithoutAutograd, LinksAndNamesTheMissingDependency) {
  EXPECT_EQ(backward_engine(), nullptr) << "this binary must not link //autograd";
  Tensor x = tensor({1.0f, 2.0f, 3.0f}).requires_grad_();
  Tensor y = (x * x).sum();
  ASSERT_NE(y.grad_fn(), nullptr);  // core still records the graph
  try {
    y.backward();
    FAIL() << "backward() without an engine should throw";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("Tensor::backward"), std::string::npos) << msg;
    EXPECT_NE(msg.find("//autograd"), std::string::npos) << msg;
  }
  EXPECT_FALSE(x.grad().defined());
}

TEST(BackwardWithoutAutograd, AnInstalledEngineIsCalledWithTheArguments) {
  // Any engine installed through the seam receives the root, gradient, retain and create flags.
  static const TensorImpl* seen_root = nullptr;
  static const TensorImpl* seen_grad = nullptr;
  static std::optional<bool> seen_retain;
  static bool seen_create = false;
  set_backward_engine(
      [](const Tensor& root, const Tensor& gradient, std::optional<bool> retain_graph, bool create_graph) {
        seen_root = root.impl();
        seen_grad = gradient.impl();
        seen_retain = retain_graph;
        seen_create = create_graph;
      });
  Tensor x = tensor({1.0f, 2.0f}).requires_grad_();
  Tensor y = x * x;
  Tensor g = ones({2});
  y.backward(g, true);
  EXPECT_EQ(seen_root, y.impl());
  EXPECT_EQ(seen_grad, g.impl());
  EXPECT_EQ(seen_retain, std::optional<bool>(true));
  EXPECT_FALSE(seen_create);
  y.backward(g, std::nullopt, true);
  EXPECT_EQ(seen_retain, std::nullopt);
  EXPECT_TRUE(seen_create);
  set_backward_engine(nullptr);
  EXPECT_THROW(y.backward(g), Error);
}

}  // namespace
}  // namespace weft
