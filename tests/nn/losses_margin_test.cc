// margin_ranking_loss, hinge_embedding_loss, soft_margin_loss,
// cosine_embedding_loss, triplet_margin_loss, poisson_nll_loss,
// gaussian_nll_loss, multilabel_soft_margin_loss, multi_margin_loss,
// multilabel_margin_loss and triplet_margin_with_distance_loss against PyTorch's values
// and gradients (tests/nn/golden/losses_margin_golden.safetensors, from
// tools/golden/make_losses_margin_golden.py), hand-worked values, and the
// error messages.
#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/nn_ops.h"
#include "tests/golden.h"
#include "tests/nn/golden_case.h"
#include "tests/testing.h"

namespace weft {
namespace {

using testing::values;

const testing::Golden& golden() {
  static const testing::Golden g("tests/nn/golden/losses_margin_golden.safetensors");
  return g;
}

// A loss of the case's differentiable inputs (x, w, b) and its target.
using LossFn = std::function<Tensor(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& target)>;
void check(const std::string& c, const LossFn& fn) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    const Tensor target = golden()(c + ".target").to(dt);
    testing::check_golden_case(
        golden(), c, [&](const Tensor& x, const Tensor& w, const Tensor& b) { return fn(x, w, b, target); }, dt);
  }
}

TEST(MarginLosses, GoldenAgainstPyTorch) {
  check("margin_ranking", [](const Tensor& x, const Tensor& w, const Tensor&, const Tensor& t) {
    return margin_ranking_loss(x, w, t, 0.3);
  });
  check("margin_ranking_sum", [](const Tensor& x, const Tensor& w, const Tensor&, const Tensor& t) {
    return margin_ranking_loss(x, w, t, 0.0, Reduction::Sum);
  });
  check("hinge", [](const Tensor& x, const Tensor&, const Tensor&, const Tensor& t) {
    return hinge_embedding_loss(x, t, 0.7, Reduction::None);
  });
  check("soft_margin",
        [](const Tensor& x, const Tensor&, const Tensor&, const Tensor& t) { return soft_margin_loss(x, t); });
  check("cosine_embedding", [](const Tensor& x, const Tensor& w, const Tensor&, const Tensor& t) {
    return cosine_embedding_loss(x, w, t, 0.2);
  });
  check("cosine_embedding_1d", [](const Tensor& x, const Tensor& w, const Tensor&, const Tensor& t) {
    return cosine_embedding_loss(x, w, t, 0.0, Reduction::None);
  });
  check("triplet",
        [](const Tensor& x, const Tensor& w, const Tensor& b, const Tensor&) { return triplet_margin_loss(x, w, b); });
  check("triplet_swap_p1", [](const Tensor& x, const Tensor& w, const Tensor& b, const Tensor&) {
    return triplet_margin_loss(x, w, b, 0.5, 1.0, 1e-6, /*swap=*/true, Reduction::None);
  });
}

TEST(HingeLosses, GoldenAgainstPyTorch) {
  check("multi_margin", [](const Tensor& x, const Tensor&, const Tensor&, const Tensor& t) {
    return multi_margin_loss(x, t.to(DType::Int64));
  });
  const Tensor class_weight = golden()("multi_margin_p2_weight_sum.weight");
  check("multi_margin_p2_weight_sum", [&](const Tensor& x, const Tensor&, const Tensor&, const Tensor& t) {
    return multi_margin_loss(x, t.to(DType::Int64), 2, 0.7, class_weight.to(x.dtype()), Reduction::Sum);
  });
  check("multi_margin_none_1d", [](const Tensor& x, const Tensor&, const Tensor&, const Tensor& t) {
    return multi_margin_loss(x, t.to(DType::Int64), 1, 1.0, Tensor(), Reduction::None);
  });
  check("multilabel_margin", [](const Tensor& x, const Tensor&, const Tensor&, const Tensor& t) {
    return multilabel_margin_loss(x, t.to(DType::Int64));
  });
  check("multilabel_margin_none_1d", [](const Tensor& x, const Tensor&, const Tensor&, const Tensor& t) {
    return multilabel_margin_loss(x, t.to(DType::Int32), Reduction::None);
  });
  check("triplet_distance", [](const Tensor& x, const Tensor& w, const Tensor& b, const Tensor&) {
    return triplet_margin_with_distance_loss(x, w, b);
  });
  check("triplet_distance_cosine_swap", [](const Tensor& x, const Tensor& w, const Tensor& b, const Tensor&) {
    const DistanceFunction cosine = [](const Tensor& u, const Tensor& v) { return 1.0 - cosine_similarity(u, v); };
    return triplet_margin_with_distance_loss(x, w, b, cosine, 0.4, /*swap=*/true, Reduction::Sum);
  });
}

TEST(HingeLosses, HandWorked) {
  // Scores (1, 3, 2) for class 0: margins 1 - 1 + 3 = 3 and 1 - 1 + 2 = 2; p 1: (3 + 2) / 3, p 2: (9 + 4) / 3;
  // a weight of 2 on class 0 doubles them.
  Tensor x = tensor<double>({1.0, 3.0, 2.0}, {1, 3});
  Tensor y = tensor<int64_t>({0}, {1});
  EXPECT_DOUBLE_EQ(multi_margin_loss(x, y).item<double>(), 5.0 / 3);
  EXPECT_DOUBLE_EQ(multi_margin_loss(x, y, 2).item<double>(), 13.0 / 3);
  EXPECT_DOUBLE_EQ(multi_margin_loss(x, y, 1, 1.0, tensor<double>({2.0, 1.0, 1.0}, {3})).item<double>(), 10.0 / 3);
  // Class 1 wins by more than the margin: no loss.
  EXPECT_DOUBLE_EQ(multi_margin_loss(x, tensor<int64_t>({1}, {1})).item<double>(), 0.0);
  // Labels {0, 2} of (1, 3, 2, 0.5): pairs (0, 1) 1 - 1 + 3 = 3, (0, 3) 0.5, (2, 1) 2, (2, 3) 0 -> 5.5 / 4.
  Tensor s = tensor<double>({1.0, 3.0, 2.0, 0.5}, {4});
  EXPECT_DOUBLE_EQ(multilabel_margin_loss(s, tensor<int64_t>({0, 2, -1, 1}, {4})).item<double>(), 5.5 / 4);
  // Triplet with the distance |sum(a - b)|: d(a, p) = 1, d(a, n) = 3, so margin 1.5 gives max(0, -0.5) = 0.
  const DistanceFunction l1sum = [](const Tensor& a, const Tensor& b) { return abs(sum(a - b, {1})); };
  Tensor a = tensor<double>({0.0, 0.0}, {1, 2}), p = tensor<double>({1.0, 0.0}, {1, 2}),
         n = tensor<double>({1.0, 2.0}, {1, 2});
  EXPECT_DOUBLE_EQ(triplet_margin_with_distance_loss(a, p, n, l1sum, 1.5).item<double>(), 0.0);
  EXPECT_DOUBLE_EQ(triplet_margin_with_distance_loss(a, p, n, l1sum, 2.5).item<double>(), 0.5);
  // swap: d(p, n) = 2 < 3 is used: 2.5 + 1 - 2.
  EXPECT_DOUBLE_EQ(triplet_margin_with_distance_loss(a, p, n, l1sum, 2.5, true).item<double>(), 1.5);
}

TEST(HingeLosses, Errors) {
  Tensor x = testing::rnd({3, 4}, DType::Float32, 1);
  Tensor y = tensor<int64_t>({0, 3, 1}, {3});
  EXPECT_WEFT_ERROR(multi_margin_loss(x, y, 3), "multi_margin_loss: only p == 1 and p == 2 supported, got 3");
  EXPECT_WEFT_ERROR(multi_margin_loss(x, tensor<int64_t>({0, 4, 1}, {3})),
                    "multi_margin_loss: target 4 of sample 1 is out of range for 4 classes");
  EXPECT_WEFT_ERROR(multi_margin_loss(x, tensor<int64_t>({0, 1}, {2})),
                    "multi_margin_loss: inconsistent target size, expected 3 class indices for input shape [3, 4] "
                    "but got shape [2]");
  EXPECT_WEFT_ERROR(multi_margin_loss(x, y.to(DType::Float32)),
                    "expected an integer target (class indices), got float32");
  EXPECT_WEFT_ERROR(multi_margin_loss(x, y, 1, 1.0, full({3}, 1.0f)),
                    "inconsistent weight size, expected one floating value per class (4) but got shape [3]");
  EXPECT_WEFT_ERROR(multi_margin_loss(zeros({0, 4}), tensor<int64_t>({}, {0})),
                    "expected a non-empty input of shape (C) or (N, C), got shape [0, 4]");
  EXPECT_WEFT_ERROR(multilabel_margin_loss(x, tensor<int64_t>({0, -1, 0, 0, 1, 2, -1, 0, 4, -1, 0, 0}, {3, 4})),
                    "multilabel_margin_loss: target value 4 (entry 8) is out of range");
  EXPECT_WEFT_ERROR(multilabel_margin_loss(x, tensor<int64_t>({0, -2, 0, 0, 1, 2, -1, 0, 3, -1, 0, 0}, {3, 4})),
                    "target value -2 (entry 1) is out of range");
  EXPECT_WEFT_ERROR(multilabel_margin_loss(x, y),
                    "multilabel_margin_loss: inconsistent target size: [3] for input of "
                    "size: [3, 4]");
  EXPECT_WEFT_ERROR(triplet_margin_with_distance_loss(x, x, x.select(0, 0)),
                    "The anchor, positive, and negative tensors are expected to have the same number of dimensions, "
                    "but got: anchor 2D, positive 2D, and negative 1D inputs");
  EXPECT_WEFT_ERROR(triplet_margin_with_distance_loss(x, x, x, {}, -1.0), "margin must be greater than 0, got -1");
}

TEST(LikelihoodLosses, GoldenAgainstPyTorch) {
  check("poisson_log",
        [](const Tensor& x, const Tensor&, const Tensor&, const Tensor& t) { return poisson_nll_loss(x, t); });
  check("poisson_full", [](const Tensor& x, const Tensor&, const Tensor&, const Tensor& t) {
    return poisson_nll_loss(x, t, /*log_input=*/false, /*full=*/true, 1e-8, Reduction::Sum);
  });
  check("gaussian",
        [](const Tensor& x, const Tensor& w, const Tensor&, const Tensor& t) { return gaussian_nll_loss(x, t, w); });
  check("gaussian_homo_full", [](const Tensor& x, const Tensor& w, const Tensor&, const Tensor& t) {
    return gaussian_nll_loss(x, t, w, /*full=*/true, 1e-6, Reduction::Sum);
  });
  check("multilabel", [](const Tensor& x, const Tensor& w, const Tensor&, const Tensor& t) {
    return multilabel_soft_margin_loss(x, t, w);
  });
  check("multilabel_none", [](const Tensor& x, const Tensor&, const Tensor&, const Tensor& t) {
    return multilabel_soft_margin_loss(x, t, Tensor(), Reduction::None);
  });
}

TEST(MarginLosses, HandWorked) {
  // Ranking: x1 = 1, x2 = 2 with target 1 (x1 should rank higher) costs 1 + margin; target -1 costs nothing.
  Tensor x1 = tensor<double>({1.0, 1.0}, {2}), x2 = tensor<double>({2.0, 2.0}, {2});
  EXPECT_EQ(values(margin_ranking_loss(x1, x2, tensor<double>({1.0, -1.0}, {2}), 0.5, Reduction::None)),
            (std::vector<double>{1.5, 0.0}));
  // Hinge: x where the target is 1, max(0, 1 - x) where it is -1.
  EXPECT_EQ(values(hinge_embedding_loss(tensor<double>({0.3, 0.3, 2.0}, {3}), tensor<double>({1.0, -1.0, -1.0}, {3}),
                                        1.0, Reduction::None)),
            (std::vector<double>{0.3, 0.7, 0.0}));
  // Triplet with eps 0: d(a, p) = 1, d(a, n) = 5 (a 3-4-5 triangle), margin 5 -> 1.
  Tensor a = tensor<double>({0.0, 0.0}, {1, 2}), p = tensor<double>({1.0, 0.0}, {1, 2}),
         n = tensor<double>({3.0, 4.0}, {1, 2});
  EXPECT_DOUBLE_EQ(triplet_margin_loss(a, p, n, 5.0, 2.0, 0.0).item<double>(), 1.0);
  EXPECT_DOUBLE_EQ(pairwise_distance(n, a, 2.0, 0.0).item<double>(), 5.0);
  // Gaussian: mean 0, target 2, var 4: (log 4 + 4 / 4) / 2.
  Tensor z = zeros({1}, {DType::Float64});
  EXPECT_DOUBLE_EQ(
      gaussian_nll_loss(z, full({1}, 2.0, {DType::Float64}), full({1}, 4.0, {DType::Float64})).item<double>(),
      (std::log(4.0) + 1.0) / 2);
  // Poisson with the log input 0 (rate 1) and count 3, full: 1 - 0 + 3 log 3 - 3 + log(2 pi 3) / 2.
  EXPECT_NEAR(poisson_nll_loss(z, full({1}, 3.0, {DType::Float64}), true, true).item<double>(),
              1.0 + 3 * std::log(3.0) - 3 + 0.5 * std::log(2 * std::numbers::pi * 3), 1e-12);
}

TEST(MarginLosses, Errors) {
  Tensor x = testing::rnd({3, 4}, DType::Float32, 1), y = full({3, 4}, 1.0f);
  EXPECT_WEFT_ERROR(margin_ranking_loss(x, x.narrow(1, 0, 3), y),
                    "margin_ranking_loss: input1 shape [3, 4] and input2 shape [3, 3] differ");
  EXPECT_WEFT_ERROR(cosine_embedding_loss(x, x, full({3, 1}, 1.0f)),
                    "cosine_embedding_loss: 0-D or 1-D target tensor expected, multi-target not supported");
  EXPECT_WEFT_ERROR(cosine_embedding_loss(x, x, full({}, 1.0f)),
                    "cosine_embedding_loss: a 0-D target expects 1-D inputs, but found inputs with shapes [3, 4] and "
                    "[3, 4]");
  EXPECT_WEFT_ERROR(triplet_margin_loss(x, x, x.select(0, 0)),
                    "triplet_margin_loss: the anchor, positive and negative tensors are expected to have the same "
                    "number of dims");
  EXPECT_WEFT_ERROR(triplet_margin_loss(x, x, x, 0.0), "triplet_margin_loss: margin must be greater than 0, got 0");
  EXPECT_WEFT_ERROR(gaussian_nll_loss(x, x, full({4}, 1.0f)),
                    "gaussian_nll_loss: var of shape [4] is of incorrect size for input shape [3, 4]");
  EXPECT_WEFT_ERROR(gaussian_nll_loss(x, x, full({3, 4}, -1.0f)), "gaussian_nll_loss: var has negative entry/entries");
  EXPECT_WEFT_ERROR(multilabel_soft_margin_loss(x, y, full({3}, 1.0f)),
                    "multilabel_soft_margin_loss: weight shape [3] does not match the 4 classes of input shape [3, 4]");
  EXPECT_WEFT_ERROR(soft_margin_loss(x.to(DType::Int64), y), "soft_margin_loss: expected floating inputs, got int64");
}

}  // namespace
}  // namespace weft
