// The grid's hosts: host_layout worked by hand for both placements of pp 2 x
// dp 2 on 2 hosts, one host, data parallelism alone and a mixed case; and
// make_grid gathers every rank's host name.
#include "parallel/hybrid/grid.h"

#include <gtest/gtest.h>

#include "parallel/comm/inproc/testing.h"
#include "tests/testing.h"

namespace weft::parallel::hybrid {
namespace {

TEST(Grid, HostLayoutSaysWhichRanksShareAHost) {
  EXPECT_EQ(host_layout({"a", "a", "b", "b"}, 2),
            "2 hosts: a [0, 1], b [2, 3]; each pipeline within one host, data-parallel groups across hosts");
  EXPECT_EQ(host_layout({"a", "b", "a", "b"}, 2),
            "2 hosts: a [0, 2], b [1, 3]; each pipeline across hosts, data-parallel groups within one host");
  EXPECT_EQ(host_layout({"a", "a", "a", "a"}, 2),
            "1 host: a [0, 1, 2, 3]; each pipeline within one host, data-parallel groups within one host");
  EXPECT_EQ(host_layout({"a", "a", "b", "b"}, 1), "2 hosts: a [0, 1], b [2, 3]; data-parallel groups across hosts");
  EXPECT_EQ(host_layout({"a", "a", "b", "b"}, 4), "2 hosts: a [0, 1], b [2, 3]; each pipeline across hosts");
  // Pipelines [0, 1] (a) and [2, 3] (a, b); data-parallel groups [0, 2] (a) and [1, 3] (a, b).
  EXPECT_EQ(host_layout({"a", "a", "a", "b"}, 2),
            "2 hosts: a [0, 1, 2], b [3]; each pipeline within one host or across hosts, data-parallel groups "
            "within one host or across hosts");
  EXPECT_WEFT_ERROR(host_layout({"a", "a", "b", "b"}, 3), "host_layout: pp 3 does not divide 4 ranks");
}

TEST(Grid, MakeGridGathersEveryRanksHost) {
  std::vector<std::vector<std::string>> got(4);
  run_ranks(4, [&](std::shared_ptr<ProcessGroup> g) { got[g->rank()] = make_grid(g, 2).hosts(); });
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(got[r].size(), 4u) << "rank " << r;
    EXPECT_EQ(got[r], got[0]) << "rank " << r;
    EXPECT_FALSE(got[r][0].empty());
  }
}

}  // namespace
}  // namespace weft::parallel::hybrid
