// gtest main for multi-process tests run under mpirun: every rank runs every
// test in the same order inside one DistributedContext. Rank 0 prints the
// usual gtest output; other ranks print only their failures, prefixed by rank.
// Each rank's exit status is its own result, so mpirun fails if any rank does.
#include <cstdio>

#include <gtest/gtest.h>

#include "parallel/comm/mpi/context.h"

namespace {
class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?",
                   r.line_number(), r.summary());
  }

 private:
  int rank_;
};
}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  int rc = 0;
  {
    weft::parallel::DistributedContext ctx;
    if (ctx.rank() != 0) {
      auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
      delete listeners.Release(listeners.default_result_printer());
      listeners.Append(new FailurePrinter(ctx.rank()));
    }
    rc = RUN_ALL_TESTS();
  }
  return rc;
}
