// fashion_mnist_pipe: the Fashion-MNIST example (examples/fashion_mnist.cc)
// trained pipeline-parallel: the model's layers split across MPI ranks by
// --balance and fed as --chunks micro-batches per step (parallel/pipe/pipe.h).
//
//   ./bazelw build //examples:fashion_mnist_pipe
//   mpirun --allow-run-as-root --oversubscribe -np 2 bazel-bin/examples/fashion_mnist_pipe \
//       --schedule 1f1b --chunks 4
//
// Every rank builds the model from --seed and keeps its stages' layers; every
// rank reads the dataset and walks the same shuffled batches (the input is used
// on stage 0's rank, the labels on the last stage's). A step is the whole
// batch: its loss is the mean over the batch and each rank's SGD updates its
// own layers, so training is the single-process example's with the batch
// split into micro-batches (same learning rate, momentum, weight decay and
// per-epoch cosine schedule). --schedule gpipe, 1f1b, interleaved (--virtual
// stages per rank) or zb (ZB-H1: backward split into B, the input gradient, and
// W, the weight gradients, which fill the drain bubble; one stage per rank).
// Evaluation runs the forward-only schedule. Rank 0 prints progress and
// `test_accuracy=0.XXXX`, writes metrics and the plot, the schedule's text
// chart with the simulator's prediction from the last step's measured F, B
// and W times (--chart), and that step's measured timeline as Chrome-trace
// JSON (--trace; chrome://tracing or Perfetto).
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>

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
#include "parallel/context.h"
#include "parallel/mpi/process_group_mpi.h"
#include "parallel/partition/plan.h"
#include "parallel/partition/profile.h"
#include "parallel/pipe/chart.h"
#include "parallel/pipe/pipe.h"
#include "parallel/pipe/simulate.h"
#include "parallel/pipe/trace.h"

namespace weft::examples {
namespace {

namespace pp = parallel::pipe;

// The shared training flags (examples/train_flags.h; no --save/--resume yet)
// and this example's own.
struct Flags : TrainFlags {
  int chunks = 4;
  std::string balance = kBalanceAuto;  // "a,b,...": layers per stage; auto: measured and planned
  std::string schedule = "1f1b";
  int virtual_stages = 0;  // 0: 2 for interleaved, else 1
  std::string checkpoint = "except_last";
  std::string chart = "fashion_mnist_pipe_schedule.txt";
  std::string trace = "fashion_mnist_pipe_trace.json";
};

std::optional<Flags> parse(int argc, char** argv) {
  Flags f;
  FlagParser p("usage: mpirun [-np N] fashion_mnist_pipe [flags]");
  add_train_flags(p, f,
                  {.program = "fashion_mnist_pipe",
                   .batch_size_help = "batch size (one pipeline step)",
                   .multi_process = true,
                   .checkpoints = false});
  p.add("--chunks N", &f.chunks, "micro-batches per step");
  add_balance_flag(p, &f.balance, "layers per stage");
  p.add_choice("--schedule", &f.schedule, {"gpipe", "1f1b", "interleaved", "zb"}, "pipeline schedule")
      .add("--virtual N", &f.virtual_stages, "stages per rank", "2 for interleaved, else 1")
      .add_choice("--checkpoint", &f.checkpoint, {"always", "except_last", "never"}, "activation checkpointing")
      .add("--chart PATH", &f.chart, "the schedule's text chart, simulated from the last step's measured times")
      .add("--trace PATH", &f.trace, "the last step's measured timeline (Chrome-trace JSON)");
  if (!p.parse(argc, argv, std::cout)) return std::nullopt;
  resolve_train_flags(f, {&f.chart, &f.trace});
  check_balance_flag(f.balance, virtual_stages_for(f.virtual_stages, f.schedule), f.schedule);
  return f;
}

// --balance auto (one stage per rank): rank 0 measures every layer on one
// micro-batch of the first training images, every rank plans the same
// balance (parallel/partition) and rank 0 prints the partition table.
std::vector<int> auto_balance(nn::Sequential& model, const io::TensorDataset& train, const Flags& f,
                              pp::ScheduleKind schedule, parallel::ProcessGroup& g) {
  if (g.size() == 1) return {static_cast<int>(model.size())};
  Tensor sample;  // (rows, 1, 28, 28), normalized as the loader does
  if (g.rank() == 0)
    sample = (train.data().narrow(0, 0, std::max<int64_t>(1, f.batch_size / f.chunks)) - 0.2860) / 0.3530;
  parallel::partition::ProfileOptions profile;
  profile.optimizer_state_factor = f.momentum != 0 ? 1.0 : 0.0;  // SGD's momentum buffer
  const auto layers = parallel::partition::profile_on_root(model, nn::Tensors{sample}, g, 0, profile);
  parallel::partition::PlanOptions options;
  options.stages = g.size();
  options.microbatches = f.chunks;
  options.schedule = schedule;
  const parallel::partition::PartitionPlan plan = parallel::partition::plan_partition(layers, options);
  parallel::partition::print_partition_table(layers, plan, g, std::cout);
  return plan.balance;
}

std::shared_ptr<io::TensorDataset> head(const io::TensorDataset& ds, int64_t n) {
  return std::make_shared<io::TensorDataset>(ds.data().narrow(0, 0, n), ds.targets().narrow(0, 0, n));
}

// Test loss and accuracy: the forward-only schedule; the last stage's rank
// scores, the sums are allreduced.
std::pair<double, double> evaluate(pp::Pipe& pipe, io::DataLoader& loader, parallel::ProcessGroup& g) {
  for (auto& layer : pipe) layer->eval();
  double loss_sum = 0, correct = 0, seen = 0;
  for (auto& batch : loader) {
    if (batch.data.size(0) < pipe.options().chunks) continue;  // too few rows to split (every rank skips it)
    Tensor logits = pipe.forward(batch.data);                  // (B, 10) on the last stage's rank
    if (!logits.defined()) continue;
    loss_sum += cross_entropy(logits, batch.target, Reduction::Sum).item<double>();
    correct += static_cast<double>((argmax(logits, 1) == batch.target).sum().item<int64_t>());
    seen += static_cast<double>(batch.data.size(0));
  }
  for (auto& layer : pipe) layer->train();
  auto s = allreduce_sum(g, loss_sum, correct, seen);
  return {s[0] / std::max(s[2], 1.0), s[1] / std::max(s[2], 1.0)};
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  WEFT_CHECK(out.good(), "cannot write ", path);
  out << text;
  WEFT_CHECK(out.good(), "writing ", path, " failed");
}

int run(const Flags& f) {
  parallel::DistributedContext ctx;
  auto& g = ctx.world();
  const int rank = ctx.rank(), world = ctx.size();
  const bool lead = rank == 0;
  const int threads = resolve_threads(f.threads, parallel::local_size());
  set_num_threads(threads);

  auto full_train = io::load_fashion_mnist(f.data, true);
  auto full_test = io::load_fashion_mnist(f.data, false);
  const int64_t n_train = f.limit_train > 0 ? std::min(f.limit_train, full_train.size()) : full_train.size();
  const int64_t n_test = f.limit_test > 0 ? std::min(f.limit_test, full_test.size()) : full_test.size();
  auto normalize = [](const io::Example& e, Generator&) { return io::Example{(e.data - 0.2860) / 0.3530, e.target}; };
  // The same batches in the same order on every rank.
  io::DataLoader train(head(full_train, n_train), {f.batch_size, true, f.seed, false, f.workers, 2}, normalize);
  io::DataLoader test(head(full_test, n_test), {1000, false, 0, false, f.workers, 2}, normalize);

  manual_seed(f.seed);
  std::shared_ptr<nn::Sequential> model = f.model == "cnn" ? fashion_cnn() : fashion_mlp();
  pp::PipeOptions po;
  po.chunks = f.chunks;
  po.schedule = pp::parse_schedule_kind(f.schedule);
  po.virtual_stages = f.virtual_stages > 0 ? f.virtual_stages : (f.schedule == "interleaved" ? 2 : 1);
  po.checkpoint = pp::parse_checkpoint_mode(f.checkpoint);
  const std::vector<int> balance =
      f.balance == kBalanceAuto ? auto_balance(*model, full_train, f, po.schedule, g) : parse_balance(f.balance);
  pp::Pipe pipe(model, balance, ctx.world_ptr(), po);
  pipe.runner().set_record_trace(true);
  pipe.runner().set_keep_output(true);
  const int last_rank = pipe.schedule().rank_of(pipe.schedule().num_stages() - 1);
  optim::SGD opt(pipe.parameters(), {f.lr, f.momentum, 0.0, f.weight_decay, false});
  optim::CosineAnnealingLR sched(opt, f.epochs);
  if (lead) {
    std::remove(f.metrics.c_str());
    std::ostringstream b;
    for (size_t i = 0; i < balance.size(); ++i) b << (i ? "," : "") << balance[i];
    std::cerr << "fashion_mnist_pipe: " << f.model << " (" << model->size() << " layers) over " << world
              << " ranks, balance " << b.str() << ", schedule " << pipe.schedule().name << ", " << f.chunks
              << " micro-batches of a " << f.batch_size << "-image batch, checkpoint " << f.checkpoint << ", "
              << n_train << " training / " << n_test << " test images, " << threads << " thread(s) per rank\n";
  }

  std::vector<EpochMetrics> history;
  double last_step_secs = 0;
  for (int64_t epoch = 0; epoch < f.epochs; ++epoch) {
    train.set_epoch(epoch);
    ProgressBar bar("epoch " + std::to_string(epoch + 1) + "/" + std::to_string(f.epochs), train.num_batches(),
                    f.progress && lead);
    auto t0 = std::chrono::steady_clock::now();
    double loss_sum = 0, correct = 0, seen = 0;
    int64_t b = 0;
    for (auto& batch : train) {
      const int64_t n = batch.data.size(0);
      if (n < f.chunks) continue;  // too few rows to split (every rank skips it)
      auto s0 = std::chrono::steady_clock::now();
      opt.zero_grad();
      const double loss =
          pipe.step(batch.data, batch.target, [](const Tensor& out, const Tensor& y) { return cross_entropy(out, y); });
      opt.step();
      last_step_secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
      loss_sum += loss * static_cast<double>(n);
      if (rank == last_rank)
        correct += static_cast<double>((argmax(pipe.runner().last_output(), 1) == batch.target).sum().item<int64_t>());
      seen += static_cast<double>(n);
      bar.update(++b, loss_sum / seen, 0, static_cast<int64_t>(seen));
    }
    bar.finish();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    auto tr = allreduce_sum(g, 0, correct, 0);  // train accuracy counted on the last stage's rank
    sched.step();
    auto [test_loss, test_acc] = evaluate(pipe, test, g);
    EpochMetrics m{epoch + 1, loss_sum / seen, tr[1] / seen, test_loss, test_acc, seen / secs, secs};
    history.push_back(m);
    if (!lead) continue;
    std::printf("epoch %lld/%lld: train_loss=%.6f train_acc=%.4f test_loss=%.4f test_acc=%.4f (%.1fs, %.0f img/s)\n",
                static_cast<long long>(epoch + 1), static_cast<long long>(f.epochs), m.train_loss, m.train_accuracy,
                m.test_loss, m.test_accuracy, secs, m.images_per_second);
    std::fflush(stdout);
    append_metrics_jsonl(f.metrics, m);
    write_svg_plot(
        f.plot, history,
        "weft pipeline (" + std::to_string(world) + " ranks, " + pipe.schedule().name + "): Fashion-MNIST " + f.model);
  }
  // The last training step: measured timeline, and the simulator's prediction from its action times.
  std::vector<pp::TraceEvent> events = pp::gather_trace(g, pipe.runner().last_trace());
  Tensor step_time = full({1}, last_step_secs, DType::Float64);
  g.allreduce(step_time, {parallel::ReduceOp::Max})->wait();
  if (lead) {
    pp::Simulation sim = pp::simulate(pipe.schedule(), pp::measured_costs(pipe.schedule(), events));
    std::ostringstream chart;
    chart << pp::text_chart(pipe.schedule(), sim) << "measured step " << step_time.item<double>() * 1e3
          << " ms (optimizer included); simulated from the measured F, B and W times " << sim.makespan * 1e3
          << " ms, bubble " << pp::format_percent(sim.bubble_fraction) << "\n";
    write_file(f.chart, chart.str());
    write_file(f.trace, pp::chrome_trace_json(events));
    std::cerr << "fashion_mnist_pipe: metrics in " << f.metrics << ", plot in " << f.plot << ", schedule chart in "
              << f.chart << ", last step's trace in " << f.trace << "\n";
  }
  g.barrier()->wait();
  if (lead) std::printf("test_accuracy=%.4f\n", history.empty() ? 0.0 : history.back().test_accuracy);
  return 0;
}

}  // namespace
}  // namespace weft::examples

int main(int argc, char** argv) {
  return weft::examples::run_main("fashion_mnist_pipe", [&] {
    auto flags = weft::examples::parse(argc, argv);
    return flags ? weft::examples::run(*flags) : 0;
  });
}
