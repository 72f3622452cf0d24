// ProgressBar and the SVG plot (train/report.h).
#include "train/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/error.h"
#include "io/atomic_file.h"

namespace weft::train {

ProgressBar::ProgressBar(std::string label, int64_t total, bool enabled, std::string metric_label)
    : label_(std::move(label)),
      metric_label_(std::move(metric_label)),
      total_(std::max<int64_t>(total, 1)),
      enabled_(enabled),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

void ProgressBar::update(int64_t step, double loss, double metric, int64_t samples) {
  if (!enabled_) return;
  auto now = std::chrono::steady_clock::now();
  if (step < total_ && now - last_draw_ < std::chrono::milliseconds(200)) return;
  last_draw_ = now;
  double elapsed = std::chrono::duration<double>(now - start_).count();
  double rate = elapsed > 0 ? static_cast<double>(samples) / elapsed : 0;
  double eta = step > 0 ? elapsed * static_cast<double>(total_ - step) / static_cast<double>(step) : 0;
  const int width = 30;
  int filled = static_cast<int>(width * std::min(step, total_) / total_);
  std::string bar = std::string(filled, '#') + std::string(width - filled, '.');
  std::string m;
  if (!metric_label_.empty()) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), " %s=%.4f", metric_label_.c_str(), metric);
    m = buf;
  }
  std::fprintf(stderr, "\r%s [%s] %lld/%lld loss=%.4f%s %.0f samples/s ETA %.0fs  ", label_.c_str(), bar.c_str(),
               static_cast<long long>(step), static_cast<long long>(total_), loss, m.c_str(), rate, eta);
  std::fflush(stderr);
}

void ProgressBar::finish() {
  if (enabled_) std::fprintf(stderr, "\n");
}

namespace {
// One line chart panel at (x0, y0) of size (w, h).
void panel(std::ostringstream& svg, double x0, double y0, double w, double h, const PlotPanel& p) {
  const std::vector<double>& ys = p.values;
  svg << "<rect x='" << x0 << "' y='" << y0 << "' width='" << w << "' height='" << h
      << "' fill='white' stroke='#999'/>\n";
  svg << "<text x='" << x0 + w / 2 << "' y='" << y0 - 8 << "' text-anchor='middle' font-size='14'>" << p.title
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
  svg << "<polyline fill='none' stroke='" << p.color << "' stroke-width='2' points='";
  for (size_t i = 0; i < ys.size(); ++i) svg << px(i) << "," << py(ys[i]) << " ";
  svg << "'/>\n";
  for (size_t i = 0; i < ys.size(); ++i) {
    svg << "<circle cx='" << px(i) << "' cy='" << py(ys[i]) << "' r='3' fill='" << p.color << "'/>\n";
    svg << "<text x='" << px(i) << "' y='" << y0 + h + 16 << "' text-anchor='middle' font-size='11'>" << i + 1
        << "</text>\n";
  }
  svg << "<text x='" << x0 + w / 2 << "' y='" << y0 + h + 32 << "' text-anchor='middle' font-size='12'>" << p.x_label
      << "</text>\n";
}
}  // namespace

void write_svg_plot(const std::string& path, const std::string& title, const std::vector<PlotPanel>& panels) {
  const double panel_w = 340, gap = 120, left = 70;
  const double width = left + std::max(1.0, static_cast<double>(panels.size())) * (panel_w + gap) - gap + 30;
  std::ostringstream svg;
  svg << "<svg xmlns='http://www.w3.org/2000/svg' width='" << width << "' height='400' font-family='sans-serif'>\n";
  svg << "<rect width='" << width << "' height='400' fill='#fafafa'/>\n";
  svg << "<text x='" << width / 2 << "' y='24' text-anchor='middle' font-size='16' font-weight='bold'>" << title
      << "</text>\n";
  for (size_t i = 0; i < panels.size(); ++i) panel(svg, left + i * (panel_w + gap), 70, panel_w, 260, panels[i]);
  svg << "</svg>\n";
  std::string s = svg.str();
  io::write_atomically(path, [&](std::ostream& os) { os << s; });
}

}  // namespace weft::train
