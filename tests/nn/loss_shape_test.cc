// The elementwise losses compare input and target element by element, so their
// shapes must be equal: a (4, 1) output against a (4) target is an error naming
// the loss and both shapes (it used to broadcast to (4, 4) and return a wrong
// loss). Equal shapes give the hand-computed values and gradients.
#include <gtest/gtest.h>

#include "core/nn_ops.h"
#include "core/ops.h"
#include "tests/testing.h"

namespace weft {
namespace {
using testing::tensor_near;

TEST(LossShapes, MseLossRefusesShapesThatDiffer) {
  Tensor out = tensor({1.f, 2.f, 3.f, 4.f}, {4, 1});  // (N, 1), a regression head
  Tensor target = tensor({1.f, 2.f, 3.f, 4.f}, {4});  // (N)
  EXPECT_WEFT_ERROR(mse_loss(out, target), "mse_loss: input shape [4, 1] and target shape [4] differ");
  EXPECT_WEFT_ERROR(mse_loss(target, out), "mse_loss: input shape [4] and target shape [4, 1] differ");
  for (Reduction r : {Reduction::None, Reduction::Sum})
    EXPECT_WEFT_ERROR(mse_loss(out, target, r), "does not broadcast");
  EXPECT_WEFT_ERROR(mse_loss(zeros({2, 3}), zeros({1, 3})), "input shape [2, 3] and target shape [1, 3]");
  EXPECT_WEFT_ERROR(mse_loss(zeros({3}), zeros({})), "target shape []");
  // the fix the message suggests works: squeeze the head (or view the target)
  EXPECT_TRUE(tensor_near(mse_loss(out.squeeze(1), target), {0.0}));
  EXPECT_TRUE(tensor_near(mse_loss(out, target.view({4, 1})), {0.0}));
}

TEST(LossShapes, BceWithLogitsRefusesShapesThatDiffer) {
  EXPECT_WEFT_ERROR(binary_cross_entropy_with_logits(zeros({4, 1}), zeros({4})), "binary_cross_entropy_with_logits");
  EXPECT_WEFT_ERROR(binary_cross_entropy_with_logits(zeros({4, 1}), zeros({4})), "[4]");
  EXPECT_WEFT_ERROR(binary_cross_entropy_with_logits(zeros({4, 1}), zeros({4})), "[4, 1]");
}

TEST(LossShapes, EqualShapesGiveHandComputedValues) {
  // input (2, 2) = [[1, 2], [3, 4]], target [[1, 0], [5, 1]]: differences 0, 2, -2, 3
  for (DType dt : {DType::Float32, DType::Float64}) {
    Tensor x = tensor<double>({1, 2, 3, 4}, {2, 2}).to(dt).requires_grad_();
    Tensor y = tensor<double>({1, 0, 5, 1}, {2, 2}).to(dt);
    EXPECT_TRUE(tensor_near(mse_loss(x, y, Reduction::None), {0, 4, 4, 9}));
    EXPECT_TRUE(tensor_near(mse_loss(x, y, Reduction::Sum), {17}));
    Tensor l = mse_loss(x, y);  // mean
    EXPECT_TRUE(tensor_near(l, {17.0 / 4}));
    l.backward();
    EXPECT_TRUE(tensor_near(x.grad(), {0, 1, -1, 1.5}));  // 2 (x - y) / 4
  }
  // bce with logits at logit 0: log 2 per element whatever the target
  Tensor z = zeros({3, 1});
  EXPECT_TRUE(tensor_near(binary_cross_entropy_with_logits(z, tensor({1.f, 0.f, 1.f}, {3, 1})), {std::log(2.0)}));
}

}  // namespace
}  // namespace weft
