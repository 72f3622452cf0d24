// On the GPU, the ops composed of other ops: einsum and diagonal, the losses
// of core/ops/losses_composed.cc, the activations and predicates of
// core/ops/piecewise.cc: values against the CPU, gradients by finite
// differences with the ops on the GPU.
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "core/nn_ops.h"
#include "tests/cuda/gpu_gradcheck.h"
#include "tests/cuda/gpu_testing.h"

namespace weft {
namespace {
using testing::gpu_gradcheck;
using testing::matches_cpu;
using testing::rnd;

TEST(CudaComposed, MatchesCpu) {
  WEFT_REQUIRE_GPU();
  for (DType dt : {DType::Float32, DType::Float64}) {
    std::vector<Tensor> in = {rnd({2, 3, 4}, DType::Float64, 1).to(dt), rnd({2, 4, 5}, DType::Float64, 2).to(dt),
                              rnd({3, 3, 4}, DType::Float64, 3).to(dt), rnd({2, 3, 4}, DType::Float64, 4).to(dt)};
    EXPECT_TRUE(matches_cpu(
        [](const std::vector<Tensor>& t) {
          Tensor p = sigmoid(t[0]), q = softmax(t[3], 2);
          return std::vector<Tensor>{einsum("bij,bjk->bik", {t[0], t[1]}),
                                     einsum("iij,bjk->kib", {t[2], t[1]}),
                                     diagonal(t[2], 1, 0, 2),
                                     huber_loss(t[0], t[3], Reduction::None, 0.5),
                                     smooth_l1_loss(t[0], t[3]),
                                     l1_loss(t[0], t[3], Reduction::Sum),
                                     kl_div(log_softmax(t[0], 2), q, KlDivReduction::BatchMean),
                                     binary_cross_entropy(p, q),
                                     cosine_similarity(t[0], t[3], 2),
                                     normalize(t[0]),
                                     softplus(t[0] * 30.0, 1.0, 20.0),
                                     elu(t[0]),
                                     leaky_relu(t[0], 0.1)};
        },
        in, dt == DType::Float32 ? 1e-4 : -1))
        << dt;
  }
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = tensor(std::vector<double>{1, nan, inf, -inf, 0, -2}, {2, 3});
  EXPECT_TRUE(matches_cpu(
      [](const std::vector<Tensor>& t) {
        return std::vector<Tensor>{isnan(t[0]),      isinf(t[0]),    isfinite(t[0]),
                                   nan_to_num(t[0]), any(t[0], {1}), all(t[0], {0}, true)};
      },
      {x}));
}

TEST(CudaComposed, GradientsMatchFiniteDifferences) {
  WEFT_REQUIRE_GPU();
  auto r = gpu_gradcheck(
      [](const std::vector<Tensor>& in) {
        return add(sum(einsum("ij,jk,kl->il", {in[0], in[1], in[0].transpose(0, 1)})),
                   add(huber_loss(in[0], in[2], Reduction::Mean, 0.3), sum(cosine_similarity(in[0], in[2], 1))));
      },
      {rnd({3, 4}, DType::Float64, 7), rnd({4, 4}, DType::Float64, 8), rnd({3, 4}, DType::Float64, 9)},
      {.eps = 1e-6, .atol = 1e-6, .rtol = 1e-4});
  EXPECT_TRUE(r.ok) << r.message;
}

}  // namespace
}  // namespace weft
