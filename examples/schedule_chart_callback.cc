// ScheduleChart (contract in schedule_chart_callback.h).
#include "examples/schedule_chart_callback.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>

#include "core/error.h"
#include "core/ops.h"
#include "parallel/pipe/chart.h"
#include "parallel/pipe/simulate.h"
#include "parallel/pipe/trace.h"
#include "train/trainer.h"

namespace weft::examples {
namespace {

namespace pp = parallel::pipe;

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  WEFT_CHECK(out.good(), "cannot write ", path);
  out << text;
  WEFT_CHECK(out.good(), "writing ", path, " failed");
}

}  // namespace

void ScheduleChart::on_prepared(train::Trainer& t) { t.distributed_model().pipe().runner().set_record_trace(true); }
void ScheduleChart::on_step_begin(train::Trainer&) { step_start_ = now_s(); }
void ScheduleChart::on_step_end(train::Trainer& t) {
  last_step_s_ = now_s() - step_start_;
  pp::Pipe& pipe = t.distributed_model().pipe();
  bubbles_.push_back(
      pp::measured_bubble(pp::gather_trace(*t.distributed_model().grid().pipeline(), pipe.runner().last_trace()),
                          pipe.schedule().num_ranks));
  if (bubbles_.size() > kBubbleSteps) bubbles_.pop_front();
}

void ScheduleChart::on_fit_end(train::Trainer& t) {
  pp::Pipe& pipe = t.distributed_model().pipe();
  parallel::ProcessGroup& world = *t.checkpoint_world();
  // This replica's pipeline (the lead's): trace ranks are pipeline ranks.
  std::vector<pp::TraceEvent> events =
      pp::gather_trace(*t.distributed_model().grid().pipeline(), pipe.runner().last_trace());
  Tensor step_time = full({1}, last_step_s_, DType::Float64);
  world.allreduce(step_time, {parallel::ReduceOp::Max})->wait();
  if (!t.lead()) return;
  pp::Simulation sim = pp::simulate(pipe.schedule(), pp::measured_costs(pipe.schedule(), events));
  std::ostringstream chart;
  chart << pp::text_chart(pipe.schedule(), sim) << "measured step " << step_time.item<double>() * 1e3
        << " ms (optimizer included); simulated from the measured F, B and W times " << sim.makespan * 1e3
        << " ms, bubble " << pp::format_percent(sim.bubble_fraction) << "; measured bubble "
        << pp::format_percent(pp::measured_bubble(events, pipe.schedule().num_ranks)) << "\n";
  if (!bubbles_.empty()) {
    double mean = 0, lo = 1, hi = 0;
    for (double b : bubbles_) {
      mean += b / static_cast<double>(bubbles_.size());
      lo = std::min(lo, b);
      hi = std::max(hi, b);
    }
    chart << "measured bubble over the last " << bubbles_.size() << " steps: mean " << pp::format_percent(mean) << " ("
          << pp::format_percent(lo) << " to " << pp::format_percent(hi) << ")";
    if (!t.distributed_model().profile().empty())
      chart << "; the partition plan predicted " << pp::format_percent(t.distributed_model().plan().bubble_fraction);
    chart << "\n";
  }
  write_file(chart_, chart.str());
  write_file(trace_, pp::chrome_trace_json(events));
  std::cerr << t.options().name << ": schedule chart in " << chart_ << ", last step's trace in " << trace_ << "\n";
}

}  // namespace weft::examples
