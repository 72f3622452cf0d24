// Checkpoint cases shared by the in-process tests (checkpoint_test.cc,
// ranks as threads) and the MPI ones (checkpoint_mpi_test.cc): an MLP of 8
// children trained on seeded global batches by a DistributedModel of a given
// layout (pp x dp, with or without ZeRO) with AdamW or SGD and a StepLR
// schedule; a run may resume from a checkpoint and may save one after a
// given step. The reference is one process (plain nn + optim) on the same
// global batches.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/nn_ops.h"
#include "core/ops.h"
#include "core/rng.h"
#include "nn/nn.h"
#include "optim/adam.h"
#include "optim/lr_scheduler.h"
#include "optim/sgd.h"
#include "parallel/checkpoint/checkpointer.h"
#include "parallel/checkpoint/load.h"
#include "parallel/hybrid/distributed_model.h"
#include "parallel/hybrid/distributed_optimizer.h"
#include "tests/testing.h"

namespace weft::parallel::checkpoint::testcases {

constexpr int64_t kIn = 6, kHidden = 10, kOut = 3, kRows = 8;  // global batch kRows

// 8 children: (Linear, Tanh) x 4; names 0.weight, 0.bias, 2.weight, ...
inline std::shared_ptr<nn::Sequential> make_mlp(uint64_t seed, int64_t hidden = kHidden) {
  manual_seed(seed);
  auto m = std::make_shared<nn::Sequential>();
  for (int i = 0; i < 4; ++i) {
    m->push_back(std::make_shared<nn::Linear>(i == 0 ? kIn : hidden, i == 3 ? kOut : hidden));
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

struct Layout {
  int pp = 1, dp = 1;
  bool zero = false;
  int world() const { return pp * dp; }
  std::string str() const { return std::to_string(pp) + "x" + std::to_string(dp) + (zero ? " zero" : ""); }
};

inline std::vector<int> balance_for(int pp) {
  std::vector<int> b(pp, 8 / pp);
  return b;
}

// Global batches, the same in every process.
struct Data {
  std::vector<Tensor> xs, ys;
};
inline Data make_data(int steps) {
  Data d;
  manual_seed(99);
  for (int k = 0; k < steps; ++k) {
    d.xs.push_back(randn({kRows, kIn}));
    d.ys.push_back(randn({kRows, kOut}));
  }
  return d;
}

inline Tensor loss_of(const Tensor& out, const Tensor& y) { return mse_loss(out, y); }

// One process: the losses of steps [0, steps).
inline std::vector<double> reference_losses(Opt o, const Data& d, int steps) {
  auto model = make_mlp(5);
  auto opt = make_opt(o, model->named_parameters());
  optim::StepLR sched(*opt, 3, 0.5);
  std::vector<double> out;
  for (int k = 0; k < steps; ++k) {
    opt->zero_grad();
    Tensor l = loss_of(model->forward(d.xs[k]), d.ys[k]);
    l.backward();
    out.push_back(l.item<double>());
    opt->step();
    sched.step();
  }
  return out;
}

struct TrainRun {
  Layout layout;
  Opt opt = Opt::kAdamW;
  int first = 0, last = 0;  // steps [first, last)
  std::string resume;       // load this checkpoint after partitioning (its step must be `first`)
  std::string save_root;    // save after step save_after (the step count save_after + 1)
  int save_after = -1;
  SaveOptions save_options;
  int64_t hidden = kHidden;  // another width: a model whose shapes differ
};

struct TrainResult {
  std::vector<double> losses;            // steps [first, last)
  std::map<std::string, Tensor> params;  // this rank's, at the end
  nn::StateDict model_state;             // gathered, at the end
  TrainingState loaded;                  // what load() returned
};

// The model rank r starts from (replicas other than the first differ: the
// partition broadcasts data-parallel rank 0's). Make it before starting
// in-process ranks: they share one default generator.
inline std::shared_ptr<nn::Sequential> rank_model(const TrainRun& run, int rank) {
  return make_mlp(rank < run.layout.pp ? 5 : 100 + rank, run.hidden);
}

// This rank's part of `run` (collective over g, whose size is the layout's world).
inline TrainResult run_rank(const TrainRun& run, const Data& d, std::shared_ptr<ProcessGroup> g,
                            std::shared_ptr<nn::Sequential> model) {
  hybrid::DistributedModelOptions o;
  o.pp = run.layout.pp;
  o.dp = run.layout.dp;
  o.pipe.chunks = 2;
  o.balance = balance_for(run.layout.pp);
  o.shard_optimizer_state = run.layout.zero;
  hybrid::DistributedModel dm(std::move(model), g, o);
  hybrid::DistributedOptimizer opt(dm, [&](const optim::NamedParameters& p) { return make_opt(run.opt, p); });
  const int64_t local = kRows / run.layout.dp;
  dm.partition(d.xs[0].narrow(0, 0, local));
  std::unique_ptr<optim::StepLR> sched;
  if (opt.has_parameters()) sched = std::make_unique<optim::StepLR>(opt.inner(), 3, 0.5);
  Stateful state{&dm, &opt, sched.get()};
  TrainResult out;
  if (!run.resume.empty()) out.loaded = load(run.resume, state);
  std::unique_ptr<Checkpointer> ck;
  if (!run.save_root.empty()) ck = std::make_unique<Checkpointer>(run.save_root, g, run.save_options);
  for (int k = run.first; k < run.last; ++k) {
    const int dr = dm.dp_rank();
    opt.zero_grad();
    out.losses.push_back(dm.step(d.xs[k].narrow(0, dr * local, local), d.ys[k].narrow(0, dr * local, local), loss_of));
    opt.step();
    if (sched) sched->step();
    if (ck && k == run.save_after) ck->save(state, TrainingState{k + 1, 0, k + 1, {{"note", "ck_cases"}}});
  }
  if (ck) ck->wait();
  for (auto& [n, p] : dm.local_named_parameters()) out.params[n] = p.detach().clone();
  out.model_state = dm.state_dict();
  return out;
}

inline void expect_losses_near(const std::vector<double>& got, const std::vector<double>& want, int first, double tol,
                               const std::string& what) {
  ASSERT_GE(want.size(), first + got.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (tol == 0) {
      EXPECT_EQ(got[i], want[first + i]) << what << " step " << first + i;
    } else {
      EXPECT_NEAR(got[i], want[first + i], tol) << what << " step " << first + i;
    }
  }
}

}  // namespace weft::parallel::checkpoint::testcases
