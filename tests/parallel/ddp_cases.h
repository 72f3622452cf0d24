// The DistributedDataParallel test cases, written once against a ProcessGroup
// and run by two drivers: tests/parallel/ddp_test.cc (ranks as threads over the
// in-process group of parallel/inproc, 2 and 4 ranks) and tests/parallel/ddp_mpi_test.cc
// (ranks as processes over ProcessGroupMPI under mpirun -np 2 and 4). Each case
// is a function of the calling rank's group; every rank calls it.
//
// Reference: each rank also computes, locally, one plain module trained on the
// concatenation of every rank's batch (what one process with batch N*B does)
// and checks its DDP parameters against it (relative error <= 1e-5).
//
// WEFT_DDP_CASES(X) lists every case as X(TestName, function) so both drivers
// instantiate the same list and neither can lose a case.
#pragma once

#include <cmath>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "autograd/checkpoint.h"
#include "core/autograd_meta.h"
#include "core/nn_ops.h"
#include "core/rng.h"
#include "nn/nn.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "parallel/data/ddp.h"
#include "parallel/data/ddp_optim.h"
#include "tests/parallel/det_values.h"
#include "tests/testing.h"

#define WEFT_DDP_CASES(X)                                                         \
  X(TransparencySGDMomentumAndAdamW, transparency_sgd_momentum_and_adamw)         \
  X(NoSyncAccumulationEqualsOneLargeStep, no_sync_accumulation_equals_one_step)   \
  X(BucketsBigTinyAndMixedDtypes, buckets_big_tiny_and_mixed_dtypes)              \
  X(UnusedParametersErrorWithFlagOffCorrectWithFlagOn, unused_parameters)         \
  X(BuffersBroadcastAndRandomInitsEndEqual, buffers_broadcast_random_inits_equal) \
  X(NonBlockingModeEqualsBlockingMode, non_blocking_equals_blocking)              \
  X(GradientAsBucketViewAndBf16Hook, gradient_as_bucket_view_and_bf16_hook)       \
  X(ActivationCheckpointing, activation_checkpointing)                            \
  X(MismatchedParametersAreAnError, mismatched_parameters_are_an_error)           \
  X(BadOptionsAreErrors, bad_options_are_errors)

namespace weft::parallel::ddp_cases {

using GroupPtr = std::shared_ptr<ProcessGroup>;
using weft::testing::tensor_near;
using weft::testing::tensors_near;

// Module constructors (and manual_seed) use the global RNG; in-process ranks
// are threads, so construction is serialised (uncontended under MPI).
inline std::mutex& build_mutex() {
  static std::mutex m;
  return m;
}
template <class M, class... Args>
std::shared_ptr<M> build(Args&&... args) {
  std::lock_guard<std::mutex> l(build_mutex());
  return std::make_shared<M>(std::forward<Args>(args)...);
}

// Deterministic values (no RNG), scaled by 0.3 unless said (det_values.h).
inline void fill_det(Tensor t, double seed, double scale = 0.3) { testing::fill_det(t, seed, scale); }

// 6 -> 16 -> 8 -> 3 with tanh; parameters from fill_det(seed + 10 k).
inline std::shared_ptr<nn::Sequential> mlp(double seed) {
  std::shared_ptr<nn::Sequential> m;
  {
    std::lock_guard<std::mutex> l(build_mutex());
    m = nn::Sequential::of(std::make_shared<nn::Linear>(6, 16), std::make_shared<nn::Tanh>(),
                           std::make_shared<nn::Linear>(16, 8), std::make_shared<nn::Tanh>(),
                           std::make_shared<nn::Linear>(8, 3));
  }
  int k = 0;
  for (auto& p : m->parameters()) fill_det(p, seed + 10 * k++);
  return m;
}

// The global batch of step s: x (n, 6), y (n, 3).
inline std::pair<Tensor, Tensor> batch(int64_t n, int step) {
  Tensor x = empty({n, 6}), y = empty({n, 3});
  fill_det(x, 100 + step, 1.0);
  fill_det(y, 200 + step, 1.0);
  return {x, y};
}

inline double max_rel_err(const Tensor& a, const Tensor& b) {
  Tensor d = (a.to(DType::Float64) - b.to(DType::Float64)).abs().max();
  Tensor m = b.to(DType::Float64).abs().max();
  return d.item<double>() / std::max(m.item<double>(), 1e-12);
}

inline void expect_same_params(nn::Module& a, nn::Module& b, double tol, const std::string& what) {
  auto pa = a.named_parameters(), pb = b.named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i)
    EXPECT_LE(max_rel_err(pa[i].second, pb[i].second), tol) << what << ": " << pa[i].first;
}

// Every rank's copy of every parameter is bitwise equal to rank 0's.
inline void expect_equal_across_ranks(nn::Module& m, ProcessGroup& g) {
  for (auto& [name, p] : m.named_parameters()) {
    Tensor mine = p.detach().contiguous();
    std::vector<Tensor> all;
    for (int r = 0; r < g.size(); ++r) all.push_back(empty_like(mine));
    g.allgather(all, mine)->wait();
    for (int r = 1; r < g.size(); ++r) EXPECT_TRUE(tensors_near(all[r], all[0], 0)) << name << " rank " << r;
  }
}

enum class Opt { SGDMomentum, AdamW };
inline std::unique_ptr<optim::Optimizer> make_opt(nn::Module& m, Opt o) {
  if (o == Opt::SGDMomentum) return std::make_unique<optim::SGD>(m.parameters(), optim::SGDOptions{0.1, 0.9});
  optim::AdamWOptions ao;
  ao.lr = 0.01;
  ao.weight_decay = 0.05;
  return std::make_unique<optim::AdamW>(m.parameters(), ao);
}

// Reference: one process, full batch of world*per_rank rows, `steps` steps.
template <class M>
void train_reference(M& m, optim::Optimizer& opt, int world, int64_t per_rank, int steps) {
  for (int s = 0; s < steps; ++s) {
    auto [x, y] = batch(world * per_rank, s);
    opt.zero_grad();
    mse_loss(m(x), y).backward();
    opt.step();
  }
}

inline DDPOptions small_buckets() {
  DDPOptions o;
  o.bucket_cap_mb = 300.0 / (1024 * 1024);  // ~300 bytes: several buckets
  o.first_bucket_cap_mb = 40.0 / (1024 * 1024);
  return o;
}

// Rank r trains on rows [r*per_rank, (r+1)*per_rank) of each global batch.
inline void train_ddp(DistributedDataParallel& ddp, optim::Optimizer* opt, int64_t per_rank, int steps) {
  const int r = ddp.group().rank(), n = ddp.group().size();
  for (int s = 0; s < steps; ++s) {
    auto [x, y] = batch(n * per_rank, s);
    Tensor xs = x.narrow(0, r * per_rank, per_rank), ys = y.narrow(0, r * per_rank, per_rank);
    if (opt) opt->zero_grad();
    mse_loss(ddp(xs), ys).backward();
    if (opt) opt->step();
  }
}

// ---- modules ----

// Hand-registered parameters: one big, many tiny, mixed dtypes.
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

// A linear layer plus a buffer added to its output.
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

// ---- the cases ----

// N ranks with batch B == one process with batch N*B after 4 steps of SGD with
// momentum and of AdamW; ranks start from different inits (construction
// broadcasts rank 0's).
inline void transparency_sgd_momentum_and_adamw(const GroupPtr& g) {
  for (Opt o : {Opt::SGDMomentum, Opt::AdamW}) {
    const char* what = o == Opt::AdamW ? "adamw" : "sgd";
    auto m = mlp(g->rank() * 7.0);
    DistributedDataParallel ddp(m, g, small_buckets());
    EXPECT_GE(ddp.bucket_names().size(), 3u);
    auto opt = make_opt(*m, o);
    train_ddp(ddp, opt.get(), 3, 4);
    auto ref = mlp(0);
    auto ropt = make_opt(*ref, o);
    train_reference(*ref, *ropt, g->size(), 3, 4);
    expect_same_params(*m, *ref, 1e-5, what);
    expect_equal_across_ranks(*m, *g);
    EXPECT_EQ(ddp.comm_stats().backwards, 4);
    EXPECT_EQ(ddp.comm_stats().reductions, 4 * static_cast<int64_t>(ddp.bucket_names().size()));
    EXPECT_GE(ddp.comm_stats().overlap(), 0.0) << what;
    EXPECT_LE(ddp.comm_stats().overlap(), 1.0) << what;
  }
}

// Micro-steps under no_sync() then one synced backward == one step on all rows.
inline void no_sync_accumulation_equals_one_step(const GroupPtr& g) {
  const int world = g->size(), micro = 3;
  const int64_t per = 2;
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
  EXPECT_EQ(ddp.comm_stats().reductions, static_cast<int64_t>(ddp.bucket_names().size()));
  opt.step();
  auto ref = mlp(0);
  optim::SGD ropt(ref->parameters(), {0.1, 0.9});
  mse_loss((*ref)(x), y).backward();
  ropt.step();
  expect_same_params(*m, *ref, 1e-5, "no_sync");
  expect_equal_across_ranks(*m, *g);
}

// A parameter larger than the cap (alone in its bucket), many tiny ones (one
// shared bucket), a float64 parameter (its own dtype's bucket); trained, they
// match the reference and keep their dtypes.
inline void buckets_big_tiny_and_mixed_dtypes(const GroupPtr& g) {
  auto m = build<Mixed>();
  DDPOptions o;
  o.bucket_cap_mb = 256.0 / (1024 * 1024);
  o.first_bucket_cap_mb = 256.0 / (1024 * 1024);
  DistributedDataParallel ddp(m, g, o);
  auto names = ddp.bucket_names();
  // Reverse registration order: w64 (float64) alone in its dtype; the tiny ones
  // (48 bytes) share one bucket; big exceeds the cap and is alone.
  ASSERT_EQ(names.size(), 3u);
  EXPECT_EQ(names[0], std::vector<std::string>{"w64"});
  EXPECT_EQ(names[1].size(), 12u);
  EXPECT_EQ(names[1].front(), "tiny11");
  EXPECT_EQ(names[1].back(), "tiny0");
  EXPECT_EQ(names[2], std::vector<std::string>{"big"});
  optim::SGD opt(m->parameters(), {0.05, 0.9});
  train_ddp(ddp, &opt, 2, 3);
  auto ref = build<Mixed>();
  optim::SGD ropt(ref->parameters(), {0.05, 0.9});
  train_reference(*ref, ropt, g->size(), 2, 3);
  expect_same_params(*m, *ref, 1e-5, "mixed");
  EXPECT_EQ(m->w64.grad().dtype(), DType::Float64);
  EXPECT_EQ(m->big.grad().dtype(), DType::Float32);
  expect_equal_across_ranks(*m, *g);
}

// find_unused_parameters off: the error lists the unused parameters (and the
// group stays usable); on: results equal the reference and the unused
// parameters keep an undefined .grad.
inline void unused_parameters(const GroupPtr& g) {
  {
    auto m = build<Unused>();
    DistributedDataParallel ddp(m, g);
    auto [x, y] = batch(g->size() * 2, 0);
    Tensor xs = x.narrow(0, g->rank() * 2, 2), ys = y.narrow(0, g->rank() * 2, 2);
    EXPECT_WEFT_ERROR(mse_loss(ddp(xs), ys).backward(),
                      "DistributedDataParallel: 2 parameter(s) received no gradient in this backward: "
                      "unused.weight, unused.bias. Every parameter must take part in the loss on every rank");
    EXPECT_WEFT_ERROR(mse_loss(ddp(xs), ys).backward(), "construct DDP with DDPOptions::find_unused_parameters = true");
  }
  auto m = build<Unused>(), ref = build<Unused>();
  DDPOptions o;
  o.find_unused_parameters = true;
  DistributedDataParallel ddp(m, g, o);
  optim::AdamW opt(m->parameters(), optim::AdamWOptions{});
  train_ddp(ddp, &opt, 2, 3);
  EXPECT_FALSE(m->unused->parameters()[0].grad().defined());
  EXPECT_FALSE(m->unused->parameters()[1].grad().defined());
  optim::AdamW ropt(ref->parameters(), optim::AdamWOptions{});
  train_reference(*ref, ropt, g->size(), 2, 3);
  expect_same_params(*m, *ref, 1e-5, "find_unused");
}

// Ranks draw different random inits and buffers; construction broadcasts rank
// 0's parameters and buffers; buffers are broadcast again before each forward
// (and not with broadcast_buffers off); after training, ranks are equal.
inline void buffers_broadcast_random_inits_equal(const GroupPtr& g) {
  std::shared_ptr<WithBuffer> m;
  {
    std::lock_guard<std::mutex> l(build_mutex());
    manual_seed(1000 + g->rank());  // every rank draws different random inits
    m = std::make_shared<WithBuffer>(static_cast<double>(g->rank() + 1));
  }
  Tensor w_before = m->lin->parameters()[0].detach().clone();
  // Rank 0's initial weight, for everyone.
  Tensor w_rank0 = w_before.clone();
  g->broadcast(w_rank0, {0})->wait();
  if (g->rank() != 0) {
    EXPECT_FALSE(tensors_near(w_before, w_rank0, 0));
  }
  DistributedDataParallel ddp(m, g);
  EXPECT_TRUE(tensor_near(m->stat, {1, 1, 1}, 0));
  EXPECT_TRUE(tensors_near(m->lin->parameters()[0], w_rank0, 0));
  expect_equal_across_ranks(*m, *g);
  {
    NoGradGuard ng;
    m->stat.fill_(Scalar(10.0 * (g->rank() + 1)));
  }
  optim::AdamW opt(m->parameters(), optim::AdamWOptions{});
  for (int s = 0; s < 3; ++s) {
    auto [x, y] = batch(g->size() * 2, s);
    opt.zero_grad();
    mse_loss(ddp(x.narrow(0, g->rank() * 2, 2)), y.narrow(0, g->rank() * 2, 2)).backward();
    opt.step();
    EXPECT_TRUE(tensor_near(m->stat, {10, 10, 10}, 0));
  }
  expect_equal_across_ranks(*m, *g);
  // With broadcast_buffers off, each rank keeps its own.
  auto b = build<WithBuffer>(0.0);
  DDPOptions o;
  o.broadcast_buffers = false;
  DistributedDataParallel nb(b, g, o);
  {
    NoGradGuard ng;
    b->stat.fill_(Scalar(static_cast<double>(g->rank())));
  }
  nb(zeros({1, 6}));
  const double r = g->rank();
  EXPECT_TRUE(tensor_near(b->stat, {r, r, r}, 0));
}

// heat's non-blocking mode (updates in the next forward's pre-hooks) ends with
// the blocking mode's parameters, for SGD momentum and AdamW.
inline void non_blocking_equals_blocking(const GroupPtr& g) {
  for (Opt o : {Opt::SGDMomentum, Opt::AdamW}) {
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
    expect_same_params(*b, *a, 1e-7, o == Opt::AdamW ? "non_blocking adamw" : "non_blocking sgd");
    expect_equal_across_ranks(*b, *g);
  }
}

// gradient_as_bucket_view gives the plain results; the bf16 hook is close but lossy.
inline void gradient_as_bucket_view_and_bf16_hook(const GroupPtr& g) {
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
  expect_equal_across_ranks(*c, *g);
}

// A parameter whose hook fires twice per backward (checkpointed segment) is
// reduced once with its final gradient: results equal the reference.
inline void activation_checkpointing(const GroupPtr& g) {
  auto m = build<Ckpt>(), ref = build<Ckpt>();
  DDPOptions o;
  o.bucket_cap_mb = o.first_bucket_cap_mb = 100.0 / (1024 * 1024);
  DistributedDataParallel ddp(m, g, o);
  optim::SGD opt(m->parameters(), {0.1, 0.9});
  train_ddp(ddp, &opt, 2, 3);
  optim::SGD ropt(ref->parameters(), {0.1, 0.9});
  train_reference(*ref, ropt, g->size(), 2, 3);
  expect_same_params(*m, *ref, 1e-5, "checkpoint");
  expect_equal_across_ranks(*m, *g);
}

// Rank 1 holds a differently shaped parameter: every rank gets the error
// naming the first mismatch and what each rank holds.
inline void mismatched_parameters_are_an_error(const GroupPtr& g) {
  ASSERT_GE(g->size(), 2);
  std::shared_ptr<nn::Module> m;
  {
    std::lock_guard<std::mutex> l(build_mutex());
    m = nn::Sequential::of(std::make_shared<nn::Linear>(3, g->rank() == 1 ? 5 : 4));
  }
  EXPECT_WEFT_ERROR(DistributedDataParallel(m, g),
                    "first mismatch at entry #0: rank 0 has parameter '0.weight' [4, 3] float32, rank 1 has "
                    "parameter '0.weight' [5, 3] float32");
}

// Option errors are raised before any communication.
inline void bad_options_are_errors(const GroupPtr& g) {
  auto m = mlp(0);
  DDPOptions o;
  o.non_blocking = true;
  EXPECT_WEFT_ERROR(DistributedDataParallel(m, g, o), "non_blocking mode needs DDPOptions::update");
  DDPOptions c;
  c.bucket_cap_mb = 0;
  EXPECT_WEFT_ERROR(DistributedDataParallel(m, g, c), "bucket caps must be positive");
  EXPECT_WEFT_ERROR(DistributedDataParallel(nullptr, g), "module is null");
}

}  // namespace weft::parallel::ddp_cases
