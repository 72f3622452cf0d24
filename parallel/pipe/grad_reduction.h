// GradReduction: the data-parallel half of a replicated pipeline, run by the
// schedule's ReduceGrad and ReduceTiedGrad actions (Note [gradient reduction]
// in schedule.h). PipelineRunner owns one when RunnerOptions::data_parallel
// has more than one rank.
//
// Contract:
// - Construction takes this rank's stages (stage ids and modules, as the
//   runner holds them) and the data-parallel group that replicates them: every
//   replica runs the same schedule on the same stages, so the groups' members
//   hold the same parameters in the same order. Parameters in `tied` (full
//   names of tied parameters) are left to reduce_tied.
// - With overlap (the default), each stage has a Reducer (parallel/data/
//   reducer.h, bucketed, not waiting at the end of a backward): its sync is on
//   only for the stage's last gradient action of a synced step
//   (before_grad_action), so buckets launch while that backward runs and the
//   rest when it ends; reduce(stage) (the ReduceGrad action) then has nothing
//   left to launch and turns the sync off. Without overlap, or when the last
//   action computed no parameter gradient (a split schedule whose last
//   micro-batch was checkpointed: its B computed them), reduce(stage)
//   launches one asynchronous average per gradient. Either way the rank goes on, and wait(stage) (the
//   end of the step) waits and writes the averages into .grad.
// - reduce_tied(params) averages the given tensors' gradients (a tied group's
//   sum over stages) at once and waits: the ReduceTiedGrad action.
// - set_sync(false) makes a step accumulate locally (backward_passes_per_step):
//   its reductions do nothing, and the next synced step reduces the sum.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "nn/module.h"
#include "parallel/comm/process_group.h"
#include "parallel/data/reducer.h"

namespace weft::parallel::pipe {

struct GradReductionOptions {
  bool overlap = true;  // launch buckets during the stage's last gradient action
  double bucket_cap_mb = 25;
};

class GradReduction {
 public:
  GradReduction() = default;
  GradReduction(std::shared_ptr<ProcessGroup> data_parallel, const std::vector<int>& stage_ids,
                const std::vector<std::shared_ptr<nn::Module>>& stages, const std::set<std::string>& tied,
                GradReductionOptions options);
  GradReduction(GradReduction&&) = default;
  GradReduction& operator=(GradReduction&&) = default;

  // A group of more than one rank: the schedule carries reductions.
  bool active() const { return group_ != nullptr; }
  ProcessGroup& group() { return *group_; }
  void set_sync(bool on) { sync_ = on; }
  bool sync() const { return sync_; }
  // Before each B (W when split) of local stage `local`; `last`: its last one this step.
  void before_grad_action(int local, bool last);
  void reduce(int local);
  void wait(int local);
  void reduce_tied(const std::vector<Tensor>& params);

 private:
  struct Stage {
    std::vector<Tensor> params;        // requiring grad, tied ones excluded
    std::unique_ptr<Reducer> reducer;  // overlap only; null when no parameter
    std::vector<WorkPtr> works;        // without overlap: this step's averages
    std::vector<Tensor> buffers;       // their gradients, kept until wait()
  };
  std::shared_ptr<ProcessGroup> group_;
  GradReductionOptions options_;
  std::vector<Stage> stages_;
  bool sync_ = true;
};

}  // namespace weft::parallel::pipe
