// DasoSchedule: when DASO (parallel/data/daso.h) averages the parameters between
// nodes, as a pure state machine over epochs and steps (no tensors, no
// communication), so the schedule can be pinned against hand-worked sequences.
//
// Contract (Note [daso schedule]):
// - Phases by epoch e (0-based) of total_epochs T: warm-up while e <
//   warmup_epochs, cool-down once e >= T - cooldown_epochs (warm-up wins where
//   they overlap), cycling in between. Warm-up and cool-down average globally
//   and blocking at every step: global_skip 1, batches_to_wait 0.
// - Cycling: a global average starts (without blocking) at the steps s of the
//   epoch with s % global_skip == 0 and is folded into the parameters
//   batches_to_wait steps later; the last step of every epoch is a blocking
//   average, so every epoch ends with the same parameters on every rank. A
//   start whose fold would not come before the last step is left out (the
//   last step's blocking average supersedes it): with N steps, last = N - 1,
//     fold(s)     = s < last && s >= w && (s - w) % k == 0
//     start(s)    = s < last && s % k == 0 && s + w < last
//     blocking(s) = s == last
//   for k = global_skip, w = batches_to_wait; within a step the fold comes
//   first, so at most one average is in flight (w <= k always holds).
// - Local skips (heat's local_skip, when options.local_skips): in the
//   cycling phase the node DDP averages the gradients of step s only when
//     node_sync(s) = s % L == 0 || fold(s) || start(s) || blocking(s)
//   for L = local_skip; at the other steps each rank of a node steps on its
//   own gradients, so the node's ranks drift apart until the next fold or
//   blocking average unifies them (daso.h). local_skip is 1 (every step
//   averages) in warm-up and cool-down and without options.local_skips.
// - Entering the cycling phase (at epoch 0 when warmup_epochs is 0): skips
//   start at max_global_skips, batches_to_wait and local_skip at
//   initial_wait() = clamp(max_global_skips / local_skip_factor, 1, max_global_skips)
//   (heat's first reset values; its initial 4 and 1 are replaced by them).
// - The plateau detector (heat's DetectMetricPlateau, "min" mode, relative
//   threshold stability_level): a loss improves when it is below
//   best * (1 - stability_level); more than `patience` epochs in a row
//   without improvement is a plateau (the count restarts, best is kept).
//   end_epoch(loss) feeds it whenever the next epoch is a cycling one,
//   including the last warm-up epoch's loss (its first, setting the best).
// - On a plateau inside the cycling phase: global_skip = max(1, global_skip /
//   skip_reduction_factor), batches_to_wait = clamp(batches_to_wait - 1, 1,
//   global_skip) and local_skip = max(1, local_skip / skip_reduction_factor);
//   a plateau at global_skip 1 starts the cycle again from max_global_skips
//   and initial_wait() for both the others (heat's reset).
// - Options are checked at construction (errors name the option and value).
#pragma once

#include <string>

namespace weft::parallel {

enum class DasoPhase { kWarmup, kCycling, kCooldown };

// "warm-up", "cycling", "cool-down".
const char* daso_phase_name(DasoPhase phase);

// heat.optim.DASO's schedule knobs with its defaults (total_epochs has none).
struct DasoScheduleOptions {
  int total_epochs = 0;
  int warmup_epochs = 4;
  int cooldown_epochs = 4;
  double stability_level = 0.05;
  int patience = 2;  // heat's DetectMetricPlateau(patience=2)
  int max_global_skips = 8;
  int skip_reduction_factor = 2;
  int local_skip_factor = 4;
  bool local_skips = true;  // heat's local skips; false: the node DDP averages every step
};

// Has a loss stopped improving (relative threshold, "min" mode)?
class PlateauDetector {
 public:
  PlateauDetector(double threshold, int patience);
  // Records one epoch's loss; true when it ends a plateau (more than
  // `patience` epochs in a row without improvement).
  bool observe(double loss);
  double best() const { return best_; }
  int bad_epochs() const { return bad_; }
  void restore(double best, int bad_epochs) {
    best_ = best;
    bad_ = bad_epochs;
  }

 private:
  double threshold_;
  int patience_;
  double best_;
  int bad_ = 0;
};

// What one step does with the global average, in this order.
struct DasoStepPlan {
  bool fold = false;      // fold in the average started batches_to_wait steps ago
  bool blocking = false;  // average now and wait for it
  bool start = false;     // start an average without waiting
  // Whether the node DDP averages this step's gradients (its backward runs
  // before the step, so Daso arms the node DDP a step ahead).
  bool node_sync = true;
};

class DasoSchedule {
 public:
  explicit DasoSchedule(DasoScheduleOptions options);

  const DasoScheduleOptions& options() const { return o_; }
  int epoch() const { return epoch_; }
  DasoPhase phase() const { return phase_of(epoch_); }
  DasoPhase phase_of(int epoch) const;
  // 1 in warm-up and cool-down.
  int global_skip() const { return skip_; }
  // 0 in warm-up and cool-down (blocking).
  int batches_to_wait() const { return wait_; }
  // 1 in warm-up and cool-down, and without options.local_skips.
  int local_skip() const { return local_; }
  int initial_wait() const;

  // Step `step` of an epoch of `steps_per_epoch` steps in the current epoch.
  DasoStepPlan step_plan(int step, int steps_per_epoch) const;

  // Ends the current epoch with its training loss (the same value on every
  // rank) and moves to the next; true when the plateau detector fired.
  bool end_epoch(double loss);
  const PlateauDetector& plateau() const { return plateau_; }

  // "epoch 5 (cycling): global_skip 8, batches_to_wait 2, local_skip 2"
  std::string describe() const;

  // What an exact resume needs beyond the options (Daso::state_dict): the
  // epoch, the skips, and the plateau detector's best and bad count.
  struct State {
    int epoch = 0, global_skip = 1, batches_to_wait = 0, local_skip = 1;
    double best = 0;
    int bad_epochs = 0;
  };
  State state() const;
  // Restores `s` (checked against the options: an error naming the field).
  void load_state(const State& s);

 private:
  void set_for_epoch();

  DasoScheduleOptions o_;
  PlateauDetector plateau_;
  int epoch_ = 0;
  int skip_ = 1;
  int wait_ = 0;
  int local_ = 1;
};

}  // namespace weft::parallel
