// Progress (train/progress.h).
#include "train/progress.h"

#include <cmath>
#include <cstdio>

#include "train/trainer.h"

namespace weft::train {

void Progress::on_epoch_begin(Trainer& t) {
  if (!t.lead()) return;
  const TrainState& s = t.state();
  bar_.emplace(options_.period + " " + std::to_string(s.epoch + 1) + "/" + std::to_string(s.epochs),
               s.batches_per_epoch, options_.bar, t.options().metric ? t.options().metric.short_name : "");
}

void Progress::on_step_end(Trainer& t) {
  if (!bar_) return;
  const TrainState& s = t.state();
  bar_->update(s.batch, s.running_loss(), s.running_metric(), static_cast<int64_t>(s.rows));
}

void Progress::finish_bar() {
  if (bar_) bar_->finish();
  bar_.reset();
}

void Progress::on_evaluate_begin(Trainer&) { finish_bar(); }
void Progress::on_fit_end(Trainer&) { finish_bar(); }

void Progress::on_epoch_end(Trainer& t) {
  finish_bar();
  if (!t.lead()) return;
  const EpochRecord& r = t.state().history.back();
  const TrainerOptions& o = t.options();
  std::string line = options_.period + " " + std::to_string(r.epoch) + "/" + std::to_string(t.state().epochs) + ":";
  char buf[96];
  auto field = [&](const std::string& key, double v, const char* fmt) {
    if (std::isnan(v)) return;
    std::snprintf(buf, sizeof(buf), fmt, v);
    line += " " + key + "=" + buf;
  };
  const std::string m = o.metric ? o.metric.short_name : "";
  field("train_loss", r.train_loss, "%.6f");
  if (!m.empty()) field("train_" + m, r.train_metric, "%.4f");
  field(o.valid_name + "_loss", r.valid_loss, "%.4f");
  if (!m.empty()) field(o.valid_name + "_" + m, r.valid_metric, "%.4f");
  std::snprintf(buf, sizeof(buf), " (%.1fs, %.0f %s/s)", r.seconds, r.samples_per_second, options_.unit.c_str());
  std::printf("%s%s\n", line.c_str(), buf);
  std::fflush(stdout);
}

}  // namespace weft::train
