// cnn_gpu_weft: training throughput of the Fashion-MNIST CNN (examples/models.h)
// on a GPU: SGD-momentum steps at batch 256 on synthetic 28x28 images (fixed
// pseudo-random values; throughput does not depend on the data). Prints
// `images_per_s=<v>`; bench/cnn_gpu_torch.py is the PyTorch peer.
//   cnn_gpu_weft [--device cuda:0] [--batch 256] [--steps 50] [--warmup 10]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench/bench_util.h"
#include "core/nn_ops.h"
#include "core/rng.h"
#include "examples/device_support.h"
#include "examples/flags.h"
#include "examples/models.h"
#include "optim/sgd.h"

int main(int argc, char** argv) {
  std::string device = "cuda:0";
  int steps = 50, warmup = 10;
  int64_t batch = 256;
  weft::examples::FlagParser flags("usage: cnn_gpu_weft [flags]");
  flags.add("--device D", &device, "cuda or cuda:N")
      .add("--steps N", &steps, "timed steps")
      .add("--warmup N", &warmup, "untimed steps first")
      .add("--batch N", &batch, "batch size");
  if (auto status = flags.parse_in_main(argc, argv, "cnn_gpu_weft")) return *status;
  try {
    using namespace weft;
    const Device dev = examples::parse_device(device);
    manual_seed(0);
    auto model = examples::fashion_cnn();
    model->to(dev);
    optim::SGD opt(model->parameters(), {0.01, 0.9, 0.0, 0.0, false});
    Tensor x = bench::filled({batch, 1, 28, 28}).to(dev);                     // (B, 1, 28, 28)
    Tensor y = (bench::filled({batch}, 0.f, 10.f).to(DType::Int64)).to(dev);  // (B)
    auto step = [&] {
      Tensor loss = cross_entropy((*model)(x), y);
      opt.zero_grad();
      loss.backward();
      opt.step();
    };
    for (int s = 0; s < warmup; ++s) step();
    examples::synchronize(dev);
    auto t0 = std::chrono::steady_clock::now();
    for (int s = 0; s < steps; ++s) step();
    examples::synchronize(dev);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("images_per_s=%.1f\n", static_cast<double>(batch) * steps / secs);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cnn_gpu_weft: error: %s\n", e.what());
    return 1;
  }
}
