// The GPT example on the library Trainer (contract in training.h).
#include "examples/gpt/training.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <iostream>
#include <optional>

#include "core/rng.h"
#include "examples/grid_flags.h"
#include "optim/lr_scheduler.h"
#include "parallel/data/sampler.h"
#include "parallel/pipe/trace.h"
#include "train/lr_schedule.h"

namespace weft::examples::gpt {
namespace {

namespace hy = parallel::hybrid;
namespace pp = parallel::pipe;

std::unique_ptr<optim::LRScheduler> schedule(optim::Optimizer& opt, const Options& o) {
  return std::make_unique<optim::LinearWarmupCosine>(opt, o.warmup, o.steps, o.warmup > 0 ? 1.0 / o.warmup : 1.0,
                                                     o.lr * o.min_lr_ratio);
}

}  // namespace

io::Batch Job::batch(int64_t step) const {
  Batch b = draw_batch(corpus->train, o->batch_size, o->model.context, o->seed, step, replica * local_rows,
                       (replica + 1) * local_rows);
  return {b.x, b.y};  // (rows, T) int64 each
}

std::unique_ptr<io::DataLoader> Job::validation() const {
  const int64_t n = o->eval_batches * o->batch_size;
  const Batch w = eval_windows(corpus->val, o->model.context, n);  // (n, T) each
  auto windows = std::make_shared<io::TensorDataset>(w.x, w.y);
  if (!hybrid) return std::make_unique<io::DataLoader>(windows, io::DataLoaderOptions{.batch_size = o->batch_size});
  auto sampler = std::make_shared<parallel::GlobalBatchSampler>(n, o->batch_size, dp, replica,
                                                                parallel::GlobalBatchSamplerOptions{.shuffle = false});
  return std::make_unique<io::DataLoader>(windows, io::DataLoaderOptions{.batch_size = local_rows}, sampler);
}

Job make_job(const Options& o, const Corpus& corpus, std::shared_ptr<parallel::ProcessGroup> world) {
  const std::optional<DType> autocast =
      o.amp == "bf16" ? std::optional<DType>(DType::BFloat16) : std::nullopt;  // --amp
  Job job{.o = &o, .corpus = &corpus, .layout = train::Local{.autocast = autocast}, .local_rows = o.batch_size};
  if (!world) return job;
  job.hybrid = true;
  job.world_rank = world->rank();
  job.dp = grid_dp(o.pp, o.dp, world->size());
  WEFT_CHECK(o.batch_size % job.dp == 0, "--batch-size ", o.batch_size, " does not divide among --dp ", job.dp,
             " replicas: give a multiple of ", job.dp);
  job.local_rows = o.batch_size / job.dp;
  WEFT_CHECK(job.local_rows >= o.chunks, "--batch-size ", o.batch_size, " over --dp ", job.dp, " replicas leaves ",
             job.local_rows, " rows per replica, fewer than the ", o.chunks, " micro-batches of --chunks");
  const int virtual_stages = virtual_stages_for(o.virtual_stages, o.schedule);  // zbv: its V's two
  hy::DistributedModelOptions dmo;
  dmo.pp = o.pp;
  dmo.dp = job.dp;
  dmo.pipe.chunks = o.chunks;
  dmo.pipe.schedule = pp::parse_schedule_kind(o.schedule);
  dmo.pipe.virtual_stages = virtual_stages;
  if (o.pp > 1) dmo.pipe.tied = tied_groups(o.model);  // pp 1: one process holds the true tie
  if (o.balance != "auto") dmo.balance = parse_balance(o.balance, "give auto or layers per stage, e.g. 3,3");
  dmo.optimizer_state_factor = 2;  // AdamW's exp_avg and exp_avg_sq
  dmo.shard_optimizer_state = o.zero;
  dmo.pipe.autocast = autocast;
  job.layout = train::Hybrid{.world = std::move(world), .options = dmo};
  return job;
}

std::unique_ptr<train::Trainer> make_trainer(Job& job) {
  const Options& o = *job.o;
  optim::AdamWOptions adamw;  // not an aggregate (AdamW's own default decay)
  adamw.lr = o.lr;
  adamw.beta2 = o.beta2;
  adamw.weight_decay = o.weight_decay;
  manual_seed(o.seed);
  auto t = std::make_unique<train::Trainer>(
      job.layout, make_gpt(o.model), lm_loss, train::adamw(adamw),
      train::TrainerOptions{.metric = train::Metric{}, .valid_name = "val", .clip_grad_norm = o.clip, .name = "gpt"});
  t->add<train::LRSchedule>([&o](optim::Optimizer& opt) { return schedule(opt, o); }, train::LRSchedule::Every::kStep);
  if (job.hybrid) job.replica = t->distributed_model().dp_rank();
  return t;
}

void prepare_trainer(train::Trainer& t, const Job& job) {
  const Options& o = *job.o;
  Tensor sample;  // world rank 0 measures the partition on its rows of the first batch
  if (job.hybrid && job.world_rank == 0) sample = job.batch(0).data;
  t.prepare(sample);
  std::cout << std::flush;
  if (!job.hybrid || !t.lead()) return;
  auto& dm = t.distributed_model();
  std::fprintf(stderr,
               "gpt: pp %d x dp %d on %d ranks, balance %s%s, schedule %s, %d micro-batches of a %lld-row replica "
               "batch (global %lld)%s\n",
               o.pp, job.dp, t.world_size(), join_ints(dm.balance()).c_str(),
               o.balance == "auto" ? (o.pp > 1 ? " (measured)" : " (one stage)") : " (given)",
               dm.pipe().schedule().name.c_str(), dm.pipe().options().chunks, static_cast<long long>(job.local_rows),
               static_cast<long long>(o.batch_size), o.zero ? ", ZeRO-1" : "");
  if (o.zero) std::fprintf(stderr, "gpt: %s\n", t.distributed_optimizer().memory_summary().c_str());
}

void follow_steps(train::Trainer& t, const Options& o) {
  if (!t.has_optimizer() || !t.scheduler()) return;
  optim::Optimizer& opt = t.optimizer();
  for (auto& g : opt.param_groups()) g.set_lr(o.lr);  // the schedule's base, as at the start of a run
  auto fresh = schedule(opt, o);
  for (int64_t k = 0; k < t.state().step; ++k) fresh->step();
  t.scheduler()->load_state_dict(fresh->state_dict());  // its values and the groups' lrs
}

void record_from(train::Trainer& t, int64_t end) {
  if (t.state().step >= end - kBubbleSteps) t.distributed_model().pipe().runner().set_record_trace(true);
}

void sample_bubble(train::Trainer& t, const Options& o, std::vector<double>& bubbles) {
  auto& runner = t.distributed_model().pipe().runner();
  if (!runner.options().record_trace) return;
  auto& dm = t.distributed_model();
  bubbles.push_back(pp::measured_bubble(pp::gather_trace(*dm.grid().pipeline(), runner.last_trace()), o.pp));
}

std::string pipeline_summary(train::Trainer& t, const Options& o, const std::vector<double>& bubbles) {
  auto& dm = t.distributed_model();
  double mean = 0, lo = 1, hi = 0;
  for (double b : bubbles) {
    mean += b / static_cast<double>(bubbles.size());
    lo = std::min(lo, b);
    hi = std::max(hi, b);
  }
  const int chunks = dm.pipe().options().chunks;
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "pp %d x dp %d (%s, %d micro-batches of %lld sequences per replica%s): bubble %.1f%% measured (mean "
                "of the last %zu steps' timelines, %.1f%% to %.1f%%; idle share of F/B/W, gradient averages included)",
                o.pp, dm.grid().dp(), dm.pipe().schedule().name.c_str(), chunks,
                static_cast<long long>(o.batch_size / dm.grid().dp() / chunks), o.zero ? ", ZeRO-1" : "", 100.0 * mean,
                bubbles.size(), 100.0 * (bubbles.empty() ? 0 : lo), 100.0 * hi);
  std::string out = buf;
  if (!dm.profile().empty()) {  // measured partitioning: the plan's simulated bubble
    std::snprintf(buf, sizeof(buf), ", %.1f%% predicted by the partition plan", 100.0 * dm.plan().bubble_fraction);
    out += buf;
  }
  return out;
}

}  // namespace weft::examples::gpt
