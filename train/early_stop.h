// EarlyStop: stops fit when a monitored value has stopped improving (Keras'
// EarlyStopping, fastai's EarlyStoppingCallback).
//
// Contract:
// - After each epoch the monitored value (an EpochRecord key: "train_loss",
//   "<valid>_loss", "<valid>_<metric>", an `extra` key, ...; empty monitor:
//   "<valid>_loss") is compared with the best so far: it improves when it is
//   below best - min_delta (mode kMin) or above best + min_delta (kMax;
//   kAuto: kMax for keys ending in the metric's name or containing "acc",
//   else kMin). An improvement resets the wait; otherwise the wait grows,
//   and once it reaches `patience` the trainer stops after this epoch. A
//   NaN value never improves.
// - Its state is rebuilt from the history at fit's start, so a resumed run
//   stops where the uninterrupted one would.
// - stopped_epoch(): the epoch (1-based) after which it stopped, 0 if not.
#pragma once

#include <string>

#include "train/callback.h"

namespace weft::train {

struct EarlyStopOptions {
  std::string monitor;  // empty: "<valid_name>_loss"
  enum class Mode { kAuto, kMin, kMax } mode = Mode::kAuto;
  int patience = 1;
  double min_delta = 0;
};

class EarlyStop : public Callback {
 public:
  explicit EarlyStop(EarlyStopOptions options = {}) : options_(std::move(options)) {}
  int order() const override { return 10; }
  void on_fit_begin(Trainer& t) override;
  void on_epoch_end(Trainer& t) override;
  int64_t stopped_epoch() const { return stopped_epoch_; }
  double best() const { return best_; }

 private:
  std::string key(const Trainer& t) const;
  bool maximize(const Trainer& t) const;
  // Folds one epoch's record in; true when the wait reached patience.
  bool observe(const Trainer& t, size_t index);

  EarlyStopOptions options_;
  double best_ = 0;
  int64_t best_epoch_ = 0;
  int wait_ = 0;
  bool have_best_ = false;
  int64_t stopped_epoch_ = 0;
};

}  // namespace weft::train
