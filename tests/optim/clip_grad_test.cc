// clip_grad_norm_ against PyTorch's values (golden file) and naive references.
#include "optim/clip_grad.h"

#include <cmath>

#include <gtest/gtest.h>

#include "tests/optim/golden.h"

namespace weft::optim {
namespace {

using testing::golden;
using testing::golden_param;
using testing::max_rel_diff;
using testing::tensor_near;
using testing::values;

void check_golden(const std::string& name, double max_norm, double norm_type) {
  SCOPED_TRACE(name);
  Tensor a = golden_param("init.p0"), b = golden_param("init.p1");
  a.set_grad(golden("grads.p0").select(0, 0).clone());
  b.set_grad(golden("grads.p1").select(0, 0).clone());
  double total = clip_grad_norm_({a, b}, max_norm, norm_type);
  double expected = golden("clip." + name + ".total").item<double>();
  EXPECT_NEAR(total, expected, 1e-6 * expected);
  EXPECT_LE(max_rel_diff(a.grad(), golden("clip." + name + ".g0")), 1e-6);
  EXPECT_LE(max_rel_diff(b.grad(), golden("clip." + name + ".g1")), 1e-6);
}

TEST(ClipGradGolden, AllNorms) {
  check_golden("l2_clipped", 0.5, 2.0);
  check_golden("l2_unclipped", 100.0, 2.0);
  check_golden("inf_clipped", 0.3, kInfNorm);
  check_golden("l1_clipped", 1.0, 1.0);
}

TEST(ClipGrad, Float64ReferenceAndSkipsMissingGrads) {
  const int64_t n = 50001;  // several blocks
  std::vector<double> g(n);
  for (int64_t i = 0; i < n; ++i) g[i] = std::sin(0.01 * i) * (i % 7 == 0 ? 3.0 : 1.0);
  for (double p : {2.0, 1.0, 3.0, kInfNorm}) {
    Tensor a = zeros({n}, TensorOptions{DType::Float64});
    Tensor none = zeros({2}, TensorOptions{DType::Float64});
    a.requires_grad_(true);
    none.requires_grad_(true);
    a.set_grad(tensor<double>(g, {n}));
    double ref = 0;
    for (double x : g) ref = std::isinf(p) ? std::max(ref, std::abs(x)) : ref + std::pow(std::abs(x), p);
    if (!std::isinf(p)) ref = std::pow(ref, 1.0 / p);
    double total = clip_grad_norm_({a, none}, 1.0, p);
    EXPECT_NEAR(total, ref, 1e-10 * ref) << p;
    std::vector<double> clipped(g);
    for (double& x : clipped) x *= 1.0 / (ref + 1e-6);
    EXPECT_TRUE(tensor_near(a.grad(), clipped, 1e-12)) << p;
    EXPECT_FALSE(none.grad().defined());
  }
}

TEST(ClipGrad, NonContiguousGradAndNoGrads) {
  Tensor a = zeros({3, 2});
  a.requires_grad_(true);
  Tensor g = tensor({3.0f, 0.0f, 0.0f, 4.0f, 0.0f, 0.0f}, {2, 3}).t();  // (3, 2), strides (1, 3)
  a.set_grad(g);
  ASSERT_FALSE(a.grad().is_contiguous());
  double total = clip_grad_norm_({a}, 1.0);
  EXPECT_NEAR(total, 5.0, 1e-6);
  EXPECT_TRUE(tensor_near(a.grad(), {0.6, 0.8, 0.0, 0.0, 0.0, 0.0}, 1e-6));  // row-major (3, 2)
  Tensor b = zeros({2});
  b.requires_grad_(true);
  EXPECT_EQ(clip_grad_norm_({b}, 1.0), 0.0);
}

TEST(ClipGradValue, ClampsEveryGradientInPlace) {
  Tensor a = zeros({4}), b = zeros({3, 2}), none = zeros({2});
  for (Tensor* t : {&a, &b, &none}) t->requires_grad_(true);
  a.set_grad(tensor({-3.0f, -0.5f, 0.25f, 2.0f}, {4}));
  Tensor gb = tensor({1.5f, -0.1f, 0.0f, NAN, -7.0f, 0.5f}, {2, 3}).t();  // (3, 2), not contiguous
  b.set_grad(gb);
  Tensor a_grad = a.grad();
  clip_grad_value_({a, b, none}, 0.5);
  EXPECT_TRUE(a.grad().is_same(a_grad));  // in place
  EXPECT_EQ(values(a.grad()), (std::vector<double>{-0.5, -0.5, 0.25, 0.5}));
  const std::vector<double> vb = values(b.grad());  // row-major (3, 2): [1.5 NaN; -0.1 -7; 0 0.5] clamped
  EXPECT_EQ(vb[0], 0.5);
  EXPECT_TRUE(std::isnan(vb[1]));
  EXPECT_FLOAT_EQ(vb[2], -0.1f);
  EXPECT_EQ(vb[3], -0.5);
  EXPECT_EQ(vb[4], 0.0);
  EXPECT_EQ(vb[5], 0.5);
  EXPECT_FALSE(none.grad().defined());
  clip_grad_value_({a}, 0.0);
  EXPECT_EQ(values(a.grad()), std::vector<double>(4, 0.0));
  EXPECT_WEFT_ERROR(clip_grad_value_({a}, -1.0), "clip_grad_value_: clip_value must be >= 0, got -1");
}

TEST(ClipGrad, Errors) {
  Tensor a = zeros({2});
  a.requires_grad_(true);
  a.set_grad(tensor({INFINITY, 1.0f}, {2}));
  EXPECT_WEFT_ERROR(clip_grad_norm_({a}, 1.0, 2.0, /*error_if_nonfinite=*/true), "is non-finite");
  EXPECT_TRUE(std::isinf(values(a.grad())[0]));  // untouched
  EXPECT_WEFT_ERROR(clip_grad_norm_({a}, 1.0, 0.0), "norm_type must be positive or inf");
  EXPECT_WEFT_ERROR(clip_grad_norm_({a}, 1.0, -2.0), "norm_type must be positive or inf");
}

}  // namespace
}  // namespace weft::optim
