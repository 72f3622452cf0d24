// One record per epoch (or per evaluation period of a step-driven run) of a
// Trainer's run, and its text forms: a JSON line for the metrics file and an
// exact string for checkpoint metadata, so a resumed run's history (plot,
// metrics file, early stopping) covers the epochs before the interruption.
//
// Contract:
// - get(key) looks a value up by the name the metrics file uses:
//   "epoch", "step", "train_loss", "train_<metric>", "<valid>_loss",
//   "<valid>_<metric>", "lr", "samples_per_second", "seconds" or a key of
//   `extra` (user values a callback recorded); an unknown key is an error
//   listing the known ones. `metric` and `valid` are the names the Trainer
//   was given (TrainerOptions); a value that was not measured (no metric, no
//   validation loader) is NaN and is left out of the JSON line.
// - encode()/decode() round-trip every field exactly (%.17g).
// - decode_legacy(epoch, text): the history entries of the examples' older
//   single-file checkpoints ("history.<epoch>" metadata: train loss, train
//   accuracy, test loss, test accuracy, images/s, seconds).
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace weft::train {

inline constexpr double kNotMeasured = std::numeric_limits<double>::quiet_NaN();

struct EpochRecord {
  int64_t epoch = 0;  // 1-based
  int64_t step = 0;   // optimizer steps taken by its end
  double train_loss = kNotMeasured, train_metric = kNotMeasured;
  double valid_loss = kNotMeasured, valid_metric = kNotMeasured;
  double lr = kNotMeasured;
  double samples_per_second = 0, seconds = 0;
  std::map<std::string, double> extra;

  double get(const std::string& key, const std::string& metric, const std::string& valid) const;
  // {"epoch": 1, "step": 469, "train_loss": ..., ...} on one line, no newline.
  std::string json(const std::string& metric, const std::string& valid) const;
  std::string encode() const;
  static EpochRecord decode(const std::string& text);
  static EpochRecord decode_legacy(int64_t epoch, const std::string& text);
};

}  // namespace weft::train
