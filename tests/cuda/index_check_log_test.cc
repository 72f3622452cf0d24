// The host bookkeeping of Note [deferred index checks] (core/cuda/index_check_log.h).
#include "core/cuda/index_check_log.h"

#include <vector>

#include <gtest/gtest.h>

#include "tests/testing.h"

namespace weft::cuda {
namespace {

void* const kS0 = nullptr;
void* const kS1 = reinterpret_cast<void*>(0x10);

TEST(IndexCheckLog, NoBadIndexNoError) {
  IndexCheckLog log;
  EXPECT_TRUE(log.empty());
  EXPECT_EQ(log.take({"embedding", "index", 4, kS0}), 0);
  EXPECT_EQ(log.take({"cross_entropy", "target", 10, kS0}), 1);
  std::vector<int64_t> words(4, 0);
  EXPECT_EQ(log.settle(words.data(), 2), "");
  EXPECT_TRUE(log.empty());
}

TEST(IndexCheckLog, ReportsTheFirstBadIndexInIssueOrder) {
  IndexCheckLog log;
  log.take({"embedding", "index", 4, kS0});
  log.take({"gather", "index", 3, kS1});
  log.take({"nll_loss", "target", 5, kS0});
  EXPECT_EQ(log.streams(), (std::vector<void*>{kS0, kS1}));
  std::vector<int64_t> words = {0, 0, 1, 9, 1, -1};
  EXPECT_EQ(log.settle(words.data(), 3),
            "gather: index 9 is out of bounds (valid range [0, 3)) (checked on the GPU, reported at the next "
            "synchronisation)");
  EXPECT_TRUE(log.empty());  // the log is clear for the next ops
}

TEST(IndexCheckLog, FullLogAsksForAFlush) {
  IndexCheckLog log;
  for (int i = 0; i < IndexCheckLog::kSlots; ++i) EXPECT_EQ(log.take({"embedding", "index", 4, kS0}), i);
  EXPECT_EQ(log.take({"embedding", "index", 4, kS0}), -1);
  std::vector<int64_t> words(2 * IndexCheckLog::kSlots, 0);
  words[2 * 700] = 1;
  words[2 * 700 + 1] = 12;
  EXPECT_NE(log.settle(words.data(), IndexCheckLog::kSlots).find("embedding: index 12 is out of bounds"),
            std::string::npos);
  EXPECT_EQ(log.take({"embedding", "index", 4, kS0}), 0);
}

TEST(IndexCheckLog, SettleChecksTheCount) {
  IndexCheckLog log;
  log.take({"embedding", "index", 4, kS0});
  std::vector<int64_t> words(4, 0);
  EXPECT_WEFT_ERROR(log.settle(words.data(), 2), "2 slots read, 1 in use");
}

}  // namespace
}  // namespace weft::cuda
