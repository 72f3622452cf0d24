// parallel/comm/desync.h without any transport: describe() for every operation and
// first_divergence() against hand-written messages (agreement, a divergence in
// each field, a 3-to-1 split over 4 ranks, non-trivial global ranks, a
// send/recv pair). The MPI exchange is covered by the desync_*_test scenarios.
#include "parallel/comm/desync.h"

#include <gtest/gtest.h>

#include "core/dtype.h"
#include "parallel/comm/process_group.h"

namespace weft::parallel {
namespace {

// allreduce(float32, 8 elements, sum) as collective 3 of group 1.
Fingerprint base() { return {3, 1, Fingerprint::kAllreduce, int64_t(DType::Float32), 8, int64_t(ReduceOp::Sum)}; }

std::string diverge(const std::vector<Fingerprint>& all, const std::vector<int>& globals, int64_t seq = 3,
                    const std::string& group = "world") {
  auto err = first_divergence(group, seq, all, globals);
  EXPECT_TRUE(err.has_value());
  return err.value_or("<none>");
}

TEST(Desync, DescribeEveryOperation) {
  EXPECT_EQ(describe(base()), "allreduce(float32, 8 elements, sum) as collective 3");
  EXPECT_EQ(describe({0, 1, Fingerprint::kBroadcast, int64_t(DType::Int64), 5, 2}),
            "broadcast(int64, 5 elements, root 2) as collective 0");
  EXPECT_EQ(describe({1, 1, Fingerprint::kAllgather, int64_t(DType::BFloat16), 4, 0}),
            "allgather(bfloat16, 4 elements) as collective 1");
  EXPECT_EQ(describe({2, 1, Fingerprint::kReduceScatter, int64_t(DType::Float16), 6, int64_t(ReduceOp::Max)}),
            "reduce_scatter(float16, 6 elements, max) as collective 2");
  EXPECT_EQ(describe({7, 1, Fingerprint::kBarrier, -1, 0, 0}), "barrier() as collective 7");
  EXPECT_EQ(describe({4, 1, Fingerprint::kNewGroup, -1, 2, 1234}),
            "new_group(2 ranks, list hash 1234) as collective 4");
  EXPECT_EQ(describe({-1, 1, Fingerprint::kSendRecv, int64_t(DType::Float64), 9, send_recv_sub(3, 1)}),
            "send/recv(float64, 9 elements, rank 3 -> rank 1)");
  EXPECT_EQ(describe({5, 1, 42, 99, 1, 0}), "?(?, 1 elements) as collective 5");
}

TEST(Desync, TagsAndBatchCountsAreDescribed) {
  EXPECT_EQ(describe({-1, 1, Fingerprint::kSendRecv, int64_t(DType::Int32), 2, send_recv_sub(70000, 5, 32767)}),
            "send/recv(int32, 2 elements, rank 70000 -> rank 5, tag 32767)");
  EXPECT_EQ(describe(batch_p2p_fingerprint(1, 2, 3, 1)),
            "batch_isend_irecv(rank 1 -> rank 2: 3 messages, rank 2 -> rank 1: 1 message)");
  // A pair whose batches disagree on how many messages go up.
  Fingerprint a = batch_p2p_fingerprint(0, 1, 2, 0), b = batch_p2p_fingerprint(0, 1, 1, 0);
  EXPECT_EQ(first_divergence("nccl:world", -1, {a, b}, {0, 1}).value(),
            "send/recv desync on nccl:world (first divergence: element count): ranks [0] issue "
            "batch_isend_irecv(rank 0 -> rank 1: 2 messages, rank 1 -> rank 0: 0 messages); ranks [1] issue "
            "batch_isend_irecv(rank 0 -> rank 1: 1 message, rank 1 -> rank 0: 0 messages)");
}

TEST(Desync, AgreementIsNoError) {
  EXPECT_FALSE(first_divergence("world", 3, {base()}, {0}).has_value());
  EXPECT_FALSE(first_divergence("world", 3, {base(), base()}, {0, 1}).has_value());
  EXPECT_FALSE(first_divergence("group[1,3]", 3, {base(), base(), base(), base()}, {4, 5, 6, 7}).has_value());
}

TEST(Desync, EachFieldIsNamed) {
  Fingerprint b = base();
  Fingerprint f = b;
  f.seq = 4;
  EXPECT_EQ(diverge({b, f}, {0, 1}),
            "collective desync on world at sequence 3 (first divergence: sequence number): ranks [0] issue "
            "allreduce(float32, 8 elements, sum) as collective 3; ranks [1] issue allreduce(float32, 8 elements, "
            "sum) as collective 4");
  f = b;
  f.group = 2;
  EXPECT_EQ(diverge({b, f}, {0, 1}),
            "collective desync on world at sequence 3 (first divergence: group): ranks [0] issue allreduce(float32, 8 "
            "elements, sum) as collective 3; ranks [1] issue allreduce(float32, 8 elements, sum) as collective 3");
  f = b;
  f.op = Fingerprint::kBroadcast;
  f.sub = 0;
  EXPECT_EQ(diverge({b, f}, {0, 1}),
            "collective desync on world at sequence 3 (first divergence: collective): ranks [0] issue "
            "allreduce(float32, 8 elements, sum) as collective 3; ranks [1] issue broadcast(float32, 8 elements, "
            "root 0) as collective 3");
  f = b;
  f.dtype = int64_t(DType::Float64);
  EXPECT_EQ(diverge({b, f}, {0, 1}),
            "collective desync on world at sequence 3 (first divergence: dtype): ranks [0] issue allreduce(float32, 8 "
            "elements, sum) as collective 3; ranks [1] issue allreduce(float64, 8 elements, sum) as collective 3");
  f = b;
  f.count = 9;
  EXPECT_EQ(diverge({b, f}, {0, 1}),
            "collective desync on world at sequence 3 (first divergence: element count): ranks [0] issue "
            "allreduce(float32, 8 elements, sum) as collective 3; ranks [1] issue allreduce(float32, 9 elements, "
            "sum) as collective 3");
  f = b;
  f.sub = int64_t(ReduceOp::Avg);
  EXPECT_EQ(diverge({b, f}, {0, 1}),
            "collective desync on world at sequence 3 (first divergence: reduce op / root / rank list): ranks [0] "
            "issue allreduce(float32, 8 elements, sum) as collective 3; ranks [1] issue allreduce(float32, 8 "
            "elements, avg) as collective 3");
}

TEST(Desync, FirstFieldWinsWhenSeveralDiffer) {
  Fingerprint b = base();
  Fingerprint f = b;
  f.count = 9;
  f.sub = int64_t(ReduceOp::Min);
  f.dtype = int64_t(DType::Int32);
  EXPECT_EQ(diverge({f, b}, {0, 1}),
            "collective desync on world at sequence 3 (first divergence: dtype): ranks [0] issue allreduce(int32, 9 "
            "elements, min) as collective 3; ranks [1] issue allreduce(float32, 8 elements, sum) as collective 3");
}

TEST(Desync, ThreeAgainstOneInRankOrder) {
  Fingerprint b = base();
  Fingerprint f = b;
  f.count = 9;
  // Rank 1 differs: its side comes second, the others are listed in rank order.
  EXPECT_EQ(diverge({b, f, b, b}, {0, 1, 2, 3}),
            "collective desync on world at sequence 3 (first divergence: element count): ranks [0, 2, 3] issue "
            "allreduce(float32, 8 elements, sum) as collective 3; ranks [1] issue allreduce(float32, 9 elements, "
            "sum) as collective 3");
  // Rank 0 differs: its side comes first.
  EXPECT_EQ(diverge({f, b, b, b}, {0, 1, 2, 3}),
            "collective desync on world at sequence 3 (first divergence: element count): ranks [0] issue "
            "allreduce(float32, 9 elements, sum) as collective 3; ranks [1, 2, 3] issue allreduce(float32, 8 "
            "elements, sum) as collective 3");
}

TEST(Desync, ThreeValuesAndGlobalRanksOfASubGroup) {
  Fingerprint b = base();
  Fingerprint f = b, g = b;
  f.count = 9;
  g.count = 7;
  // Group ranks 0..3 are global ranks 6, 4, 2, 0 (a reversed sub-group).
  EXPECT_EQ(diverge({b, f, g, f}, {6, 4, 2, 0}, 3, "group[6, 4, 2, 0]"),
            "collective desync on group[6, 4, 2, 0] at sequence 3 (first divergence: element count): ranks [6] issue "
            "allreduce(float32, 8 elements, sum) as collective 3; ranks [4, 0] issue allreduce(float32, 9 elements, "
            "sum) as collective 3; ranks [2] issue allreduce(float32, 7 elements, sum) as collective 3");
}

TEST(Desync, SendRecvPair) {
  Fingerprint a = {-1, 9, Fingerprint::kSendRecv, int64_t(DType::Float32), 8, send_recv_sub(0, 1)};
  EXPECT_FALSE(first_divergence("nccl:world", -1, {a, a}, {0, 1}).has_value());
  Fingerprint b = a;
  b.sub = send_recv_sub(1, 0);  // both ranks send
  EXPECT_EQ(diverge({a, b}, {0, 1}, -1, "nccl:world"),
            "send/recv desync on nccl:world (first divergence: reduce op / root / rank list): ranks [0] issue "
            "send/recv(float32, 8 elements, rank 0 -> rank 1); ranks [1] issue send/recv(float32, 8 elements, rank 1 "
            "-> rank 0)");
}

}  // namespace
}  // namespace weft::parallel
