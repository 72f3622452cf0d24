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
//   schedule. A fit_steps period cut short by max_steps (Note [a period cut
//   short], train/trainer.h) does not step a kEpoch schedule: the period
//   steps it at its real end, so a run stopped there and resumed steps it
//   as often as the uninterrupted run.
// - A ReduceLROnPlateau (every scheduler is an optim::LRScheduler, so it is
//   saved and resumed the same way) steps at each epoch's end (kEpoch only:
//   kStep is an error at on_prepared) with the epoch's `monitor` value, an
//   EpochRecord key (train/history.h: "test_loss", "valid_accuracy", ...);
//   empty: the validation loss ("<valid>_loss") when the epoch was
//   evaluated, else the training loss ("train_loss"). Its mode (kMin, kMax)
//   must suit that value; a value not measured is NaN, never an improvement.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "optim/lr_scheduler.h"
#include "train/callback.h"

namespace weft::train {

using SchedulerFactory = std::function<std::unique_ptr<optim::LRScheduler>(optim::Optimizer&)>;

class LRSchedule : public Callback {
 public:
  enum class Every { kStep, kEpoch };
  explicit LRSchedule(SchedulerFactory factory, Every every = Every::kEpoch, std::string monitor = "")
      : factory_(std::move(factory)), every_(every), monitor_(std::move(monitor)) {}
  int order() const override { return -10; }
  void on_prepared(Trainer& t) override;
  void on_step_end(Trainer&) override {
    if (scheduler_ && every_ == Every::kStep) scheduler_->step();
  }
  void on_evaluate_end(Trainer&) override { evaluated_ = true; }
  void on_epoch_end(Trainer& t) override;
  optim::LRScheduler* scheduler() const { return scheduler_.get(); }

 private:
  SchedulerFactory factory_;
  Every every_;
  std::string monitor_;
  std::unique_ptr<optim::LRScheduler> scheduler_;
  optim::ReduceLROnPlateau* plateau_ = nullptr;  // scheduler_, when it is one
  bool evaluated_ = false;                       // this epoch was evaluated
};

}  // namespace weft::train
