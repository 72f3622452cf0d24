// DASO with ranks as threads over the in-process group (parallel/inproc):
// every case of tests/parallel/daso_cases.h as 2 nodes x 1 rank, 2 x 2,
// 3 x 2 and 4 x 1 (the same cases daso_mpi_test.cc runs under mpirun).
#include <gtest/gtest.h>

#include "parallel/comm/inproc/testing.h"
#include "tests/parallel/daso_cases.h"

namespace weft::parallel {
namespace {

struct Layout {
  int world, ranks_per_node;
};
class DasoWorld : public ::testing::TestWithParam<Layout> {};

#define WEFT_INPROC_DASO_CASE(Name, fn)                                                              \
  TEST_P(DasoWorld, Name) {                                                                          \
    const int rpn = GetParam().ranks_per_node;                                                       \
    run_ranks(GetParam().world, [rpn](std::shared_ptr<ProcessGroup> g) { daso_cases::fn(g, rpn); }); \
  }
WEFT_DASO_CASES(WEFT_INPROC_DASO_CASE)
#undef WEFT_INPROC_DASO_CASE

INSTANTIATE_TEST_SUITE_P(NodesByRanks, DasoWorld,
                         ::testing::Values(Layout{2, 1}, Layout{4, 2}, Layout{6, 2}, Layout{4, 1}),
                         [](const ::testing::TestParamInfo<Layout>& i) {
                           return std::to_string(i.param.world / i.param.ranks_per_node) + "x" +
                                  std::to_string(i.param.ranks_per_node);
                         });

// An in-process world is one node (its ranks are threads of one process).
TEST(NodeGroups, InProcessWorldIsOneNode) {
  run_ranks(3, [](std::shared_ptr<ProcessGroup> g) {
    NodeGroups ng = make_node_groups(g);
    EXPECT_EQ(ng.layout.str(), "1 node x 3 ranks: [0, 1, 2]");
    EXPECT_EQ(ng.node_group->size(), 3);
    EXPECT_EQ(ng.global_group->size(), 1);
  });
}

}  // namespace
}  // namespace weft::parallel
