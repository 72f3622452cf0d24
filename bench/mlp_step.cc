// mlp_step: single-process timing of the //bench:ddp_vs_torch MLP (784-H-H-10,
// SGD momentum, cross-entropy on a fixed synthetic batch), no process group.
// Prints steps/s and the split of one step into forward, backward and optimizer
// time, for profiling (perf record) the non-distributed part of the DDP step.
//   mlp_step --steps 50 --warmup 5 --batch 64 --hidden 2048 --threads 1
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/nn_ops.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "examples/flags.h"
#include "nn/nn.h"
#include "optim/sgd.h"

int main(int argc, char** argv) {
  int steps = 50, warmup = 5, threads = 1;
  int64_t batch = 64, hidden = 2048;
  weft::examples::FlagParser flags("usage: mlp_step [flags]");
  flags.add("--steps N", &steps, "timed steps")
      .add("--warmup N", &warmup, "untimed steps first")
      .add("--threads N", &threads, "CPU threads")
      .add("--batch N", &batch, "batch size")
      .add("--hidden N", &hidden, "hidden width");
  if (auto status = flags.parse_in_main(argc, argv, "mlp_step")) return *status;
  try {
    using namespace weft;
    using clk = std::chrono::steady_clock;
    set_num_threads(threads);
    manual_seed(0);
    auto model = nn::Sequential::of(std::make_shared<nn::Linear>(784, hidden), std::make_shared<nn::ReLU>(),
                                    std::make_shared<nn::Linear>(hidden, hidden), std::make_shared<nn::ReLU>(),
                                    std::make_shared<nn::Linear>(hidden, 10));
    optim::SGD opt(model->parameters(), {0.01, 0.9, 0.0, 0.0, false});
    Tensor x = randn({batch, 784});      // (B, 784)
    Tensor y = randint(0, 10, {batch});  // (B)
    double t_fwd = 0, t_bwd = 0, t_opt = 0;
    auto sec = [](clk::time_point a, clk::time_point b) { return std::chrono::duration<double>(b - a).count(); };
    Tensor loss;
    auto step = [&] {
      auto t0 = clk::now();
      loss = cross_entropy((*model)(x), y);
      auto t1 = clk::now();
      opt.zero_grad();
      loss.backward();
      auto t2 = clk::now();
      opt.step();
      auto t3 = clk::now();
      t_fwd += sec(t0, t1), t_bwd += sec(t1, t2), t_opt += sec(t2, t3);
    };
    for (int s = 0; s < warmup; ++s) step();
    t_fwd = t_bwd = t_opt = 0;
    auto t0 = clk::now();
    for (int s = 0; s < steps; ++s) step();
    double secs = sec(t0, clk::now());
    std::printf(
        "{\"steps_per_second\": %.3f, \"fwd_ms\": %.3f, \"bwd_ms\": %.3f, \"opt_ms\": %.3f, \"final_loss\": %.4f, "
        "\"threads\": %d}\n",
        steps / secs, 1e3 * t_fwd / steps, 1e3 * t_bwd / steps, 1e3 * t_opt / steps, loss.item<double>(),
        get_num_threads());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mlp_step: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
