// The DASO test cases (parallel/data/daso.h, parallel/data/node_ddp.h,
// parallel/data/node_groups.h), written once against a world ProcessGroup and a
// ranks_per_node that splits it into pretend nodes; run by daso_test.cc
// (ranks as threads: 2x1, 2x2, 3x2, 4x1 nodes x ranks) and daso_mpi_test.cc
// (mpirun -np 2 as 2x1, -np 4 as 2x2). Every rank calls each case.
//
// References are independent of the code under test: a plain
// DistributedDataParallel over the whole world, hand-worked blends and
// averages computed in double from the values the test itself wrote into
// the parameters, and the schedule's plan read off by hand.
//
// WEFT_DASO_CASES(X) lists every case as X(TestName, function).
#pragma once

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/half.h"
#include "optim/sgd.h"
#include "parallel/data/comm_volume.h"
#include "parallel/data/daso.h"
#include "tests/parallel/ddp_cases.h"

#define WEFT_DASO_CASES(X)                                                  \
  X(GroupsAndUnifiedStart, groups_and_unified_start)                        \
  X(BlockingEveryStepEqualsWorldDDP, blocking_every_step_equals_world_ddp)  \
  X(FoldBlendsStaleAverageByHand, fold_blends_stale_average_by_hand)        \
  X(Bf16CompressionErrorBounded, bf16_compression_error_bounded)            \
  X(CyclingEndsIdenticalWithCounters, cycling_ends_identical_with_counters) \
  X(OneNodeIsPlainDDP, one_node_is_plain_ddp)                               \
  X(FoldReunifiesTheNodeByOwner, fold_reunifies_the_node_by_owner)          \
  X(LocalSkipsThinTheNodeDDP, local_skips_thin_the_node_ddp)                \
  X(ResumeIsExact, resume_is_exact)                                         \
  X(ResumeOnAnotherLayoutIsRefused, resume_on_another_layout_is_refused)    \
  X(Errors, errors)

namespace weft::parallel::daso_cases {

using ddp_cases::batch;
using ddp_cases::build_mutex;
using ddp_cases::mlp;
using GroupPtr = std::shared_ptr<ProcessGroup>;

// All trainable parameters, flattened, as doubles.
inline std::vector<double> flat_values(nn::Module& m) {
  std::vector<double> out;
  for (auto& p : m.parameters()) {
    auto v = testing::values(p);
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

// Writes f(j) (flat index j), rounded to float32, into the parameters.
inline void set_flat(nn::Module& m, const std::function<double(int64_t)>& f) {
  NoGradGuard ng;
  int64_t j0 = 0;
  for (auto& p : m.parameters()) {
    std::vector<double> v(p.numel());
    for (int64_t j = 0; j < p.numel(); ++j) v[j] = f(j0 + j);
    p.detach().copy_(tensor(v, p.sizes()).to(DType::Float32));
    j0 += p.numel();
  }
}

inline double f32(double x) { return static_cast<double>(static_cast<float>(x)); }
inline double bf16(double x) { return static_cast<double>(static_cast<float>(BFloat16(static_cast<float>(x)))); }

// Is every rank of `g` holding bitwise the same parameters?
inline bool same_on_every_rank(nn::Module& m, ProcessGroup& g) {
  bool same = true;
  for (auto& p : m.parameters()) {
    Tensor mine = p.detach().contiguous();
    std::vector<Tensor> all;
    for (int r = 0; r < g.size(); ++r) all.push_back(empty_like(mine));
    g.allgather(all, mine)->wait();
    for (int r = 1; r < g.size(); ++r) same = same && testing::values(all[r]) == testing::values(all[0]);
  }
  return same;
}

// One training step of rank r on rows [r*B, (r+1)*B) of global batch `step`.
inline double train_step(const std::function<Tensor(const Tensor&)>& fwd, int rank, int world, int64_t per_rank,
                         int step) {
  auto [x, y] = batch(world * per_rank, step);
  Tensor loss = mse_loss(fwd(x.narrow(0, rank * per_rank, per_rank)), y.narrow(0, rank * per_rank, per_rank));
  loss.backward();
  return loss.item<double>();
}

inline DasoOptions options(int epochs, int warmup, int cooldown, int steps, DType downcast = DType::BFloat16) {
  DasoOptions o;
  o.schedule.total_epochs = epochs;
  o.schedule.warmup_epochs = warmup;
  o.schedule.cooldown_epochs = cooldown;
  o.steps_per_epoch = steps;
  o.downcast = downcast;
  return o;
}

// The layout, the groups' members, and every rank starting from rank 0's
// parameters although each built its own.
inline void groups_and_unified_start(const GroupPtr& world, int rpn) {
  NodeGroups g = make_node_groups(world, {rpn});
  const int n = world->size(), rank = world->rank();
  EXPECT_EQ(g.num_nodes(), n / rpn);
  EXPECT_EQ(g.ranks_per_node(), rpn);
  EXPECT_EQ(g.node, rank / rpn);
  EXPECT_EQ(g.local_rank, rank % rpn);
  std::vector<int> node, global;
  for (int i = 0; i < rpn; ++i) node.push_back(g.node * rpn + i);
  for (int k = 0; k < n / rpn; ++k) global.push_back(k * rpn + g.local_rank);
  EXPECT_EQ(g.node_group->global_ranks(), node);
  EXPECT_EQ(g.global_group->global_ranks(), global);
  auto m = mlp(1.0 + rank);
  NodeDataParallel nd(m, g);
  auto rank0 = mlp(1.0);
  EXPECT_EQ(flat_values(*m), flat_values(*rank0));
}

// Skips 1, no wait (every epoch warm-up), float32 on the wire: SGD with
// momentum and weight decay (linear in the gradients) equals plain DDP over
// the world within 1e-6.
inline void blocking_every_step_equals_world_ddp(const GroupPtr& world, int rpn) {
  const int epochs = 2, steps = 3, n = world->size(), rank = world->rank();
  const int64_t per_rank = 2;
  auto a = mlp(1.0), b = mlp(1.0);
  NodeDataParallel nd(a, make_node_groups(world, {rpn}));
  DistributedDataParallel ddp(b, world);
  optim::SGD oa(a->parameters(), {0.1, 0.9, 0.0, 1e-2, false}), ob(b->parameters(), {0.1, 0.9, 0.0, 1e-2, false});
  Daso daso(nd, oa, options(epochs, epochs, 0, steps, DType::Float32));
  for (int e = 0; e < epochs; ++e) {
    double loss = 0;
    for (int s = 0; s < steps; ++s) {
      daso.zero_grad();
      loss += train_step([&](const Tensor& x) { return nd(x); }, rank, n, per_rank, e * steps + s);
      daso.step();
      ob.zero_grad();
      train_step([&](const Tensor& x) { return ddp(x); }, rank, n, per_rank, e * steps + s);
      ob.step();
    }
    daso.end_epoch(loss / steps);
  }
  const auto va = flat_values(*a), vb = flat_values(*b);
  double worst = 0;
  for (size_t j = 0; j < va.size(); ++j) worst = std::max(worst, std::abs(va[j] - vb[j]));
  EXPECT_LE(worst, 1e-6);
  EXPECT_NE(flat_values(*a), flat_values(*mlp(1.0)));  // it trained
  const int nodes = n / rpn;
  const int64_t slice = (static_cast<int64_t>(va.size()) + rpn - 1) / rpn;
  const DasoStats& st = daso.stats();
  EXPECT_EQ(st.global_syncs, epochs * steps);
  EXPECT_EQ(st.blocking_syncs, epochs * steps);
  EXPECT_EQ(st.steps_waiting, epochs * steps);
  EXPECT_EQ(st.bytes_between_nodes, epochs * steps * (nodes - 1) * slice * 4);
  EXPECT_EQ(st.bytes_within_node, epochs * steps * (rpn - 1) * slice * 4);
  EXPECT_TRUE(same_on_every_rank(*a, *world));
}

// Parameters written by hand, no gradients (the optimizer leaves them), float32
// wire, skips 2 and wait 1 over 4 steps: "S F . B". The fold gives
// p = (2 p + G A') / (2 + G) with A' the stale average; the blocking step the
// plain average.
inline void fold_blends_stale_average_by_hand(const GroupPtr& world, int rpn) {
  auto m = mlp(1.0);
  NodeGroups g = make_node_groups(world, {rpn});
  const int nodes = g.num_nodes(), node = g.node;
  NodeDataParallel nd(m, g);
  optim::SGD opt(m->parameters(), {0.1});
  DasoOptions o = options(1, 0, 0, 4, DType::Float32);
  o.schedule.max_global_skips = 2;
  o.schedule.local_skip_factor = 2;
  Daso daso(nd, opt, o);
  ASSERT_EQ(daso.schedule().global_skip(), 2);
  ASSERT_EQ(daso.schedule().batches_to_wait(), 1);
  const std::vector<double> a0 = flat_values(*m);
  const int64_t P = static_cast<int64_t>(a0.size());
  auto a = [](int k, int64_t j) { return 1e-2 * std::sin(0.37 * j + 1.1 * k); };
  auto b = [](int k, int64_t j) { return 1e-2 * std::cos(0.23 * j + 0.7 * k); };
  auto c = [](int k, int64_t j) { return 3e-3 * std::sin(0.11 * j - 0.5 * k); };
  // Step 0 (start): p_k = A0 + a_k.
  auto p0 = [&](int k, int64_t j) { return f32(a0[j] + a(k, j)); };
  set_flat(*m, [&](int64_t j) { return p0(node, j); });
  daso.step();
  // Step 1 (fold): p_k = p0_k + b_k, blended with A' = A0 + mean_k(p0_k - A0).
  set_flat(*m, [&](int64_t j) { return f32(p0(node, j) + b(node, j)); });
  daso.step();
  std::vector<double> a1(P), want(P);
  for (int64_t j = 0; j < P; ++j) {
    double s = 0;
    for (int k = 0; k < nodes; ++k) s += f32(p0(k, j) - a0[j]);
    a1[j] = a0[j] + s / nodes;
    want[j] = (2.0 * f32(p0(node, j) + b(node, j)) + nodes * a1[j]) / (2.0 + nodes);
  }
  EXPECT_TRUE(testing::tensor_near(tensor(flat_values(*m), {P}), want, 1e-6));
  EXPECT_TRUE(testing::tensor_near(daso.anchor().narrow(0, 0, P), a1, 1e-6));
  // Step 2: nothing.
  const std::vector<double> blended = flat_values(*m);
  daso.step();
  EXPECT_EQ(flat_values(*m), blended);
  // Step 3 (blocking): each node's p + c_k, then every rank holds their mean.
  std::vector<std::vector<double>> mine(nodes, std::vector<double>(P));
  for (int k = 0; k < nodes; ++k) {
    // Node k's blended value: the same formula with its own b_k.
    for (int64_t j = 0; j < P; ++j)
      mine[k][j] = f32(f32((2.0 * f32(p0(k, j) + b(k, j)) + nodes * a1[j]) / (2.0 + nodes)) + c(k, j));
  }
  set_flat(*m, [&](int64_t j) { return f32(blended[j] + c(node, j)); });
  daso.step();
  for (int64_t j = 0; j < P; ++j) {
    double s = 0;
    for (int k = 0; k < nodes; ++k) s += mine[k][j];
    want[j] = s / nodes;
  }
  EXPECT_TRUE(testing::tensor_near(tensor(flat_values(*m), {P}), want, 1e-6));
  EXPECT_TRUE(same_on_every_rank(*m, *world));
  daso.end_epoch(0.0);
  EXPECT_EQ(daso.stats().global_syncs, 2);
  EXPECT_EQ(daso.stats().blocking_syncs, 1);
}

// One blocking average of hand-written parameters with bfloat16 on the wire:
// exactly A0 + mean_k(bf16(p_k - A0)) (float32 rounding aside), and within
// 2^-8 max_k |p_k - A0| of the exact average; half the bytes of float32.
inline void bf16_compression_error_bounded(const GroupPtr& world, int rpn) {
  auto m = mlp(1.0);
  NodeGroups g = make_node_groups(world, {rpn});
  const int nodes = g.num_nodes(), node = g.node;
  NodeDataParallel nd(m, g);
  optim::SGD opt(m->parameters(), {0.1});
  Daso daso(nd, opt, options(1, 1, 0, 1));
  const std::vector<double> a0 = flat_values(*m);
  const int64_t P = static_cast<int64_t>(a0.size());
  // Differences from 1e-5 to 1e-1 in magnitude, varying by node.
  auto d = [](int k, int64_t j) { return std::pow(10.0, -1.0 - (j % 5)) * std::sin(0.91 * j + 2.3 * k + 0.2); };
  auto p = [&](int k, int64_t j) { return f32(a0[j] + d(k, j)); };
  set_flat(*m, [&](int64_t j) { return p(node, j); });
  daso.step();
  const std::vector<double> got = flat_values(*m);
  double worst_ratio = 0;
  for (int64_t j = 0; j < P; ++j) {
    double exact = 0, wire = 0, dmax = 0;
    for (int k = 0; k < nodes; ++k) {
      exact += p(k, j);
      wire += bf16(f32(p(k, j) - a0[j]));
      dmax = std::max(dmax, std::abs(p(k, j) - a0[j]));
    }
    exact /= nodes;
    const double predicted = a0[j] + wire / nodes;
    EXPECT_NEAR(got[j], predicted, 4e-7 * (std::abs(predicted) + 1e-3)) << "element " << j;
    const double err = std::abs(got[j] - exact), bound = std::ldexp(dmax, -8) + 2e-7 * std::abs(exact);
    EXPECT_LE(err, bound) << "element " << j;
    worst_ratio = std::max(worst_ratio, err / bound);
  }
  EXPECT_GT(worst_ratio, 0.05);  // bfloat16 really was on the wire
  const int64_t slice = (P + rpn - 1) / rpn;
  EXPECT_EQ(daso.stats().bytes_between_nodes, (nodes - 1) * slice * 2);
  EXPECT_TRUE(same_on_every_rank(*m, *world));
}

// Training through warm-up, two cycling epochs (skips 2, wait 1: "S F S F B")
// and cool-down, bfloat16 wire: ranks of a node always agree, nodes differ
// between averages, every epoch ends with the same parameters everywhere,
// and the counters follow the plan: 5 + 3 + 3 + 5 averages, 12 blocking.
inline void cycling_ends_identical_with_counters(const GroupPtr& world, int rpn) {
  const int epochs = 4, steps = 5, n = world->size(), rank = world->rank();
  auto m = mlp(1.0);
  NodeGroups g = make_node_groups(world, {rpn});
  const int nodes = g.num_nodes();
  NodeDataParallel nd(m, g);
  optim::SGD opt(m->parameters(), {0.1, 0.9});
  DasoOptions o = options(epochs, 1, 1, steps);
  o.schedule.max_global_skips = 2;
  o.schedule.local_skip_factor = 2;
  Daso daso(nd, opt, o);
  bool nodes_differed = false;
  const std::vector<DasoPhase> phases = {DasoPhase::kWarmup, DasoPhase::kCycling, DasoPhase::kCycling,
                                         DasoPhase::kCooldown};
  for (int e = 0; e < epochs; ++e) {
    EXPECT_EQ(daso.schedule().phase(), phases[e]) << daso.schedule().describe();
    double loss = 0;
    for (int s = 0; s < steps; ++s) {
      daso.zero_grad();
      loss += train_step([&](const Tensor& x) { return nd(x); }, rank, n, 3, e * steps + s);
      daso.step();
      EXPECT_TRUE(same_on_every_rank(*m, *g.node_group)) << "epoch " << e << " step " << s;
      if (phases[e] == DasoPhase::kCycling && s == 0 && !same_on_every_rank(*m, *g.global_group))
        nodes_differed = true;  // (a collective: every rank evaluates it at the same steps)
    }
    daso.end_epoch(loss / steps);
    EXPECT_TRUE(same_on_every_rank(*m, *world)) << "after epoch " << e;
  }
  EXPECT_TRUE(nodes_differed);
  const int64_t slice = (static_cast<int64_t>(flat_values(*m).size()) + rpn - 1) / rpn;
  const DasoStats& st = daso.stats();
  EXPECT_EQ(st.global_syncs, 16);
  EXPECT_EQ(st.blocking_syncs, 12);
  EXPECT_GE(st.steps_waiting, 12);
  EXPECT_LE(st.steps_waiting, 16);
  EXPECT_EQ(st.bytes_between_nodes, 16 * (nodes - 1) * slice * 2);
  EXPECT_EQ(st.bytes_within_node, 16 * (rpn - 1) * slice * 4);
}

// The whole world on one node: nothing crosses nodes; DASO is the node DDP,
// which here is DDP over the world.
inline void one_node_is_plain_ddp(const GroupPtr& world, int /*rpn*/) {
  const int n = world->size(), rank = world->rank();
  auto a = mlp(1.0), b = mlp(1.0);
  NodeDataParallel nd(a, make_node_groups(world, {n}));
  DistributedDataParallel ddp(b, world);
  optim::SGD oa(a->parameters(), {0.1, 0.9}), ob(b->parameters(), {0.1, 0.9});
  Daso daso(nd, oa, options(3, 1, 1, 2));
  for (int e = 0; e < 3; ++e) {
    for (int s = 0; s < 2; ++s) {
      daso.zero_grad();
      train_step([&](const Tensor& x) { return nd(x); }, rank, n, 2, e * 2 + s);
      daso.step();
      ob.zero_grad();
      train_step([&](const Tensor& x) { return ddp(x); }, rank, n, 2, e * 2 + s);
      ob.step();
    }
    daso.end_epoch(1.0);
  }
  EXPECT_EQ(flat_values(*a), flat_values(*b));
  EXPECT_EQ(daso.stats().global_syncs, 0);
  EXPECT_EQ(daso.stats().bytes_between_nodes, 0);
  EXPECT_EQ(nd.node_bytes(), 6 * ring_allreduce_bytes(static_cast<int64_t>(flat_values(*a).size()) * 4, n));
}

// Local skips by hand: parameters written per rank (no gradients), float32
// wire, skips 4, wait 2, local_skip 2 over 8 steps: "S . F . S . F B", the
// node averaging gradients at steps 0, 2, 4, 6, 7 only. The ranks of a node
// hold different parameters; at the fold (after the skipped step 1) local
// rank i blends slice i of its own parameters and every rank of the node
// takes the owners' slices: p[j] = (4 p_owner(j)[j] + G A'[j]) / (4 + G),
// with A' the average of the slices the owners sent at step 0.
inline void fold_reunifies_the_node_by_owner(const GroupPtr& world, int rpn) {
  auto m = mlp(1.0);
  NodeGroups g = make_node_groups(world, {rpn});
  const int nodes = g.num_nodes(), node = g.node, local = g.local_rank;
  NodeDataParallel nd(m, g);
  optim::SGD opt(m->parameters(), {0.1});
  DasoOptions o = options(1, 0, 0, 8, DType::Float32);
  o.schedule.max_global_skips = 4;
  o.schedule.local_skip_factor = 2;
  Daso daso(nd, opt, o);
  ASSERT_EQ(daso.schedule().local_skip(), 2);
  const std::vector<double> a0 = flat_values(*m);
  const int64_t P = static_cast<int64_t>(a0.size()), S = (P + rpn - 1) / rpn;
  auto owner = [&](int64_t j) { return static_cast<int>(j / S); };
  // Node k's local rank i writes these (every rank of the world a different value).
  auto p0 = [&](int k, int i, int64_t j) { return f32(a0[j] + 1e-2 * std::sin(0.37 * j + 1.1 * k + 0.3 * i)); };
  auto p2 = [&](int k, int i, int64_t j) { return f32(p0(k, i, j) + 1e-2 * std::cos(0.23 * j + 0.7 * k + 0.9 * i)); };
  set_flat(*m, [&](int64_t j) { return p0(node, local, j); });
  daso.step();  // 0: start (each rank sends its own slice)
  daso.step();  // 1: the node's gradient average skipped
  set_flat(*m, [&](int64_t j) { return p2(node, local, j); });
  daso.step();  // 2: fold
  std::vector<double> a1(P), want(P);
  for (int64_t j = 0; j < P; ++j) {
    double sum = 0;
    for (int k = 0; k < nodes; ++k) sum += f32(p0(k, owner(j), j) - a0[j]);
    a1[j] = a0[j] + sum / nodes;
    want[j] = (4.0 * p2(node, owner(j), j) + nodes * a1[j]) / (4.0 + nodes);
  }
  EXPECT_TRUE(testing::tensor_near(tensor(flat_values(*m), {P}), want, 1e-6));
  EXPECT_TRUE(testing::tensor_near(daso.anchor().narrow(0, 0, P), a1, 1e-6));
  EXPECT_TRUE(same_on_every_rank(*m, *g.node_group));
  // Apart again after step 3; steps 4 (start), 5, 6 (fold) and 7 (blocking) end equal everywhere.
  const std::vector<double> folded = flat_values(*m);
  set_flat(*m, [&](int64_t j) { return f32(folded[j] + 1e-3 * std::sin(0.5 * j + world->rank())); });
  for (int s = 3; s < 8; ++s) daso.step();
  EXPECT_TRUE(same_on_every_rank(*m, *world));
  daso.end_epoch(0.0);
  const DasoStats& st = daso.stats();
  EXPECT_EQ(st.global_syncs, 3);
  EXPECT_EQ(st.node_syncs_skipped, rpn > 1 ? 3 : 0);
  // Both folds found the node apart (steps 1 and 5 skipped): (A', p) slices; the blocking average: A'.
  EXPECT_EQ(st.bytes_within_node, (rpn - 1) * S * 4 * (2 + 2 + 1));
}

// Training through warm-up, a cycling epoch of 12 steps at heat's defaults
// (skips 8, wait 2, local_skip 2: "S . F . . . . . S . F B", the node
// averaging at even steps and at 11) and cool-down: the node's ranks are
// apart after every skipped step until the next fold or blocking average
// and bitwise equal after each; the node DDP's bytes count the averages
// done (31 of 36 steps); switched off, the node's ranks never differ and
// every step averages in the node, with the same averages between nodes.
inline void local_skips_thin_the_node_ddp(const GroupPtr& world, int rpn) {
  const int epochs = 3, steps = 12, n = world->size(), rank = world->rank();
  for (bool skips : {true, false}) {
    SCOPED_TRACE(skips ? "local skips" : "local skips off");
    auto m = mlp(1.0);
    NodeGroups g = make_node_groups(world, {rpn});
    NodeDataParallel nd(m, g);
    optim::SGD opt(m->parameters(), {0.1, 0.9});
    DasoOptions o = options(epochs, 1, 1, steps);
    o.schedule.local_skips = skips;
    Daso daso(nd, opt, o);
    const bool apart_possible = skips && rpn > 1;
    // After which steps of the cycling epoch the node's ranks are equal.
    const std::vector<bool> equal_after = {true,  false, true,  false, false, false,
                                           false, false, false, false, true,  true};
    for (int e = 0; e < epochs; ++e) {
      double loss = 0;
      for (int s = 0; s < steps; ++s) {
        daso.zero_grad();
        loss += train_step([&](const Tensor& x) { return nd(x); }, rank, n, 2, e * steps + s);
        daso.step();
        const bool want = !(apart_possible && e == 1) || equal_after[s];
        EXPECT_EQ(same_on_every_rank(*m, *g.node_group), want) << "epoch " << e << " step " << s;
      }
      daso.end_epoch(loss / steps);
      EXPECT_TRUE(same_on_every_rank(*m, *world)) << "after epoch " << e;
    }
    const int64_t P = static_cast<int64_t>(flat_values(*m).size());
    const int averaged = apart_possible ? 31 : 36;
    EXPECT_EQ(nd.node_bytes(), averaged * ring_allreduce_bytes(P * 4, rpn));
    EXPECT_EQ(daso.stats().node_syncs_skipped, 36 - averaged);
    EXPECT_EQ(daso.stats().global_syncs, 12 + 3 + 12);
    EXPECT_EQ(daso.stats().blocking_syncs, 12 + 1 + 12);
  }
}

// Note [daso state]: training 4 epochs (warm-up, two cycling epochs at
// heat's defaults, skips 8, wait 2, local_skip 2 over 12 steps: "S . F . . .
// . . S . F B", cool-down), stopped after step `cut` (global count; the
// model's state saved as a checkpoint holds it, rank 0's, plus every rank's
// Daso::state_dict()), then rebuilt from other initial weights, loaded and
// trained to the end: bitwise the uninterrupted run's parameters on every
// rank, and its counters. The cuts (after global steps 12 to 36) cross an
// average in flight (after steps 0, 1, 8 and 9 of a cycling epoch), the
// node's ranks apart (after 1, 4, 8, 9), a fold (2) and epoch boundaries.
struct DasoRun {
  std::vector<double> params;
  DasoStats stats;
};

inline DasoRun daso_run(const GroupPtr& world, int rpn, int cut) {
  const int epochs = 4, steps = 12, n = world->size(), rank = world->rank();
  const DasoOptions o = options(epochs, 1, 1, steps);
  auto m = mlp(1.0);
  auto nd = std::make_unique<NodeDataParallel>(m, make_node_groups(world, {rpn}));
  auto opt = std::make_unique<optim::SGD>(m->parameters(), optim::SGDOptions{0.1, 0.9, 0.0, 1e-2, false});
  auto daso = std::make_unique<Daso>(*nd, *opt, o);
  double loss = 0;  // the epoch's running loss (a checkpoint keeps it too)
  for (int k = 0; k < epochs * steps; ++k) {
    daso->zero_grad();
    loss += train_step([&](const Tensor& x) { return (*nd)(x); }, rank, n, 2, k);
    daso->step();
    if ((k + 1) % steps == 0) {
      daso->end_epoch(loss / steps);
      loss = 0;
    }
    if (k + 1 != cut) continue;
    // Stop: rank 0's model state (what the checkpoint's model file holds) and each rank's Daso state.
    std::map<std::string, Tensor> rank0;
    for (auto& [name, p] : m->named_parameters()) {
      Tensor t = p.detach().clone();
      world->broadcast(t, {0})->wait();
      rank0[name] = t;
    }
    std::map<std::string, Tensor> saved = daso->state_dict();
    daso.reset();
    opt.reset();
    nd.reset();
    // A new process: other initial weights, the model's state loaded, then Daso's.
    m = mlp(3.0);
    nd = std::make_unique<NodeDataParallel>(m, make_node_groups(world, {rpn}));
    opt = std::make_unique<optim::SGD>(m->parameters(), optim::SGDOptions{0.1, 0.9, 0.0, 1e-2, false});
    daso = std::make_unique<Daso>(*nd, *opt, o);
    {
      NoGradGuard ng;
      for (auto& [name, p] : m->named_parameters()) p.detach().copy_(rank0.at(name));
    }
    daso->load_state_dict(saved);
    EXPECT_EQ(daso->step_in_epoch(), (k + 1) % steps);
    EXPECT_EQ(saved.count("pending.parts") > 0,
              (k % steps == 0 || k % steps == 1 || k % steps == 8 || k % steps == 9) && k / steps >= 1 &&
                  k / steps <= 2 && n / rpn > 1);
  }
  return {flat_values(*m), daso->stats()};
}

inline void resume_is_exact(const GroupPtr& world, int rpn) {
  const DasoRun whole = daso_run(world, rpn, -1);
  for (int cut : {12, 13, 14, 15, 17, 21, 22, 24, 36}) {
    SCOPED_TRACE("stopped after step " + std::to_string(cut));
    const DasoRun resumed = daso_run(world, rpn, cut);
    EXPECT_EQ(resumed.params, whole.params);
    EXPECT_EQ(resumed.stats.global_syncs, whole.stats.global_syncs);
    EXPECT_EQ(resumed.stats.blocking_syncs, whole.stats.blocking_syncs);
    EXPECT_EQ(resumed.stats.bytes_between_nodes, whole.stats.bytes_between_nodes);
    EXPECT_EQ(resumed.stats.bytes_within_node, whole.stats.bytes_within_node);
    EXPECT_EQ(resumed.stats.node_syncs_skipped, whole.stats.node_syncs_skipped);
  }
  // The state of a rank whose parameters differ from rank 0's carries them; at an epoch's end none does.
  auto m = mlp(1.0);
  NodeDataParallel nd(m, make_node_groups(world, {rpn}));
  optim::SGD opt(m->parameters(), {0.1, 0.9});
  Daso daso(nd, opt, options(3, 1, 1, 12));
  EXPECT_EQ(daso.state_dict().count("params"), 0u);
}

// A state saved over one node split loaded over another: an error naming
// both layouts and how to proceed; the wrong rank's state, another model
// size or steps per epoch: errors naming them.
inline void resume_on_another_layout_is_refused(const GroupPtr& world, int rpn) {
  const int n = world->size(), other = rpn == n ? 1 : n;
  auto m = mlp(1.0);
  NodeDataParallel nd(m, make_node_groups(world, {rpn}));
  optim::SGD opt(m->parameters(), {0.1, 0.9});
  Daso daso(nd, opt, options(3, 1, 1, 4));
  const std::map<std::string, Tensor> saved = daso.state_dict();
  auto m2 = mlp(1.0);
  NodeDataParallel nd2(m2, make_node_groups(world, {other}));
  optim::SGD opt2(m2->parameters(), {0.1, 0.9});
  Daso daso2(nd2, opt2, options(3, 1, 1, 4));
  auto text = [](int world, int rpn) {
    const int nodes = world / rpn;
    return std::to_string(nodes) + (nodes == 1 ? " node x " : " nodes x ") + std::to_string(rpn) + " ranks per node (" +
           std::to_string(world) + " ranks)";
  };
  EXPECT_WEFT_ERROR(daso2.load_state_dict(saved), "the state was saved by DASO over " + text(n, rpn) +
                                                      ", this run is DASO over " + text(n, other) +
                                                      ": DASO's state (each rank's parameters");
  EXPECT_WEFT_ERROR(daso2.load_state_dict(saved), "resume with " + std::to_string(n) + " ranks, " +
                                                      std::to_string(rpn) + " per node, or without DASO");
  std::map<std::string, Tensor> bad = saved;
  bad["layout.rank"] = scalar_tensor(int64_t{(world->rank() + 1) % n}, TensorOptions{DType::Int64});
  EXPECT_WEFT_ERROR(daso.load_state_dict(bad), "rank " + std::to_string(world->rank()) +
                                                   " was given the state of rank " +
                                                   std::to_string((world->rank() + 1) % n));
  bad = saved;
  bad["steps_per_epoch"] = scalar_tensor(int64_t{5}, TensorOptions{DType::Int64});
  EXPECT_WEFT_ERROR(daso.load_state_dict(bad), "the state was saved with 5 steps per epoch, this run has 4");
  bad = saved;
  bad.erase("anchor");
  EXPECT_WEFT_ERROR(daso.load_state_dict(bad), "the state has no 'anchor'");
}

inline void errors(const GroupPtr& world, int rpn) {
  const int n = world->size();
  const std::string divide = std::string("does not divide the world size ").append(std::to_string(n));
  EXPECT_WEFT_ERROR(make_node_groups(world, {n + 1}), divide);
  NodeGroups g = make_node_groups(world, {rpn});
  {
    NodeDataParallelOptions bad;
    bad.ddp.non_blocking = true;
    EXPECT_WEFT_ERROR(NodeDataParallel(mlp(1.0), g, bad), "the node DDP cannot be non-blocking");
  }
  auto m = mlp(1.0);
  NodeDataParallel nd(m, g);
  optim::SGD opt(m->parameters(), {0.1});
  DasoOptions o = options(2, 1, 0, 2);
  o.steps_per_epoch = 2 + (world->rank() == 1 ? 1 : 0);
  EXPECT_WEFT_ERROR(Daso(nd, opt, o),
                    "Daso: ranks passed different options; first difference: rank 0 has steps_per_epoch 2, rank 1 "
                    "has steps_per_epoch 3");
  o.steps_per_epoch = 2;
  o.downcast = DType::Int64;
  EXPECT_WEFT_ERROR(Daso(nd, opt, o), "downcast must be bfloat16, float16 or float32, got int64");
  o.downcast = DType::BFloat16;
  o.steps_per_epoch = 0;
  EXPECT_WEFT_ERROR(Daso(nd, opt, o), "steps_per_epoch must be positive");
  o.steps_per_epoch = 2;
  Daso daso(nd, opt, o);
  EXPECT_WEFT_ERROR(daso.end_epoch(1.0), "Daso.end_epoch: epoch 0 ended after 0 of its 2 steps (steps_per_epoch)");
  daso.step();
  daso.step();
  EXPECT_WEFT_ERROR(daso.step(), "Daso.step: epoch 0 has 2 steps (steps_per_epoch) and all were taken");
  daso.end_epoch(1.0);
  EXPECT_EQ(daso.schedule().epoch(), 1);
  // float64 parameters are refused.
  std::shared_ptr<nn::Module> m64;
  {
    std::lock_guard<std::mutex> l(build_mutex());
    m64 = nn::Sequential::of(std::make_shared<nn::Linear>(3, 2));
  }
  m64->to(DType::Float64);
  NodeDataParallel nd64(m64, g);
  optim::SGD opt64(m64->parameters(), {0.1});
  EXPECT_WEFT_ERROR(Daso(nd64, opt64, options(1, 1, 0, 1)),
                    "parameter '0.weight' is float64; DASO averages float32 parameters");
}

}  // namespace weft::parallel::daso_cases
