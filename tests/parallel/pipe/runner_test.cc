// Transparency of PipelineRunner with ranks as threads (//parallel/comm/inproc): for
// gpipe, 1f1b, interleaved, zb-h1, zbv (V placement) and interleaved-zb
// schedules, balances and micro-batch counts
// (uneven ones included), the step's loss and every parameter's gradient equal
// the unpartitioned model's on the whole batch within 1e-5; a second step
// with other shapes; argument errors; a stage that throws named on its rank.
#include "parallel/pipe/runner.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/nn_ops.h"
#include "core/ops.h"
#include "core/rng.h"
#include "nn/nn.h"
#include "parallel/comm/inproc/testing.h"
#include "parallel/pipe/generators.h"
#include "tests/testing.h"

namespace weft::parallel::pipe {
namespace {

constexpr int64_t kIn = 6, kHidden = 12, kOut = 4, kLayers = 12;

// 12 children: (Linear, Tanh) x 5, Linear, Tanh, the same weights for a seed.
std::shared_ptr<nn::Sequential> make_mlp(uint64_t seed = 7) {
  manual_seed(seed);
  auto m = std::make_shared<nn::Sequential>();
  for (int i = 0; i < kLayers / 2; ++i) {
    m->push_back(std::make_shared<nn::Linear>(i == 0 ? kIn : kHidden, i == kLayers / 2 - 1 ? kOut : kHidden));
    m->push_back(std::make_shared<nn::Tanh>());
  }
  return m;
}

Tensor mse(const Tensor& out, const Tensor& target) { return mse_loss(out, target); }

// Stage modules for `rank` under `balance` (children per stage).
std::vector<std::shared_ptr<nn::Module>> stages_for(const nn::Sequential& model, const Schedule& sched,
                                                    const std::vector<int>& balance, int rank) {
  std::vector<int> begin(balance.size() + 1, 0);
  std::partial_sum(balance.begin(), balance.end(), begin.begin() + 1);
  std::vector<std::shared_ptr<nn::Module>> out;
  for (int s : sched.stages_of_rank(rank)) out.push_back(model.slice(begin[s], begin[s + 1]));
  return out;
}

// As even as possible, earlier stages larger.
std::vector<int> even_balance(int stages) {
  std::vector<int> b(stages, kLayers / stages);
  for (int i = 0; i < kLayers % stages; ++i) ++b[i];
  return b;
}

struct Case {
  ScheduleKind kind;
  int ranks, microbatches, virtual_stages;
  std::vector<int> balance;  // empty: even
  int64_t rows;
  CheckpointMode checkpoint = CheckpointMode::kExceptLast;
};

std::string describe(const Case& c) {
  return schedule_name(c.kind) + " ranks=" + std::to_string(c.ranks) + " m=" + std::to_string(c.microbatches) +
         " v=" + std::to_string(c.virtual_stages) + " rows=" + std::to_string(c.rows) +
         " checkpoint=" + checkpoint_mode_name(c.checkpoint);
}

// One step on `c` against the unpartitioned model; returns nothing, EXPECTs.
void check_transparent(const Case& c, int steps = 1) {
  SCOPED_TRACE(describe(c));
  auto ref = make_mlp(), piped = make_mlp();
  const Schedule sched = make_schedule(c.kind, c.ranks, c.microbatches, c.virtual_stages);
  const std::vector<int> balance = c.balance.empty() ? even_balance(sched.num_stages()) : c.balance;
  for (int step = 0; step < steps; ++step) {
    const int64_t rows = c.rows + step * 3;  // shapes change between steps
    manual_seed(100 + step);
    Tensor x = randn({rows, kIn}), y = randn({rows, kOut});
    ref->zero_grad();
    piped->zero_grad();
    Tensor ref_loss = mse(ref->forward(x), y);
    ref_loss.backward();
    const double want = ref_loss.item<double>();
    std::vector<double> losses(c.ranks, -1);
    run_ranks(c.ranks, [&](std::shared_ptr<ProcessGroup> g) {
      PipelineRunner runner(sched, stages_for(*piped, sched, balance, g->rank()), g, {c.checkpoint});
      losses[g->rank()] = runner.step(x, y, mse);
    });
    for (int r = 0; r < c.ranks; ++r) EXPECT_NEAR(losses[r], want, 1e-6) << "rank " << r << " step " << step;
    auto got = piped->named_parameters(), exp = ref->named_parameters();
    ASSERT_EQ(got.size(), exp.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i].first, exp[i].first);
      ASSERT_TRUE(got[i].second.grad().defined()) << got[i].first;
      EXPECT_TRUE(testing::tensors_near(got[i].second.grad(), exp[i].second.grad(), 1e-5))
          << got[i].first << " step " << step;
    }
  }
}

TEST(PipelineRunner, GPipeEqualsTheWholeModel) {
  for (int ranks : {2, 3, 4})
    for (int m : {1, 2, 4}) check_transparent({ScheduleKind::kGPipe, ranks, m, 1, {}, 8});
}

TEST(PipelineRunner, OneFOneBEqualsTheWholeModel) {
  for (int ranks : {2, 4})
    for (int m : {1, 3, 4, 8}) check_transparent({ScheduleKind::k1F1B, ranks, m, 1, {}, 8});
}

TEST(PipelineRunner, ZeroBubbleSplitBackwardEqualsTheWholeModel) {
  for (int ranks : {2, 3, 4})
    for (int m : {1, 2, 4, 6}) check_transparent({ScheduleKind::kZeroBubbleH1, ranks, m, 1, {}, 12});
  check_transparent({ScheduleKind::kZeroBubbleH1, 2, 4, 1, {3, 9}, 9}, /*steps=*/2);
  for (CheckpointMode mode : {CheckpointMode::kAlways, CheckpointMode::kNever})
    check_transparent({ScheduleKind::kZeroBubbleH1, 2, 4, 1, {}, 8, mode});
}

TEST(PipelineRunner, ZeroBubbleAccumulatesWeightGradientsInW) {
  // Each stage is one Linear; a post-accumulate hook on its weight notes the
  // time. With the step traced, that time falls inside the stage's W action,
  // after its B: the weight gradient was left to W.
  auto stage0 = nn::Sequential::of(std::make_shared<nn::Linear>(kIn, kHidden));
  auto stage1 = nn::Sequential::of(std::make_shared<nn::Linear>(kHidden, kOut));
  const Schedule sched = make_schedule(ScheduleKind::kZeroBubbleH1, 2, 2);
  auto now_ns = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  run_ranks(2, [&](std::shared_ptr<ProcessGroup> g) {
    auto stage = g->rank() == 0 ? stage0 : stage1;
    std::vector<int64_t> fired;
    auto h = std::dynamic_pointer_cast<nn::Linear>((*stage)[0])
                 ->weight.register_post_accumulate_grad_hook([&](const Tensor&) { fired.push_back(now_ns()); });
    RunnerOptions o;
    o.checkpoint = CheckpointMode::kNever;
    o.record_trace = true;
    PipelineRunner r(sched, {stage}, g, o);
    r.step(randn({4, kIn}), randn({4, kOut}), mse);
    h.remove();
    ASSERT_EQ(fired.size(), 2u) << "one accumulation per micro-batch";
    int inside_w = 0;
    for (int64_t t : fired)
      for (const TraceEvent& e : r.last_trace()) {
        const bool inside = t >= e.start_ns && t <= e.start_ns + e.duration_ns;
        if (inside) {
          EXPECT_EQ(e.action.kind, ActionKind::kWeight) << "accumulated during " << to_string(e.action);
        }
        inside_w += inside && e.action.kind == ActionKind::kWeight;
      }
    EXPECT_EQ(inside_w, 2);
  });
}

TEST(PipelineRunner, InterleavedTwoStagesPerRankEqualsTheWholeModel) {
  check_transparent({ScheduleKind::kInterleaved1F1B, 2, 4, 2, {}, 8});
  check_transparent({ScheduleKind::kInterleaved1F1B, 2, 2, 3, {}, 6});
  check_transparent({ScheduleKind::kInterleaved1F1B, 3, 6, 2, {}, 12});
  check_transparent({ScheduleKind::kGPipe, 2, 4, 2, {}, 8});  // looped BFS
}

// zbv's V placement (stage s and 2p - 1 - s on one rank: the first and last
// stage share rank 0, the turn at rank p - 1 is handed over locally) and
// interleaved zero bubble, both with split backward.
TEST(PipelineRunner, ZeroBubbleVAndInterleavedZeroBubbleEqualTheWholeModel) {
  for (int ranks : {2, 4})
    for (int m : {1, 4, 8}) {
      check_transparent({ScheduleKind::kZeroBubbleV, ranks, m, 2, {}, 8});
      check_transparent({ScheduleKind::kInterleavedZeroBubble, ranks, m, 2, {}, 8});
    }
  check_transparent({ScheduleKind::kZeroBubbleV, 2, 4, 2, {4, 1, 2, 5}, 9}, /*steps=*/2);
  check_transparent({ScheduleKind::kInterleavedZeroBubble, 2, 4, 3, {}, 6});
  for (CheckpointMode mode : {CheckpointMode::kAlways, CheckpointMode::kNever})
    check_transparent({ScheduleKind::kZeroBubbleV, 2, 4, 2, {}, 8, mode});
}

TEST(PipelineRunner, UnevenBalanceAndBatchesThatDoNotDivide) {
  check_transparent({ScheduleKind::k1F1B, 2, 4, 1, {2, 10}, 10});    // 10 rows: 3, 3, 2, 2
  check_transparent({ScheduleKind::kGPipe, 3, 4, 1, {7, 1, 4}, 7});  // 2, 2, 2, 1
  check_transparent({ScheduleKind::k1F1B, 4, 3, 1, {1, 1, 1, 9}, 5});
}

TEST(PipelineRunner, EveryCheckpointModeEqualsTheWholeModel) {
  for (CheckpointMode mode : {CheckpointMode::kAlways, CheckpointMode::kExceptLast, CheckpointMode::kNever}) {
    check_transparent({ScheduleKind::k1F1B, 2, 4, 1, {}, 8, mode});
    check_transparent({ScheduleKind::kGPipe, 3, 3, 1, {}, 7, mode});
    check_transparent({ScheduleKind::kInterleaved1F1B, 2, 4, 2, {}, 8, mode});
  }
  EXPECT_EQ(parse_checkpoint_mode("except_last"), CheckpointMode::kExceptLast);
  EXPECT_WEFT_ERROR(parse_checkpoint_mode("sometimes"),
                    "checkpoint mode 'sometimes' is not one of 'always', 'except_last', 'never'");
}

// Tanh that counts its forwards (checkpointed micro-batches run twice).
class CountingTanh : public nn::Module {
 public:
  CountingTanh() : nn::Module("CountingTanh") {}
  Tensor forward(const Tensor& x) override {
    ++calls;
    return tanh(x);
  }
  std::atomic<int> calls{0};
};

TEST(PipelineRunner, CheckpointedMicroBatchesAreRecomputed) {
  const int m = 4;
  for (auto [mode, want] : {std::pair{CheckpointMode::kAlways, 2 * m},
                            std::pair{CheckpointMode::kExceptLast, 2 * m - 1}, std::pair{CheckpointMode::kNever, m}}) {
    auto counter = std::make_shared<CountingTanh>();
    auto stage0 = nn::Sequential::of(std::make_shared<nn::Linear>(kIn, kHidden), counter);
    auto stage1 = nn::Sequential::of(std::make_shared<nn::Linear>(kHidden, kOut));
    run_ranks(2, [&](std::shared_ptr<ProcessGroup> g) {
      PipelineRunner r(make_schedule(ScheduleKind::k1F1B, 2, m), {g->rank() == 0 ? stage0 : stage1}, g, {mode});
      r.step(randn({8, kIn}), randn({8, kOut}), mse);
    });
    EXPECT_EQ(counter->calls.load(), want) << checkpoint_mode_name(mode);
  }
}

TEST(PipelineRunner, RecomputationDrawsTheSameDropoutMasks) {
  // Dropout on both stages: the checkpointed step must reproduce the plain
  // step's masks exactly. Each rank's thread has a generator of its own
  // (run_ranks), so one rank's recomputation, which rewinds its stream and
  // restores it, cannot move the other's draws.
  std::vector<std::vector<Tensor>> grads;
  for (CheckpointMode mode : {CheckpointMode::kNever, CheckpointMode::kAlways}) {
    manual_seed(3);
    auto stage0 = nn::Sequential::of(std::make_shared<nn::Linear>(kIn, kHidden), std::make_shared<nn::Tanh>(),
                                     std::make_shared<nn::Dropout>(0.5));
    auto stage1 = nn::Sequential::of(std::make_shared<nn::Dropout>(0.5), std::make_shared<nn::Linear>(kHidden, kOut));
    Tensor x = randn({8, kIn}), y = randn({8, kOut});
    manual_seed(4);
    run_ranks(2, [&](std::shared_ptr<ProcessGroup> g) {
      PipelineRunner r(make_schedule(ScheduleKind::kGPipe, 2, 4), {g->rank() == 0 ? stage0 : stage1}, g, {mode});
      r.step(x, y, mse);
    });
    grads.emplace_back();
    for (auto& p : stage0->parameters()) grads.back().push_back(p.grad());
    for (auto& p : stage1->parameters()) grads.back().push_back(p.grad());
  }
  for (size_t i = 0; i < grads[0].size(); ++i)
    EXPECT_TRUE(testing::tensors_near(grads[0][i], grads[1][i], 0)) << "parameter " << i;
}

TEST(PipelineRunner, TraceRecordsEveryActionOfEveryRankInOrder) {
  auto model = make_mlp();
  const Schedule sched = make_schedule(ScheduleKind::k1F1B, 2, 4);
  std::vector<std::vector<TraceEvent>> gathered(2);
  run_ranks(2, [&](std::shared_ptr<ProcessGroup> g) {
    RunnerOptions o;
    o.record_trace = true;
    PipelineRunner r(sched, stages_for(*model, sched, even_balance(2), g->rank()), g, o);
    r.step(randn({8, kIn}), randn({8, kOut}), mse);
    gathered[g->rank()] = gather_trace(*g, r.last_trace());
  });
  EXPECT_EQ(gathered[0].size(), sched.rank_actions[0].size() + sched.rank_actions[1].size());
  ASSERT_EQ(gathered[1].size(), gathered[0].size());
  size_t i = 0;
  for (int r = 0; r < 2; ++r) {
    int64_t prev_end = 0;
    for (const Action& a : sched.rank_actions[r]) {
      const TraceEvent& e = gathered[1][i++];
      EXPECT_EQ(e.rank, r);
      EXPECT_EQ(e.action, a);
      EXPECT_GE(e.duration_ns, 0);
      EXPECT_GE(e.start_ns, prev_end) << to_string(a);  // one action at a time
      prev_end = e.start_ns + e.duration_ns;
    }
  }
  const std::string json = chrome_trace_json(gathered[0]);
  EXPECT_NE(json.find("\"name\": \"rank 1\""), std::string::npos);
  EXPECT_NE(json.find("\"name\": \"RecvGrad0.3<-s1@r1\""), std::string::npos);
}

TEST(PipelineRunner, ChromeTraceJsonIsExact) {
  std::vector<TraceEvent> ev = {{Action::forward(0, 1), 0, 5000, 2500},
                                {Action::recv_activation(1, 1, 0), 1, 7000, 1000}};
  EXPECT_EQ(
      chrome_trace_json(ev),
      "{\"traceEvents\": [\n"
      "  {\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, \"tid\": 0, \"args\": {\"name\": \"rank 0\"}},\n"
      "  {\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, \"tid\": 1, \"args\": {\"name\": \"rank 1\"}},\n"
      "  {\"name\": \"F0.1\", \"cat\": \"F\", \"ph\": \"X\", \"pid\": 0, \"tid\": 0, \"ts\": 0.000, \"dur\": 2.500, "
      "\"args\": {\"stage\": 0, \"microbatch\": 1}},\n"
      "  {\"name\": \"RecvAct1.1<-s0@r0\", \"cat\": \"RecvAct\", \"ph\": \"X\", \"pid\": 0, \"tid\": 1, \"ts\": "
      "2.000, \"dur\": 1.000, \"args\": {\"stage\": 1, \"microbatch\": 1}}\n"
      "]}\n");
}

TEST(PipelineRunner, ForwardOnlyAndKeptOutputsEqualTheWholeModel) {
  auto model = make_mlp();
  for (ScheduleKind kind : {ScheduleKind::kGPipe, ScheduleKind::k1F1B, ScheduleKind::kInterleaved1F1B}) {
    const Schedule sched = make_schedule(kind, 2, 4, kind == ScheduleKind::kInterleaved1F1B ? 2 : 1);
    manual_seed(21);
    Tensor x = randn({10, kIn}), y = randn({10, kOut});
    Tensor want = model->forward(x).detach();
    model->zero_grad();
    const int last_rank = sched.rank_of(sched.num_stages() - 1);
    run_ranks(2, [&](std::shared_ptr<ProcessGroup> g) {
      RunnerOptions o;
      o.keep_output = true;
      PipelineRunner r(sched, stages_for(*model, sched, even_balance(sched.num_stages()), g->rank()), g, o);
      Tensor out = r.forward(x);
      EXPECT_EQ(out.defined(), g->rank() == last_rank);
      if (out.defined()) {
        EXPECT_FALSE(out.requires_grad());
        EXPECT_TRUE(testing::tensors_near(out, want, 1e-6)) << sched.name;
      }
      r.step(x, y, mse);
      if (g->rank() == last_rank) {
        EXPECT_TRUE(testing::tensors_near(r.last_output(), want, 1e-6)) << sched.name;
      }
    });
    for (auto& p : model->parameters()) EXPECT_TRUE(p.grad().defined());  // step() still trained
  }
}

TEST(PipelineRunner, MeasuredCostsAreMeansAndShortestReceives) {
  const Schedule sched = make_schedule(ScheduleKind::kZeroBubbleH1, 2, 2);
  std::vector<TraceEvent> ev = {{Action::forward(0, 0), 0, 0, 2000},
                                {Action::forward(0, 1), 0, 0, 4000},
                                {Action::backward(1, 0), 1, 0, 6000},
                                {Action::weight(1, 0), 1, 0, 1000},
                                {Action::weight(1, 1), 1, 0, 3000},
                                {Action::recv_activation(1, 0, 0), 1, 0, 900},
                                {Action::recv_activation(1, 1, 0), 1, 0, 300},
                                {Action::recv_grad(0, 0, 1), 0, 0, 500}};
  CostModel c = measured_costs(sched, ev);
  EXPECT_DOUBLE_EQ(c.forward[0], 3e-6);
  EXPECT_DOUBLE_EQ(c.forward[1], 0);
  EXPECT_DOUBLE_EQ(c.backward[1], 6e-6);
  EXPECT_DOUBLE_EQ(c.weight[1], 2e-6);
  ASSERT_EQ(c.transfer.size(), 1u);
  EXPECT_DOUBLE_EQ(c.transfer[0], 3e-7);
}

TEST(PipelineRunner, ShapesMayChangeBetweenSteps) {
  check_transparent({ScheduleKind::k1F1B, 2, 4, 1, {}, 9}, /*steps=*/3);
}

TEST(PipelineRunner, MicrobatchRowsFollowTensorSplit) {
  run_ranks(1, [](std::shared_ptr<ProcessGroup> g) {
    auto model = make_mlp();
    PipelineRunner r(make_schedule(ScheduleKind::kGPipe, 1, 4), {model}, g);
    EXPECT_EQ(r.microbatch_rows(10), (std::vector<int64_t>{3, 3, 2, 2}));
    EXPECT_EQ(r.microbatch_rows(8), (std::vector<int64_t>{2, 2, 2, 2}));
    EXPECT_WEFT_ERROR(r.microbatch_rows(3), "a batch of 3 rows cannot make 4 micro-batches");
  });
}

TEST(PipelineRunner, ArgumentErrorsAreNamed) {
  run_ranks(2, [](std::shared_ptr<ProcessGroup> g) {
    auto model = make_mlp();
    EXPECT_WEFT_ERROR(PipelineRunner(make_schedule(ScheduleKind::kGPipe, 3, 2), {model}, g),
                      "schedule gpipe is for 3 ranks but the group has 2");
    EXPECT_WEFT_ERROR(PipelineRunner(make_schedule(ScheduleKind::kGPipe, 2, 2), {model, model}, g),
                      "runs 1 stage(s) of schedule gpipe but was given 2 module(s)");
    Schedule broken = make_schedule(ScheduleKind::k1F1B, 2, 2);
    std::swap(broken.rank_actions[1].front(), broken.rank_actions[1].back());
    EXPECT_WEFT_ERROR(PipelineRunner(broken, {model}, g), "schedule 1f1b: rank 1 action 0");
  });
}

TEST(PipelineRunner, AStageThatThrowsIsNamedOnItsRankAndItsPeerFails) {
  auto model = make_mlp(), other = make_mlp(9);
  const Schedule sched = make_schedule(ScheduleKind::k1F1B, 2, 2);
  std::vector<std::string> errors(2);
  RunRanksOptions o;
  o.timeout = std::chrono::seconds(20);
  EXPECT_THROW(run_ranks(
                   2,
                   [&](std::shared_ptr<ProcessGroup> g) {
                     // Rank 1's stage expects 6 inputs, not 12: its Linear throws.
                     auto stage = (g->rank() == 0 ? model : other)->slice(0, 6);
                     PipelineRunner runner(sched, {stage}, g);
                     try {
                       runner.step(randn({4, kIn}), randn({4, kOut}), mse);
                     } catch (const Error& e) {
                       errors[g->rank()] = e.message();
                       throw;
                     }
                   },
                   o),
               Error);
  EXPECT_NE(errors[1].find("PipelineRunner (schedule 1f1b) on rank 1: action 1 of"), std::string::npos) << errors[1];
  EXPECT_NE(errors[1].find("(F1.0, micro-batch 0) failed"), std::string::npos) << errors[1];
  // Rank 0 waits for the gradient rank 1 never sends: named, not a hang.
  EXPECT_NE(errors[0].find("PipelineRunner (schedule 1f1b) on rank 0"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("RecvGrad0.0<-s1@r1"), std::string::npos) << errors[0];
}

}  // namespace
}  // namespace weft::parallel::pipe
