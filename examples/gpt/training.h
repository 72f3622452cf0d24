// How the GPT example trains on the library's loop, train::Trainer
// (train/trainer.h): in one process (train::Local) or as pipeline x data
// parallel under mpirun (train::Hybrid: DistributedModel over the --pp x --dp
// grid, --schedule, --chunks, --balance, --zero). Both train the same model
// on the same global batches (draw_batch, by step) with AdamW (beta1 0.9,
// --beta2, --weight-decay on every parameter), the global gradient norm
// clipped to --clip (TrainerOptions::clip_grad_norm), and the learning rate
// warmed up linearly over --warmup steps from lr / warmup, then
// cosine-decayed to lr * --min-lr-ratio at --steps (optim::LinearWarmupCosine,
// stepped after every step); so their losses agree to float rounding (the
// hybrid run sums micro-batches and replicas in another order).
//
// Contract:
// - make_job(o, world): the layout and this rank's replica (world null: one
//   process). Errors name the flags: a --batch-size that does not divide
//   among the replicas, too few rows for --chunks. Every rank builds the
//   model from --seed; with
//   --pp > 1 the tied head is declared in PipeOptions::tied (Note [tied
//   parameters]).
// - make_trainer(o, job): the Trainer with the LR schedule, global-norm
//   clipping and no metric (the losses are per token); prepare_trainer
//   places the model (world rank 0 measures a sample batch for --balance
//   auto and prints the partition table, so before the first step).
// - Job::batch(k): this rank's rows of global batch k (replica d takes rows
//   [d B / dp, (d + 1) B / dp)); Job::validation(o, corpus): the loader of
//   the --eval-batches x --batch-size validation windows, each replica its
//   rows of each global batch (Trainer::evaluate averages per token).
// - follow_steps(t, o) after a resume: the LR schedule's position is the
//   one a run of the current --steps (and --lr, --warmup, --min-lr-ratio)
//   has at the resumed step, so a larger --steps moves its horizon there.
// - pipeline_summary(t, o, bubbles) (hybrid only): the grid, schedule and
//   the mean (and range) of the bubbles measured on the last steps'
//   timelines (pipe::measured_bubble, gradient averages included), and the
//   partition plan's predicted bubble when the partition was measured.
#pragma once

#include <memory>
#include <string>

#include "examples/gpt/corpus.h"
#include "examples/gpt/options.h"
#include "io/dataloader.h"
#include "parallel/comm/process_group.h"
#include "train/trainer.h"

namespace weft::examples::gpt {

struct Job {
  const Options* o = nullptr;
  const Corpus* corpus = nullptr;
  train::Layout layout;
  bool hybrid = false;
  int dp = 1, replica = 0;
  int64_t local_rows = 0;  // this replica's rows of a global batch
  int world_rank = 0;

  io::Batch batch(int64_t step) const;
  std::unique_ptr<io::DataLoader> validation() const;
};

Job make_job(const Options& o, const Corpus& corpus, std::shared_ptr<parallel::ProcessGroup> world);
std::unique_ptr<train::Trainer> make_trainer(Job& job);  // sets job.replica
void prepare_trainer(train::Trainer& t, const Job& job);
void follow_steps(train::Trainer& t, const Options& o);
// The last kBubbleSteps steps' timelines are recorded (record_from, at each
// step's begin), and sample_bubble (collective, at each step's end) keeps
// each recorded step's measured bubble on the pipeline's ranks.
constexpr int64_t kBubbleSteps = 10;
void record_from(train::Trainer& t, int64_t end);
void sample_bubble(train::Trainer& t, const Options& o, std::vector<double>& bubbles);
std::string pipeline_summary(train::Trainer& t, const Options& o, const std::vector<double>& bubbles);

}  // namespace weft::examples::gpt
