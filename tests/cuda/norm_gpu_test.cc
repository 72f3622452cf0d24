// CUDA layer_norm / batch_norm forward and backward against the CPU kernels, odd
// sizes and > 65535 rows, plus float64 gradcheck on the GPU.
#include <gtest/gtest.h>

#include "core/nn_ops.h"
#include "tests/cuda/gpu_gradcheck.h"
#include "tests/cuda/gpu_testing.h"

namespace weft {
namespace {
using testing::kGPU;
using testing::matches_cpu;
using testing::rnd;

TEST(CudaNorm, LayerNormForwardBackwardMatchesCpu) {
  WEFT_REQUIRE_GPU();
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16})
    for (Shape s : {Shape{1, 1}, Shape{7, 7}, Shape{5, 1000}, Shape{3, 3000}, Shape{70000, 3}, Shape{2000, 70}}) {
      const int64_t K = s[1];
      Tensor x = rnd(s, dt, 1), w = rnd({K}, dt, 2), b = rnd({K}, dt, 3), g = rnd(s, dt, 4);
      auto fn = [K](const std::vector<Tensor>& in) {
        Tensor xx = in[0].detach().requires_grad_(true), ww = in[1].detach().requires_grad_(true),
               bb = in[2].detach().requires_grad_(true);
        Tensor y = layer_norm(xx, {K}, ww, bb, 1e-5);
        y.backward(in[3]);
        return std::vector<Tensor>{y.detach(), xx.grad(), ww.grad(), bb.grad()};
      };
      double tol = testing::tolerance(dt) * (dt == DType::Float32 ? 50 : 4);
      EXPECT_TRUE(matches_cpu(fn, {x, w, b, g}, tol)) << dt << " " << shape_str(s);
    }
}

TEST(CudaNorm, BatchNormTrainingAndEvalMatchesCpu) {
  WEFT_REQUIRE_GPU();
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16})
    for (Shape s : {Shape{4, 3}, Shape{2, 5, 7, 9}, Shape{3, 1, 1000}}) {
      const int64_t C = s[1];
      Tensor x = rnd(s, dt, 5), w = rnd({C}, dt, 6), b = rnd({C}, dt, 7), g = rnd(s, dt, 8);
      for (bool training : {true, false}) {
        auto fn = [C, training](const std::vector<Tensor>& in) {
          Tensor rm = zeros({C}, in[0].options()), rv = ones({C}, in[0].options());
          Tensor xx = in[0].detach().requires_grad_(true), ww = in[1].detach().requires_grad_(true),
                 bb = in[2].detach().requires_grad_(true);
          Tensor y = batch_norm(xx, rm, rv, ww, bb, training, 0.1, 1e-5);
          y.backward(in[3]);
          return std::vector<Tensor>{y.detach(), xx.grad(), ww.grad(), bb.grad(), rm, rv};
        };
        double tol = testing::tolerance(dt) * (dt == DType::Float32 ? 50 : 4);
        EXPECT_TRUE(matches_cpu(fn, {x, w, b, g}, tol)) << dt << " " << shape_str(s) << " training " << training;
      }
    }
}

TEST(CudaNorm, GradcheckFloat64OnGpu) {
  WEFT_REQUIRE_GPU();
  Tensor x = rnd({3, 6}, DType::Float64, 9);
  Tensor w = rnd({6}, DType::Float64, 10);
  Tensor b = rnd({6}, DType::Float64, 11);
  auto r = testing::gpu_gradcheck(
      [](const std::vector<Tensor>& in) { return layer_norm(in[0], {6}, in[1], in[2], 1e-5); }, {x, w, b});
  EXPECT_TRUE(r) << r.message;
  Tensor xb = rnd({4, 3, 2}, DType::Float64, 12);
  Tensor wb = rnd({3}, DType::Float64, 13);
  Tensor bb = rnd({3}, DType::Float64, 14);
  auto rb = testing::gpu_gradcheck(
      [](const std::vector<Tensor>& in) {
        return batch_norm(in[0], Tensor(), Tensor(), in[1], in[2], true, 0.1, 1e-5);
      },
      {xb, wb, bb});
  EXPECT_TRUE(rb) << rb.message;
}

}  // namespace
}  // namespace weft
