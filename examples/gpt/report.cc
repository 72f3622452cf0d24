// The GPT example's reporting (contract in report.h).
#include "examples/gpt/report.h"

#include <cmath>
#include <cstdio>

#include "train/trainer.h"

namespace weft::examples::gpt {

std::string format_duration(double s) {
  char buf[32];
  const auto t = static_cast<long long>(std::llround(std::max(s, 0.0)));
  if (t >= 3600) std::snprintf(buf, sizeof(buf), "%lldh%02lldm", t / 3600, (t / 60) % 60);
  else if (t >= 60) std::snprintf(buf, sizeof(buf), "%lldm%02llds", t / 60, t % 60);
  else std::snprintf(buf, sizeof(buf), "%llds", t);
  return buf;
}

void StepReport::on_epoch_begin(train::Trainer& t) {
  if (!t.lead() || !options_.bar) return;
  const train::TrainState& s = t.state();
  const int64_t end = std::min(options_.steps, (s.epoch + 1) * s.batches_per_epoch);
  bar_.emplace("step " + std::to_string(end) + "/" + std::to_string(options_.steps), s.batches_per_epoch, true, "");
}

void StepReport::on_step_begin(train::Trainer&) { step_start_ = std::chrono::steady_clock::now(); }

void StepReport::on_step_end(train::Trainer& t) {
  seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start_).count();
  ++steps_;
  const train::TrainState& s = t.state();
  if (bar_) bar_->update(s.batch, s.running_loss(), s.running_metric(), static_cast<int64_t>(s.rows));
}

void StepReport::finish_bar() {
  if (bar_) bar_->finish();
  bar_.reset();
}

void StepReport::on_epoch_end(train::Trainer& t) {
  finish_bar();
  train::EpochRecord& r = t.state().history.back();
  const double tokens_per_second = r.samples_per_second * static_cast<double>(options_.tokens_per_row);
  r.extra["tokens_per_second"] = tokens_per_second;
  if (!t.lead()) return;
  double seconds = 0;
  for (const auto& e : t.state().history) seconds += e.seconds;
  std::printf("step %lld/%lld: train_loss=%.6f val_loss=%.6f lr=%.3g (%.0f tok/s, %s)\n",
              static_cast<long long>(r.step), static_cast<long long>(options_.steps), r.train_loss, r.valid_loss, r.lr,
              tokens_per_second, format_duration(seconds).c_str());
  std::fflush(stdout);
  train::PlotPanel train{"training loss", {}, "#d62728"}, valid{"validation loss", {}, "#1f77b4"};
  train.x_label = valid.x_label = "evaluation (every " + std::to_string(options_.eval_interval) + " steps)";
  for (const auto& e : t.state().history) {
    train.values.push_back(e.train_loss);
    valid.values.push_back(e.valid_loss);
  }
  train::write_svg_plot(options_.plot, options_.title, {train, valid});
}

}  // namespace weft::examples::gpt
