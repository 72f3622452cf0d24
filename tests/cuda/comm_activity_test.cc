// Communication in flight (core/cuda/comm_activity.h), with fake probes.
#include "core/cuda/comm_activity.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include <gtest/gtest.h>

namespace weft::cuda {
namespace {

using std::chrono::milliseconds;

TEST(CommActivity, CountsWorkUntilItsProbeSaysDone) {
  CommActivity a;
  auto done1 = std::make_shared<std::atomic<bool>>(false), done2 = std::make_shared<std::atomic<bool>>(false);
  a.add(0, [done1] { return done1->load(); });
  a.add(0, [done2] { return done2->load(); });
  a.add(1, [] { return true; });
  EXPECT_EQ(a.in_flight(0), 2);
  EXPECT_EQ(a.in_flight(1), 0);
  EXPECT_EQ(a.in_flight(3), 0);
  *done1 = true;
  EXPECT_EQ(a.in_flight(0), 1);
  *done2 = true;
  EXPECT_EQ(a.in_flight(0), 0);
}

TEST(CommActivity, WaitIdleReturnsWhenTheWorkFinishes) {
  CommActivity a;
  auto done = std::make_shared<std::atomic<bool>>(false);
  a.add(0, [done] { return done->load(); });
  std::thread t([done] {
    std::this_thread::sleep_for(milliseconds(50));
    *done = true;
  });
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(a.wait_idle(0, milliseconds(10000)), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, milliseconds(5000));
  t.join();
}

TEST(CommActivity, WaitIdleGivesUpAfterTheBudget) {
  CommActivity a;
  a.add(0, [] { return false; });  // a kernel waiting for a dead peer
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(a.wait_idle(0, milliseconds(30)), 1);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, milliseconds(30));
}

TEST(CommActivity, FinishedWorkIsDroppedAsNewWorkArrives) {
  CommActivity a;
  auto polls = std::make_shared<std::atomic<int>>(0);
  for (int i = 0; i < 1000; ++i) a.add(0, [polls] { return ++*polls, true; });
  // no one polled explicitly, yet the list stayed short: add() pruned it
  EXPECT_GT(polls->load(), 900);
  EXPECT_EQ(a.in_flight(0), 0);
}

}  // namespace
}  // namespace weft::cuda
