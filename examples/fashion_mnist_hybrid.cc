// fashion_mnist_hybrid: the Fashion-MNIST example (examples/fashion_mnist.cc)
// trained with pipeline x data parallelism: DistributedModel
// (parallel/hybrid/distributed_model.h) splits the model into --pp pipeline
// stages and replicates the pipeline --dp times over MPI ranks.
//
//   ./bazelw build //examples:fashion_mnist_hybrid
//   mpirun --allow-run-as-root --oversubscribe -np 4 bazel-bin/examples/fashion_mnist_hybrid --pp 2 --dp 2
//
// --pp x --dp must be the world size (--dp defaults to world size / --pp);
// rank = replica * pp + stage (parallel/hybrid/grid.h). Every rank builds the
// model from --seed; partitioning happens before training: with --balance auto
// (the default) world rank 0 measures every layer on the first micro-batch and
// every rank plans the same balance, and rank 0 prints the partition table
// (parallel/partition/plan.h) before anything else; --balance a,b,... gives
// the layers per stage. The optimizer (SGD with momentum and weight decay,
// learning rate cosine-annealed per epoch, as the single-process example) is
// built over each rank's own stage in a post-partition hook.
//
// Data: a GlobalBatchSampler (parallel/sampler.h) per replica: global batch k
// of epoch e is batch k of the single-process example's (seed, e) shuffle,
// whatever the grid, and replica d trains on its d-th slice (--batch-size /
// --dp rows; --batch-size must be a multiple of --dp); the ranks of one
// pipeline read the same slice (the input is used on the first stage, the
// labels on the last). Each step runs --chunks micro-batches with --schedule;
// DistributedModel averages each stage's gradients over its replicas, so a step
// applies the gradient of the mean loss over the global batch, and 1 x 1,
// 2 x 2 and 1 x 4 grids train alike (to float summation order). A global batch
// that would give some replica fewer rows than --chunks is skipped on every
// rank. Evaluation runs the forward-only schedule, each replica on a
// contiguous slice of the test set, scored on the last stage's ranks; the sums
// are allreduced. Rank 0 shows progress, writes metrics and the plot, and
// prints `test_accuracy=0.XXXX` last.
//
// Optimizer: a DistributedOptimizer (parallel/hybrid/distributed_optimizer.h)
// over each rank's stages; --zero shards its state over the data-parallel
// replicas (ZeRO-1). Checkpoints (parallel/checkpoint/): --save DIR writes a
// partitioned checkpoint after every epoch into DIR/step-<step> (every rank
// writes its part; --full-checkpoint: rank 0 writes the whole model in one
// file; --async-save: written by a background thread while the next epoch
// trains; --keep-last N), and --resume DIR continues from the latest one in
// DIR on whatever --pp / --dp / --zero this run has: the model, optimizer
// state, LR schedule, RNG states, epoch and position in the data come back,
// so the per-epoch lines continue those of an uninterrupted run. A
// checkpoint whose shard is missing, truncated or corrupted is refused with
// an error naming the file. --stop-after-epoch K stops as if interrupted.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "core/autograd_meta.h"
#include "core/nn_ops.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "examples/flags.h"
#include "examples/grid_flags.h"
#include "examples/models.h"
#include "examples/rank_data.h"
#include "examples/train_flags.h"
#include "examples/train_report.h"
#include "io/dataloader.h"
#include "io/fashion_mnist.h"
#include "optim/lr_scheduler.h"
#include "optim/sgd.h"
#include "parallel/checkpoint/checkpointer.h"
#include "parallel/checkpoint/load.h"
#include "parallel/context.h"
#include "parallel/hybrid/distributed_model.h"
#include "parallel/hybrid/distributed_optimizer.h"
#include "parallel/mpi/process_group_mpi.h"
#include "parallel/sampler.h"

namespace weft::examples {
namespace {

namespace pp = parallel::pipe;

// The shared training flags (examples/train_flags.h; batch_size is the
// global batch; --save/--resume registered here: directories of partitioned
// checkpoints) and this example's own.
struct Flags : TrainFlags, GridFlags {
  bool zero = false;
  int keep_last = kDefaultKeepLast;
  bool async_save = false;
  bool full_checkpoint = false;
  int64_t stop_after = 0;
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
  p.add_switch("--async-save", &f.async_save, true, "write checkpoints in the background while training goes on")
      .add_switch("--full-checkpoint", &f.full_checkpoint, true,
                  "rank 0 writes the whole model in one file (model.safetensors) instead of each stage its part")
      .add("--stop-after-epoch K", &f.stop_after, "stop after epoch K as if interrupted (to test --resume)", "none");
  if (!p.parse(argc, argv, std::cout)) return std::nullopt;
  resolve_train_flags(f);
  check_grid_flags(f);
  check_keep_last_flag(f.keep_last);
  return f;
}

void set_training(parallel::hybrid::DistributedModel& dm, bool on) {
  for (auto& stage : dm.local_modules()) {
    if (on) stage->train();
    else stage->eval();
  }
}

// Test loss and accuracy: each replica runs the forward-only schedule on its
// slice of the test set, its last stage's rank scores, the sums are allreduced
// over the world (every image is scored once).
std::pair<double, double> evaluate(parallel::hybrid::DistributedModel& dm, io::DataLoader& loader, int chunks,
                                   parallel::ProcessGroup& world) {
  set_training(dm, false);
  double loss_sum = 0, correct = 0, seen = 0;
  for (auto& batch : loader) {
    if (batch.data.size(0) < chunks) continue;  // too few rows to split (the replica's ranks all skip it)
    Tensor logits = dm.forward(batch.data);     // (B, 10) on the last stage's rank
    if (!logits.defined()) continue;
    loss_sum += cross_entropy(logits, batch.target, Reduction::Sum).item<double>();
    correct += static_cast<double>((argmax(logits, 1) == batch.target).sum().item<int64_t>());
    seen += static_cast<double>(batch.data.size(0));
  }
  set_training(dm, true);
  auto s = allreduce_sum(world, loss_sum, correct, seen);
  return {s[0] / std::max(s[2], 1.0), s[1] / std::max(s[2], 1.0)};
}

int run(const Flags& f) {
  parallel::DistributedContext ctx;
  auto& g = ctx.world();
  const int rank = ctx.rank(), world = ctx.size();
  const bool lead = rank == 0;
  const int dp = grid_dp(f.pp, f.dp, world);
  WEFT_CHECK(f.batch_size % dp == 0, "--batch-size ", f.batch_size, " does not divide among --dp ", dp,
             " replicas: give a multiple of ", dp);
  WEFT_CHECK(f.batch_size / dp >= f.chunks, "--batch-size ", f.batch_size, " over --dp ", dp, " replicas leaves ",
             f.batch_size / dp, " rows per replica, fewer than the ", f.chunks, " micro-batches of --chunks");
  const int virtual_stages = f.virtual_stages > 0 ? f.virtual_stages : (f.schedule == "interleaved" ? 2 : 1);
  WEFT_CHECK(f.balance != "auto" || virtual_stages == 1, "--balance auto places one stage per rank; with ",
             virtual_stages, " stages per rank (--schedule ", f.schedule, ", --virtual) give --balance A,B,... (",
             f.pp * virtual_stages, " entries)");
  const int threads = resolve_threads(f.threads, parallel::local_size());
  set_num_threads(threads);

  auto full_train = io::load_fashion_mnist(f.data, true);
  auto full_test = io::load_fashion_mnist(f.data, false);
  const int64_t n_train = f.limit_train > 0 ? std::min(f.limit_train, full_train.size()) : full_train.size();
  const int64_t n_test = f.limit_test > 0 ? std::min(f.limit_test, full_test.size()) : full_test.size();
  auto normalize = [](const io::Example& e, Generator&) { return io::Example{(e.data - 0.2860) / 0.3530, e.target}; };

  manual_seed(f.seed);
  std::shared_ptr<nn::Sequential> model = f.model == "cnn" ? fashion_cnn() : fashion_mlp();
  const int64_t layers = static_cast<int64_t>(model->size());
  parallel::hybrid::DistributedModelOptions o;
  o.pp = f.pp;
  o.dp = dp;
  o.pipe.chunks = f.chunks;
  o.pipe.schedule = pp::parse_schedule_kind(f.schedule);
  o.pipe.virtual_stages = virtual_stages;
  if (f.balance != "auto") o.balance = parse_balance(f.balance, "give auto or layers per stage, e.g. 6,4");
  o.optimizer_state_factor = f.momentum != 0 ? (f.zero ? 1.0 / dp : 1.0) : 0;  // SGD's momentum buffer
  o.shard_optimizer_state = f.zero;
  parallel::hybrid::DistributedModel dm(model, ctx.world_ptr(), o);  // collective: the grid's groups
  model.reset();
  const int replica = dm.dp_rank();
  const bool scorer =
      dm.pp_rank() == f.pp - 1;  // the last stage (with --virtual too: stage S-1 is on pipeline rank pp-1)

  // This rank's optimizer, over its own stages' parameters (built at
  // partitioning; with --zero its state sharded over the replicas). A rank
  // whose stages hold only parameter-free layers (e.g. a ReLU and a pooling
  // stage) has none, and no schedule.
  parallel::hybrid::DistributedOptimizer opt(dm, [&](const optim::NamedParameters& params) {
    return std::make_unique<optim::SGD>(params, optim::SGDOptions{f.lr, f.momentum, 0.0, f.weight_decay, false});
  });
  std::unique_ptr<optim::CosineAnnealingLR> sched;
  dm.register_post_partition_hook([&](parallel::hybrid::DistributedModel& m) {
    if (opt.has_parameters()) sched = std::make_unique<optim::CosineAnnealingLR>(opt.inner(), f.epochs);
    m.pipe().runner().set_keep_output(true);  // the last stage's outputs, for the training accuracy
  });

  // This replica's slices: of every global batch (the single-process example's
  // shuffle) and of the test set.
  auto train_ds = slice_rows(full_train, 0, n_train);
  auto make_sampler = [&](int64_t start_batch) {
    return std::make_shared<parallel::GlobalBatchSampler>(
        n_train, f.batch_size, dp, replica,
        parallel::GlobalBatchSamplerOptions{.shuffle = true, .seed = f.seed, .start_batch = start_batch});
  };
  auto make_loader = [&](std::shared_ptr<parallel::GlobalBatchSampler> s) {
    return std::make_unique<io::DataLoader>(
        train_ds, io::DataLoaderOptions{s->local_batch(), false, f.seed, false, f.workers, 2}, s, normalize);
  };
  auto sampler = make_sampler(0);
  auto train_loader = make_loader(sampler);
  io::DataLoader test(slice_rows(full_test, n_test * replica / dp, n_test * (replica + 1) / dp),
                      {1000, false, 0, false, f.workers, 2}, normalize);

  // Partition now, so that the table comes first: world rank 0 measures on its first batch.
  Tensor sample;
  if (lead) {
    train_loader->set_epoch(0);
    sample = train_loader->next()->data;
    train_loader->reset();
  }
  dm.partition(sample);
  std::cout << std::flush;

  // Resume: every rank loads its part of the latest checkpoint in --resume.
  namespace ck = parallel::checkpoint;
  const ck::Stateful state{&dm, &opt, sched.get()};
  std::vector<EpochMetrics> history;
  int64_t start_epoch = 0, step = 0;
  if (!f.resume.empty()) {
    const ck::TrainingState ts = ck::load(f.resume, state);
    start_epoch = ts.epoch;
    step = ts.step;
    if (ts.batch > 0) {  // mid-epoch: that epoch's remaining global batches first
      sampler = make_sampler(ts.batch);
      train_loader = make_loader(sampler);
    }
    for (int64_t e = 1; e <= start_epoch; ++e) {
      auto it = ts.metadata.find("history." + std::to_string(e));
      if (it != ts.metadata.end()) history.push_back(decode_metrics(e, it->second));
    }
    if (lead)
      std::cerr << "fashion_mnist_hybrid: resumed from " << f.resume << " (epoch " << start_epoch << ", global batch "
                << ts.batch << ", step " << step << ")\n";
  } else if (lead) {
    std::remove(f.metrics.c_str());
  }
  std::unique_ptr<ck::Checkpointer> saver;
  if (!f.save.empty())
    saver = std::make_unique<ck::Checkpointer>(
        f.save, ctx.world_ptr(),
        ck::SaveOptions{f.full_checkpoint ? ck::Kind::kFull : ck::Kind::kPartial, f.keep_last, f.async_save});
  if (lead) {
    std::cerr << "fashion_mnist_hybrid: " << f.model << " (" << layers << " layers) as pp " << f.pp << " x dp " << dp
              << " on " << world << " ranks, balance " << join_ints(dm.balance())
              << (f.balance == "auto" ? (f.pp > 1 ? " (measured)" : " (one stage)") : " (given)") << ", schedule "
              << dm.pipe().schedule().name << ", " << dm.pipe().options().chunks << " micro-batches of a "
              << sampler->local_batch() << "-image replica batch (global " << f.batch_size << "), " << n_train
              << " training / " << n_test << " test images, " << threads << " thread(s) per rank\n";
  }

  const auto loss_fn = [](const Tensor& out, const Tensor& y) { return cross_entropy(out, y); };
  for (int64_t epoch = start_epoch; epoch < f.epochs; ++epoch) {
    if (epoch > start_epoch && sampler->start_batch() > 0) {  // after a mid-epoch resume: whole epochs again
      sampler = make_sampler(0);
      train_loader = make_loader(sampler);
    }
    io::DataLoader& train = *train_loader;
    train.set_epoch(epoch);
    ProgressBar bar("epoch " + std::to_string(epoch + 1) + "/" + std::to_string(f.epochs), train.num_batches(),
                    f.progress && lead);
    auto t0 = std::chrono::steady_clock::now();
    double loss_sum = 0, correct = 0, seen = 0;
    int64_t k = sampler->start_batch();  // the global batch
    for (auto& batch : train) {
      const std::vector<int64_t> shares = sampler->shares(k);
      const int64_t rows = sampler->batch_rows(k);
      ++k;
      if (*std::min_element(shares.begin(), shares.end()) < f.chunks) continue;  // every rank skips it
      opt.zero_grad();
      const double loss = dm.step(batch.data, batch.target, loss_fn);  // mean over the global batch
      opt.step();
      ++step;
      loss_sum += loss * static_cast<double>(rows);
      if (scorer)
        correct +=
            static_cast<double>((argmax(dm.pipe().runner().last_output(), 1) == batch.target).sum().item<int64_t>());
      seen += static_cast<double>(rows);
      bar.update(k - sampler->start_batch(), loss_sum / seen, 0, static_cast<int64_t>(seen));
    }
    bar.finish();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    auto tr = allreduce_sum(g, 0, correct, 0);  // each replica's last stage counts its rows
    if (sched) sched->step();
    auto [test_loss, test_acc] = evaluate(dm, test, f.chunks, g);
    EpochMetrics m{
        epoch + 1, loss_sum / std::max(seen, 1.0), tr[1] / std::max(seen, 1.0), test_loss, test_acc, seen / secs, secs};
    history.push_back(m);
    if (lead) {
      std::printf("epoch %lld/%lld: train_loss=%.6f train_acc=%.4f test_loss=%.4f test_acc=%.4f (%.1fs, %.0f img/s)\n",
                  static_cast<long long>(epoch + 1), static_cast<long long>(f.epochs), m.train_loss, m.train_accuracy,
                  m.test_loss, m.test_accuracy, secs, m.images_per_second);
      std::fflush(stdout);
      append_metrics_jsonl(f.metrics, m);
      write_svg_plot(f.plot, history,
                     "weft pipeline x data parallel (pp " + std::to_string(f.pp) + " x dp " + std::to_string(dp) +
                         ", " + dm.pipe().schedule().name + "): Fashion-MNIST " + f.model);
    }
    if (saver) {  // every rank: its part of the epoch's checkpoint (the next epoch, from its first batch)
      ck::TrainingState ts{step, epoch + 1, 0, {}};
      for (const auto& h : history) ts.metadata["history." + std::to_string(h.epoch)] = encode_metrics(h);
      const std::string dir = saver->save(state, ts);
      if (lead)
        std::cerr << "fashion_mnist_hybrid: checkpoint " << dir << " (" << (f.full_checkpoint ? "full" : "partial")
                  << (f.async_save ? ", written in the background" : "") << "): training held up "
                  << saver->last_blocking_s() * 1e3 << " ms\n";
    }
    if (f.stop_after > 0 && epoch + 1 >= f.stop_after) {
      if (lead) std::cerr << "fashion_mnist_hybrid: stopping after epoch " << epoch + 1 << " (--stop-after-epoch)\n";
      break;
    }
  }
  if (saver) {
    saver->wait();  // the last background save is committed (or its error thrown) before the end
    if (lead && f.async_save)
      std::cerr << "fashion_mnist_hybrid: last checkpoint committed after " << saver->last_total_s() * 1e3 << " ms\n";
  }
  g.barrier()->wait();  // rank 0's files are complete before anyone exits
  if (lead && (f.stop_after == 0 || f.stop_after >= f.epochs)) {
    std::cerr << "fashion_mnist_hybrid: metrics in " << f.metrics << ", plot in " << f.plot << "\n";
    std::printf("test_accuracy=%.4f\n", history.empty() ? 0.0 : history.back().test_accuracy);
  }
  return 0;
}

}  // namespace
}  // namespace weft::examples

int main(int argc, char** argv) {
  return weft::examples::run_main("fashion_mnist_hybrid", [&] {
    auto flags = weft::examples::parse(argc, argv);
    return flags ? weft::examples::run(*flags) : 0;
  });
}
