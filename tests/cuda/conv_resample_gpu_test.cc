// On the GPU, conv_transpose2d and conv_transpose1d (conv2d's cuDNN kernels
// with the roles swapped: core/ops/conv_transpose.cc), conv1d, group_norm,
// interpolate, leaky_relu and the recurrent layers: values against the CPU,
// gradients by finite differences with the ops on the GPU.
#include <vector>

#include <gtest/gtest.h>

#include "core/nn_ops.h"
#include "nn/rnn.h"
#include "tests/cuda/gpu_gradcheck.h"
#include "tests/cuda/gpu_testing.h"

namespace weft {
namespace {
using testing::gpu_gradcheck;
using testing::matches_cpu;
using testing::rnd;

TEST(CudaConvTranspose, MatchesCpu) {
  WEFT_REQUIRE_GPU();
  for (DType dt : {DType::Float32, DType::Float64}) {
    std::vector<Tensor> in = {rnd({2, 4, 5, 6}, DType::Float64, 1).to(dt), rnd({4, 3, 3, 3}, DType::Float64, 2).to(dt),
                              rnd({6}, DType::Float64, 3).to(dt), rnd({2, 4, 9}, DType::Float64, 4).to(dt),
                              rnd({6, 2, 3}, DType::Float64, 5).to(dt)};
    EXPECT_TRUE(matches_cpu(
        [](const std::vector<Tensor>& t) {
          return std::vector<Tensor>{
              conv_transpose2d(t[0], t[1], t[2], {2, 2}, {1, 1}, {1, 1}, 2),
              conv_transpose2d(t[0], t[1], Tensor(), {1, 2}, {0, 1}, {0, 1}, 1, {2, 1}),
              conv1d(t[3], t[4], t[2], 2, 1, 2, 2),
              conv_transpose1d(t[3], t[4].transpose(0, 1).contiguous().view({4, 3, 3}), Tensor(), 3, 1, 2)};
        },
        in, dt == DType::Float32 ? 1e-4 : -1))
        << dt;
  }
}

TEST(CudaConvTranspose, GradientsMatchFiniteDifferences) {
  WEFT_REQUIRE_GPU();
  auto r = gpu_gradcheck(
      [](const std::vector<Tensor>& in) {
        return conv_transpose2d(in[0], in[1], in[2], {2, 1}, {1, 0}, {1, 0}, 2, {1, 2});
      },
      {rnd({2, 4, 3, 4}, DType::Float64, 7), rnd({4, 2, 3, 2}, DType::Float64, 8), rnd({4}, DType::Float64, 9)},
      {.eps = 1e-6, .atol = 1e-6, .rtol = 1e-4});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(CudaNormResample, MatchesCpu) {
  WEFT_REQUIRE_GPU();
  for (DType dt : {DType::Float32, DType::Float64}) {
    std::vector<Tensor> in = {rnd({2, 6, 5, 7}, DType::Float64, 11).to(dt), rnd({6}, DType::Float64, 12).to(dt),
                              rnd({6}, DType::Float64, 13).to(dt)};
    EXPECT_TRUE(matches_cpu(
        [](const std::vector<Tensor>& t) {
          InterpolateOptions s2;
          s2.scale_factor = {1.7};
          return std::vector<Tensor>{
              group_norm(t[0], 3, t[1], t[2]),
              interpolate(t[0], InterpolateOptions{.size = {9, 4}, .mode = InterpolateMode::Bilinear}),
              interpolate(
                  t[0], InterpolateOptions{.size = {8, 11}, .mode = InterpolateMode::Bilinear, .align_corners = true}),
              interpolate(t[0], s2), leaky_relu(t[0], 0.2)};
        },
        in, dt == DType::Float32 ? 1e-4 : -1))
        << dt;
  }
  auto r = gpu_gradcheck(
      [](const std::vector<Tensor>& in) {
        return add(
            group_norm(in[0], 2, in[1], Tensor()),
            interpolate(interpolate(in[0], InterpolateOptions{.size = {5, 2}, .mode = InterpolateMode::Bilinear}),
                        InterpolateOptions{.size = {3, 4}, .mode = InterpolateMode::Nearest}));
      },
      {rnd({1, 4, 3, 4}, DType::Float64, 14), rnd({4}, DType::Float64, 15)}, {.eps = 1e-6, .atol = 1e-6, .rtol = 1e-4});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(CudaRecurrent, LstmAndGruMatchCpu) {
  WEFT_REQUIRE_GPU();
  nn::LSTM lstm(4, 6, {.num_layers = 2, .bidirectional = true});
  nn::GRU gru(4, 5, {.batch_first = true});
  Tensor x = rnd({5, 3, 4}, DType::Float32, 21);
  auto [out, hn, cn] = lstm.forward(x);
  auto [gout, ghn] = gru.forward(x);
  lstm.to(testing::kGPU);
  gru.to(testing::kGPU);
  auto [out_g, hn_g, cn_g] = lstm.forward(x.to(testing::kGPU));
  auto [gout_g, ghn_g] = gru.forward(x.to(testing::kGPU));
  EXPECT_TRUE(testing::tensors_near(out_g.cpu(), out, 1e-5));
  EXPECT_TRUE(testing::tensors_near(hn_g.cpu(), hn, 1e-5));
  EXPECT_TRUE(testing::tensors_near(cn_g.cpu(), cn, 1e-5));
  EXPECT_TRUE(testing::tensors_near(gout_g.cpu(), gout, 1e-5));
  EXPECT_TRUE(testing::tensors_near(ghn_g.cpu(), ghn, 1e-5));
}

}  // namespace
}  // namespace weft
