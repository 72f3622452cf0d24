// MetricsLog and Plot (train/metrics_log.h).
#include "train/metrics_log.h"

#include <cmath>
#include <fstream>

#include "core/error.h"
#include "train/report.h"
#include "train/trainer.h"

namespace weft::train {
namespace {

void write_lines(const std::string& path, const Trainer& t, std::ios::openmode mode, size_t from) {
  std::ofstream out(path, mode);
  WEFT_CHECK(out.good(), "MetricsLog: cannot open metrics file '", path, "' for writing");
  const TrainerOptions& o = t.options();
  const auto& h = t.state().history;
  for (size_t i = from; i < h.size(); ++i) out << h[i].json(o.metric.name, o.valid_name) << "\n";
  WEFT_CHECK(out.good(), "MetricsLog: writing '", path, "' failed");
}

}  // namespace

void MetricsLog::on_fit_begin(Trainer& t) {
  if (t.lead()) write_lines(path_, t, std::ios::trunc, 0);
}

void MetricsLog::on_epoch_end(Trainer& t) {
  if (t.lead()) write_lines(path_, t, std::ios::app, t.state().history.size() - 1);
}

void Plot::on_epoch_end(Trainer& t) {
  if (!t.lead()) return;
  const TrainerOptions& o = t.options();
  PlotPanel loss{"training loss", {}, "#d62728"};
  const bool metric = o.metric && !t.state().history.empty() && !std::isnan(t.state().history.back().valid_metric);
  PlotPanel eval{o.valid_name + " " + (metric ? o.metric.name : "loss"), {}, "#1f77b4"};
  bool evaluated = false;
  for (const auto& r : t.state().history) {
    loss.values.push_back(r.train_loss);
    eval.values.push_back(metric ? r.valid_metric : r.valid_loss);
    evaluated = evaluated || !std::isnan(eval.values.back());
  }
  if (evaluated) write_svg_plot(path_, title_, {loss, eval});
  else write_svg_plot(path_, title_, {loss});
}

}  // namespace weft::train
