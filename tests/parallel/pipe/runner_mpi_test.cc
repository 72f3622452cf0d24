// PipelineRunner over MPI, one process per rank (mpirun -np 2 and 4 through
// //tests/parallel:mpi_test.sh): every rank builds the same model from one
// seed, runs its own stages, and checks the step's loss and its stages'
// gradients against the whole model run locally on the whole batch, for
// gpipe, 1f1b, interleaved, zbv (V placement) and interleaved-zb with 2 stages
// per rank, over several steps with
// changing batch sizes (including ones that do not divide by the micro-batch
// count). Tied parameters: the embedding of the first stage and the head of
// the last (tied_lm.h), each process with its own copy, under zb-h1 and 1f1b:
// gradients equal one process's with a true tie, the copies stay bitwise equal.
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/nn_ops.h"
#include "core/ops.h"
#include "core/rng.h"
#include "nn/nn.h"
#include "optim/sgd.h"
#include "parallel/comm/mpi/process_group_mpi.h"
#include "parallel/pipe/generators.h"
#include "parallel/pipe/runner.h"
#include "tests/parallel/pipe/tied_lm.h"
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
TEST(PipelineRunnerMPI, ZeroBubbleV) { check(ScheduleKind::kZeroBubbleV, 8, 2); }
TEST(PipelineRunnerMPI, InterleavedZeroBubble) { check(ScheduleKind::kInterleavedZeroBubble, 8, 2); }

void check_tied(ScheduleKind kind) {
  auto world = init_process_group();
  const int p = world->size(), me = world->rank();
  const Schedule sched = make_schedule(kind, p, 4, 1);
  SCOPED_TRACE(sched.name + " p=" + std::to_string(p));
  // 8 children: the embedding alone on stage 0, the head with the rest on the last stage.
  std::vector<int> begin(p + 1, 0);
  begin[1] = 1;
  for (int s = 1; s < p; ++s) begin[s + 1] = begin[s] + (s == p - 1 ? 8 - begin[s] : 6 / (p - 1));
  auto ref = make_lm(/*shared=*/true), piped = make_lm(/*shared=*/false);
  std::vector<std::shared_ptr<nn::Module>> mine;
  for (int s : sched.stages_of_rank(me)) mine.push_back(piped->slice(begin[s], begin[s + 1]));
  RunnerOptions o;
  o.tied = kTied;
  PipelineRunner runner(sched, mine, world, o);
  std::vector<Tensor> local;
  for (auto& st : mine)
    for (auto& [n, t] : st->named_parameters()) local.push_back(t);
  optim::SGD ref_opt(ref->parameters(), {0.1, 0.9}), opt(local, {0.1, 0.9});
  for (int step = 0; step < 3; ++step) {
    manual_seed(700 + step);
    Tensor x = tokens(9), y = randn({9, kSeq, kVocab});
    ref_opt.zero_grad();
    opt.zero_grad();
    Tensor want = mse(ref->forward(x), y);
    want.backward();
    EXPECT_NEAR(runner.step(x, y, mse), want.item<double>(), 1e-6) << "step " << step;
    ref_opt.step();
    opt.step();
  }
  auto exp = ref->named_parameters();
  for (auto& st : mine)
    for (auto& [name, t] : st->named_parameters()) {
      const std::string ref_name = name == "7.weight" ? "0.weight" : name;
      for (auto& [n2, t2] : exp)
        if (n2 == ref_name) {
          EXPECT_TRUE(testing::tensors_near(t.grad(), t2.grad(), 1e-5)) << name;
          EXPECT_TRUE(testing::tensors_near(t, t2.detach(), 1e-5)) << name;
        }
    }
  // The two copies, on the first and last ranks, are bitwise equal.
  Tensor w = (me == 0 ? piped->named_parameters()[0].second : piped->named_parameters().back().second).detach().clone();
  if (me == 0 || me == p - 1) {
    Tensor other = empty_like(w);
    const int peer = me == 0 ? p - 1 : 0;
    world->batch_isend_irecv({P2POp::send(w, peer, 1), P2POp::recv(other, peer, 1)})->wait();
    EXPECT_TRUE(testing::tensors_near(w, other, 0));
  }
}

TEST(PipelineRunnerMPI, TiedEmbeddingAndHeadZeroBubble) { check_tied(ScheduleKind::kZeroBubbleH1); }
TEST(PipelineRunnerMPI, TiedEmbeddingAndHeadOneFOneB) { check_tied(ScheduleKind::k1F1B); }

}  // namespace
}  // namespace weft::parallel::pipe
