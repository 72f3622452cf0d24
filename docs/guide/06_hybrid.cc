// Guide, chapter 6: pipeline x data parallelism. Run under mpirun with an even
// number of ranks: DistributedModel splits the model into 2 pipeline stages
// and replicates them over world/2 data-parallel replicas (rank = replica x 2
// + stage), and DistributedOptimizer shards SGD's momentum over the replicas
// (ZeRO-1). Each replica trains on its rows of every global batch. The whole
// model, gathered at the end, equals the one-process run on the global batch.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include "core/parallel.h"
#include "core/rng.h"
#include "nn/nn.h"
#include "optim/sgd.h"
#include "parallel/comm/mpi/context.h"
#include "parallel/hybrid/distributed_model.h"
#include "parallel/hybrid/distributed_optimizer.h"

namespace nn = weft::nn;
namespace hy = weft::parallel::hybrid;
using weft::Tensor;

// Eight layers: input (N, 8) -> output (N, 1).
std::shared_ptr<nn::Sequential> make_model() {
  return nn::Sequential::of(std::make_shared<nn::Linear>(8, 32), std::make_shared<nn::Tanh>(),
                            std::make_shared<nn::Linear>(32, 32), std::make_shared<nn::Tanh>(),
                            std::make_shared<nn::Linear>(32, 32), std::make_shared<nn::Tanh>(),
                            std::make_shared<nn::Linear>(32, 16), std::make_shared<nn::Linear>(16, 1));
}

int main() {
  weft::parallel::DistributedContext ctx;
  weft::set_num_threads(1);

  weft::manual_seed(1);
  const int64_t batch = 48;
  Tensor x_all = weft::randn({10 * batch, 8});                                        // (480, 8)
  Tensor y_all = weft::tanh(x_all).matmul(weft::linspace(-1, 1, 8).reshape({8, 1}));  // (480, 1)

  weft::manual_seed(0);
  auto reference = make_model();
  weft::manual_seed(0);
  hy::DistributedModelOptions options{.pp = 2,                         // stages; dp = world / pp replicas
                                      .pipe = {.chunks = 2},           // micro-batches per replica and step
                                      .shard_optimizer_state = true};  // ZeRO-1
  hy::DistributedModel model(make_model(), ctx.world_ptr(), options);
  hy::DistributedOptimizer opt(model, [](const weft::optim::NamedParameters& params) {
    return std::make_unique<weft::optim::SGD>(params, weft::optim::SGDOptions{.lr = 0.05, .momentum = 0.9});
  });
  weft::optim::SGD reference_opt(reference->parameters(), {.lr = 0.05, .momentum = 0.9});

  const int dp = model.grid().dp(), replica = model.dp_rank();
  const int64_t rows = batch / dp;  // this replica's rows of each global batch
  auto mse = [](const Tensor& out, const Tensor& target) { return weft::mse_loss(out, target); };
  double loss_diff = 0, first_loss = 0, last_loss = 0;
  for (int step = 0; step < 100; ++step) {
    Tensor x = x_all.narrow(0, (step % 10) * batch, batch), y = y_all.narrow(0, (step % 10) * batch, batch);
    // The first step partitions the model: rank 0 measures every layer and prints the plan.
    opt.zero_grad();
    const double loss = model.step(x.narrow(0, replica * rows, rows), y.narrow(0, replica * rows, rows), mse);
    opt.step();

    Tensor reference_loss = mse((*reference)(x), y);
    reference_opt.zero_grad();
    reference_loss.backward();
    reference_opt.step();
    loss_diff = std::max(loss_diff, std::abs(loss - reference_loss.item<double>()));
    if (step == 0) first_loss = loss;
    last_loss = loss;
  }

  // state_dict() gathers the whole model on every rank (collective).
  double weight_diff = 0;
  for (const auto& [name, p] : model.state_dict()) {
    weight_diff = std::max(weight_diff, (p - reference->state_dict().at(name)).abs().max().item<double>());
  }
  const bool ok = loss_diff < 1e-5 && weight_diff < 1e-5 && last_loss < first_loss / 10;
  if (ctx.rank() == 0) {
    std::printf("pp %d x dp %d, balance %d,%d: loss %.4f -> %.4f\n", model.grid().pp(), dp, model.balance()[0],
                model.balance()[1], first_loss, last_loss);
    std::printf("%s\n", opt.memory_summary().c_str());
    std::printf("largest difference from one process: loss %.2g, weights %.2g\n", loss_diff, weight_diff);
    std::printf("pipeline x data parallel: %s\n", ok ? "ok" : "FAILED");
  }
  return ok ? 0 : 1;
}
