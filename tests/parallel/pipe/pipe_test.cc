// Pipe, the AsyncPipe-shaped front end, with ranks as threads: training with
// an optimizer over each rank's local parameters equals training the whole
// model in one process; lazy layer factories build only local layers under
// the whole model's names; fairscale's argument checks; local layer access.
#include "parallel/pipe/pipe.h"

#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/autocast.h"
#include "core/autograd_meta.h"
#include "core/nn_ops.h"
#include "core/ops.h"
#include "core/rng.h"
#include "nn/nn.h"
#include "optim/sgd.h"
#include "parallel/comm/inproc/testing.h"
#include "tests/testing.h"

namespace weft::parallel::pipe {
namespace {

constexpr int64_t kIn = 6, kHidden = 10, kOut = 3;

// Layer i of an 8-layer MLP (Linear, Tanh, ...); Linear i seeded by i, so a
// layer is the same whoever builds it.
std::shared_ptr<nn::Module> make_layer(int i) {
  if (i % 2 == 1) return std::make_shared<nn::Tanh>();
  manual_seed(1000 + i);
  return std::make_shared<nn::Linear>(i == 0 ? kIn : kHidden, i == 6 ? kOut : kHidden);
}

std::shared_ptr<nn::Sequential> make_mlp() {
  auto m = std::make_shared<nn::Sequential>();
  for (int i = 0; i < 8; ++i) m->push_back(make_layer(i));
  return m;
}

Tensor mse(const Tensor& out, const Tensor& target) { return mse_loss(out, target); }

std::map<std::string, Tensor> values(const std::vector<std::pair<std::string, Tensor>>& named) {
  std::map<std::string, Tensor> out;
  for (auto& [n, t] : named) out[n] = t.detach().clone();
  return out;
}

// Three SGD steps (momentum) of the whole model on the whole batches; with
// `autocast`, forward and loss under AutocastGuard(CPU, *autocast).
std::map<std::string, Tensor> train_whole(const std::vector<Tensor>& xs, const std::vector<Tensor>& ys,
                                          std::optional<DType> autocast = std::nullopt) {
  auto m = make_mlp();
  optim::SGD opt(m->parameters(), {0.1, 0.9});
  for (size_t k = 0; k < xs.size(); ++k) {
    opt.zero_grad();
    Tensor loss;
    {
      std::optional<AutocastGuard> guard;
      if (autocast) guard.emplace(DeviceType::CPU, *autocast);
      loss = mse(m->forward(xs[k]), ys[k]);
    }
    loss.backward();
    opt.step();
  }
  return values(m->named_parameters());
}

// Three batches of 9 rows (the same on every call).
void batches(std::vector<Tensor>& xs, std::vector<Tensor>& ys) {
  manual_seed(5);
  for (int k = 0; k < 3; ++k) {
    xs.push_back(randn({9, kIn}));
    ys.push_back(randn({9, kOut}));
  }
}

// The same three SGD steps through a Pipe over `ranks` ranks (threads).
std::map<std::string, Tensor> train_piped(const std::vector<Tensor>& xs, const std::vector<Tensor>& ys,
                                          const PipeOptions& options, const std::vector<int>& balance, int ranks) {
  auto model = make_mlp();
  std::mutex m;
  std::map<std::string, Tensor> got;
  run_ranks(ranks, [&](std::shared_ptr<ProcessGroup> g) {
    Pipe pipe(model, balance, g, options);
    optim::SGD opt(pipe.parameters(), {0.1, 0.9});
    for (size_t k = 0; k < xs.size(); ++k) {
      opt.zero_grad();
      pipe.step(xs[k], ys[k], mse);
      opt.step();
    }
    std::lock_guard<std::mutex> l(m);
    for (auto& [n, t] : values(pipe.named_parameters())) EXPECT_TRUE(got.emplace(n, t).second) << n << " twice";
  });
  return got;
}

// The largest element difference between two sets of parameters (same names).
double max_difference(const std::map<std::string, Tensor>& a, const std::map<std::string, Tensor>& b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0;
  for (auto& [n, t] : a) {
    EXPECT_TRUE(b.count(n)) << n;
    if (b.count(n)) d = std::max(d, max(abs(sub(t, b.at(n)))).item<double>());
  }
  return d;
}

void expect_trains_like_one_process(PipeOptions options, std::vector<int> balance, int ranks) {
  SCOPED_TRACE(schedule_name(options.schedule) + " chunks=" + std::to_string(options.chunks));
  std::vector<Tensor> xs, ys;
  batches(xs, ys);
  EXPECT_LE(max_difference(train_piped(xs, ys, options, balance, ranks), train_whole(xs, ys)), 1e-5);
}

TEST(Pipe, TrainingEqualsOneProcess) {
  expect_trains_like_one_process({4, CheckpointMode::kExceptLast, ScheduleKind::kGPipe, 1}, {3, 5}, 2);
  expect_trains_like_one_process({3, CheckpointMode::kAlways, ScheduleKind::k1F1B, 1}, {2, 2, 4}, 3);
  expect_trains_like_one_process({4, CheckpointMode::kNever, ScheduleKind::kInterleaved1F1B, 2}, {2, 2, 2, 2}, 2);
  expect_trains_like_one_process({4, CheckpointMode::kNever, ScheduleKind::kZeroBubbleH1, 1}, {4, 4}, 2);
  // zbv's V placement: rank 0 builds stages 0 and 3 (layers 0-1 and 6-7), rank 1 stages 1 and 2.
  expect_trains_like_one_process({4, CheckpointMode::kExceptLast, ScheduleKind::kZeroBubbleV, 2}, {2, 2, 2, 2}, 2);
  expect_trains_like_one_process({8, CheckpointMode::kNever, ScheduleKind::kZeroBubbleV, 2}, {1, 1, 1, 1, 1, 1, 1, 1},
                                 4);
  expect_trains_like_one_process({4, CheckpointMode::kExceptLast, ScheduleKind::kInterleavedZeroBubble, 2},
                                 {2, 2, 2, 2}, 2);
  expect_trains_like_one_process({4, CheckpointMode::kAlways, ScheduleKind::kInterleavedZeroBubble, 3},
                                 {2, 1, 1, 2, 1, 1}, 2);
}

// pipe.autocast: every stage's forward (a checkpointed micro-batch's
// recomputation too) and the loss under bfloat16 autocast, as the whole model
// under autocast in one process. Micro-batches sum their bfloat16 weight
// gradients in float32 where the whole batch's GEMM rounds once, so the two
// agree to bfloat16 rounding of the updates, not to float32's. The checks:
// the pipelined weights are nearer the whole model under autocast than the
// float32 run is, and far (10x the float32 pipeline's tolerance) from the
// float32 run, where a pipeline that ignored the option would land.
TEST(Pipe, AutocastTrainsLikeTheWholeModelUnderAutocast) {
  std::vector<Tensor> xs, ys;
  batches(xs, ys);
  const auto bf16 = train_whole(xs, ys, DType::BFloat16), fp32 = train_whole(xs, ys);
  const double precision = max_difference(bf16, fp32);
  for (CheckpointMode ck : {CheckpointMode::kNever, CheckpointMode::kAlways}) {
    SCOPED_TRACE("checkpoint mode " + std::to_string(static_cast<int>(ck)));
    PipeOptions o{4, ck, ScheduleKind::k1F1B, 1};
    o.autocast = DType::BFloat16;
    const auto piped = train_piped(xs, ys, o, {3, 5}, 2);
    const double to_bf16 = max_difference(piped, bf16), to_fp32 = max_difference(piped, fp32);
    EXPECT_LT(to_bf16, precision) << "the whole model under autocast is " << precision << " from float32";
    EXPECT_GT(to_fp32, 1e-4);
  }
}

// Records how many casts autocast's cache holds when each micro-batch reaches it.
class CacheProbe : public nn::Module {
 public:
  explicit CacheProbe(std::vector<size_t>* seen) : Module("CacheProbe"), seen_(seen) {}
  Tensor forward(const Tensor& x) override {
    if (GradMode::is_enabled()) seen_->push_back(autocast::cached_casts());
    return x;
  }

 private:
  std::vector<size_t>* seen_;
};

// The runner casts each weight once per step: from the second micro-batch on,
// the step's cache already holds both Linear layers' weight and bias; after the
// step it is empty.
TEST(Pipe, AutocastCastsEachWeightOncePerStep) {
  std::vector<size_t> seen;
  auto model = std::make_shared<nn::Sequential>();
  model->push_back(std::make_shared<CacheProbe>(&seen));
  for (int i = 0; i < 3; ++i) model->push_back(make_layer(i));
  PipeOptions o{3, CheckpointMode::kNever, ScheduleKind::k1F1B, 1};
  o.autocast = DType::BFloat16;
  std::vector<Tensor> xs, ys;
  batches(xs, ys);
  run_ranks(1, [&](std::shared_ptr<ProcessGroup> g) {
    Pipe pipe(model, {4}, g, o);
    pipe.step(xs[0], randn({9, kHidden}), mse);
    EXPECT_EQ(autocast::cached_casts(), 0u);
  });
  EXPECT_EQ(seen, (std::vector<size_t>{0, 4, 4}));
}

TEST(Pipe, ZeroBubbleVPlacesStagesInAV) {
  auto model = make_mlp();
  PipeOptions o;
  o.chunks = 2;
  o.virtual_stages = 2;
  o.schedule = ScheduleKind::kZeroBubbleV;
  std::vector<std::vector<int>> stages(2);
  std::vector<size_t> layers(2);
  run_ranks(2, [&](std::shared_ptr<ProcessGroup> g) {
    Pipe pipe(model, {1, 3, 3, 1}, g, o);
    stages[g->rank()] = pipe.stage_ids();
    layers[g->rank()] = pipe.size();
  });
  EXPECT_EQ(stages, (std::vector<std::vector<int>>{{0, 3}, {1, 2}}));
  EXPECT_EQ(layers, (std::vector<size_t>{2, 6}));
  o.virtual_stages = 1;
  run_ranks(2, [&](std::shared_ptr<ProcessGroup> g) {
    EXPECT_WEFT_ERROR(Pipe(model, {4, 4}, g, o), "zbv places two stages per rank in a V (virtual=1)");
  });
}

TEST(Pipe, LazyFactoriesBuildOnlyLocalLayersUnderTheWholeModelsNames) {
  std::vector<std::atomic<int>> built(8);
  std::mutex rng;  // the factories seed the process-wide generator
  std::vector<LayerFactory> layers;
  for (int i = 0; i < 8; ++i)
    layers.push_back([&, i] {
      std::lock_guard<std::mutex> l(rng);
      ++built[i];
      return make_layer(i);
    });
  auto whole = make_mlp();
  const auto want = values(whole->named_parameters());
  run_ranks(2, [&](std::shared_ptr<ProcessGroup> g) {
    Pipe pipe(layers, {3, 5}, g, {2});
    EXPECT_EQ(pipe.size(), g->rank() == 0 ? 3u : 5u);
    for (auto& [n, t] : pipe.named_parameters()) {
      ASSERT_TRUE(want.count(n)) << n;
      EXPECT_TRUE(testing::tensors_near(t, want.at(n), 0)) << n;
    }
    // Stage 0 holds "0.*" and "2.*"; stage 1 "4.*" and "6.*".
    const std::string first = pipe.named_parameters().front().first;
    EXPECT_EQ(first, g->rank() == 0 ? "0.weight" : "4.weight");
  });
  for (int i = 0; i < 8; ++i) EXPECT_EQ(built[i].load(), 1) << "layer " << i;
}

TEST(Pipe, LocalLayersAreIndexable) {
  auto model = make_mlp();
  run_ranks(2, [&](std::shared_ptr<ProcessGroup> g) {
    Pipe pipe(model, {5, 3}, g);
    const size_t n = g->rank() == 0 ? 5 : 3;
    ASSERT_EQ(pipe.size(), n);
    EXPECT_EQ(pipe[0], (*model)[g->rank() == 0 ? 0 : 5]);
    size_t count = 0;
    for (auto& layer : pipe) {
      EXPECT_EQ(layer, pipe[count]);
      ++count;
    }
    EXPECT_EQ(count, n);
    EXPECT_WEFT_ERROR(pipe[n], "Pipe: layer " + std::to_string(n) + " is out of range: this rank holds " +
                                   std::to_string(n) + " layer(s)");
    EXPECT_EQ(pipe.stage_ids(), std::vector<int>{g->rank()});
    EXPECT_EQ(pipe.schedule().name, "gpipe");
  });
}

TEST(Pipe, DeferredBatchNormTracksTheWholeBatchsStatistics) {
  // Linear, BatchNorm1d, Tanh | Linear, BatchNorm1d, two steps of 4
  // micro-batches. The first BatchNorm's input does not depend on any
  // normalisation: its running statistics equal plain BatchNorm's on the
  // whole batches. Every BatchNorm equals the same model run in one process
  // on the same micro-batches with deferred BatchNorm (the second one's input
  // depends on how the first normalised).
  auto build = [] {
    manual_seed(8);
    return nn::Sequential::of(std::make_shared<nn::Linear>(kIn, kHidden), std::make_shared<nn::BatchNorm1d>(kHidden),
                              std::make_shared<nn::Tanh>(), std::make_shared<nn::Linear>(kHidden, kOut),
                              std::make_shared<nn::BatchNorm1d>(kOut));
  };
  auto whole = build(), micro = build(), piped = build();
  std::vector<Tensor> xs = {randn({8, kIn}), randn({12, kIn})}, ys = {randn({8, kOut}), randn({12, kOut})};
  for (int i : {1, 4}) dynamic_cast<nn::BatchNorm*>((*micro)[i].get())->set_deferred(4);
  for (auto& x : xs) {
    whole->forward(x);
    for (int k = 0; k < 4; ++k) micro->forward(x.narrow(0, k * (x.size(0) / 4), x.size(0) / 4));
  }
  PipeOptions o;
  o.chunks = 4;
  o.deferred_batch_norm = true;
  run_ranks(2, [&](std::shared_ptr<ProcessGroup> g) {
    Pipe pipe(piped, {3, 2}, g, o);
    for (size_t k = 0; k < xs.size(); ++k) pipe.step(xs[k], ys[k], mse);
  });
  auto bn = [](const nn::Sequential& m, int i) { return dynamic_cast<nn::BatchNorm*>(m[i].get()); };
  EXPECT_TRUE(testing::tensors_near(bn(*piped, 1)->running_mean, bn(*whole, 1)->running_mean, 1e-6));
  EXPECT_TRUE(testing::tensors_near(bn(*piped, 1)->running_var, bn(*whole, 1)->running_var, 1e-6));
  for (int i : {1, 4}) {
    EXPECT_TRUE(testing::tensors_near(bn(*piped, i)->running_mean, bn(*micro, i)->running_mean, 1e-6)) << i;
    EXPECT_TRUE(testing::tensors_near(bn(*piped, i)->running_var, bn(*micro, i)->running_var, 1e-6)) << i;
    EXPECT_EQ(bn(*piped, i)->num_batches_tracked.item<int64_t>(), 2);
  }
}

TEST(Pipe, FairscalesArgumentChecks) {
  auto model = make_mlp();
  run_ranks(2, [&](std::shared_ptr<ProcessGroup> g) {
    EXPECT_WEFT_ERROR(Pipe(model, {3, 4}, g),
                      "Pipe: the module and the sum of balance have different lengths (module: 8, sum of balance: 7)");
    EXPECT_WEFT_ERROR(Pipe(model, {8, 0}, g), "Pipe: all balance numbers must be positive integers (balance: [8, 0])");
    EXPECT_WEFT_ERROR(Pipe(model, {4, 4}, g, {0}), "Pipe: the number of chunks must be a positive integer, got 0");
    EXPECT_WEFT_ERROR(Pipe(model, {2, 2, 4}, g),
                      "Pipe: balance [2, 2, 4] has 3 stages but the group has 2 rank(s) with 1 stage(s) each (2 "
                      "stages)");
    EXPECT_WEFT_ERROR(Pipe(std::shared_ptr<nn::Sequential>(), {4, 4}, g), "Pipe: module is null");
    EXPECT_WEFT_ERROR(Pipe(model, {4, 4}, nullptr), "Pipe: process group is null");
  });
}

}  // namespace
}  // namespace weft::parallel::pipe
