// Node groups and the node layout (contract in node_groups.h).
#include "parallel/data/node_groups.h"

#include <mpi.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <sstream>

#include "core/error.h"
#include "core/ops.h"
#include "parallel/comm/mpi/liveness.h"

namespace weft::parallel {
namespace {

void mpi_check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  WEFT_ERROR("shared_memory_node_ids: ", call, " failed: ", std::string(msg, static_cast<size_t>(len)));
}

}  // namespace

int NodeLayout::node_of(int rank) const {
  for (int n = 0; n < num_nodes(); ++n)
    if (std::binary_search(nodes[n].begin(), nodes[n].end(), rank)) return n;
  WEFT_ERROR("NodeLayout: rank ", rank, " is not in the layout ", str());
}

int NodeLayout::local_rank_of(int rank) const {
  const auto& on = nodes[node_of(rank)];
  return static_cast<int>(std::lower_bound(on.begin(), on.end(), rank) - on.begin());
}

NodeLayout NodeLayout::from_node_ids(const std::vector<int>& node_ids) {
  WEFT_CHECK(!node_ids.empty(), "NodeLayout: no ranks");
  NodeLayout l;
  l.world_size = static_cast<int>(node_ids.size());
  std::map<int, int> index;  // node id -> node number (by smallest rank)
  for (int r = 0; r < l.world_size; ++r) {
    auto [it, added] = index.emplace(node_ids[r], l.num_nodes());
    if (added) l.nodes.emplace_back();
    l.nodes[it->second].push_back(r);
  }
  l.ranks_per_node = static_cast<int>(l.nodes[0].size());
  bool equal = true;
  for (const auto& n : l.nodes) equal = equal && static_cast<int>(n.size()) == l.ranks_per_node;
  if (!equal) {
    std::ostringstream os;
    os << "NodeLayout: nodes hold different numbers of ranks:";
    for (int n = 0; n < l.num_nodes(); ++n)
      os << (n ? "," : "") << " node " << n << " has " << l.nodes[n].size() << " " << ranks_str(l.nodes[n]);
    os << "; the global groups take the i-th rank of every node, so every node needs the same number (or set "
          "ranks_per_node)";
    WEFT_ERROR(os.str());
  }
  l.globals.assign(l.ranks_per_node, {});
  for (int i = 0; i < l.ranks_per_node; ++i)
    for (const auto& n : l.nodes) l.globals[i].push_back(n[i]);
  return l;
}

NodeLayout NodeLayout::blocks(int world_size, int ranks_per_node) {
  WEFT_CHECK(world_size > 0, "NodeLayout: world size must be positive, got ", world_size);
  WEFT_CHECK(ranks_per_node > 0 && world_size % ranks_per_node == 0, "NodeLayout: ranks_per_node ", ranks_per_node,
             " does not divide the world size ", world_size);
  std::vector<int> ids(world_size);
  for (int r = 0; r < world_size; ++r) ids[r] = r / ranks_per_node;
  return from_node_ids(ids);
}

std::string NodeLayout::str() const {
  std::ostringstream os;
  os << num_nodes() << (num_nodes() == 1 ? " node" : " nodes") << " x " << ranks_per_node
     << (ranks_per_node == 1 ? " rank:" : " ranks:");
  for (const auto& n : nodes) os << " " << ranks_str(n);
  return os.str();
}

std::vector<int> shared_memory_node_ids(ProcessGroup& world) {
  const int n = world.size();
  if (world.backend_name() == "inproc") return std::vector<int>(n, 0);  // threads of one process
  WEFT_CHECK(world.backend_name() == "mpi", "shared_memory_node_ids: the ", world.backend_name(),
             " backend cannot tell which ranks share a node; pass the MPI world or set ranks_per_node");
  int mpi_size = 0, mpi_rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &mpi_size);
  MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank);
  bool whole = n == mpi_size && world.rank() == mpi_rank;
  for (int r = 0; whole && r < n; ++r) whole = world.global_ranks()[r] == r;
  WEFT_CHECK(whole, "shared_memory_node_ids: the group ", ranks_str(world.global_ranks()),
             " is not the whole MPI world of ", mpi_size, " ranks; pass the world or set ranks_per_node");
  // Every rank present first (a timed, sequenced collective), so the blocking
  // split below cannot hang on a missing rank (as ProcessGroupMPI::new_group).
  world.barrier()->wait();
  int leader = 0;
  {
    std::lock_guard<std::recursive_mutex> lk(mpi_mutex());
    MPI_Comm local = MPI_COMM_NULL;
    mpi_check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, mpi_rank, MPI_INFO_NULL, &local),
              "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)");
    MPI_Group local_group, world_group;
    mpi_check(MPI_Comm_group(local, &local_group), "MPI_Comm_group");
    mpi_check(MPI_Comm_group(MPI_COMM_WORLD, &world_group), "MPI_Comm_group");
    const int first = 0;
    mpi_check(MPI_Group_translate_ranks(local_group, 1, &first, world_group, &leader), "MPI_Group_translate_ranks");
    MPI_Group_free(&local_group);
    MPI_Group_free(&world_group);
    MPI_Comm_free(&local);
  }
  Tensor mine = full({1}, static_cast<int64_t>(leader), {DType::Int64});
  std::vector<Tensor> all;
  all.reserve(n);
  for (int r = 0; r < n; ++r) all.push_back(empty({1}, {DType::Int64}));
  world.allgather(all, mine)->wait();
  std::vector<int> ids(n);
  for (int r = 0; r < n; ++r) ids[r] = static_cast<int>(all[r].item<int64_t>());
  return ids;
}

NodeGroups make_node_groups(std::shared_ptr<ProcessGroup> world, NodeGroupsOptions options) {
  WEFT_CHECK(world != nullptr, "make_node_groups: the world group is null");
  WEFT_CHECK(options.ranks_per_node >= 0, "make_node_groups: ranks_per_node must be >= 0 (0: detect), got ",
             options.ranks_per_node);
  NodeGroups g;
  g.layout = options.ranks_per_node > 0 ? NodeLayout::blocks(world->size(), options.ranks_per_node)
                                        : NodeLayout::from_node_ids(shared_memory_node_ids(*world));
  g.world = world;
  g.node = g.layout.node_of(world->rank());
  g.local_rank = g.layout.local_rank_of(world->rank());
  for (const auto& ranks : g.layout.nodes) {
    auto sub = world->new_group(ranks);
    if (sub) g.node_group = sub;
  }
  for (const auto& ranks : g.layout.globals) {
    auto sub = world->new_group(ranks);
    if (sub) g.global_group = sub;
  }
  WEFT_INTERNAL_ASSERT(g.node_group && g.global_group && g.node_group->rank() == g.local_rank &&
                       g.global_group->rank() == g.node);
  return g;
}

}  // namespace weft::parallel
