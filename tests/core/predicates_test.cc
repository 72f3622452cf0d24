// isnan, isinf, isfinite, nan_to_num, any and all (core/ops/piecewise.cc) at
// hand-worked values: floating and integer inputs, NaN and infinities, dims,
// keepdim, empty tensors, and nan_to_num's gradient.
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "core/ops.h"
#include "tests/testing.h"

namespace weft {
namespace {

using testing::values;

TEST(Predicates, NanInfAnyAll) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = tensor({1.0f, nan, inf, -inf, 0.0f, -2.5f}, {2, 3});
  EXPECT_EQ(values(isnan(x)), (std::vector<double>{0, 1, 0, 0, 0, 0}));
  EXPECT_EQ(values(isinf(x)), (std::vector<double>{0, 0, 1, 1, 0, 0}));
  EXPECT_EQ(values(isfinite(x)), (std::vector<double>{1, 0, 0, 0, 1, 1}));
  EXPECT_EQ(isnan(x).dtype(), DType::Bool);
  Tensor n = nan_to_num(x);
  EXPECT_EQ(values(n), (std::vector<double>{1, 0, std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                                            0, -2.5}));
  EXPECT_EQ(values(nan_to_num(x, 9, 8, -7)), (std::vector<double>{1, 9, 8, -7, 0, -2.5}));
  // the gradient passes where the value is finite
  Tensor xg = x.to(DType::Float64).requires_grad_(true);
  sum(nan_to_num(xg) * 3.0).backward();
  EXPECT_EQ(values(xg.grad()), (std::vector<double>{3, 0, 0, 0, 3, 3}));
  Tensor i = tensor<int64_t>({0, 3, 0, 0}, {2, 2}, {DType::Int64});
  EXPECT_EQ(values(isnan(i)), (std::vector<double>{0, 0, 0, 0}));
  EXPECT_EQ(values(isfinite(i)), (std::vector<double>{1, 1, 1, 1}));
  EXPECT_EQ(values(any(i)), (std::vector<double>{1}));
  EXPECT_EQ(values(all(i)), (std::vector<double>{0}));
  EXPECT_EQ(values(any(i, {1})), (std::vector<double>{1, 0}));
  EXPECT_EQ(values(all(i + 1, {0}, true)), (std::vector<double>{1, 1}));
  EXPECT_EQ(all(i + 1, {0}, true).sizes(), (Shape{1, 2}));
  EXPECT_EQ(any(i).dtype(), DType::Bool);
  EXPECT_EQ(values(any(isnan(x))), (std::vector<double>{1}));  // NaN counts as true, like any nonzero
  EXPECT_EQ(values(all(x)), (std::vector<double>{0}));
  // empty: any is false, all is true
  Tensor e = zeros({0, 3});
  EXPECT_EQ(values(any(e)), (std::vector<double>{0}));
  EXPECT_EQ(values(all(e)), (std::vector<double>{1}));
}

}  // namespace
}  // namespace weft
