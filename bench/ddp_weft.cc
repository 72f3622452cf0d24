// ddp_weft: weft's side of //bench:ddp_vs_torch. Run under mpirun (one process
// per rank): trains an MLP 784-H-H-10 with DistributedDataParallel (SGD
// momentum, cross-entropy on a fixed synthetic batch per rank) and rank 0
// prints one JSON line: steps/s over the timed steps, the share of allreduce
// time hidden behind backward (DDP's comm_stats().overlap()), bucket count.
//   mpirun -np 2 ddp_weft --steps 30 --warmup 5 --batch 64 --hidden 2048 --threads 1 --bucket-cap-mb 4
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
#include "parallel/comm/mpi/context.h"
#include "parallel/data/ddp.h"

int main(int argc, char** argv) {
  int steps = 30, warmup = 5, threads = 1;
  int64_t batch = 64, hidden = 2048;
  double cap = 4;
  weft::examples::FlagParser flags("usage: mpirun -np N ddp_weft [flags]");
  flags.add("--steps N", &steps, "timed steps")
      .add("--warmup N", &warmup, "untimed steps first")
      .add("--threads N", &threads, "CPU threads per rank")
      .add("--batch N", &batch, "batch size per rank")
      .add("--hidden N", &hidden, "hidden width")
      .add("--bucket-cap-mb X", &cap, "DDP gradient bucket cap");
  if (auto status = flags.parse_in_main(argc, argv, "ddp_weft")) return *status;
  try {
    using namespace weft;
    parallel::DistributedContext ctx;
    set_num_threads(threads);
    manual_seed(0);
    auto model = nn::Sequential::of(std::make_shared<nn::Linear>(784, hidden), std::make_shared<nn::ReLU>(),
                                    std::make_shared<nn::Linear>(hidden, hidden), std::make_shared<nn::ReLU>(),
                                    std::make_shared<nn::Linear>(hidden, 10));
    parallel::DDPOptions o;
    o.bucket_cap_mb = cap;
    parallel::DistributedDataParallel ddp(model, ctx.world_ptr(), o);
    optim::SGD opt(model->parameters(), {0.01, 0.9, 0.0, 0.0, false});
    manual_seed(1 + ctx.rank());
    Tensor x = randn({batch, 784});      // (B, 784)
    Tensor y = randint(0, 10, {batch});  // (B)
    auto step = [&] {
      Tensor loss = cross_entropy(ddp(x), y);
      opt.zero_grad();
      loss.backward();
      opt.step();
      return loss;
    };
    for (int s = 0; s < warmup; ++s) step();
    ctx.world().barrier()->wait();
    ddp.reset_comm_stats();
    auto t0 = std::chrono::steady_clock::now();
    Tensor last;
    for (int s = 0; s < steps; ++s) last = step();
    double final_loss = last.item<double>();
    ctx.world().barrier()->wait();
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const auto& st = ddp.comm_stats();
    if (ctx.rank() == 0)
      std::printf(
          "{\"steps_per_second\": %.3f, \"overlap\": %.4f, \"buckets\": %zu, \"comm_window_ms\": %.3f, "
          "\"blocked_ms\": %.3f, \"final_loss\": %.4f, \"world\": %d, \"threads\": %d}\n",
          steps / secs, st.overlap(), ddp.bucket_names().size(), 1e3 * st.window_seconds / st.backwards,
          1e3 * st.blocked_seconds / st.backwards, final_loss, ctx.size(), get_num_threads());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddp_weft: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
