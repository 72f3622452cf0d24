// Trainer: one training loop for every layout (fastai's Learner with its
// distrib_ctx, in weft's terms): a Sequential, a loss, an optimizer factory
// and data loaders, run in one process, data parallel, as a pipeline or as
// pipeline x data parallel (train/layout.h), with callbacks for everything
// around the loop (train/callback.h, train/callbacks.h).
//
// Contract:
// - Trainer(layout, model, loss, optimizer, options) on every rank of the
//   layout's group (collective for DataParallel, Pipeline and Hybrid). Every
//   rank builds `model` from the same seed. `loss(output, target)` is a
//   mean-reduced loss (one element); `optimizer` makes the optimizer over
//   this rank's parameters (train/optimizer.h). The model is placed and the
//   optimizer built at construction, except for Hybrid with automatic
//   partitioning, which measures a sample batch: then at prepare(sample) or
//   at fit(), on the first batch.
// - fit(train, valid, epochs) trains epochs [state().epoch, epochs): each
//   epoch sets train's epoch (the data order is the loader's, seeded by
//   (seed, epoch)), runs a step per batch, then evaluates on `valid` (may be
//   null) and records an EpochRecord. fit_steps(batch_at, max_steps, ...)
//   is the step-driven form: step k trains batch_at(k) until max_steps,
//   with an evaluation period every `eval_every` steps playing the epoch
//   (period e, 1-based, ends at step e * eval_every). With epochs left to
//   train, a training loader without batches is an error naming its dataset
//   size and batch size.
// - Note [a period cut short]: when max_steps ends fit_steps within a
//   period (max_steps not a multiple of eval_every), that period is
//   evaluated and recorded all the same (on_epoch_end runs, so a
//   Checkpoint saves it), but the run stays within it: state().epoch does
//   not count it, state().batch is its steps so far and the running sums
//   are kept, so a checkpoint taken there resumes inside the period. A
//   later fit_steps that trains on from there drops that record and makes
//   the period's record again at its end, over all its steps: stopped and
//   resumed, the history (its records, their numbers and values) is the
//   uninterrupted run's. With nothing left to train, the record stays.
// - A step (train_step) trains one batch: forward, loss, backward (DDP and
//   DistributedModel reduce the gradients), clipping of the global gradient
//   norm when options.clip_grad_norm > 0 (optim::clip_grad_norm_, or
//   parallel::hybrid::GlobalNormClipper for a pipeline, in the ZeRO shard
//   optimizer under ZeRO), the optimizer's step. Its loss, the metric's sum
//   and the rows are taken on the ranks that have the outputs (every rank
//   of Local and DataParallel; the last stage's ranks of a pipeline) and
//   summed over the layout's ranks, so state().loss, the running loss and
//   the running metric are the global batch's on every rank (a pipeline's
//   progress bar shows the true accuracy).
// - evaluate(loader): the loss and metric over the loader's batches (no
//   gradients, eval mode), reduced the same way; every rank returns them.
// - Batches a pipeline cannot split into its micro-batches (fewer rows than
//   chunks; for Hybrid decided on the epoch's last batch by all replicas
//   together) are skipped on every rank.
// - resume(path) (collective) continues from a checkpoint, naming on stderr
//   (lead) which kind it took: a partitioned checkpoint directory
//   (parallel/checkpoint: written by the Checkpoint callback from any
//   layout), a root holding step-<N> directories (the latest committed), or
//   a single-file checkpoint of io/checkpoint (the examples' older --save
//   format). Model, optimizer, LR schedule (the scheduler a callback made in
//   on_prepared), RNG state, step, epoch, the position within the epoch
//   and the history come back; fit() then continues where the saved run
//   was, reproducing its losses exactly in one process. Errors name the
//   path: "no such file or directory", a directory without a committed
//   checkpoint (and what was expected), a file that is not a checkpoint.
//   The path is checked at once; the checkpoint is loaded at the next
//   prepare(), fit(), fit_steps() or evaluate(), after every callback's
//   on_prepared (so the LRSchedule's scheduler exists to take its state).
// - add_rank_state(part) (every rank, the same parts in the same order,
//   before the checkpoint is loaded: the next prepare() or fit() after
//   resume()) puts a part of each rank's own state into every checkpoint
//   and takes it back on resume (Note [rank state] in train/rank_state.h):
//   for state that differs between ranks where the layout saves one copy
//   (DataParallel: rank 0's model and optimizer), e.g. DASO's. A resume then
//   needs the layout the checkpoint was saved with (an error naming both
//   otherwise).
// - request_stop(): fit ends after the current step (mid-epoch: without the
//   epoch's evaluation) or epoch end; on_fit_end still runs.
// - lead(): world rank 0, the only rank that prints or writes reports.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "io/dataloader.h"
#include "nn/container.h"
#include "optim/lr_scheduler.h"
#include "parallel/checkpoint/checkpointer.h"
#include "parallel/hybrid/distributed_optimizer.h"
#include "parallel/pipe/runner.h"
#include "train/callback.h"
#include "train/history.h"
#include "train/layout.h"
#include "train/optimizer.h"
#include "train/rank_state.h"

namespace weft::train {

using LossFn = parallel::pipe::LossFn;

// A score summed over a batch's rows (e.g. the number classified right);
// reported per row.
struct Metric {
  std::string name;        // "accuracy": keys train_accuracy, valid_accuracy
  std::string short_name;  // "acc": progress bar and epoch lines
  std::function<double(const Tensor& output, const Tensor& target)> sum;
  explicit operator bool() const { return static_cast<bool>(sum); }
};
// argmax(output, 1) == target, counted.
Metric accuracy();

struct TrainerOptions {
  Metric metric = accuracy();        // Metric{} for none
  std::string valid_name = "valid";  // key prefix of the evaluation: "valid_loss" ("test": "test_loss")
  double clip_grad_norm = 0;         // 0: no clipping
  std::string name = "train";        // prefixes what the lead writes to stderr
};

struct EvalResult {
  double loss = kNotMeasured, metric = kNotMeasured;
  double rows = 0;
};

struct TrainState {
  int64_t epoch = 0;   // current epoch, 0-based (after fit: the epochs done, Note [a period cut short])
  int64_t epochs = 0;  // fit's target
  int64_t step = 0;    // optimizer steps taken
  int64_t batch = 0;   // batches of the current epoch done (or skipped)
  int64_t batches_per_epoch = 0;
  double loss = kNotMeasured;  // the last step's loss, mean over its global batch
  // The current epoch so far, over every rank's rows.
  double loss_sum = 0, metric_sum = 0, rows = 0, seconds = 0;
  double running_loss() const { return rows > 0 ? loss_sum / rows : kNotMeasured; }
  double running_metric() const { return rows > 0 ? metric_sum / rows : kNotMeasured; }
  EvalResult last_eval;
  std::vector<EpochRecord> history;
  bool stop = false;
  std::string resumed_from;  // the checkpoint resume() used
};

namespace detail {
class Runner;
}

class Trainer {
 public:
  Trainer(Layout layout, std::shared_ptr<nn::Sequential> model, LossFn loss, OptimizerFactory optimizer,
          TrainerOptions options = {});
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Adds a callback (train/callbacks.h); returns it.
  template <class C, class... Args>
  C& add(Args&&... args) {
    auto c = std::make_shared<C>(std::forward<Args>(args)...);
    add(std::static_pointer_cast<Callback>(c));
    return *c;
  }
  void add(std::shared_ptr<Callback> callback);
  // The first callback of type C added, or nullptr.
  template <class C>
  C* find() const {
    for (const auto& c : callbacks_)
      if (auto* p = dynamic_cast<C*>(c.get())) return p;
    return nullptr;
  }

  // Places the model and builds the optimizer (collective; a no-op once done).
  // `sample`: a batch's input as a step would get it, for Hybrid's automatic
  // partitioning (needed on world rank 0 only).
  void prepare(const Tensor& sample = Tensor());
  bool prepared() const;
  void resume(const std::string& path);

  void fit(io::DataLoader& train, io::DataLoader* valid, int64_t epochs);
  struct StepsOptions {
    int64_t eval_every = 0;  // steps per evaluation period; 0: one period of max_steps
    io::DataLoader* valid = nullptr;
  };
  void fit_steps(const std::function<io::Batch(int64_t step)>& batch_at, int64_t max_steps,
                 const StepsOptions& options);
  // One step on `batch` (this rank's share); returns the global batch's loss.
  double train_step(const io::Batch& batch);
  EvalResult evaluate(io::DataLoader& loader);
  void request_stop() { state_.stop = true; }

  TrainState& state() { return state_; }
  const TrainState& state() const { return state_; }
  const TrainerOptions& options() const { return options_; }
  bool lead() const;
  int rank() const;
  int world_size() const;
  // Collective: the lead's `value` on every rank (one rank: `value`).
  bool agree(bool value);
  // Collective: the largest of every rank's `value`.
  int64_t max_over_ranks(int64_t value);
  void barrier();

  // This rank's optimizer (the inner one of a DistributedOptimizer); a
  // pipeline rank whose stages hold no parameters has none.
  bool has_optimizer() const;
  optim::Optimizer& optimizer();
  double lr() const;  // the first parameter group's; NaN without an optimizer
  // The LR schedule checkpoints save and resume loads (set by LRSchedule).
  void set_scheduler(optim::LRScheduler* scheduler) { scheduler_ = scheduler; }
  optim::LRScheduler* scheduler() const { return scheduler_; }
  // The DistributedModel every layout's state goes through (for Local and
  // DataParallel: one stage over a one-rank group, sharing the model's tensors).
  parallel::hybrid::DistributedModel& distributed_model();
  // Its DistributedOptimizer, once prepared (memory_summary() with ZeRO-1);
  // an error before.
  parallel::hybrid::DistributedOptimizer& distributed_optimizer();
  // DataParallel: its DistributedDataParallel (comm_stats()); null for the
  // other layouts.
  parallel::DistributedDataParallel* ddp();
  // The whole model (Local, DataParallel); for Pipeline and Hybrid the
  // gathered copy (collective).
  std::shared_ptr<nn::Sequential> whole_model();

  // Checkpoint plumbing (the Checkpoint callback's): whether this rank
  // writes (DataParallel: rank 0 only), the world a save is collective over,
  // what to save and where training stands.
  bool writes_checkpoints() const;
  std::shared_ptr<parallel::ProcessGroup> checkpoint_world() const;
  parallel::checkpoint::Stateful stateful();
  parallel::checkpoint::TrainingState training_state() const;
  void add_rank_state(RankState part);
  // Collective over the Trainer's ranks (Note [rank state]): every rank's
  // state file, on the lead; nothing elsewhere or without parts.
  std::vector<parallel::checkpoint::ExtraFile> rank_state_files();

 private:
  template <typename F>
  void each(F&& f);
  void ensure_prepared(const Tensor& sample);
  void load_pending();
  void load_checkpoint(const std::string& path);
  void begin_epoch();
  void end_epoch(io::DataLoader* valid, bool complete = true);
  void reduce(double* v, int n);
  // Throws "<what> failed: ..." on every rank when any rank's `error` is non-empty (collective).
  void agree_on(const std::string& what, const std::string& error);

  TrainerOptions options_;
  LossFn loss_;
  std::unique_ptr<detail::Runner> runner_;
  std::vector<std::shared_ptr<Callback>> callbacks_;
  std::vector<RankState> rank_states_;
  optim::LRScheduler* scheduler_ = nullptr;
  TrainState state_;
  std::string pending_resume_;
  double epoch_start_seconds_ = 0;
  bool prepared_callbacks_ = false;
};

}  // namespace weft::train
