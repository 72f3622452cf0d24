// Preemption: a job warned by its scheduler (Slurm sends SIGTERM, or SIGUSR1
// ahead of time with --signal) stops at the next step boundary on every
// rank, saves a checkpoint there and tells the launcher to resume, not to
// count a failure.
//
// Contract:
// - Preemption(options) installs handlers for options.signals at fit begin
//   and restores the previous ones at fit end (and when destroyed). A
//   handler only records the signal; the process goes on. The ranks of an
//   in-process group share one process and its signals (handlers are
//   installed once per process, by the first Preemption, and restored by
//   the last).
// - After every step (collective over the Trainer's ranks: one small
//   allreduce), if any rank has received one of the signals, every rank
//   stops at that same step: options.checkpoint (when given) saves unless
//   it already saved this step, the Trainer stops (request_stop: fit ends
//   now, mid-epoch saves resume at the next batch) and preempted() is true,
//   with signal() the largest signal number received and rank() the lowest
//   rank that received it. The lead says so on stderr.
// - kResumeExitCode (75, sysexits' EX_TEMPFAIL) is the status a program
//   exits with after a preempted fit, once its checkpoint is committed (the
//   Checkpoint callback commits at fit end): "stopped on request, resume
//   me", distinct from success (0), a usage error (2) and a failure (1).
// - pending_signal() is the signal this process received and not yet acted
//   on (0: none); raise() in a test stands for the scheduler.
#pragma once

#include <csignal>
#include <vector>

#include "train/callback.h"
#include "train/checkpoint.h"

namespace weft::train {

inline constexpr int kResumeExitCode = 75;

struct PreemptionOptions {
  std::vector<int> signals{SIGTERM, SIGUSR1};
  Checkpoint* checkpoint = nullptr;  // saves at the stop; nullptr: stop without saving
};

class Preemption : public Callback {
 public:
  explicit Preemption(PreemptionOptions options = {});
  ~Preemption() override;
  int order() const override { return 25; }  // after Checkpoint (20): a save due at this step comes first
  void on_fit_begin(Trainer& t) override;
  void on_step_end(Trainer& t) override;
  void on_fit_end(Trainer& t) override;
  bool preempted() const { return signal_ != 0; }
  int signal() const { return signal_; }
  int rank() const { return rank_; }

 private:
  void uninstall();
  PreemptionOptions options_;
  bool installed_ = false;
  int signal_ = 0;
  int rank_ = -1;
};

int pending_signal();

}  // namespace weft::train
