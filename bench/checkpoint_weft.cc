// The step-time cost of a partitioned checkpoint save, synchronous against
// in the background (parallel/checkpoint/checkpointer.h), under mpirun:
//   ./bazelw build //bench:checkpoint_weft
//   tools/../tests/parallel/mpirun.sh -np 4 bazel-bin/bench/checkpoint_weft --pp 2 --zero --hidden 1536
// An MLP of 4 Linear(hidden) layers (Tanh between) as a DistributedModel
// (--pp x world/--pp, --zero), AdamW, --steps steps of a --rows-row global
// batch; a checkpoint after every --every steps into --dir. Rank 0 prints one
// line per mode (none, sync, async): the mean step time without a save, the
// mean time of a step that saves (step + save() as the training loop sees
// it), the mean of the --after steps that follow a save (the background
// writer competes with them), and the checkpoint's size.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <numeric>

#include "core/nn_ops.h"
#include "core/ops.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "examples/flags.h"
#include "nn/nn.h"
#include "optim/adam.h"
#include "parallel/checkpoint/checkpointer.h"
#include "parallel/comm/mpi/context.h"
#include "parallel/hybrid/distributed_model.h"
#include "parallel/hybrid/distributed_optimizer.h"

namespace {

using namespace weft;  // NOLINT

struct Flags {
  int pp = 2;
  bool zero = false;
  int64_t hidden = 1536, rows = 64;
  int steps = 30, every = 10, after = 3, threads = 1;
  std::string dir = "/tmp/weft_checkpoint_bench";
};

double mean(const std::vector<double>& v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

void run(const Flags& f, const std::string& mode, parallel::DistributedContext& ctx) {
  const int n = ctx.size();
  manual_seed(1);
  auto m = std::make_shared<nn::Sequential>();
  for (int i = 0; i < 4; ++i) {
    m->push_back(std::make_shared<nn::Linear>(f.hidden, f.hidden));
    m->push_back(std::make_shared<nn::Tanh>());
  }
  parallel::hybrid::DistributedModelOptions o;
  o.pp = f.pp;
  o.balance = std::vector<int>(f.pp, 8 / f.pp);
  o.shard_optimizer_state = f.zero;
  o.pipe.chunks = 2;
  parallel::hybrid::DistributedModel dm(m, ctx.world_ptr(), o);
  parallel::hybrid::DistributedOptimizer opt(
      dm, [](const optim::NamedParameters& p) { return std::make_unique<optim::AdamW>(p, optim::AdamWOptions{}); });
  const int64_t local = f.rows / (n / f.pp);
  Tensor x = randn({local, f.hidden}), y = randn({local, f.hidden});
  dm.partition(x);
  const std::string root = f.dir + "/" + mode;
  if (ctx.rank() == 0) std::filesystem::remove_all(root);
  ctx.world().barrier()->wait();
  std::unique_ptr<parallel::checkpoint::Checkpointer> ck;
  if (mode != "none")
    ck = std::make_unique<parallel::checkpoint::Checkpointer>(
        root, ctx.world_ptr(),
        parallel::checkpoint::SaveOptions{parallel::checkpoint::Kind::kPartial, 2, mode == "async"});
  std::vector<double> plain, saving, following;
  int since_save = 1 << 30;
  for (int s = 0; s < f.steps; ++s) {
    const auto t0 = std::chrono::steady_clock::now();
    opt.zero_grad();
    dm.step(x, y, [](const Tensor& out, const Tensor& t) { return mse_loss(out, t); });
    opt.step();
    const bool saves = ck && (s + 1) % f.every == 0;
    if (saves) ck->save(parallel::checkpoint::Stateful{&dm, &opt, nullptr}, {s + 1, 0, s + 1, {}});
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s < 2) continue;  // warm-up
    if (saves) {
      saving.push_back(dt);
      since_save = 0;
    } else if (since_save < f.after) {
      following.push_back(dt);
      ++since_save;
    } else {
      plain.push_back(dt);
    }
  }
  if (ck) ck->wait();
  uint64_t bytes = 0;
  if (ck && ctx.rank() == 0)
    for (const auto& e : std::filesystem::recursive_directory_iterator(root))
      if (e.is_regular_file()) bytes += e.file_size();
  if (ctx.rank() == 0)
    std::printf(
        "mode=%s pp=%d dp=%d zero=%d hidden=%lld: step %.1f ms; saving step %.1f ms; next %d steps %.1f ms; "
        "checkpoint %.1f MiB (2 kept)\n",
        mode.c_str(), f.pp, n / f.pp, f.zero ? 1 : 0, static_cast<long long>(f.hidden), mean(plain) * 1e3,
        mean(saving) * 1e3, f.after, mean(following) * 1e3, static_cast<double>(bytes) / 2 / (1 << 20));
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  examples::FlagParser p("usage: mpirun -np N checkpoint_weft [flags]");
  p.add("--pp N", &f.pp, "pipeline stages")
      .add_switch("--zero", &f.zero, true, "ZeRO-1 over the replicas")
      .add("--hidden N", &f.hidden, "layer width")
      .add("--rows N", &f.rows, "global batch rows")
      .add("--steps N", &f.steps, "steps per mode")
      .add("--every N", &f.every, "save every N steps")
      .add("--after N", &f.after, "steps after a save counted apart")
      .add("--threads N", &f.threads, "CPU threads per rank")
      .add("--dir DIR", &f.dir, "checkpoint root");
  if (!p.parse(argc, argv, std::cout)) return 0;
  weft::parallel::DistributedContext ctx;
  weft::set_num_threads(f.threads);
  for (const char* mode : {"none", "sync", "async"}) run(f, mode, ctx);
  return 0;
}
