// DASO over the real MPI group under mpirun (tests/parallel/mpi_test.sh):
// every case of tests/parallel/daso_cases.h with -np 2 as 2 pretend nodes x 1
// rank and -np 4 as 2 x 2 (ranks_per_node = size / 2), and MPI's
// shared-memory split, which puts every rank of this machine on one node.
#include <gtest/gtest.h>

#include "parallel/comm/mpi/process_group_mpi.h"
#include "tests/parallel/daso_cases.h"

namespace weft::parallel {
namespace {

#define WEFT_MPI_DASO_CASE(Name, fn)          \
  TEST(DasoMPI, Name) {                       \
    auto world = init_process_group();        \
    daso_cases::fn(world, world->size() / 2); \
  }
WEFT_DASO_CASES(WEFT_MPI_DASO_CASE)
#undef WEFT_MPI_DASO_CASE

TEST(DasoMPI, SharedMemorySplitFindsOneNode) {
  auto world = init_process_group();
  ASSERT_GE(world->size(), 2);
  NodeGroups g = make_node_groups(world);
  EXPECT_EQ(g.num_nodes(), 1);
  EXPECT_EQ(g.ranks_per_node(), world->size());
  EXPECT_EQ(g.node_group->size(), world->size());
  EXPECT_EQ(g.global_group->size(), 1);
  EXPECT_EQ(shared_memory_node_ids(*world), std::vector<int>(world->size(), 0));
}

}  // namespace
}  // namespace weft::parallel
