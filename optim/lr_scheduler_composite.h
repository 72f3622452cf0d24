// SequentialLR and ChainedScheduler (PyTorch's torch.optim.lr_scheduler):
// learning-rate schedulers combined on one optimizer.
//
//   auto warmup = std::make_shared<optim::LinearLR>(opt, 0.1, 1.0, 5);
//   auto decay = std::make_shared<optim::CosineAnnealingLR>(opt, 95);
//   optim::SequentialLR sched(opt, {warmup, decay}, {5});   // LinearLR for 5 epochs, then the cosine
//
// Contract:
// - The schedulers are shared with the caller and must have been made on the
//   composite's optimizer; a null pointer, a scheduler of another optimizer and
//   ReduceLROnPlateau (it is stepped with a metric) are errors naming the index.
// - SequentialLR(optimizer, schedulers, milestones) runs schedulers[i] from
//   milestones[i - 1] (epoch 0 for i = 0) until milestones[i]; it needs one
//   milestone fewer than schedulers. Construction puts every group's lr back to
//   its initial_lr (optim/lr_scheduler.h), takes back the initial step each
//   scheduler made when it was built, and starts the one that runs at epoch 0
//   (schedulers[1] for a milestone at 0). Each step() steps the running
//   scheduler; at a milestone the next one instead starts at its epoch 0 with
//   its closed form (LRScheduler::restart_lr, PyTorch's _update_lr(0)): the
//   base lrs times its factor at epoch 0 for StepLR, MultiStepLR, ConstantLR,
//   LinearLR, ExponentialLR, PolynomialLR and CosineAnnealingLR; the lrs it
//   finds times its factor for epoch 0 for MultiplicativeLR; get_lr at epoch
//   0 for the others.
//   Beyond PyTorch's checks, milestones must be >= 0 and increasing, and a
//   composite inside a SequentialLR is refused (PyTorch fails at the
//   milestone that reaches it).
// - ChainedScheduler(schedulers) steps every scheduler in order at each
//   step(), so their recursive forms compose: each one scales the lrs the one
//   before it wrote. get_last_lr() is the groups' lrs after the last one.
// - A step that fails (OneCycleLR past total_steps, ...) changes nothing: the
//   schedulers' states and the groups' options are put back.
// - state_dict() holds the base entries ("last_epoch", "base_lrs", "last_lrs")
//   and each scheduler's under "schedulers.<i>.<key>". load_state_dict()
//   checks the key set first, and puts back every scheduler it had loaded when
//   a later one refuses its entries, so a failed load changes nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "optim/lr_scheduler.h"

namespace weft::optim {

using SchedulerList = std::vector<std::shared_ptr<LRScheduler>>;

class CompositeScheduler : public LRScheduler {
 public:
  const SchedulerList& schedulers() const { return schedulers_; }

 protected:
  // Checks `schedulers` for the composite `who` and returns their optimizer
  // (`optimizer` when given, else the first scheduler's).
  static Optimizer& checked(const char* who, Optimizer* optimizer, const SchedulerList& schedulers,
                            bool allow_composites);
  CompositeScheduler(Optimizer& optimizer, const SchedulerList& schedulers);

  // Runs f; when it throws, puts back every scheduler's state and the groups' options.
  void all_or_nothing(const std::function<void()>& f);

  std::vector<std::string> extra_state_keys() const override;
  void save_extra_state(SchedulerStateDict& sd) const override;
  void load_extra_state(const SchedulerStateDict& sd) override;

  SchedulerList schedulers_;
};

class SequentialLR : public CompositeScheduler {
 public:
  SequentialLR(Optimizer& optimizer, SchedulerList schedulers, std::vector<int64_t> milestones);
  const std::vector<int64_t>& milestones() const { return milestones_; }

 protected:
  std::vector<double> get_lr() override;

 private:
  size_t running_at(int64_t epoch) const;  // the index of the scheduler that runs at `epoch`
  std::vector<int64_t> milestones_;
};

class ChainedScheduler : public CompositeScheduler {
 public:
  explicit ChainedScheduler(SchedulerList schedulers);
  ChainedScheduler(Optimizer& optimizer, SchedulerList schedulers);

 protected:
  std::vector<double> get_lr() override;
};

}  // namespace weft::optim
