// SequentialLR and ChainedScheduler: PyTorch's stepping of combined
// schedulers, with their states saved and restored as one.
#include "optim/lr_scheduler_composite.h"

#include <algorithm>
#include <set>
#include <utility>

namespace weft::optim {

// ---- CompositeScheduler ----

Optimizer& CompositeScheduler::checked(const char* who, Optimizer* optimizer, const SchedulerList& schedulers,
                                       bool allow_composites) {
  WEFT_CHECK(!schedulers.empty(), who, " expects at least one scheduler, but got no scheduler.");
  for (size_t i = 0; i < schedulers.size(); ++i) {
    const LRScheduler* s = schedulers[i].get();
    WEFT_CHECK(s != nullptr, who, ": the scheduler at index ", i, " is null");
    WEFT_CHECK(dynamic_cast<const ReduceLROnPlateau*>(s) == nullptr, who,
               " does not support `ReduceLROnPlateau` scheduler as it requires a metric to be given to `step`, but ",
               "got one at index ", i, " in the given schedulers sequence.");
    WEFT_CHECK(allow_composites || dynamic_cast<const CompositeScheduler*>(s) == nullptr, who,
               ": the scheduler at index ", i, " is itself a SequentialLR or ChainedScheduler, which ", who,
               " cannot restart at a milestone; list its schedulers instead");
    if (optimizer == nullptr) optimizer = &s->optimizer();
    WEFT_CHECK(&s->optimizer() == optimizer, who,
               " expects all schedulers to belong to the same optimizer, but the scheduler at index ", i,
               " was made on another optimizer (", s->optimizer().name(), ") than the ", optimizer->name(), " given");
  }
  return *optimizer;
}

CompositeScheduler::CompositeScheduler(Optimizer& optimizer, const SchedulerList& schedulers)
    : LRScheduler(optimizer), schedulers_(schedulers) {}

void CompositeScheduler::all_or_nothing(const std::function<void()>& f) {
  std::vector<SchedulerStateDict> states;
  for (const auto& s : schedulers_) states.push_back(s->state_dict());
  std::vector<OptionMap> options;
  for (const auto& g : optimizer_.param_groups()) options.push_back(g.options);
  try {
    f();
  } catch (...) {
    for (size_t i = 0; i < schedulers_.size(); ++i) schedulers_[i]->load_state_dict(states[i]);
    auto& groups = optimizer_.param_groups();
    for (size_t g = 0; g < groups.size(); ++g) groups[g].options = options[g];
    throw;
  }
}

namespace {
std::string child_prefix(size_t i) { return "schedulers." + std::to_string(i) + "."; }
}  // namespace

std::vector<std::string> CompositeScheduler::extra_state_keys() const {
  std::vector<std::string> keys;
  for (size_t i = 0; i < schedulers_.size(); ++i)
    for (const auto& [key, t] : schedulers_[i]->state_dict()) keys.push_back(child_prefix(i) + key);
  return keys;
}

void CompositeScheduler::save_extra_state(SchedulerStateDict& sd) const {
  for (size_t i = 0; i < schedulers_.size(); ++i)
    for (auto& [key, t] : schedulers_[i]->state_dict()) sd[child_prefix(i) + key] = t;
}

void CompositeScheduler::load_extra_state(const SchedulerStateDict& sd) {
  // The base has checked that the keys are exactly extra_state_keys() and its own.
  std::vector<SchedulerStateDict> parts(schedulers_.size());
  for (size_t i = 0; i < schedulers_.size(); ++i) {
    const std::string prefix = child_prefix(i);
    for (auto it = sd.lower_bound(prefix); it != sd.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it)
      parts[i][it->first.substr(prefix.size())] = it->second;
  }
  all_or_nothing([&] {
    for (size_t i = 0; i < schedulers_.size(); ++i) schedulers_[i]->load_state_dict(parts[i]);
  });
}

// ---- SequentialLR ----

namespace {
const std::vector<int64_t>& checked_milestones(const std::vector<int64_t>& milestones, size_t num_schedulers) {
  WEFT_CHECK(milestones.size() + 1 == num_schedulers,
             "Sequential Schedulers expects number of schedulers provided to be one more than the number of ",
             "milestone points, but got number of schedulers ", num_schedulers,
             " and the number of milestones to be equal to ", milestones.size());
  for (size_t i = 0; i < milestones.size(); ++i) {
    WEFT_CHECK(milestones[i] >= 0, "SequentialLR: milestone ", i, " is ", milestones[i],
               "; milestones are epochs >= 0");
    WEFT_CHECK(i == 0 || milestones[i] > milestones[i - 1], "SequentialLR: milestones must increase, but milestone ", i,
               " (", milestones[i], ") is not after milestone ", i - 1, " (", milestones[i - 1], ")");
  }
  return milestones;
}
}  // namespace

SequentialLR::SequentialLR(Optimizer& optimizer, SchedulerList schedulers, std::vector<int64_t> milestones)
    : CompositeScheduler(checked("SequentialLR", &optimizer, schedulers, /*allow_composites=*/false), schedulers),
      milestones_(checked_milestones(milestones, schedulers_.size())) {
  for (auto& g : optimizer_.param_groups()) g.set_lr(g.initial_lr.value_or(g.lr()));  // set by the schedulers
  for (const auto& s : schedulers_) undo_step(*s);
  LRScheduler& first = *schedulers_[running_at(0)];
  first.step();
  last_epoch_ = 0;
  set_lrs(first.get_last_lr());
}

size_t SequentialLR::running_at(int64_t epoch) const {
  return static_cast<size_t>(std::upper_bound(milestones_.begin(), milestones_.end(), epoch) - milestones_.begin());
}

std::vector<double> SequentialLR::get_lr() {
  const size_t i = running_at(last_epoch_);
  LRScheduler& s = *schedulers_[i];
  // Both leave `s` as it was when they throw.
  if (i > 0 && milestones_[i - 1] == last_epoch_) {
    restart(s);
  } else {
    s.step();
  }
  return s.get_last_lr();
}

// ---- ChainedScheduler ----

ChainedScheduler::ChainedScheduler(SchedulerList schedulers)
    : CompositeScheduler(checked("ChainedScheduler", nullptr, schedulers, /*allow_composites=*/true), schedulers) {
  last_epoch_ = 0;
  set_lrs(group_lrs_times(1.0));
}

ChainedScheduler::ChainedScheduler(Optimizer& optimizer, SchedulerList schedulers)
    : CompositeScheduler(checked("ChainedScheduler", &optimizer, schedulers, /*allow_composites=*/true), schedulers) {
  last_epoch_ = 0;
  set_lrs(group_lrs_times(1.0));
}

std::vector<double> ChainedScheduler::get_lr() {
  all_or_nothing([&] {
    for (const auto& s : schedulers_) s->step();
  });
  return group_lrs_times(1.0);
}

}  // namespace weft::optim
