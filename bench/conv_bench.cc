// Times forward+backward of the Fashion-MNIST CNN's conv and pool layers at batch
// 128 (the shapes of the end-to-end benchmark), in milliseconds per step.
//
// Run with: ./bazelw run //bench:conv_bench [-- reps]. The PyTorch peer is
// bench/conv_vs_torch.py (same shapes); compare them back to back.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "autograd/engine.h"
#include "bench/bench_util.h"
#include "core/nn_ops.h"
#include "core/ops.h"

namespace weft::bench {
namespace {

double time_ms(const std::function<void()>& f, int reps) {
  f();  // warm-up
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    auto a = std::chrono::steady_clock::now();
    f();
    auto b = std::chrono::steady_clock::now();
    t.push_back(std::chrono::duration<double, std::milli>(b - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];  // median
}

void run(int reps) {
  const int64_t N = 128;
  Tensor x = filled({N, 1, 28, 28}, 0, 1, 1);
  Tensor w1 = filled({32, 1, 3, 3}, -0.3f, 0.3f, 2).requires_grad_();
  Tensor b1 = filled({32}, -0.1f, 0.1f, 3).requires_grad_();
  Tensor h1 = filled({N, 32, 14, 14}, 0, 1, 4).requires_grad_();
  Tensor w2 = filled({64, 32, 3, 3}, -0.06f, 0.06f, 5).requires_grad_();
  Tensor b2 = filled({64}, -0.1f, 0.1f, 6).requires_grad_();
  Tensor p1 = filled({N, 32, 28, 28}, -1, 1, 7).requires_grad_();
  Tensor p2 = filled({N, 64, 14, 14}, -1, 1, 8).requires_grad_();

  auto bw = [](const Tensor& y) { y.backward(ones_like(y)); };
  double c1f = time_ms(
      [&] {
        NoGradGuard g;
        conv2d(x, w1, b1, {1, 1}, {1, 1});
      },
      reps);
  double c1 = time_ms([&] { bw(conv2d(x, w1, b1, {1, 1}, {1, 1})); }, reps);
  double c2f = time_ms(
      [&] {
        NoGradGuard g;
        conv2d(h1, w2, b2, {1, 1}, {1, 1});
      },
      reps);
  double c2 = time_ms([&] { bw(conv2d(h1, w2, b2, {1, 1}, {1, 1})); }, reps);
  double m1f = time_ms(
      [&] {
        NoGradGuard g;
        max_pool2d(p1, {2, 2});
      },
      reps);
  double m2f = time_ms(
      [&] {
        NoGradGuard g;
        max_pool2d(p2, {2, 2});
      },
      reps);
  double m1 = time_ms([&] { bw(max_pool2d(p1, {2, 2})); }, reps);
  double m2 = time_ms([&] { bw(max_pool2d(p2, {2, 2})); }, reps);
  std::printf("weft  conv1 fwd %.3f ms  fwd+bwd %.3f ms\n", c1f, c1);
  std::printf("weft  conv2 fwd %.3f ms  fwd+bwd %.3f ms\n", c2f, c2);
  std::printf("weft  pool1 fwd %.3f ms  fwd+bwd %.3f ms  pool2 fwd %.3f ms  fwd+bwd %.3f ms\n", m1f, m1, m2f, m2);
  std::printf("weft  total %.3f ms\n", c1 + c2 + m1 + m2);
}

}  // namespace
}  // namespace weft::bench

int main(int argc, char** argv) {
  weft::bench::run(argc > 1 ? std::atoi(argv[1]) : 20);
  return 0;
}
