// Saving partitioned checkpoints, synchronously or in the background
// (PyTorch DCP's async_save in weft's terms).
//
// Contract:
// - save(root, state, training, options) is collective over the model's
//   world: take_snapshot (snapshot.h), then the commit of Note [checkpoint
//   commit] (commit.h) into root/step-<training.step>, then keep_last
//   rotation. Returns the committed directory.
// - Checkpointer(root, world, options) (collective: with options.async it
//   makes its own group of the world's ranks, so that the background
//   commit's collectives never interleave with training's) saves every
//   call of save() to `root`. Synchronous: as the free save(). Asynchronous:
//   save() waits for the previous save, copies this rank's part to host
//   memory (the only part that holds up training), and returns the
//   directory the checkpoint will have; a background thread writes, agrees
//   and commits. wait() blocks until it is committed and throws its error
//   (every rank reports a failed commit). The destructor waits and, rather
//   than throwing, prints a failure to stderr: call wait() before the end of
//   training to act on it. Timings: last_blocking_s() is how long the last
//   save() held up the caller, last_total_s() the save's whole duration
//   (known after wait()).
// - Kind::kFull gathers in save() (collective), then rank 0 writes.
#pragma once

#include <exception>
#include <memory>
#include <string>
#include <thread>

#include "parallel/checkpoint/commit.h"
#include "parallel/checkpoint/snapshot.h"

namespace weft::parallel::checkpoint {

struct SaveOptions {
  Kind kind = Kind::kPartial;
  int keep_last = 0;  // keep only the newest N committed checkpoints (0: all)
  bool async = false;
};

std::string save(const std::string& root, const Stateful& state, const TrainingState& training,
                 const SaveOptions& options = {});

class Checkpointer {
 public:
  Checkpointer(std::string root, std::shared_ptr<ProcessGroup> world, SaveOptions options = {});
  ~Checkpointer();
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  std::string save(const Stateful& state, const TrainingState& training);
  void wait();
  bool pending() const { return thread_.joinable(); }

  const std::string& root() const { return root_; }
  const SaveOptions& options() const { return options_; }
  double last_blocking_s() const { return blocking_s_; }
  double last_total_s() const { return total_s_; }

 private:
  std::string root_;
  std::shared_ptr<ProcessGroup> world_, group_;
  SaveOptions options_;
  std::thread thread_;
  std::exception_ptr error_;
  double blocking_s_ = 0, total_s_ = 0;
};

}  // namespace weft::parallel::checkpoint
