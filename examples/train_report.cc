#include "examples/train_report.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "train/history.h"

namespace weft::examples {

std::string encode_metrics(const EpochMetrics& m) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%.17g %.17g %.17g %.17g %.17g %.17g", m.train_loss, m.train_accuracy, m.test_loss,
                m.test_accuracy, m.images_per_second, m.seconds);
  return buf;
}

EpochMetrics decode_metrics(int64_t epoch, const std::string& s) {
  const train::EpochRecord r = train::EpochRecord::decode_legacy(epoch, s);
  return {epoch, r.train_loss, r.train_metric, r.valid_loss, r.valid_metric, r.samples_per_second, r.seconds};
}

void append_metrics_jsonl(const std::string& path, const EpochMetrics& m) {
  std::ofstream out(path, std::ios::app);
  WEFT_CHECK(out.good(), "cannot open metrics file '", path, "' for appending");
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "{\"epoch\": %lld, \"train_loss\": %.6f, \"train_accuracy\": %.6f, \"test_loss\": %.6f, "
                "\"test_accuracy\": %.6f, \"images_per_second\": %.1f, \"seconds\": %.2f}\n",
                static_cast<long long>(m.epoch), m.train_loss, m.train_accuracy, m.test_loss, m.test_accuracy,
                m.images_per_second, m.seconds);
  out << buf;
}

void write_svg_plot(const std::string& path, const std::vector<EpochMetrics>& history, const std::string& title) {
  train::PlotPanel loss{"training loss", {}, "#d62728"}, acc{"test accuracy", {}, "#1f77b4"};
  for (const auto& m : history) {
    loss.values.push_back(m.train_loss);
    acc.values.push_back(m.test_accuracy);
  }
  train::write_svg_plot(path, title, {loss, acc});
}

std::string user_path(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  const char* wd = std::getenv("BUILD_WORKING_DIRECTORY");
  return wd ? std::string(wd) + "/" + path : path;
}

}  // namespace weft::examples
