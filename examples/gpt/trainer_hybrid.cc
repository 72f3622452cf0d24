// Training as pipeline x data parallel through DistributedModel (contract in
// trainer.h). Every rank builds the whole model from --seed (one process's
// tied head shares the embedding's tensor; a stage holding the head in
// another process holds that process's copy, so with --pp > 1 the pair is
// declared in PipeOptions::tied and its gradients are summed across the
// stages), partitions it (--balance, or measured on world rank 0, which
// prints the table), and trains its replica's rows of each global batch:
// replica d takes rows [d B / dp, (d + 1) B / dp). The gradient's global norm
// is clipped by parallel/hybrid/clip_grad.h (in the shard optimizer with
// --zero).
#include <algorithm>
#include <array>
#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>

#include "core/autograd_meta.h"
#include "core/nn_ops.h"
#include "core/rng.h"
#include "examples/gpt/trainer.h"
#include "examples/grid_flags.h"
#include "optim/adam.h"
#include "optim/lr_scheduler.h"
#include "parallel/checkpoint/checkpointer.h"
#include "parallel/hybrid/clip_grad.h"
#include "parallel/hybrid/distributed_model.h"
#include "parallel/hybrid/distributed_optimizer.h"
#include "parallel/pipe/trace.h"

namespace weft::examples::gpt {
namespace {

namespace hy = parallel::hybrid;
namespace pp = parallel::pipe;

class HybridTrainer : public Trainer {
 public:
  HybridTrainer(const Options& o, const Corpus& c, std::shared_ptr<parallel::ProcessGroup> world)
      : o_(o), corpus_(c), world_(std::move(world)) {
    const int n = world_->size();
    dp_ = grid_dp(o.pp, o.dp, n);
    WEFT_CHECK(o.batch_size % dp_ == 0, "--batch-size ", o.batch_size, " does not divide among --dp ", dp_,
               " replicas: give a multiple of ", dp_);
    local_ = o.batch_size / dp_;
    WEFT_CHECK(local_ >= o.chunks, "--batch-size ", o.batch_size, " over --dp ", dp_, " replicas leaves ", local_,
               " rows per replica, fewer than the ", o.chunks, " micro-batches of --chunks");
    const int virtual_stages = o.virtual_stages > 0 ? o.virtual_stages : (o.schedule == "interleaved" ? 2 : 1);
    WEFT_CHECK(o.balance != "auto" || virtual_stages == 1, "--balance auto places one stage per rank; with ",
               virtual_stages, " stages per rank (--schedule ", o.schedule, ", --virtual) give --balance A,B,... (",
               o.pp * virtual_stages, " entries)");
    manual_seed(o.seed);
    auto model = make_gpt(o.model);
    hy::DistributedModelOptions dmo;
    dmo.pp = o.pp;
    dmo.dp = dp_;
    dmo.pipe.chunks = o.chunks;
    dmo.pipe.schedule = pp::parse_schedule_kind(o.schedule);
    dmo.pipe.virtual_stages = virtual_stages;
    if (o.pp > 1) dmo.pipe.tied = tied_groups(o.model);  // pp 1: one process holds the true tie
    if (o.balance != "auto") dmo.balance = parse_balance(o.balance, "give auto or layers per stage, e.g. 3,3");
    dmo.optimizer_state_factor = 2;  // AdamW's exp_avg and exp_avg_sq
    dmo.shard_optimizer_state = o.zero;
    dm_ = std::make_unique<hy::DistributedModel>(model, world_, dmo);
    if (o.clip > 0) clipper_ = std::make_unique<hy::GlobalNormClipper>(*dm_, o.clip);
    optim::AdamWOptions a;
    a.lr = o.lr;
    a.beta2 = o.beta2;
    a.weight_decay = o.weight_decay;
    dopt_ = std::make_unique<hy::DistributedOptimizer>(
        *dm_, [this, a](const optim::NamedParameters& p) -> std::unique_ptr<optim::Optimizer> {
          if (o_.zero && clipper_)
            return std::make_unique<hy::ClipBeforeStep<optim::AdamW>>(
                [this](optim::Optimizer& s) { clipper_->clip_shards(s); }, p, a);
          return std::make_unique<optim::AdamW>(p, a);
        });
    // Partition now, so the table comes before the first step: world rank 0 measures on its batch.
    Tensor sample;
    if (world_->rank() == 0) sample = draw_batch(c.train, o.batch_size, o.model.context, o.seed, 0, 0, local_).x;
    dm_->partition(sample);
    std::cout << std::flush;
    sched_ = std::make_unique<optim::LinearWarmupCosine>(dopt_->inner(), o.warmup, o.steps,
                                                         o.warmup > 0 ? 1.0 / o.warmup : 1.0, o.lr * o.min_lr_ratio);
    if (lead())
      std::fprintf(stderr,
                   "gpt: pp %d x dp %d on %d ranks, balance %s%s, schedule %s, %d micro-batches of a %lld-row "
                   "replica batch (global %lld)%s\n",
                   o.pp, dp_, n, join_ints(dm_->balance()).c_str(),
                   o.balance == "auto" ? (o.pp > 1 ? " (measured)" : " (one stage)") : " (given)",
                   dm_->pipe().schedule().name.c_str(), dm_->pipe().options().chunks, static_cast<long long>(local_),
                   static_cast<long long>(o.batch_size), o.zero ? ", ZeRO-1" : "");
    if (lead() && o.zero) std::fprintf(stderr, "gpt: %s\n", dopt_->memory_summary().c_str());
  }

  bool lead() const override { return world_->rank() == 0; }

  double train_step(int64_t k) override {
    const int64_t d = dm_->dp_rank();
    Batch b = draw_batch(corpus_.train, o_.batch_size, o_.model.context, o_.seed, k, d * local_, (d + 1) * local_);
    dopt_->zero_grad();
    const double loss = dm_->step(b.x, b.y, lm_loss);  // mean over the global batch, on every rank
    if (clipper_ && !o_.zero) clipper_->clip();
    dopt_->step();
    sched_->step();
    return loss;
  }

  double validate(const Batch& w) override {
    for (auto& s : dm_->local_modules()) s->eval();
    double sum = 0, count = 0;
    const int64_t rows = w.x.size(0), B = o_.batch_size, d = dm_->dp_rank();
    for (int64_t i = 0; i < rows; i += B) {
      Tensor logits = dm_->forward(w.x.narrow(0, i + d * local_, local_));  // (b, T, V) on the last stage's ranks
      if (!logits.defined()) continue;
      Tensor y = w.y.narrow(0, i + d * local_, local_);
      sum += cross_entropy(logits.reshape({-1, logits.size(-1)}), y.reshape({-1}), Reduction::Sum).item<double>();
      count += static_cast<double>(y.numel());
    }
    for (auto& s : dm_->local_modules()) s->train();
    Tensor t = tensor<double>({sum, count}, {2});
    world_->allreduce(t)->wait();
    return t.data_ptr<double>()[0] / t.data_ptr<double>()[1];
  }

  double lr() override { return dopt_->inner().param_groups()[0].lr(); }

  void save(const std::string& root, int64_t step, const std::vector<EvalRecord>& history) override {
    parallel::checkpoint::save(root, {dm_.get(), dopt_.get(), sched_.get()},
                               {step, 0, step, gpt_metadata(o_.model, history)},
                               {parallel::checkpoint::Kind::kPartial, o_.keep_last, false});
  }

  int64_t load(const std::string& path) override {
    return load_run(path, {dm_.get(), dopt_.get(), sched_.get()}, o_.model).step;
  }

  nn::Sequential& whole_model() override {
    whole_ = dm_->gather_whole_model();
    return *whole_;
  }

  void before_last_step() override { dm_->pipe().runner().set_record_trace(true); }

  std::string summary() override {
    // The last step's measured timeline: per pipeline rank, the share of the step not spent in F, B or W.
    std::vector<pp::TraceEvent> events = pp::gather_trace(*dm_->grid().pipeline(), dm_->pipe().runner().last_trace());
    int64_t first = INT64_MAX, last = INT64_MIN, busy = 0;
    for (const auto& e : events) {
      first = std::min(first, e.start_ns);
      last = std::max(last, e.start_ns + e.duration_ns);
      if (pp::is_compute(e.action.kind)) busy += e.duration_ns;
    }
    const double span = static_cast<double>(last - first) * o_.pp;
    const double measured = events.empty() || span <= 0 ? 0 : 1.0 - static_cast<double>(busy) / span;
    char buf[512];
    std::snprintf(buf, sizeof(buf),
                  "pp %d x dp %d (%s, %d micro-batches of %lld sequences per replica%s): bubble %.1f%% measured on the "
                  "last step (idle share of its F/B/W timeline)",
                  o_.pp, dp_, dm_->pipe().schedule().name.c_str(), dm_->pipe().options().chunks,
                  static_cast<long long>(local_ / dm_->pipe().options().chunks), o_.zero ? ", ZeRO-1" : "",
                  100.0 * measured);
    std::string out = buf;
    if (!dm_->profile().empty()) {  // measured partitioning: the plan's simulated bubble
      std::snprintf(buf, sizeof(buf), ", %.1f%% predicted by the partition plan", 100.0 * dm_->plan().bubble_fraction);
      out += buf;
    }
    return out;
  }

  void barrier() override { world_->barrier()->wait(); }

 private:
  const Options& o_;
  const Corpus& corpus_;
  std::shared_ptr<parallel::ProcessGroup> world_;
  int dp_ = 1;
  int64_t local_ = 0;
  std::unique_ptr<hy::DistributedModel> dm_;
  std::unique_ptr<hy::GlobalNormClipper> clipper_;
  std::unique_ptr<hy::DistributedOptimizer> dopt_;
  std::unique_ptr<optim::LinearWarmupCosine> sched_;
  std::shared_ptr<nn::Sequential> whole_;
};

}  // namespace

std::unique_ptr<Trainer> make_hybrid_trainer(const Options& o, const Corpus& corpus,
                                             std::shared_ptr<parallel::ProcessGroup> world) {
  return std::make_unique<HybridTrainer>(o, corpus, std::move(world));
}

}  // namespace weft::examples::gpt
