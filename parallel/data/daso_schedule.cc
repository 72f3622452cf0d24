// DasoSchedule and PlateauDetector (contract and Note [daso schedule] in
// daso_schedule.h).
#include "parallel/data/daso_schedule.h"

#include <algorithm>
#include <limits>
#include <sstream>

#include "core/error.h"

namespace weft::parallel {

const char* daso_phase_name(DasoPhase phase) {
  switch (phase) {
    case DasoPhase::kWarmup: return "warm-up";
    case DasoPhase::kCycling: return "cycling";
    case DasoPhase::kCooldown: return "cool-down";
  }
  return "?";
}

PlateauDetector::PlateauDetector(double threshold, int patience)
    : threshold_(threshold), patience_(patience), best_(std::numeric_limits<double>::infinity()) {}

bool PlateauDetector::observe(double loss) {
  // Below best * (1 - threshold) improves (best * (1 + threshold) for a negative best).
  const double bar = best_ >= 0 ? best_ * (1.0 - threshold_) : best_ * (1.0 + threshold_);
  if (loss < bar) {
    best_ = loss;
    bad_ = 0;
  } else {
    ++bad_;
  }
  if (bad_ > patience_) {
    bad_ = 0;
    return true;
  }
  return false;
}

DasoSchedule::DasoSchedule(DasoScheduleOptions options)
    : o_(options), plateau_(options.stability_level, options.patience) {
  WEFT_CHECK(o_.total_epochs > 0, "DasoSchedule: total_epochs must be positive, got ", o_.total_epochs);
  WEFT_CHECK(o_.warmup_epochs >= 0, "DasoSchedule: warmup_epochs must be >= 0, got ", o_.warmup_epochs);
  WEFT_CHECK(o_.cooldown_epochs >= 0, "DasoSchedule: cooldown_epochs must be >= 0, got ", o_.cooldown_epochs);
  WEFT_CHECK(o_.stability_level >= 0 && o_.stability_level < 1, "DasoSchedule: stability_level must be in [0, 1), got ",
             o_.stability_level);
  WEFT_CHECK(o_.patience >= 0, "DasoSchedule: patience must be >= 0, got ", o_.patience);
  WEFT_CHECK(o_.max_global_skips >= 1, "DasoSchedule: max_global_skips must be >= 1, got ", o_.max_global_skips);
  WEFT_CHECK(o_.skip_reduction_factor >= 1, "DasoSchedule: skip_reduction_factor must be >= 1, got ",
             o_.skip_reduction_factor);
  WEFT_CHECK(o_.local_skip_factor >= 1, "DasoSchedule: local_skip_factor must be >= 1, got ", o_.local_skip_factor);
  set_for_epoch();
}

DasoPhase DasoSchedule::phase_of(int epoch) const {
  if (epoch < o_.warmup_epochs) return DasoPhase::kWarmup;
  if (epoch >= o_.total_epochs - o_.cooldown_epochs) return DasoPhase::kCooldown;
  return DasoPhase::kCycling;
}

int DasoSchedule::initial_wait() const {
  return std::clamp(o_.max_global_skips / o_.local_skip_factor, 1, o_.max_global_skips);
}

void DasoSchedule::set_for_epoch() {
  if (phase() == DasoPhase::kCycling) {
    skip_ = o_.max_global_skips;
    wait_ = initial_wait();
    local_ = o_.local_skips ? initial_wait() : 1;
  } else {
    skip_ = 1;
    wait_ = 0;
    local_ = 1;
  }
}

DasoStepPlan DasoSchedule::step_plan(int step, int steps_per_epoch) const {
  WEFT_CHECK(steps_per_epoch > 0, "DasoSchedule: steps_per_epoch must be positive, got ", steps_per_epoch);
  WEFT_CHECK(step >= 0 && step < steps_per_epoch, "DasoSchedule: step ", step, " is outside the epoch's ",
             steps_per_epoch, " steps");
  DasoStepPlan p;
  const int last = steps_per_epoch - 1, k = skip_, w = wait_;
  if (w == 0) {  // warm-up and cool-down
    p.blocking = true;
    return p;
  }
  p.fold = step < last && step >= w && (step - w) % k == 0;
  p.blocking = step == last;
  p.start = step < last && step % k == 0 && step + w < last;
  p.node_sync = step % local_ == 0 || p.fold || p.start || p.blocking;
  return p;
}

bool DasoSchedule::end_epoch(double loss) {
  const bool was_cycling = phase() == DasoPhase::kCycling;
  ++epoch_;
  if (phase() != DasoPhase::kCycling) {
    set_for_epoch();
    return false;
  }
  const bool fired = plateau_.observe(loss);
  if (!was_cycling) {
    set_for_epoch();
    return false;
  }
  if (!fired) return false;
  if (skip_ > 1) {
    skip_ = std::max(1, skip_ / o_.skip_reduction_factor);
    wait_ = std::clamp(wait_ - 1, 1, skip_);
    local_ = std::max(1, local_ / o_.skip_reduction_factor);
  } else {
    set_for_epoch();  // heat's reset
  }
  return true;
}

DasoSchedule::State DasoSchedule::state() const {
  return {epoch_, skip_, wait_, local_, plateau_.best(), plateau_.bad_epochs()};
}

void DasoSchedule::load_state(const State& s) {
  auto bad = [&](const char* field, auto value) {
    WEFT_ERROR("DasoSchedule.load_state: ", field, " ", value, " is impossible for these options (", "total_epochs ",
               o_.total_epochs, ", max_global_skips ", o_.max_global_skips, ")");
  };
  if (s.epoch < 0) bad("epoch", s.epoch);
  if (s.global_skip < 1 || s.global_skip > o_.max_global_skips) bad("global_skip", s.global_skip);
  if (s.batches_to_wait < 0 || s.batches_to_wait > s.global_skip) bad("batches_to_wait", s.batches_to_wait);
  if (s.local_skip < 1 || s.local_skip > o_.max_global_skips) bad("local_skip", s.local_skip);
  if (s.bad_epochs < 0) bad("bad_epochs", s.bad_epochs);
  const bool cycling = phase_of(s.epoch) == DasoPhase::kCycling;
  WEFT_CHECK(cycling ? s.batches_to_wait >= 1 : (s.global_skip == 1 && s.batches_to_wait == 0 && s.local_skip == 1),
             "DasoSchedule.load_state: epoch ", s.epoch, " is a ", daso_phase_name(phase_of(s.epoch)),
             " epoch, but the state has global_skip ", s.global_skip, ", batches_to_wait ", s.batches_to_wait,
             ", local_skip ", s.local_skip);
  epoch_ = s.epoch;
  skip_ = s.global_skip;
  wait_ = s.batches_to_wait;
  local_ = s.local_skip;
  plateau_.restore(s.best, s.bad_epochs);
}

std::string DasoSchedule::describe() const {
  std::ostringstream os;
  os << "epoch " << epoch_ << " (" << daso_phase_name(phase()) << "): global_skip " << skip_ << ", batches_to_wait "
     << wait_ << ", local_skip " << local_;
  return os.str();
}

}  // namespace weft::parallel
