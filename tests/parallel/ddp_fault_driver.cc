// Driver for the mid-training fault test (ddp_fault_test.sh): every rank trains
// a small MLP with DistributedDataParallel (SGD momentum, 3 gradient buckets)
// for 8 steps, and rank VICTIM SIGKILLs itself in step STEP.
//
// Usage: ddp_fault_driver MODE VICTIM STEP
//   between  : the victim dies before the forward of step STEP (after step
//              STEP-1 completed everywhere), so it never issues step STEP's
//              first bucket reduction.
//   backward : the victim dies during the backward of step STEP, right after
//              DDP launched (and announced) its first bucket's allreduce: from
//              a post-accumulate-grad hook registered after DDP's, on every
//              parameter, that fires once the group's sequence number moved.
// Every rank prints to stderr "rank R: step K begins at sequence S" before each
// step. The victim prints "rank R: killing itself at T" (T: wall-clock seconds)
// before it dies. A rank that catches a weft::Error prints
// "rank R: error at T: <what>" and exits 1; a rank that finishes prints
// "rank R: done" and exits 0.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/autograd_meta.h"
#include "core/nn_ops.h"
#include "core/ops.h"
#include "nn/nn.h"
#include "optim/sgd.h"
#include "parallel/comm/mpi/context.h"
#include "parallel/comm/mpi/process_group_mpi.h"
#include "parallel/data/ddp.h"
#include "tests/parallel/det_values.h"

namespace {

using weft::testing::wall_seconds;
void fill_det(weft::Tensor t, double seed) { weft::testing::fill_det(t, seed, 1.0); }

}  // namespace

int main(int argc, char** argv) {
  using namespace weft;
  using namespace weft::parallel;
  if (argc != 4) {
    std::fprintf(stderr, "usage: ddp_fault_driver between|backward VICTIM STEP\n");
    return 2;
  }
  const std::string mode = argv[1];
  const int victim = std::atoi(argv[2]), kill_step = std::atoi(argv[3]);
  if (mode != "between" && mode != "backward") {
    std::fprintf(stderr, "ddp_fault_driver: unknown mode '%s'\n", mode.c_str());
    return 2;
  }
  int rank = -1;
  try {
    DistributedContext ctx;
    rank = ctx.rank();
    auto* mpg = dynamic_cast<ProcessGroupMPI*>(&ctx.world());
    auto model = nn::Sequential::of(std::make_shared<nn::Linear>(16, 64), std::make_shared<nn::Tanh>(),
                                    std::make_shared<nn::Linear>(64, 64), std::make_shared<nn::Tanh>(),
                                    std::make_shared<nn::Linear>(64, 4));
    DDPOptions o;
    o.first_bucket_cap_mb = 2048.0 / (1024 * 1024);  // 4.weight, 4.bias, 2.bias
    o.bucket_cap_mb = 8192.0 / (1024 * 1024);        // then 2.weight alone, then layer 0
    DistributedDataParallel ddp(model, ctx.world_ptr(), o);
    optim::SGD opt(model->parameters(), {0.05, 0.9});

    int step = 0;
    int64_t step_begin = 0;
    std::vector<RemovableHandle> hooks;
    if (rank == victim && mode == "backward") {
      for (auto& p : model->parameters())
        hooks.push_back(p.register_post_accumulate_grad_hook([&](const Tensor&) {
          if (step == kill_step && mpg->sequence_number() > step_begin) {
            std::fprintf(stderr, "rank %d: killing itself at %.3f\n", rank, wall_seconds());
            raise(SIGKILL);
          }
        }));
    }
    const int64_t per_rank = 8;
    for (step = 0; step < 8; ++step) {
      step_begin = mpg->sequence_number();
      std::fprintf(stderr, "rank %d: step %d begins at sequence %lld\n", rank, step,
                   static_cast<long long>(step_begin));
      if (rank == victim && mode == "between" && step == kill_step) {
        std::fprintf(stderr, "rank %d: killing itself at %.3f\n", rank, wall_seconds());
        raise(SIGKILL);
      }
      Tensor x = empty({per_rank, 16}), y = empty({per_rank, 4});  // this rank's rows of the global batch
      fill_det(x, 100 * step + rank);
      fill_det(y, 100 * step + rank + 50);
      opt.zero_grad();
      mse_loss(ddp(x), y).backward();
      opt.step();
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "rank %d: error at %.3f: %s\n", rank, wall_seconds(), e.what());
    return 1;
  }
  std::fprintf(stderr, "rank %d: done\n", rank);
  return 0;
}
