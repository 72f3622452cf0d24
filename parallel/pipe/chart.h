// Charts of a simulated schedule: what a user looks at to see the bubbles.
//
// Contract:
// - text_chart: a header line (schedule, counts, the time one column stands for,
//   makespan, bubble), then one row per rank, "rank r |c c c ...|", one cell per
//   column of `unit` time, then a legend line. A cell shows the compute action
//   running at the column's midpoint as kind letter + micro-batch ("F3", "B0",
//   "W2"), followed, when ranks hold several stages, by the stage's index on its
//   rank as a letter (a = the rank's first stage: "F3b"); an action spanning k
//   columns fills k cells; idle cells are dots. Cells are padded to one width.
//   With unit = 0 a column is the shortest compute action; when that gives more
//   than max_columns columns the unit grows to makespan / max_columns (actions
//   shorter than a column may then not show).
// - svg_chart: a standalone SVG document: one lane per rank, one <rect
//   class="action ..."> per compute action, its width proportional to its
//   duration, coloured by kind (F blue, B green, W purple; lighter for a rank's
//   later stages), labelled with its micro-batch, with a <title> tooltip naming
//   the action and its start and end. Idle time shows as the lane's grey
//   background. A time axis, a legend and the makespan and bubble sit around it.
#pragma once

#include <string>

#include "parallel/pipe/schedule.h"
#include "parallel/pipe/simulate.h"

namespace weft::parallel::pipe {

struct ChartOptions {
  double unit = 0;             // text: time per column; 0 = the shortest compute action
  int max_columns = 240;       // text: widen the unit beyond this many columns
  double max_width_px = 2400;  // svg: widest drawing; the shortest action gets up to 28 px
};

std::string text_chart(const Schedule& schedule, const Simulation& sim, const ChartOptions& options = {});
std::string svg_chart(const Schedule& schedule, const Simulation& sim, const ChartOptions& options = {});

// Shared by both charts: "F3", or "F3b" when ranks hold several stages.
std::string chart_label(const Schedule& schedule, const Action& a);
// A number without trailing zeros ("9", "13.5", "0.3333"; up to 4 decimals).
std::string format_number(double x);
// A fraction as a percentage with one decimal ("33.3%").
std::string format_percent(double fraction);

}  // namespace weft::parallel::pipe
