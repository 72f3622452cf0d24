// Every collective of ProcessGroupMPI against values computed here, for every
// dtype and reduce op; sub-groups; a send/recv ring; async Work; barrier;
// check_fingerprint (the debug-mode exchange NCCL uses); rank0_first
// ordering. Run under mpirun (tests/parallel/mpi_test.sh) with 2 and 4 ranks;
// every rank runs every test in the same order.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/ops.h"
#include "parallel/comm/mpi/context.h"
#include "parallel/comm/mpi/process_group_mpi.h"
#include "tests/testing.h"

namespace weft::parallel {
namespace {

const std::vector<DType> kAllDTypes = {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16,
                                       DType::Int64,   DType::Int32,   DType::UInt8,    DType::Bool};
const std::vector<ReduceOp> kOps = {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min};
constexpr int64_t kN = 37;  // odd on purpose

std::shared_ptr<ProcessGroup> world() { return init_process_group(); }

// A file name in TEST_TMPDIR shared by the ranks of this run (rank 0's pid).
std::string shared_path(const std::string& stem) {
  auto pg = world();
  Tensor pid = full({1}, int64_t(getpid()), {DType::Int64});
  pg->broadcast(pid, {0})->wait();
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + stem + std::to_string(pid.item<int64_t>());
}

// Rank r's value at index i: small integers (exact in every dtype), varying
// with rank so that sum, max and min all differ. Bool: a rank-dependent pattern.
double value(DType d, int r, int64_t i) {
  if (d == DType::Bool) return ((i + r) % 3 == 0) ? 1 : 0;
  double v = double((i * 7 + r * 5) % 11);
  if (d != DType::UInt8 && is_floating(d) == false) v -= 4;  // negative ints too
  if (is_floating(d)) v = v - 5 + 0.5 * (r % 2);
  return v;
}

Tensor make(DType d, int r, int64_t n = kN, int64_t offset = 0) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = value(d, r, i + offset);
  return tensor<double>(v, {n}).to(d);
}

std::vector<double> read(const Tensor& t) {
  Tensor d = t.to(DType::Float64).contiguous();
  const double* p = d.data_ptr<double>();
  return std::vector<double>(p, p + d.numel());
}

double reduce_ref(DType d, ReduceOp op, int size, int64_t i) {
  double acc = value(d, 0, i);
  for (int r = 1; r < size; ++r) {
    double x = value(d, r, i);
    if (op == ReduceOp::Sum || op == ReduceOp::Avg) acc += x;
    else if (op == ReduceOp::Max) acc = std::max(acc, x);
    else acc = std::min(acc, x);
  }
  if (d == DType::Bool) {
    if (op == ReduceOp::Min) {  // logical and
      bool all = true;
      for (int r = 0; r < size; ++r) all = all && value(d, r, i) != 0;
      return all;
    }
    return acc != 0;  // sum and max: logical or
  }
  if (op == ReduceOp::Avg) acc /= size;
  return acc;
}

bool valid(DType d, ReduceOp op) { return op != ReduceOp::Avg || is_floating(d); }

TEST(Collectives, AllreduceEveryDTypeAndOp) {
  auto pg = world();
  for (DType d : kAllDTypes) {
    for (ReduceOp op : kOps) {
      if (!valid(d, op)) continue;
      Tensor t = make(d, pg->rank());
      pg->allreduce(t, {op})->wait();
      auto got = read(t);
      for (int64_t i = 0; i < kN; ++i)
        ASSERT_DOUBLE_EQ(got[i], reduce_ref(d, op, pg->size(), i))
            << "dtype " << d << " op " << int(op) << " index " << i;
    }
  }
}

TEST(Collectives, AvgOnIntegersIsAnError) {
  auto pg = world();
  Tensor t = make(DType::Int64, pg->rank());
  EXPECT_WEFT_ERROR(pg->allreduce(t, {ReduceOp::Avg}), "avg needs a floating dtype");
  std::vector<Tensor> ins(pg->size(), t);
  EXPECT_WEFT_ERROR(pg->reduce_scatter(t, ins, {ReduceOp::Avg}), "avg needs a floating dtype");
}

TEST(Collectives, BadArgumentsAreErrors) {
  auto pg = world();
  Tensor t = zeros({4, 3}).transpose(0, 1);
  EXPECT_WEFT_ERROR(pg->allreduce(t), "contiguous");
  Tensor c = zeros({3});
  EXPECT_WEFT_ERROR(pg->broadcast(c, {pg->size()}), "root");
  std::vector<Tensor> outs(pg->size() + 1, zeros({3}));
  EXPECT_WEFT_ERROR(pg->allgather(outs, c), "output tensors");
  std::vector<Tensor> wrong(pg->size(), zeros({4}));
  EXPECT_WEFT_ERROR(pg->allgather(wrong, c), "shape");
  EXPECT_WEFT_ERROR(pg->send(c, pg->rank()), "this rank");
  EXPECT_WEFT_ERROR(pg->send(c, pg->size()), "not in");
  EXPECT_WEFT_ERROR(pg->new_group({0, 0}), "listed twice");
}

TEST(Collectives, AllreduceTwoDimensionalAndEmpty) {
  auto pg = world();
  Tensor t = full({3, 4}, double(pg->rank() + 1));
  pg->allreduce(t)->wait();
  double total = pg->size() * (pg->size() + 1) / 2.0;
  for (double v : read(t)) EXPECT_DOUBLE_EQ(v, total);
  Tensor e = zeros({0});
  pg->allreduce(e)->wait();
  EXPECT_EQ(e.numel(), 0);
}

TEST(Collectives, BroadcastEveryDTypeAndRoot) {
  auto pg = world();
  for (DType d : kAllDTypes) {
    for (int root = 0; root < pg->size(); ++root) {
      Tensor t = make(d, pg->rank());
      pg->broadcast(t, {root})->wait();
      auto got = read(t);
      for (int64_t i = 0; i < kN; ++i) ASSERT_DOUBLE_EQ(got[i], value(d, root, i)) << d << " root " << root;
    }
  }
}

TEST(Collectives, AllgatherEveryDType) {
  auto pg = world();
  for (DType d : kAllDTypes) {
    Tensor in = make(d, pg->rank());
    std::vector<Tensor> outs;
    for (int r = 0; r < pg->size(); ++r) outs.push_back(zeros({kN}, {d}));
    pg->allgather(outs, in)->wait();
    for (int r = 0; r < pg->size(); ++r) {
      auto got = read(outs[r]);
      for (int64_t i = 0; i < kN; ++i) ASSERT_DOUBLE_EQ(got[i], value(d, r, i)) << d << " from rank " << r;
    }
  }
}

TEST(Collectives, ReduceScatterEveryDTypeAndOp) {
  auto pg = world();
  const int n = pg->size(), me = pg->rank();
  for (DType d : kAllDTypes) {
    for (ReduceOp op : kOps) {
      if (!valid(d, op)) continue;
      // inputs[j] on rank r holds value(d, r, j*kN + i): output on rank `me` is
      // the reduction over ranks of chunk `me`.
      std::vector<Tensor> ins;
      for (int j = 0; j < n; ++j) ins.push_back(make(d, me, kN, j * kN));
      Tensor out = zeros({kN}, {d});
      pg->reduce_scatter(out, ins, {op})->wait();
      auto got = read(out);
      for (int64_t i = 0; i < kN; ++i)
        ASSERT_DOUBLE_EQ(got[i], reduce_ref(d, op, n, me * kN + i)) << d << " op " << int(op) << " index " << i;
    }
  }
}

TEST(Collectives, SendRecvRing) {
  auto pg = world();
  const int n = pg->size(), me = pg->rank();
  for (DType d : kAllDTypes) {
    Tensor out = make(d, me);
    Tensor in = zeros({kN}, {d});
    int next = (me + 1) % n, prev = (me + n - 1) % n;
    WorkPtr r = pg->recv(in, prev, {5});
    WorkPtr s = pg->send(out, next, {5});
    s->wait();
    r->wait();
    EXPECT_TRUE(s->is_completed());
    auto got = read(in);
    for (int64_t i = 0; i < kN; ++i) ASSERT_DOUBLE_EQ(got[i], value(d, prev, i)) << d;
  }
}

TEST(Collectives, RecvOfWrongSizeIsAnError) {
  auto pg = world();
  const int me = pg->rank();
  if (me == 0) {
    Tensor big = zeros({5});
    pg->send(big, 1, {9})->wait();
  } else if (me == 1) {
    Tensor small = zeros({8});  // more room than sent: MPI accepts, weft reports
    EXPECT_WEFT_ERROR(pg->recv(small, 0, {9})->wait(), "received 5 elements but the tensor holds 8");
  }
  pg->barrier()->wait();
}

TEST(Collectives, AsyncWorkCompletesOnlyWhenAllArrive) {
  auto pg = world();
  Tensor t = full({16}, 1.0);
  pg->barrier()->wait();
  if (pg->rank() != 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  WorkPtr w = pg->allreduce(t);
  if (pg->rank() == 0) {
    EXPECT_FALSE(w->is_completed());  // the others are still asleep
  }
  w->wait();
  EXPECT_TRUE(w->is_completed());
  for (double v : read(t)) EXPECT_DOUBLE_EQ(v, pg->size());
  // Several outstanding operations, waited in reverse order.
  std::vector<Tensor> ts;
  std::vector<WorkPtr> ws;
  for (int k = 0; k < 5; ++k) {
    ts.push_back(full({1000}, double(k + pg->rank())));
    ws.push_back(pg->allreduce(ts.back(), {ReduceOp::Max}));
  }
  for (int k = 4; k >= 0; --k) ws[k]->wait();
  for (int k = 0; k < 5; ++k)
    for (double v : read(ts[k])) ASSERT_DOUBLE_EQ(v, k + pg->size() - 1);
}

TEST(Collectives, WaitTimeoutNamesTheLateRankThenSucceeds) {
  auto pg = world();
  auto* mpg = dynamic_cast<ProcessGroupMPI*>(pg.get());
  ASSERT_NE(mpg, nullptr);
  pg->barrier()->wait();
  int64_t seq = mpg->sequence_number();
  if (pg->rank() == pg->size() - 1) std::this_thread::sleep_for(std::chrono::milliseconds(700));
  WorkPtr w = pg->barrier();
  if (pg->rank() == 0) {
    std::string expect = "barrier() (sequence " + std::to_string(seq) +
                         ") on world timed out after 0.2 s: " + "missing ranks: [" + std::to_string(pg->size() - 1) +
                         "] did not arrive";
    EXPECT_WEFT_ERROR(w->wait(std::chrono::milliseconds(200)), expect);
  }
  w->wait();  // the late rank arrives: the same Work completes
  EXPECT_TRUE(w->is_completed());
}

TEST(Collectives, BarrierOrders) {
  auto pg = world();
  // Rank 0 writes a file before the barrier; everyone sees it after.
  std::string path = shared_path("weft_barrier_");
  if (pg->rank() == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::ofstream(path) << "x";
  }
  pg->barrier()->wait();
  EXPECT_TRUE(std::ifstream(path).good());
  pg->barrier()->wait();
  if (pg->rank() == 0) std::remove(path.c_str());
}

TEST(Collectives, SubGroups) {
  auto pg = world();
  const int n = pg->size(), me = pg->rank();
  // Even ranks and odd ranks.
  std::vector<int> evens, odds;
  for (int r = 0; r < n; ++r) (r % 2 ? odds : evens).push_back(r);
  auto ge = pg->new_group(evens);
  auto go = pg->new_group(odds);
  auto& mine = me % 2 ? go : ge;
  auto& other = me % 2 ? ge : go;
  ASSERT_NE(mine, nullptr);
  EXPECT_EQ(other, nullptr);
  const auto& members = me % 2 ? odds : evens;
  EXPECT_EQ(mine->size(), int(members.size()));
  EXPECT_EQ(mine->global_ranks(), members);
  EXPECT_EQ(mine->global_ranks()[mine->rank()], me);
  Tensor t = full({5}, double(me));
  mine->allreduce(t)->wait();
  double expect = 0;
  for (int r : members) expect += r;
  for (double v : read(t)) EXPECT_DOUBLE_EQ(v, expect);
  // Broadcast from the sub-group's last member.
  Tensor b = full({3}, double(me));
  mine->broadcast(b, {mine->size() - 1})->wait();
  for (double v : read(b)) EXPECT_DOUBLE_EQ(v, members.back());
  // A reversed rank list: group rank 0 is the highest world rank.
  std::vector<int> rev(n);
  for (int r = 0; r < n; ++r) rev[r] = n - 1 - r;
  auto gr = pg->new_group(rev);
  ASSERT_NE(gr, nullptr);
  EXPECT_EQ(gr->rank(), n - 1 - me);
  Tensor x = full({2}, double(me));
  gr->broadcast(x, {0})->wait();
  for (double v : read(x)) EXPECT_DOUBLE_EQ(v, n - 1);
  pg->barrier()->wait();
}

// The debug-mode exchange other backends (NCCL) use on an MPI group with their
// ranks: agreement, a divergence over the whole group, a send/recv pair, and a
// reversed sub-group whose message names world ranks in group-rank order.
TEST(Collectives, CheckFingerprintForOtherBackends) {
  auto pg = std::static_pointer_cast<ProcessGroupMPI>(world());
  const int n = pg->size(), me = pg->rank();
  const int64_t seq = pg->sequence_number();
  const Duration t = std::chrono::seconds(30);
  const Fingerprint fp{5, 77, Fingerprint::kAllreduce, int64_t(DType::Float32), 8, int64_t(ReduceOp::Sum)};
  pg->check_fingerprint(fp, -1, "nccl:world", "allreduce (sequence 5)", t);
  Fingerprint odd = fp;
  if (me == 1) odd.count = 9;
  EXPECT_WEFT_ERROR(pg->check_fingerprint(odd, -1, "nccl:world", "allreduce (sequence 5)", t),
                    "collective desync on nccl:world at sequence 5 (first divergence: element count): ranks " +
                        std::string(n == 2 ? "[0]" : "[0, 2, 3]") +
                        " issue allreduce(float32, 8 elements, sum) as collective 5; ranks [1] issue "
                        "allreduce(float32, 9 elements, sum) as collective 5");

  // Pairs (0, 1) and (2, 3): the even rank sends, then both claim to send.
  const int peer = me ^ 1, lo = std::min(me, peer), hi = std::max(me, peer);
  Fingerprint pair{-1, 77, Fingerprint::kSendRecv, int64_t(DType::Float32), 4, send_recv_sub(lo, hi)};
  pg->check_fingerprint(pair, peer, "nccl:world", "send/recv", t);
  pair.sub = send_recv_sub(me, peer);
  EXPECT_WEFT_ERROR(pg->check_fingerprint(pair, peer, "nccl:world", "send/recv", t),
                    "send/recv desync on nccl:world (first divergence: reduce op / root / rank list): ranks [" +
                        std::to_string(lo) + "] issue send/recv(float32, 4 elements, rank " + std::to_string(lo) +
                        " -> rank " + std::to_string(hi) + "); ranks [" + std::to_string(hi) +
                        "] issue send/recv(float32, 4 elements, rank " + std::to_string(hi) + " -> rank " +
                        std::to_string(lo) + ")");

  // Group rank r is world rank n-1-r; group rank 0 issues a broadcast.
  std::vector<int> rev(n);
  for (int r = 0; r < n; ++r) rev[r] = n - 1 - r;
  auto sub = std::static_pointer_cast<ProcessGroupMPI>(pg->new_group(rev));
  ASSERT_NE(sub, nullptr);
  Fingerprint g = fp;
  if (sub->rank() == 0) g = {5, 77, Fingerprint::kBroadcast, int64_t(DType::Float32), 8, 0};
  EXPECT_WEFT_ERROR(
      sub->check_fingerprint(g, -1, "nccl:sub", "allreduce (sequence 5)", t),
      "collective desync on nccl:sub at sequence 5 (first divergence: collective): ranks [" + std::to_string(n - 1) +
          "] issue broadcast(float32, 8 elements, root 0) as collective 5; ranks " +
          std::string(n == 2 ? "[0]" : "[2, 1, 0]") + " issue allreduce(float32, 8 elements, sum) as collective 5");
  EXPECT_EQ(pg->sequence_number(), seq + 1);  // only new_group counts
  EXPECT_EQ(sub->sequence_number(), 0);
  pg->barrier()->wait();
}

TEST(Collectives, TimeoutFromEnvironment) {
  // mpi_test.sh sets WEFT_COLLECTIVE_TIMEOUT_S=30.
  EXPECT_EQ(default_timeout_from_env(), std::chrono::seconds(30));
  EXPECT_EQ(world()->timeout(), std::chrono::seconds(30));
  // Bad values are named: not a number, not positive, or past 1e9 s (whose
  // milliseconds would not fit the duration).
  const std::string saved = std::getenv("WEFT_COLLECTIVE_TIMEOUT_S");
  for (const char* bad : {"abc", "0", "-5", "nan", "inf", "1e300", "12s"}) {
    ::setenv("WEFT_COLLECTIVE_TIMEOUT_S", bad, 1);
    EXPECT_WEFT_ERROR(
        default_timeout_from_env(),
        std::string("WEFT_COLLECTIVE_TIMEOUT_S must be a positive number of seconds (at most 1e9), got '") + bad + "'");
  }
  ::setenv("WEFT_COLLECTIVE_TIMEOUT_S", "2.5", 1);
  EXPECT_EQ(default_timeout_from_env(), std::chrono::milliseconds(2500));
  ::setenv("WEFT_COLLECTIVE_TIMEOUT_S", saved.c_str(), 1);
}

TEST(Rank0First, RankZeroRunsFirst) {
  auto pg = world();
  std::string path = shared_path("weft_rank0_first_");
  bool saw_file = false;
  rank0_first(*pg, [&] {
    if (pg->rank() == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // others must wait for this
      std::ofstream(path) << "ready";
    } else {
      std::string s;
      std::ifstream(path) >> s;
      saw_file = s == "ready";
    }
  });
  if (pg->rank() != 0) {
    EXPECT_TRUE(saw_file) << "rank " << pg->rank() << " ran before rank 0 finished";
  }
  // Everyone ran: count with an allreduce.
  Tensor ran = full({1}, 1.0);
  pg->allreduce(ran)->wait();
  EXPECT_DOUBLE_EQ(read(ran)[0], pg->size());
  pg->barrier()->wait();
  if (pg->rank() == 0) std::remove(path.c_str());
}

TEST(Context, NestedContextOwnsNothing) {
  DistributedContext inner;
  EXPECT_FALSE(inner.owns_mpi());
  EXPECT_FALSE(inner.owns_world());
  EXPECT_EQ(inner.world_ptr(), world());
  EXPECT_EQ(inner.local_rank(), std::atoi(std::getenv("OMPI_COMM_WORLD_LOCAL_RANK")));
}

}  // namespace
}  // namespace weft::parallel
