// DistributedModel: pipeline x data parallelism over a rank grid (SageMaker
// model parallel's smp.DistributedModel in weft's terms). One Sequential (or
// a list of layer factories) wrapped once: split into pp pipeline stages,
// each stage replicated over dp data-parallel ranks (grid.h), trained with
// micro-batches.
//
// Contract:
// - Construction is collective over `world` (it makes the grid's
//   sub-groups). Partitioning happens at the first step() (or an explicit
//   partition(sample)) over pp * pipe.virtual_stages stages, by
//   options.balance when given (layers per stage), else by placement scopes
//   when any child of the Sequential was built inside one (Note [placement
//   scopes] in nn/module.h: smp.partition; a child outside every scope joins
//   the stage of the child before it, the first stage 0; stages must follow
//   the layer order and none may be empty), else, with auto_partition
//   (the default; a Sequential and a built-in schedule), from measurements:
//   world rank 0 profiles every child on the first micro-batch of its batch
//   (parallel/partition/profile.h) and broadcasts the profile, and every rank
//   computes the same plan (parallel/partition/plan.h: method, memory budget,
//   bandwidth; with several stages per rank each rank's stages together
//   against the budget, Note [stages per rank] in parallel/partition/
//   balance.h; the simulated step includes the data-parallel gradient
//   average, measured, the runner's checkpointing, and compute_speeds, or
//   with measure_compute_speeds the ranks' measured speeds when they
//   oversubscribe their hosts' cores); world rank 0 prints the partition
//   table to options.table.
//   With auto_schedule, the schedule (auto_schedules; by default gpipe, 1f1b,
//   zb-h1, interleaved, interleaved-zb and zbv, with auto_virtual_stages
//   stages per rank), its stages per rank and the micro-batch count
//   (auto_chunks) are chosen with it: the fastest simulated step whose ranks
//   fit the budget (the profile scaled by micro-batch rows); the choice sets
//   pipe.schedule, pipe.virtual_stages and pipe.chunks. Without
//   auto_partition: as even as possible by layer count, earlier stages
//   larger. Whatever the placement (zbv's V too), stage s gets the s-th slice
//   of the balance. Each rank builds or slices only its own
//   stages (full parameter names kept, Note [name prefix]); then every
//   parameter and buffer is broadcast from data-parallel rank 0 within each
//   data-parallel group, and the post-partition hooks run (create the
//   optimizer there, or after partition()). Before that, the local_*
//   accessors are errors.
// - step(input, target, loss_fn): `input` and `target` are this replica's
//   batch (read on its first and last stage's ranks). The schedule runs
//   pipe.chunks micro-batches; each stage's gradients are averaged over its
//   data-parallel group by the schedule's ReduceGrad action (Note [gradient
//   reduction] in parallel/pipe/schedule.h), right after the stage's last B
//   (W): with overlapping_allreduce (default) its buckets launch while that
//   backward runs; otherwise at the ReduceGrad, one average per gradient.
//   backward_passes_per_step = k: gradients accumulate locally for k steps
//   and are reduced in the k-th. Tied parameters (pipe.tied) are summed
//   across stages (TiedGrad), then averaged over data parallelism
//   (ReduceTiedGrad). With
//   pipe.average_microbatches (default) the step's gradient is that of the
//   replicas' mean loss over the global batch, as in one process on it;
//   off, micro-batch losses are summed (use a sum-reduced loss). Returns the
//   loss averaged over micro-batches (row-weighted) and replicas, on every
//   rank.
// - shard_optimizer_state (ZeRO-1): no ReduceGrad actions and no data-parallel
//   averaging here: a DistributedOptimizer over this model reduce-scatters
//   the gradients in its step (parallel/data/zero.h), so step() leaves each
//   replica's local gradients (tied ones summed over stages).
// - State: local_state_dict() is this rank's stages' parameters and buffers
//   under their full names, a part of the whole; state_dict() (collective
//   over the world) gathers the whole model's on every rank (data-parallel
//   rank 0's copy of each stage); load_state_dict(sd) takes from a whole (or
//   any larger) state dict the entries of this rank's stages and returns, as
//   nn::Module::load_state_dict does, the keys it did not use
//   (unexpected_keys: other ranks' entries, or none of the model's) and,
//   when not strict, this rank's keys the dict lacks (missing_keys); a
//   missing local entry (strict) or a shape mismatch is an error naming
//   every such key. gather_whole_model() (collective: it gathers every
//   stage's state, it does not move anything) returns the whole model with
//   the gathered state on every rank (for a model built from a Sequential;
//   not for layer factories): the Sequential given, whose layers of this
//   rank's stages are the stages themselves, so they keep training on their
//   device and the others hold copies of the other ranks' weights.
// - forward(input): the forward-only schedule on this replica's batch; the
//   output on the last stage's ranks, undefined elsewhere.
// - Errors name what is wrong: a grid that does not tile the world,
//   local_*() before partitioning, balance problems (Pipe's checks),
//   automatic partitioning of layer factories or of a user schedule.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nn/container.h"
#include "parallel/hybrid/grid.h"
#include "parallel/partition/plan.h"
#include "parallel/pipe/pipe.h"

namespace weft::parallel::hybrid {

struct DistributedModelOptions {
  int pp = 1;                // pipeline stages (ranks per replica)
  int dp = 0;                // replicas; 0: world size / pp
  std::vector<int> balance;  // layers per stage; empty: even by count
  pipe::PipeOptions pipe;    // chunks (micro-batches), schedule, checkpoint, virtual_stages, tied, ...
  bool overlapping_allreduce = true;
  double bucket_cap_mb = 25;
  int backward_passes_per_step = 1;
  bool broadcast_buffers = true;  // buffers too, at partitioning, from data-parallel rank 0
  // Automatic partitioning (when balance is empty).
  bool auto_partition = true;
  partition::BalanceMethod method = partition::BalanceMethod::kOptimal;  // kOptimal, kByTime, kBySize
  int64_t memory_budget_bytes = 0;                                       // per device; 0: unlimited
  double bandwidth_bytes_per_s = 0;                                      // 0: transfers cost nothing
  double optimizer_state_factor = 0;  // optimizer-state bytes per parameter byte (SGD momentum 1, Adam 2)
  // The plan's compute speeds while k of a pipeline's ranks compute at once
  // (partition/contention.h); empty: every rank at full speed. With
  // measure_compute_speeds (and none given) they are measured when the ranks
  // oversubscribe their hosts' cores: the predicted step time then follows
  // the contention, but the predicted bubble gets worse (Note [processor
  // sharing] in parallel/pipe/simulate.h), so it is off by default.
  std::vector<double> compute_speeds;
  bool measure_compute_speeds = false;
  bool auto_schedule = false;     // choose the schedule, its stages per rank and chunks too
  std::vector<int> auto_chunks;   // candidate micro-batch counts; empty: {pipe.chunks}
  std::ostream* table = nullptr;  // where world rank 0 prints the partition table (nullptr: std::cout)
  bool print_table = true;
  bool shard_optimizer_state = false;  // ZeRO-1 through DistributedOptimizer
  bool keep_output = false;            // last_output(): the replica's outputs of the last step
  // auto_schedule's candidate schedules; empty: all six built-in ones.
  std::vector<pipe::ScheduleKind> auto_schedules;
  // A plan made beforehand (partition::choose_plan, or plan_partition): its
  // balance, schedule, stages per rank and micro-batch count are used as
  // they are, with no profiling; plan() returns it.
  std::optional<partition::PartitionPlan> plan;
};

// The stages per rank auto_schedule plans `kind` with: 1 for gpipe, 1f1b and
// zb-h1, 2 for zbv, and for interleaved and interleaved-zb `virtual_stages`
// (pipe.virtual_stages) when above 1, else 2.
int auto_virtual_stages(pipe::ScheduleKind kind, int virtual_stages);

class DistributedModel {
 public:
  DistributedModel(std::shared_ptr<nn::Sequential> model, std::shared_ptr<ProcessGroup> world,
                   DistributedModelOptions options = {});
  DistributedModel(std::vector<pipe::LayerFactory> layers, std::shared_ptr<ProcessGroup> world,
                   DistributedModelOptions options = {});
  ~DistributedModel();
  DistributedModel(const DistributedModel&) = delete;
  DistributedModel& operator=(const DistributedModel&) = delete;

  double step(const Tensor& input, const Tensor& target, const pipe::LossFn& loss_fn);
  Tensor forward(const Tensor& input);
  // With keep_output: the last stage's outputs of the last step() for this
  // replica's batch (micro-batches concatenated) on the last stage's ranks;
  // undefined elsewhere.
  Tensor last_output() const;

  // Partitions now (collective); a no-op once partitioned. `sample` is this
  // replica's batch as step() would get it (needed on world rank 0 for
  // automatic partitioning; others may pass an undefined tensor).
  void partition(const Tensor& sample = Tensor());
  bool partitioned() const { return pipe_ != nullptr; }
  void register_post_partition_hook(std::function<void(DistributedModel&)> hook);

  const Grid& grid() const { return grid_; }
  int pp_rank() const { return grid_.pp_rank(); }
  int dp_rank() const { return grid_.dp_rank(); }
  const std::vector<int>& balance() const;
  // This rank's parameters, named as in the whole model; its stage modules.
  std::vector<Tensor> local_parameters() const;
  std::vector<std::pair<std::string, Tensor>> local_named_parameters() const;
  const std::vector<std::shared_ptr<nn::Sequential>>& local_modules() const;
  pipe::Pipe& pipe();
  nn::StateDict local_state_dict() const;
  nn::StateDict state_dict();
  nn::Module::LoadResult load_state_dict(const nn::StateDict& sd, bool strict = true);
  std::shared_ptr<nn::Sequential> gather_whole_model();
  const DistributedModelOptions& options() const { return options_; }
  // After automatic partitioning: the measured profile and the chosen plan.
  const std::vector<partition::LayerProfile>& profile() const { return profile_; }
  const partition::PartitionPlan& plan() const { return plan_; }

 private:
  void check_partitioned(const char* what) const;
  std::vector<int> auto_balance(const Tensor& sample);
  std::vector<int> placement_balance() const;  // empty when no child was placed

  DistributedModelOptions options_;
  Grid grid_;
  std::shared_ptr<nn::Sequential> model_;  // until partitioned
  // The model given (gather_whole_model()); its stages share this rank's tensors.
  std::shared_ptr<nn::Sequential> whole_;
  std::vector<pipe::LayerFactory> factories_;
  std::unique_ptr<pipe::Pipe> pipe_;
  std::vector<std::function<void(DistributedModel&)>> post_partition_hooks_;
  std::vector<partition::LayerProfile> profile_;
  partition::PartitionPlan plan_;
  int64_t steps_ = 0;
};

}  // namespace weft::parallel::hybrid
