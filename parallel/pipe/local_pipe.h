// LocalPipe: one process, several devices (fairscale's Pipe, as against
// AsyncPipe's one process per rank). The partitions of a Sequential sit on
// the devices given (cpu, cuda:0, cuda:1, ...), each driven by its own thread,
// and run the same schedules as Pipe: each thread is a rank of a fresh
// in-process group (//parallel/comm/inproc) for every step, so the schedule's
// messages pass through memory.
//
// Contract:
// - LocalPipe(module, balance, devices, options): devices.size() plays the
//   number of ranks (stage s on devices[schedule().rank_of(s)]: s %
//   devices.size() for looped schedules, the V for zbv); balance as for Pipe
//   (plan_pipeline's checks); each partition moves to its device.
//   Boundary tensors travel through host memory (options.transfer_device is
//   ignored: the in-process group takes CPU tensors); a stage's input moves
//   to its device first. On a CPU-only machine every device may be the CPU.
// - step(input, target, loss_fn) and forward(input) as Pipe's (the loss, and
//   the output, on the caller's thread); parameters() are all partitions'.
// - Random numbers: each device's thread draws from a stream of its own,
//   forked from the caller's default generator at every step (run_ranks), as
//   each process of Pipe has its own generator: dropout is reproducible after
//   manual_seed, checkpointed micro-batches redraw the same masks, and no
//   thread's draws depend on how the threads interleave.
// - A failing stage fails the step on every thread: step() throws the first
//   rank's error ("run_ranks: rank r of n failed: PipelineRunner ... action
//   ..."), and the LocalPipe can run the next step.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nn/container.h"
#include "parallel/pipe/pipe.h"

namespace weft::parallel::pipe {

class LocalPipe {
 public:
  LocalPipe(const std::shared_ptr<nn::Sequential>& module, std::vector<int> balance, std::vector<Device> devices,
            PipeOptions options = {});

  double step(const Tensor& input, const Tensor& target, const LossFn& loss_fn);
  Tensor forward(const Tensor& input);

  std::vector<Tensor> parameters() const;
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  // Every stage's partition, in stage order, and the device it runs on.
  const std::vector<std::shared_ptr<nn::Sequential>>& partitions() const { return partitions_; }
  Device device_of_stage(int stage) const { return devices_[schedule_.rank_of(stage)]; }
  const Schedule& schedule() const { return schedule_; }
  const PipeOptions& options() const { return options_; }
  // How long a step may wait for a stage's thread before failing.
  void set_timeout(std::chrono::milliseconds t) { timeout_ = t; }

 private:
  // Runs `body(runner, rank)` on one thread per device.
  template <typename F>
  void run(F&& body);

  std::vector<int> balance_;
  std::vector<Device> devices_;
  PipeOptions options_;
  Schedule schedule_;
  std::vector<std::shared_ptr<nn::Sequential>> partitions_;  // per stage
  std::chrono::milliseconds timeout_ = std::chrono::minutes(10);
};

}  // namespace weft::parallel::pipe
