// MetricsLog and Plot: the lead's files of a run's history.
//
// Contract:
// - MetricsLog(path): a JSON object per epoch per line (EpochRecord::json:
//   epoch, step, train_loss, train_<metric>, <valid>_loss, <valid>_<metric>,
//   lr, extra values, samples_per_second, seconds). At fit's start the file
//   is rewritten from the history (empty for a fresh run; a resumed run's
//   epochs so far), then a line is appended after each epoch, so the file
//   always matches the history, resumed or not.
// - Plot(path, title): after each epoch, an SVG (train/report.h) of the
//   training loss and the evaluation's metric (its loss without a metric;
//   no second panel without an evaluation) per epoch, over the whole history.
// Other ranks do nothing.
#pragma once

#include <string>

#include "train/callback.h"

namespace weft::train {

class MetricsLog : public Callback {
 public:
  explicit MetricsLog(std::string path) : path_(std::move(path)) {}
  int order() const override { return 5; }
  void on_fit_begin(Trainer& t) override;
  void on_epoch_end(Trainer& t) override;

 private:
  std::string path_;
};

class Plot : public Callback {
 public:
  Plot(std::string path, std::string title) : path_(std::move(path)), title_(std::move(title)) {}
  int order() const override { return 5; }
  void on_epoch_end(Trainer& t) override;

 private:
  std::string path_, title_;
};

}  // namespace weft::train
