// DistributedOptimizer: any weft optimizer over a DistributedModel's local
// parameters (SageMaker's smp.DistributedOptimizer), optionally with its state
// sharded over the data-parallel group (ZeRO-1, parallel/data/zero.h).
//
// Contract:
// - DistributedOptimizer(model, factory): factory(named parameters) makes the
//   inner optimizer (SGD, Adam, AdamW, ... built from named parameters so its
//   state is keyed by name). It is built once the model is partitioned (at
//   once if it is, else by a post-partition hook: construct it before the
//   first step). With model.options().shard_optimizer_state it is a
//   ZeroOptimizer over the rank's local parameters on the data-parallel group
//   (reduce-scatter of the replicas' gradients, each rank updating its shard,
//   all-gather of the parameters), and the factory receives the flat shards
//   under the names "shard0", "shard1", ....
// - step() (collective over the data-parallel group with ZeRO) and
//   zero_grad() act on the local parameters; call step() once per optimizer
//   step (after backward_passes_per_step model steps).
// - inner(): the optimizer that holds the state (for LR schedules).
// - State, keyed by parameter name (Note [optimizer state by name] in
//   optim/optimizer.h): local_state_dict() is this rank's (with ZeRO: its
//   shard's, with the layout, ZeroOptimizer::local_state_dict());
//   state_dict() (collective over the world) gathers the whole model's on
//   every rank, the same whether sharded or not; load_state_dict(sd) takes
//   from such a whole dict (saved on any grid, with or without ZeRO) this
//   rank's entries and returns the keys of other ranks' parameters.
// - A rank whose stages hold no parameters (e.g. only activations and
//   pooling) holds no optimizer: has_parameters() is false, step() and
//   zero_grad() do nothing, its state dicts are empty, load_state_dict
//   returns every key and inner() is an error.
// - load_local_state_dict(sd) is local_state_dict()'s inverse on the same
//   layout (with ZeRO: ZeroOptimizer::load_local_state_dict, same dp and
//   rank; else a by-name dict of exactly this rank's parameters, a key of
//   another parameter being an error); parallel/checkpoint/ builds such a
//   dict from the parts of a checkpoint this rank needs.
// - state_bytes() and memory_summary(): the optimizer state this rank holds
//   ("optimizer state: X MiB per rank (Y MiB unsharded, dp N)" with ZeRO).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "optim/optimizer.h"
#include "parallel/data/zero.h"
#include "parallel/hybrid/distributed_model.h"

namespace weft::parallel::hybrid {

class DistributedOptimizer {
 public:
  using Factory = std::function<std::unique_ptr<optim::Optimizer>(const optim::NamedParameters&)>;
  DistributedOptimizer(DistributedModel& model, Factory factory);

  void step();
  void zero_grad(bool set_to_none = true);
  optim::Optimizer& inner();
  bool sharded() const { return zero_ != nullptr; }
  bool has_parameters() const { return built_ && (plain_ || zero_); }

  optim::OptimizerStateDict local_state_dict() const;
  optim::OptimizerStateDict state_dict();
  std::vector<std::string> load_state_dict(const optim::OptimizerStateDict& sd);
  void load_local_state_dict(const optim::OptimizerStateDict& sd);
  int64_t state_bytes() const;
  std::string memory_summary() const;

 private:
  void build();
  void check_built(const char* what) const;

  DistributedModel& model_;
  Factory factory_;
  std::unique_ptr<optim::Optimizer> plain_;
  std::unique_ptr<ZeroOptimizer> zero_;
  bool built_ = false;
};

}  // namespace weft::parallel::hybrid
