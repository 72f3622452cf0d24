// The rank grid of pipeline x data parallelism (SageMaker model parallel's
// pp_rank / dp_rank): world = pp x dp ranks, each a (pipeline stage, replica)
// pair.
//
// Contract:
// - Layout: rank = dp_rank * pp + pp_rank. Replica d's pipeline is the pp
//   consecutive ranks d*pp .. d*pp + pp - 1; stage position i's data-parallel
//   group is ranks i, i + pp, i + 2pp, ... (group rank = dp_rank).
// - make_grid(world, pp, dp) is collective over `world` (new_group on every
//   rank for every sub-group, in one fixed order). dp = 0 means world / pp. A
//   grid that does not tile the world is an error naming pp, dp and the size.
// - pipeline() and data_parallel() are this rank's sub-groups; with pp = 1 the
//   pipeline group is a group of one, with dp = 1 the data-parallel one.
// - hosts(): every world rank's host name (gethostname), gathered by
//   make_grid, so the grid knows which ranks share a host.
// - host_layout(hosts, pp) is pure: "2 hosts: a [0, 1], b [2, 3]; each
//   pipeline within one host, data-parallel groups across hosts" (hosts in
//   order of their lowest rank; "within one host" when every group's ranks
//   share one, "across hosts" when every group spans several, "within one
//   host or across hosts" when some do and some do not).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "parallel/comm/process_group.h"

namespace weft::parallel::hybrid {

class Grid {
 public:
  int pp() const { return pp_; }
  int dp() const { return dp_; }
  int pp_rank() const { return pp_rank_; }
  int dp_rank() const { return dp_rank_; }
  int rank() const { return world_->rank(); }
  const std::shared_ptr<ProcessGroup>& world() const { return world_; }
  const std::shared_ptr<ProcessGroup>& pipeline() const { return pipeline_; }
  const std::shared_ptr<ProcessGroup>& data_parallel() const { return data_parallel_; }
  // "pp 2 x dp 2 (rank 3: stage 1 of replica 1)"
  std::string str() const;
  const std::vector<std::string>& hosts() const { return hosts_; }

 private:
  friend Grid make_grid(std::shared_ptr<ProcessGroup> world, int pp, int dp);
  int pp_ = 1, dp_ = 1, pp_rank_ = 0, dp_rank_ = 0;
  std::shared_ptr<ProcessGroup> world_, pipeline_, data_parallel_;
  std::vector<std::string> hosts_;
};

Grid make_grid(std::shared_ptr<ProcessGroup> world, int pp, int dp = 0);

std::string host_layout(const std::vector<std::string>& hosts, int pp);

}  // namespace weft::parallel::hybrid
