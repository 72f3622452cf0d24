// DistributedDataParallel against an in-process reference, with ranks as threads
// over tests/parallel/fake_group.h (2 and 4 ranks). The reference is one plain
// module trained on the concatenation of every rank's batch.
#include "parallel/ddp.h"

#include <cmath>
#include <mutex>

#include <gtest/gtest.h>

#include "autograd/checkpoint.h"
#include "core/nn_ops.h"
#include "nn/nn.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "tests/parallel/fake_group.h"
#include "tests/testing.h"

namespace weft::parallel {
namespace {

using fake::run_ranks;
using weft::testing::tensor_near;
using weft::testing::tensors_near;

std::mutex g_build;  // module constructors draw from the global RNG

// Deterministic values (no RNG): sin of a per-(seed, element) phase.
void fill_det(Tensor t, double seed, double scale = 0.3) {
  NoGradGuard ng;
  Tensor v = empty({t.numel()}, {DType::Float64});
  double* p = v.data_ptr<double>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = scale * std::sin(0.731 * static_cast<double>(i) + 1.37 * seed + 0.5);
  t.copy_(v.to(t.dtype()).view(t.sizes()));
}

std::shared_ptr<nn::Sequential> mlp(double seed) {
  std::shared_ptr<nn::Sequential> m;
  {
    std::lock_guard<std::mutex> l(g_build);
    m = nn::Sequential::of(std::make_shared<nn::Linear>(6, 16), std::make_shared<nn::Tanh>(),
                           std::make_shared<nn::Linear>(16, 8), std::make_shared<nn::Tanh>(),
                           std::make_shared<nn::Linear>(8, 3));
  }
  int k = 0;
  for (auto& p : m->parameters()) fill_det(p, seed + 10 * k++);
  return m;
}

// The global batch of step s: x (n, 6), y (n, 3).
std::pair<Tensor, Tensor> batch(int64_t n, int step) {
  Tensor x = empty({n, 6}), y = empty({n, 3});
  fill_det(x, 100 + step, 1.0);
  fill_det(y, 200 + step, 1.0);
  return {x, y};
}

double max_rel_err(const Tensor& a, const Tensor& b) {
  Tensor d = (a.to(DType::Float64) - b.to(DType::Float64)).abs().max();
  Tensor m = b.to(DType::Float64).abs().max();
  return d.item<double>() / std::max(m.item<double>(), 1e-12);
}

void expect_same_params(nn::Module& a, nn::Module& b, double tol, const std::string& what) {
  auto pa = a.named_parameters(), pb = b.named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i)
    EXPECT_LE(max_rel_err(pa[i].second, pb[i].second), tol) << what << ": " << pa[i].first;
}

enum class Opt { SGDMomentum, AdamW };
std::unique_ptr<optim::Optimizer> make_opt(nn::Module& m, Opt o) {
  if (o == Opt::SGDMomentum) return std::make_unique<optim::SGD>(m.parameters(), optim::SGDOptions{0.1, 0.9});
  optim::AdamWOptions ao;
  ao.lr = 0.01;
  ao.weight_decay = 0.05;
  return std::make_unique<optim::AdamW>(m.parameters(), ao);
}

// Reference: one process, full batch of world*per_rank rows, k steps.
std::shared_ptr<nn::Sequential> reference(int world, int64_t per_rank, int steps, Opt o, double seed = 0) {
  auto m = mlp(seed);
  auto opt = make_opt(*m, o);
  for (int s = 0; s < steps; ++s) {
    auto [x, y] = batch(world * per_rank, s);
    opt->zero_grad();
    mse_loss((*m)(x), y).backward();
    opt->step();
  }
  return m;
}

DDPOptions small_buckets() {
  DDPOptions o;
  o.bucket_cap_mb = 300.0 / (1024 * 1024);  // ~300 bytes: several buckets
  o.first_bucket_cap_mb = 40.0 / (1024 * 1024);
  return o;
}

void train_ddp(DistributedDataParallel& ddp, optim::Optimizer* opt, int64_t per_rank, int steps) {
  const int r = ddp.group().rank(), n = ddp.group().size();
  for (int s = 0; s < steps; ++s) {
    auto [x, y] = batch(n * per_rank, s);
    Tensor xs = x.narrow(0, r * per_rank, per_rank), ys = y.narrow(0, r * per_rank, per_rank);
    if (opt) opt->zero_grad();
    mse_loss(ddp(xs), ys).backward();
    if (opt) opt->step();
  }
}

class DDPWorld : public ::testing::TestWithParam<int> {};

TEST_P(DDPWorld, TransparencySGDMomentumAndAdamW) {
  const int world = GetParam();
  for (Opt o : {Opt::SGDMomentum, Opt::AdamW}) {
    run_ranks(world, [&](std::shared_ptr<ProcessGroup> g) {
      // Ranks start from different inits; construction broadcasts rank 0's.
      auto m = mlp(g->rank() * 7.0);
      DistributedDataParallel ddp(m, g, small_buckets());
      EXPECT_GE(ddp.bucket_names().size(), 3u);
      auto opt = make_opt(*m, o);
      train_ddp(ddp, opt.get(), 3, 4);
      auto ref = reference(world, 3, 4, o);
      expect_same_params(*m, *ref, 1e-5, o == Opt::AdamW ? "adamw" : "sgd");
      EXPECT_EQ(ddp.comm_stats().backwards, 4);
      EXPECT_GE(ddp.comm_stats().overlap(), 0.0);
      EXPECT_LE(ddp.comm_stats().overlap(), 1.0);
    });
  }
}

TEST_P(DDPWorld, NoSyncAccumulationEqualsOneLargeStep) {
  const int world = GetParam();
  const int micro = 3;
  const int64_t per = 2;
  run_ranks(world, [&](std::shared_ptr<ProcessGroup> g) {
    auto m = mlp(0);
    DistributedDataParallel ddp(m, g, small_buckets());
    optim::SGD opt(m->parameters(), {0.1, 0.9});
    auto [x, y] = batch(world * micro * per, 0);  // rank r, micro-step j: rows (j*world + r)*per
    auto step = [&](int j) {
      int64_t row = (j * world + g->rank()) * per;
      Tensor loss = mse_loss(ddp(x.narrow(0, row, per)), y.narrow(0, row, per));
      loss.div_(Scalar(static_cast<double>(micro)));
      loss.backward();
    };
    opt.zero_grad();
    {
      auto guard = ddp.no_sync();
      for (int j = 0; j < micro - 1; ++j) step(j);
    }
    EXPECT_EQ(ddp.comm_stats().reductions, 0);
    step(micro - 1);
    opt.step();
    // Reference: one step on all rows.
    auto ref = mlp(0);
    optim::SGD ropt(ref->parameters(), {0.1, 0.9});
    mse_loss((*ref)(x), y).backward();
    ropt.step();
    expect_same_params(*m, *ref, 1e-5, "no_sync");
  });
}

// A module with hand-registered parameters: one big, many tiny, mixed dtypes.
class Mixed : public nn::Module {
 public:
  Mixed() : Module("Mixed") {
    big = register_parameter("big", zeros({40, 6}));  // 960 bytes > cap
    for (int i = 0; i < 12; ++i) tiny.push_back(register_parameter("tiny" + std::to_string(i), zeros({1})));
    w64 = register_parameter("w64", zeros({6, 3}, {DType::Float64}));
    int k = 0;
    for (auto& p : parameters()) fill_det(p, k++);
  }
  Tensor forward(const Tensor& x) override {  // x (n, 6) -> (n, 3) float32
    Tensor h = tanh(matmul(x, big.t()));      // (n, 40)
    Tensor s = tiny[0];
    for (size_t i = 1; i < tiny.size(); ++i) s = s + tiny[i] * static_cast<double>(i);
    Tensor z = matmul(h.narrow(1, 0, 6).to(DType::Float64), w64).to(DType::Float32);  // (n, 3)
    return z + s;
  }
  Tensor big, w64;
  std::vector<Tensor> tiny;
};

TEST_P(DDPWorld, BucketsBigTinyAndMixedDtypes) {
  const int world = GetParam();
  run_ranks(world, [&](std::shared_ptr<ProcessGroup> g) {
    auto m = std::make_shared<Mixed>();
    DDPOptions o;
    o.bucket_cap_mb = 256.0 / (1024 * 1024);
    o.first_bucket_cap_mb = 256.0 / (1024 * 1024);
    DistributedDataParallel ddp(m, g, o);
    auto names = ddp.bucket_names();
    // Reverse registration order: w64 (float64) alone in its dtype; the tiny ones
    // (48 bytes) share buckets; big exceeds the cap and is alone.
    bool big_alone = false, w64_alone = false;
    size_t tiny_buckets = 0;
    for (auto& b : names) {
      if (b == std::vector<std::string>{"big"}) big_alone = true;
      if (b == std::vector<std::string>{"w64"}) w64_alone = true;
      if (!b.empty() && b[0].rfind("tiny", 0) == 0) ++tiny_buckets;
    }
    EXPECT_TRUE(big_alone);
    EXPECT_TRUE(w64_alone);
    EXPECT_EQ(tiny_buckets, 1u);
    EXPECT_EQ(names.front(), std::vector<std::string>{"w64"});  // last registered comes first
    optim::SGD opt(m->parameters(), {0.05, 0.9});
    train_ddp(ddp, &opt, 2, 3);
    auto ref = std::make_shared<Mixed>();
    optim::SGD ropt(ref->parameters(), {0.05, 0.9});
    for (int s = 0; s < 3; ++s) {
      auto [x, y] = batch(world * 2, s);
      ropt.zero_grad();
      mse_loss((*ref)(x), y).backward();
      ropt.step();
    }
    expect_same_params(*m, *ref, 1e-5, "mixed");
  });
}

// Uses only its first layer; the second is never used.
class Unused : public nn::Module {
 public:
  Unused() : Module("Unused") {
    used = register_module("used", std::make_shared<nn::Linear>(6, 3));
    unused = register_module("unused", std::make_shared<nn::Linear>(6, 3));
    int k = 0;
    for (auto& p : parameters()) fill_det(p, k++);
  }
  Tensor forward(const Tensor& x) override { return (*used)(x); }
  std::shared_ptr<nn::Linear> used, unused;
};

TEST_P(DDPWorld, UnusedParametersErrorWithFlagOffCorrectWithFlagOn) {
  const int world = GetParam();
  run_ranks(world, [&](std::shared_ptr<ProcessGroup> g) {
    std::shared_ptr<Unused> m;
    {
      std::lock_guard<std::mutex> l(g_build);
      m = std::make_shared<Unused>();
    }
    DistributedDataParallel ddp(m, g);
    auto [x, y] = batch(world * 2, 0);
    Tensor xs = x.narrow(0, g->rank() * 2, 2), ys = y.narrow(0, g->rank() * 2, 2);
    EXPECT_WEFT_ERROR(mse_loss(ddp(xs), ys).backward(),
                      "2 parameter(s) received no gradient in this backward: unused.weight, unused.bias");
    EXPECT_WEFT_ERROR(mse_loss(ddp(xs), ys).backward(), "find_unused_parameters = true");
  });
  run_ranks(world, [&](std::shared_ptr<ProcessGroup> g) {
    std::shared_ptr<Unused> m, ref;
    {
      std::lock_guard<std::mutex> l(g_build);
      m = std::make_shared<Unused>();
      ref = std::make_shared<Unused>();
    }
    DDPOptions o;
    o.find_unused_parameters = true;
    DistributedDataParallel ddp(m, g, o);
    optim::AdamW opt(m->parameters(), optim::AdamWOptions{});
    train_ddp(ddp, &opt, 2, 3);
    EXPECT_FALSE(m->unused->parameters()[0].grad().defined());
    optim::AdamW ropt(ref->parameters(), optim::AdamWOptions{});
    for (int s = 0; s < 3; ++s) {
      auto [x, y] = batch(world * 2, s);
      ropt.zero_grad();
      mse_loss((*ref)(x), y).backward();
      ropt.step();
    }
    expect_same_params(*m, *ref, 1e-5, "find_unused");
  });
}

class WithBuffer : public nn::Module {
 public:
  explicit WithBuffer(double v) : Module("WithBuffer") {
    lin = register_module("lin", std::make_shared<nn::Linear>(6, 3));
    stat = register_buffer("stat", full({3}, v));
  }
  Tensor forward(const Tensor& x) override { return (*lin)(x) + stat; }
  std::shared_ptr<nn::Linear> lin;
  Tensor stat;
};

TEST_P(DDPWorld, BuffersAndParametersBroadcastFromRankZero) {
  const int world = GetParam();
  run_ranks(world, [&](std::shared_ptr<ProcessGroup> g) {
    std::shared_ptr<WithBuffer> m;
    {
      std::lock_guard<std::mutex> l(g_build);
      m = std::make_shared<WithBuffer>(static_cast<double>(g->rank() + 1));
    }
    fill_det(m->lin->parameters()[0], 3.0 * g->rank());
    DistributedDataParallel ddp(m, g);
    EXPECT_TRUE(tensor_near(m->stat, {1, 1, 1}, 0));
    Tensor w0 = empty({3, 6});
    fill_det(w0, 0);
    EXPECT_TRUE(tensors_near(m->lin->parameters()[0], w0, 0));
    // Before each forward, rank 0's buffers are broadcast.
    {
      NoGradGuard ng;
      m->stat.fill_(Scalar(10.0 * (g->rank() + 1)));
    }
    ddp(zeros({1, 6}));
    EXPECT_TRUE(tensor_near(m->stat, {10, 10, 10}, 0));
  });
}

TEST_P(DDPWorld, NonBlockingModeEqualsBlockingMode) {
  const int world = GetParam();
  for (Opt o : {Opt::SGDMomentum, Opt::AdamW}) {
    run_ranks(world, [&](std::shared_ptr<ProcessGroup> g) {
      auto a = mlp(0), b = mlp(0);
      DistributedDataParallel blocking(a, g, small_buckets());
      auto oa = make_opt(*a, o);
      train_ddp(blocking, oa.get(), 3, 4);
      auto ob = make_opt(*b, o);
      DDPOptions nb = small_buckets();
      nb.non_blocking = true;
      nb.update = optimizer_update(*ob);
      DistributedDataParallel nonblocking(b, g, nb);
      train_ddp(nonblocking, nullptr, 3, 4);
      EXPECT_TRUE(nonblocking.has_pending());
      nonblocking.finish();
      EXPECT_FALSE(nonblocking.has_pending());
      expect_same_params(*b, *a, 1e-7, "non_blocking");
    });
  }
}

TEST_P(DDPWorld, GradientAsBucketViewAndBf16Hook) {
  const int world = GetParam();
  run_ranks(world, [&](std::shared_ptr<ProcessGroup> g) {
    auto a = mlp(0), b = mlp(0), c = mlp(0);
    DistributedDataParallel plain(a, g, small_buckets());
    DDPOptions view = small_buckets();
    view.gradient_as_bucket_view = true;
    DistributedDataParallel viewed(b, g, view);
    DDPOptions bf = small_buckets();
    bf.comm_hook = bf16_compress_hook;
    DistributedDataParallel compressed(c, g, bf);
    optim::SGD oa(a->parameters(), {0.1, 0.9}), ob(b->parameters(), {0.1, 0.9}), oc(c->parameters(), {0.1, 0.9});
    train_ddp(plain, &oa, 2, 3);
    train_ddp(viewed, &ob, 2, 3);
    train_ddp(compressed, &oc, 2, 3);
    expect_same_params(*b, *a, 1e-7, "gradient_as_bucket_view");
    expect_same_params(*c, *a, 2e-2, "bf16");
    EXPECT_GT(max_rel_err(c->parameters()[0], a->parameters()[0]), 0.0);  // it is lossy
  });
}

// The middle layer runs under activation checkpointing; the first layer's
// weight is also used inside the segment (its hook fires twice per backward).
class Ckpt : public nn::Module {
 public:
  Ckpt() : Module("Ckpt") {
    l1 = register_module("l1", std::make_shared<nn::Linear>(6, 6));
    l2 = register_module("l2", std::make_shared<nn::Linear>(6, 3));
    int k = 0;
    for (auto& p : parameters()) fill_det(p, k++);
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = tanh((*l1)(x));  // (n, 6)
    Tensor w = l1->parameters()[0];
    Tensor h2 = autograd::checkpoint([w](const std::vector<Tensor>& in) { return tanh(matmul(in[0], w.t())); },
                                     std::vector<Tensor>{h});
    return (*l2)(h2);
  }
  std::shared_ptr<nn::Linear> l1, l2;
};

TEST_P(DDPWorld, ActivationCheckpointing) {
  const int world = GetParam();
  run_ranks(world, [&](std::shared_ptr<ProcessGroup> g) {
    std::shared_ptr<Ckpt> m, ref;
    {
      std::lock_guard<std::mutex> l(g_build);
      m = std::make_shared<Ckpt>();
      ref = std::make_shared<Ckpt>();
    }
    DDPOptions o;
    o.bucket_cap_mb = o.first_bucket_cap_mb = 100.0 / (1024 * 1024);
    DistributedDataParallel ddp(m, g, o);
    optim::SGD opt(m->parameters(), {0.1, 0.9});
    train_ddp(ddp, &opt, 2, 3);
    optim::SGD ropt(ref->parameters(), {0.1, 0.9});
    for (int s = 0; s < 3; ++s) {
      auto [x, y] = batch(world * 2, s);
      ropt.zero_grad();
      mse_loss((*ref)(x), y).backward();
      ropt.step();
    }
    expect_same_params(*m, *ref, 1e-5, "checkpoint");
  });
}

TEST_P(DDPWorld, MismatchedParametersAreAnError) {
  const int world = GetParam();
  run_ranks(world, [&](std::shared_ptr<ProcessGroup> g) {
    std::shared_ptr<nn::Module> m;
    {
      std::lock_guard<std::mutex> l(g_build);
      int out = g->rank() == 1 ? 5 : 4;
      m = nn::Sequential::of(std::make_shared<nn::Linear>(3, out));
    }
    EXPECT_WEFT_ERROR(DistributedDataParallel(m, g),
                      "first mismatch at entry #0: rank 0 has parameter '0.weight' [4, 3] float32, rank 1 has "
                      "parameter '0.weight' [5, 3] float32");
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, DDPWorld, ::testing::Values(2, 4));

TEST(DDP, BadOptionsAreErrors) {
  run_ranks(1, [&](std::shared_ptr<ProcessGroup> g) {
    auto m = mlp(0);
    DDPOptions o;
    o.non_blocking = true;
    EXPECT_WEFT_ERROR(DistributedDataParallel(m, g, o), "non_blocking mode needs DDPOptions::update");
    DDPOptions c;
    c.bucket_cap_mb = 0;
    EXPECT_WEFT_ERROR(DistributedDataParallel(m, g, c), "bucket caps must be positive");
    EXPECT_WEFT_ERROR(DistributedDataParallel(nullptr, g), "module is null");
  });
}

}  // namespace
}  // namespace weft::parallel
