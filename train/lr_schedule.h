// LRSchedule: an LR scheduler (optim/lr_scheduler.h) stepped per step or
// per epoch, and saved and resumed with the run.
//
// Contract:
// - LRSchedule(factory, every): once the trainer is prepared, factory(the
//   trainer's optimizer) makes the scheduler (a pipeline rank without an
//   optimizer has none), which becomes Trainer::scheduler() so checkpoints
//   save it and resume() loads it (add it before fit/resume). It steps
//   after each training step (kStep) or at each epoch's end (kEpoch),
//   before other callbacks (order -10), so a checkpoint saves the stepped
//   schedule.
#pragma once

#include <functional>
#include <memory>

#include "optim/lr_scheduler.h"
#include "train/callback.h"

namespace weft::train {

using SchedulerFactory = std::function<std::unique_ptr<optim::LRScheduler>(optim::Optimizer&)>;

class LRSchedule : public Callback {
 public:
  enum class Every { kStep, kEpoch };
  explicit LRSchedule(SchedulerFactory factory, Every every = Every::kEpoch)
      : factory_(std::move(factory)), every_(every) {}
  int order() const override { return -10; }
  void on_prepared(Trainer& t) override;
  void on_step_end(Trainer&) override {
    if (scheduler_ && every_ == Every::kStep) scheduler_->step();
  }
  void on_epoch_end(Trainer&) override {
    if (scheduler_ && every_ == Every::kEpoch) scheduler_->step();
  }
  optim::LRScheduler* scheduler() const { return scheduler_.get(); }

 private:
  SchedulerFactory factory_;
  Every every_;
  std::unique_ptr<optim::LRScheduler> scheduler_;
};

}  // namespace weft::train
