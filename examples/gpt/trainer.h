// The GPT example's two ways to train, behind one interface that the
// training loop (gpt.cc) drives: in one process (make_single_trainer), or as
// pipeline x data parallel over MPI ranks through DistributedModel
// (make_hybrid_trainer). Both train the same model on the same global batches
// (draw_batch, by step) with AdamW (beta1 0.9, --beta2, --weight-decay on
// every parameter), the global gradient norm clipped to --clip, and the
// learning rate warmed up linearly over --warmup steps from lr / warmup, then
// cosine-decayed to lr * --min-lr-ratio at --steps; so their losses agree to
// float rounding (the hybrid run sums micro-batches and replicas in another
// order).
//
// Contract:
// - train_step(k) trains global batch k (0-based) and returns its mean loss
//   per token (on every rank).
// - validate(windows) returns the mean loss per token over the windows
//   (collective; windows.x has a multiple of --batch-size rows, taken
//   --batch-size at a time, each replica its rows of each).
// - save(root, step, history) (collective) commits a checkpoint of the run
//   after `step` steps into root/step-<step> (examples/gpt/checkpoint.h;
//   --keep-last rotation); load(path) (collective) continues from one saved
//   by any layout (the latest committed under a root) and returns its step.
//   whole_model() (collective) is the whole model with its current weights,
//   for sampling.
// - lead(): the rank that prints and writes files (world rank 0).
// - before_last_step() / summary(): the hybrid run records the last step's
//   timeline and summarises the pipeline (grid, schedule, the measured and
//   predicted bubble); summary() is collective.
#pragma once

#include <memory>
#include <string>

#include "examples/gpt/checkpoint.h"
#include "examples/gpt/corpus.h"
#include "examples/gpt/options.h"
#include "parallel/process_group.h"

namespace weft::examples::gpt {

class Trainer {
 public:
  virtual ~Trainer() = default;
  virtual bool lead() const = 0;
  virtual double train_step(int64_t step) = 0;
  virtual double validate(const Batch& windows) = 0;
  virtual double lr() = 0;
  virtual void save(const std::string& root, int64_t step, const std::vector<EvalRecord>& history) = 0;
  virtual int64_t load(const std::string& path) = 0;
  virtual nn::Sequential& whole_model() = 0;
  virtual void before_last_step() {}
  virtual std::string summary() { return ""; }
  virtual void barrier() {}
};

std::unique_ptr<Trainer> make_single_trainer(const Options& o, const Corpus& corpus);
// `world`: every rank of the job; prints the partition table (world rank 0)
// before returning, so before the first step.
std::unique_ptr<Trainer> make_hybrid_trainer(const Options& o, const Corpus& corpus,
                                             std::shared_ptr<parallel::ProcessGroup> world);

}  // namespace weft::examples::gpt
