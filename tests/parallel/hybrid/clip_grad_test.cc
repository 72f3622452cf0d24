// GlobalNormClipper (parallel/hybrid/clip_grad.h), ranks as threads: on grids
// 1x1, 1x2, 2x1, 2x2 and 4x1, an MLP and a small language model with a tied
// embedding/head (a copy per stage, declared in pipe.tied; pp 1 holds both
// copies) trained one SGD step on a replica's share of a global batch, with
// the gradient clipped by the global norm, give the one-process reference's
// norm (optim::clip_grad_norm_ on the whole model, tie included once) and
// parameters within 1e-5, both without ZeRO (clip() after step()) and with
// ZeRO (clip_shards() in the shard optimizer, ClipBeforeStep); with a large
// max_norm nothing is scaled. Errors: clip() under ZeRO, clip_shards()
// without, a non-positive max_norm.
#include "parallel/hybrid/clip_grad.h"

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/nn_ops.h"
#include "core/ops.h"
#include "core/rng.h"
#include "nn/nn.h"
#include "optim/clip_grad.h"
#include "optim/sgd.h"
#include "parallel/comm/inproc/testing.h"
#include "parallel/hybrid/distributed_model.h"
#include "parallel/hybrid/distributed_optimizer.h"
#include "tests/testing.h"

namespace weft::parallel::hybrid {
namespace {

constexpr int64_t kVocab = 7, kDim = 5, kSeq = 3, kRows = 4;  // kRows: per replica

// logits = x W^T with W given (the embedding's own tensor, or a copy).
class Head : public nn::Module {
 public:
  explicit Head(Tensor w) : Module("Head") { weight = register_parameter("weight", std::move(w)); }
  Tensor forward(const Tensor& x) override { return linear(x, weight, Tensor()); }  // (B, T, D) -> (B, T, V)
  Tensor weight;                                                                    // (V, D)
};

enum class Model { kMlp, kTiedLm };

// MLP: (Linear, Tanh) x 4. Tied LM: Embedding, (Linear, Tanh) x 3, Head (8
// children); `shared`: the head holds the embedding's tensor, else a copy.
std::shared_ptr<nn::Sequential> make_model(Model kind, bool shared = false) {
  manual_seed(11);
  auto m = std::make_shared<nn::Sequential>();
  if (kind == Model::kMlp) {
    for (int i = 0; i < 4; ++i) {
      m->push_back(std::make_shared<nn::Linear>(i == 0 ? 6 : 10, i == 3 ? 3 : 10));
      m->push_back(std::make_shared<nn::Tanh>());
    }
    return m;
  }
  auto emb = std::make_shared<nn::Embedding>(kVocab, kDim);
  m->push_back(emb);
  for (int i = 0; i < 3; ++i) {
    m->push_back(std::make_shared<nn::Linear>(kDim, kDim));
    m->push_back(std::make_shared<nn::Tanh>());
  }
  m->push_back(std::make_shared<Head>(shared ? emb->weight : emb->weight.detach().clone().requires_grad_(true)));
  return m;
}

const std::vector<std::vector<std::string>> kTied = {{"0.weight", "7.weight"}};

Tensor loss_of(Model kind, const Tensor& out, const Tensor& y) {
  if (kind == Model::kMlp) return mse_loss(out, y);
  return cross_entropy(out.reshape({-1, kVocab}), y.reshape({-1}));
}

struct Batch {
  Tensor x, y;  // global
};

Batch global_batch(Model kind, int dp) {
  manual_seed(5);
  const int64_t rows = kRows * dp;
  if (kind == Model::kMlp) return {randn({rows, 6}), randn({rows, 3})};
  return {randint(0, kVocab, {rows, kSeq}, DType::Int64), randint(0, kVocab, {rows, kSeq}, DType::Int64)};
}

struct Reference {
  double norm = 0;
  std::map<std::string, Tensor> params;  // after the step
};

constexpr double kLr = 0.5;

Reference reference(Model kind, const Batch& b, double max_norm) {
  auto model = make_model(kind, /*shared=*/true);
  optim::SGD opt(model->named_parameters(), optim::SGDOptions{kLr});
  loss_of(kind, model->forward(b.x), b.y).backward();
  Reference ref;
  ref.norm = optim::clip_grad_norm_(model->parameters(), max_norm);
  opt.step();
  for (auto& [n, p] : model->named_parameters()) ref.params[n] = p.detach();
  if (kind == Model::kTiedLm) ref.params["7.weight"] = ref.params.at("0.weight");  // the tie's other name
  return ref;
}

struct Grid {
  int pp, dp;
};

void check(Model kind, Grid grid, bool zero, double max_norm) {
  SCOPED_TRACE("pp " + std::to_string(grid.pp) + " x dp " + std::to_string(grid.dp) + (zero ? " zero" : "") +
               (kind == Model::kMlp ? " mlp" : " tied lm") + " max_norm " + std::to_string(max_norm));
  const Batch b = global_batch(kind, grid.dp);
  const Reference ref = reference(kind, b, max_norm);
  const int world = grid.pp * grid.dp;
  std::vector<std::shared_ptr<nn::Sequential>> models;  // built here: the global RNG is not for threads
  for (int r = 0; r < world; ++r) models.push_back(make_model(kind));
  std::vector<double> norms(world);
  std::vector<std::map<std::string, Tensor>> params(world);
  run_ranks(world, [&](std::shared_ptr<ProcessGroup> g) {
    const int r = g->rank();
    DistributedModelOptions o;
    o.pp = grid.pp;
    o.pipe.chunks = 2;
    o.auto_partition = false;
    o.print_table = false;
    o.shard_optimizer_state = zero;
    if (kind == Model::kTiedLm) o.pipe.tied = kTied;
    DistributedModel dm(models[r], g, o);
    GlobalNormClipper clipper(dm, max_norm);
    DistributedOptimizer opt(dm, [&](const optim::NamedParameters& p) -> std::unique_ptr<optim::Optimizer> {
      if (!zero) return std::make_unique<optim::SGD>(p, optim::SGDOptions{kLr});
      return std::make_unique<ClipBeforeStep<optim::SGD>>([&](optim::Optimizer& s) { clipper.clip_shards(s); }, p,
                                                          optim::SGDOptions{kLr});
    });
    const int d = r / grid.pp;
    opt.zero_grad();
    dm.step(b.x.narrow(0, d * kRows, kRows), b.y.narrow(0, d * kRows, kRows),
            [&](const Tensor& out, const Tensor& y) { return loss_of(kind, out, y); });
    if (!zero) clipper.clip();
    opt.step();
    norms[r] = clipper.last_norm();
    for (auto& [n, p] : dm.local_named_parameters()) params[r][n] = p.detach();
  });
  for (int r = 0; r < world; ++r) {
    EXPECT_NEAR(norms[r], ref.norm, 1e-5 * (1 + ref.norm)) << "rank " << r;
    EXPECT_FALSE(params[r].empty()) << "rank " << r;
    for (auto& [n, t] : params[r]) {
      ASSERT_TRUE(ref.params.count(n)) << n;
      EXPECT_TRUE(testing::tensors_near(t, ref.params.at(n), 1e-5)) << n << " on rank " << r;
    }
  }
}

const std::vector<Grid> kGrids = {{1, 1}, {1, 2}, {2, 1}, {2, 2}, {4, 1}};

TEST(GlobalNormClipper, MlpEqualsOneProcess) {
  for (Grid g : kGrids) check(Model::kMlp, g, false, 0.05);
}

TEST(GlobalNormClipper, TiedLmCountsTheTieOnce) {
  for (Grid g : {Grid{1, 1}, Grid{1, 2}, Grid{2, 1}, Grid{2, 2}}) check(Model::kTiedLm, g, false, 0.05);
}

TEST(GlobalNormClipper, ZeroClipsTheShards) {
  for (Grid g : {Grid{1, 2}, Grid{2, 2}, Grid{1, 3}}) {
    check(Model::kMlp, g, true, 0.05);
    check(Model::kTiedLm, g, true, 0.05);
  }
}

TEST(GlobalNormClipper, LargeMaxNormLeavesGradients) {
  check(Model::kMlp, {2, 2}, false, 1e6);
  check(Model::kTiedLm, {2, 2}, true, 1e6);
}

TEST(GlobalNormClipper, Errors) {
  run_ranks(1, [&](std::shared_ptr<ProcessGroup> g) {
    DistributedModelOptions o;
    o.shard_optimizer_state = true;
    DistributedModel dm(make_model(Model::kMlp), g, o);
    dm.partition();
    GlobalNormClipper c(dm, 1.0);
    EXPECT_WEFT_ERROR(c.clip(), "shards its optimizer state (ZeRO)");
    EXPECT_WEFT_ERROR(GlobalNormClipper(dm, 0.0), "max_norm must be positive and finite, got 0");
  });
  run_ranks(1, [&](std::shared_ptr<ProcessGroup> g) {
    DistributedModel dm(make_model(Model::kMlp), g, {});
    dm.partition();
    GlobalNormClipper c(dm, 1.0);
    optim::SGD sgd(dm.local_parameters(), optim::SGDOptions{0.1});
    EXPECT_WEFT_ERROR(c.clip_shards(sgd), "does not shard its optimizer state");
  });
}

}  // namespace
}  // namespace weft::parallel::hybrid
