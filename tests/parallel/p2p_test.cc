// Point-to-point on ProcessGroupMPI: batch_isend_irecv (Note [batched p2p]),
// its headers (Note [p2p headers]) and plain send/recv, against values
// computed here. Run under mpirun (tests/parallel/mpi_test.sh) with 2 and 4
// ranks; every rank runs every test in the same order.
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/ops.h"
#include "parallel/comm/mpi/process_group_mpi.h"
#include "tests/testing.h"

namespace weft::parallel {
namespace {

std::shared_ptr<ProcessGroup> world() { return init_process_group(); }

const std::vector<DType> kAllDTypes = {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16,
                                       DType::Int64,   DType::Int32,   DType::UInt8,    DType::Bool};

// What rank `src` sends to rank `dst` as message `k`: small integers, exact in
// every dtype, different for every (src, dst, k, i).
double value(DType d, int src, int dst, int k, int64_t i) {
  if (d == DType::Bool) return (i + src + 2 * dst + k) % 3 == 0 ? 1 : 0;
  return double((i * 3 + src * 7 + dst * 5 + k * 11) % 17);
}

Tensor message(DType d, int src, int dst, int k, int64_t n) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = value(d, src, dst, k, i);
  return tensor<double>(v, {n}).to(d);
}

// Asserts `got` holds message(d, src, dst, k, n).
void expect_message(const Tensor& got, DType d, int src, int dst, int k) {
  Tensor g = got.to(DType::Float64).contiguous();
  const double* p = g.data_ptr<double>();
  for (int64_t i = 0; i < g.numel(); ++i)
    ASSERT_EQ(p[i], value(d, src, dst, k, i)) << "message " << k << " from " << src << " to " << dst << " at " << i;
}

// Ranks paired as (0, 1), (2, 3), ...; the last rank of an odd world has none.
int partner(int rank, int size) {
  int p = rank ^ 1;
  return p < size ? p : -1;
}

TEST(BatchP2P, TwoRanksExchangeBothWaysAtOnce) {
  auto pg = world();
  const int me = pg->rank(), other = partner(me, pg->size());
  if (other < 0) return;
  // 4 MiB each way: far above Open MPI's eager limit, so a send completes only
  // once the peer's receive is posted. Separate blocking send-then-recv on both
  // ranks would deadlock; the batch posts both at once.
  const int64_t n = int64_t(1) << 20;
  Tensor out = message(DType::Float32, me, other, 0, n);
  Tensor in = zeros({n});
  WorkPtr w = pg->batch_isend_irecv({P2POp::send(out, other), P2POp::recv(in, other)});
  w->wait();
  EXPECT_TRUE(w->is_completed());
  expect_message(in, DType::Float32, other, me, 0);
}

TEST(BatchP2P, RingBothDirectionsEveryDType) {
  auto pg = world();
  const int n = pg->size(), me = pg->rank();
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  for (DType d : kAllDTypes) {
    // With 2 ranks next == prev: two messages each way between the pair, told
    // apart by their tags.
    Tensor to_next = message(d, me, next, 1, 41), to_prev = message(d, me, prev, 2, 43);
    Tensor from_prev = zeros({41}, {d}), from_next = zeros({43}, {d});
    pg->batch_isend_irecv({P2POp::recv(from_prev, prev, 1), P2POp::send(to_next, next, 1),
                           P2POp::recv(from_next, next, 2), P2POp::send(to_prev, prev, 2)})
        ->wait();
    expect_message(from_prev, d, prev, me, 1);
    expect_message(from_next, d, next, me, 2);
  }
}

TEST(BatchP2P, TagsMatchOutOfOrderAndRepeatsInOrder) {
  auto pg = world();
  const int me = pg->rank(), other = partner(me, pg->size());
  if (other < 0) return;
  const bool sender = me < other;
  if (sender) {
    // Tag 7 twice, then tag 3.
    pg->batch_isend_irecv({P2POp::send(message(DType::Int64, me, other, 0, 5), other, 7),
                           P2POp::send(message(DType::Int64, me, other, 1, 5), other, 7),
                           P2POp::send(message(DType::Int64, me, other, 2, 6), other, 3)})
        ->wait();
  } else {
    // Tag 3 first: matched by tag, not by position; the two tag-7 messages in
    // the order they were sent.
    Tensor a = zeros({6}, {DType::Int64}), b = zeros({5}, {DType::Int64}), c = zeros({5}, {DType::Int64});
    pg->batch_isend_irecv({P2POp::recv(a, other, 3), P2POp::recv(b, other, 7), P2POp::recv(c, other, 7)})->wait();
    expect_message(a, DType::Int64, other, me, 2);
    expect_message(b, DType::Int64, other, me, 0);
    expect_message(c, DType::Int64, other, me, 1);
  }
}

TEST(BatchP2P, PlainSendMatchesBatchedRecv) {
  auto pg = world();
  const int me = pg->rank(), other = partner(me, pg->size());
  if (other < 0) return;
  if (me < other) {
    pg->send(message(DType::Float64, me, other, 4, 9), other, {11})->wait();
    Tensor back = zeros({9}, {DType::Float64});
    pg->recv(back, other, {12})->wait();
    expect_message(back, DType::Float64, other, me, 5);
  } else {
    Tensor in = zeros({9}, {DType::Float64});
    pg->batch_isend_irecv(
          {P2POp::recv(in, other, 11), P2POp::send(message(DType::Float64, me, other, 5, 9), other, 12)})
        ->wait();
    expect_message(in, DType::Float64, other, me, 4);
  }
}

TEST(BatchP2P, EmptyBatchCompletesAtOnce) {
  auto pg = world();
  WorkPtr w = pg->batch_isend_irecv({});
  EXPECT_TRUE(w->is_completed());
  w->wait();
}

TEST(BatchP2P, MismatchedSizesAndDTypesAreNamed) {
  auto pg = world();
  const int me = pg->rank(), other = partner(me, pg->size());
  if (other < 0) return;
  const bool sender = me < other;
  const std::string s = std::to_string(me), o = std::to_string(other);
  if (sender) {
    // Fewer elements than the receive holds, more (MPI truncates), another
    // dtype of the same byte size. The sends themselves complete.
    pg->batch_isend_irecv({P2POp::send(zeros({5}), other, 1)})->wait();
    pg->batch_isend_irecv({P2POp::send(zeros({12}), other, 2)})->wait();
    pg->batch_isend_irecv({P2POp::send(zeros({4}), other, 3)})->wait();
  } else {
    Tensor small = zeros({8});
    EXPECT_WEFT_ERROR(pg->batch_isend_irecv({P2POp::recv(small, other, 1)})->wait(),
                      "batch_isend_irecv(1 ops) on world failed: send(float32, 5 elements, to rank " + s +
                          ", tag 1) of rank " + o + " and recv(float32, 8 elements, from rank " + o +
                          ", tag 1) of rank " + s +
                          " on world do not match: received 5 elements but the tensor holds 8");
    Tensor truncated = zeros({8});
    EXPECT_WEFT_ERROR(pg->batch_isend_irecv({P2POp::recv(truncated, other, 2)})->wait(),
                      "send(float32, 12 elements, to rank " + s + ", tag 2) of rank " + o +
                          " and recv(float32, 8 elements, from rank " + o + ", tag 2) of rank " + s +
                          " on world do not match: received 12 elements but the tensor holds 8");
    Tensor ints = zeros({4}, {DType::Int32});
    EXPECT_WEFT_ERROR(pg->recv(ints, other, {3})->wait(),
                      "do not match: the send has 4 float32 elements, the receive 4 int32");
  }
  // The pair still works afterwards.
  Tensor in = zeros({3});
  pg->batch_isend_irecv({P2POp::send(message(DType::Float32, me, other, 6, 3), other, 4), P2POp::recv(in, other, 4)})
      ->wait();
  expect_message(in, DType::Float32, other, me, 6);
}

TEST(BatchP2P, BadOperationsAreNamed) {
  auto pg = world();
  const int n = pg->size(), me = pg->rank();
  Tensor t = zeros({2});
  EXPECT_WEFT_ERROR(pg->batch_isend_irecv({P2POp::send(t, (me + 1) % n), P2POp::recv(t, n)}),
                    "batch_isend_irecv(2 ops): op 1 (recv): rank " + std::to_string(n) + " is not in world (size " +
                        std::to_string(n) + ")");
  EXPECT_WEFT_ERROR(pg->batch_isend_irecv({P2POp::send(t, me)}),
                    "batch_isend_irecv(1 ops): op 0 (send): rank " + std::to_string(me) +
                        " is this rank; send/recv to self is not supported");
  EXPECT_WEFT_ERROR(pg->batch_isend_irecv({P2POp::send(t, (me + 1) % n, 40000)}),
                    "op 0 (send): tag must be in [0, 32767], got 40000");
  EXPECT_WEFT_ERROR(pg->batch_isend_irecv({P2POp::recv(Tensor(), (me + 1) % n)}), "op 0 (recv): tensor is undefined");
  Tensor strided = zeros({4, 4}).transpose(0, 1);
  EXPECT_WEFT_ERROR(pg->batch_isend_irecv({P2POp::send(strided, (me + 1) % n)}),
                    "op 0 (send): tensor must be contiguous");
}

TEST(BatchP2P, TimeoutNamesThePeerAndThePendingOperationsThenCompletes) {
  auto pg = world();
  const int me = pg->rank(), other = partner(me, pg->size());
  if (other < 0) {
    pg->barrier()->wait();
    return;
  }
  const bool waiter = me < other;
  const std::string o = std::to_string(other);
  if (waiter) {
    Tensor in = zeros({4}), out = message(DType::Float32, me, other, 8, 2);
    WorkPtr w = pg->batch_isend_irecv({P2POp::send(out, other, 21), P2POp::recv(in, other, 22)});
    EXPECT_WEFT_ERROR(w->wait(std::chrono::milliseconds(200)),
                      "batch_isend_irecv(2 ops) on world timed out after 0.2 s: missing ranks: [" + o +
                          "] (the peer did not post the matching operation); pending: recv(float32, 4 elements, from "
                          "rank " +
                          o + ", tag 22)");
    pg->barrier()->wait();  // now the peer posts its side
    w->wait();
    expect_message(in, DType::Float32, other, me, 9);
  } else {
    pg->barrier()->wait();
    Tensor in = zeros({2});
    pg->batch_isend_irecv(
          {P2POp::recv(in, other, 21), P2POp::send(message(DType::Float32, me, other, 9, 4), other, 22)})
        ->wait();
    expect_message(in, DType::Float32, other, me, 8);
  }
}

TEST(BatchP2P, SubGroupRanksAreGroupRanks) {
  auto pg = world();
  const int n = pg->size();
  // The odd ranks, in reverse: with 4 ranks, group rank 0 is world rank 3.
  std::vector<int> odd;
  for (int r = n - 1; r >= 0; --r)
    if (r % 2 == 1) odd.push_back(r);
  auto sub = pg->new_group(odd);
  if (sub == nullptr) return;
  const int m = sub->size(), gr = sub->rank();
  if (m < 2) return;
  const int next = (gr + 1) % m, prev = (gr + m - 1) % m;
  Tensor in = zeros({7});
  sub->batch_isend_irecv({P2POp::send(message(DType::Float32, gr, next, 3, 7), next), P2POp::recv(in, prev)})->wait();
  expect_message(in, DType::Float32, prev, gr, 3);
  Tensor bad = zeros({1});
  EXPECT_WEFT_ERROR(sub->batch_isend_irecv({P2POp::send(bad, m)}), "rank " + std::to_string(m) + " is not in group[");
}

}  // namespace
}  // namespace weft::parallel
