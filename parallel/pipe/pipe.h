// Pipe: a sequential model partitioned across the ranks of a process group and
// trained with pipelined micro-batches, in the shape fairscale's AsyncPipe and
// torch.distributed.pipelining users know. A front end over PipelineRunner.
//
// Contract:
// - Pipe(module, balance, group, options): `balance` gives the number of
//   consecutive layers (children of `module`) of each stage, in stage order;
//   there are group->size() * options.virtual_stages stages, placed as the
//   schedule says (schedule().stages_of_rank): stage s on rank
//   s % group->size() (looped placement, so with one stage per rank stage r is
//   rank r), except zbv's V (virtual_stages 2: rank r holds stages r and
//   2 size - 1 - r). Every rank holds the module (built from the same seed or loaded
//   from one checkpoint) and keeps only its stages' layers
//   (Sequential::slice: parameter names stay the whole model's).
// - Pipe(layers, balance, group, options): lazy construction, as AsyncPipe's
//   LazyModule list: `layers[i]` builds layer i; each rank calls only the
//   factories of its own stages, so a model too big for one process can be
//   trained. Layer i is named "i" (as the i-th child of a Sequential would be).
// - Argument checks (fairscale's, as weft::Error naming the values): sum of
//   balance equals the number of layers; every entry positive; chunks
//   positive; virtual_stages positive; balance has group->size() *
//   virtual_stages entries; the schedule runs (gpipe, 1f1b, interleaved, zb,
//   zbv with virtual_stages 2, interleaved-zb).
// - options.user_schedule (e.g. parse_schedule(text), parse.h) replaces the
//   generated one: it must pass validate() (validate.h; else the validator's
//   error) and be for group->size() ranks with `chunks` micro-batches and
//   `virtual_stages` stages per rank (else an error naming both values). Tied
//   groups in it need options.tied: the runner derives the groups from the
//   names and puts the Tied actions at the end of each holder's list, and the
//   result must be the user's schedule (else an error).
// - step(input, target, loss_fn) runs one training step over `chunks`
//   micro-batches with options.schedule (default gpipe, AsyncPipe's
//   fill-drain) and checkpoint mode (default except_last), accumulating the
//   local parameters' gradients, and returns the whole batch's loss on every
//   rank (PipelineRunner::step's contract).
// - forward(input): the forward-only schedule for evaluation; the whole
//   batch's output on the last stage's rank (undefined elsewhere).
// - deferred_batch_norm (fairscale's): the running statistics of every
//   BatchNorm in this rank's layers are updated once per step, from all its
//   micro-batches together, as BatchNorm on the whole batch would; each
//   micro-batch is still normalised with its own statistics.
// - parameters() / named_parameters(): this rank's, for its optimizer; a
//   tensor that two of this rank's stages share (a true tie whose members
//   both live here, as zbv's first and last stage on rank 0) once, under its
//   first name, as nn::Module::named_parameters lists it. size(),
//   operator[] and iteration go over this rank's layers in order.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nn/container.h"
#include "parallel/comm/process_group.h"
#include "parallel/pipe/generators.h"
#include "parallel/pipe/runner.h"

namespace weft::parallel::pipe {

using LayerFactory = std::function<std::shared_ptr<nn::Module>()>;

struct PipeOptions {
  int chunks = 1;  // micro-batches per step
  CheckpointMode checkpoint = CheckpointMode::kExceptLast;
  ScheduleKind schedule = ScheduleKind::kGPipe;
  int virtual_stages = 1;  // stages per rank (interleaved, interleaved-zb; 2 for zbv)
  // Every BatchNorm of this rank's layers defers its running-statistics update
  // to once per step over all micro-batches (Note [deferred batch norm] in
  // nn/layers.h), equal to BatchNorm's on the whole batch.
  bool deferred_batch_norm = false;
  // This rank's device (its layers move there; e.g. cuda:local_rank with an
  // NCCL group) and the device boundary messages travel on (RunnerOptions).
  Device device = kCPU;
  Device transfer_device = kCPU;
  // Tied parameters across stages (RunnerOptions::tied): groups of full
  // parameter names, e.g. {{"0.weight", "5.weight"}} for a GPT's embedding and
  // head; their gradients are summed between the stages holding them.
  std::vector<std::vector<std::string>> tied;
  // RunnerOptions::average_microbatches, data_parallel and reduction (the
  // replicas' group: DistributedModel sets it; Note [gradient reduction]).
  bool average_microbatches = true;
  std::shared_ptr<ProcessGroup> data_parallel;
  GradReductionOptions reduction;
  // A schedule of the user's instead of `schedule` (see the contract above).
  std::optional<Schedule> user_schedule;
  // RunnerOptions::autocast: forwards and the loss under autocast to this
  // dtype (e.g. DType::BFloat16).
  std::optional<DType> autocast;
};

// The argument checks Pipe and LocalPipe share (fairscale's, as weft::Error
// naming the values) for `num_layers` layers split by `balance` over `ranks`
// ranks, and the schedule they run.
Schedule plan_pipeline(size_t num_layers, const std::vector<int>& balance, int ranks, const PipeOptions& options);
// First layer index of each stage, and one past the last (size balance + 1).
std::vector<int> stage_bounds(const std::vector<int>& balance);
// Runner options from pipe options.
RunnerOptions runner_options(const PipeOptions& options);

class Pipe {
 public:
  Pipe(const std::shared_ptr<nn::Sequential>& module, std::vector<int> balance, std::shared_ptr<ProcessGroup> group,
       PipeOptions options = {});
  Pipe(const std::vector<LayerFactory>& layers, std::vector<int> balance, std::shared_ptr<ProcessGroup> group,
       PipeOptions options = {});

  double step(const Tensor& input, const Tensor& target, const LossFn& loss_fn) {
    return runner_->step(input, target, loss_fn);
  }
  // Inference (PipelineRunner::forward): the output on the last stage's rank.
  Tensor forward(const Tensor& input) { return runner_->forward(input); }

  std::vector<Tensor> parameters() const;
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;

  // This rank's layers, in order.
  size_t size() const { return layers_.size(); }
  std::shared_ptr<nn::Module> operator[](size_t i) const;
  std::vector<std::shared_ptr<nn::Module>>::const_iterator begin() const { return layers_.begin(); }
  std::vector<std::shared_ptr<nn::Module>>::const_iterator end() const { return layers_.end(); }

  const std::vector<int>& balance() const { return balance_; }
  const PipeOptions& options() const { return options_; }
  const Schedule& schedule() const { return runner_->schedule(); }
  // This rank's stages (one Sequential each) and their stage numbers.
  const std::vector<std::shared_ptr<nn::Sequential>>& partitions() const { return partitions_; }
  const std::vector<int>& stage_ids() const { return runner_->stage_ids(); }
  PipelineRunner& runner() { return *runner_; }

 private:
  void start(std::shared_ptr<ProcessGroup> group, Schedule schedule);

  std::vector<int> balance_;
  PipeOptions options_;
  std::vector<std::shared_ptr<nn::Sequential>> partitions_;
  std::vector<std::shared_ptr<nn::Module>> layers_;
  std::unique_ptr<PipelineRunner> runner_;
};

}  // namespace weft::parallel::pipe
