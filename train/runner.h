// The Trainer's per-layout execution (private to //train): how one step and
// one evaluation batch run for a layout (train/layout.h), and the
// DistributedModel and DistributedOptimizer that hold every layout's state
// for checkpoints.
//
// Contract:
// - make_runner(layout, ...) places the model (construction is collective
//   for the distributed layouts). Local and DataParallel: the whole model in
//   this process, wrapped for state in a DistributedModel of one stage over
//   a one-rank in-process group (sharing the model's modules and tensors),
//   its DistributedOptimizer holding the optimizer the loop steps;
//   DataParallel adds DistributedDataParallel over the layout's group.
//   Pipeline and Hybrid: a DistributedModel over the group (Pipeline: pp =
//   group size, dp = 1) with keep_output, so the last stage's ranks score.
// - train_step / eval_step return the loss as the rank knows it (the
//   replica's own batch for DataParallel, the global batch's for a
//   DistributedModel) and, on ranks that score (`scored`), the outputs, the
//   targets on the outputs' device and this rank's rows.
// - skip(batch, last, training): the batch cannot be run (a pipeline's
//   batch with fewer rows than micro-batches); the same answer on every
//   rank that must agree (Hybrid: a MIN over the world on the last batch).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "io/dataset.h"
#include "nn/container.h"
#include "parallel/hybrid/distributed_model.h"
#include "parallel/hybrid/distributed_optimizer.h"
#include "train/layout.h"
#include "train/optimizer.h"

namespace weft::train::detail {

struct StepResult {
  double loss = 0;
  Tensor output, target;
  double rows = 0;
  bool scored = false;
};

class Runner {
 public:
  virtual ~Runner() = default;
  virtual void prepare(const Tensor& sample) = 0;
  bool prepared() const { return dm_->partitioned(); }
  virtual StepResult train_step(const io::Batch& batch) = 0;
  virtual StepResult eval_step(const io::Batch& batch) = 0;
  virtual void set_training(bool on) = 0;
  virtual bool skip(const io::Batch& batch, bool last, bool training) = 0;
  // Where the step's sums are reduced; null: nothing to reduce.
  virtual parallel::ProcessGroup* metrics_group() = 0;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual bool writes_checkpoints() const = 0;
  virtual std::shared_ptr<nn::Sequential> whole_model() = 0;
  // DataParallel: the DDP wrapping the model (the layout's own or the wrapped
  // one); null for the other layouts.
  virtual parallel::DistributedDataParallel* ddp() { return nullptr; }

  parallel::hybrid::DistributedModel& dm() { return *dm_; }
  parallel::hybrid::DistributedOptimizer& dopt() { return *dopt_; }
  const std::shared_ptr<parallel::ProcessGroup>& dm_world() const { return dm_world_; }
  // The whole model's parameter names in order (positional optimizer state of
  // single-file checkpoints maps to them).
  const std::vector<std::string>& param_names() const { return param_names_; }

 protected:
  std::shared_ptr<parallel::ProcessGroup> dm_world_;
  std::unique_ptr<parallel::hybrid::DistributedModel> dm_;
  std::unique_ptr<parallel::hybrid::DistributedOptimizer> dopt_;
  std::vector<std::string> param_names_;
};

std::unique_ptr<Runner> make_runner(const Layout& layout, std::shared_ptr<nn::Sequential> model,
                                    parallel::pipe::LossFn loss, OptimizerFactory optimizer, double clip_grad_norm);

}  // namespace weft::train::detail
