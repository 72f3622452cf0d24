// ZeroOptimizer (parallel/data/zero.h) over the real MPI process group, run under
// mpirun (tests/parallel/mpi_test.sh) with 2 and 4 ranks: every case of
// tests/parallel/zero_cases.h (the same cases zero_test.cc runs over the
// in-process group). Every rank runs every test in the same order.
#include <gtest/gtest.h>

#include "parallel/comm/mpi/process_group_mpi.h"
#include "tests/parallel/zero_cases.h"

namespace weft::parallel {
namespace {

#define WEFT_MPI_ZERO_CASE(Name, fn) \
  TEST(ZeroMPI, Name) { zero_cases::fn(init_process_group()); }
WEFT_ZERO_CASES(WEFT_MPI_ZERO_CASE)
#undef WEFT_MPI_ZERO_CASE

TEST(ZeroMPI, RanUnderMpirun) { EXPECT_GE(init_process_group()->size(), 2); }

}  // namespace
}  // namespace weft::parallel
