// Callbacks: how code joins a Trainer's loop (fastai's Callback, Keras'
// callbacks) without copying it.
//
// Contract:
// - A callback sees the trainer at each event and may read and change its
//   state (Trainer::state(): epoch, step, running sums, history, stop flag),
//   the optimizer and the scheduler. Events, on every rank, in order:
//   on_prepared (once, when the model is placed and the optimizer built:
//   make schedulers there), on_fit_begin, then per epoch on_epoch_begin,
//   per training step on_step_begin / on_step_end (the step's loss and
//   reduced sums are in the state), on_evaluate_begin / on_evaluate_end
//   around the epoch's evaluation (state().last_eval), on_epoch_end (the
//   epoch's EpochRecord is history.back(); state().epoch already counts it
//   and state().batch is 0, so a checkpoint taken there resumes at the next
//   epoch; except for a fit_steps period cut short by max_steps, which stays
//   current: Note [a period cut short] in train/trainer.h), and on_fit_end
//   (also after request_stop()).
// - Callbacks run in increasing order() (ties: the order they were added):
//   LRSchedule -10, user callbacks 0, reporting 5, EarlyStop 10,
//   WeightAveraging 15, Checkpoint 20 (last, so a checkpoint holds what the
//   others changed).
// - Anything collective a callback does must be done on every rank (the
//   Trainer calls every callback on every rank); printing and writing files
//   is for Trainer::lead() only.
// - Lambda wraps functions for quick, one-off callbacks.
#pragma once

#include <functional>

namespace weft::train {

class Trainer;

class Callback {
 public:
  virtual ~Callback() = default;
  virtual int order() const { return 0; }
  virtual void on_prepared(Trainer&) {}
  virtual void on_fit_begin(Trainer&) {}
  virtual void on_epoch_begin(Trainer&) {}
  virtual void on_step_begin(Trainer&) {}
  virtual void on_step_end(Trainer&) {}
  virtual void on_evaluate_begin(Trainer&) {}
  virtual void on_evaluate_end(Trainer&) {}
  virtual void on_epoch_end(Trainer&) {}
  virtual void on_fit_end(Trainer&) {}
};

class Lambda : public Callback {
 public:
  using Fn = std::function<void(Trainer&)>;
  struct Events {
    Fn prepared, fit_begin, epoch_begin, step_begin, step_end, epoch_end, fit_end;
    int order = 0;
  };
  explicit Lambda(Events e) : e_(std::move(e)) {}
  int order() const override { return e_.order; }
  void on_prepared(Trainer& t) override { call(e_.prepared, t); }
  void on_fit_begin(Trainer& t) override { call(e_.fit_begin, t); }
  void on_epoch_begin(Trainer& t) override { call(e_.epoch_begin, t); }
  void on_step_begin(Trainer& t) override { call(e_.step_begin, t); }
  void on_step_end(Trainer& t) override { call(e_.step_end, t); }
  void on_epoch_end(Trainer& t) override { call(e_.epoch_end, t); }
  void on_fit_end(Trainer& t) override { call(e_.fit_end, t); }

 private:
  static void call(const Fn& f, Trainer& t) {
    if (f) f(t);
  }
  Events e_;
};

}  // namespace weft::train
