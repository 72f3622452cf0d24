// The NCCL backend's waits (parallel/nccl/nccl_wait.h) with a fake NCCL: a call
// stuck in ncclInProgress ends as soon as the liveness check names a dead peer,
// long before the collective timeout (Note [nccl non-blocking]).
#include "parallel/nccl/nccl_wait.h"

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

TEST(NcclWait, LivenessErrorWithoutContextMatchesTheWorksMessage) {
  EXPECT_EQ(liveness_error("barrier() (sequence 2)", "nccl:group[0, 2]", "missing ranks: [2] (group ranks [1])", 1.04,
                           3.0, 10),
            "barrier() (sequence 2) on nccl:group[0, 2] failed: missing ranks: [2] (group ranks [1]) stopped "
            "responding (no heartbeat for 1 s: the process died or is stuck), 3 s after it was issued (timeout 10 s); "
            "communicator aborted");
}

}  // namespace
}  // namespace weft::parallel::detail
