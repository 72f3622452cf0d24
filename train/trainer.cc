// The Trainer's loop, state and checkpoint plumbing (train/trainer.h).
#include "train/trainer.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <optional>

#include "core/autograd_meta.h"
#include "core/error.h"
#include "core/ops.h"
#include "core/rng.h"
#include "parallel/checkpoint/commit.h"
#include "parallel/checkpoint/load.h"
#include "parallel/comm/collectives.h"
#include "train/resume.h"
#include "train/runner.h"

namespace weft::train {
namespace {

namespace ck = parallel::checkpoint;

constexpr const char* kHistoryKey = "weft.train.history.";
constexpr const char* kPartialKey = "weft.train.partial";

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string format_partial(const TrainState& s) {
  char buf[160];
  std::snprintf(buf, sizeof(buf), "%.17g %.17g %.17g %.17g", s.loss_sum, s.metric_sum, s.rows, s.seconds);
  return buf;
}

}  // namespace

Metric accuracy() {
  return {"accuracy", "acc", [](const Tensor& output, const Tensor& target) {
            return static_cast<double>((argmax(output.detach(), 1) == target).sum().item<int64_t>());
          }};
}

Trainer::Trainer(Layout layout, std::shared_ptr<nn::Sequential> model, LossFn loss, OptimizerFactory optimizer,
                 TrainerOptions options)
    : options_(std::move(options)), loss_(loss) {
  runner_ =
      detail::make_runner(layout, std::move(model), std::move(loss), std::move(optimizer), options_.clip_grad_norm);
}

Trainer::~Trainer() = default;

void Trainer::add(std::shared_ptr<Callback> callback) {
  WEFT_CHECK(callback != nullptr, "Trainer::add: null callback");
  // Stable by order(): after every callback of the same or lower order.
  auto at = std::upper_bound(callbacks_.begin(), callbacks_.end(), callback,
                             [](const auto& a, const auto& b) { return a->order() < b->order(); });
  Callback& c = **callbacks_.insert(at, callback);
  if (prepared_callbacks_) c.on_prepared(*this);
}

template <typename F>
void Trainer::each(F&& f) {
  for (auto& c : callbacks_) f(*c);
}

bool Trainer::prepared() const { return runner_->prepared(); }
bool Trainer::lead() const { return runner_->rank() == 0; }
int Trainer::rank() const { return runner_->rank(); }
int Trainer::world_size() const { return runner_->world_size(); }

void Trainer::prepare(const Tensor& sample) {
  if (!runner_->prepared()) runner_->prepare(sample);
  if (!prepared_callbacks_) {
    prepared_callbacks_ = true;
    each([&](Callback& c) { c.on_prepared(*this); });
  }
  load_pending();
}

void Trainer::ensure_prepared(const Tensor& sample) {
  if (!prepared_callbacks_ || !runner_->prepared() || !pending_resume_.empty()) prepare(sample);
}

bool Trainer::agree(bool value) {
  parallel::ProcessGroup* g = runner_->metrics_group();
  if (!g) return value;
  Tensor t = full({1}, value ? 1.0 : 0.0, DType::Float64);
  g->broadcast(t, {0})->wait();
  return t.item<double>() != 0;
}

int64_t Trainer::max_over_ranks(int64_t value) {
  parallel::ProcessGroup* g = runner_->metrics_group();
  if (!g) return value;
  Tensor t = full({1}, value, DType::Int64);
  g->allreduce(t, {parallel::ReduceOp::Max})->wait();
  return t.item<int64_t>();
}

void Trainer::barrier() {
  if (parallel::ProcessGroup* g = runner_->metrics_group()) g->barrier()->wait();
}

void Trainer::reduce(double* v, int n) {
  parallel::ProcessGroup* g = runner_->metrics_group();
  if (!g) return;
  Tensor t = tensor<double>(std::vector<double>(v, v + n), {n});
  g->allreduce(t)->wait();
  for (int i = 0; i < n; ++i) v[i] = t.data_ptr<double>()[i];
}

bool Trainer::has_optimizer() const { return runner_->prepared() && runner_->dopt().has_parameters(); }

optim::Optimizer& Trainer::optimizer() {
  WEFT_CHECK(has_optimizer(), "Trainer::optimizer: rank ", rank(),
             " has no optimizer (not prepared yet, or its pipeline stages hold no parameters)");
  return runner_->dopt().inner();
}

double Trainer::lr() const {
  if (!has_optimizer()) return kNotMeasured;
  return runner_->dopt().inner().param_groups().front().lr();
}

parallel::hybrid::DistributedModel& Trainer::distributed_model() { return runner_->dm(); }

parallel::DistributedDataParallel* Trainer::ddp() { return runner_->ddp(); }

parallel::hybrid::DistributedOptimizer& Trainer::distributed_optimizer() {
  WEFT_CHECK(runner_->prepared(),
             "Trainer::distributed_optimizer: the trainer is not prepared yet (it is after "
             "prepare() or the first fit)");
  return runner_->dopt();
}
std::shared_ptr<nn::Sequential> Trainer::whole_model() { return runner_->whole_model(); }
bool Trainer::writes_checkpoints() const { return runner_->writes_checkpoints(); }
std::shared_ptr<parallel::ProcessGroup> Trainer::checkpoint_world() const { return runner_->dm_world(); }

parallel::checkpoint::Stateful Trainer::stateful() {
  return {&runner_->dm(), &runner_->dopt(), has_optimizer() ? scheduler_ : nullptr};
}

parallel::checkpoint::TrainingState Trainer::training_state() const {
  ck::TrainingState ts{state_.step, state_.epoch, state_.batch, {}};
  for (const auto& r : state_.history) ts.metadata[kHistoryKey + std::to_string(r.epoch)] = r.encode();
  if (state_.batch > 0) ts.metadata[kPartialKey] = format_partial(state_);
  return ts;
}

void Trainer::add_rank_state(RankState part) {
  bool plain = !part.name.empty();
  for (char c : part.name) plain = plain && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
  WEFT_CHECK(plain, "Trainer::add_rank_state: the name '", part.name, "' is not plain (letters, digits, '_')");
  WEFT_CHECK(part.save && part.load, "Trainer::add_rank_state: '", part.name, "' needs both save and load");
  for (const RankState& p : rank_states_)
    WEFT_CHECK(p.name != part.name, "Trainer::add_rank_state: '", part.name, "' is registered already");
  rank_states_.push_back(std::move(part));
}

std::vector<ck::ExtraFile> Trainer::rank_state_files() {
  if (rank_states_.empty()) return {};
  return detail::gather_rank_states(rank_states_, runner_->metrics_group());
}

void Trainer::agree_on(const std::string& what, const std::string& error) {
  if (parallel::ProcessGroup* g = runner_->metrics_group()) return parallel::agree(*g, what, error);
  WEFT_CHECK(error.empty(), what, " failed: ", error);
}

// ---- resume ----

void Trainer::resume(const std::string& path) {
  (void)locate_checkpoint(path);  // clear errors now, on every rank
  pending_resume_ = path;
  if (runner_->prepared() && prepared_callbacks_) load_pending();
}

void Trainer::load_pending() {
  if (pending_resume_.empty() || !runner_->prepared()) return;
  const std::string path = std::move(pending_resume_);
  pending_resume_.clear();
  load_checkpoint(path);
}

void Trainer::load_checkpoint(const std::string& path) {
  CheckpointLocation loc = locate_checkpoint(path);
  state_ = TrainState{};
  std::optional<io::SafetensorsFile> mine;  // Note [rank state]: read and checked before anything is loaded
  if (!rank_states_.empty()) {
    std::string error;
    try {
      WEFT_CHECK(loc.kind == CheckpointLocation::Kind::kPartitioned, "resume: '", loc.path,
                 "' is a single-file checkpoint, which holds no per-rank state; resume it without the per-rank "
                 "state's owner, or from a checkpoint directory");
      mine = detail::read_rank_state(loc.path, rank_states_, rank(), world_size());
    } catch (const std::exception& e) {
      error = ck::error_text(e);
    }
    agree_on("resume from '" + loc.path + "'", error);
  }
  if (loc.kind == CheckpointLocation::Kind::kPartitioned) {
    ck::TrainingState ts = ck::load(loc.path, stateful());
    state_.step = ts.step;
    state_.epoch = ts.epoch;
    state_.batch = ts.batch;
    for (int64_t e = 1;; ++e) {
      auto it = ts.metadata.find(kHistoryKey + std::to_string(e));
      if (it == ts.metadata.end()) break;
      state_.history.push_back(EpochRecord::decode(it->second));
    }
    if (auto it = ts.metadata.find(kPartialKey); it != ts.metadata.end() && state_.batch > 0) {
      WEFT_CHECK(std::sscanf(it->second.c_str(), "%lf %lf %lf %lf", &state_.loss_sum, &state_.metric_sum, &state_.rows,
                             &state_.seconds) == 4,
                 "resume: checkpoint '", loc.path, "' has a malformed ", kPartialKey, " entry '", it->second, "'");
    }
  } else {
    io::CheckpointContents& c = *loc.contents;
    nn::StateDict sd;
    for (auto& [k, v] : c.model) sd.insert(k, v);
    // Strict for this rank's parameters and buffers; with one rank every key must be used.
    const nn::Module::LoadResult loaded = runner_->dm().load_state_dict(sd, /*strict=*/true);
    if (runner_->dm_world()->size() == 1 && !loaded.unexpected_keys.empty()) {
      std::string keys;
      for (const auto& k : loaded.unexpected_keys) keys += (keys.empty() ? "" : ", ") + k;
      WEFT_ERROR("resume: checkpoint '", loc.path, "' does not match the model: unexpected keys [", keys, "]");
    }
    if (has_optimizer() || !c.optimizer.empty())
      runner_->dopt().load_state_dict(optimizer_state_by_name(c.optimizer, runner_->param_names(), loc.path));
    if (scheduler_ && has_optimizer() && !c.scheduler.empty()) scheduler_->load_state_dict(c.scheduler);
    set_rng_state(c.rng);
    state_.step = c.step;
    state_.epoch = c.epoch;
    for (int64_t e = 1; e <= c.epoch; ++e) {
      auto it = c.metadata.find("history." + std::to_string(e));
      if (it != c.metadata.end()) state_.history.push_back(EpochRecord::decode_legacy(e, it->second));
    }
  }
  if (mine) {
    std::string error;
    try {
      detail::load_rank_state(rank_states_, *mine);
    } catch (const std::exception& e) {
      error = ck::error_text(e);
    }
    agree_on("resume from '" + loc.path + "'", error);
  }
  state_.resumed_from = loc.path;
  if (lead())
    std::cerr << options_.name << ": resumed from "
              << (loc.kind == CheckpointLocation::Kind::kPartitioned ? "partitioned checkpoint directory "
                                                                     : "single-file checkpoint ")
              << loc.path << " (step " << state_.step << ", epoch " << state_.epoch
              << (state_.batch > 0 ? ", batch " + std::to_string(state_.batch) : std::string()) << ")\n";
}

// ---- the loop ----

double Trainer::train_step(const io::Batch& batch) {
  detail::StepResult r = runner_->train_step(batch);
  ++state_.step;
  double sums[3] = {0, 0, 0};
  if (r.scored) {
    sums[0] = r.loss * r.rows;
    sums[1] = options_.metric ? options_.metric.sum(r.output, r.target) : 0;
    sums[2] = r.rows;
  }
  reduce(sums, 3);
  state_.loss = sums[2] > 0 ? sums[0] / sums[2] : r.loss;
  state_.loss_sum += sums[0];
  state_.metric_sum += sums[1];
  state_.rows += sums[2];
  return state_.loss;
}

EvalResult Trainer::evaluate(io::DataLoader& loader) {
  ensure_prepared(Tensor());
  runner_->set_training(false);
  double sums[3] = {0, 0, 0};
  const int64_t n = loader.num_batches();
  int64_t b = 0;
  for (auto& batch : loader) {
    ++b;
    if (runner_->skip(batch, b == n, /*training=*/false)) continue;
    detail::StepResult r = runner_->eval_step(batch);
    if (!r.scored) continue;
    sums[0] += r.loss * r.rows;
    if (options_.metric) sums[1] += options_.metric.sum(r.output, r.target);
    sums[2] += r.rows;
  }
  runner_->set_training(true);
  reduce(sums, 3);
  EvalResult e;
  e.rows = sums[2];
  if (sums[2] > 0) {
    e.loss = sums[0] / sums[2];
    if (options_.metric) e.metric = sums[1] / sums[2];
  }
  return e;
}

void Trainer::begin_epoch() {
  if (state_.batch == 0) {
    state_.loss_sum = state_.metric_sum = state_.rows = state_.seconds = 0;
  }
  epoch_start_seconds_ = now_seconds() - state_.seconds;
  runner_->set_training(true);
  each([&](Callback& c) { c.on_epoch_begin(*this); });
}

void Trainer::end_epoch(io::DataLoader* valid, bool complete) {
  state_.seconds = now_seconds() - epoch_start_seconds_;
  EpochRecord r;
  r.epoch = state_.epoch + 1;
  r.step = state_.step;
  r.train_loss = state_.running_loss();
  if (options_.metric) r.train_metric = state_.running_metric();
  r.lr = lr();
  if (runner_->metrics_group()) {  // the lead's, on every rank (a pipeline rank may hold no optimizer)
    Tensor t = full({1}, r.lr, DType::Float64);
    runner_->metrics_group()->broadcast(t, {0})->wait();
    r.lr = t.item<double>();
  }
  r.seconds = state_.seconds;
  r.samples_per_second = state_.seconds > 0 ? state_.rows / state_.seconds : 0;
  if (valid) {
    each([&](Callback& c) { c.on_evaluate_begin(*this); });
    state_.last_eval = evaluate(*valid);
    each([&](Callback& c) { c.on_evaluate_end(*this); });
    r.valid_loss = state_.last_eval.loss;
    r.valid_metric = state_.last_eval.metric;
  }
  state_.history.push_back(r);
  if (complete) {
    ++state_.epoch;
    state_.batch = 0;
  }  // else Note [a period cut short]: the run stays within the period, its sums kept
  each([&](Callback& c) { c.on_epoch_end(*this); });
}

void Trainer::fit(io::DataLoader& train, io::DataLoader* valid, int64_t epochs) {
  WEFT_CHECK(epochs >= 0, "Trainer::fit: epochs must be >= 0, got ", epochs);
  // every rank's loader has the same number of batches (DistributedSampler pads), so all refuse together
  WEFT_CHECK(state_.epoch >= epochs || train.num_batches() > 0,
             "Trainer::fit: the training loader has no batches (its dataset has ", train.dataset().size(),
             " examples, batch_size ", train.options().batch_size, train.options().drop_last ? ", drop_last" : "",
             "): nothing to train");
  if (!runner_->prepared()) {  // a sample for automatic partitioning
    train.set_epoch(state_.epoch);
    std::optional<io::Batch> first = train.next();
    train.reset();
    WEFT_CHECK(first.has_value(), "Trainer::fit: the training loader has no batches");
    ensure_prepared(first->data);
  } else {
    ensure_prepared(Tensor());
  }
  state_.epochs = epochs;
  state_.stop = false;
  each([&](Callback& c) { c.on_fit_begin(*this); });
  while (state_.epoch < epochs && !state_.stop) {
    train.set_epoch(state_.epoch);
    state_.batches_per_epoch = train.num_batches();
    const int64_t done = state_.batch;  // resumed mid-epoch: these were trained
    begin_epoch();
    int64_t b = 0;
    for (auto& batch : train) {
      if (++b <= done) continue;
      if (!runner_->skip(batch, b == state_.batches_per_epoch, /*training=*/true)) {
        each([&](Callback& c) { c.on_step_begin(*this); });
        train_step(batch);
        state_.batch = b;
        state_.seconds = now_seconds() - epoch_start_seconds_;
        each([&](Callback& c) { c.on_step_end(*this); });
      } else {
        state_.batch = b;
      }
      if (state_.stop) break;
    }
    if (state_.stop && state_.batch < state_.batches_per_epoch) break;  // stopped mid-epoch
    end_epoch(valid);
  }
  each([&](Callback& c) { c.on_fit_end(*this); });
}

void Trainer::fit_steps(const std::function<io::Batch(int64_t step)>& batch_at, int64_t max_steps,
                        const StepsOptions& o) {
  WEFT_CHECK(max_steps >= 0 && o.eval_every >= 0, "Trainer::fit_steps: max_steps (", max_steps, ") and eval_every (",
             o.eval_every, ") must be >= 0");
  const int64_t period = o.eval_every > 0 ? o.eval_every : std::max<int64_t>(max_steps, 1);
  if (!runner_->prepared() && state_.step < max_steps) ensure_prepared(batch_at(state_.step).data);
  else ensure_prepared(Tensor());
  state_.epochs = (max_steps + period - 1) / period;
  state_.batches_per_epoch = period;
  state_.stop = false;
  // Note [a period cut short]: a run that ended (and saved) within a period recorded the period so far;
  // training on, the period's record is made again at its end, so that earlier one goes.
  if (state_.step < max_steps && state_.step % period != 0 && !state_.history.empty() &&
      state_.history.back().epoch == state_.step / period + 1 && state_.history.back().step == state_.step)
    state_.history.pop_back();
  each([&](Callback& c) { c.on_fit_begin(*this); });
  while (state_.step < max_steps && !state_.stop) {
    state_.epoch = state_.step / period;
    state_.batch = state_.step % period;
    begin_epoch();
    const int64_t end = std::min(max_steps, (state_.epoch + 1) * period);
    while (state_.step < end && !state_.stop) {
      each([&](Callback& c) { c.on_step_begin(*this); });
      train_step(batch_at(state_.step));
      state_.batch = state_.step - state_.epoch * period;
      state_.seconds = now_seconds() - epoch_start_seconds_;
      each([&](Callback& c) { c.on_step_end(*this); });
    }
    if (state_.step < end) break;  // stopped mid-period
    end_epoch(o.valid, /*complete=*/state_.step % period == 0);
  }
  each([&](Callback& c) { c.on_fit_end(*this); });
}

}  // namespace weft::train
