// Checkpoint: saves the run in the partitioned directory format of
// parallel/checkpoint (root/step-<N>, committed by its manifest, loadable by
// Trainer::resume on any layout) every N steps, every N minutes and/or every
// N epochs, keeping the newest keep_last.
//
// Contract:
// - With every_steps, every_minutes and every_epochs all 0 it saves after
//   every epoch. every_steps: after each step whose number is a multiple;
//   every_minutes: after the first step once that long has passed since the
//   fit began or the last save (the lead's clock decides, for every rank:
//   Trainer::agree); every_epochs: at the end of each epoch whose number
//   is a multiple (a fit_steps period cut short by max_steps included: its
//   save resumes within the period, Note [a period cut short] in
//   train/trainer.h).
// - A save holds model, optimizer, LR schedule, RNG state, step, epoch, the
//   position within the epoch (a mid-epoch save resumes at the next batch,
//   with the epoch's running sums) and the history (Trainer::training_state),
//   plus options.metadata: the program's own entries (e.g. its model's
//   sizes) in trainer_state.json's metadata, read back with
//   parallel::checkpoint::CheckpointReader, plus every rank's own state
//   when parts are registered (Trainer::add_rank_state, Note [rank state]
//   in train/rank_state.h), gathered to the lead and committed with the rest.
// - Collective over the model's ranks (DataParallel: rank 0 alone writes);
//   async writes in the background (parallel::checkpoint::Checkpointer); the
//   last save is committed (or its error thrown) at the end of fit.
// - last_dir(): the latest checkpoint this callback committed (or will, when
//   async); the lead names each on stderr unless quiet.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "parallel/checkpoint/checkpointer.h"
#include "train/callback.h"

namespace weft::train {

struct CheckpointOptions {
  std::string root;
  int64_t every_steps = 0;
  double every_minutes = 0;
  int64_t every_epochs = 0;
  int keep_last = 0;  // 0: keep all
  bool async = false;
  parallel::checkpoint::Kind kind = parallel::checkpoint::Kind::kPartial;
  bool quiet = false;
  std::map<std::string, std::string> metadata;  // written into every save's trainer_state.json metadata
};

class Checkpoint : public Callback {
 public:
  explicit Checkpoint(CheckpointOptions options);
  int order() const override { return 20; }
  void on_fit_begin(Trainer& t) override;
  void on_step_end(Trainer& t) override;
  void on_epoch_end(Trainer& t) override;
  void on_fit_end(Trainer& t) override;
  const std::string& last_dir() const { return last_dir_; }
  // Saves now (collective, as a scheduled save; Preemption's stop uses it)
  // and the step of the latest save (-1: none yet).
  void save(Trainer& t);
  int64_t last_step() const { return last_step_; }

 private:
  CheckpointOptions options_;
  std::unique_ptr<parallel::checkpoint::Checkpointer> saver_;
  double last_save_ = 0;
  int64_t last_step_ = -1;
  std::string last_dir_;
};

}  // namespace weft::train
