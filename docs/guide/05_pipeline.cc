// Guide, chapter 5: pipeline parallelism. Run under mpirun: the layers of one
// Sequential are split into a stage per rank, and each step feeds the batch
// through the stages as micro-batches on the 1F1B schedule. Each rank also
// trains the whole model in one process: the pipelined losses and this
// rank's weights equal the sequential ones.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include "core/parallel.h"
#include "core/rng.h"
#include "nn/nn.h"
#include "optim/sgd.h"
#include "parallel/comm/mpi/context.h"
#include "parallel/pipe/pipe.h"

namespace nn = weft::nn;
namespace par = weft::parallel;
using weft::Tensor;

// Eight layers: input (N, 8) -> output (N, 1).
std::shared_ptr<nn::Sequential> make_model() {
  return nn::Sequential::of(std::make_shared<nn::Linear>(8, 32), std::make_shared<nn::Tanh>(),
                            std::make_shared<nn::Linear>(32, 32), std::make_shared<nn::Tanh>(),
                            std::make_shared<nn::Linear>(32, 32), std::make_shared<nn::Tanh>(),
                            std::make_shared<nn::Linear>(32, 16), std::make_shared<nn::Linear>(16, 1));
}

int main() {
  par::DistributedContext ctx;
  const int rank = ctx.rank(), world = ctx.size();
  weft::set_num_threads(1);

  weft::manual_seed(1);
  const int64_t batch = 48;
  Tensor x_all = weft::randn({10 * batch, 8});                                        // (480, 8)
  Tensor y_all = weft::tanh(x_all).matmul(weft::linspace(-1, 1, 8).reshape({8, 1}));  // (480, 1)

  // Every rank builds the whole model from the same seed; the Pipe keeps only
  // this rank's layers, under their names in the whole model ("2.weight").
  weft::manual_seed(0);
  auto model = make_model();
  weft::manual_seed(0);
  auto reference = make_model();
  std::vector<int> balance(world, 8 / world);  // layers per stage
  for (int s = 0; s < 8 % world; ++s) ++balance[s];
  par::pipe::Pipe pipe(model, balance, ctx.world_ptr(),
                       {.chunks = 4, .schedule = par::pipe::ScheduleKind::k1F1B});  // 4 micro-batches of 12 rows
  // The optimizer updates this rank's parameters only.
  weft::optim::SGD opt(pipe.parameters(), {.lr = 0.05, .momentum = 0.9});
  weft::optim::SGD reference_opt(reference->parameters(), {.lr = 0.05, .momentum = 0.9});

  auto mse = [](const Tensor& out, const Tensor& target) { return weft::mse_loss(out, target); };
  double loss_diff = 0, first_loss = 0, last_loss = 0;
  for (int step = 0; step < 100; ++step) {
    Tensor x = x_all.narrow(0, (step % 10) * batch, batch), y = y_all.narrow(0, (step % 10) * batch, batch);
    opt.zero_grad();
    const double loss = pipe.step(x, y, mse);  // the whole batch's loss, on every rank
    opt.step();

    Tensor reference_loss = mse((*reference)(x), y);
    reference_opt.zero_grad();
    reference_loss.backward();
    reference_opt.step();
    loss_diff = std::max(loss_diff, std::abs(loss - reference_loss.item<double>()));
    if (step == 0) first_loss = loss;
    last_loss = loss;
  }

  // This rank's parameters against the same names in the one-process model.
  std::map<std::string, Tensor> whole;
  for (const auto& [name, p] : reference->named_parameters()) whole[name] = p;
  double weight_diff = 0;
  for (const auto& [name, p] : pipe.named_parameters()) {
    weight_diff = std::max(weight_diff, (p - whole.at(name)).abs().max().item<double>());
  }
  Tensor worst = weft::tensor(std::vector<double>{loss_diff, weight_diff}, {2});
  ctx.world().allreduce(worst, {.op = par::ReduceOp::Max})->wait();
  const bool ok = worst[0].item<double>() < 1e-5 && worst[1].item<double>() < 1e-5 && last_loss < first_loss / 10;
  if (rank == 0) {
    std::printf("%d stages (schedule %s): loss %.4f -> %.4f\n", world, pipe.schedule().name.c_str(), first_loss,
                last_loss);
    std::printf("largest difference from one process: loss %.2g, weights %.2g\n", worst[0].item<double>(),
                worst[1].item<double>());
    std::printf("pipeline: %s\n", ok ? "ok" : "FAILED");
  }
  return ok ? 0 : 1;
}
