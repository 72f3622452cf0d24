// The GPT example's reporting, as a callback of the library Trainer: what the
// lead prints and draws per evaluation period (--eval-interval steps, the
// Trainer's "epochs" in fit_steps). The metrics file is train::MetricsLog's.
//
// Contract (world rank 0 only; every rank times its steps):
// - A progress bar per period on stderr (train::ProgressBar: the running
//   loss, sequences/s, ETA), unless disabled.
// - After each evaluation, on stdout:
//     step 250/3000: train_loss=2.104321 val_loss=2.087654 lr=0.00198 (4821 tok/s, 62.1s)
//   (the period's mean training loss per token, the validation loss, the
//   learning rate after the step, the period's tokens/s, the run's training
//   seconds so far including a resumed run's earlier ones); the record's
//   extra "tokens_per_second" (in the metrics file); and the SVG chart
//   (train::write_svg_plot) of the training and validation loss per
//   evaluation over the whole history, resumed or not.
// - seconds_trained() / steps_trained(): the time in this process's
//   training steps and how many it ran (for the throughput line).
// - format_duration: "9m58s", "42s", "1h02m".
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "train/callback.h"
#include "train/report.h"

namespace weft::examples::gpt {

struct StepReportOptions {
  int64_t steps = 0;           // --steps, the lines' denominator
  int64_t tokens_per_row = 0;  // --context
  int64_t eval_interval = 0;   // the chart's x axis
  bool bar = true;
  std::string plot, title;
};

class StepReport : public train::Callback {
 public:
  explicit StepReport(StepReportOptions options) : options_(std::move(options)) {}
  int order() const override { return 0; }  // before MetricsLog, which writes the extra value
  void on_epoch_begin(train::Trainer& t) override;
  void on_step_begin(train::Trainer& t) override;
  void on_step_end(train::Trainer& t) override;
  void on_evaluate_begin(train::Trainer&) override { finish_bar(); }
  void on_epoch_end(train::Trainer& t) override;
  void on_fit_end(train::Trainer&) override { finish_bar(); }
  double seconds_trained() const { return seconds_; }
  int64_t steps_trained() const { return steps_; }

 private:
  void finish_bar();
  StepReportOptions options_;
  std::optional<train::ProgressBar> bar_;
  std::chrono::steady_clock::time_point step_start_;
  double seconds_ = 0;
  int64_t steps_ = 0;
};

std::string format_duration(double seconds);

}  // namespace weft::examples::gpt
