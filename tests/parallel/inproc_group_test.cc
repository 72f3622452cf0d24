// ProcessGroupInProc (parallel/comm/inproc): every operation of the
// ProcessGroup contract against hand-computed values with 2, 3 and 4 ranks as
// threads; exact integer and float64 reductions; batched point-to-point both
// ways at once and around a ring; tags; size/dtype mismatch. Sub-groups,
// timeouts, desync, exited ranks and argument errors:
// inproc_group_failure_test.cc.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <latch>
#include <limits>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/ops.h"
#include "core/rng.h"
#include "parallel/comm/inproc/process_group_inproc.h"
#include "parallel/comm/inproc/testing.h"
#include "tests/parallel/error_text.h"
#include "tests/testing.h"

namespace weft::parallel {
namespace {

using GroupPtr = std::shared_ptr<ProcessGroup>;
using std::chrono::milliseconds;
using weft::testing::tensor_near;
using weft::testing::values;
using Clock = std::chrono::steady_clock;

using weft::testing::error_of;

Tensor f32(const std::vector<double>& v) { return tensor<double>(v, {int64_t(v.size())}).to(DType::Float32); }

// ---- values per (dtype, rank, index), exact in every dtype ----

const std::vector<DType> kAllDTypes = {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16,
                                       DType::Int64,   DType::Int32,   DType::UInt8,    DType::Bool};
const std::vector<ReduceOp> kOps = {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min};
constexpr int64_t kN = 13;

double value(DType d, int r, int64_t i) {
  if (d == DType::Bool) return ((i + r) % 3 == 0) ? 1 : 0;
  double v = double((i * 7 + r * 5) % 11);
  if (d != DType::UInt8 && !is_floating(d)) v -= 4;
  if (is_floating(d)) v = v - 5 + 0.5 * (r % 2);
  return v;
}

Tensor make(DType d, int r, int64_t offset = 0) {
  std::vector<double> v(kN);
  for (int64_t i = 0; i < kN; ++i) v[i] = value(d, r, i + offset);
  return tensor<double>(v, {kN}).to(d);
}

double reduce_ref(DType d, ReduceOp op, int n, int64_t i, int64_t offset = 0) {
  double acc = value(d, 0, i + offset);
  bool all = acc != 0, any = acc != 0;
  for (int r = 1; r < n; ++r) {
    double x = value(d, r, i + offset);
    all = all && x != 0;
    any = any || x != 0;
    if (op == ReduceOp::Sum || op == ReduceOp::Avg) acc += x;
    else if (op == ReduceOp::Max) acc = std::max(acc, x);
    else acc = std::min(acc, x);
  }
  if (d == DType::Bool) return op == ReduceOp::Min ? all : any;
  if (d == DType::UInt8 && op == ReduceOp::Sum) acc = std::fmod(acc, 256.0);
  if (op == ReduceOp::Avg) acc /= n;
  return acc;
}

double tolerance(DType d) { return (d == DType::BFloat16 || d == DType::Float16) ? 1e-2 : 1e-7; }

class InProcRanks : public ::testing::TestWithParam<int> {};

TEST_P(InProcRanks, BasicsAndSequenceNumbers) {
  const int n = GetParam();
  run_ranks(n, [n](GroupPtr g) {
    auto* pg = dynamic_cast<ProcessGroupInProc*>(g.get());
    ASSERT_NE(pg, nullptr);
    EXPECT_EQ(g->size(), n);
    EXPECT_EQ(g->backend_name(), "inproc");
    EXPECT_EQ(pg->name(), "world");
    std::vector<int> all;
    for (int r = 0; r < n; ++r) all.push_back(r);
    EXPECT_EQ(g->global_ranks(), all);
    EXPECT_EQ(pg->sequence_number(), 0);
    g->barrier()->wait();
    Tensor t = f32({1});
    g->allreduce(t)->wait();
    EXPECT_EQ(pg->sequence_number(), 2);
    // point-to-point is not sequenced
    Tensor x = f32({double(g->rank())});
    Tensor y = f32({0});
    g->batch_isend_irecv({P2POp::send(x, (g->rank() + 1) % n), P2POp::recv(y, (g->rank() + n - 1) % n)})->wait();
    EXPECT_EQ(pg->sequence_number(), 2);
  });
}

// Literal tables: rank r holds {r + 1, -2 (r + 1), r^2}.
TEST_P(InProcRanks, AllreduceHandValues) {
  const int n = GetParam();
  const std::map<int, std::vector<std::vector<double>>> expected = {
      // sum, avg, max, min
      {2, {{3, -6, 1}, {1.5, -3, 0.5}, {2, -2, 1}, {1, -4, 0}}},
      {3, {{6, -12, 5}, {2, -4, 5.0 / 3}, {3, -2, 4}, {1, -6, 0}}},
      {4, {{10, -20, 14}, {2.5, -5, 3.5}, {4, -2, 9}, {1, -8, 0}}},
  };
  run_ranks(n, [&](GroupPtr g) {
    const double r = g->rank();
    for (size_t k = 0; k < kOps.size(); ++k) {
      Tensor t = f32({r + 1, -2 * (r + 1), r * r});
      WorkPtr w = g->allreduce(t, {kOps[k]});
      w->wait();
      EXPECT_TRUE(w->is_completed());
      EXPECT_TRUE(tensor_near(t, expected.at(n)[k], 1e-7)) << "op " << k;
    }
  });
}

TEST_P(InProcRanks, AllreduceEveryDTypeAndOp) {
  const int n = GetParam();
  run_ranks(n, [n](GroupPtr g) {
    for (DType d : kAllDTypes)
      for (ReduceOp op : kOps) {
        if (op == ReduceOp::Avg && !is_floating(d)) continue;
        Tensor t = make(d, g->rank());
        g->allreduce(t, {op})->wait();
        ASSERT_EQ(t.dtype(), d);
        std::vector<double> want(kN);
        for (int64_t i = 0; i < kN; ++i) want[i] = reduce_ref(d, op, n, i);
        EXPECT_TRUE(tensor_near(t, want, tolerance(d))) << d << " op " << int(op);
      }
  });
}

TEST_P(InProcRanks, BroadcastFromEveryRoot) {
  const int n = GetParam();
  run_ranks(n, [n](GroupPtr g) {
    for (int root = 0; root < n; ++root) {
      Tensor t = f32({10.0 * g->rank(), -1.0 * g->rank()});
      g->broadcast(t, {root})->wait();
      EXPECT_TRUE(tensor_near(t, {10.0 * root, -1.0 * root}, 0)) << "root " << root;
    }
    Tensor b = make(DType::BFloat16, g->rank());
    g->broadcast(b, {n - 1})->wait();
    EXPECT_TRUE(tensor_near(b, values(make(DType::BFloat16, n - 1)), 0));
  });
}

TEST_P(InProcRanks, AllgatherEveryDType) {
  const int n = GetParam();
  run_ranks(n, [n](GroupPtr g) {
    for (DType d : kAllDTypes) {
      Tensor in = make(d, g->rank());
      std::vector<Tensor> outs;
      for (int k = 0; k < n; ++k) outs.push_back(zeros({kN}, {d}));
      g->allgather(outs, in)->wait();
      for (int k = 0; k < n; ++k) EXPECT_TRUE(tensor_near(outs[k], values(make(d, k)), 0)) << d << " from " << k;
    }
    // hand values: rank r gives {r, 10 r}
    Tensor in = tensor<int64_t>({g->rank(), 10 * g->rank()}, {2});
    std::vector<Tensor> outs;
    for (int k = 0; k < n; ++k) outs.push_back(zeros({2}, {DType::Int64}));
    g->allgather(outs, in)->wait();
    for (int k = 0; k < n; ++k) EXPECT_TRUE(tensor_near(outs[k], {double(k), 10.0 * k}, 0));
  });
}

TEST_P(InProcRanks, ReduceScatterHandValuesAndEveryDType) {
  const int n = GetParam();
  run_ranks(n, [n](GroupPtr g) {
    const int r = g->rank();
    // rank r's input j is {10 r + j, -r}: output on rank j is {sum_r (10 r + j), -sum_r r}.
    std::vector<Tensor> ins;
    for (int j = 0; j < n; ++j) ins.push_back(f32({10.0 * r + j, -1.0 * r}));
    Tensor out = zeros({2});
    g->reduce_scatter(out, ins)->wait();
    const double tri = n * (n - 1) / 2.0;
    EXPECT_TRUE(tensor_near(out, {10 * tri + n * r, -tri}, 0));
    g->reduce_scatter(out, ins, {ReduceOp::Max})->wait();
    EXPECT_TRUE(tensor_near(out, {10.0 * (n - 1) + r, 0}, 0));
    g->reduce_scatter(out, ins, {ReduceOp::Avg})->wait();
    EXPECT_TRUE(tensor_near(out, {(10 * tri + n * r) / n, -tri / n}, 1e-7));
    for (DType d : kAllDTypes)
      for (ReduceOp op : kOps) {
        if (op == ReduceOp::Avg && !is_floating(d)) continue;
        std::vector<Tensor> in;
        for (int j = 0; j < n; ++j) in.push_back(make(d, r, 100 * j));
        Tensor o = zeros({kN}, {d});
        g->reduce_scatter(o, in, {op})->wait();
        std::vector<double> want(kN);
        for (int64_t i = 0; i < kN; ++i) want[i] = reduce_ref(d, op, n, i, 100 * r);
        EXPECT_TRUE(tensor_near(o, want, tolerance(d))) << d << " op " << int(op);
      }
  });
}

// A collective completes only once every rank issued it; the result is not
// written before.
TEST_P(InProcRanks, CollectivesCompleteOnlyWhenAllArrived) {
  const int n = GetParam();
  std::latch checked(1);
  run_ranks(n, [&](GroupPtr g) {
    Tensor t = f32({double(g->rank() + 1)});
    if (g->rank() == 0) {
      WorkPtr b = g->barrier();
      WorkPtr a = g->allreduce(t);
      std::this_thread::sleep_for(milliseconds(20));
      EXPECT_FALSE(b->is_completed());
      EXPECT_FALSE(a->is_completed());
      EXPECT_TRUE(tensor_near(t, {1}, 0));
      checked.count_down();
      a->wait();
      EXPECT_TRUE(b->is_completed());
    } else {
      checked.wait();
      g->barrier()->wait();
      g->allreduce(t)->wait();
    }
    EXPECT_TRUE(tensor_near(t, {n * (n + 1) / 2.0}, 0));
  });
}

TEST_P(InProcRanks, SendRecvRingAndBatchRingBothWays) {
  const int n = GetParam();
  run_ranks(n, [n](GroupPtr g) {
    const int r = g->rank(), next = (r + 1) % n, prev = (r + n - 1) % n;
    // Plain send/recv around the ring: even ranks send first, odd ones receive first.
    Tensor x = f32({double(r), 100.0 + r});
    Tensor y = zeros({2});
    if (r % 2 == 0) {
      WorkPtr s = g->send(x, next, {3});
      g->recv(y, prev, {3})->wait();
      s->wait();
    } else {
      g->recv(y, prev, {3})->wait();
      g->send(x, next, {3})->wait();
    }
    EXPECT_TRUE(tensor_near(y, {double(prev), 100.0 + prev}, 0));
    // One batch per rank: to both neighbours and from both, int64 one way, float64 the other.
    Tensor fwd = tensor<int64_t>({r, 7 * r}, {2}), got_fwd = zeros({2}, {DType::Int64});
    Tensor bwd = tensor<double>({-0.5 * r}, {1}), got_bwd = zeros({1}, {DType::Float64});
    WorkPtr w = g->batch_isend_irecv({P2POp::recv(got_fwd, prev, 1), P2POp::send(fwd, next, 1),
                                      P2POp::send(bwd, prev, 2), P2POp::recv(got_bwd, next, 2)});
    w->wait();
    EXPECT_TRUE(w->is_completed());
    EXPECT_TRUE(tensor_near(got_fwd, {double(prev), 7.0 * prev}, 0));
    EXPECT_TRUE(tensor_near(got_bwd, {-0.5 * next}, 0));
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, InProcRanks, ::testing::Values(2, 3, 4));

// ---- dtypes whose results must be exact ----

TEST(InProc, IntegerReductionsAreExactAndWrap) {
  run_ranks(2, [](GroupPtr g) {
    const int64_t big = int64_t(1) << 60;
    Tensor t = tensor<int64_t>({big + 1 + g->rank(), -big}, {2});
    g->allreduce(t)->wait();
    EXPECT_EQ(t.data_ptr<int64_t>()[0], 2 * big + 3);  // not representable in float64
    EXPECT_EQ(t.data_ptr<int64_t>()[1], -2 * big);
    Tensor u = tensor<uint8_t>({200, uint8_t(g->rank())}, {2});
    g->allreduce(u)->wait();
    EXPECT_EQ(u.data_ptr<uint8_t>()[0], 144);  // (200 + 200) mod 256
    EXPECT_EQ(u.data_ptr<uint8_t>()[1], 1);
    Tensor i32 = tensor<int32_t>({std::numeric_limits<int32_t>::max() - g->rank()}, {1});
    g->allreduce(i32, {ReduceOp::Min})->wait();
    EXPECT_EQ(i32.data_ptr<int32_t>()[0], std::numeric_limits<int32_t>::max() - 1);
    Tensor b = tensor<bool>({true, g->rank() == 0, false}, {3});
    Tensor b2 = b.clone();
    g->allreduce(b, {ReduceOp::Sum})->wait();
    g->allreduce(b2, {ReduceOp::Min})->wait();
    EXPECT_TRUE(tensor_near(b, {1, 1, 0}, 0));   // or
    EXPECT_TRUE(tensor_near(b2, {1, 0, 0}, 0));  // and
  });
}

TEST(InProc, FloatReductionsInFloat64AndNaNPropagates) {
  run_ranks(3, [](GroupPtr g) {
    // float32 sum of 1e8 + 1 + (-1e8) is 0 in float32 order, 1 in float64.
    const double v[] = {1e8, 1, -1e8};
    Tensor t = f32({v[g->rank()]});
    g->allreduce(t)->wait();
    EXPECT_EQ(t.data_ptr<float>()[0], 1.0f);
    const double nan = std::nan("");
    Tensor m = f32({g->rank() == 1 ? nan : 1.0, 2.0});
    g->allreduce(m, {ReduceOp::Max})->wait();
    EXPECT_TRUE(std::isnan(m.data_ptr<float>()[0]));
    EXPECT_EQ(m.data_ptr<float>()[1], 2.0f);
    Tensor h = tensor<double>({0.1 * (g->rank() + 1)}, {1}).to(DType::Float16);
    g->allreduce(h, {ReduceOp::Avg})->wait();
    EXPECT_TRUE(tensor_near(h, {0.2}, 1e-3));
  });
}

// ---- point-to-point ----

TEST(InProc, BatchBothWaysAtOnceAndFifoPerTag) {
  run_ranks(2, [](GroupPtr g) {
    const int me = g->rank(), peer = 1 - me;
    // Both ranks send first then receive, in one batch each: no deadlock.
    std::vector<Tensor> out, in;
    std::vector<P2POp> ops;
    for (int k = 0; k < 3; ++k) {
      out.push_back(f32({10.0 * me + k}));
      in.push_back(zeros({1}));
    }
    for (int k = 0; k < 3; ++k) ops.push_back(P2POp::send(out[k], peer));
    for (int k = 0; k < 3; ++k) ops.push_back(P2POp::recv(in[k], peer));
    g->batch_isend_irecv(ops)->wait();
    for (int k = 0; k < 3; ++k) EXPECT_TRUE(tensor_near(in[k], {10.0 * peer + k}, 0)) << k;  // issue order
  });
}

TEST(InProc, TagsSeparateStreams) {
  run_ranks(2, [](GroupPtr g) {
    if (g->rank() == 0) {
      WorkPtr a = g->send(f32({5}), 1, {5});
      WorkPtr b = g->send(f32({7, 7}), 1, {7});
      b->wait();
      a->wait();
    } else {
      Tensor seven = zeros({2}), five = zeros({1});
      g->recv(seven, 0, {7})->wait();  // matched the second send: tags are separate queues
      g->recv(five, 0, {5})->wait();
      EXPECT_TRUE(tensor_near(seven, {7, 7}, 0));
      EXPECT_TRUE(tensor_near(five, {5}, 0));
    }
  });
}

TEST(InProc, SendCompletesOnlyWhenMatched) {
  std::latch checked(1);
  run_ranks(2, [&](GroupPtr g) {
    if (g->rank() == 0) {
      WorkPtr s = g->send(f32({1, 2}), 1);
      std::this_thread::sleep_for(milliseconds(20));
      EXPECT_FALSE(s->is_completed());
      checked.count_down();
      s->wait();
      EXPECT_TRUE(s->is_completed());
    } else {
      checked.wait();
      Tensor y = zeros({2});
      g->recv(y, 0)->wait();
      EXPECT_TRUE(tensor_near(y, {1, 2}, 0));
    }
  });
}

TEST(InProc, SizeAndDtypeMismatchNameBoth) {
  std::vector<std::string> errs(2);
  run_ranks(2, [&](GroupPtr g) {
    std::string batch;  // a dtype mismatch inside batches, both sides
    if (g->rank() == 0) {
      errs[0] = error_of([&] { g->send(zeros({8}), 1)->wait(); });
      batch = error_of([&] { g->batch_isend_irecv({P2POp::send(zeros({3}, {DType::Float64}), 1, 9)})->wait(); });
    } else {
      Tensor small = zeros({4});
      errs[1] = error_of([&] { g->recv(small, 0)->wait(); });
      Tensor wrong = zeros({3});
      batch = error_of([&] { g->batch_isend_irecv({P2POp::recv(wrong, 0, 9)})->wait(); });
    }
    EXPECT_HAS(batch,
               "batch_isend_irecv(1 ops) on world failed: send(float64, 3 elements, to rank 1, tag 9) of rank "
               "0 and recv(float32, 3 elements, from rank 0, tag 9) of rank 1 on world do not match");
  });
  for (const auto& e : errs) {
    EXPECT_HAS(e,
               "send(float32, 8 elements, to rank 1, tag 0) of rank 0 and recv(float32, 4 elements, from rank 0, "
               "tag 0) of rank 1 on world do not match: the send has 8 float32 elements, the receive 4 float32");
  }
}

// run_ranks: each rank draws from a generator of its own, forked from the
// caller's. Rank 0 rewinds its stream between rank 1's draws (barriers order
// them); with one generator for the process that would move rank 1's draws.
TEST(InProc, EachRankDrawsFromAGeneratorOfItsOwn) {
  auto run = [](bool rank0_rewinds) {
    std::vector<std::vector<float>> drawn(2);
    manual_seed(12);
    run_ranks(2, [&](GroupPtr g) {
      for (int k = 0; k < 3; ++k) {
        if (g->rank() == 0 && rank0_rewinds) set_rng_state({77, 0});
        g->barrier()->wait();
        if (g->rank() == 1)
          for (float v : values(randn({8}))) drawn[1].push_back(v);
        g->barrier()->wait();
      }
      if (g->rank() == 0)
        for (float v : values(randn({8}))) drawn[0].push_back(v);
    });
    return drawn;
  };
  const auto plain = run(false), again = run(false), rewound = run(true);
  EXPECT_EQ(plain, again) << "the same seed must give the same draws on every rank";
  EXPECT_EQ(rewound[1], plain[1]) << "rank 0's set_rng_state moved rank 1's stream";
  EXPECT_NE(rewound[0], plain[0]);
  EXPECT_NE(std::vector<float>(plain[1].begin(), plain[1].begin() + 8), plain[0]) << "ranks 0 and 1 share a stream";
  // The caller's stream moves on by one block per run_ranks, whatever the ranks draw.
  manual_seed(12);
  run_ranks(3, [](GroupPtr) { randn({100}); });
  EXPECT_EQ(get_rng_state().offset, 4u);
  EXPECT_EQ(get_rng_state().seed, 12u);
}

TEST(InProc, EmptyBatchCompletesAtOnce) {
  auto world = ProcessGroupInProc::create_world(2);
  WorkPtr w = world[0]->batch_isend_irecv({});
  EXPECT_TRUE(w->is_completed());
  w->wait();
}

}  // namespace
}  // namespace weft::parallel
