// Node groups: the two-level layout of hierarchical data parallelism (heat's
// DataParallelMultiGPU + DASO). The ranks on one node form a node group (fast
// link: synchronous DDP every step); the i-th rank of every node forms global
// group i (the slow link between nodes: DASO, parallel/data/daso.h).
//
// Contract:
// - NodeLayout is pure: from each world rank's node id (ranks with equal ids
//   share a node) or from blocks of ranks_per_node consecutive ranks. Nodes
//   are numbered by their smallest rank; a node's ranks ascend; every node
//   must hold the same number of ranks (else an error naming each node's
//   ranks), since global group i takes the i-th rank of every node.
// - make_node_groups(world, options) is collective over `world` (every rank
//   calls it with the same options): the layout comes from
//   options.ranks_per_node when positive (one machine pretending to be
//   several nodes: ranks [n*R, (n+1)*R) are node n; it must divide the world
//   size), else from shared_memory_node_ids(). It then creates the node
//   groups and the global groups with world->new_group (every rank takes part
//   in every creation; each keeps its own two).
// - shared_memory_node_ids(world) (collective): for an MPI world (the whole
//   MPI_COMM_WORLD), MPI's shared-memory split (MPI_Comm_split_type with
//   MPI_COMM_TYPE_SHARED) after a barrier, each node named by its smallest
//   world rank and the ids all-gathered; an in-process world (ranks are
//   threads of one process) is one node; any other backend is an error
//   asking for ranks_per_node.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "parallel/comm/process_group.h"

namespace weft::parallel {

struct NodeLayout {
  int world_size = 0;
  int ranks_per_node = 0;
  std::vector<std::vector<int>> nodes;    // nodes[n]: the world ranks on node n, ascending
  std::vector<std::vector<int>> globals;  // globals[i]: nodes[n][i] for every node n

  int num_nodes() const { return static_cast<int>(nodes.size()); }
  int node_of(int rank) const;        // the node holding world rank `rank`
  int local_rank_of(int rank) const;  // its position on that node

  // node_ids[r]: any int naming rank r's node.
  static NodeLayout from_node_ids(const std::vector<int>& node_ids);
  static NodeLayout blocks(int world_size, int ranks_per_node);
  // "2 nodes x 2 ranks: [0, 1] [2, 3]"
  std::string str() const;
};

struct NodeGroupsOptions {
  int ranks_per_node = 0;  // 0: MPI's shared-memory split
};

struct NodeGroups {
  NodeLayout layout;
  int node = 0;        // this rank's node
  int local_rank = 0;  // its position on the node (= its global group's index)
  std::shared_ptr<ProcessGroup> world;
  std::shared_ptr<ProcessGroup> node_group;    // the ranks of this node (rank = local_rank)
  std::shared_ptr<ProcessGroup> global_group;  // the local_rank-th rank of every node (rank = node)

  int num_nodes() const { return layout.num_nodes(); }
  int ranks_per_node() const { return layout.ranks_per_node; }
};

NodeGroups make_node_groups(std::shared_ptr<ProcessGroup> world, NodeGroupsOptions options = {});

std::vector<int> shared_memory_node_ids(ProcessGroup& world);

}  // namespace weft::parallel
