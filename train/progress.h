// Progress: the lead's progress bar per epoch (running loss and metric over
// every rank's rows, so correct for every layout) on stderr, and one line
// per epoch on stdout:
//   epoch 2/5: train_loss=0.412345 train_acc=0.8512 valid_loss=0.4011 valid_acc=0.8570 (12.3s, 4878 samples/s)
// (the metric's short name; "<valid_name>_..." only when there was an
// evaluation; the parenthesis last, so tools may cut it off).
#pragma once

#include <optional>
#include <string>

#include "train/callback.h"
#include "train/report.h"

namespace weft::train {

struct ProgressOptions {
  bool bar = true;               // the bar (epoch lines are always printed)
  std::string unit = "samples";  // "img": "4878 img/s"
  std::string period = "epoch";  // the line's first word
};

class Progress : public Callback {
 public:
  explicit Progress(ProgressOptions options = {}) : options_(std::move(options)) {}
  int order() const override { return 5; }
  void on_epoch_begin(Trainer& t) override;
  void on_step_end(Trainer& t) override;
  void on_evaluate_begin(Trainer& t) override;
  void on_epoch_end(Trainer& t) override;
  void on_fit_end(Trainer& t) override;

 private:
  void finish_bar();
  ProgressOptions options_;
  std::optional<ProgressBar> bar_;
};

}  // namespace weft::train
