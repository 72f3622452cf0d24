// Training-run reporting for the examples that still write their own loop:
// the progress bar and the SVG drawing are the Trainer's (train/report.h);
// here the examples' per-epoch record, its metrics line and checkpoint-
// metadata string (the single-file checkpoints' "history.<epoch>", which
// train::EpochRecord::decode_legacy reads), and user_path for their flags.
#pragma once

#include <string>
#include <vector>

#include "train/report.h"

namespace weft::examples {

using train::ProgressBar;

struct EpochMetrics {
  int64_t epoch = 0;  // 1-based
  double train_loss = 0, train_accuracy = 0, test_loss = 0, test_accuracy = 0;
  double images_per_second = 0, seconds = 0;
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
