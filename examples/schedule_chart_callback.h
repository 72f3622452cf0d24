// ScheduleChart: a train::Trainer callback for the pipeline examples that
// records the training steps' timelines and, when fit ends, writes the last
// step's schedule chart and trace.
//
// Contract:
// - On a Pipeline or Hybrid trainer (collective: add it on every rank).
//   Once prepared it turns on the pipeline runner's trace; it times each
//   training step (optimizer included). At fit's end it gathers the last
//   step's trace from every rank of the lead's pipeline (parallel/pipe/trace.h) and the slowest
//   rank's step time, and the lead writes `chart`: the schedule's text chart
//   simulated from the measured F, B and W times (parallel/pipe/simulate.h)
//   with the measured step time and the simulated one and its bubble, the
//   bubble measured on the lead's replica (gradient averages included): the
//   last step's, and the mean and range over the last kBubbleSteps steps
//   (one step of a small model is too short to judge the plan by), beside
//   the partition plan's predicted bubble when the balance was measured; and
//   `trace`: the timeline as Chrome-trace JSON; it names both on stderr.
//   Each step's end gathers that step's trace over the pipeline group
//   (collective there).
#pragma once

#include <deque>
#include <string>

#include "train/callback.h"

namespace weft::examples {

class ScheduleChart : public train::Callback {
 public:
  static constexpr size_t kBubbleSteps = 20;

  ScheduleChart(std::string chart, std::string trace) : chart_(std::move(chart)), trace_(std::move(trace)) {}
  void on_prepared(train::Trainer& t) override;
  void on_step_begin(train::Trainer& t) override;
  void on_step_end(train::Trainer& t) override;
  void on_fit_end(train::Trainer& t) override;

 private:
  std::string chart_, trace_;
  double step_start_ = 0, last_step_s_ = 0;
  std::deque<double> bubbles_;  // the last kBubbleSteps steps' measured bubbles
};

}  // namespace weft::examples
