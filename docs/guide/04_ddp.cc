// Guide, chapter 4: data parallelism. Run under mpirun: every rank trains
// the model on its share of each global batch through
// DistributedDataParallel, which averages the gradients over the ranks while
// backward runs. Each rank also trains a plain copy on the whole global batch
// in one process, and at the end the two hold the same weights.
#include <algorithm>
#include <cstdio>
#include <memory>

#include "core/error.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "nn/nn.h"
#include "optim/sgd.h"
#include "parallel/comm/mpi/context.h"
#include "parallel/data/ddp.h"

namespace nn = weft::nn;
namespace par = weft::parallel;
using weft::Tensor;

std::shared_ptr<nn::Sequential> make_model() {
  return nn::Sequential::of(std::make_shared<nn::Linear>(8, 32), std::make_shared<nn::Tanh>(),
                            std::make_shared<nn::Linear>(32, 1));
}

int main() {
  par::DistributedContext ctx;  // MPI and the world group, from mpirun's environment
  const int rank = ctx.rank(), world = ctx.size();
  weft::set_num_threads(1);  // the ranks share the machine's cores

  const int64_t batch = 48, rows = batch / world;  // each rank's rows of a batch
  WEFT_CHECK(rows * world == batch, "04_ddp: run on a number of ranks that divides ", batch, ", not ", world);

  // The same data on every rank: 10 global batches of 48 rows, y = tanh(x) w.
  weft::manual_seed(1);
  Tensor x_all = weft::randn({10 * batch, 8});                                        // (480, 8)
  Tensor y_all = weft::tanh(x_all).matmul(weft::linspace(-1, 1, 8).reshape({8, 1}));  // (480, 1)

  weft::manual_seed(0);
  auto model = make_model();
  weft::manual_seed(0);
  auto reference = make_model();  // the same initial weights, trained in one process
  par::DistributedDataParallel ddp(model, ctx.world_ptr());
  weft::optim::SGD opt(model->parameters(), {.lr = 0.05, .momentum = 0.9});
  weft::optim::SGD reference_opt(reference->parameters(), {.lr = 0.05, .momentum = 0.9});

  double first_loss = 0, last_loss = 0;
  for (int step = 0; step < 200; ++step) {
    Tensor x = x_all.narrow(0, (step % 10) * batch, batch), y = y_all.narrow(0, (step % 10) * batch, batch);

    // This rank's rows; DDP averages the ranks' gradients of their mean losses.
    Tensor loss = weft::mse_loss(ddp(x.narrow(0, rank * rows, rows)), y.narrow(0, rank * rows, rows));
    opt.zero_grad();
    loss.backward();
    opt.step();

    // The whole batch in one process.
    Tensor reference_loss = weft::mse_loss((*reference)(x), y);
    reference_opt.zero_grad();
    reference_loss.backward();
    reference_opt.step();
    if (step == 0) first_loss = reference_loss.item<double>();
    last_loss = reference_loss.item<double>();
  }

  // The largest weight difference on any rank.
  double diff = 0;
  auto params = model->parameters(), reference_params = reference->parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    diff = std::max(diff, (params[i] - reference_params[i]).abs().max().item<double>());
  }
  Tensor worst = weft::full({1}, diff, weft::DType::Float64);
  ctx.world().allreduce(worst, {.op = par::ReduceOp::Max})->wait();
  const bool ok = worst.item<double>() < 1e-5 && last_loss < first_loss / 10;
  if (rank == 0) {
    std::printf("%d ranks x %lld rows: loss %.4f -> %.4f\n", world, static_cast<long long>(rows), first_loss,
                last_loss);
    std::printf("largest weight difference from one process: %.2g\n", worst.item<double>());
    std::printf("data parallel: %s\n", ok ? "ok" : "FAILED");
  }
  return ok ? 0 : 1;
}
