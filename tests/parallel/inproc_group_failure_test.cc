// ProcessGroupInProc (parallel/comm/inproc), the rest of its contract with
// ranks as threads: timeouts naming the missing ranks (global ranks, and group
// ranks on sub-groups), collective desync (new_group lists included), ranks
// whose threads threw or returned, sub-groups (reversed, nested, disjoint ones
// running concurrently), argument errors and a one-rank world. Timeouts are
// short (200 ms). The operations' values: inproc_group_test.cc.
#include <chrono>
#include <latch>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/ops.h"
#include "parallel/comm/inproc/process_group_inproc.h"
#include "parallel/comm/inproc/testing.h"
#include "tests/parallel/error_text.h"
#include "tests/testing.h"

namespace weft::parallel {
namespace {

using GroupPtr = std::shared_ptr<ProcessGroup>;
using std::chrono::milliseconds;
using weft::testing::tensor_near;
using Clock = std::chrono::steady_clock;

constexpr milliseconds kShort{200};

using weft::testing::error_of;

double since_s(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

Tensor f32(const std::vector<double>& v) { return tensor<double>(v, {int64_t(v.size())}).to(DType::Float32); }

// ---- timeouts ----

TEST(InProc, CollectiveTimeoutNamesTheMissingRank) {
  std::latch timed_out(2), issued(2);
  std::vector<std::string> errs(2);
  std::vector<double> took(2);
  run_ranks(3, [&](GroupPtr g) {
    g->set_timeout(kShort);
    if (g->rank() == 2) {  // never issues it; stays alive until the others gave up
      timed_out.wait();
      return;
    }
    Tensor t = zeros({8});
    g->barrier(BarrierOptions{milliseconds(5000)});  // sequence 0: rank 2 misses this one too
    auto start = Clock::now();
    WorkPtr w = g->allreduce(t);
    issued.arrive_and_wait();  // both arrived: exactly rank 2 is missing
    errs[g->rank()] = error_of([&] { w->wait(); });
    took[g->rank()] = since_s(start);
    timed_out.count_down();
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_HAS(errs[r],
               "allreduce(float32, 8 elements, sum) (sequence 1) on world timed out after 0.2 s: "
               "missing ranks: [2] did not arrive");
    EXPECT_GE(took[r], 0.19);
    EXPECT_LT(took[r], 5.0);
  }
}

TEST(InProc, WaitTimeoutOverridesAndP2PTimeoutNamesThePeer) {
  std::latch done(1);
  run_ranks(2, [&](GroupPtr g) {
    if (g->rank() == 1) {
      done.wait();
      return;
    }
    g->set_timeout(kShort);
    Tensor t = zeros({3});
    WorkPtr w = g->recv(t, 1, {4});
    EXPECT_HAS(error_of([&] { w->wait(milliseconds(50)); }),
               "recv(float32, 3 elements, from rank 1, tag 4) on world timed out after 0.05 s: missing ranks: [1] "
               "(the peer did not post the matching operation)");
    EXPECT_FALSE(w->is_completed());
    EXPECT_HAS(error_of([&] { w->wait(); }), "timed out after 0.2 s");
    Tensor a = zeros({2}), b = zeros({2});
    std::string e = error_of([&] { g->batch_isend_irecv({P2POp::send(a, 1, 1), P2POp::recv(b, 1, 2)})->wait(); });
    EXPECT_HAS(e,
               "batch_isend_irecv(2 ops) on world timed out after 0.2 s: missing ranks: [1] (the peer did not "
               "post the matching operation); pending: send(float32, 2 elements, to rank 1, tag 1), "
               "recv(float32, 2 elements, from rank 1, tag 2)");
    done.count_down();
  });
}

// ---- desync ----

TEST(InProc, DifferentCollectivesAtOneSequenceNameBoth) {
  std::vector<std::string> errs(3);
  std::latch first(3), second(3);  // every rank issued before any waits: the messages name all three
  run_ranks(3, [&](GroupPtr g) {
    Tensor t = zeros({4});
    WorkPtr w = g->rank() == 1 ? g->broadcast(t) : g->allreduce(t);
    first.arrive_and_wait();
    errs[g->rank()] = error_of([&] { w->wait(); });
    // The sequence stays aligned: the next collective works.
    Tensor one = f32({1});
    g->allreduce(one)->wait();
    EXPECT_TRUE(tensor_near(one, {3}, 0));
    // A count mismatch is a desync too.
    Tensor c = zeros({g->rank() == 2 ? 5 : 4});
    WorkPtr wc = g->allreduce(c);
    second.arrive_and_wait();
    std::string e = error_of([&] { wc->wait(); });
    EXPECT_HAS(e,
               "collective desync on world at sequence 2: ranks [0, 1] issued allreduce(float32, 4 elements, "
               "sum); ranks [2] issued allreduce(float32, 5 elements, sum)");
  });
  for (const auto& e : errs)
    EXPECT_HAS(e,
               "collective desync on world at sequence 0: ranks [0, 2] issued allreduce(float32, 4 elements, "
               "sum); ranks [1] issued broadcast(float32, 4 elements, root 0)");
}

TEST(InProc, NewGroupWithDifferentListsIsADesync) {
  std::vector<std::string> errs(2);
  run_ranks(2, [&](GroupPtr g) {
    errs[g->rank()] = error_of([&] { g->new_group(g->rank() == 0 ? std::vector<int>{0, 1} : std::vector<int>{1, 0}); });
  });
  for (const auto& e : errs)
    EXPECT_HAS(e,
               "collective desync on world at sequence 0: ranks [0] issued new_group[0, 1]; ranks [1] issued "
               "new_group[1, 0]");
}

// ---- ranks whose threads end ----

TEST(InProc, ThrowingRankFailsPeersPromptlyAndRunRanksRethrowsIt) {
  std::mutex m;
  std::vector<std::string> errs;
  auto start = Clock::now();
  std::string outer = error_of([&] {
    run_ranks(3, [&](GroupPtr g) {  // the default 60 s timeout: only the exit can end the waits quickly
      if (g->rank() == 1) throw std::runtime_error("boom in rank 1");
      Tensor t = zeros({8});
      std::string e = error_of([&] { g->allreduce(t)->wait(); });
      std::lock_guard<std::mutex> l(m);
      errs.push_back(e);
    });
  });
  EXPECT_LT(since_s(start), 10.0);
  EXPECT_HAS(outer, "run_ranks: rank 1 of 3 failed: boom in rank 1");
  ASSERT_EQ(errs.size(), 2u);
  for (const auto& e : errs)
    EXPECT_HAS(e,
               "allreduce(float32, 8 elements, sum) (sequence 0) on world failed: missing ranks: [1] exited "
               "before issuing it (rank 1: its thread threw: boom in rank 1)");
}

TEST(InProc, ReturnedRankFailsARecvWaitingOnIt) {
  std::string err;
  auto start = Clock::now();
  run_ranks(2, [&](GroupPtr g) {
    if (g->rank() == 0) return;
    Tensor t = zeros({2});
    err = error_of([&] { g->recv(t, 0, {1})->wait(); });
  });
  EXPECT_LT(since_s(start), 10.0);
  EXPECT_HAS(err,
             "recv(float32, 2 elements, from rank 0, tag 1) on world failed: missing ranks: [0] exited before "
             "posting the matching operation (rank 0: its thread returned)");
}

// A rank that issued its part and then exited does not fail the others.
TEST(InProc, ExitAfterIssuingIsNotAFailure) {
  run_ranks(2, [](GroupPtr g) {
    Tensor t = f32({1.0 + g->rank()});
    if (g->rank() == 0) {
      g->allreduce(t);
      g->send(f32({9}), 1);
      return;  // without waiting
    }
    std::this_thread::sleep_for(milliseconds(30));
    g->allreduce(t)->wait();
    EXPECT_TRUE(tensor_near(t, {3}, 0));
    Tensor y = zeros({1});
    g->recv(y, 0)->wait();
    EXPECT_TRUE(tensor_near(y, {9}, 0));
  });
}

// ---- sub-groups ----

TEST(InProc, ReversedAndNestedSubGroups) {
  run_ranks(4, [](GroupPtr g) {
    const int me = g->rank();
    g->set_timeout(milliseconds(30000));
    auto rev = g->new_group({3, 2, 1, 0});
    ASSERT_NE(rev, nullptr);
    auto* pg = dynamic_cast<ProcessGroupInProc*>(rev.get());
    EXPECT_EQ(pg->name(), "group[3, 2, 1, 0]");
    EXPECT_EQ(rev->rank(), 3 - me);
    EXPECT_EQ(rev->size(), 4);
    EXPECT_EQ(rev->global_ranks(), (std::vector<int>{3, 2, 1, 0}));
    EXPECT_EQ(rev->timeout(), milliseconds(30000));  // inherited
    Tensor t = f32({double(me)});
    rev->broadcast(t, {0})->wait();  // group rank 0 is global rank 3
    EXPECT_TRUE(tensor_near(t, {3}, 0));
    std::vector<Tensor> outs(4);
    for (auto& o : outs) o = zeros({1});
    rev->allgather(outs, f32({double(me)}))->wait();
    for (int k = 0; k < 4; ++k) EXPECT_TRUE(tensor_near(outs[k], {3.0 - k}, 0));
    // group rank 0 (global 3) sends to group rank 1 (global 2)
    if (me == 3) rev->send(f32({33}), 1)->wait();
    if (me == 2) {
      Tensor y = zeros({1});
      rev->recv(y, 0)->wait();
      EXPECT_TRUE(tensor_near(y, {33}, 0));
    }
    // nested: group ranks 1 and 2 of `rev` are global 2 and 1
    auto inner = rev->new_group({1, 2});
    if (me == 2 || me == 1) {
      ASSERT_NE(inner, nullptr);
      EXPECT_EQ(inner->global_ranks(), (std::vector<int>{2, 1}));
      EXPECT_EQ(inner->rank(), me == 2 ? 0 : 1);
      Tensor s = f32({double(me)});
      inner->allreduce(s, {ReduceOp::Max})->wait();
      EXPECT_TRUE(tensor_near(s, {2}, 0));
    } else {
      EXPECT_EQ(inner, nullptr);
    }
    // three of four: global rank 2 is not a member
    auto three = g->new_group({1, 3, 0});
    if (me == 2) {
      EXPECT_EQ(three, nullptr);
    } else {
      ASSERT_NE(three, nullptr);
      std::vector<Tensor> in = {f32({1.0 * me}), f32({10.0 * me}), f32({100.0 * me})};
      Tensor out = zeros({1});
      three->reduce_scatter(out, in)->wait();
      const double scale[] = {1, 10, 100};
      EXPECT_TRUE(tensor_near(out, {4 * scale[three->rank()]}, 0));  // 1 + 3 + 0
    }
  });
}

TEST(InProc, DisjointSubGroupsRunConcurrently) {
  run_ranks(4, [](GroupPtr g) {
    const int me = g->rank();
    auto a = g->new_group({0, 1});
    auto b = g->new_group({2, 3});
    EXPECT_EQ(a == nullptr, me >= 2);
    EXPECT_EQ(b == nullptr, me < 2);
    auto mine = me < 2 ? a : b;
    const int base = me < 2 ? 0 : 2;
    for (int k = 0; k < 50; ++k) {
      Tensor t = tensor<int64_t>({me * 1000 + k}, {1});
      mine->allreduce(t)->wait();
      EXPECT_EQ(t.data_ptr<int64_t>()[0], (2 * base + 1) * 1000 + 2 * k) << "iteration " << k;
      Tensor x = f32({double(me * 10 + k)}), y = zeros({1});
      mine->batch_isend_irecv({P2POp::send(x, 1 - mine->rank(), k), P2POp::recv(y, 1 - mine->rank(), k)})->wait();
      const int peer = mine->global_ranks()[1 - mine->rank()];
      EXPECT_TRUE(tensor_near(y, {double(peer * 10 + k)}, 0));
    }
    EXPECT_EQ(dynamic_cast<ProcessGroupInProc*>(mine.get())->sequence_number(), 50);
    g->barrier()->wait();
  });
}

TEST(InProc, SubGroupTimeoutNamesGlobalAndGroupRanks) {
  std::latch timed_out(2), issued(2);
  std::vector<std::string> errs(4);
  run_ranks(4, [&](GroupPtr g) {
    auto sub = g->new_group({3, 1, 0});
    if (g->rank() == 2) return;
    if (g->rank() == 0) {
      timed_out.wait();
      return;
    }
    sub->set_timeout(kShort);
    Tensor t = zeros({2});
    WorkPtr w = sub->allreduce(t, {ReduceOp::Max});
    issued.arrive_and_wait();
    errs[g->rank()] = error_of([&] { w->wait(); });
    timed_out.count_down();
  });
  for (int r : {1, 3})
    EXPECT_HAS(errs[r],
               "allreduce(float32, 2 elements, max) (sequence 0) on group[3, 1, 0] timed out after 0.2 s: "
               "missing ranks: [0] (group ranks [2]) did not arrive");
}

// ---- argument errors, one-rank world ----

TEST(InProc, ArgumentErrors) {
  auto world = ProcessGroupInProc::create_world(2);
  auto& g = *world[0];
  Tensor i = zeros({2}, {DType::Int64});
  EXPECT_WEFT_ERROR(g.allreduce(i, {ReduceOp::Avg}), "allreduce: ReduceOp::avg needs a floating dtype, got int64");
  Tensor f = zeros({2});
  EXPECT_WEFT_ERROR(g.broadcast(f, {2}), "broadcast: root 2 is not a rank of world (size 2)");
  std::vector<Tensor> one = {zeros({2})};
  EXPECT_WEFT_ERROR(g.allgather(one, f), "allgather: expected 2 output tensors (group size), got 1");
  std::vector<Tensor> mixed = {zeros({2}), zeros({3})};
  EXPECT_WEFT_ERROR(g.reduce_scatter(f, mixed), "reduce_scatter: input 1 has shape [3]");
  EXPECT_WEFT_ERROR(g.send(f, 0), "send: rank 0 is this rank");
  EXPECT_WEFT_ERROR(g.recv(f, 2), "recv: rank 2 is not in world (size 2)");
  EXPECT_WEFT_ERROR(g.send(f, 1, {-1}), "send: tag must be in [0, 32767], got -1");
  Tensor nc = zeros({2, 3}).t();
  EXPECT_WEFT_ERROR(g.allreduce(nc), "allreduce: tensor must be contiguous");
  EXPECT_WEFT_ERROR(g.batch_isend_irecv({P2POp::send(f, 1), P2POp::recv(nc, 1)}),
                    "batch_isend_irecv(2 ops): op 1 (recv): tensor must be contiguous");
  EXPECT_WEFT_ERROR(g.new_group({}), "new_group: the rank list is empty");
  EXPECT_WEFT_ERROR(g.new_group({1, 1}), "new_group: rank 1 is listed twice");
  EXPECT_WEFT_ERROR(g.new_group({2}), "new_group: rank 2 is not in world (size 2)");
  EXPECT_EQ(g.sequence_number(), 0);  // nothing was issued
  EXPECT_WEFT_ERROR(ProcessGroupInProc::create_world(0), "need at least one rank");
  EXPECT_WEFT_ERROR(run_ranks(0, [](GroupPtr) {}), "need at least one rank");
}

TEST(InProc, OneRankWorldCompletesAtOnce) {
  auto g = ProcessGroupInProc::create_world(1)[0];
  Tensor t = f32({2, 3});
  WorkPtr w = g->allreduce(t, {ReduceOp::Avg});
  EXPECT_TRUE(w->is_completed());
  w->wait();
  EXPECT_TRUE(tensor_near(t, {2, 3}, 0));
  auto self = g->new_group({0});
  ASSERT_NE(self, nullptr);
  EXPECT_EQ(self->size(), 1);
}

}  // namespace
}  // namespace weft::parallel
