// PipelineRunner: runs a Schedule (schedule.h) for one rank's stages of a
// pipeline over a ProcessGroup, one training step at a time (fairscale's
// AsyncPipe, multi-process: one or more stages per rank).
//
// Contract:
// - Construction: `schedule` must pass validate() (a schedule that would miss
//   an input, leave a message unmatched or deadlock is refused naming the rank
//   and action); group->size() == schedule.num_ranks; `stages` holds this
//   rank's stage modules in increasing stage order
//   (schedule.stages_of_rank(group->rank())).
// - Split schedules (zb-h1, zbv, interleaved-zb): B runs autograd::backward_input (the stage
//   input's gradient, sent on at once) and W later backward_weight (the
//   parameter gradients: linear and conv2d keep theirs apart, Note [split
//   backward] in autograd/engine.cc), so weight gradients fill the bubbles.
// - step(input, target, loss_fn): one forward and backward over
//   num_microbatches micro-batches. input and target are the whole batch
//   (input is read on the rank of stage 0, target on the rank of the last
//   stage; other ranks may pass undefined tensors). Rows are split along dim 0
//   into micro-batches as torch.tensor_split does: sizes differ by at most one,
//   the larger first, so a batch that does not divide by the micro-batch count
//   has smaller last micro-batches; fewer rows than micro-batches is an error.
//   The last stage computes loss_fn(output_mb, target_mb) per micro-batch and
//   backpropagates it weighted by rows_mb / rows, so parameter gradients
//   accumulate (into .grad, as in one process) to those of the row-weighted
//   mean loss: for mean-reduced losses, exactly the whole batch's loss. step()
//   returns that loss on every rank (broadcast from the last stage's rank).
// - Boundaries (Note [boundary messages] in runner.cc): each activation and
//   gradient crosses ranks as a shape header then the payload, through
//   batch_isend_irecv; sends are never waited for before the end of the step
//   (the validator's buffered-send rule), receives block when their action
//   comes. Shapes may change between steps and micro-batches. Neighbour stages
//   on one rank hand tensors over directly.
// - Checkpointing (fairscale's modes): micro-batches below the checkpoint
//   stop (kAlways: every one; kExceptLast, the default: all but the last;
//   kNever: none) run each stage's forward under autograd::checkpoint, so
//   only the stage inputs are kept and B recomputes the stage's activations
//   with the RNG state the forward saw (dropout draws the same masks). The
//   last micro-batch's backward follows its forward soonest, so keeping its
//   activations costs least.
// - Tied parameters (RunnerOptions::tied): schedule() includes their TiedGrad
//   actions; after step() every holder's .grad of a tied parameter is the sum
//   over all stages using it, as in one process.
// - Data parallelism (RunnerOptions::data_parallel, Note [gradient
//   reduction]): the schedule gains a ReduceGrad per stage after its last B
//   (W) and a ReduceTiedGrad after each TiedGrad; step() returns once every
//   reduction has finished. The trace shows a ReduceGrad from its issue to
//   the end of its wait.
// - Errors: a failure in any action (a receive that times out, a stage that
//   throws, a message of the wrong shape) is rethrown naming this rank, the
//   action's index and text (e.g. "RecvAct1.3<-s0@r0"), the micro-batch and,
//   for a receive, the stage and rank it waits for ("action 5 of 16
//   (RecvAct1.3<-s0@r0, micro-batch 3, waiting for stage 0 on rank 0) failed:
//   ..."); peers waiting on this rank then time out naming it as missing
//   (tests/parallel/pipe/pipe_fault_test.sh: a killed or throwing rank).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "nn/module.h"
#include "parallel/comm/process_group.h"
#include "parallel/pipe/grad_reduction.h"
#include "parallel/pipe/schedule.h"
#include "parallel/pipe/tied.h"
#include "parallel/pipe/trace.h"

namespace weft::parallel::pipe {

// CheckpointMode, parse_checkpoint_mode and checkpoint_mode_name: schedule.h.

struct RunnerOptions {
  CheckpointMode checkpoint = CheckpointMode::kExceptLast;
  // Record each action's start and duration (last_trace(); trace.h).
  bool record_trace = false;
  // Keep the last stage's outputs of each step (last_output()).
  bool keep_output = false;
  // Where this rank's stages run: each stage's input (received, handed over
  // or the micro-batch) and the targets move here first.
  Device device = kCPU;
  // What boundary messages travel as: received tensors are made on this
  // device and sent ones moved here first (MPI and the in-process group take
  // CPU tensors, NCCL CUDA ones).
  Device transfer_device = kCPU;
  // Tied parameters (Note [tied parameters] in schedule.h, tied.h): groups of
  // full parameter names that are one parameter used by several stages, e.g.
  // {{"0.weight", "5.weight"}}. With any, construction is collective over the
  // group (every rank passes the same groups) and the schedule gains a
  // TiedGrad action per group on each rank holding one: after this rank's last
  // B and W, the group's gradient summed over its holders.
  std::vector<std::vector<std::string>> tied;
  // Micro-batch losses weighted by rows_mb / rows (true: the step's gradient
  // is the batch mean loss's) or by 1 (false: the sum over micro-batches,
  // SageMaker's average_grads_across_microbatches off).
  bool average_microbatches = true;
  // Note [gradient reduction] in schedule.h: the group of replicas of this
  // rank's stages (null or one rank: no data parallelism). With more than one
  // rank, construction adds ReduceGrad and ReduceTiedGrad actions to the
  // schedule and step() leaves every stage's gradient averaged over the group
  // (tied ones after their sum over stages); grad_reduction.h says how.
  std::shared_ptr<ProcessGroup> data_parallel;
  GradReductionOptions reduction;
  // Mixed precision (torch.autocast): each forward of this rank's stages and
  // the last stage's loss run under AutocastGuard(device.type, *autocast)
  // (core/autocast.h), the recomputation of a checkpointed micro-batch too;
  // backward and the optimizer outside it. Boundary messages carry whatever
  // dtype a stage returns (bfloat16 halves them where a stage ends in a
  // matmul). None: full precision.
  std::optional<DType> autocast;
};

// The loss of one micro-batch: a one-element tensor (mean-reduced for the
// step's loss to equal the whole batch's).
using LossFn = std::function<Tensor(const Tensor& output, const Tensor& target)>;

class PipelineRunner {
 public:
  PipelineRunner(Schedule schedule, std::vector<std::shared_ptr<nn::Module>> stages,
                 std::shared_ptr<ProcessGroup> group, RunnerOptions options = {});

  double step(const Tensor& input, const Tensor& target, const LossFn& loss_fn);
  // Inference: runs only the forwards (and their messages) of the schedule
  // under NoGradGuard and returns the last stage's output for the whole batch
  // (the micro-batch outputs concatenated) on the last stage's rank, an
  // undefined tensor elsewhere. input as for step().
  Tensor forward(const Tensor& input);
  // With keep_output (or after forward()): the last stage's output of the
  // last step on its rank (detached, micro-batches concatenated).
  const Tensor& last_output() const { return last_output_; }

  const Schedule& schedule() const { return schedule_; }
  const RunnerOptions& options() const { return options_; }
  void set_record_trace(bool on) { options_.record_trace = on; }
  void set_keep_output(bool on) { options_.keep_output = on; }
  // Data parallelism: whether the next steps reduce gradients (false: they
  // accumulate locally, backward_passes_per_step; the next synced step reduces the sum).
  void set_reduce_grads(bool on) { reduction_.set_sync(on); }
  // With record_trace: this rank's actions of the last step(), in order
  // (forward() does not record).
  const std::vector<TraceEvent>& last_trace() const { return trace_; }
  // This rank's stage numbers and modules, in increasing stage order.
  const std::vector<int>& stage_ids() const { return stage_ids_; }
  const std::vector<std::shared_ptr<nn::Module>>& stages() const { return stages_; }
  // The rows of each micro-batch for a batch of `rows` (tensor_split sizes).
  std::vector<int64_t> microbatch_rows(int64_t rows) const;

 private:
  struct StepState;
  void split(StepState& st, const Tensor& input, const Tensor& target, bool need_target) const;
  void run(StepState& st, const std::vector<Action>& actions);
  void run_action(StepState& st, const Action& a);
  int local(int stage) const;

  Schedule schedule_;
  std::vector<int> stage_ids_;
  std::vector<std::shared_ptr<nn::Module>> stages_;
  std::shared_ptr<ProcessGroup> group_;
  RunnerOptions options_;
  std::vector<TraceEvent> trace_;
  Tensor last_output_;
  TiedParameters tied_;
  GradReduction reduction_;
  std::vector<int> last_grad_action_;  // per local stage: index of its last B (W when split) in this rank's list
};

}  // namespace weft::parallel::pipe
