// The NCCL backend's waits (parallel/comm/nccl/nccl_wait.h) with a fake NCCL: a call
// stuck in ncclInProgress ends as soon as the liveness check names a dead peer,
// long before the collective timeout (Note [nccl non-blocking]); a split waits
// for its child's handle and initialisation (Note [nccl split handle]).
#include "parallel/comm/nccl/nccl_wait.h"

#include <chrono>
#include <string>

#include <gtest/gtest.h>

#include "tests/testing.h"

namespace weft::parallel::detail {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
constexpr int kOk = 0, kInProgress = 7, kFailed = 3;

TEST(NcclWait, ReturnsTheCallsStateOnceItIsNotInProgress) {
  int queries = 0;
  auto query = [&] { return ++queries < 5 ? kInProgress : kOk; };
  int polls = 0;
  EXPECT_EQ(settle_until(kInProgress, kInProgress, query, Clock::now() + milliseconds(10000), milliseconds(1),
                         [&] { ++polls; }),
            kOk);
  EXPECT_EQ(queries, 5);
  EXPECT_EQ(settle_until(kFailed, kInProgress, query, Clock::now(), milliseconds(1), [] {}), kFailed);
  EXPECT_EQ(settle_until(kOk, kInProgress, query, Clock::now(), milliseconds(1), [] {}), kOk);
}

TEST(NcclWait, GivesUpAtTheDeadline) {
  const auto t0 = Clock::now();
  EXPECT_EQ(settle_until(
                kInProgress, kInProgress, [] { return kInProgress; }, t0 + milliseconds(30), milliseconds(5), [] {}),
            kInProgress);
  EXPECT_GE(Clock::now() - t0, milliseconds(30));
}

TEST(NcclWait, ADeadPeerEndsTheWaitLongBeforeTheTimeout) {
  // A call in progress forever (a peer died); the fake heartbeats say rank 1 is
  // silent from the third poll on. The 10-minute timeout is never reached.
  int polls = 0;
  auto liveness = [&] {
    if (++polls < 3) return;
    WEFT_ERROR(liveness_error("allreduce(float32, 10 elements, sum) (sequence 4)", "nccl:world", "missing ranks: [1]",
                              2.54, 2.61, 600, "while ncclAllReduce was being queued"));
  };
  const auto t0 = Clock::now();
  EXPECT_WEFT_ERROR(settle_until(
                        kInProgress, kInProgress, [] { return kInProgress; }, t0 + std::chrono::minutes(10),
                        milliseconds(2), liveness),
                    "allreduce(float32, 10 elements, sum) (sequence 4) on nccl:world failed: missing ranks: [1] "
                    "stopped responding (no heartbeat for 2.5 s: the process died or is stuck) while ncclAllReduce "
                    "was being queued, 2.6 s after it was issued (timeout 600 s); communicator aborted");
  EXPECT_EQ(polls, 3);
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(5));
}

// Note [nccl split handle]: the parent reads ncclSuccess at once, the child's
// handle appears on the third poll and the child is in progress for two more.
TEST(NcclWait, SplitWaitsForTheChildsHandleAndItsInitialisation) {
  int handle_polls = 0, child_queries = 0;
  auto has_child = [&] { return ++handle_polls >= 3; };
  auto child_query = [&] {
    EXPECT_GE(handle_polls, 3) << "the child was queried before its handle existed";
    return ++child_queries < 3 ? kInProgress : kOk;
  };
  EXPECT_EQ(settle_split(
                kInProgress, kOk, kInProgress, /*member=*/true, has_child, [] { return kOk; }, child_query,
                Clock::now() + milliseconds(10000), milliseconds(1), [] {}),
            kOk);
  EXPECT_EQ(handle_polls, 3);
  EXPECT_EQ(child_queries, 3);
}

TEST(NcclWait, SplitOfANonMemberSettlesOnlyTheParent) {
  int parent_queries = 0;
  auto parent = [&] { return ++parent_queries < 2 ? kInProgress : kOk; };
  auto never = [] {
    ADD_FAILURE() << "a non-member has no child";
    return false;
  };
  auto child = [] {
    ADD_FAILURE() << "a non-member has no child";
    return kFailed;
  };
  EXPECT_EQ(settle_split(kInProgress, kOk, kInProgress, /*member=*/false, never, parent, child,
                         Clock::now() + milliseconds(10000), milliseconds(1), [] {}),
            kOk);
  EXPECT_EQ(parent_queries, 2);
}

TEST(NcclWait, SplitReportsFailuresAndTheDeadline) {
  // The parent fails while the handle is awaited.
  int parent_queries = 0;
  auto parent = [&] { return ++parent_queries < 2 ? kOk : kFailed; };
  EXPECT_EQ(settle_split(
                kInProgress, kOk, kInProgress, true, [] { return false; }, parent, [] { return kOk; },
                Clock::now() + milliseconds(10000), milliseconds(1), [] {}),
            kFailed);
  // The child's initialisation fails.
  EXPECT_EQ(settle_split(
                kOk, kOk, kInProgress, true, [] { return true; }, [] { return kOk; }, [] { return kFailed; },
                Clock::now() + milliseconds(10000), milliseconds(1), [] {}),
            kFailed);
  // The handle never comes: in progress at the deadline, with liveness polls meanwhile.
  int polls = 0;
  const auto t0 = Clock::now();
  EXPECT_EQ(settle_split(
                kOk, kOk, kInProgress, true, [] { return false; }, [] { return kOk; }, [] { return kOk; },
                t0 + milliseconds(30), milliseconds(5), [&] { ++polls; }),
            kInProgress);
  EXPECT_GE(Clock::now() - t0, milliseconds(30));
  EXPECT_GE(polls, 1);
}

TEST(NcclWait, LivenessErrorWithoutContextMatchesTheWorksMessage) {
  EXPECT_EQ(liveness_error("barrier() (sequence 2)", "nccl:group[0, 2]", "missing ranks: [2] (group ranks [1])", 1.04,
                           3.0, 10),
            "barrier() (sequence 2) on nccl:group[0, 2] failed: missing ranks: [2] (group ranks [1]) stopped "
            "responding (no heartbeat for 1 s: the process died or is stuck), 3 s after it was issued (timeout 10 s); "
            "communicator aborted");
}

}  // namespace
}  // namespace weft::parallel::detail
