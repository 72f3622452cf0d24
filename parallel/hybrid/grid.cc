// The rank grid (contract in grid.h).
#include "parallel/hybrid/grid.h"

#include <sstream>
#include <vector>

#include "core/error.h"

namespace weft::parallel::hybrid {

std::string Grid::str() const {
  std::ostringstream os;
  os << "pp " << pp_ << " x dp " << dp_ << " (rank " << rank() << ": stage " << pp_rank_ << " of replica " << dp_rank_
     << ")";
  return os.str();
}

Grid make_grid(std::shared_ptr<ProcessGroup> world, int pp, int dp) {
  WEFT_CHECK(world != nullptr, "make_grid: the world group is null");
  const int n = world->size();
  WEFT_CHECK(pp >= 1, "make_grid: pp must be a positive integer, got ", pp);
  if (dp == 0) {
    WEFT_CHECK(n % pp == 0, "make_grid: pp ", pp, " does not divide the world size ", n);
    dp = n / pp;
  }
  WEFT_CHECK(dp >= 1, "make_grid: dp must be a positive integer (or 0: world size / pp), got ", dp);
  WEFT_CHECK(pp * dp == n, "make_grid: pp ", pp, " x dp ", dp, " = ", pp * dp, " ranks, but the world has ", n);
  Grid g;
  g.pp_ = pp;
  g.dp_ = dp;
  g.world_ = std::move(world);
  g.pp_rank_ = g.world_->rank() % pp;
  g.dp_rank_ = g.world_->rank() / pp;
  // Every rank creates every sub-group, in the same order: pipelines, then data-parallel groups.
  for (int d = 0; d < dp; ++d) {
    std::vector<int> ranks;
    for (int i = 0; i < pp; ++i) ranks.push_back(d * pp + i);
    auto sub = g.world_->new_group(ranks);
    if (d == g.dp_rank_) g.pipeline_ = sub;
  }
  for (int i = 0; i < pp; ++i) {
    std::vector<int> ranks;
    for (int d = 0; d < dp; ++d) ranks.push_back(d * pp + i);
    auto sub = g.world_->new_group(ranks);
    if (i == g.pp_rank_) g.data_parallel_ = sub;
  }
  WEFT_INTERNAL_ASSERT(g.pipeline_ && g.data_parallel_, "make_grid: rank ", g.world_->rank(),
                       " got no pipeline or data-parallel group");
  return g;
}

}  // namespace weft::parallel::hybrid
