// Driver for the pipeline fault tests (pipe_fault_test.sh): every rank trains
// a small MLP (8 layers, one stage per rank) with parallel::pipe::Pipe over
// MPI (schedule 1f1b, 4 micro-batches, SGD momentum) for 6 steps on the same
// batch, and rank VICTIM fails in step STEP in the middle of its action list,
// from a forward hook of its stage on micro-batch MICROBATCH:
//
// Usage: pipe_fault_driver MODE VICTIM STEP MICROBATCH
//   kill  : the victim prints "rank R: killing itself at T" (T: wall-clock
//           seconds) and SIGKILLs itself.
//   throw : the victim's stage throws a weft::Error ("stage S of rank R fails
//           on purpose on micro-batch M of step K"); the runner names the
//           action, and the victim reports the error and exits 1 as every
//           other failing rank.
// Checkpointing is off (kNever), so the stage's forward runs once per
// micro-batch of a step, in micro-batch order (no recomputation in B): the
// hook's call count within a step is the micro-batch.
//
// Every rank prints to stderr "rank R: step K begins at T" before each step. A
// rank that catches a weft::Error prints "rank R: error at T: <what>" and
// exits 1; a rank that finishes prints "rank R: done (loss L)" and exits 0.
#include <signal.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/autograd_meta.h"
#include "core/error.h"
#include "core/nn_ops.h"
#include "core/ops.h"
#include "core/rng.h"
#include "nn/nn.h"
#include "optim/sgd.h"
#include "parallel/comm/mpi/context.h"
#include "parallel/comm/mpi/process_group_mpi.h"
#include "parallel/pipe/pipe.h"
#include "tests/parallel/det_values.h"

namespace {

constexpr int kSteps = 6, kChunks = 4, kLayers = 8;
constexpr int64_t kIn = 16, kHidden = 32, kOut = 4, kRows = 16;

using weft::testing::wall_seconds;
void fill_det(weft::Tensor t, double seed) { weft::testing::fill_det(t, seed, 1.0); }

// Linear, Tanh, ... (kLayers layers), the same on every rank (one seed).
std::shared_ptr<weft::nn::Sequential> make_mlp() {
  using namespace weft;
  manual_seed(7);
  auto m = std::make_shared<nn::Sequential>();
  for (int i = 0; i < kLayers / 2; ++i) {
    m->push_back(std::make_shared<nn::Linear>(i == 0 ? kIn : kHidden, i == kLayers / 2 - 1 ? kOut : kHidden));
    m->push_back(std::make_shared<nn::Tanh>());
  }
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace weft;
  using namespace weft::parallel;
  if (argc != 5) {
    std::fprintf(stderr, "usage: pipe_fault_driver kill|throw VICTIM STEP MICROBATCH\n");
    return 2;
  }
  const std::string mode = argv[1];
  const int victim = std::atoi(argv[2]), fail_step = std::atoi(argv[3]), fail_mb = std::atoi(argv[4]);
  if (mode != "kill" && mode != "throw") {
    std::fprintf(stderr, "pipe_fault_driver: unknown mode '%s'\n", mode.c_str());
    return 2;
  }
  int rank = -1;
  try {
    DistributedContext ctx;  // init_process_group(), and MPI_Finalize on success
    rank = ctx.rank();
    const int ranks = ctx.size();
    WEFT_CHECK(kLayers % ranks == 0, "pipe_fault_driver: ", kLayers, " layers do not split over ", ranks, " ranks");
    pipe::PipeOptions po;
    po.chunks = kChunks;
    po.schedule = pipe::ScheduleKind::k1F1B;
    po.checkpoint = pipe::CheckpointMode::kNever;  // one forward per micro-batch (see the top)
    pipe::Pipe model(make_mlp(), std::vector<int>(ranks, kLayers / ranks), ctx.world_ptr(), po);
    optim::SGD opt(model.parameters(), {0.05, 0.9});

    int step = 0, forwards = 0;  // forwards: the stage's forward calls in this step
    nn::Module::ForwardHook fail = [&](nn::Module&, const Tensor&, const Tensor&) {
      const int mb = forwards++;
      if (step != fail_step || mb != fail_mb) return;
      if (mode == "kill") {
        std::fprintf(stderr, "rank %d: killing itself at %.3f\n", rank, wall_seconds());
        raise(SIGKILL);
      }
      WEFT_ERROR("stage ", model.stage_ids()[0], " of rank ", rank, " fails on purpose on micro-batch ", mb,
                 " of step ", step);
    };
    RemovableHandle hook;
    if (rank == victim) hook = model.partitions()[0]->register_forward_hook(fail);

    Tensor x = empty({kRows, kIn}), y = empty({kRows, kOut});  // the same batch every step, on every rank
    fill_det(x, 1);
    fill_det(y, 2);
    double loss = 0;
    for (step = 0; step < kSteps; ++step) {
      forwards = 0;
      std::fprintf(stderr, "rank %d: step %d begins at %.3f\n", rank, step, wall_seconds());
      opt.zero_grad();
      loss = model.step(x, y, [](const Tensor& out, const Tensor& target) { return mse_loss(out, target); });
      opt.step();
    }
    std::fprintf(stderr, "rank %d: done (loss %.6f)\n", rank, loss);
  } catch (const Error& e) {
    std::fprintf(stderr, "rank %d: error at %.3f: %s\n", rank, wall_seconds(), e.what());
    return 1;
  }
  return 0;
}
