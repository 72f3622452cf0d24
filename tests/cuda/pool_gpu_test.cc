// CUDA pooling kernels (core/cuda/pool.cu) against the CPU: max (values and the
// gradient routed through the indices), avg (count_include_pad on/off, ceil
// mode) and adaptive avg, forward and backward, float32 / float64, odd sizes,
// NaN propagation, and float64 gradcheck through the GPU.
#include <limits>

#include <gtest/gtest.h>

#include "autograd/gradcheck.h"
#include "core/nn_ops.h"
#include "core/ops.h"
#include "tests/cuda/gpu_testing.h"

namespace weft {
namespace {
using testing::kGPU;
using testing::matches_cpu;
using testing::rnd;

template <typename F>
std::vector<Tensor> fwd_bwd(const Tensor& xin, F op) {
  Tensor x = xin.detach().requires_grad_();
  Tensor y = op(x);
  y.backward(rnd(y.sizes(), y.dtype(), 7).to(y.device()));
  return {y.detach(), x.grad()};
}

TEST(CudaPool, MaxPoolMatchesCpu) {
  WEFT_REQUIRE_GPU();
  struct C {
    std::array<int64_t, 2> k, s, p, d;
    bool ceil;
  };
  const C cases[] = {{{2, 2}, {2, 2}, {0, 0}, {1, 1}, false},
                     {{3, 3}, {2, 2}, {1, 1}, {1, 1}, false},
                     {{3, 2}, {1, 2}, {1, 0}, {2, 1}, true},
                     {{2, 2}, {2, 2}, {0, 0}, {1, 1}, true},
                     {{5, 5}, {3, 3}, {2, 2}, {1, 1}, false}};
  for (DType dt : {DType::Float32, DType::Float64})
    for (const C& c : cases)
      for (Shape s : {Shape{2, 3, 7, 9}, Shape{1, 1, 1, 1}, Shape{3, 5, 33, 17}}) {
        if (s[2] + 2 * c.p[0] < c.d[0] * (c.k[0] - 1) + 1 || s[3] + 2 * c.p[1] < c.d[1] * (c.k[1] - 1) + 1) continue;
        EXPECT_TRUE(matches_cpu(
            [&c](const std::vector<Tensor>& in) {
              return fwd_bwd(in[0], [&c](const Tensor& x) { return max_pool2d(x, c.k, c.s, c.p, c.d, c.ceil); });
            },
            {rnd(s, dt, 3)}))
            << dt << " " << shape_str(s) << " k=" << c.k[0] << "x" << c.k[1];
      }
}

TEST(CudaPool, MaxPoolPropagatesNaN) {
  WEFT_REQUIRE_GPU();
  Tensor x = rnd({1, 1, 4, 4}, DType::Float32, 1);
  x.data_ptr<float>()[5] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(matches_cpu(
      [](const std::vector<Tensor>& in) {
        return fwd_bwd(in[0], [](const Tensor& t) { return max_pool2d(t, {2, 2}, {1, 1}); });
      },
      {x}));
}

TEST(CudaPool, AvgPoolMatchesCpu) {
  WEFT_REQUIRE_GPU();
  for (DType dt : {DType::Float32, DType::Float64})
    for (bool include_pad : {true, false})
      for (bool ceil : {false, true})
        for (Shape s : {Shape{2, 3, 7, 9}, Shape{1, 2, 1, 1}, Shape{2, 4, 32, 17}}) {
          EXPECT_TRUE(matches_cpu(
              [=](const std::vector<Tensor>& in) {
                return fwd_bwd(in[0], [=](const Tensor& x) {
                  return avg_pool2d(x, {3, 2}, {2, 1}, {1, 1}, ceil, include_pad);
                });
              },
              {rnd(s, dt, 4)}))
              << dt << " " << shape_str(s) << " include_pad=" << include_pad << " ceil=" << ceil;
        }
}

TEST(CudaPool, AdaptiveAvgPoolMatchesCpu) {
  WEFT_REQUIRE_GPU();
  for (DType dt : {DType::Float32, DType::Float64})
    for (std::array<int64_t, 2> o : {std::array<int64_t, 2>{1, 1}, {3, 5}, {7, 9}, {10, 4}})
      for (Shape s : {Shape{2, 3, 7, 9}, Shape{1, 2, 13, 5}}) {
        EXPECT_TRUE(matches_cpu(
            [=](const std::vector<Tensor>& in) {
              return fwd_bwd(in[0], [=](const Tensor& x) { return adaptive_avg_pool2d(x, o); });
            },
            {rnd(s, dt, 5)}))
            << dt << " " << shape_str(s) << " out=" << o[0] << "x" << o[1];
      }
}

TEST(CudaPool, GradcheckFloat64OnGpu) {
  WEFT_REQUIRE_GPU();
  Tensor x = rnd({1, 2, 6, 5}, DType::Float64, 6).requires_grad_();
  auto r1 = autograd::gradcheck(
      [](const std::vector<Tensor>& in) {
        return avg_pool2d(in[0].to(kGPU), {3, 3}, {2, 2}, {1, 1}).cpu();
      },
      {x});
  EXPECT_TRUE(r1) << r1.message;
  auto r2 = autograd::gradcheck(
      [](const std::vector<Tensor>& in) {
        return adaptive_avg_pool2d(in[0].to(kGPU), {4, 3}).cpu();
      },
      {x});
  EXPECT_TRUE(r2) << r2.message;
  auto r3 = autograd::gradcheck(
      [](const std::vector<Tensor>& in) {
        return max_pool2d(in[0].to(kGPU), {2, 2}, {1, 1}).cpu();
      },
      {x});
  EXPECT_TRUE(r3) << r3.message;
}

}  // namespace
}  // namespace weft
