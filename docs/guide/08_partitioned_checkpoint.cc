// Guide, chapter 7 (continued): a partitioned checkpoint saved on one layout
// and loaded on another. Run under mpirun with an even number of ranks:
// training at pp 2 x dp world/2 with ZeRO-1 saves a checkpoint directory;
// a model laid out as pp 1 x dp world (plain data parallelism) loads it and
// trains on as the first layout does; one process reads the whole model.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "core/rng.h"
#include "nn/nn.h"
#include "optim/sgd.h"
#include "parallel/checkpoint/checkpointer.h"
#include "parallel/checkpoint/load.h"
#include "parallel/comm/mpi/context.h"
#include "parallel/hybrid/distributed_model.h"
#include "parallel/hybrid/distributed_optimizer.h"

namespace nn = weft::nn;
namespace hy = weft::parallel::hybrid;
namespace ck = weft::parallel::checkpoint;
using weft::Tensor;

std::shared_ptr<nn::Sequential> make_model() {
  return nn::Sequential::of(std::make_shared<nn::Linear>(8, 32), std::make_shared<nn::Tanh>(),
                            std::make_shared<nn::Linear>(32, 32), std::make_shared<nn::Tanh>(),
                            std::make_shared<nn::Linear>(32, 1));
}

std::unique_ptr<weft::optim::Optimizer> make_sgd(const weft::optim::NamedParameters& params) {
  return std::make_unique<weft::optim::SGD>(params, weft::optim::SGDOptions{.lr = 0.05, .momentum = 0.9});
}

// `steps` steps of `model` from global batch `first` on; the losses.
std::vector<double> train(hy::DistributedModel& model, hy::DistributedOptimizer& opt, const Tensor& x_all,
                          const Tensor& y_all, int first, int steps) {
  const int64_t batch = 48, rows = batch / model.grid().dp(), begin = model.dp_rank() * rows;
  auto mse = [](const Tensor& out, const Tensor& target) { return weft::mse_loss(out, target); };
  std::vector<double> losses;
  for (int step = first; step < first + steps; ++step) {
    Tensor x = x_all.narrow(0, (step % 10) * batch + begin, rows);  // this replica's rows
    Tensor y = y_all.narrow(0, (step % 10) * batch + begin, rows);
    opt.zero_grad();
    losses.push_back(model.step(x, y, mse));
    opt.step();
  }
  return losses;
}

int main(int argc, char** argv) {
  weft::parallel::DistributedContext ctx;
  weft::set_num_threads(1);
  const std::string root = argc > 1 ? argv[1] : (std::filesystem::temp_directory_path() / "guide_ck").string();

  weft::manual_seed(1);
  Tensor x_all = weft::randn({480, 8});                                               // (480, 8)
  Tensor y_all = weft::tanh(x_all).matmul(weft::linspace(-1, 1, 8).reshape({8, 1}));  // (480, 1)

  // Layout A: 2 pipeline stages x world/2 replicas, optimizer state sharded.
  weft::manual_seed(0);
  hy::DistributedModel a(make_model(), ctx.world_ptr(),
                         {.pp = 2, .balance = {3, 2}, .pipe = {.chunks = 2}, .shard_optimizer_state = true});
  hy::DistributedOptimizer a_opt(a, make_sgd);
  train(a, a_opt, x_all, y_all, 0, 20);
  const std::string dir = ck::save(root, {&a, &a_opt, nullptr}, {.step = 20}, {.keep_last = 1});  // collective
  const nn::StateDict saved = a.state_dict();  // the whole model (collective)
  const std::vector<double> uninterrupted = train(a, a_opt, x_all, y_all, 20, 10);

  // Layout B: one stage on each of the world's ranks, other initial weights.
  weft::manual_seed(99);
  hy::DistributedModel b(make_model(), ctx.world_ptr(), {.pp = 1, .print_table = false});
  hy::DistributedOptimizer b_opt(b, make_sgd);
  b.partition(x_all.narrow(0, 0, 48 / b.grid().dp()));  // build the stages (and the optimizer) before loading
  const ck::TrainingState state = ck::load(root, {&b, &b_opt, nullptr});  // the latest checkpoint in root
  double load_diff = 0;
  for (const auto& [name, p] : b.state_dict()) {
    load_diff = std::max(load_diff, (p - saved.at(name)).abs().max().item<double>());
  }
  const std::vector<double> resumed = train(b, b_opt, x_all, y_all, static_cast<int>(state.step), 10);
  double loss_diff = 0;
  for (size_t i = 0; i < resumed.size(); ++i) {
    loss_diff = std::max(loss_diff, std::abs(resumed[i] - uninterrupted[i]));
  }

  bool ok = load_diff == 0 && loss_diff < 1e-5;
  if (ctx.rank() == 0) {
    std::printf("saved %s at pp 2 x dp %d:\n", dir.c_str(), a.grid().dp());
    std::vector<std::string> files;
    for (const auto& f : std::filesystem::directory_iterator(dir)) files.push_back(f.path().filename().string());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) std::printf("  %s\n", f.c_str());
    // One process, no group: the whole model's state dict from the files.
    auto whole = make_model();
    whole->load_state_dict(ck::load_model_state(dir));
    for (const auto& [name, p] : whole->state_dict()) ok = ok && weft::equal(p, saved.at(name));
    std::printf("loaded at pp 1 x dp %d from step %lld: largest weight difference %.2g\n", b.grid().dp(),
                static_cast<long long>(state.step), load_diff);
    std::printf("losses within %.2g of the uninterrupted run's\n", loss_diff);
    std::printf("partitioned checkpoint: %s\n", ok ? "ok" : "FAILED");
  }
  return ok ? 0 : 1;
}
