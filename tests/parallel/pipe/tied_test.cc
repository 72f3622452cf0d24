// Tied parameters across pipeline stages (Note [tied parameters]), ranks as
// threads: a small language model whose output head uses the token
// embedding's weight. The reference is one process where the head and the
// embedding share one tensor, so its gradient is the sum of both uses; the
// pipeline gives each rank its own copy. Checked: the schedule's TiedGrad
// actions and the validator/simulator on them; for gpipe, 1f1b, interleaved
// and zb-h1 (split backward) the loss and every gradient, the tied ones on
// both holders, equal the reference, and for zbv (both members on rank 0) and
// interleaved-zb too; gradient accumulation over two steps
// without zeroing; SGD training keeps the copies bitwise equal and equal to
// the reference; errors (unknown name, shapes that differ, one tensor shared
// by two ranks, a deadlocking placement).
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
#include "parallel/comm/inproc/testing.h"
#include "parallel/pipe/generators.h"
#include "parallel/pipe/runner.h"
#include "parallel/pipe/simulate.h"
#include "parallel/pipe/validate.h"
#include "tests/parallel/pipe/tied_lm.h"
#include "tests/testing.h"

namespace weft::parallel::pipe {
namespace {

Tensor mse(const Tensor& out, const Tensor& target) { return mse_loss(out, target); }

std::vector<std::shared_ptr<nn::Module>> stages_for(const nn::Sequential& model, const Schedule& sched,
                                                    const std::vector<int>& balance, int rank) {
  std::vector<int> begin(balance.size() + 1, 0);
  std::partial_sum(balance.begin(), balance.end(), begin.begin() + 1);
  std::vector<std::shared_ptr<nn::Module>> out;
  for (int s : sched.stages_of_rank(rank)) out.push_back(model.slice(begin[s], begin[s + 1]));
  return out;
}

TEST(PipeTied, AddTiedGradsAppendsARendezvousTheValidatorAndSimulatorModel) {
  Schedule s = make_schedule(ScheduleKind::k1F1B, 3, 4, 1);
  add_tied_grads(s, {{2, 0}});
  EXPECT_EQ(s.tied_stages, (std::vector<std::vector<int>>{{0, 2}}));
  EXPECT_EQ(s.tied_ranks(0), (std::vector<int>{0, 2}));
  EXPECT_EQ(to_string(s.rank_actions[0].back()), "Tied0@s0");
  EXPECT_EQ(to_string(s.rank_actions[2].back()), "Tied0@s2");
  for (const Action& a : s.rank_actions[1]) EXPECT_FALSE(is_tied(a.kind));
  EXPECT_NO_THROW(validate(s));
  // Rank 2 (the last stage) finishes long before rank 0; the rendezvous ends when rank 0 arrives.
  Simulation sim = simulate(s, CostModel::uniform(3, 1, 1, 1));
  const TimedAction& t0 = sim.ranks[0].actions.back();
  const TimedAction& t2 = sim.ranks[2].actions.back();
  EXPECT_EQ(t0.end, sim.ranks[0].finish);
  EXPECT_DOUBLE_EQ(t2.end, t0.start);
  EXPECT_LT(t2.start, t2.end);
  EXPECT_DOUBLE_EQ(sim.makespan, (4 + 3 - 1) * (1 + 2));  // 1F1B's (m + p - 1) * (F + B); the sum costs nothing

  // A TiedGrad moved before the rank's B is refused; so is one missing.
  Schedule early = s;
  auto& e2 = early.rank_actions[2];
  e2.insert(e2.begin(), e2.back());
  e2.pop_back();
  EXPECT_WEFT_ERROR(validate(early), "rank 2 action 0 (Tied0@s2): sums tied group 0's gradient before B2.0 produced");
  Schedule missing = s;
  missing.rank_actions[0].pop_back();
  EXPECT_WEFT_ERROR(validate(missing), "rank 0 holds a stage of tied group 0 but has no Tied0 action");
  // A rendezvous before the last gradient is sent deadlocks: rank 2 waits in
  // Tied0 for rank 0, which waits for that gradient through rank 1.
  Schedule stuck = s;
  auto& r2 = stuck.rank_actions[2];
  std::swap(r2[r2.size() - 1], r2[r2.size() - 2]);
  EXPECT_EQ(to_string(r2.back()), "SendGrad2.3->s1@r1");
  EXPECT_WEFT_ERROR(validate(stuck), "wait cycle: rank 0 -> rank 1 -> rank 2 -> rank 0");
  EXPECT_WEFT_ERROR(add_tied_grads(s, {{0}}), "already has 1 tied group(s)");
  Schedule bad = make_schedule(ScheduleKind::kGPipe, 2, 2, 1);
  EXPECT_WEFT_ERROR(add_tied_grads(bad, {{0, 5}}), "names stage 5, out of range [0, 2)");
}

struct Case {
  ScheduleKind kind;
  int ranks, virtual_stages;
  std::vector<int> balance;
};

// Runs `steps` steps of the pipeline (zeroing gradients only before the
// first) and of the reference; EXPECTs losses and gradients equal.
void check_tied(const Case& c, int steps, bool sgd) {
  SCOPED_TRACE(schedule_name(c.kind) + " ranks=" + std::to_string(c.ranks));
  const int m = 4;
  const Schedule sched = make_schedule(c.kind, c.ranks, m, c.virtual_stages);
  auto ref = make_lm(/*shared=*/true);
  std::vector<std::shared_ptr<nn::Sequential>> models;  // one per rank, each with its own tensors
  for (int r = 0; r < c.ranks; ++r) models.push_back(make_lm(/*shared=*/false));
  manual_seed(11);
  std::vector<Tensor> xs, ys;
  for (int k = 0; k < steps; ++k) {
    xs.push_back(tokens(10));
    ys.push_back(randn({10, kSeq, kVocab}));
  }
  optim::SGD ref_opt(ref->parameters(), {0.2, 0.5});
  std::vector<double> ref_loss;
  for (int k = 0; k < steps; ++k) {
    if (sgd || k == 0) ref->zero_grad();
    Tensor l = mse(ref->forward(xs[k]), ys[k]);
    l.backward();
    ref_loss.push_back(l.item<double>());
    if (sgd) ref_opt.step();
  }
  std::vector<std::vector<std::pair<std::string, Tensor>>> grads(c.ranks), params(c.ranks);
  run_ranks(c.ranks, [&](std::shared_ptr<ProcessGroup> g) {
    const int r = g->rank();
    RunnerOptions o;
    o.tied = kTied;
    PipelineRunner runner(sched, stages_for(*models[r], sched, c.balance, r), g, o);
    std::vector<Tensor> local;
    for (auto& st : runner.stages())
      for (auto& [n, p] : st->named_parameters()) local.push_back(p);
    optim::SGD opt(local, {0.2, 0.5});
    for (int k = 0; k < steps; ++k) {
      if (sgd || k == 0) opt.zero_grad();
      EXPECT_NEAR(runner.step(xs[k], ys[k], mse), ref_loss[k], 1e-6) << "rank " << r << " step " << k;
      if (sgd) opt.step();
    }
    for (auto& st : runner.stages())
      for (auto& [n, p] : st->named_parameters()) {
        grads[r].emplace_back(n, p.grad());
        params[r].emplace_back(n, p.detach());
      }
  });
  // Every name of the pipeline against the reference ("7.weight" is "0.weight" there).
  std::map<std::string, Tensor> ref_grad, ref_param;
  for (auto& [n, p] : ref->named_parameters()) ref_grad[n] = p.grad(), ref_param[n] = p.detach();
  ref_grad["7.weight"] = ref_grad["0.weight"];
  ref_param["7.weight"] = ref_param["0.weight"];
  int seen = 0;
  Tensor tied_grad, tied_param;
  for (int r = 0; r < c.ranks; ++r)
    for (size_t i = 0; i < grads[r].size(); ++i) {
      const std::string& n = grads[r][i].first;
      ++seen;
      ASSERT_TRUE(grads[r][i].second.defined()) << n;
      EXPECT_TRUE(testing::tensors_near(grads[r][i].second, ref_grad.at(n), 1e-5)) << n << " on rank " << r;
      EXPECT_TRUE(testing::tensors_near(params[r][i].second, ref_param.at(n), 1e-5)) << n << " on rank " << r;
      if (n == "0.weight" || n == "7.weight") {
        if (!tied_grad.defined()) {
          tied_grad = grads[r][i].second, tied_param = params[r][i].second;
        } else {  // the holders agree bitwise
          EXPECT_TRUE(testing::tensors_near(grads[r][i].second, tied_grad, 0)) << n;
          EXPECT_TRUE(testing::tensors_near(params[r][i].second, tied_param, 0)) << n;
        }
      }
    }
  EXPECT_EQ(seen, static_cast<int>(ref->named_parameters().size()) + 1);
}

TEST(PipeTied, EverySchedulesGradientsEqualOneProcessWithATrueTie) {
  for (const Case& c :
       {Case{ScheduleKind::kGPipe, 2, 1, {4, 4}}, Case{ScheduleKind::k1F1B, 3, 1, {3, 2, 3}},
        Case{ScheduleKind::kInterleaved1F1B, 2, 2, {1, 2, 2, 3}}, Case{ScheduleKind::kZeroBubbleH1, 2, 1, {5, 3}},
        Case{ScheduleKind::kZeroBubbleH1, 4, 1, {2, 2, 2, 2}}})
    check_tied(c, /*steps=*/1, /*sgd=*/false);
}

// zbv's V puts the embedding (stage 0) and the head (stage 2p - 1) on rank 0:
// one Tied action there sums its two members (and no message), the other
// ranks have none; interleaved-zb keeps them on ranks 0 and 1.
TEST(PipeTied, TwoStagesOfAGroupOnOneRank) {
  Schedule v = make_schedule(ScheduleKind::kZeroBubbleV, 2, 4, 2);
  add_tied_grads(v, {{0, 3}});
  EXPECT_EQ(v.tied_ranks(0), (std::vector<int>{0}));
  EXPECT_EQ(to_string(v.rank_actions[0].back()), "Tied0@s0");
  int tied_actions = 0;
  for (const auto& list : v.rank_actions)
    for (const Action& a : list) tied_actions += is_tied(a.kind);
  EXPECT_EQ(tied_actions, 1);
  EXPECT_NO_THROW(validate(v));
  EXPECT_NO_THROW(simulate(v, CostModel::uniform(4, 1, 1, 1)));
  for (const Case& c :
       {Case{ScheduleKind::kZeroBubbleV, 2, 2, {2, 2, 2, 2}}, Case{ScheduleKind::kZeroBubbleV, 2, 2, {1, 3, 3, 1}},
        Case{ScheduleKind::kZeroBubbleV, 4, 2, {1, 1, 1, 1, 1, 1, 1, 1}},
        Case{ScheduleKind::kInterleavedZeroBubble, 2, 2, {1, 2, 2, 3}}}) {
    check_tied(c, /*steps=*/1, /*sgd=*/false);
    check_tied(c, /*steps=*/3, /*sgd=*/true);
  }
  check_tied(Case{ScheduleKind::kZeroBubbleV, 2, 2, {2, 2, 2, 2}}, /*steps=*/2, /*sgd=*/false);  // accumulation
}

TEST(PipeTied, AccumulationOverStepsCountsEachStepOnce) {
  check_tied(Case{ScheduleKind::k1F1B, 2, 1, {4, 4}}, /*steps=*/2, /*sgd=*/false);
  check_tied(Case{ScheduleKind::kZeroBubbleH1, 2, 1, {4, 4}}, /*steps=*/2, /*sgd=*/false);
}

TEST(PipeTied, SgdTrainingKeepsTheCopiesEqualAndEqualToOneProcess) {
  check_tied(Case{ScheduleKind::k1F1B, 2, 1, {4, 4}}, /*steps=*/3, /*sgd=*/true);
  check_tied(Case{ScheduleKind::kInterleaved1F1B, 2, 2, {2, 2, 2, 2}}, /*steps=*/3, /*sgd=*/true);
}

TEST(PipeTied, ErrorsNameTheParametersAndRanks) {
  const Schedule sched = make_schedule(ScheduleKind::k1F1B, 2, 2, 1);
  auto build = [&](std::vector<std::vector<std::string>> tied, bool one_model) {
    std::vector<std::shared_ptr<nn::Sequential>> models;
    auto shared = make_lm(/*shared=*/true);
    for (int r = 0; r < 2; ++r) models.push_back(one_model ? shared : make_lm(false));
    run_ranks(2, [&](std::shared_ptr<ProcessGroup> g) {
      RunnerOptions o;
      o.tied = tied;
      PipelineRunner runner(sched, stages_for(*models[g->rank()], sched, {4, 4}, g->rank()), g, o);
    });
  };
  EXPECT_WEFT_ERROR(build({{"0.weight", "7.wieght"}}, false),
                    "tied parameters: '7.wieght' (group 0: ['0.weight', '7.wieght']) is a parameter of no stage");
  EXPECT_WEFT_ERROR(build({{"0.weight", "7.weight"}, {"1.weight", "7.weight"}}, false),
                    "group 1: '1.weight' on rank 0 has shape [5, 5] but '7.weight' on rank 1 has [7, 5]");
  EXPECT_WEFT_ERROR(build(kTied, true), "are one tensor shared by two ranks of one process");
  EXPECT_NO_THROW(build({}, true));
}

}  // namespace
}  // namespace weft::parallel::pipe
