// WeightAveraging: a running average of the model's weights kept during
// training, an exponential moving average (EMA) or stochastic weight
// averaging's equal average (SWA), used for the evaluations and left in the
// model at the end (PyTorch Lightning's WeightAveraging and
// StochasticWeightAveraging callbacks, over optim/swa_utils.h's averaging
// functions).
//
//   t.add<train::WeightAveraging>(train::WeightAveragingOptions{.multi_avg_fn = optim::ema_multi_avg_fn(0.999)});
//   t.add<train::WeightAveraging>(train::WeightAveragingOptions{.start_step = 600, .every_steps = 0});  // SWA per
//   epoch
//
// Contract:
// - Each rank averages the tensors it holds: the whole model's parameters in
//   one process and under DataParallel, its stages' under a pipeline (and
//   the buffers too with use_buffers; otherwise the model's own buffers serve
//   the average, as AveragedModel copies them).
// - When: after each optimizer step whose count (state().step) is at least
//   start_step and a multiple of every_steps past it; with every_steps 0, at
//   the end of each epoch (or whole evaluation period) whose step count
//   reaches start_step, after its evaluation (as Lightning's SWA: an epoch's
//   evaluation sees the average of the epochs before it; a period cut short
//   by max_steps is averaged when it is completed, so a resumed run averages
//   as the uninterrupted one). The first update copies the weights; later ones
//   apply multi_avg_fn, avg_fn (at most one may be given) or, with neither,
//   the equal-weight average (optim::swa_avg_fn).
// - evaluate_averaged: each epoch's evaluation runs with the average in the
//   model (once there is one) and the training weights are put back after
//   it. apply_at_end: fit (or fit_steps) ends with the average in the model;
//   then optim::update_bn recomputes batch norm statistics if the model has
//   any. The optimizer's state is untouched.
// - The average is checkpointed: the callback registers itself as the rank
//   state "weight_averaging" (Note [rank state] in train/rank_state.h), so
//   a Checkpoint saves every rank's average and a resume restores it: the
//   resumed run averages exactly as the uninterrupted one. A checkpoint saved
//   without this callback cannot be resumed with it (the error names the
//   missing part).
// - Order 15: after the LR schedule and EarlyStop, before Checkpoint (20),
//   so a checkpoint holds the step's update.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "optim/swa_utils.h"
#include "train/callback.h"

namespace weft::train {

struct WeightAveragingOptions {
  optim::AvgFn avg_fn;             // per tensor
  optim::MultiAvgFn multi_avg_fn;  // e.g. optim::ema_multi_avg_fn(0.999)
  bool use_buffers = false;
  int64_t start_step = 0;   // the first optimizer step count whose weights join the average
  int64_t every_steps = 1;  // 0: once per epoch instead
  bool evaluate_averaged = true;
  bool apply_at_end = true;
};

class WeightAveraging : public Callback {
 public:
  explicit WeightAveraging(WeightAveragingOptions options = {});
  int order() const override { return 15; }
  void on_prepared(Trainer& t) override;
  void on_step_end(Trainer& t) override;
  void on_evaluate_begin(Trainer& t) override;
  void on_evaluate_end(Trainer& t) override;
  void on_epoch_end(Trainer& t) override;
  void on_fit_end(Trainer& t) override;

  // The number of updates so far (0: no average yet).
  int64_t num_averaged() const { return n_averaged_; }
  // This rank's averaged tensors under the model's names.
  std::vector<std::pair<std::string, Tensor>> averaged() const;
  // Copies the average into the model (what apply_at_end does); an error before the first update.
  void apply();

 private:
  void update();
  void swap();

  WeightAveragingOptions options_;
  std::vector<std::pair<std::string, Tensor>> live_;  // the model's tensors
  std::vector<Tensor> average_;
  int64_t n_averaged_ = 0;
  bool swapped_ = false;
};

}  // namespace weft::train
