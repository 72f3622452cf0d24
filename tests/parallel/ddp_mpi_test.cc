// DistributedDataParallel over the real MPI process group, run under mpirun
// (tests/parallel/mpi_test.sh) with 2 and 4 ranks: every case of
// tests/parallel/ddp_cases.h (the same cases ddp_test.cc runs over the
// in-process group of parallel/inproc). Every rank runs every test in the same order.
#include <gtest/gtest.h>

#include "parallel/comm/mpi/process_group_mpi.h"
#include "tests/parallel/ddp_cases.h"

namespace weft::parallel {
namespace {

#define WEFT_MPI_DDP_CASE(Name, fn) \
  TEST(DDPMPI, Name) { ddp_cases::fn(init_process_group()); }
WEFT_DDP_CASES(WEFT_MPI_DDP_CASE)
#undef WEFT_MPI_DDP_CASE

// The cases ran under mpirun with more than one rank, with the liveness
// monitor on (so its heartbeats ran alongside every case above).
TEST(DDPMPI, RanUnderMpirunWithHeartbeats) {
  EXPECT_GE(init_process_group()->size(), 2);
  EXPECT_TRUE(liveness_monitor_running());
}

}  // namespace
}  // namespace weft::parallel
