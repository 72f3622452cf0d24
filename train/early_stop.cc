// EarlyStop (train/early_stop.h).
#include "train/early_stop.h"

#include <cmath>
#include <iostream>

#include "core/error.h"
#include "train/trainer.h"

namespace weft::train {

std::string EarlyStop::key(const Trainer& t) const {
  return options_.monitor.empty() ? t.options().valid_name + "_loss" : options_.monitor;
}

bool EarlyStop::maximize(const Trainer& t) const {
  if (options_.mode != EarlyStopOptions::Mode::kAuto) return options_.mode == EarlyStopOptions::Mode::kMax;
  const std::string k = key(t);
  const std::string& m = t.options().metric.name;
  const bool ends_with_metric = !m.empty() && k.size() > m.size() && k.compare(k.size() - m.size(), m.size(), m) == 0;
  return ends_with_metric || k.find("acc") != std::string::npos;
}

bool EarlyStop::observe(const Trainer& t, size_t index) {
  const EpochRecord& r = t.state().history[index];
  const double v = r.get(key(t), t.options().metric.name, t.options().valid_name);
  const bool max = maximize(t);
  const bool better =
      !std::isnan(v) && (!have_best_ || (max ? v > best_ + options_.min_delta : v < best_ - options_.min_delta));
  if (better) {
    best_ = v;
    best_epoch_ = r.epoch;
    have_best_ = true;
    wait_ = 0;
    return false;
  }
  ++wait_;
  return wait_ >= options_.patience;
}

void EarlyStop::on_fit_begin(Trainer& t) {
  WEFT_CHECK(options_.patience >= 0 && options_.min_delta >= 0, "EarlyStop: patience (", options_.patience,
             ") and min_delta (", options_.min_delta, ") must be >= 0");
  have_best_ = false;
  wait_ = 0;
  stopped_epoch_ = 0;
  for (size_t i = 0; i < t.state().history.size(); ++i) observe(t, i);
}

void EarlyStop::on_epoch_end(Trainer& t) {
  if (!observe(t, t.state().history.size() - 1)) return;
  stopped_epoch_ = t.state().history.back().epoch;
  t.request_stop();
  if (t.lead())
    std::cerr << t.options().name << ": early stop after epoch " << stopped_epoch_ << ": " << key(t)
              << " has not improved by more than " << options_.min_delta << " for " << wait_ << " epoch(s) (best "
              << best_ << " after epoch " << best_epoch_ << ")\n";
}

}  // namespace weft::train
