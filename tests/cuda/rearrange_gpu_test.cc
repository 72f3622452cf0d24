// On the GPU, the ops composed of other ops (core/ops/rearrange.cc), sort and
// topk (a device without an argsort kernel sorts a host copy: core/ops/sort.cc),
// and in-place ops through views (Note [views after an in-place op]): values
// against the CPU, gradients by finite differences with the op on the GPU.
#include <vector>

#include <gtest/gtest.h>

#include "core/ops.h"
#include "tests/cuda/gpu_gradcheck.h"
#include "tests/cuda/gpu_testing.h"

namespace weft {
namespace {
using testing::gpu_gradcheck;
using testing::matches_cpu;
using testing::rnd;

TEST(CudaRearrange, MatchesCpu) {
  WEFT_REQUIRE_GPU();
  for (DType dt : {DType::Float32, DType::Float64}) {
    Tensor x = rnd({3, 70}, DType::Float64, 5).to(dt);
    EXPECT_TRUE(matches_cpu(
        [](const std::vector<Tensor>& in) {
          const Tensor& t = in[0];
          return std::vector<Tensor>{flip(t, {0, 1}),      roll(t, {2, -5}, {0, 1}),
                                     repeat(t, {2, 1, 2}), pad(t, {1, -2, 2, 0}, 0.5),
                                     cumsum(t, 1),         cumsum(t, 0)};
        },
        {x}, dt == DType::Float32 ? 1e-4 : -1))
        << dt;
  }
}

TEST(CudaSort, MatchesCpu) {
  WEFT_REQUIRE_GPU();
  Tensor x = round(mul(rnd({4, 33}, DType::Float64, 6), scalar_tensor(3.0)));  // ties
  EXPECT_TRUE(matches_cpu(
      [](const std::vector<Tensor>& in) {
        auto [v, pos] = sort(in[0], 1, true);
        auto [tv, tp] = topk(in[0], 5, 0, false);
        return std::vector<Tensor>{v, pos, tv, tp, argsort(in[0], 0)};
      },
      {x}));
}

TEST(CudaViewsAfterInplace, GradientsMatchFiniteDifferences) {
  WEFT_REQUIRE_GPU();
  auto program = [](const std::vector<Tensor>& in) {
    const Tensor& x = in[0];  // [3, 4] on the GPU
    Tensor u = mul(x, scalar_tensor(1.0, {x.dtype(), x.device()}));
    Tensor ut = u.transpose(0, 1);
    Tensor col = u.select(1, 2);
    col.mul_(tanh(x.select(1, 0)));  // CopySlices on u
    Tensor buf = zeros({2, 4}, x.options());
    buf.select(0, 1).copy_(sin(x.select(0, 0)));
    return add(add(sum(mul(u, u)), sum(exp(ut))), sum(mul(buf, buf)));
  };
  auto r = gpu_gradcheck(program, {rnd({3, 4}, DType::Float64, 7)}, {.eps = 1e-6, .atol = 1e-6, .rtol = 1e-4});
  EXPECT_TRUE(r.ok) << r.message;
  auto g = gpu_gradcheck(
      [](const std::vector<Tensor>& in) {
        return sum(std::get<0>(topk(pad(in[0], {1, 1}), 3)));
      },
      {rnd({2, 5}, DType::Float64, 8)}, {.eps = 1e-6, .atol = 1e-6, .rtol = 1e-4});
  EXPECT_TRUE(g.ok) << g.message;
}

}  // namespace
}  // namespace weft
