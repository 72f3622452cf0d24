// Training-run reporting for the examples: a terminal progress bar (loss,
// accuracy, images/s, ETA), metrics as JSON lines, and an SVG plot of training
// loss and test accuracy per epoch that a browser can open.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace weft::examples {

struct EpochMetrics {
  int64_t epoch = 0;  // 1-based
  double train_loss = 0, train_accuracy = 0, test_loss = 0, test_accuracy = 0;
  double images_per_second = 0, seconds = 0;
};

class ProgressBar {
 public:
  ProgressBar(std::string label, int64_t total_steps, bool enabled = true);
  // After each step: running mean loss and accuracy, images seen so far.
  void update(int64_t step, double loss, double accuracy, int64_t images);
  void finish();

 private:
  std::string label_;
  int64_t total_;
  bool enabled_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

// One epoch's metrics as a string and back (exact round trip): the examples keep
// the history in a checkpoint's metadata so a resumed run's plot covers all epochs.
std::string encode_metrics(const EpochMetrics& m);
EpochMetrics decode_metrics(int64_t epoch, const std::string& s);

// Appends one JSON object per line.
void append_metrics_jsonl(const std::string& path, const EpochMetrics& m);
// Writes an SVG with two panels: training loss and test accuracy per epoch.
void write_svg_plot(const std::string& path, const std::vector<EpochMetrics>& history, const std::string& title);

// A path relative to where the user launched `bazel run` (BUILD_WORKING_DIRECTORY).
std::string user_path(const std::string& path);

}  // namespace weft::examples
