// Reporting pieces of a training run, shared by the Trainer's callbacks and
// the example programs: a terminal progress bar and an SVG line-chart writer.
//
// Contract:
// - ProgressBar(label, total_steps, enabled, metric_label) draws one line on
//   stderr, "\r<label> [####....] k/N loss=L <metric_label>=A S samples/s ETA Es",
//   redrawn at most every 200 ms and always at the last step; finish() ends
//   the line. Disabled, it prints nothing. An empty metric_label leaves the
//   metric out.
// - write_svg_plot(path, title, panels) writes (atomically, io/atomic_file.h)
//   an SVG with the panels side by side, each a line chart of its values
//   against 1, 2, ... (labelled panel.x_label). A browser opens it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace weft::train {

class ProgressBar {
 public:
  ProgressBar(std::string label, int64_t total_steps, bool enabled = true, std::string metric_label = "acc");
  // After each step: running mean loss and metric, samples seen so far.
  void update(int64_t step, double loss, double metric, int64_t samples);
  void finish();

 private:
  std::string label_, metric_label_;
  int64_t total_;
  bool enabled_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

struct PlotPanel {
  std::string title;
  std::vector<double> values;
  std::string color = "#1f77b4";
  std::string x_label = "epoch";
};

void write_svg_plot(const std::string& path, const std::string& title, const std::vector<PlotPanel>& panels);

}  // namespace weft::train
