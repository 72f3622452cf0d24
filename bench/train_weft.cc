// train_weft: weft's side of //bench:train_vs_torch. Trains one model (mlp, cnn
// or lstm) for a fixed number of SGD-momentum steps at batch 128 on Fashion-MNIST
// training images and prints one JSON line: images/s over the timed steps and
// the process's peak resident memory.
//   train_weft --model cnn --steps 60 --warmup 5 --threads 2
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench/bench_util.h"
#include "core/nn_ops.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "examples/flags.h"
#include "examples/models.h"
#include "io/fashion_mnist.h"
#include "optim/sgd.h"

int main(int argc, char** argv) {
  std::string model_name = "cnn";
  int steps = 60, warmup = 5, threads = 0;
  int64_t batch = 128;
  weft::examples::FlagParser flags("usage: train_weft [flags]");
  flags.add_choice("--model", &model_name, {"mlp", "cnn", "lstm"}, "model")
      .add("--steps N", &steps, "timed steps")
      .add("--warmup N", &warmup, "untimed steps first")
      .add("--threads N", &threads, "CPU threads", "all cores")
      .add("--batch N", &batch, "batch size");
  if (auto status = flags.parse_in_main(argc, argv, "train_weft")) return *status;
  try {
    using namespace weft;
    if (threads > 0) set_num_threads(threads);
    manual_seed(0);
    io::TensorDataset ds = io::load_fashion_mnist(io::kFashionMnistDir, true);
    auto model = model_name == "mlp"    ? examples::fashion_mlp()
                 : model_name == "lstm" ? examples::fashion_lstm()
                                        : examples::fashion_cnn();
    optim::SGD opt(model->parameters(), {0.01, 0.9, 0.0, 0.0, false});
    const int64_t n = ds.size();
    auto step = [&](int s) {
      int64_t start = (static_cast<int64_t>(s) * batch) % (n - batch);
      Tensor x = ds.data().narrow(0, start, batch);     // (B, 1, 28, 28)
      Tensor y = ds.targets().narrow(0, start, batch);  // (B)
      Tensor loss = cross_entropy((*model)(x), y);
      opt.zero_grad();
      loss.backward();
      opt.step();
      return loss.item<double>();
    };
    for (int s = 0; s < warmup; ++s) step(s);
    auto t0 = std::chrono::steady_clock::now();
    double last = 0;
    for (int s = 0; s < steps; ++s) last = step(warmup + s);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf(
        "{\"model\": \"%s\", \"images_per_second\": %.1f, \"peak_rss_mb\": %.1f, \"final_loss\": %.4f, "
        "\"threads\": %d}\n",
        model_name.c_str(), steps * batch / secs, bench::peak_rss_mb(), last, get_num_threads());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_weft: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
