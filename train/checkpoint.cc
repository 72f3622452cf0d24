// Checkpoint (train/checkpoint.h).
#include "train/checkpoint.h"

#include <chrono>
#include <cstdio>
#include <iostream>

#include "core/error.h"
#include "train/trainer.h"

namespace weft::train {
namespace {
double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

Checkpoint::Checkpoint(CheckpointOptions options) : options_(std::move(options)) {
  WEFT_CHECK(!options_.root.empty(), "Checkpoint: no root directory given");
  WEFT_CHECK(
      options_.every_steps >= 0 && options_.every_minutes >= 0 && options_.every_epochs >= 0 && options_.keep_last >= 0,
      "Checkpoint: every_steps (", options_.every_steps, "), every_minutes (", options_.every_minutes,
      "), every_epochs (", options_.every_epochs, ") and keep_last (", options_.keep_last, ") must be >= 0");
  if (options_.every_steps == 0 && options_.every_minutes == 0 && options_.every_epochs == 0) options_.every_epochs = 1;
}

void Checkpoint::on_fit_begin(Trainer& t) {
  if (!saver_ && t.writes_checkpoints())
    saver_ = std::make_unique<parallel::checkpoint::Checkpointer>(
        options_.root, t.checkpoint_world(),
        parallel::checkpoint::SaveOptions{options_.kind, options_.keep_last, options_.async});
  last_save_ = now_seconds();
}

void Checkpoint::save(Trainer& t) {
  std::vector<parallel::checkpoint::ExtraFile> rank_states = t.rank_state_files();  // collective, on the lead
  WEFT_INTERNAL_ASSERT(rank_states.empty() || saver_, "Checkpoint: the lead holds per-rank state but does not write");
  if (saver_) {
    parallel::checkpoint::TrainingState training = t.training_state();
    training.metadata.insert(options_.metadata.begin(), options_.metadata.end());
    parallel::checkpoint::Stateful state = t.stateful();
    state.extra_files = std::move(rank_states);
    last_dir_ = saver_->save(state, training);
  }
  last_save_ = now_seconds();
  last_step_ = t.state().step;
  if (t.lead() && !options_.quiet) {
    std::cerr << t.options().name << ": checkpoint " << last_dir_ << " (step " << t.state().step;
    if (saver_) {  // with async: the copy to host memory only; the writing goes on in the background
      char held[64];
      std::snprintf(held, sizeof held, "%.3f", saver_->last_blocking_s());
      std::cerr << ", held up training " << held << " s";
    }
    std::cerr << ")\n";
  }
}

void Checkpoint::on_step_end(Trainer& t) {
  bool due = options_.every_steps > 0 && t.state().step % options_.every_steps == 0;
  if (options_.every_minutes > 0)
    due = t.agree(t.lead() && now_seconds() - last_save_ >= options_.every_minutes * 60) || due;
  if (due) save(t);
}

void Checkpoint::on_epoch_end(Trainer& t) {
  // The number of the epoch just recorded (a fit_steps period cut short is not counted in state().epoch).
  const auto& h = t.state().history;
  const int64_t epoch = h.empty() ? t.state().epoch : h.back().epoch;
  if (options_.every_epochs > 0 && epoch % options_.every_epochs == 0) save(t);
}

void Checkpoint::on_fit_end(Trainer&) {
  if (saver_) saver_->wait();
}

}  // namespace weft::train
