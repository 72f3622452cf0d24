// DistributedDataParallel with ranks as threads of one process over the
// in-process group (parallel/comm/inproc/process_group_inproc.h), 2 and 4 ranks: every case
// of tests/parallel/ddp_cases.h (the same cases ddp_mpi_test.cc runs over MPI).
#include <gtest/gtest.h>

#include "parallel/comm/inproc/testing.h"
#include "tests/parallel/ddp_cases.h"

namespace weft::parallel {
namespace {

class DDPWorld : public ::testing::TestWithParam<int> {};

#define WEFT_INPROC_DDP_CASE(Name, fn)                                                \
  TEST_P(DDPWorld, Name) {                                                            \
    run_ranks(GetParam(), [](std::shared_ptr<ProcessGroup> g) { ddp_cases::fn(g); }); \
  }
WEFT_DDP_CASES(WEFT_INPROC_DDP_CASE)
#undef WEFT_INPROC_DDP_CASE

INSTANTIATE_TEST_SUITE_P(Ranks, DDPWorld, ::testing::Values(2, 4));

}  // namespace
}  // namespace weft::parallel
