// DistributedModel transparency cases shared by the in-process test
// (distributed_model_test.cc, ranks as threads) and the MPI one
// (distributed_model_mpi_test.cc): a case is a grid, an optimizer, a
// schedule and step options; the reference is one process on the global
// batches; each rank trains its replica's share and its parameters must
// equal the reference's within 1e-5.
#pragma once

#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/nn_ops.h"
#include "core/ops.h"
#include "core/rng.h"
#include "nn/nn.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "parallel/hybrid/distributed_model.h"
#include "parallel/hybrid/distributed_optimizer.h"
#include "tests/testing.h"

namespace weft::parallel::hybrid::testcases {

constexpr int64_t kIn = 6, kHidden = 10, kOut = 3, kLocalRows = 8;

// 8 children: (Linear, Tanh) x 4.
inline std::shared_ptr<nn::Sequential> make_mlp(uint64_t seed) {
  manual_seed(seed);
  auto m = std::make_shared<nn::Sequential>();
  for (int i = 0; i < 4; ++i) {
    m->push_back(std::make_shared<nn::Linear>(i == 0 ? kIn : kHidden, i == 3 ? kOut : kHidden));
    m->push_back(std::make_shared<nn::Tanh>());
  }
  return m;
}

enum class Opt { kSgd, kAdamW };

inline std::unique_ptr<optim::Optimizer> make_opt(Opt o, const optim::NamedParameters& params) {
  if (o == Opt::kSgd) return std::make_unique<optim::SGD>(params, optim::SGDOptions{0.1, 0.9, 0, 1e-3});
  optim::AdamWOptions a;
  a.lr = 0.01;
  return std::make_unique<optim::AdamW>(params, a);
}

struct Case {
  int pp, dp;
  Opt opt = Opt::kSgd;
  pipe::ScheduleKind schedule = pipe::ScheduleKind::k1F1B;
  int virtual_stages = 1;
  int passes = 1;  // backward_passes_per_step
  bool overlap = true;
  bool average = true;  // micro-batch averaging (off: summed loss)
  bool zero = false;    // shard_optimizer_state (ZeRO-1 through DistributedOptimizer)
  pipe::CheckpointMode checkpoint = pipe::CheckpointMode::kExceptLast;
  // Measured balances with several stages per rank too (else those split evenly by layer count).
  bool measured = false;
};

inline std::string describe(const Case& c) {
  return "pp " + std::to_string(c.pp) + " x dp " + std::to_string(c.dp) + " " + pipe::schedule_name(c.schedule) +
         (c.virtual_stages > 1 ? " v" + std::to_string(c.virtual_stages) : "") +
         (c.opt == Opt::kAdamW ? " adamw" : " sgd") + " passes=" + std::to_string(c.passes) +
         (c.overlap ? "" : " no-overlap") + (c.average ? "" : " summed") + (c.zero ? " zero" : "") +
         (c.measured ? " measured" : "");
}

struct Reference {
  std::vector<Tensor> xs, ys;  // global batches
  std::vector<double> loss;
  std::map<std::string, Tensor> params;  // after the steps
  nn::StateDict model_state;             // after the steps
  optim::OptimizerStateDict opt_state;   // by name, after the steps
};

inline Tensor case_loss(const Case& c, const Tensor& out, const Tensor& y) {
  return mse_loss(out, y, c.average ? Reduction::Mean : Reduction::Sum);
}

// One process on the global batches (seeded: the same in every process).
inline Reference reference(const Case& c, int steps) {
  Reference ref;
  manual_seed(99);
  for (int k = 0; k < steps; ++k) {
    ref.xs.push_back(randn({kLocalRows * c.dp, kIn}));
    ref.ys.push_back(randn({kLocalRows * c.dp, kOut}));
  }
  auto model = make_mlp(5);
  auto opt = make_opt(c.opt, model->named_parameters());
  for (int k = 0; k < steps; ++k) {
    if (k % c.passes == 0) opt->zero_grad();
    // Summed: the replicas' sums averaged over dp, as the reducer averages.
    Tensor l = case_loss(c, model->forward(ref.xs[k]), ref.ys[k]);
    if (!c.average) l = div(l, full({}, double(c.dp)));
    l.backward();
    ref.loss.push_back(l.item<double>());
    if ((k + 1) % c.passes == 0) opt->step();
  }
  for (auto& [n, p] : model->named_parameters()) ref.params[n] = p.detach();
  ref.model_state = model->state_dict();
  ref.opt_state = opt->state_dict_by_name();
  return ref;
}

// The model rank r starts from: replicas other than the first differ (the
// partition broadcasts data-parallel rank 0's values).
inline std::shared_ptr<nn::Sequential> rank_model(const Case& c, int rank) {
  return make_mlp(rank < c.pp ? 5 : 100 + rank);
}

struct RankResult {
  std::map<std::string, Tensor> params;  // this rank's, after the steps
  nn::StateDict model_state;             // gathered (whole model)
  optim::OptimizerStateDict opt_state;   // gathered (whole model, by name)
  std::string memory;                    // the optimizer's memory summary
  // Whether this rank's stages hold a Linear. A measured balance may leave a
  // stage of pp 4 with only a Tanh, so a rank may rightly hold no parameter.
  bool holds_a_linear = false;
};

// Trains this rank's part over steps [first, ref.xs.size()); EXPECTs each
// step's loss; with `resume`, first loads the whole model's and optimizer's
// state (as saved after step `first`) into the freshly partitioned model.
inline RankResult train_rank(const Case& c, const Reference& ref, std::shared_ptr<nn::Sequential> model,
                             std::shared_ptr<ProcessGroup> g, int first = 0, const RankResult* resume = nullptr) {
  const int r = g->rank(), steps = static_cast<int>(ref.xs.size());
  DistributedModelOptions o;
  o.pp = c.pp;
  o.pipe.chunks = 2;
  o.pipe.schedule = c.schedule;
  o.pipe.virtual_stages = c.virtual_stages;
  o.pipe.average_microbatches = c.average;
  o.pipe.checkpoint = c.checkpoint;
  o.auto_partition = c.virtual_stages == 1 || c.measured;  // measured balances
  o.backward_passes_per_step = c.passes;
  o.overlapping_allreduce = c.overlap;
  o.shard_optimizer_state = c.zero;
  std::ostringstream table;  // world rank 0 prints the measured partition there
  o.table = &table;
  DistributedModel dm(std::move(model), g, o);
  EXPECT_EQ(dm.grid().dp(), c.dp);
  DistributedOptimizer opt(dm, [&](const optim::NamedParameters& p) { return make_opt(c.opt, p); });
  dm.partition(ref.xs[first].narrow(0, dm.dp_rank() * kLocalRows, kLocalRows));  // (else the first step() does)
  if (resume) {
    dm.load_state_dict(resume->model_state);
    opt.load_state_dict(resume->opt_state);
    // What was loaded reads back the same.
    const optim::OptimizerStateDict back = opt.state_dict();
    for (const auto& [k, t] : resume->opt_state) {
      auto it = back.find(k);
      EXPECT_TRUE(it != back.end() && testing::tensors_near(it->second.to(t.dtype()), t, 0)) << k << " on rank " << r;
    }
  }
  auto loss_fn = [&](const Tensor& out, const Tensor& y) { return case_loss(c, out, y); };
  for (int k = first; k < steps; ++k) {
    const int d = dm.dp_rank();
    Tensor x = ref.xs[k].narrow(0, d * kLocalRows, kLocalRows), y = ref.ys[k].narrow(0, d * kLocalRows, kLocalRows);
    if (k % c.passes == 0) opt.zero_grad();
    const double loss = dm.step(x, y, loss_fn);
    EXPECT_NEAR(loss, ref.loss[k], 1e-5) << "rank " << r << " step " << k;
    if ((k + 1) % c.passes == 0) opt.step();
  }
  RankResult out;
  for (auto& [n, p] : dm.local_named_parameters()) out.params[n] = p.detach();
  for (const auto& stage : dm.local_modules())
    for (const auto& layer : stage->children())
      if (std::dynamic_pointer_cast<nn::Linear>(layer)) out.holds_a_linear = true;
  if (c.pp > 1 && o.auto_partition && !resume) {
    EXPECT_EQ(table.str().empty(), r != 0) << table.str();
  }
  out.model_state = dm.state_dict();
  out.opt_state = opt.state_dict();
  out.memory = opt.memory_summary();
  return out;
}

// Rank r's parameters against the reference's; a rank has parameters exactly
// when its stages hold a Linear.
inline void compare(const Reference& ref, const RankResult& result, int r) {
  const std::map<std::string, Tensor>& got = result.params;
  EXPECT_EQ(got.empty(), !result.holds_a_linear) << "rank " << r << " holds " << got.size() << " parameters";
  for (auto& [n, t] : got) {
    auto it = ref.params.find(n);
    if (it == ref.params.end()) {
      ADD_FAILURE() << n << " on rank " << r << " is not a parameter of the model";
      continue;
    }
    EXPECT_TRUE(testing::tensors_near(t, it->second, 1e-5)) << n << " on rank " << r;
  }
  // The gathered whole-model states equal the reference's, on every rank.
  EXPECT_EQ(result.model_state.size(), ref.model_state.size()) << "rank " << r;
  for (const auto& [k, t] : ref.model_state) {
    const Tensor* mine = result.model_state.find(k);
    ASSERT_NE(mine, nullptr) << k << " missing from rank " << r << "'s gathered state_dict()";
    EXPECT_TRUE(testing::tensors_near(*mine, t.detach(), 1e-5)) << k << " on rank " << r;
  }
  EXPECT_EQ(result.opt_state.size(), ref.opt_state.size()) << "rank " << r;
  for (const auto& [k, t] : ref.opt_state) {
    auto it2 = result.opt_state.find(k);
    ASSERT_NE(it2, result.opt_state.end()) << k << " missing from rank " << r << "'s gathered optimizer state";
    EXPECT_TRUE(testing::tensors_near(it2->second.to(t.dtype()), t, 1e-5)) << k << " on rank " << r;
  }
}

}  // namespace weft::parallel::hybrid::testcases
