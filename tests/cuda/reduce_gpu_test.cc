// CUDA reductions (sum, mean, prod, amax/amin, max/min/argmax along a dim, logsumexp,
// norm) and softmax-family ops against the CPU kernels on the same inputs: row
// (inner == 1) and column (inner > 1) layouts, non-contiguous inputs, odd sizes,
// every registered dtype, NaN propagation and first-index tie-breaking.
#include <cmath>

#include <gtest/gtest.h>

#include "core/nn_ops.h"
#include "tests/cuda/gpu_gradcheck.h"
#include "tests/cuda/gpu_testing.h"

namespace weft {
namespace {
using testing::kGPU;
using testing::matches_cpu;
using testing::rnd;

const DType kFloats[] = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16};

TEST(CudaReduce, SumMeanAmaxAminRowsAndColumns) {
  WEFT_REQUIRE_GPU();
  for (DType dt : kFloats)
    for (Shape s : {Shape{1, 1}, Shape{7, 1000}, Shape{3, 70001}, Shape{1000, 7}, Shape{2, 300000}}) {
      Tensor x = rnd(s, dt, 3);
      for (int64_t d : {0, 1}) {
        double tol = testing::tolerance(dt) * (dt == DType::Float32 ? 10 : 1);
        EXPECT_TRUE(matches_cpu(
            [d](const std::vector<Tensor>& in) {
              return std::vector<Tensor>{sum(in[0], {d}), mean(in[0], {d}), amax(in[0], {d}), amin(in[0], {d})};
            },
            {x}, tol))
            << dt << " " << shape_str(s) << " dim " << d;
      }
      EXPECT_TRUE(matches_cpu([](const std::vector<Tensor>& in) { return std::vector<Tensor>{sum(in[0], {})}; }, {x},
                              testing::tolerance(dt) * 10));
    }
}

TEST(CudaReduce, NonContiguousAndIntegerInputs) {
  WEFT_REQUIRE_GPU();
  Tensor x = rnd({30, 40, 5}, DType::Float32, 4).permute({2, 0, 1});
  EXPECT_TRUE(matches_cpu(
      [](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{sum(in[0].permute({2, 0, 1}), {1}), amax(in[0].permute({2, 0, 1}), {0, 2})};
      },
      {rnd({30, 40, 5}, DType::Float32, 4)}, 1e-5));
  for (DType dt : {DType::Int64, DType::Int32, DType::UInt8, DType::Bool}) {
    Tensor xi = (rnd({70, 33}, DType::Float64, 5) * 50).to(dt);
    EXPECT_TRUE(matches_cpu(
        [](const std::vector<Tensor>& in) {
          return std::vector<Tensor>{sum(in[0], {1}), sum(in[0], {0}), amax(in[0], {1}), amin(in[0], {0}),
                                     std::get<1>(max(in[0], 1, false))};
        },
        {xi}, 0))
        << dt;
  }
  (void)x;
}

TEST(CudaReduce, ArgmaxTiesAndNaN) {
  WEFT_REQUIRE_GPU();
  // ties: first index wins on rows and columns; NaN is the max and the min
  Tensor t = tensor(std::vector<double>{1, 3, 3, 0, 3, 2, 5, 5, NAN, 1, NAN, 5}, {3, 4});
  for (DType dt : kFloats) {
    Tensor x = t.to(dt);
    EXPECT_TRUE(matches_cpu(
        [](const std::vector<Tensor>& in) {
          auto [v, i] = max(in[0], 1, false);
          auto [v0, i0] = min(in[0], 0, false);
          return std::vector<Tensor>{v, i, v0, i0, argmax(in[0], std::nullopt, false), amax(in[0], {1})};
        },
        {x}, 0))
        << dt;
  }
  // a long row (block path with chunks) full of equal values
  Tensor z = zeros({1, 200000});
  EXPECT_TRUE(
      matches_cpu([](const std::vector<Tensor>& in) { return std::vector<Tensor>{argmax(in[0], 1, false)}; }, {z}, 0));
  Tensor r = rnd({5, 100000}, DType::Float32, 9);
  EXPECT_TRUE(matches_cpu(
      [](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{argmax(in[0], 1, false), argmin(in[0], 0, false)};
      },
      {r}, 0));
}

TEST(CudaReduce, ProdLogsumexpNorm) {
  WEFT_REQUIRE_GPU();
  for (DType dt : kFloats) {
    Tensor x = rnd({9, 13, 6}, dt, 11);
    double tol = testing::tolerance(dt) * 10;
    EXPECT_TRUE(matches_cpu(
        [](const std::vector<Tensor>& in) {
          return std::vector<Tensor>{prod(in[0], 1, false),      logsumexp(in[0], {2}),       logsumexp(in[0], {0, 1}),
                                     norm(in[0], 2.0, {1}),      norm(in[0], 1.0, {2}),       norm(in[0], 0.0, {0}),
                                     norm(in[0], INFINITY, {1}), norm(in[0], -INFINITY, {2}), norm(in[0], 3.0, {1})};
        },
        {x}, tol))
        << dt;
  }
  Tensor inf = tensor(std::vector<double>{-INFINITY, -INFINITY, 1, INFINITY, NAN, 2}, {3, 2});
  EXPECT_TRUE(
      matches_cpu([](const std::vector<Tensor>& in) { return std::vector<Tensor>{logsumexp(in[0], {1})}; }, {inf}, 0));
}

TEST(CudaReduce, GradientsMatchCpu) {
  WEFT_REQUIRE_GPU();
  Tensor x = rnd({6, 5, 4}, DType::Float64, 12);
  auto fn = [](const std::vector<Tensor>& in) {
    Tensor a = in[0].detach().requires_grad_(true);
    Tensor y =
        add(add(sum(mul(std::get<0>(max(a, 1, false)), std::get<0>(max(a, 1, false))), {}), sum(prod(a, 2, false), {})),
            sum(mul(logsumexp(a, {0}), norm(a, 2.0, {0})), {}));
    y.backward();
    return std::vector<Tensor>{y.detach(), a.grad()};
  };
  EXPECT_TRUE(matches_cpu(fn, {x}, 1e-9));
}

TEST(CudaSoftmax, MatchesCpuRowsColumnsAndVocabRows) {
  WEFT_REQUIRE_GPU();
  for (DType dt : kFloats)
    // row lengths hit every path of core/cuda/softmax.cu: warp rows cached 2 / 8 / 32
    // per lane (<= 64, <= 256, <= 1024), block rows cached 8 per thread (<= 8192), uncached
    for (Shape s : {Shape{1, 1}, Shape{4, 7}, Shape{3, 64}, Shape{3, 65}, Shape{3, 100}, Shape{3, 257}, Shape{3, 1000},
                    Shape{3, 1024}, Shape{2, 1025}, Shape{2, 3000}, Shape{2, 8192}, Shape{2, 8193}, Shape{2, 50257},
                    Shape{70000, 3}, Shape{5, 9, 11}}) {
      Tensor x = mul(rnd(s, dt, 21), scalar_tensor(8.0, {dt, kCPU}));
      for (int64_t d : {int64_t(0), int64_t(-1)}) {
        EXPECT_TRUE(matches_cpu(
            [d](const std::vector<Tensor>& in) {
              return std::vector<Tensor>{softmax(in[0], d), log_softmax(in[0], d)};
            },
            {x}, testing::tolerance(dt) * 10))
            << dt << " " << shape_str(s) << " dim " << d;
      }
    }
  // non-contiguous input, NaN and -inf rows
  Tensor nc = rnd({20, 30}, DType::Float32, 2);
  EXPECT_TRUE(matches_cpu(
      [](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{softmax(in[0].t(), 1), log_softmax(in[0].t(), 0)};
      },
      {nc}, 1e-5));
  Tensor odd = tensor(std::vector<double>{NAN, 1, 2, -INFINITY, -INFINITY, -INFINITY, 0, -INFINITY, 1}, {3, 3});
  EXPECT_TRUE(matches_cpu(
      [](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{softmax(in[0], 1), log_softmax(in[0], 1)};
      },
      {odd}, 1e-12));
}

TEST(CudaSoftmax, GradcheckFloat64OnGpu) {
  WEFT_REQUIRE_GPU();
  Tensor x = rnd({3, 5}, DType::Float64, 7);
  auto r1 = testing::gpu_gradcheck([](const std::vector<Tensor>& in) { return softmax(in[0], 1); }, {x});
  EXPECT_TRUE(r1) << r1.message;
  auto r2 = testing::gpu_gradcheck([](const std::vector<Tensor>& in) { return log_softmax(in[0], 0); }, {x});
  EXPECT_TRUE(r2) << r2.message;
}

TEST(CudaAttention, SdpaSoftmaxMatchesCpu) {
  WEFT_REQUIRE_GPU();
  for (DType dt : kFloats)
    for (bool causal : {false, true})
      for (int64_t S : {int64_t(7), int64_t(1500)}) {
        Tensor q = rnd({2, 3, 5, 8}, dt, 1), k = rnd({2, 3, S, 8}, dt, 2), v = rnd({2, 3, S, 4}, dt, 3);
        EXPECT_TRUE(matches_cpu(
            [causal](const std::vector<Tensor>& in) {
              return std::vector<Tensor>{scaled_dot_product_attention(in[0], in[1], in[2], causal)};
            },
            {q, k, v}, testing::tolerance(dt) * 10))
            << dt << " causal " << causal << " S " << S;
      }
  Tensor q = rnd({1, 2, 4, 3}, DType::Float64, 4);
  Tensor k = rnd({1, 2, 4, 3}, DType::Float64, 5);
  Tensor v = rnd({1, 2, 4, 3}, DType::Float64, 6);
  auto r = testing::gpu_gradcheck(
      [](const std::vector<Tensor>& in) { return scaled_dot_product_attention(in[0], in[1], in[2], true); }, {q, k, v});
  EXPECT_TRUE(r) << r.message;
}

}  // namespace
}  // namespace weft
