// PipelineRunner over MPI, one process per rank (mpirun -np 2 and 4 through
// //tests/parallel:mpi_test.sh): every rank builds the same model from one
// seed, runs its own stages, and checks the step's loss and its stages'
// gradients against the whole model run locally on the whole batch, for
// gpipe, 1f1b and interleaved with 2 stages per rank, over several steps with
// changing batch sizes (including ones that do not divide by the micro-batch
// count).
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/nn_ops.h"
#include "core/ops.h"
#include "core/rng.h"
#include "nn/nn.h"
#include "parallel/mpi/process_group_mpi.h"
#include "parallel/pipe/generators.h"
#include "parallel/pipe/runner.h"
#include "tests/testing.h"

namespace weft::parallel::pipe {
namespace {

constexpr int64_t kIn = 5, kHidden = 16, kOut = 3, kLayers = 16;

std::shared_ptr<nn::Sequential> make_mlp() {
  manual_seed(11);
  auto m = std::make_shared<nn::Sequential>();
  for (int i = 0; i < kLayers / 2; ++i) {
    m->push_back(std::make_shared<nn::Linear>(i == 0 ? kIn : kHidden, i == kLayers / 2 - 1 ? kOut : kHidden));
    m->push_back(std::make_shared<nn::Tanh>());
  }
  return m;
}

Tensor mse(const Tensor& out, const Tensor& target) { return mse_loss(out, target); }

void check(ScheduleKind kind, int microbatches, int virtual_stages) {
  auto world = init_process_group();
  const int p = world->size(), me = world->rank();
  const Schedule sched = make_schedule(kind, p, microbatches, virtual_stages);
  SCOPED_TRACE(sched.name + " p=" + std::to_string(p) + " m=" + std::to_string(microbatches));
  const int stages = sched.num_stages();
  std::vector<int> begin(stages + 1, 0);
  for (int s = 0; s < stages; ++s) begin[s + 1] = begin[s] + kLayers / stages + (s < kLayers % stages ? 1 : 0);
  auto ref = make_mlp(), piped = make_mlp();
  std::vector<std::shared_ptr<nn::Module>> mine;
  std::vector<std::string> prefixes;
  for (int s : sched.stages_of_rank(me)) {
    mine.push_back(piped->slice(begin[s], begin[s + 1]));
    for (auto& [name, t] : mine.back()->named_parameters()) prefixes.push_back(name);
  }
  PipelineRunner runner(sched, mine, world);
  for (int step = 0; step < 3; ++step) {
    const int64_t rows = 2 * microbatches + step * 5;
    manual_seed(500 + step);  // the same batch on every rank
    Tensor x = randn({rows, kIn}), y = randn({rows, kOut});
    ref->zero_grad();
    piped->zero_grad();
    Tensor want = mse(ref->forward(x), y);
    want.backward();
    const double loss = runner.step(x, y, mse);
    EXPECT_NEAR(loss, want.item<double>(), 1e-6) << "step " << step;
    auto exp = ref->named_parameters();
    for (auto& [name, t] : piped->named_parameters()) {
      const bool local = std::find(prefixes.begin(), prefixes.end(), name) != prefixes.end();
      const Tensor* e = nullptr;
      for (auto& [n2, t2] : exp)
        if (n2 == name) e = &t2;
      ASSERT_NE(e, nullptr) << name;
      if (!local) {
        EXPECT_FALSE(t.grad().defined()) << name << " belongs to another rank";
        continue;
      }
      ASSERT_TRUE(t.grad().defined()) << name;
      EXPECT_TRUE(testing::tensors_near(t.grad(), e->grad(), 1e-5)) << name << " step " << step;
    }
  }
}

TEST(PipelineRunnerMPI, GPipe) { check(ScheduleKind::kGPipe, 4, 1); }
TEST(PipelineRunnerMPI, OneFOneB) { check(ScheduleKind::k1F1B, 8, 1); }
TEST(PipelineRunnerMPI, InterleavedTwoStagesPerRank) {
  check(ScheduleKind::kInterleaved1F1B, 2 * init_process_group()->size(), 2);
}

}  // namespace
}  // namespace weft::parallel::pipe
