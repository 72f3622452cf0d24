// The rank grid (contract in grid.h).
#include "parallel/hybrid/grid.h"

#include <unistd.h>

#include <map>
#include <set>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "parallel/comm/collectives.h"

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
  char name[256] = {0};
  if (gethostname(name, sizeof(name) - 1) != 0) name[0] = '\0';
  g.hosts_ = allgather_bytes(*g.world_, name);
  return g;
}

std::string host_layout(const std::vector<std::string>& hosts, int pp) {
  const int n = static_cast<int>(hosts.size());
  WEFT_CHECK(pp >= 1 && n % pp == 0, "host_layout: pp ", pp, " does not divide ", n, " ranks");
  std::vector<std::string> order;  // hosts by their lowest rank
  std::map<std::string, std::vector<int>> ranks;
  for (int r = 0; r < n; ++r) {
    if (!ranks.count(hosts[r])) order.push_back(hosts[r]);
    ranks[hosts[r]].push_back(r);
  }
  // How the groups sit: 1 within one host, 2 across hosts, 3 some of each.
  auto placement = [&](bool pipelines) {
    int within = 0, across = 0;
    const int groups = pipelines ? n / pp : pp, size = pipelines ? pp : n / pp;
    for (int g = 0; g < groups; ++g) {
      std::set<std::string> seen;
      for (int k = 0; k < size; ++k) seen.insert(hosts[pipelines ? g * pp + k : k * pp + g]);
      (seen.size() == 1 ? within : across) += 1;
    }
    return across == 0 ? "within one host" : within == 0 ? "across hosts" : "within one host or across hosts";
  };
  std::ostringstream os;
  os << order.size() << (order.size() == 1 ? " host: " : " hosts: ");
  for (size_t h = 0; h < order.size(); ++h) {
    os << (h ? ", " : "") << (order[h].empty() ? "?" : order[h]) << " [";
    for (size_t i = 0; i < ranks[order[h]].size(); ++i) os << (i ? ", " : "") << ranks[order[h]][i];
    os << "]";
  }
  if (pp > 1) os << "; each pipeline " << placement(true);
  if (n / pp > 1) os << (pp > 1 ? ", " : "; ") << "data-parallel groups " << placement(false);
  return os.str();
}

}  // namespace weft::parallel::hybrid
