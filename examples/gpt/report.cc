// The GPT example's reporting (contract in report.h).
#include "examples/gpt/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "io/atomic_file.h"

namespace weft::examples::gpt {

StepProgress::StepProgress(int64_t first_step, int64_t total_steps, bool enabled)
    : first_(first_step),
      total_(std::max<int64_t>(total_steps, 1)),
      enabled_(enabled),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

std::string format_duration(double s) {
  char buf[32];
  const auto t = static_cast<long long>(std::llround(std::max(s, 0.0)));
  if (t >= 3600) std::snprintf(buf, sizeof(buf), "%lldh%02lldm", t / 3600, (t / 60) % 60);
  else if (t >= 60) std::snprintf(buf, sizeof(buf), "%lldm%02llds", t / 60, t % 60);
  else std::snprintf(buf, sizeof(buf), "%llds", t);
  return buf;
}

void StepProgress::update(int64_t step, double loss, int64_t tokens) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (step < total_ && now - last_draw_ < std::chrono::milliseconds(200)) return;
  last_draw_ = now;
  drawn_ = true;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double rate = elapsed > 0 ? static_cast<double>(tokens) / elapsed : 0;
  const int64_t done = step - first_;
  const double eta = done > 0 ? elapsed * static_cast<double>(total_ - step) / static_cast<double>(done) : 0;
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(kWidth * std::min(step, total_) / total_);
  const std::string bar = std::string(filled, '#') + std::string(kWidth - filled, '.');
  std::fprintf(stderr, "\rtrain [%s] %lld/%lld loss=%.4f %.0f tok/s ETA %s   ", bar.c_str(),
               static_cast<long long>(step), static_cast<long long>(total_), loss, rate, format_duration(eta).c_str());
  std::fflush(stderr);
}

void StepProgress::finish() {
  if (enabled_ && drawn_) std::fprintf(stderr, "\n");
  drawn_ = false;
}

std::string encode(const std::vector<EvalRecord>& history) {
  std::ostringstream os;
  char buf[256];
  for (const auto& r : history) {
    std::snprintf(buf, sizeof(buf), "%lld %.17g %.17g %.17g %.17g %.17g;", static_cast<long long>(r.step), r.train_loss,
                  r.val_loss, r.lr, r.tokens_per_second, r.seconds);
    os << buf;
  }
  return os.str();
}

std::vector<EvalRecord> decode_history(const std::string& s) {
  std::vector<EvalRecord> out;
  std::istringstream in(s);
  std::string item;
  while (std::getline(in, item, ';')) {
    if (item.empty()) continue;
    std::istringstream f(item);
    EvalRecord r;
    long long step = 0;
    f >> step >> r.train_loss >> r.val_loss >> r.lr >> r.tokens_per_second >> r.seconds;
    WEFT_CHECK(!f.fail(), "gpt: a malformed evaluation record '", item, "' in the checkpoint's history");
    r.step = step;
    out.push_back(r);
  }
  return out;
}

void append_jsonl(const std::string& path, const EvalRecord& r) {
  std::ofstream out(path, std::ios::app);
  WEFT_CHECK(out.good(), "cannot open metrics file '", path, "' for appending");
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "{\"step\": %lld, \"train_loss\": %.6f, \"val_loss\": %.6f, \"lr\": %.6g, \"tokens_per_second\": %.1f, "
                "\"seconds\": %.2f}\n",
                static_cast<long long>(r.step), r.train_loss, r.val_loss, r.lr, r.tokens_per_second, r.seconds);
  out << buf;
}

namespace {
// "1.5", "2000", "0.25": short tick labels.
std::string tick(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4g", v);
  return buf;
}
}  // namespace

void write_loss_svg(const std::string& path, const std::vector<EvalRecord>& h, const std::string& title) {
  constexpr double W = 900, H = 460, x0 = 80, y0 = 60, w = 760, ph = 320;
  std::ostringstream svg;
  svg << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << H
      << "' font-family='sans-serif'>\n<rect width='" << W << "' height='" << H << "' fill='#fafafa'/>\n";
  svg << "<text x='" << W / 2 << "' y='28' text-anchor='middle' font-size='16' font-weight='bold'>" << title
      << "</text>\n";
  svg << "<rect x='" << x0 << "' y='" << y0 << "' width='" << w << "' height='" << ph
      << "' fill='white' stroke='#999'/>\n";
  if (!h.empty()) {
    double lo = 1e300, hi = -1e300;
    for (const auto& r : h)
      for (double v : {r.train_loss, r.val_loss}) lo = std::min(lo, v), hi = std::max(hi, v);
    if (hi - lo < 1e-9) lo -= 0.5, hi += 0.5;
    const double pad = (hi - lo) * 0.08;
    lo -= pad;
    hi += pad;
    const double max_step = static_cast<double>(std::max<int64_t>(h.back().step, 1));
    auto px = [&](double s) { return x0 + w * s / max_step; };
    auto py = [&](double v) { return y0 + ph - ph * (v - lo) / (hi - lo); };
    for (int t = 0; t <= 5; ++t) {
      const double v = lo + (hi - lo) * t / 5, s = max_step * t / 5;
      svg << "<line x1='" << x0 << "' x2='" << x0 + w << "' y1='" << py(v) << "' y2='" << py(v)
          << "' stroke='#eee'/>\n<text x='" << x0 - 6 << "' y='" << py(v) + 4 << "' text-anchor='end' font-size='11'>"
          << tick(v) << "</text>\n";
      svg << "<text x='" << px(s) << "' y='" << y0 + ph + 16 << "' text-anchor='middle' font-size='11'>"
          << tick(std::round(s)) << "</text>\n";
    }
    const struct {
      const char* name;
      const char* color;
      bool val;
    } lines[] = {{"training loss", "#d62728", false}, {"validation loss", "#1f77b4", true}};
    for (const auto& l : lines) {
      svg << "<polyline fill='none' stroke='" << l.color << "' stroke-width='2' points='";
      for (const auto& r : h)
        svg << px(static_cast<double>(r.step)) << "," << py(l.val ? r.val_loss : r.train_loss) << " ";
      svg << "'/>\n";
      for (const auto& r : h)
        svg << "<circle cx='" << px(static_cast<double>(r.step)) << "' cy='" << py(l.val ? r.val_loss : r.train_loss)
            << "' r='2.5' fill='" << l.color << "'/>\n";
    }
    for (int i = 0; i < 2; ++i) {
      const double ly = y0 + 18 + 18 * i;
      svg << "<line x1='" << x0 + w - 170 << "' x2='" << x0 + w - 145 << "' y1='" << ly << "' y2='" << ly
          << "' stroke='" << lines[i].color << "' stroke-width='2'/>\n<text x='" << x0 + w - 138 << "' y='" << ly + 4
          << "' font-size='12'>" << lines[i].name << "</text>\n";
    }
  }
  svg << "<text x='" << x0 + w / 2 << "' y='" << y0 + ph + 36
      << "' text-anchor='middle' font-size='12'>step</text>\n<text x='20' y='" << y0 + ph / 2
      << "' text-anchor='middle' font-size='12' transform='rotate(-90 20 " << y0 + ph / 2
      << ")'>loss (nats per byte)</text>\n</svg>\n";
  const std::string s = svg.str();
  io::write_atomically(path, [&](std::ostream& os) { os << s; });
}

}  // namespace weft::examples::gpt
