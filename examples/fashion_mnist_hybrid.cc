// fashion_mnist_hybrid: the Fashion-MNIST example (examples/fashion_mnist.cc)
// trained with pipeline x data parallelism on the library's training loop
// (train::Trainer, train::Hybrid layout: parallel/hybrid/distributed_model.h).
//
//   mpirun --allow-run-as-root --oversubscribe -np 4 bazel-bin/examples/fashion_mnist_hybrid --pp 2 --dp 2
//
// --pp stages x --dp replicas = the world (rank = replica * pp + stage).
// --balance auto: world rank 0 measures every layer on its first batch, every
// rank plans the same balance and rank 0 prints the partition table first.
// Every grid trains on the same global batches (GlobalBatchSampler: replica d
// takes its slice of global batch k of the single-process (seed, epoch)
// shuffle), so grids train alike to float summation order. The Trainer reduces
// losses and accuracies: the progress bar shows the true ones. --zero: ZeRO-1.
// --save DIR: partitioned checkpoints DIR/step-<step> each epoch
// (--full-checkpoint: whole, by rank 0; --async-save; --keep-last N); --resume
// (any grid): DIR's latest, DIR itself or an older single-file checkpoint.
// --chart PATH (and --trace PATH): the last step's schedule chart and
// measured bubble, examples/schedule_chart_callback.h.
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "core/parallel.h"
#include "examples/fashion_run.h"
#include "examples/grid_flags.h"
#include "examples/models.h"
#include "examples/rank_data.h"
#include "examples/schedule_chart_callback.h"
#include "parallel/comm/mpi/context.h"
#include "parallel/comm/mpi/process_group_mpi.h"
#include "parallel/data/sampler.h"

namespace weft::examples {
namespace {

namespace pp = parallel::pipe;
namespace ck = parallel::checkpoint;

// The shared training flags (batch_size is the global batch; --save/--resume
// registered here: checkpoint directories) and this example's own.
struct Flags : TrainFlags, GridFlags {
  bool zero = false;
  bool async_save = false;
  bool full_checkpoint = false;
  int64_t stop_after = 0;
  std::string chart;  // empty: none
  std::string trace;
};

std::optional<Flags> parse(int argc, char** argv) {
  Flags f;
  FlagParser p("usage: mpirun -np N fashion_mnist_hybrid --pp P [--dp D] [flags]   (P x D = N)");
  add_train_flags(p, f,
                  {.program = "fashion_mnist_hybrid",
                   .batch_size_help = "global batch size, split across the --dp replicas",
                   .multi_process = true,
                   .checkpoints = false});  // --save/--resume below: checkpoint directories
  add_grid_flags(p, f);
  p.add_switch("--zero", &f.zero, true, "shard the optimizer state over the --dp replicas (ZeRO-1)")
      .add("--save DIR", &f.save,
           "write a partitioned checkpoint into DIR/step-<step> after every epoch (every rank its part)")
      .add("--resume DIR", &f.resume, "continue from the latest checkpoint in DIR (any --pp, --dp, --zero)");
  add_keep_last_flag(p, &f.keep_last);
  add_save_every_minutes_flag(p, &f.save_every_minutes);
  p.add_switch("--async-save", &f.async_save, true, "write checkpoints in the background while training goes on")
      .add_switch("--full-checkpoint", &f.full_checkpoint, true,
                  "rank 0 writes the whole model in one file (model.safetensors) instead of each stage its part");
  add_stop_after_flag(p, &f.stop_after);
  p.add("--chart PATH", &f.chart,
        "the last step's schedule chart, simulated from its measured times, with the measured bubble (gradient "
        "averages included)")
      .add("--trace PATH", &f.trace, "the last step's measured timeline (Chrome-trace JSON; with --chart)");
  if (!p.parse(argc, argv, std::cout)) return std::nullopt;
  resolve_train_flags(f, {&f.chart, &f.trace});
  if (!f.chart.empty() && f.trace.empty()) f.trace = f.chart + ".trace.json";
  check_grid_flags(f);
  return f;
}

int run(const Flags& f) {
  parallel::DistributedContext ctx;
  const int dp = grid_dp(f.pp, f.dp, ctx.size());
  WEFT_CHECK(f.batch_size % dp == 0, "--batch-size ", f.batch_size, " does not divide among --dp ", dp,
             " replicas: give a multiple of ", dp);
  WEFT_CHECK(f.batch_size / dp >= f.chunks, "--batch-size ", f.batch_size, " over --dp ", dp, " replicas leaves ",
             f.batch_size / dp, " rows per replica, fewer than the ", f.chunks, " micro-batches of --chunks");
  set_num_threads(resolve_threads(f.threads, parallel::local_size()));
  const FashionData data = load_fashion(f);
  const int64_t n_train = data.train->size(), n_test = data.test->size();

  manual_seed(f.seed);
  std::shared_ptr<nn::Sequential> model = f.model == "cnn" ? fashion_cnn() : fashion_mlp();
  const int64_t layers = static_cast<int64_t>(model->size());
  parallel::hybrid::DistributedModelOptions o{
      .pp = f.pp,
      .dp = dp,
      .balance = parse_balance(f.balance, "give auto or layers per stage, e.g. 6,4"),  // auto: {}, measured
      .pipe = {.chunks = f.chunks,
               .schedule = pp::parse_schedule_kind(f.schedule),
               .virtual_stages = virtual_stages_for(f.virtual_stages, f.schedule)},
      .optimizer_state_factor = f.momentum != 0 ? (f.zero ? 1.0 / dp : 1.0) : 0,  // SGD's momentum buffer
      .shard_optimizer_state = f.zero};
  train::Trainer trainer(train::Hybrid{.world = ctx.world_ptr(), .options = o}, model, cross_entropy_loss(),
                         optimizer_from(f), {.valid_name = "test", .name = "fashion_mnist_hybrid"});
  model.reset();
  parallel::hybrid::DistributedModel& dm = trainer.distributed_model();
  if (!f.chart.empty()) trainer.add<ScheduleChart>(f.chart, f.trace);
  add_run_callbacks(trainer, f,
                    {.title = "weft pipeline x data parallel (pp " + std::to_string(f.pp) + " x dp " +
                              std::to_string(dp) + ", " + f.schedule + "): Fashion-MNIST " + f.model,
                     .stop_after = f.stop_after,
                     .checkpoint = {.keep_last = f.keep_last,
                                    .async = f.async_save,
                                    .kind = f.full_checkpoint ? ck::Kind::kFull : ck::Kind::kPartial}});

  // This replica's slices of every global batch and of the test set.
  auto sampler = std::make_shared<parallel::GlobalBatchSampler>(
      n_train, f.batch_size, dp, dm.dp_rank(), parallel::GlobalBatchSamplerOptions{.shuffle = true, .seed = f.seed});
  io::DataLoader train(data.train, {.batch_size = sampler->local_batch(), .seed = f.seed, .num_workers = f.workers},
                       sampler, normalize);
  io::DataLoader test(slice_rows(*data.test, n_test * dm.dp_rank() / dp, n_test * (dm.dp_rank() + 1) / dp),
                      {.batch_size = 1000, .num_workers = f.workers}, normalize);

  if (!f.resume.empty()) trainer.resume(f.resume);
  prepare_on_first_batch(trainer, train);  // the partition table comes first
  if (trainer.lead())
    std::cerr << "fashion_mnist_hybrid: " << f.model << " (" << layers << " layers) as pp " << f.pp << " x dp " << dp
              << " on " << ctx.size() << " ranks, balance " << join_ints(dm.balance())
              << (f.balance == kBalanceAuto ? (f.pp > 1 ? " (measured)" : " (one stage)") : " (given)") << ", schedule "
              << dm.pipe().schedule().name << ", " << f.chunks << " micro-batches of a " << sampler->local_batch()
              << "-image replica batch (global " << f.batch_size << "), " << n_train << " training / " << n_test
              << " test images, " << get_num_threads() << " thread(s) per rank"
              << (f.async_save ? ", checkpoints written in the background" : "") << "\n";
  return fit_and_report(trainer, train, test, f);
}

}  // namespace
}  // namespace weft::examples

int main(int argc, char** argv) {
  return weft::examples::run_main("fashion_mnist_hybrid", [&] {
    auto flags = weft::examples::parse(argc, argv);
    return flags ? weft::examples::run(*flags) : 0;
  });
}
