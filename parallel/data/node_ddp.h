// NodeDataParallel: heat's DataParallelMultiGPU in weft's terms: synchronous
// data parallelism among the ranks of one node (DistributedDataParallel on
// the node group: NCCL for CUDA parameters, the MPI or in-process group for
// CPU ones) and nothing between nodes; DASO (parallel/data/daso.h) synchronises
// the nodes.
//
// Contract:
// - Construction is collective over groups.world (make_node_groups,
//   parallel/data/node_groups.h): every rank must hold the same parameter and
//   buffer list (names, shapes, dtypes; an error on every rank naming the
//   first difference and what each rank holds); then rank 0 of the world
//   broadcasts its parameters and buffers to every rank (through CPU copies
//   for tensors on a GPU), so every rank starts from the same values, heat's
//   "unify parameters across nodes"; then a DistributedDataParallel is built
//   on the node group (for CUDA parameters over new_device_group(node group),
//   collective over the node) with `options.ddp`, whose comm hook is wrapped
//   by counting_hook (parallel/data/comm_volume.h) for node_bytes().
//   options.ddp.non_blocking is refused: DASO steps the optimizer itself.
// - forward() is the node DDP's: backward averages the gradients over the
//   node, so the ranks of a node keep equal parameters.
// - Buffers are broadcast inside the node by DDP (broadcast_buffers); between
//   nodes only at construction (DASO averages parameters, as heat does).
#pragma once

#include <memory>

#include "nn/module.h"
#include "parallel/data/ddp.h"
#include "parallel/data/node_groups.h"

namespace weft::parallel {

struct NodeDataParallelOptions {
  DDPOptions ddp;
};

class NodeDataParallel {
 public:
  NodeDataParallel(std::shared_ptr<nn::Module> module, NodeGroups groups, NodeDataParallelOptions options = {});
  NodeDataParallel(const NodeDataParallel&) = delete;
  NodeDataParallel& operator=(const NodeDataParallel&) = delete;

  Tensor forward(const Tensor& input) { return ddp_->forward(input); }
  Tensor operator()(const Tensor& input) { return forward(input); }

  nn::Module& module() { return *module_; }
  const std::shared_ptr<nn::Module>& module_ptr() const { return module_; }
  DistributedDataParallel& ddp() { return *ddp_; }
  const NodeGroups& groups() const { return groups_; }
  Device device() const { return device_; }
  // Bytes this rank sent in the node DDP's allreduces (ring model).
  int64_t node_bytes() const { return *node_bytes_; }

 private:
  void verify_same_state();
  void unify_state();

  std::shared_ptr<nn::Module> module_;
  NodeGroups groups_;
  Device device_ = kCPU;
  std::shared_ptr<int64_t> node_bytes_ = std::make_shared<int64_t>(0);
  std::unique_ptr<DistributedDataParallel> ddp_;
};

}  // namespace weft::parallel
