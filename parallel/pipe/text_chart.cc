// The text chart of a simulated schedule (see chart.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/error.h"
#include "parallel/pipe/chart.h"

namespace weft::parallel::pipe {

std::string format_number(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4f", x);
  std::string s = buf;
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  if (s == "-0") s = "0";
  return s;
}

std::string format_percent(double fraction) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100 * fraction);
  return buf;
}

std::string chart_label(const Schedule& schedule, const Action& a) {
  std::string label = to_string(a.kind) + std::to_string(a.microbatch);
  if (schedule.virtual_stages > 1) label += static_cast<char>('a' + schedule.local_index(a.stage) % 26);
  return label;
}

// A data-parallel reduction's cell: "R" + stage, or "T" + tied group.
std::string reduce_label(const Action& a) {
  return (a.kind == ActionKind::kReduceGrad ? "R" : "T") +
         std::to_string(a.kind == ActionKind::kReduceGrad ? a.stage : a.tie);
}

std::string text_chart(const Schedule& schedule, const Simulation& sim, const ChartOptions& options) {
  WEFT_CHECK(static_cast<int>(sim.ranks.size()) == schedule.num_ranks, "text_chart: simulation of ", sim.ranks.size(),
             " ranks for schedule ", schedule.name, " of ", schedule.num_ranks);
  WEFT_CHECK(options.unit >= 0 && options.max_columns > 0, "text_chart: unit ", options.unit, " and max_columns ",
             options.max_columns, " must be non-negative and positive");
  double unit = options.unit;
  size_t width = 1;
  if (unit == 0) unit = sim.makespan;
  for (const RankTimeline& tl : sim.ranks)
    for (const TimedAction& t : tl.actions) {
      if (!is_compute(t.action.kind)) continue;
      if (options.unit == 0 && t.end > t.start) unit = std::min(unit, t.end - t.start);
      width = std::max(width, chart_label(schedule, t.action).size());
    }
  for (const RankTimeline& tl : sim.ranks)
    for (const TimedAction& t : tl.actions)
      if (is_reduce(t.action.kind)) width = std::max(width, reduce_label(t.action).size());
  if (unit <= 0) unit = 1;
  int columns = static_cast<int>(std::ceil(sim.makespan / unit - 1e-9));
  if (columns > options.max_columns) {
    unit = sim.makespan / options.max_columns;
    columns = options.max_columns;
  }
  // Each rank's cells: the compute actions running at the column's midpoint
  // (two for an overlapped pair, joined by '+': Note [overlapped F and B]).
  std::vector<std::vector<std::string>> cells(schedule.num_ranks, std::vector<std::string>(columns));
  bool overlaps = false;
  for (int r = 0; r < schedule.num_ranks; ++r) {
    const auto& actions = sim.ranks[r].actions;
    size_t first = 0;  // compute actions are in start order: walk them with the columns
    for (int c = 0; c < columns; ++c) {
      const double mid = (c + 0.5) * unit;
      while (first < actions.size() && (!is_compute(actions[first].action.kind) || actions[first].end <= mid)) ++first;
      std::string& cell = cells[r][c];
      for (size_t i = first; i < actions.size(); ++i) {
        const TimedAction& t = actions[i];
        if (!is_compute(t.action.kind)) continue;
        if (t.start > mid) break;
        if (t.end <= mid) continue;
        if (!cell.empty()) overlaps = true;
        cell += (cell.empty() ? "" : "+") + chart_label(schedule, t.action);
      }
      width = std::max(width, cell.size());
    }
  }
  std::ostringstream os;
  auto plural = [](int n) { return n == 1 ? "" : "s"; };
  os << schedule.name << ": " << schedule.num_ranks << " rank" << plural(schedule.num_ranks) << ", "
     << schedule.num_microbatches << " micro-batch" << (schedule.num_microbatches == 1 ? "" : "es") << ", "
     << schedule.virtual_stages << " stage" << plural(schedule.virtual_stages)
     << " per rank; column = " << format_number(unit) << " time unit" << (unit == 1 ? "" : "s") << "; makespan "
     << format_number(sim.makespan) << ", bubble " << format_percent(sim.bubble_fraction) << "\n";
  const std::string last_rank = std::to_string(schedule.num_ranks - 1);
  for (int r = 0; r < schedule.num_ranks; ++r) {
    std::string name = "rank " + std::to_string(r);
    name.resize(5 + last_rank.size(), ' ');
    os << name << " |";
    const auto& actions = sim.ranks[r].actions;
    for (int c = 0; c < columns; ++c) {
      std::string cell = cells[r][c].empty() ? std::string(width, '.') : cells[r][c];
      cell.resize(width, ' ');
      os << (c ? " " : "") << cell;
    }
    os << "|\n";
    if (!schedule.reduce_grads) continue;
    // Note [gradient reduction]: the rank's reductions on a row of their own.
    std::string dp = "  dp";
    dp.resize(name.size(), ' ');
    os << dp << " |";
    for (int c = 0; c < columns; ++c) {
      const double mid = (c + 0.5) * unit;
      std::string cell(width, ' ');
      for (const TimedAction& t : actions)
        if (is_reduce(t.action.kind) && t.start <= mid && mid < t.end) {
          cell = reduce_label(t.action);
          cell.resize(width, ' ');
        }
      os << (c ? " " : "") << cell;
    }
    os << "|\n";
  }
  os << "F forward, B backward" << (schedule.split_backward ? " (input gradient), W weight gradient" : "")
     << ", number = micro-batch";
  if (schedule.virtual_stages > 1) os << ", letter = the rank's stage (a = first)";
  if (overlaps) os << ", F+B = an overlapped pair";
  os << ", dots = idle";
  if (schedule.reduce_grads) os << "; dp row: R = a stage's data-parallel gradient average, T = a tied group's";
  os << "\n";
  return os.str();
}

}  // namespace weft::parallel::pipe
