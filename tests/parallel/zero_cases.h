// The ZeroOptimizer (parallel/data/zero.h) test cases, written once against a
// ProcessGroup and run by two drivers: tests/parallel/zero_test.cc (ranks as
// threads over the in-process group, 1, 2, 3 and 4 ranks) and
// tests/parallel/zero_mpi_test.cc (processes under mpirun -np 2 and 4). Every
// rank calls every case.
//
// Reference: each rank also trains, locally, a plain module with the plain
// optimizer (SGD with momentum and weight decay, AdamW) on the whole global
// batch of kRows rows (mean loss), where the ZeRO ranks each take kRows / dp
// rows; parameters and by-name state dicts must agree within 1e-6 (relative,
// tests/testing.h's tensors_near). Models: an MLP of 275 parameters (not a
// multiple of 2, 3 or 4: every dp > 1 pads), and one with float32 and float64
// layers (two flats).
//
// WEFT_ZERO_CASES(X) lists every case as X(TestName, function).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/autograd_meta.h"
#include "core/nn_ops.h"
#include "io/safetensors.h"
#include "nn/nn.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "parallel/data/ddp.h"
#include "parallel/data/zero.h"
#include "tests/parallel/det_values.h"
#include "tests/testing.h"

#define WEFT_ZERO_CASES(X)                                                            \
  X(UnreducedGradientsEqualOneProcess, unreduced_equals_one_process)                  \
  X(WithDDPEqualsDDPAndThePlainOptimizer, with_ddp_equals_ddp_and_plain_optimizer)    \
  X(StateBytesPerRankAreOneDpth, state_bytes_per_rank)                                \
  X(GatheredStateDictEqualsUnshardedByName, gathered_state_dict_equals_unsharded)     \
  X(StateDictSavedAtOneDpLoadsAtAnother, state_dict_saved_at_one_dp_loads_at_another) \
  X(LocalStateDictRoundTripAndLayoutErrors, local_state_dict_round_trip)              \
  X(MissingGradientCountsAsZeros, missing_gradient_counts_as_zeros)                   \
  X(MismatchedParameterListsAreNamed, mismatched_parameter_lists)                     \
  X(BadArgumentsAndStateDictsAreNamed, bad_arguments_and_state_dicts)

namespace weft::parallel::zero_cases {

using GroupPtr = std::shared_ptr<ProcessGroup>;
using weft::testing::tensors_near;

constexpr int64_t kRows = 12;  // the global batch: divisible by 1, 2, 3 and 4 ranks
constexpr double kTol = 1e-6;

// Module constructors use the global RNG; in-process ranks are threads.
inline std::mutex& build_mutex() {
  static std::mutex m;
  return m;
}

// Deterministic values (no RNG), scaled by 0.3 unless said (det_values.h).
inline void fill_det(Tensor t, double seed, double scale = 0.3) { testing::fill_det(t, seed, scale); }

// float32 6 -> 16 -> tanh, then float64 16 -> 3: two flats (112 and 51 elements).
class MixedMLP : public nn::Module {
 public:
  MixedMLP() : Module("MixedMLP") {
    w1 = register_parameter("w1", zeros({16, 6}));
    b1 = register_parameter("b1", zeros({16}));
    w2 = register_parameter("w2", zeros({3, 16}, {DType::Float64}));
    b2 = register_parameter("b2", zeros({3}, {DType::Float64}));
  }
  Tensor forward(const Tensor& x) override {               // x (n, 6) float32
    Tensor h = tanh(add(matmul(x, w1.t()), b1));           // (n, 16)
    return add(matmul(h.to(DType::Float64), w2.t()), b2);  // (n, 3) float64
  }
  Tensor w1, b1, w2, b2;
};

enum class Model { kMlp, kMixed };
enum class Opt { kSgd, kAdamW };

inline const char* model_name(Model m) { return m == Model::kMlp ? "mlp" : "mixed"; }
inline const char* opt_name(Opt o) { return o == Opt::kSgd ? "sgd" : "adamw"; }

inline std::shared_ptr<nn::Module> make_model(Model kind, double seed) {
  std::shared_ptr<nn::Module> m;
  {
    std::lock_guard<std::mutex> l(build_mutex());
    if (kind == Model::kMlp) {
      m = nn::Sequential::of(std::make_shared<nn::Linear>(6, 16), std::make_shared<nn::Tanh>(),
                             std::make_shared<nn::Linear>(16, 8), std::make_shared<nn::Tanh>(),
                             std::make_shared<nn::Linear>(8, 3));
    } else {
      m = std::make_shared<MixedMLP>();
    }
  }
  int k = 0;
  for (auto& p : m->parameters()) fill_det(p, seed + 10 * k++);
  return m;
}

// The global batch of step s: x (kRows, 6) float32, y (kRows, 3) in the model's output dtype.
inline std::pair<Tensor, Tensor> batch(Model kind, int s) {
  Tensor x = empty({kRows, 6}), y = empty({kRows, 3}, {kind == Model::kMlp ? DType::Float32 : DType::Float64});
  fill_det(x, 100 + s, 1.0);
  fill_det(y, 200 + s, 1.0);
  return {x, y};
}

// lr_scale: 1 / kRows for summed losses (the mean loss's step sizes).
inline std::unique_ptr<optim::Optimizer> make_opt(Opt o, std::vector<Tensor> params, double lr_scale = 1) {
  if (o == Opt::kSgd) {
    optim::SGDOptions so;
    so.lr = 0.1 * lr_scale;
    so.momentum = 0.9;
    so.weight_decay = 1e-2;
    return std::make_unique<optim::SGD>(std::move(params), so);
  }
  optim::AdamWOptions ao;
  ao.lr = 0.01 * lr_scale;
  ao.weight_decay = 0.05;
  return std::make_unique<optim::AdamW>(std::move(params), ao);
}

inline ShardOptimizerFactory factory(Opt o, double lr_scale = 1) {
  return [o, lr_scale](std::vector<Tensor> shards) { return make_opt(o, std::move(shards), lr_scale); };
}

// One process on the whole global batch, steps [0, steps).
struct Reference {
  std::shared_ptr<nn::Module> model;
  std::unique_ptr<optim::Optimizer> opt;
};
inline Reference reference(Model m, Opt o, int steps, Reduction red = Reduction::Mean) {
  Reference r{make_model(m, 1), nullptr};
  r.opt = make_opt(o, r.model->parameters(), red == Reduction::Sum ? 1.0 / kRows : 1.0);
  for (int s = 0; s < steps; ++s) {
    auto [x, y] = batch(m, s);
    r.opt->zero_grad();
    mse_loss((*r.model)(x), y, red).backward();
    r.opt->step();
  }
  return r;
}

// This rank's kRows / dp rows of steps [first, last), through ZeRO.
inline void train_zero(nn::Module& model, ZeroOptimizer& z, Model m, int first, int last,
                       Reduction red = Reduction::Mean) {
  const int r = z.group().rank();
  const int64_t rows = kRows / z.group().size();
  for (int s = first; s < last; ++s) {
    auto [x, y] = batch(m, s);
    z.zero_grad();
    mse_loss(model(x.narrow(0, r * rows, rows)), y.narrow(0, r * rows, rows), red).backward();
    z.step();
  }
}

inline void expect_params_near(nn::Module& got, nn::Module& want, double tol, const std::string& what) {
  auto a = got.named_parameters(), b = want.named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_TRUE(tensors_near(a[i].second, b[i].second, tol)) << what << ": " << a[i].first;
}

// Every rank's copy of every parameter is bitwise equal to rank 0's.
inline void expect_equal_across_ranks(nn::Module& m, ProcessGroup& g, const std::string& what) {
  for (auto& [name, p] : m.named_parameters()) {
    Tensor mine = p.detach().contiguous();
    std::vector<Tensor> all;
    for (int r = 0; r < g.size(); ++r) all.push_back(empty_like(mine));
    g.allgather(all, mine)->wait();
    for (int r = 1; r < g.size(); ++r)
      EXPECT_TRUE(tensors_near(all[r], all[0], 0)) << what << ": " << name << " rank " << r;
  }
}

// Same keys; tensors of the same shape and dtype, equal within tol.
inline void expect_state_dicts_near(const optim::OptimizerStateDict& got, const optim::OptimizerStateDict& want,
                                    double tol, const std::string& what) {
  std::vector<std::string> gk, wk;
  for (auto& [k, t] : got) gk.push_back(k);
  for (auto& [k, t] : want) wk.push_back(k);
  ASSERT_EQ(gk, wk) << what;
  for (auto& [k, t] : want) {
    const Tensor& g = got.at(k);
    EXPECT_EQ(g.dtype(), t.dtype()) << what << ": " << k;
    EXPECT_EQ(g.device(), t.device()) << what << ": " << k;
    EXPECT_TRUE(tensors_near(g, t, tol)) << what << ": " << k;
  }
}

inline int64_t plain_state_bytes(const optim::Optimizer& opt) {
  int64_t bytes = 0;
  for (const auto& g : opt.param_groups())
    for (const auto& p : g.params)
      for (const auto& [name, t] : opt.state(p)) bytes += static_cast<int64_t>(t.nbytes());
  return bytes;
}

inline std::string tmp_path(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

// ---- cases ----

// (1) Local gradients, reduce_scatter Avg: equal to one process on the whole
// batch; also reduce_scatter Sum with summed losses.
inline void unreduced_equals_one_process(const GroupPtr& g) {
  const int n = g->size();
  for (Model m : {Model::kMlp, Model::kMixed})
    for (Opt o : {Opt::kSgd, Opt::kAdamW}) {
      const std::string what = std::string(model_name(m)) + " " + opt_name(o) + " dp " + std::to_string(n);
      Reference ref = reference(m, o, 5);
      auto model = make_model(m, 1);
      ZeroOptimizer z(model->named_parameters(), g, factory(o));
      EXPECT_EQ(z.flats().size(), m == Model::kMlp ? 1u : 2u) << what;
      train_zero(*model, z, m, 0, 5);
      expect_params_near(*model, *ref.model, kTol, what);
      expect_equal_across_ranks(*model, *g, what);
    }
  Reference ref = reference(Model::kMlp, Opt::kSgd, 4, Reduction::Sum);
  auto model = make_model(Model::kMlp, 1);
  ZeroOptions zo;
  zo.grads = ZeroGrads::kSum;
  ZeroOptimizer z(model->named_parameters(), g, factory(Opt::kSgd, 1.0 / kRows), zo);
  train_zero(*model, z, Model::kMlp, 0, 4, Reduction::Sum);
  expect_params_near(*model, *ref.model, kTol, "summed losses, reduce_scatter sum");
}

// (2) DDP averages; ZeRO takes the owned slices: equal to DDP + the plain optimizer.
inline void with_ddp_equals_ddp_and_plain_optimizer(const GroupPtr& g) {
  const int r = g->rank(), n = g->size();
  const int64_t rows = kRows / n;
  for (Opt o : {Opt::kSgd, Opt::kAdamW}) {
    const std::string what = std::string("ddp ") + opt_name(o) + " dp " + std::to_string(n);
    auto plain_model = make_model(Model::kMlp, 1), zero_model = make_model(Model::kMlp, 1);
    DistributedDataParallel plain_ddp(plain_model, g), zero_ddp(zero_model, g);
    auto plain_opt = make_opt(o, plain_model->parameters());
    ZeroOptions zo;
    zo.grads = ZeroGrads::kReduced;
    ZeroOptimizer z(zero_model->named_parameters(), g, factory(o), zo);
    for (int s = 0; s < 5; ++s) {
      auto [x, y] = batch(Model::kMlp, s);
      Tensor xs = x.narrow(0, r * rows, rows), ys = y.narrow(0, r * rows, rows);
      plain_opt->zero_grad();
      mse_loss(plain_ddp(xs), ys).backward();
      plain_opt->step();
      z.zero_grad();
      mse_loss(zero_ddp(xs), ys).backward();
      z.step();
    }
    expect_params_near(*zero_model, *plain_model, kTol, what);
    expect_equal_across_ranks(*zero_model, *g, what);
    // And both are the one-process run.
    Reference ref = reference(Model::kMlp, o, 5);
    expect_params_near(*zero_model, *ref.model, kTol, what + " vs one process");
  }
}

// (3) Optimizer-state bytes: this rank's shards exactly (ceil(N / dp) elements
// per elementwise state, one 0-dim step per flat); unsharded: the plain optimizer's.
inline void state_bytes_per_rank(const GroupPtr& g) {
  const int n = g->size();
  auto ceil_div = [&](int64_t a) { return (a + n - 1) / n; };
  for (Model m : {Model::kMlp, Model::kMixed})
    for (Opt o : {Opt::kSgd, Opt::kAdamW}) {
      const std::string what = std::string(model_name(m)) + " " + opt_name(o) + " dp " + std::to_string(n);
      Reference ref = reference(m, o, 1);
      auto model = make_model(m, 1);
      ZeroOptimizer z(model->named_parameters(), g, factory(o));
      EXPECT_EQ(z.state_bytes(), 0) << what << " before the first step";
      train_zero(*model, z, m, 0, 1);
      const int64_t k = o == Opt::kSgd ? 1 : 2;  // elementwise states: momentum_buffer; exp_avg, exp_avg_sq
      const int64_t step_bytes = o == Opt::kSgd ? 0 : 4;
      const int64_t expected = m == Model::kMlp ? k * 4 * ceil_div(275) + step_bytes
                                                : k * (4 * ceil_div(112) + 8 * ceil_div(51)) + 2 * step_bytes;
      EXPECT_EQ(z.state_bytes(), expected) << what;
      EXPECT_EQ(z.unsharded_state_bytes(), plain_state_bytes(*ref.opt)) << what;
      // Summed over the ranks: the unsharded elementwise state plus the padding, and a step per rank.
      Tensor total = full({1}, z.state_bytes(), {DType::Int64});
      g->allreduce(total)->wait();
      int64_t padded = 0;
      for (const auto& f : z.flats()) padded += f.padded * static_cast<int64_t>(element_size(f.dtype));
      EXPECT_EQ(total.item<int64_t>(), k * padded + n * step_bytes * static_cast<int64_t>(z.flats().size())) << what;
      if (g->rank() == 0) std::printf("[zero] %s: %s\n", what.c_str(), z.memory_summary().c_str());
    }
}

// (4a) state_dict() gathered (every rank, or one root) equals the plain optimizer's by-name dict.
inline void gathered_state_dict_equals_unsharded(const GroupPtr& g) {
  const int n = g->size();
  for (Model m : {Model::kMlp, Model::kMixed})
    for (Opt o : {Opt::kSgd, Opt::kAdamW}) {
      const std::string what = std::string(model_name(m)) + " " + opt_name(o) + " dp " + std::to_string(n);
      auto model = make_model(m, 1);
      ZeroOptimizer z(model->named_parameters(), g, factory(o));
      {
        Reference fresh = reference(m, o, 0);
        expect_state_dicts_near(z.state_dict(), fresh.opt->state_dict_by_name(fresh.model->named_parameters()), 0,
                                what + " before the first step");
      }
      train_zero(*model, z, m, 0, 3);
      Reference ref = reference(m, o, 3);
      const auto want = ref.opt->state_dict_by_name(ref.model->named_parameters());
      expect_state_dicts_near(z.state_dict(), want, kTol, what);
      for (int root : {0, n - 1}) {
        auto sd = z.state_dict(root);
        if (g->rank() == root) {
          expect_state_dicts_near(sd, want, kTol, what + " root " + std::to_string(root));
        } else {
          EXPECT_TRUE(sd.empty()) << what << " root " << root << ": rank " << g->rank() << " got entries";
        }
      }
    }
}

// (4b) A gathered dict saved at dp k = max(1, n / 2) (a sub-group) loads at dp
// n and training goes on equal to one process; the dp-n dict reloads at dp 1
// exactly.
inline void state_dict_saved_at_one_dp_loads_at_another(const GroupPtr& g) {
  const int n = g->size(), k = std::max(1, n / 2);
  std::vector<int> first;
  for (int r = 0; r < k; ++r) first.push_back(r);
  GroupPtr half = g->new_group(first);
  GroupPtr one = g->new_group({0});
  for (Opt o : {Opt::kSgd, Opt::kAdamW}) {
    const std::string what = std::string(opt_name(o)) + " dp " + std::to_string(k) + " -> " + std::to_string(n);
    const std::string path = tmp_path(std::string("zero_reshard_") + std::to_string(n) + "_" + opt_name(o) + ".st");
    if (half) {
      auto model = make_model(Model::kMlp, 1);
      ZeroOptimizer z(model->named_parameters(), half, factory(o));
      train_zero(*model, z, Model::kMlp, 0, 3);
      auto sd = z.state_dict(/*root=*/0);
      if (half->rank() == 0) {
        std::map<std::string, Tensor> file;
        for (auto& [key, t] : sd) file["optim." + key] = t;
        for (auto& [name, p] : model->named_parameters()) file["model." + name] = p.detach();
        io::save_safetensors(path, file);
      }
    }
    g->barrier()->wait();
    optim::OptimizerStateDict loaded;
    auto model = make_model(Model::kMlp, 7);  // other weights: the file's replace them
    {
      auto file = io::load_safetensors(path).tensors;
      NoGradGuard ng;
      for (auto& [name, p] : model->named_parameters()) p.copy_(file.at("model." + name));
      for (auto& [key, t] : file)
        if (key.rfind("optim.", 0) == 0) loaded[key.substr(6)] = t;
    }
    ZeroOptimizer z(model->named_parameters(), g, factory(o));
    EXPECT_TRUE(z.load_state_dict(loaded).empty()) << what;
    train_zero(*model, z, Model::kMlp, 3, 6);
    Reference ref = reference(Model::kMlp, o, 6);
    expect_params_near(*model, *ref.model, kTol, what);
    const auto at_n = z.state_dict();
    expect_state_dicts_near(at_n, ref.opt->state_dict_by_name(ref.model->named_parameters()), kTol, what);
    if (one) {
      auto copy = make_model(Model::kMlp, 1);
      ZeroOptimizer z1(copy->named_parameters(), one, factory(o));
      z1.load_state_dict(at_n);
      expect_state_dicts_near(z1.state_dict(), at_n, 0, what + " reloaded at dp 1");
    }
    g->barrier()->wait();
  }
}

// local_state_dict: this rank's shard and layout; a fresh optimizer loading it
// continues exactly; layout differences and misuse are named.
inline void local_state_dict_round_trip(const GroupPtr& g) {
  const int r = g->rank(), n = g->size();
  auto a = make_model(Model::kMixed, 1);
  ZeroOptimizer za(a->named_parameters(), g, factory(Opt::kAdamW));
  train_zero(*a, za, Model::kMixed, 0, 2);
  const auto local = za.local_state_dict();
  EXPECT_EQ(local.at("layout.dp").item<int64_t>(), n);
  EXPECT_EQ(local.at("layout.rank").item<int64_t>(), r);
  EXPECT_EQ(testing::values(local.at("layout.param.w2")), (std::vector<double>{1, 0, 48}));
  EXPECT_EQ(local.at("state.shard0.exp_avg").sizes(), (Shape{za.flats()[0].shard}));
  EXPECT_EQ(local.at("state.shard1.exp_avg_sq").dtype(), DType::Float64);
  // The shard is this rank's slice of the gathered state.
  const auto gathered = za.state_dict();
  const int64_t s0 = za.flats()[0].shard, lo = r * s0;
  Tensor flat0 = zeros({za.flats()[0].padded});
  flat0.narrow(0, 0, 96).copy_(gathered.at("state.w1.exp_avg").reshape({-1}));
  flat0.narrow(0, 96, 16).copy_(gathered.at("state.b1.exp_avg"));
  EXPECT_TRUE(tensors_near(local.at("state.shard0.exp_avg"), flat0.narrow(0, lo, s0), 0));

  auto b = make_model(Model::kMixed, 9);
  {
    NoGradGuard ng;
    auto pa = a->parameters(), pb = b->parameters();
    for (size_t i = 0; i < pa.size(); ++i) pb[i].copy_(pa[i]);
  }
  ZeroOptimizer zb(b->named_parameters(), g, factory(Opt::kAdamW));
  zb.load_local_state_dict(local);
  train_zero(*a, za, Model::kMixed, 2, 4);
  train_zero(*b, zb, Model::kMixed, 2, 4);
  expect_params_near(*b, *a, 0, "local round trip");

  auto bad = local;
  bad["layout.dp"] = scalar_tensor(static_cast<int64_t>(n + 1), TensorOptions{DType::Int64});
  EXPECT_WEFT_ERROR(zb.load_local_state_dict(bad), "ZeroOptimizer.load_local_state_dict: the shard was saved by rank " +
                                                       std::to_string(r) + " of dp " + std::to_string(n + 1));
  bad = local;
  bad["layout.param.b1"] = tensor<int64_t>({0, 97, 16}, {3});
  EXPECT_WEFT_ERROR(zb.load_local_state_dict(bad),
                    "'layout.param.b1' is [0, 97, 16] in the state dict but [0, 96, 16]");
  bad = local;
  bad.erase("layout.param.b2");
  EXPECT_WEFT_ERROR(zb.load_local_state_dict(bad), "missing 'layout.param.b2'");
  bad = local;
  bad["state.shard7.exp_avg"] = local.at("state.shard0.exp_avg");
  EXPECT_WEFT_ERROR(zb.load_local_state_dict(bad), "unexpected key 'state.shard7.exp_avg'");
  EXPECT_WEFT_ERROR(zb.load_state_dict(local), "is a key of a local (sharded) state dict; load it with");
}

// A parameter without .grad is updated as if its gradient were zeros (weight
// decay and momentum go on), on the reduce_scatter and the reduced paths.
inline void missing_gradient_counts_as_zeros(const GroupPtr& g) {
  const int r = g->rank();
  const int64_t rows = kRows / g->size();
  for (ZeroGrads mode : {ZeroGrads::kAverage, ZeroGrads::kReduced}) {
    auto ref = make_model(Model::kMlp, 1), model = make_model(Model::kMlp, 1);
    auto ref_opt = make_opt(Opt::kSgd, ref->parameters());
    ZeroOptions zo;
    zo.grads = mode;
    ZeroOptimizer z(model->named_parameters(), g, factory(Opt::kSgd), zo);
    Tensor frozen = model->named_parameters()[3].second, ref_frozen = ref->named_parameters()[3].second;  // 2.bias
    for (int s = 0; s < 3; ++s) {
      auto [x, y] = batch(Model::kMlp, s);
      ref_opt->zero_grad();
      mse_loss((*ref)(x), y).backward();
      ref_frozen.set_grad(zeros_like(ref_frozen));
      ref_opt->step();
      z.zero_grad();
      mse_loss((*model)(x.narrow(0, r * rows, rows)), y.narrow(0, r * rows, rows)).backward();
      if (mode == ZeroGrads::kReduced) {  // as DDP would: the average of the ranks' gradients
        NoGradGuard ng;
        for (auto& p : model->parameters()) {
          Tensor grad = p.grad();
          g->allreduce(grad, {ReduceOp::Avg})->wait();
        }
      }
      frozen.zero_grad();
      EXPECT_FALSE(frozen.grad().defined());
      z.step();
    }
    expect_params_near(*model, *ref, kTol,
                       mode == ZeroGrads::kAverage ? "missing grad, average" : "missing grad, reduced");
  }
}

// (5) Parameter lists that differ across ranks: every rank names the first difference.
inline void mismatched_parameter_lists(const GroupPtr& g) {
  const int r = g->rank(), n = g->size();
  if (n == 1) return;
  auto model = make_model(Model::kMlp, 1);
  auto named = model->named_parameters();
  auto renamed = named;
  if (r == 1) renamed[2].first = "2.weight_renamed";
  EXPECT_WEFT_ERROR(ZeroOptimizer(renamed, g, factory(Opt::kSgd)),
                    "ZeroOptimizer: ranks of the group hold different parameter lists; first difference at parameter "
                    "#2: rank 0 has '2.weight' [8, 16] float32 on cpu (of 6), rank 1 has '2.weight_renamed' [8, 16]");
  auto shorter = named;
  if (r == n - 1) shorter.pop_back();
  EXPECT_WEFT_ERROR(ZeroOptimizer(shorter, g, factory(Opt::kSgd)),
                    "rank " + std::to_string(n - 1) + " has no parameter (of 5)");
  auto other_shape = named;
  if (r == n - 1) other_shape[0].second = zeros({16, 7}).requires_grad_();
  EXPECT_WEFT_ERROR(ZeroOptimizer(other_shape, g, factory(Opt::kSgd)),
                    "rank " + std::to_string(n - 1) + " has '0.weight' [16, 7] float32");
}

// (5) Local argument errors and bad state dicts (nothing changes when a load fails).
inline void bad_arguments_and_state_dicts(const GroupPtr& g) {
  auto model = make_model(Model::kMlp, 1);
  auto named = model->named_parameters();
  EXPECT_WEFT_ERROR(ZeroOptimizer({}, g, factory(Opt::kSgd)), "ZeroOptimizer: got an empty parameter list");
  auto dup = named;
  dup[1].first = dup[0].first;
  EXPECT_WEFT_ERROR(ZeroOptimizer(dup, g, factory(Opt::kSgd)), "parameter name '0.weight' appears more than once");
  EXPECT_WEFT_ERROR(ZeroOptimizer({{"ids", zeros({3}, {DType::Int64})}}, g, factory(Opt::kSgd)),
                    "parameter 'ids' has dtype int64");
  EXPECT_WEFT_ERROR(ZeroOptimizer(named, g, nullptr), "ZeroOptimizer: the optimizer factory is empty");
  EXPECT_WEFT_ERROR(ZeroOptimizer(named, g, [](std::vector<Tensor>) { return std::unique_ptr<optim::Optimizer>(); }),
                    "the optimizer factory returned null");
  EXPECT_WEFT_ERROR(
      ZeroOptimizer(named, g, [](std::vector<Tensor>) { return make_opt(Opt::kSgd, {zeros({2}).requires_grad_()}); }),
      "the factory's SGD does not hold shard 0 (float32)");

  ZeroOptimizer z(named, g, factory(Opt::kAdamW));
  EXPECT_WEFT_ERROR(z.state_dict(g->size()), "ZeroOptimizer.state_dict: root " + std::to_string(g->size()) +
                                                 " is not a rank of the group of " + std::to_string(g->size()));
  train_zero(*model, z, Model::kMlp, 0, 2);
  const auto good = z.state_dict();
  auto expect_unchanged = [&](const std::string& what) { expect_state_dicts_near(z.state_dict(), good, 0, what); };

  auto bad = good;
  for (auto it = bad.begin(); it != bad.end();) it = it->first.rfind("options.2.bias.", 0) == 0 ? bad.erase(it) : ++it;
  EXPECT_WEFT_ERROR(z.load_state_dict(bad), "ZeroOptimizer.load_state_dict: no entry for parameter '2.bias'");
  bad = good;
  bad["state.4.weight.exp_avg"] = zeros({3, 7});
  EXPECT_WEFT_ERROR(z.load_state_dict(bad),
                    "'state.4.weight.exp_avg' has shape [3, 7] but parameter '4.weight' has shape [3, 8]");
  bad = good;
  bad["state.2.weight.step"] = scalar_tensor(7.0, TensorOptions{DType::Float32});
  EXPECT_WEFT_ERROR(z.load_state_dict(bad),
                    "parameters '0.weight' and '2.weight' were saved with different step counts (2 and 7)");
  bad = good;
  bad["options.0.bias.lr"] = scalar_tensor(0.5, TensorOptions{DType::Float64});
  EXPECT_WEFT_ERROR(z.load_state_dict(bad),
                    "parameters '0.weight' and '0.bias' share a shard (float32) but were "
                    "saved with different lr (0.01 and 0.5)");
  bad = good;
  for (const char* leaf : {"step", "exp_avg", "exp_avg_sq"}) bad.erase(std::string("state.0.bias.") + leaf);
  EXPECT_WEFT_ERROR(z.load_state_dict(bad),
                    "parameter '0.bias' has state {} but '0.weight' has {exp_avg, exp_avg_sq, step}");
  bad = good;
  bad["options.0.weight.momentum"] = scalar_tensor(0.9, TensorOptions{DType::Float64});
  EXPECT_WEFT_ERROR(z.load_state_dict(bad), "unknown hyper-parameter 'options.0.weight.momentum' for AdamW");
  bad = good;
  for (auto& [name, p] : named) bad["state." + name + ".momentum_buffer"] = zeros_like(p);
  EXPECT_WEFT_ERROR(z.load_state_dict(bad), "unexpected state entry 'state.shard0.momentum_buffer' for AdamW");
  bad = good;
  bad["options.0.weight.lr"] = scalar_tensor(-1.0, TensorOptions{DType::Float64});
  for (auto& [name, p] : named) bad["options." + name + ".lr"] = bad["options.0.weight.lr"];
  EXPECT_WEFT_ERROR(z.load_state_dict(bad), "AdamW: Invalid learning rate: -1");
  EXPECT_WEFT_ERROR(z.load_state_dict(z.inner().state_dict()), "is a key of a positional state dict");
  bad = good;
  bad["weights"] = zeros({1});
  EXPECT_WEFT_ERROR(z.load_state_dict(bad), "unexpected key 'weights'");
  expect_unchanged("after failed loads");

  // Another stage's entries are returned, not loaded.
  auto more = good;
  more["state.head.weight.exp_avg"] = zeros({2});
  more["options.head.weight.lr"] = scalar_tensor(0.1, TensorOptions{DType::Float64});
  EXPECT_EQ(z.load_state_dict(more), (std::vector<std::string>{"options.head.weight.lr", "state.head.weight.exp_avg"}));
  expect_unchanged("after loading the same state");
}

}  // namespace weft::parallel::zero_cases
