// StepLog: the lead's JSON-lines file of every training step's loss, for
// following a run step by step (a restarted run's first steps against an
// uninterrupted run's, say).
//
// Contract:
// - StepLog(path): after each training step the lead appends
//   {"step": N, "epoch": E, "loss": L} (N: the optimizer steps taken, 1 for
//   the first step; E: the 0-based epoch the step belongs to; L: the step's
//   loss, the mean over its global batch, printed with 17 significant digits
//   so that it reads back bitwise).
// - At fit's start the lead keeps the lines of steps up to state().step (a
//   resumed run's steps before its checkpoint, written by the run that saved
//   it) and drops the rest (steps a failed run took past that checkpoint), so
//   the file always holds each step once, as the history holds each epoch
//   once; a fresh run (step 0) starts it empty. A line that is not such an
//   object is an error naming the file and line.
// Other ranks do nothing.
#pragma once

#include <string>

#include "train/callback.h"

namespace weft::train {

class StepLog : public Callback {
 public:
  explicit StepLog(std::string path) : path_(std::move(path)) {}
  int order() const override { return 5; }
  void on_fit_begin(Trainer& t) override;
  void on_step_end(Trainer& t) override;

 private:
  std::string path_;
};

}  // namespace weft::train
