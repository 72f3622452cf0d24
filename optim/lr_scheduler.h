// Learning-rate schedulers: StepLR, CosineAnnealingLR and LinearWarmupCosine.
//
// Contract (PyTorch's torch.optim.lr_scheduler): a scheduler reads each group's
// lr at construction as its base lr, applies the value for epoch 0 at once,
// and each step() advances last_epoch by one and writes the new lr into every
// param group. The values follow PyTorch's recursive formulas (each lr computed
// from the group's current lr), so they equal PyTorch's to rounding, including
// where the recursion and the closed form differ in the last bits.
// LinearWarmupCosine reproduces SequentialLR([LinearLR(start_factor, 1.0,
// warmup_steps), CosineAnnealingLR(total_steps - warmup_steps, eta_min)],
// milestones=[warmup_steps]).
// state_dict(): "last_epoch" (int64 0-dim), "base_lrs" and "last_lrs" (float64,
// one per group); load_state_dict() restores them and the groups' lrs.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace weft::optim {

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  void step();
  const std::vector<double>& get_last_lr() const { return last_lrs_; }
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  int64_t last_epoch() const { return last_epoch_; }

  std::map<std::string, Tensor> state_dict() const;
  void load_state_dict(const std::map<std::string, Tensor>& sd);

 protected:
  explicit LRScheduler(Optimizer& optimizer);
  // Sets epoch 0's lrs; called at the end of each subclass constructor.
  void initial_step();
  // The lrs for last_epoch_ (already advanced), from the groups' current lrs.
  virtual std::vector<double> get_lr() = 0;
  double group_lr(size_t g) const { return optimizer_.param_groups()[g].lr(); }
  size_t num_groups() const { return optimizer_.param_groups().size(); }

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

 private:
  int64_t step_size_;
  double gamma_;
};

// lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2, via
// PyTorch's recursion (periodic past T_max).
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0.0);

 protected:
  std::vector<double> get_lr() override;

 private:
  int64_t t_max_;
  double eta_min_;
};

// Linear warm-up from warmup_start_factor * lr to lr over warmup_steps epochs,
// then cosine annealing to eta_min over total_steps - warmup_steps epochs.
class LinearWarmupCosine : public LRScheduler {
 public:
  LinearWarmupCosine(Optimizer& optimizer, int64_t warmup_steps, int64_t total_steps,
                     double warmup_start_factor = 1.0 / 3.0, double eta_min = 0.0);

 protected:
  std::vector<double> get_lr() override;

 private:
  int64_t warmup_, t_max_;
  double start_factor_, eta_min_;
};

}  // namespace weft::optim
