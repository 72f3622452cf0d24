#include "examples/train_report.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "io/atomic_file.h"

namespace weft::examples {

ProgressBar::ProgressBar(std::string label, int64_t total, bool enabled)
    : label_(std::move(label)),
      total_(std::max<int64_t>(total, 1)),
      enabled_(enabled),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

void ProgressBar::update(int64_t step, double loss, double accuracy, int64_t images) {
  if (!enabled_) return;
  auto now = std::chrono::steady_clock::now();
  if (step < total_ && now - last_draw_ < std::chrono::milliseconds(200)) return;
  last_draw_ = now;
  double elapsed = std::chrono::duration<double>(now - start_).count();
  double rate = elapsed > 0 ? images / elapsed : 0;
  double eta = step > 0 ? elapsed * (total_ - step) / step : 0;
  const int width = 30;
  int filled = static_cast<int>(width * step / total_);
  std::string bar = std::string(filled, '#') + std::string(width - filled, '.');
  std::fprintf(stderr, "\r%s [%s] %lld/%lld loss=%.4f acc=%.4f %.0f img/s ETA %.0fs  ", label_.c_str(), bar.c_str(),
               static_cast<long long>(step), static_cast<long long>(total_), loss, accuracy, rate, eta);
  std::fflush(stderr);
}

void ProgressBar::finish() {
  if (enabled_) std::fprintf(stderr, "\n");
}

std::string encode_metrics(const EpochMetrics& m) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%.17g %.17g %.17g %.17g %.17g %.17g", m.train_loss, m.train_accuracy, m.test_loss,
                m.test_accuracy, m.images_per_second, m.seconds);
  return buf;
}

EpochMetrics decode_metrics(int64_t epoch, const std::string& s) {
  EpochMetrics m;
  m.epoch = epoch;
  std::istringstream in(s);
  in >> m.train_loss >> m.train_accuracy >> m.test_loss >> m.test_accuracy >> m.images_per_second >> m.seconds;
  return m;
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

namespace {
// One line chart panel at (x0, y0) of size (w, h).
void panel(std::ostringstream& svg, double x0, double y0, double w, double h, const std::vector<double>& ys,
           const std::string& title, const std::string& color) {
  svg << "<rect x='" << x0 << "' y='" << y0 << "' width='" << w << "' height='" << h
      << "' fill='white' stroke='#999'/>\n";
  svg << "<text x='" << x0 + w / 2 << "' y='" << y0 - 8 << "' text-anchor='middle' font-size='14'>" << title
      << "</text>\n";
  if (ys.empty()) return;
  double lo = *std::min_element(ys.begin(), ys.end()), hi = *std::max_element(ys.begin(), ys.end());
  if (hi - lo < 1e-12) {
    lo -= 0.5;
    hi += 0.5;
  }
  double pad = (hi - lo) * 0.1;
  lo -= pad;
  hi += pad;
  auto px = [&](size_t i) { return x0 + (ys.size() == 1 ? w / 2 : w * static_cast<double>(i) / (ys.size() - 1)); };
  auto py = [&](double v) { return y0 + h - h * (v - lo) / (hi - lo); };
  for (int t = 0; t <= 4; ++t) {
    double v = lo + (hi - lo) * t / 4;
    svg << "<line x1='" << x0 << "' x2='" << x0 + w << "' y1='" << py(v) << "' y2='" << py(v)
        << "' stroke='#eee'/>\n<text x='" << x0 - 6 << "' y='" << py(v) + 4 << "' text-anchor='end' font-size='11'>"
        << std::round(v * 10000) / 10000 << "</text>\n";
  }
  svg << "<polyline fill='none' stroke='" << color << "' stroke-width='2' points='";
  for (size_t i = 0; i < ys.size(); ++i) svg << px(i) << "," << py(ys[i]) << " ";
  svg << "'/>\n";
  for (size_t i = 0; i < ys.size(); ++i) {
    svg << "<circle cx='" << px(i) << "' cy='" << py(ys[i]) << "' r='3' fill='" << color << "'/>\n";
    svg << "<text x='" << px(i) << "' y='" << y0 + h + 16 << "' text-anchor='middle' font-size='11'>" << i + 1
        << "</text>\n";
  }
  svg << "<text x='" << x0 + w / 2 << "' y='" << y0 + h + 32 << "' text-anchor='middle' font-size='12'>epoch</text>\n";
}
}  // namespace

void write_svg_plot(const std::string& path, const std::vector<EpochMetrics>& history, const std::string& title) {
  std::vector<double> loss, acc;
  for (const auto& m : history) {
    loss.push_back(m.train_loss);
    acc.push_back(m.test_accuracy);
  }
  std::ostringstream svg;
  svg << "<svg xmlns='http://www.w3.org/2000/svg' width='900' height='400' font-family='sans-serif'>\n";
  svg << "<rect width='900' height='400' fill='#fafafa'/>\n";
  svg << "<text x='450' y='24' text-anchor='middle' font-size='16' font-weight='bold'>" << title << "</text>\n";
  panel(svg, 70, 70, 340, 260, loss, "training loss", "#d62728");
  panel(svg, 530, 70, 340, 260, acc, "test accuracy", "#1f77b4");
  svg << "</svg>\n";
  std::string s = svg.str();
  io::write_atomically(path, [&](std::ostream& os) { os << s; });
}

std::string user_path(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  const char* wd = std::getenv("BUILD_WORKING_DIRECTORY");
  return wd ? std::string(wd) + "/" + path : path;
}

}  // namespace weft::examples
