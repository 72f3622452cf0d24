// PartitionPlan: a balance with its per-stage estimates, the predicted step
// time and bubble, and the table rank 0 prints before training.
//
// Contract:
// - evaluate_balance(layers, balance, options) fills every estimate of Note
//   [stage cost model] (balance.h) for the given balance; it checks the balance
//   (one positive entry per stage, summing to the layer count) but not the
//   budget.
// - With several stages per rank (options.virtual_stages > 1, Note [stages
//   per rank] in balance.h) each stage also names its rank, and the plan
//   keeps each rank's memory (the sum over its stages).
// - The predicted step time and bubble come from the pipeline simulator
//   (parallel/pipe/simulate.h) on options.schedule with options.microbatches
//   (and options.virtual_stages stages per rank, placed as it places them):
//   per stage forward = the layers' forward_s, backward = their backward_s
//   (ZB-H1, whose backward is split, gets half as B and half as W), transfer per
//   boundary as in the cost model; with options.replicas > 1, a ReduceGrad per
//   stage costing options.allreduce.seconds(its gradient bytes); ranks
//   computing together at options.compute_speeds; checkpointed micro-batches
//   (options.checkpoint) recomputing their forward in the backward.
// - plan_partition chooses the balance by `method` (kOptimal: solve_balance,
//   exact; kByTime / kBySize: fairscale's; kManual: options.balance) and checks
//   every stage against the budget: a stage over it is an error naming the
//   stage, its layers, its peak and the budget (kOptimal explains infeasibility
//   as solve_balance does); with several stages per rank every rank's memory
//   is checked, an error naming the rank, its stages and their peaks.
// - partition_table(layers, plan) is deterministic text (see its comment);
//   print_partition_table writes it on the group's rank 0 only.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "parallel/comm/process_group.h"
#include "parallel/partition/balance.h"
#include "parallel/partition/layer_profile.h"

namespace weft::parallel::partition {

enum class BalanceMethod { kOptimal, kByTime, kBySize, kManual };

struct PlanOptions : BalanceOptions {
  BalanceMethod method = BalanceMethod::kOptimal;
  std::vector<int> balance;  // kManual only: layers per stage
};

struct StageEstimate {
  int begin = 0, end = 0;  // layers [begin, end)
  int rank = 0;            // the rank holding the stage
  int64_t num_parameters = 0;
  int live_microbatches = 0;
  int64_t resident_bytes = 0;     // parameters, gradients, optimizer state, buffers
  int64_t activation_bytes = 0;   // per micro-batch
  int64_t peak_memory_bytes = 0;  // resident + live * activation
  double forward_s = 0, backward_s = 0;
  double transfer_s = 0;  // to the next stage (0 on the last)
  double time_s = 0;      // forward + backward + transfer, per micro-batch
  double reduce_s = 0;    // the data-parallel gradient average, per step (replicas > 1)
};

struct PartitionPlan {
  std::vector<int> balance;
  std::vector<StageEstimate> stages;
  std::string schedule;  // the simulated schedule's name ("1f1b")
  int microbatches = 0;
  int virtual_stages = 1;  // stages per rank
  int64_t memory_budget_bytes = 0;
  double bottleneck_s = 0;             // the largest stage time
  double step_time_s = 0;              // simulated makespan of one step
  double bubble_fraction = 0;          // simulated idle share
  std::vector<double> compute_speeds;  // BalanceOptions::compute_speeds the step was simulated with
  pipe::CheckpointMode checkpoint = pipe::CheckpointMode::kNever;  // and its checkpointing
  // Per rank: the sum of its stages' peak memory.
  std::vector<int64_t> rank_memory_bytes;
};

PartitionPlan evaluate_balance(const std::vector<LayerProfile>& layers, const std::vector<int>& balance,
                               const BalanceOptions& options);
PartitionPlan plan_partition(const std::vector<LayerProfile>& layers, const PlanOptions& options);

// The plan as a table, e.g.
//   partition: 10 layers over 2 stages, 1f1b with 4 micro-batches, memory budget 64.0 MiB per device
//   stage  layers                              parameters  peak memory  time/micro-batch
//       0  0-5 Conv2d ReLU ... MaxPool2d            18816     12.3 MiB          1.234 ms
//       1  6-9 Flatten Linear ReLU Linear          402698      4.1 MiB          1.198 ms
//   predicted step time 8.765 ms, bubble 20.0% (bottleneck 1.234 ms per micro-batch)
// Layers: the index range and the layers' names (the type, or "name:Type" when
// the name is not the index), all of them up to 4, else the first two, "..."
// and the last. "no limit" when there is no budget; time per micro-batch
// includes the outgoing transfer. With several stages per rank the first line
// says "over 4 stages on 2 ranks (2 per rank)", a "rank" column follows
// "stage", a line gives each rank's memory ("peak memory per rank (its stages
// together): rank 0 12.3 MiB, rank 1 4.1 MiB") and the busiest rank follows
// the bottleneck ("bottleneck 1.000 ms per micro-batch; busiest rank 0
// 2.000 ms", its stages' times summed).
// With one stage per rank the text is as above. With compute speeds (ranks
// sharing cores) a last line gives them: "ranks share cores: speed while 1,
// 2 of the pipeline's ranks compute: 0.98, 0.45".
std::string partition_table(const std::vector<LayerProfile>& layers, const PartitionPlan& plan);
// Writes partition_table to `os` on group rank 0; other ranks write nothing.
void print_partition_table(const std::vector<LayerProfile>& layers, const PartitionPlan& plan, ProcessGroup& group,
                           std::ostream& os);

}  // namespace weft::parallel::partition
