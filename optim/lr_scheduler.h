// Learning-rate schedulers (PyTorch's torch.optim.lr_scheduler): StepLR,
// MultiStepLR, ExponentialLR, LinearLR, ConstantLR, LambdaLR,
// MultiplicativeLR, CosineAnnealingLR, CosineAnnealingWarmRestarts,
// PolynomialLR, LinearWarmupCosine, OneCycleLR, CyclicLR and ReduceLROnPlateau;
// SequentialLR and ChainedScheduler, which combine them, are in
// optim/lr_scheduler_composite.h.
//
// Contract:
// - Base lrs are PyTorch's: the first scheduler made on an optimizer stores
//   each group's lr as the group's initial_lr (ParamGroup::initial_lr), and
//   every scheduler takes the groups' initial_lr as its base lrs, so a second
//   scheduler on the same optimizer starts from the lrs the groups had before
//   the first one changed them. OneCycleLR sets initial_lr to max_lr /
//   div_factor, and CyclicLR sets the lrs to its base_lr before initial_lr is
//   taken (both as PyTorch). A scheduler applies the value for epoch 0 at once
//   (ReduceLROnPlateau leaves the lrs as they are), and each step() advances
//   last_epoch by one and writes the new lr into every param group. Defaults, argument checks and
//   values are PyTorch's; the values follow PyTorch's recursive formulas (each
//   lr computed from the group's current lr, in the same expression order), so
//   they equal PyTorch's to rounding, including where the recursion and the
//   closed form differ in the last bits. Errors name the bad value. Beyond
//   PyTorch's checks weft refuses what PyTorch accepts but cannot mean: a NaN
//   factor or pct_start, ReduceLROnPlateau's negative patience or cooldown,
//   OneCycleLR's div_factor or final_div_factor <= 0; where PyTorch fails
//   with a division by zero (ConstantLR's factor 0 at total_iters, a
//   OneCycleLR phase of no length) weft fails with a message at that step.
// - A step that fails (OneCycleLR past total_steps, ...) changes nothing
//   (PyTorch leaves last_epoch advanced).
// - LinearWarmupCosine reproduces SequentialLR([LinearLR(start_factor, 1.0,
//   warmup_steps), CosineAnnealingLR(total_steps - warmup_steps, eta_min)],
//   milestones=[warmup_steps]).
// - OneCycleLR also cycles each group's momentum when cycle_momentum is set:
//   the option "beta1" when the optimizer has one (Adam, AdamW: PyTorch's
//   betas[0]), else "momentum" (SGD, RMSprop); an optimizer with neither
//   (Adagrad) is an error. PyTorch's epochs/steps_per_epoch form is not
//   offered: pass total_steps = epochs * steps_per_epoch.
//   Where PyTorch stashes initial_lr, max_lr, min_lr, base_momentum and
//   max_momentum in the param groups (weft's groups hold only their
//   optimizer's options), OneCycleLR keeps them and saves them in its state dict.
// - ReduceLROnPlateau is stepped with the metric it watches, step(metric)
//   (PyTorch 2's ReduceLROnPlateau.step(metrics)); step() without one is an
//   error. A NaN metric is never an improvement.
// - state_dict(): "last_epoch" (int64 0-dim), "base_lrs" and "last_lrs" (float64,
//   one per group), plus each scheduler's own state (below: OneCycleLR,
//   ReduceLROnPlateau). load_state_dict() checks every key and shape before it
//   changes anything, then restores them and the groups' lrs (and OneCycleLR's
//   momentum). Hyper-parameters given to the constructor (step sizes, gammas,
//   lambdas, total_steps, patience, ...) are not saved: build the scheduler
//   with the same arguments, then load.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace weft::optim {

using SchedulerStateDict = std::map<std::string, Tensor>;

// A hyper-parameter given once for every param group or once per group
// (PyTorch's float-or-list arguments).
class PerGroup {
 public:
  PerGroup(double v) : values_{v}, per_group_(false) {}                         // NOLINT
  PerGroup(std::vector<double> v) : values_(std::move(v)), per_group_(true) {}  // NOLINT
  PerGroup(std::initializer_list<double> v) : values_(v), per_group_(true) {}   // NOLINT
  // One value per group of `optimizer`; a per-group list of another length is
  // an error naming `who` and `name` (PyTorch's message).
  std::vector<double> resolve(const char* who, const char* name, const Optimizer& optimizer) const;
  bool per_group() const { return per_group_; }
  size_t size() const { return values_.size(); }

 private:
  std::vector<double> values_;
  bool per_group_;
};

namespace detail {

// The option OneCycleLR and CyclicLR cycle against the lr: "beta1" when the
// optimizer has one (Adam, AdamW: PyTorch's betas[0]), else "momentum" (SGD,
// RMSprop). Off (key() empty) without cycle_momentum.
class CycledMomentum {
 public:
  CycledMomentum() = default;
  // An error naming `who` when the optimizer has neither option (Adagrad).
  CycledMomentum(const char* who, const Optimizer& optimizer, const PerGroup& base_momentum,
                 const PerGroup& max_momentum);
  bool on() const { return !key_.empty(); }
  const std::string& key() const { return key_; }
  const std::vector<double>& base() const { return base_; }
  const std::vector<double>& max() const { return max_; }
  const std::vector<double>& last() const { return last_; }
  // Writes one value per group into the optimizer's groups; they become last().
  void apply(Optimizer& optimizer, std::vector<double> momentums);
  // "base_momentums", "max_momentums", "last_momentums" when on.
  std::vector<std::string> state_keys() const;
  void save(SchedulerStateDict& sd) const;
  // Values already checked (one per group); writes last into the groups.
  void load(Optimizer& optimizer, std::vector<double> base, std::vector<double> max, std::vector<double> last);

 private:
  std::string key_;
  std::vector<double> base_, max_, last_;
};

}  // namespace detail

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  virtual void step();
  Optimizer& optimizer() const { return optimizer_; }
  const std::vector<double>& get_last_lr() const { return last_lrs_; }
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  int64_t last_epoch() const { return last_epoch_; }

  SchedulerStateDict state_dict() const;
  void load_state_dict(const SchedulerStateDict& sd);

 protected:
  explicit LRScheduler(Optimizer& optimizer);
  // CyclicLR's: sets group g's lr to start_lrs[g] before initial_lr is taken.
  LRScheduler(Optimizer& optimizer, const std::vector<double>& start_lrs);
  // Sets each group's initial_lr where it has none (to the base lr read at
  // construction) and epoch 0's lrs; called at the end of each subclass
  // constructor, after its checks, so a refused scheduler changes nothing.
  void initial_step();
  // The lrs for last_epoch_ (already advanced), from the groups' current lrs.
  // step() undoes the advance when it throws.
  virtual std::vector<double> get_lr() = 0;
  // The lrs at epoch 0 when SequentialLR hands over to this scheduler at a
  // milestone (PyTorch's _update_lr(0)): the closed form at epoch 0 for the
  // schedulers that have one (it reads the base lrs, not the groups' lrs),
  // get_lr() at epoch 0 for the rest.
  virtual std::vector<double> restart_lr() { return get_lr(); }
  // For the composites: sets `s` to epoch 0 with s.restart_lr() (s unchanged
  // when it throws), and takes one from last_epoch (PyTorch's recursive_undo).
  static void restart(LRScheduler& s);
  static void undo_step(LRScheduler& s) { --s.last_epoch_; }
  // Writes `lrs` into the groups and get_last_lr().
  void set_lrs(std::vector<double> lrs);

  double group_lr(size_t g) const { return optimizer_.param_groups()[g].lr(); }
  size_t num_groups() const { return optimizer_.param_groups().size(); }
  // Every group's current lr times `factor`; factor 1 keeps them.
  std::vector<double> group_lrs_times(double factor) const;
  // Every base lr times `factor`.
  std::vector<double> base_lrs_times(double factor) const;

  // A subclass's own state: the keys it adds to state_dict() (save_extra_state
  // writes exactly these) and load_extra_state, called after the base's checks
  // and before anything changes; it must check all its entries before it
  // changes anything itself.
  virtual std::vector<std::string> extra_state_keys() const { return {}; }
  virtual void save_extra_state(SchedulerStateDict&) const {}
  virtual void load_extra_state(const SchedulerStateDict&) {}
  // sd[key] as one value per group (float64 (num_groups,)); an error naming the key otherwise.
  std::vector<double> per_group_entry(const SchedulerStateDict& sd, const std::string& key) const;
  // OneCycleLR's and CyclicLR's momentum entries (when `m` is on) checked, then loaded into `m` and the groups.
  void load_momentum(const SchedulerStateDict& sd, detail::CycledMomentum& m);
  static Tensor per_group_tensor(const std::vector<double>& v);

  Optimizer& optimizer_;
  std::vector<double> base_lrs_;
  int64_t last_epoch_ = -1;

 private:
  std::vector<double> last_lrs_;
};

// lr *= gamma every step_size epochs.
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 protected:
  std::vector<double> get_lr() override;
  std::vector<double> restart_lr() override;

 private:
  int64_t step_size_;
  double gamma_;
};

// lr *= gamma ** (the number of times the epoch appears in milestones) at each
// milestone (a milestone may repeat, as PyTorch's Counter; 0 applies at once).
class MultiStepLR : public LRScheduler {
 public:
  MultiStepLR(Optimizer& optimizer, const std::vector<int64_t>& milestones, double gamma = 0.1);

 protected:
  std::vector<double> get_lr() override;
  std::vector<double> restart_lr() override;

 private:
  std::map<int64_t, int64_t> milestones_;  // epoch -> count
  double gamma_;
};

// lr *= gamma every epoch.
class ExponentialLR : public LRScheduler {
 public:
  ExponentialLR(Optimizer& optimizer, double gamma);

 protected:
  std::vector<double> get_lr() override;
  std::vector<double> restart_lr() override;

 private:
  double gamma_;
};

// The factor of lr goes linearly from start_factor (epoch 0) to end_factor
// (epoch total_iters), then stays. 0 < start_factor <= 1, 0 <= end_factor <= 1.
class LinearLR : public LRScheduler {
 public:
  explicit LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0,
                    int64_t total_iters = 5);

 protected:
  std::vector<double> get_lr() override;
  std::vector<double> restart_lr() override;

 private:
  double start_factor_, end_factor_;
  int64_t total_iters_;
};

// lr * factor for epochs [0, total_iters), then lr. 0 <= factor <= 1 (factor 0
// cannot be undone: the step to total_iters is an error, as PyTorch's
// division by zero).
class ConstantLR : public LRScheduler {
 public:
  explicit ConstantLR(Optimizer& optimizer, double factor = 1.0 / 3, int64_t total_iters = 5);

 protected:
  std::vector<double> get_lr() override;
  std::vector<double> restart_lr() override;

 private:
  double factor_;
  int64_t total_iters_;
};

// f(epoch): a multiplicative factor. One function for every group or one per group.
using LRLambda = std::function<double(int64_t epoch)>;

// lr = base_lr * f(epoch).
class LambdaLR : public LRScheduler {
 public:
  LambdaLR(Optimizer& optimizer, LRLambda lr_lambda);
  LambdaLR(Optimizer& optimizer, std::vector<LRLambda> lr_lambdas);

 protected:
  std::vector<double> get_lr() override;

 private:
  std::vector<LRLambda> lambdas_;
};

// lr *= f(epoch) for epochs >= 1.
class MultiplicativeLR : public LRScheduler {
 public:
  MultiplicativeLR(Optimizer& optimizer, LRLambda lr_lambda);
  MultiplicativeLR(Optimizer& optimizer, std::vector<LRLambda> lr_lambdas);

 protected:
  std::vector<double> get_lr() override;
  std::vector<double> restart_lr() override;

 private:
  std::vector<LRLambda> lambdas_;
};

// lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2, via
// PyTorch's recursion (periodic past T_max).
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0.0);

 protected:
  std::vector<double> get_lr() override;
  std::vector<double> restart_lr() override;

 private:
  int64_t t_max_;
  double eta_min_;
};

// Cosine annealing with warm restarts (SGDR): lr = eta_min + (base_lr - eta_min)
// * (1 + cos(pi * T_cur / T_i)) / 2, where T_cur counts the epochs since the last
// restart and a restart comes when T_cur reaches T_i; T_i starts at T_0 and is
// multiplied by T_mult at each restart. PyTorch's step(epoch) form is not offered.
class CosineAnnealingWarmRestarts : public LRScheduler {
 public:
  CosineAnnealingWarmRestarts(Optimizer& optimizer, int64_t T_0, int64_t T_mult = 1, double eta_min = 0.0);

 protected:
  std::vector<double> get_lr() override;

 private:
  struct Cycle {
    int64_t t_cur, t_i;
  };
  // T_cur and T_i at `epoch` (a function of the epoch alone, so nothing extra is saved).
  Cycle cycle_at(int64_t epoch) const;
  int64_t t_0_, t_mult_;
  double eta_min_;
};

// lr = base_lr * (1 - epoch / total_iters) ** power up to total_iters, then
// constant (PyTorch's recursive form).
class PolynomialLR : public LRScheduler {
 public:
  explicit PolynomialLR(Optimizer& optimizer, int64_t total_iters = 5, double power = 1.0);

 protected:
  std::vector<double> get_lr() override;
  std::vector<double> restart_lr() override;

 private:
  int64_t total_iters_;
  double power_;
};

// Linear warm-up from warmup_start_factor * lr to lr over warmup_steps epochs,
// then cosine annealing to eta_min over total_steps - warmup_steps epochs.
class LinearWarmupCosine : public LRScheduler {
 public:
  LinearWarmupCosine(Optimizer& optimizer, int64_t warmup_steps, int64_t total_steps,
                     double warmup_start_factor = 1.0 / 3.0, double eta_min = 0.0);

 protected:
  std::vector<double> get_lr() override;
  std::vector<double> restart_lr() override;

 private:
  int64_t warmup_, t_max_;
  double start_factor_, eta_min_;
};

enum class AnnealStrategy { kCos, kLinear };

struct OneCycleLROptions {
  double pct_start = 0.3;  // the fraction of total_steps spent raising the lr, in [0, 1]
  AnnealStrategy anneal_strategy = AnnealStrategy::kCos;
  bool cycle_momentum = true;
  PerGroup base_momentum = 0.85;
  PerGroup max_momentum = 0.95;
  double div_factor = 25;         // initial lr = max_lr / div_factor (> 0)
  double final_div_factor = 1e4;  // min lr = initial lr / final_div_factor (> 0)
  bool three_phase = false;
};

// The 1cycle policy: the lr rises from max_lr / div_factor to max_lr over
// pct_start * total_steps steps and anneals to the min lr by step
// total_steps - 1 (three_phase: back down to the initial lr symmetrically
// first, then to the min lr), the momentum moving the opposite way between
// max_momentum and base_momentum. It is stepped after every batch; like
// PyTorch's, step total_steps is allowed (the last phase's formula past its
// end) and a step beyond it is an error. A phase of no length (e.g. pct_start *
// total_steps == 1) is an error when a step falls in it (PyTorch's division
// by zero). State: "max_lrs", "min_lrs" (per group; base_lrs holds the
// initial lrs) and, with cycle_momentum, "base_momentums", "max_momentums",
// "last_momentums".
class OneCycleLR : public LRScheduler {
 public:
  OneCycleLR(Optimizer& optimizer, const PerGroup& max_lr, int64_t total_steps, const OneCycleLROptions& options = {});
  int64_t total_steps() const { return total_steps_; }
  // The momentum (or beta1) set in each group by the last step; empty without cycle_momentum.
  const std::vector<double>& get_last_momentum() const { return momentum_.last(); }

 protected:
  std::vector<double> get_lr() override;
  std::vector<std::string> extra_state_keys() const override;
  void save_extra_state(SchedulerStateDict& sd) const override;
  void load_extra_state(const SchedulerStateDict& sd) override;

 private:
  enum class Point { kInitial, kMax, kMin };  // which lr (momenta: kInitial/kMin = max_momentum, kMax = base)
  struct Phase {
    double end_step;
    Point start, end;
  };
  double anneal(double start, double end, double pct) const;
  double lr_at(size_t g, Point p) const;
  double momentum_at(size_t g, Point p) const;

  int64_t total_steps_;
  AnnealStrategy anneal_;
  detail::CycledMomentum momentum_;
  std::vector<Phase> phases_;
  std::vector<double> max_lrs_, min_lrs_;
};

enum class CyclicMode { kTriangular, kTriangular2, kExpRange };
enum class CyclicScaleMode { kCycle, kIterations };

struct CyclicLROptions {
  int64_t step_size_up = 2000;  // steps from base_lr up to max_lr, >= 1
  int64_t step_size_down = -1;  // steps back down, >= 0; -1: step_size_up
  CyclicMode mode = CyclicMode::kTriangular;
  double gamma = 1.0;  // kExpRange: the amplitude is scaled by gamma ** step
  // A custom amplitude scale, in place of `mode`: called with the cycle number
  // (from 1; kCycle) or the step (kIterations), as PyTorch's scale_fn.
  std::function<double(double)> scale_fn;
  CyclicScaleMode scale_mode = CyclicScaleMode::kCycle;  // with scale_fn only
  bool cycle_momentum = true;
  PerGroup base_momentum = 0.8;
  PerGroup max_momentum = 0.9;
};

// The cyclical learning rate policy (Smith 2017, PyTorch's CyclicLR): each
// cycle the lr goes linearly from base_lr to max_lr over step_size_up steps
// and back over step_size_down, the amplitude (max_lr - base_lr) scaled by 1
// (kTriangular), 1 / 2 ** (cycle - 1) (kTriangular2), gamma ** step
// (kExpRange) or scale_fn. It is stepped after every batch. The momentum (or
// beta1) moves the other way between max_momentum and base_momentum when
// cycle_momentum is set (see detail::CycledMomentum). Construction sets the
// groups' lrs to base_lr. State: "max_lrs" and, with cycle_momentum,
// "base_momentums", "max_momentums", "last_momentums"; scale_fn is not saved.
class CyclicLR : public LRScheduler {
 public:
  CyclicLR(Optimizer& optimizer, const PerGroup& base_lr, const PerGroup& max_lr, const CyclicLROptions& options = {});
  // The momentum (or beta1) set by the last step; empty without cycle_momentum.
  const std::vector<double>& get_last_momentum() const { return momentum_.last(); }

 protected:
  std::vector<double> get_lr() override;
  std::vector<std::string> extra_state_keys() const override;
  void save_extra_state(SchedulerStateDict& sd) const override;
  void load_extra_state(const SchedulerStateDict& sd) override;

 private:
  double scale(double cycle) const;

  double total_size_, step_ratio_;
  CyclicMode mode_;
  double gamma_;
  std::function<double(double)> scale_fn_;
  CyclicScaleMode scale_mode_;
  detail::CycledMomentum momentum_;
  std::vector<double> max_lrs_;
};

struct ReduceLROnPlateauOptions {
  enum class Mode { kMin, kMax } mode = Mode::kMin;  // kMin: the metric should fall (a loss)
  double factor = 0.1;                               // new lr = lr * factor, < 1
  int64_t patience = 10;                             // bad epochs tolerated before a reduction, >= 0
  double threshold = 1e-4;
  enum class ThresholdMode { kRel, kAbs } threshold_mode = ThresholdMode::kRel;
  int64_t cooldown = 0;  // epochs after a reduction in which bad epochs are not counted, >= 0
  PerGroup min_lr = 0.0;
  double eps = 1e-8;  // a reduction smaller than eps is skipped
};

// Reduces the lrs by `factor` once the metric has not improved for more than
// `patience` steps. Improved: below best * (1 - threshold) (kMin, kRel), below
// best - threshold (kMin, kAbs), above best * (1 + threshold) (kMax, kRel) or
// above best + threshold (kMax, kAbs), best starting at +inf (kMin) or -inf
// (kMax). After a reduction, `cooldown` steps count no bad epochs. No lr goes
// below its min_lr, and a reduction of no more than eps is skipped.
// Construction leaves the lrs and sets last_epoch 0. State: "best" (float64
// 0-dim), "num_bad_epochs" and "cooldown_counter" (int64 0-dim).
class ReduceLROnPlateau : public LRScheduler {
 public:
  explicit ReduceLROnPlateau(Optimizer& optimizer, const ReduceLROnPlateauOptions& options = {});
  // An error: the scheduler needs the metric (step(metric)).
  void step() override;
  void step(double metric);
  double best() const { return best_; }
  int64_t num_bad_epochs() const { return num_bad_epochs_; }
  int64_t cooldown_counter() const { return cooldown_counter_; }

 protected:
  std::vector<double> get_lr() override;
  std::vector<std::string> extra_state_keys() const override;
  void save_extra_state(SchedulerStateDict& sd) const override;
  void load_extra_state(const SchedulerStateDict& sd) override;

 private:
  bool is_better(double a) const;

  ReduceLROnPlateauOptions options_;
  std::vector<double> min_lrs_;
  double metric_ = 0;  // step(metric)'s, for get_lr
  double best_;
  int64_t num_bad_epochs_ = 0, cooldown_counter_ = 0;
};

}  // namespace weft::optim
