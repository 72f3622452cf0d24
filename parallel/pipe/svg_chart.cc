// The SVG chart of a simulated schedule (see chart.h).
#include <algorithm>
#include <cmath>
#include <sstream>
#include <utility>
#include <vector>

#include "core/error.h"
#include "parallel/pipe/chart.h"

namespace weft::parallel::pipe {
namespace {

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// Darker for a rank's first stage, lighter for its later ones.
const char* colour(ActionKind kind, int chunk) {
  static const char* forward[] = {"#2f6fb0", "#5b93cc", "#8db5e0", "#bcd4ee"};
  static const char* backward[] = {"#3b8f3a", "#62b05f", "#91cc8c", "#bfe3bb"};
  static const char* weight[] = {"#8a4f9e", "#a877ba", "#c7a2d4", "#e0cbe8"};
  const int i = chunk % 4;
  switch (kind) {
    case ActionKind::kForward: return forward[i];
    case ActionKind::kBackward: return backward[i];
    case ActionKind::kReduceGrad:
    case ActionKind::kReduceTiedGrad: return "#d9822b";
    default: return weight[i];
  }
}

// A round tick step giving about 10 ticks over `span`.
double tick_step(double span) {
  if (span <= 0) return 1;
  const double raw = span / 10;
  const double base = std::pow(10.0, std::floor(std::log10(raw)));
  for (double f : {1.0, 2.0, 5.0, 10.0})
    if (raw <= f * base) return f * base;
  return 10 * base;
}

}  // namespace

std::string svg_chart(const Schedule& schedule, const Simulation& sim, const ChartOptions& options) {
  WEFT_CHECK(static_cast<int>(sim.ranks.size()) == schedule.num_ranks, "svg_chart: simulation of ", sim.ranks.size(),
             " ranks for schedule ", schedule.name, " of ", schedule.num_ranks);
  WEFT_CHECK(options.max_width_px > 0, "svg_chart: max_width_px must be positive (", options.max_width_px, ")");
  double shortest = 0;
  for (const RankTimeline& tl : sim.ranks)
    for (const TimedAction& t : tl.actions)
      if (is_compute(t.action.kind) && t.end > t.start && (shortest == 0 || t.end - t.start < shortest))
        shortest = t.end - t.start;
  const double span = sim.makespan > 0 ? sim.makespan : 1;
  double scale = shortest > 0 ? 28 / shortest : 28;  // pixels per time unit
  scale = std::min(scale, options.max_width_px / span);
  const double left = 64, top = 34, lane = 30, box = 24;
  const double width = left + span * scale + 16;
  const double height = top + lane * schedule.num_ranks + 52;
  auto px = [](double v) { return format_number(v); };

  std::ostringstream os;
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << px(width) << "\" height=\"" << px(height)
     << "\" viewBox=\"0 0 " << px(width) << ' ' << px(height) << "\" font-family=\"monospace\" font-size=\"11\">\n";
  const std::string heading = xml_escape(detail::str_cat(
      schedule.name, ": ", schedule.num_ranks, " ranks, ", schedule.num_microbatches, " micro-batches, ",
      schedule.virtual_stages, " stage", schedule.virtual_stages == 1 ? "" : "s", " per rank; makespan ",
      format_number(sim.makespan), ", bubble ", format_percent(sim.bubble_fraction)));
  os << "<title>" << heading << "</title>\n";
  os << "<rect x=\"0\" y=\"0\" width=\"" << px(width) << "\" height=\"" << px(height) << "\" fill=\"#ffffff\"/>\n";
  os << "<text x=\"" << px(left) << "\" y=\"18\" font-size=\"13\">" << heading << "</text>\n";
  for (int r = 0; r < schedule.num_ranks; ++r) {
    const double y = top + r * lane;
    os << "<text x=\"6\" y=\"" << px(y + box / 2 + 4) << "\">rank " << r << "</text>\n";
    os << "<rect class=\"lane\" x=\"" << px(left) << "\" y=\"" << px(y) << "\" width=\"" << px(span * scale)
       << "\" height=\"" << px(box) << "\" fill=\"#eeeeee\"/>\n";
    int paired = 0;  // Note [overlapped F and B]: the pair's F in the lane's top half, its B in the bottom one
    for (const TimedAction& t : sim.ranks[r].actions) {
      if (t.action.kind == ActionKind::kOverlap) paired = 2;
      if (is_reduce(t.action.kind) && t.end > t.start) {  // Note [gradient reduction]: a strip under the lane
        os << "<rect class=\"action " << to_string(t.action.kind) << "\" x=\"" << px(left + t.start * scale)
           << "\" y=\"" << px(y + box) << "\" width=\"" << px((t.end - t.start) * scale) << "\" height=\"4\" fill=\""
           << colour(t.action.kind, 0) << "\"><title>" << to_string(t.action)
           << " (data-parallel gradient average): " << format_number(t.start) << " to " << format_number(t.end)
           << "</title></rect>\n";
        continue;
      }
      if (!is_compute(t.action.kind)) continue;
      const double x = left + t.start * scale, w = (t.end - t.start) * scale;
      const int chunk = schedule.local_index(t.action.stage);
      const double h = paired > 0 ? box / 2 : box, ty = paired == 1 ? y + box / 2 : y;
      if (paired > 0) --paired;
      os << "<rect class=\"action " << to_string(t.action.kind) << "\" x=\"" << px(x) << "\" y=\"" << px(ty)
         << "\" width=\"" << px(w) << "\" height=\"" << px(h) << "\" fill=\"" << colour(t.action.kind, chunk)
         << "\" stroke=\"#ffffff\" stroke-width=\"1\"><title>" << to_string(t.action) << " (stage " << t.action.stage
         << ", micro-batch " << t.action.microbatch << "): " << format_number(t.start) << " to " << format_number(t.end)
         << "</title></rect>\n";
      if (w >= 10)
        os << "<text x=\"" << px(x + w / 2) << "\" y=\"" << px(ty + h / 2 + 4) << "\" text-anchor=\"middle\" fill=\""
           << (chunk % 4 < 2 ? "#ffffff" : "#222222") << "\">" << t.action.microbatch << "</text>\n";
    }
  }
  // Time axis.
  const double axis_y = top + lane * schedule.num_ranks + 4;
  os << "<line x1=\"" << px(left) << "\" y1=\"" << px(axis_y) << "\" x2=\"" << px(left + span * scale) << "\" y2=\""
     << px(axis_y) << "\" stroke=\"#444444\"/>\n";
  const double step = tick_step(span);
  for (int i = 0; i * step <= span + 1e-9; ++i) {
    const double x = left + i * step * scale;
    os << "<line x1=\"" << px(x) << "\" y1=\"" << px(axis_y) << "\" x2=\"" << px(x) << "\" y2=\"" << px(axis_y + 4)
       << "\" stroke=\"#444444\"/>\n";
    os << "<text x=\"" << px(x) << "\" y=\"" << px(axis_y + 15) << "\" text-anchor=\"middle\">"
       << format_number(i * step) << "</text>\n";
  }
  // Legend.
  double lx = left;
  const double ly = axis_y + 26;
  std::vector<std::pair<ActionKind, const char*>> legend = {{ActionKind::kForward, "forward"},
                                                            {ActionKind::kBackward, "backward"}};
  if (schedule.split_backward) legend.push_back({ActionKind::kWeight, "weight gradient"});
  if (schedule.reduce_grads) legend.push_back({ActionKind::kReduceGrad, "gradient average"});
  for (const auto& [kind, name] : legend) {
    os << "<rect x=\"" << px(lx) << "\" y=\"" << px(ly) << "\" width=\"12\" height=\"12\" fill=\"" << colour(kind, 0)
       << "\"/>\n";
    os << "<text x=\"" << px(lx + 16) << "\" y=\"" << px(ly + 10) << "\">" << name << "</text>\n";
    lx += 16 + 8 * std::string(name).size() + 16;
  }
  os << "<text x=\"" << px(lx) << "\" y=\"" << px(ly + 10) << "\">grey = idle"
     << (schedule.virtual_stages > 1 ? "; lighter = the rank's later stages" : "") << "</text>\n";
  os << "</svg>\n";
  return os.str();
}

}  // namespace weft::parallel::pipe
